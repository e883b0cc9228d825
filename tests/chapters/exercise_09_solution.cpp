// A right answer to exercise 09 (chapters/09_training/exercise/softmax_backward.cpp), written
// without the library's attention_backward, so that the course's suite can prove that
// tests/chapters/exercise_09.cpp passes a right answer as well as failing the stub.
//
// For one row, p = softmax(s) and dp = dL/dp; the Jacobian J = diag(p) - p p^T is symmetric,
// so ds = J dp = p * dp - p (p . dp): entry j is p_j (dp_j - sum_k p_k dp_k). Over all rows:
// dS = P * (dP - rowsum(P * dP)), elementwise products.
#include "softmax_backward.hpp"

attn::MatrixD exercise_softmax_backward(const attn::MatrixD& P, const attn::MatrixD& dP) {
  attn::MatrixD dS(P.rows(), P.cols());  // [n_q x n_k]
  for (attn::Index i = 0; i < P.rows(); ++i) {
    double p_dot_dp = 0;  // sum_k p_k dp_k: how much the row's p-weighted dp is on average
    for (attn::Index k = 0; k < P.cols(); ++k) p_dot_dp += P(i, k) * dP(i, k);
    for (attn::Index j = 0; j < P.cols(); ++j) dS(i, j) = P(i, j) * (dP(i, j) - p_dot_dp);
  }
  return dS;
}
