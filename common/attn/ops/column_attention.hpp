/// @file
/// Self-attention in the column convention of notes 000 and 002: tokens are columns.
///
///     X  [d_in x n]   column i is the input vector x^i
///     Q = W_q X       [d_k x n]   column i is q^i = W_q x^i
///     K = W_k X       [d_k x n]
///     V = W_v X       [d_v x n]
///     A = K^T Q       [n x n]     A(j, i) = alpha_{i,j} = k^j . q^i   (column i: query i)
///     A' = softmax(A) per column  so every column sums to 1
///     Y = V A'        [d_v x n]   column i is y^i = sum_j alpha'_{i,j} v^j
///
/// Two ways to compute the same thing: `*_loops` one vector at a time, as chapter 02 does it by
/// hand, and the matrix products of chapter 03. They agree exactly on small integers and to
/// float rounding otherwise (the products sum in another order, with fused multiply-adds).
///
/// Scaling: the notes' column-form slides have no 1/sqrt(d_k). It is offered here as an option
/// (ColumnOptions::scale), off by default, so chapters 02-03 reproduce the notes; chapter 04
/// shows why the row-form library function (attention.hpp) always scales by default.
///
/// Non-finite inputs follow attention.hpp's rules for a query without a mask (every key is
/// allowed here): a NaN or +inf score makes the query's column of A' and Y NaN, a -inf score
/// gives weight 0, and scores that are all -inf give NaN, not zeros.
///
/// Storage is the course's row-major attn::Matrix, so a column is strided. That is the price
/// of the notes' layout in this library; from chapter 04 on tokens are rows and contiguous.
#pragma once

#include "attn/core/matrix.hpp"

namespace attn {

struct ColumnOptions {
  bool scale = false;  ///< divide every score by sqrt(d_k) (the notes' column form does not)
};

/// Everything the column form computes, named as the notes name it. In self-attention
/// n_q = n_k = n; the attend functions below also take n_q queries against n_k keys.
struct ColumnAttention {
  Matrix Q;        ///< [d_k x n_q]  column i = q^i
  Matrix K;        ///< [d_k x n_k]  column j = k^j
  Matrix V;        ///< [d_v x n_k]  column j = v^j
  Matrix A;        ///< [n_k x n_q]  A(j, i) = alpha_{i,j}, the score of key j for query i
  Matrix A_prime;  ///< [n_k x n_q]  softmax of each column of A: query i's weights over keys
  Matrix Y;        ///< [d_v x n_q]  column i = y^i
};

/// The worked example of chapters 02 and 03. W_q and X are note 000's:
///
///     W_q = [1 0 0; 0 0 1]          x^1 = (1,0,2), x^2 = (3,2,1), x^3 = (3,0,0), x^4 = (2,9,6)
///     W_k = [0 -1/2 0; 1/2 1/4 0]   chosen so the weights are neither uniform nor one-hot
///     W_v = [1 0 0; 0 1 0]          v^i = the first two features of x^i
///
/// W_k and W_v are the course's (the note gives none); every entry is a multiple of 1/4, so
/// all products and sums up to the scores are exact in float.
struct ColumnExample {
  Matrix W_q, W_k;  ///< [2 x 3]
  Matrix W_v;       ///< [2 x 3]
  Matrix X;         ///< [3 x 4], column i = x^i
};
ColumnExample worked_example();

// ---- One vector at a time (chapter 02) ----------------------------------------------------------

/// Column i of the result is W x^i, each entry an explicit sum: [rows(W) x n].
Matrix project_loops(const Matrix& W, const Matrix& X);

/// A(j, i) = q^i . k^j (divided by sqrt(d_k) when opts.scale), one dot product at a time.
/// Q [d_k x n_q], K [d_k x n_k] -> A [n_k x n_q].
Matrix scores_loops(const Matrix& Q, const Matrix& K, const ColumnOptions& opts = {});

/// Y(:, i) = y^i = sum_j weights(j, i) v^j, one scaled vector added at a time.
/// V [d_v x n_k], weights [n_k x n_q] -> Y [d_v x n_q]. The weights need not sum to 1.
Matrix weighted_sum_loops(const Matrix& V, const Matrix& weights);

/// Attention for projections already made: A, A', Y from Q, K, V (Q, K, V are copied into
/// the result). Q [d_k x n_q], K [d_k x n_k], V [d_v x n_k].
ColumnAttention column_attend_loops(const Matrix& Q, const Matrix& K, const Matrix& V,
                                    const ColumnOptions& opts = {});

/// The whole layer, one vector at a time: W_q, W_k [d_k x d_in], W_v [d_v x d_in], X [d_in x n].
ColumnAttention column_attention_loops(const Matrix& W_q, const Matrix& W_k, const Matrix& W_v,
                                       const Matrix& X, const ColumnOptions& opts = {});

// ---- Matrix form (chapter 03) -------------------------------------------------------------------

/// A = K^T Q, A' = softmax_cols(A), Y = V A', as three matrix operations. Shapes as
/// column_attend_loops.
ColumnAttention column_attend(const Matrix& Q, const Matrix& K, const Matrix& V,
                              const ColumnOptions& opts = {});

/// Q = W_q X, K = W_k X, V = W_v X, then column_attend. Shapes as column_attention_loops.
ColumnAttention column_attention(const Matrix& W_q, const Matrix& W_k, const Matrix& W_v,
                                 const Matrix& X, const ColumnOptions& opts = {});

}  // namespace attn
