// Exercise 06.2: one head's attention. The body is yours to write, in head_attention.cpp
// beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 20 minutes.
///
/// Head h's output (h counted from 0) from the projections Q [n_q x d_model], K and V
/// [n_k x d_model] of all `heads` heads, with d_k = d_model / heads:
///
///     head_h = softmax(Q_h K_h^T / sqrt(d_k)) V_h                    [n_q x d_k]
///
/// where Q_h, K_h, V_h are the columns [h d_k, (h + 1) d_k) of Q, K, V (exercise 06.1) and the
/// softmax runs along each row: query i's weights over the n_k keys sum to 1. No mask: every
/// query reads every key. Row vectors, as the page: row i of Q_h is query i.
attn::MatrixD exercise_head_attention(const attn::MatrixD& Q, const attn::MatrixD& K,
                                      const attn::MatrixD& V, attn::Index heads, attn::Index h);
