// Exercise 08.2: the position-wise feed-forward network, written by hand. The body is yours to
// write, in position_wise_ffn.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// The feed-forward sub-layer of the transformer block on every row (token) of x [n x d_model]:
///
///     FFN(x) = ReLU(x W1^T + b1) W2^T + b2,        ReLU(v) = max(v, 0), entry by entry
///
/// with the weights as the library (and PyTorch's nn.Linear) stores them, one row per output
/// feature: W1 [d_ff x d_model] and b1 [1 x d_ff] widen each token to d_ff features, W2
/// [d_model x d_ff] and b2 [1 x d_model] bring it back. Returns FFN(x) [n x d_model]; nothing
/// given is changed.
attn::MatrixD exercise_position_wise_ffn(const attn::MatrixD& x, const attn::MatrixD& W1,
                                         const attn::RowVectorD& b1, const attn::MatrixD& W2,
                                         const attn::RowVectorD& b2);
