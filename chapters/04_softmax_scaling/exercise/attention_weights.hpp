// Exercise 04.3: attention's weights, scaled and stable. The body is yours to write, in
// attention_weights.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 20 minutes.
///
/// The weights of scaled dot-product attention, in the course's row convention (one token per
/// row; query i's weights are row i):
///
///     W = softmax(Q K^T / sqrt(d_k)),   softmax along each row
///
/// Q [n_q x d_k] and K [n_k x d_k] (n_q, n_k, d_k >= 1, finite entries) give W [n_q x n_k]:
///
///     s_ij = q_i . k_j / sqrt(d_k),   m_i = max_l s_il,
///     W_ij = exp(s_ij - m_i) / sum_l exp(s_il - m_i)
///
/// with m_i the largest score of row i (of that row: rows far apart must not share one).
/// Every row of W sums to 1 and holds no NaN, even when the scores are in the thousands.
///
/// Why sqrt(d_k): for q and k with independent entries of mean 0 and variance 1,
/// var(q . k) = d_k, so q . k / sqrt(d_k) has variance 1 at every width (the page's step 4).
attn::MatrixD exercise_attention_weights(const attn::MatrixD& Q, const attn::MatrixD& K);
