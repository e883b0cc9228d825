// Right answers to exercises 08.1 to 08.3 (chapters/08_transformer_block/exercise/), so that the
// course's suite can prove that tests/chapters/exercise_08.cpp passes right answers as well as
// failing the stubs. 08.1 and 08.2 are written without the library's layer_norm_forward and
// ffn_forward, which the tests compare them with; 08.3 uses those two, and its tests compare it
// with attn::encoder_layer_forward, whose residual steps it does not use. Each marked region is
// the worked answer chapter 08's page shows.
#include "ffn_sublayer.hpp"
#include "layer_norm_rows.hpp"
#include "position_wise_ffn.hpp"

#include <cmath>

// 08.1: each row's own mean and biased variance, eps inside the root, then gamma and beta.
// [answer_08_1]
attn::MatrixD exercise_layer_norm_rows(const attn::MatrixD& x, const attn::RowVectorD& gamma,
                                       const attn::RowVectorD& beta, double eps) {
  const attn::Index n = x.rows(), d = x.cols();
  attn::MatrixD y(n, d);  // [n x d]
  for (attn::Index r = 0; r < n; ++r) {
    double mean = 0.0;
    for (attn::Index c = 0; c < d; ++c) mean += x(r, c);
    mean /= static_cast<double>(d);
    double var = 0.0;
    for (attn::Index c = 0; c < d; ++c) var += (x(r, c) - mean) * (x(r, c) - mean);
    var /= static_cast<double>(d);  // biased: divided by d, not d - 1
    const double inv_std = 1.0 / std::sqrt(var + eps);
    for (attn::Index c = 0; c < d; ++c) {
      y(r, c) = (x(r, c) - mean) * inv_std * gamma(c) + beta(c);
    }
  }
  return y;
}
// [answer_08_1]

// 08.2: tokens are rows, so each layer is x W^T + b; ReLU between the two, after b1.
// [answer_08_2]
attn::MatrixD exercise_position_wise_ffn(const attn::MatrixD& x, const attn::MatrixD& W1,
                                         const attn::RowVectorD& b1, const attn::MatrixD& W2,
                                         const attn::RowVectorD& b2) {
  attn::MatrixD hidden = (x * W1.transpose()).rowwise() + b1;  // [n x d_ff]
  hidden = hidden.cwiseMax(0.0);                               // ReLU, entry by entry
  return (hidden * W2.transpose()).rowwise() + b2;             // [n x d_model]
}
// [answer_08_2]

// 08.3: post-norm normalises the sum; pre-norm normalises what the FFN reads and adds x itself.
// [answer_08_3]
attn::MatrixD exercise_ffn_sublayer(const attn::MatrixD& x, const attn::FeedForwardD& ff,
                                    const attn::LayerNormD& norm, attn::NormPlacement placement) {
  if (placement == attn::NormPlacement::post) {
    const attn::MatrixD sum = x + attn::ffn_forward<double>(ff, x);  // [n x d_model]
    return attn::layer_norm_forward<double>(norm, sum);
  }
  const attn::MatrixD normed = attn::layer_norm_forward<double>(norm, x);  // [n x d_model]
  return x + attn::ffn_forward<double>(ff, normed);  // the residual adds x, not normed
}
// [answer_08_3]
