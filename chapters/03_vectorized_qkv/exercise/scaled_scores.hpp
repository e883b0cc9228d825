// Exercise 03.2: the row form's scaled scores, from the tokens and the weights. The body is
// yours to write, in scaled_scores.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// The scores of the row form (the paper's, PyTorch's and the library's), tokens as rows:
///
///     Q = X W_q^T   [n x d_k]      K = X W_k^T   [n x d_k]
///     S = Q K^T / sqrt(d_k)        [n x n],   S(i, j) = q_i . k_j / sqrt(d_k)
///
/// with X [n x d_in] (row i is token i) and W_q, W_k [d_k x d_in]: the chapter's matrices,
/// stored as the column form and as torch.nn.Linear store them, one row per output feature
/// (so the row form multiplies by their transpose, as chapter 03's row_form code does). Row i
/// of S is query i's scores over the keys, ready for a softmax along the row. Returns S [n x n].
attn::MatrixD exercise_scaled_scores(const attn::MatrixD& X, const attn::MatrixD& W_q,
                                     const attn::MatrixD& W_k);
