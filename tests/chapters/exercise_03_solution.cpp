// Right answers to exercises 03.1 to 03.3 (chapters/03_vectorized_qkv/exercise/), written
// without the library's attention, column_attention or linear_forward, so that the course's
// suite can prove that tests/chapters/exercise_03.cpp passes right answers as well as failing
// the stubs. The page shows each marked region as its worked answer.
#include "attention_rows.hpp"
#include "column_attention.hpp"
#include "scaled_scores.hpp"

#include <cmath>

// 03.1: one product per matrix, the softmax down every column, then V A'.
// [answer_03_1]
attn::MatrixD exercise_column_attention(const attn::MatrixD& W_q, const attn::MatrixD& W_k,
                                        const attn::MatrixD& W_v, const attn::MatrixD& X) {
  const attn::MatrixD Q = W_q * X;                    // [d_k x n], column i = q^i
  const attn::MatrixD K = W_k * X;                    // [d_k x n]
  const attn::MatrixD V = W_v * X;                    // [d_v x n]
  attn::MatrixD A_prime = K.transpose() * Q;          // [n x n], A(j, i) = k^j . q^i
  for (attn::Index i = 0; i < A_prime.cols(); ++i) {  // column i: query i's scores
    auto column = A_prime.col(i);
    column = (column.array() - column.maxCoeff()).exp().matrix();  // the max keeps exp <= 1
    column /= column.sum();
  }
  return V * A_prime;  // [d_v x n], column i = y^i
}
// [answer_03_1]

// 03.2: project with the transposes (tokens are rows), then one product and the scale.
// [answer_03_2]
attn::MatrixD exercise_scaled_scores(const attn::MatrixD& X, const attn::MatrixD& W_q,
                                     const attn::MatrixD& W_k) {
  const attn::MatrixD Q = X * W_q.transpose();  // [n x d_in] [d_in x d_k] = [n x d_k]
  const attn::MatrixD K = X * W_k.transpose();  // [n x d_k]
  const double d_k = static_cast<double>(W_q.rows());
  return Q * K.transpose() / std::sqrt(d_k);  // [n x n], row i = query i's scores
}
// [answer_03_2]

// 03.3: the scores, the softmax along every row, then the weights times V.
// [answer_03_3]
attn::MatrixD exercise_attention_rows(const attn::MatrixD& Q, const attn::MatrixD& K,
                                      const attn::MatrixD& V) {
  const double d_k = static_cast<double>(Q.cols());
  attn::MatrixD weights = Q * K.transpose() / std::sqrt(d_k);  // [n_q x n_k], scores first
  for (attn::Index i = 0; i < weights.rows(); ++i) {           // row i: query i over the keys
    auto row = weights.row(i);
    row = (row.array() - row.maxCoeff()).exp().matrix();  // the max keeps exp <= 1
    row /= row.sum();
  }
  return weights * V;  // [n_q x n_k] [n_k x d_v] = [n_q x d_v]
}
// [answer_03_3]
