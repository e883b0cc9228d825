// Right answers to exercises 09.1 to 09.3 (chapters/09_training/exercise/), written without the
// library's attention_backward, linear_backward or Adam, so that the course's suite can prove
// that tests/chapters/exercise_09.cpp passes right answers as well as failing the stubs. The
// marked regions below are the worked answers chapter 09's page shows.
#include "adam_step.hpp"
#include "linear_backward.hpp"
#include "softmax_backward.hpp"

#include <cmath>

// 09.1: for one row, p = softmax(s) and dp = dL/dp; the Jacobian J = diag(p) - p p^T is
// symmetric, so ds = J dp = p * dp - p (p . dp): entry j is p_j (dp_j - sum_k p_k dp_k). Over
// all rows: dS = P * (dP - rowsum(P * dP)), elementwise products.
// [answer_09_1]
attn::MatrixD exercise_softmax_backward(const attn::MatrixD& P, const attn::MatrixD& dP) {
  const Eigen::VectorXd p_dot_dp = (P.array() * dP.array()).rowwise().sum();  // [n_q]
  return (P.array() * (dP.colwise() - p_dot_dp).array()).matrix();            // [n_q x n_k]
}
// [answer_09_1]

// 09.2: from Y(r, c) = sum_a X(r, a) W(c, a) + b(c), each gradient sums over the entries of Y
// that its entry is used in: dX = dY W, dW = dY^T X, db = the sum of dY's rows.
// [answer_09_2]
ExerciseLinearGradients exercise_linear_backward(const attn::MatrixD& X, const attn::MatrixD& W,
                                                 const attn::MatrixD& dY) {
  const attn::Index n = X.rows(), in = X.cols(), out = W.rows();
  ExerciseLinearGradients g{attn::MatrixD::Zero(n, in),    // dX [n x in]
                            attn::MatrixD::Zero(out, in),  // dW [out x in]
                            attn::MatrixD::Zero(1, out)};  // db [1 x out]
  for (attn::Index r = 0; r < n; ++r) {
    for (attn::Index c = 0; c < out; ++c) {
      for (attn::Index a = 0; a < in; ++a) {
        g.dX(r, a) += dY(r, c) * W(c, a);  // X(r, a) met W(c, a) in Y(r, c)
        g.dW(c, a) += dY(r, c) * X(r, a);  // and W(c, a) met X(r, a)
      }
      g.db(0, c) += dY(r, c);  // b(c) is in every row's Y(r, c), with factor 1
    }
  }
  return g;
}
// [answer_09_2]

// 09.3: torch.optim.Adam's step (no weight decay), entry by entry: the moments first, then the
// bias-corrected update with eps outside the square root.
// [answer_09_3]
void exercise_adam_step(attn::MatrixD& p, const attn::MatrixD& g, attn::MatrixD& m,
                        attn::MatrixD& v, attn::Index t, double lr, double beta1, double beta2,
                        double eps) {
  const double bc1 = 1 - std::pow(beta1, static_cast<double>(t));  // bias corrections
  const double bc2 = 1 - std::pow(beta2, static_cast<double>(t));
  for (attn::Index i = 0; i < p.rows(); ++i) {
    for (attn::Index j = 0; j < p.cols(); ++j) {
      m(i, j) = beta1 * m(i, j) + (1 - beta1) * g(i, j);
      v(i, j) = beta2 * v(i, j) + (1 - beta2) * g(i, j) * g(i, j);
      p(i, j) -= lr / bc1 * m(i, j) / (std::sqrt(v(i, j)) / std::sqrt(bc2) + eps);
    }
  }
}
// [answer_09_3]
