// Exercise 09.1: the backward pass of softmax. Write the body of exercise_softmax_backward below,
// then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_09
//   ctest --test-dir build/release -R Exercise09 --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "softmax_backward.hpp"

attn::MatrixD exercise_softmax_backward(const attn::MatrixD& P, const attn::MatrixD& dP) {
  // TODO: return dS = dL/dS, one gradient per score: [n_q x n_k], the shape of P and dP.
  //
  // The forward pass was P = softmax(S), row by row: p = P.row(i) is the softmax of the scores
  // s = S.row(i), and dp = dP.row(i) is how much the loss L changes per unit of each p_j. Row i
  // of S moves nothing but row i of P, so each row of dS depends on row i of P and dP alone.
  //
  // For one row, the derivative of the softmax is the Jacobian [n_k x n_k]
  //
  //   dp_j / ds_k = p_j (delta_jk - p_k),   i.e.   J = diag(p) - p p^T
  //
  // and the chain rule gives the row of dS as J^T dp, which is J dp (J is symmetric).
  //
  // Hint: you never need J itself. Multiply (diag(p) - p p^T) dp out by hand: each of the two
  // terms turns out to be simple, and neither needs an [n_k x n_k] matrix.
  //
  // Eigen, if you want it: P.row(i).dot(dP.row(i)) is a number; a.cwiseProduct(b) multiplies
  // entry by entry; P.array() * dP.array() does the same for whole matrices. A plain loop over
  // P(i, j) is just as good.
  //
  // A blocked key (score -inf, weight p_j = 0 exactly) must get exactly 0: the formula gives
  // that by itself, with no special case.

  static_cast<void>(dP);  // delete this line with the next: it only keeps the stub warning-free
  return attn::MatrixD::Zero(P.rows(), P.cols());
}
