// Exercise 03.2: the row form's scaled scores. Write the body of exercise_scaled_scores below,
// then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_03
//   ctest --test-dir build/release -R Exercise03Scores --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "scaled_scores.hpp"

attn::MatrixD exercise_scaled_scores(const attn::MatrixD& X, const attn::MatrixD& W_q,
                                     const attn::MatrixD& W_k) {
  // TODO: return S = Q K^T / sqrt(d_k) [n x n], with Q = X W_q^T and K = X W_k^T.
  //
  // Row i of X [n x d_in] is token i. W_q and W_k are [d_k x d_in], one row per output
  // feature (torch.nn.Linear's layout, and the column form's W_q). So the row form projects
  // with their transpose: Q = X W_q^T is [n x d_in] [d_in x d_k] = [n x d_k], and row i of Q
  // is q_i = W_q x_i written as a row. K alike. Then S(i, j) = q_i . k_j / sqrt(d_k): row i
  // holds query i's scores over the n keys.
  //
  // Two classic mistakes: K Q^T in place of Q K^T (the scores transposed: row i would be key
  // i's), and the wrong scale: d_k is the width of a query (W_q.rows()), not of a token
  // (d_in), and the factor is 1/sqrt(d_k), not 1/d_k. X W_q without the transpose is a third:
  // its inner sizes meet only when d_in = d_k, and then it gives other numbers.
  //
  // In Eigen: W_q.transpose() is a view, no copy; std::sqrt is in <cmath>; write
  // static_cast<double>(W_q.rows()) to turn the width into a double.

  static_cast<void>(W_q);  // delete these two lines with the last one: they only keep the
  static_cast<void>(W_k);  // stub warning-free
  return attn::MatrixD::Zero(X.rows(), X.rows());
}
