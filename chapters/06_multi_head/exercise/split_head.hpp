// Exercise 06.1: one head's columns of a projection. The body is yours to write, in
// split_head.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 10 minutes.
///
/// Q [n x d_model] holds the queries (or keys, or values) of all `heads` heads side by side,
/// made by one big projection. Head h (counted from 0, as the code's column offsets count, so
/// h = 0 .. heads - 1) owns the contiguous block of d_k = d_model / heads columns
///
///     Q_h = columns [h d_k, (h + 1) d_k) of Q,        [n x d_k],
///
/// which is what Q.middleCols(h * d_k, d_k) views in the chapter. Returns that block as a new
/// [n x d_k] matrix; Q is not changed. heads divides d_model.
attn::MatrixD exercise_split_head(const attn::MatrixD& Q, attn::Index heads, attn::Index h);
