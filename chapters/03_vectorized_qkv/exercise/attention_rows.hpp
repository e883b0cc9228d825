// Exercise 03.3: scaled dot-product attention in matrix form, every query at once. The body is
// yours to write, in attention_rows.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 20 minutes.
///
/// What attn::attention computes, in the row convention (tokens are rows):
///
///     out = softmax(Q K^T / sqrt(d_k)) V        softmax along every row
///
/// with Q [n_q x d_k] (one query per row), K [n_k x d_k] (one key per row), V [n_k x d_v]
/// (one value per row); n_q may differ from n_k and d_v from d_k. The weights
/// softmax(Q K^T / sqrt(d_k)) are [n_q x n_k], row i query i's weights over the keys, summing
/// to 1. Returns out [n_q x d_v], row i = sum_j weights(i, j) v_j.
attn::MatrixD exercise_attention_rows(const attn::MatrixD& Q, const attn::MatrixD& K,
                                      const attn::MatrixD& V);
