// Right answers to exercises 04.1 to 04.3 (chapters/04_softmax_scaling/exercise/), written with
// plain loops and without the library's softmax, entropy or attention, so that the course's
// suite can prove that tests/chapters/exercise_04.cpp passes right answers as well as failing
// the stubs. The marked regions are the worked answers chapter 04's page shows.
#include "attention_weights.hpp"
#include "log_sum_exp.hpp"
#include "softmax_entropy.hpp"

#include <algorithm>
#include <cmath>

// 04.1: take the largest logit out of the sum, so that no exponent is above 0.
// [answer_04_1]
double exercise_log_sum_exp(const attn::VectorD& z) {
  double m = z(0);
  for (attn::Index j = 1; j < z.size(); ++j) m = std::max(m, z(j));
  double sum = 0.0;  // between 1 (the term of m) and n
  for (attn::Index j = 0; j < z.size(); ++j) sum += std::exp(z(j) - m);
  return m + std::log(sum);
}
// [answer_04_1]

// 04.2: H = -sum_j p_j ln p_j with ln p_j = z_j - lse(z), finite even where p_j underflows.
// [answer_04_2]
double exercise_softmax_entropy(const attn::VectorD& z) {
  double m = z(0);
  for (attn::Index j = 1; j < z.size(); ++j) m = std::max(m, z(j));
  double sum = 0.0;
  for (attn::Index j = 0; j < z.size(); ++j) sum += std::exp(z(j) - m);
  const double lse = m + std::log(sum);
  double entropy = 0.0;
  for (attn::Index j = 0; j < z.size(); ++j) {
    const double log_p = z(j) - lse;  // finite, even where exp(log_p) is 0
    entropy -= std::exp(log_p) * log_p;
  }
  return entropy;
}
// [answer_04_2]

// 04.3: scores scaled by 1/sqrt(d_k), then a stable softmax along each row.
// [answer_04_3]
attn::MatrixD exercise_attention_weights(const attn::MatrixD& Q, const attn::MatrixD& K) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(Q.cols()));
  attn::MatrixD W = Q * K.transpose() * scale;  // [n_q x n_k], the scores first
  for (attn::Index i = 0; i < W.rows(); ++i) {
    const double m = W.row(i).maxCoeff();  // this row's largest score
    double sum = 0.0;
    for (attn::Index j = 0; j < W.cols(); ++j) {
      W(i, j) = std::exp(W(i, j) - m);
      sum += W(i, j);
    }
    W.row(i) /= sum;
  }
  return W;
}
// [answer_04_3]
