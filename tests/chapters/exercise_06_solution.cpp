// Right answers to exercises 06.1 to 06.3 (chapters/06_multi_head/exercise/), written with
// plain loops, without the library's attention or multi_head_forward, so that the course's
// suite can prove that tests/chapters/exercise_06.cpp passes right answers as well as failing
// the stubs. The page shows each marked region as its worked answer.
#include "head_attention.hpp"
#include "multi_head_out.hpp"
#include "split_head.hpp"

#include <cmath>

// 06.1: head h owns the contiguous columns [h d_k, (h + 1) d_k).
// [answer_06_1]
attn::MatrixD exercise_split_head(const attn::MatrixD& Q, attn::Index heads, attn::Index h) {
  const attn::Index n = Q.rows(), d_k = Q.cols() / heads;
  attn::MatrixD head(n, d_k);  // [n x d_k]
  for (attn::Index t = 0; t < n; ++t) {
    for (attn::Index c = 0; c < d_k; ++c) head(t, c) = Q(t, h * d_k + c);
  }
  return head;
}
// [answer_06_1]

// 06.2: chapter 05's attention on head h's columns, scaled by 1/sqrt(d_k).
// [answer_06_2]
attn::MatrixD exercise_head_attention(const attn::MatrixD& Q, const attn::MatrixD& K,
                                      const attn::MatrixD& V, attn::Index heads, attn::Index h) {
  const attn::Index n_q = Q.rows(), n_k = K.rows(), d_k = Q.cols() / heads;
  const attn::Index first = h * d_k;  // head h's first column
  const double scale = 1.0 / std::sqrt(static_cast<double>(d_k));
  attn::MatrixD out = attn::MatrixD::Zero(n_q, d_k);  // [n_q x d_k]
  attn::VectorD weights(n_k);                         // [n_k]: query i's scores, then weights
  for (attn::Index i = 0; i < n_q; ++i) {
    for (attn::Index j = 0; j < n_k; ++j) {
      double dot = 0;
      for (attn::Index c = first; c < first + d_k; ++c) dot += Q(i, c) * K(j, c);
      weights(j) = dot * scale;
    }
    weights = (weights.array() - weights.maxCoeff()).exp();  // every exponent <= 0
    weights /= weights.sum();
    for (attn::Index j = 0; j < n_k; ++j) {
      for (attn::Index c = 0; c < d_k; ++c) out(i, c) += weights(j) * V(j, first + c);
    }
  }
  return out;
}
// [answer_06_2]

// 06.3: every head into its own columns of concat, then W_O mixes them.
// [answer_06_3]
attn::MatrixD exercise_multi_head_out(const attn::MatrixD& Q, const attn::MatrixD& K,
                                      const attn::MatrixD& V, attn::Index heads,
                                      const attn::MatrixD& W_O, const attn::VectorD& b_O) {
  const attn::Index n_q = Q.rows(), d_model = Q.cols(), d_k = d_model / heads;
  attn::MatrixD concat(n_q, d_model);  // [n_q x d_model]
  for (attn::Index h = 0; h < heads; ++h) {
    concat.middleCols(h * d_k, d_k) = exercise_head_attention(Q, K, V, heads, h);
  }
  attn::MatrixD out(n_q, d_model);  // [n_q x d_model]
  for (attn::Index t = 0; t < n_q; ++t) {
    for (attn::Index o = 0; o < d_model; ++o) {
      double sum = b_O(o);
      for (attn::Index c = 0; c < d_model; ++c) sum += concat(t, c) * W_O(o, c);  // W_O [out x in]
      out(t, o) = sum;
    }
  }
  return out;
}
// [answer_06_3]
