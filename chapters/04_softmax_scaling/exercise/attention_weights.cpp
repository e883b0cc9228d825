// Exercise 04.3: attention's weights, scaled and stable. Write the body of
// exercise_attention_weights below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_04
//   ctest --test-dir build/release -R Exercise04Weights --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "attention_weights.hpp"

attn::MatrixD exercise_attention_weights(const attn::MatrixD& Q, const attn::MatrixD& K) {
  // TODO: return W = softmax(Q K^T / sqrt(d_k)) [n_q x n_k], the softmax along each row.
  //
  // The scores are S = Q K^T [n_q x n_k] (row i: query i against every key), times
  // 1 / sqrt(d_k), where d_k is the number of columns of Q and K. Then, row by row: subtract
  // that row's largest score, exponentiate, divide by the row's sum.
  //
  // Two classic mistakes: dividing by d_k instead of sqrt(d_k) (the variance of q . k is d_k,
  // so its spread, the thing to undo, is sqrt(d_k)); and exponentiating without subtracting
  // the row's maximum (or subtracting its minimum, or its mean, or one maximum for the whole
  // matrix), which turns rows of large scores into inf / inf = NaN.

  return attn::MatrixD::Zero(Q.rows(), K.rows());  // [n_q x n_k]
}
