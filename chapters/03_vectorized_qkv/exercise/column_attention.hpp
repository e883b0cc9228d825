// Exercise 03.1: the notes' column form as four matrix products. The body is yours to write, in
// column_attention.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 20 minutes.
///
/// Self-attention in the column convention of notes 000 and 002 (the chapter's "The idea"):
/// tokens are columns, and each product makes every query, key, value or output at once,
///
///     Q = W_q X   [d_k x n]        K = W_k X   [d_k x n]        V = W_v X   [d_v x n]
///     A = K^T Q   [n x n]          A(j, i) = k^j . q^i, row = key, column = query
///     A' = softmax of every column of A   (column i, query i's weights, sums to 1)
///     Y = V A'    [d_v x n]        column i is y^i = sum_j A'(j, i) v^j
///
/// with X [d_in x n] (column i is the token x^i), W_q and W_k [d_k x d_in], W_v [d_v x d_in].
/// Unscaled, as the notes write it: no 1/sqrt(d_k). Returns Y [d_v x n].
attn::MatrixD exercise_column_attention(const attn::MatrixD& W_q, const attn::MatrixD& W_k,
                                        const attn::MatrixD& W_v, const attn::MatrixD& X);
