// Exercise 08.1: LayerNorm over each row, written by hand. The body is yours to write, in
// layer_norm_rows.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// Normalises every row (token) r of x [n x d] over its own d features, as torch.nn.LayerNorm(d)
/// and attn::layer_norm_forward do:
///
///     mean_r  = (1/d) sum_c x(r, c)
///     var_r   = (1/d) sum_c (x(r, c) - mean_r)^2           the biased variance: 1/d, not 1/(d-1)
///     y(r, c) = (x(r, c) - mean_r) / sqrt(var_r + eps) * gamma(c) + beta(c)
///
/// gamma and beta [1 x d] (PyTorch's `weight` and `bias`) scale and shift each feature; eps > 0
/// sits inside the square root. Returns y [n x d]; x is not changed.
attn::MatrixD exercise_layer_norm_rows(const attn::MatrixD& x, const attn::RowVectorD& gamma,
                                       const attn::RowVectorD& beta, double eps);
