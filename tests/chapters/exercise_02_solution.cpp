// Right answers to exercises 02.1 to 02.3 (chapters/02_attention_by_hand/exercise/), written
// with plain loops, without the library's scores, softmax or weighted sum, so that the course's
// suite can prove that tests/chapters/exercise_02.cpp passes right answers as well as failing
// the stubs. The page shows each marked region as its worked answer.
#include "query_output.hpp"
#include "query_scores.hpp"
#include "stable_softmax.hpp"

#include <algorithm>
#include <cmath>

// 02.1: alpha_{i,j} = q^i . k^j, one dot product per key, / sqrt(d_k) when scaled.
// [answer_02_1]
attn::VectorD exercise_query_scores(const attn::MatrixD& Q, const attn::MatrixD& K, attn::Index i,
                                    bool scale) {
  const attn::Index d_k = K.rows(), n_k = K.cols();
  const double factor = scale ? 1.0 / std::sqrt(static_cast<double>(d_k)) : 1.0;
  attn::VectorD scores(n_k);  // [n_k]: entry j = alpha_{i,j}
  for (attn::Index j = 0; j < n_k; ++j) {
    double dot = 0;
    for (attn::Index c = 0; c < d_k; ++c) dot += Q(c, i) * K(c, j);  // q^i . k^j
    scores(j) = dot * factor;
  }
  return scores;
}
// [answer_02_1]

// 02.2: subtract the largest score, exponentiate, divide by the sum.
// [answer_02_2]
attn::VectorD exercise_stable_softmax(const attn::VectorD& scores) {
  const attn::Index n = scores.size();
  double m = scores(0);  // the largest score
  for (attn::Index j = 1; j < n; ++j) m = std::max(m, scores(j));
  attn::VectorD weights(n);  // [n]: exp(scores(j) - m) first, every exponent <= 0
  double sum = 0;
  for (attn::Index j = 0; j < n; ++j) {
    weights(j) = std::exp(scores(j) - m);
    sum += weights(j);  // at least 1: the largest score's term is exp(0)
  }
  for (attn::Index j = 0; j < n; ++j) weights(j) /= sum;
  return weights;
}
// [answer_02_2]

// 02.3: y = sum_j alpha'_j v^j, v^j the column j of V.
// [answer_02_3]
attn::VectorD exercise_query_output(const attn::MatrixD& V, const attn::VectorD& weights) {
  const attn::Index d_v = V.rows(), n_k = V.cols();
  attn::VectorD y = attn::VectorD::Zero(d_v);  // [d_v]
  for (attn::Index j = 0; j < n_k; ++j) {
    for (attn::Index c = 0; c < d_v; ++c) y(c) += weights(j) * V(c, j);  // y += alpha'_j v^j
  }
  return y;
}
// [answer_02_3]
