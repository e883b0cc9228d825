// Exercise 05.1: the padding masks of a batch, from its token ids. The body is yours to write,
// in padding_masks.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/ops/masks.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// The padding masks of a batch of B sentences, ids [B x n] (one sentence per row, every
/// sentence padded to n with the id pad_id): returns [B, n, n], one [n x n] mask per sentence,
/// in the course's convention true = query i MAY attend to key j,
///
///     masks[b](i, j) = (ids(b, j) != pad_id)       for every query i,
///
/// so a padded KEY (a column) is blocked for every query, and a padded query (a row) still
/// reads the real words. The padding may sit anywhere in a sentence, not only at its end.
/// What attn::padding_masks(ids, pad_id) returns.
attn::AllowedBatch exercise_padding_masks(const attn::TokenIds& ids, int pad_id);
