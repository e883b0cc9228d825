// Exercise 06.3: multi-head attention from the projections. The body is yours to write, in
// multi_head_out.cpp beside this file; README.md says how to check it.
#pragma once

#include "head_attention.hpp"

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 25 minutes.
///
/// The layer's output from the projections Q [n_q x d_model], K and V [n_k x d_model] of all
/// `heads` heads, as attn::multi_head_forward computes it after its three input projections:
///
///     head_h = softmax(Q_h K_h^T / sqrt(d_k)) V_h        h = 0 .. heads - 1   [n_q x d_k]
///     concat = (head_0 | head_1 | ... | head_{heads-1})  head h in columns
///                                                        [h d_k, (h + 1) d_k) [n_q x d_model]
///     out    = concat W_O^T + b_O                                             [n_q x d_model]
///
/// with d_k = d_model / heads, W_O [d_model x d_model] stored [out x in] as nn.Linear and
/// attn::Linear store it (so out(t, o) = sum_c concat(t, c) W_O(o, c) + b_O(o)), and b_O
/// [d_model], one bias per output feature. Your exercise_head_attention (06.2) computes head_h.
attn::MatrixD exercise_multi_head_out(const attn::MatrixD& Q, const attn::MatrixD& K,
                                      const attn::MatrixD& V, attn::Index heads,
                                      const attn::MatrixD& W_O, const attn::VectorD& b_O);
