// Exercise 05.2: the causal mask. The body is yours to write, in causal_mask.cpp beside this
// file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/ops/masks.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 10 minutes.
///
/// The causal mask of a sequence of n tokens: [n x n], rows = queries, columns = keys, in the
/// course's convention true = query i MAY attend to key j,
///
///     allowed(i, j) = (j <= i),
///
/// the past and the token itself, never the future: the lower triangle and the diagonal.
/// What attn::causal_mask(n) returns.
attn::AllowedMask exercise_causal_mask(attn::Index n);
