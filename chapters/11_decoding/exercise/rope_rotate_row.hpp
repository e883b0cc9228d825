// Exercise 11.1: RoPE on one row, written by hand. The body is yours to write, in
// rope_rotate_row.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// x [1 x d] (d even) rotated as the token at position m: in the interleaved layout, pair i is
/// the features (2i, 2i + 1) = (x, y), and it turns by the angle m theta_i,
///
///     x' = x cos(m theta_i) - y sin(m theta_i)
///     y' = x sin(m theta_i) + y cos(m theta_i)          i = 0 .. d/2 - 1,
///
/// with theta [d/2] given. Returns the rotated row [1 x d]; x is not changed.
attn::MatrixD exercise_rope_rotate_row(const attn::MatrixD& x, attn::Index m,
                                       const attn::VectorD& theta);
