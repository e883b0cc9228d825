// layer_norm.cpp: PyTorch's LayerNorm, row by row, statistics in double.
#include "attn/layer_norm.hpp"

#include <cmath>
#include <string>

namespace attn {

LayerNorm layer_norm_init(Index d) {
  require(d >= 1, "layer_norm_init",
          [&] { return "d is " + std::to_string(d) + ": it must be at least 1"; });
  return {RowVector::Ones(d), RowVector::Zero(d), 1e-5f};
}

Matrix layer_norm_forward(const LayerNorm& norm, const MatrixView& x, LayerNormCache* cache) {
  const Index d = norm.gamma.size();
  require(norm.beta.size() == d && d >= 1, "layer_norm_forward", [&] {
    return "gamma is " + shape_str(norm.gamma) + " and beta is " + shape_str(norm.beta) +
           ": they must be the same [1 x d], d >= 1";
  });
  require(x.cols() == d, "layer_norm_forward", [&] {
    return "x is " + shape_str(x) + " but gamma is " + shape_str(norm.gamma) +
           ": each row of x must have d = " + std::to_string(d) + " features";
  });
  require(std::isfinite(norm.eps) && norm.eps > 0.0f, "layer_norm_forward",
          "eps must be finite and > 0 (with eps = 0 a constant row would divide 0 by 0)");
  if (cache) {
    cache->mean.resize(x.rows());  // [n]
    cache->rstd.resize(x.rows());  // [n]
  }
  Matrix y(x.rows(), d);  // [n x d]
  for (Index r = 0; r < x.rows(); ++r) {
    const auto row = x.row(r).cast<double>();  // [1 x d]
    const double mean = row.mean();
    const double var = (row.array() - mean).square().mean();  // biased: divide by d
    const double inv_std = 1.0 / std::sqrt(var + static_cast<double>(norm.eps));
    for (Index c = 0; c < d; ++c) {
      const double z = (static_cast<double>(x(r, c)) - mean) * inv_std;
      y(r, c) = static_cast<float>(z * norm.gamma(c) + norm.beta(c));
    }
    if (cache) {
      cache->mean(r) = mean;
      cache->rstd(r) = inv_std;
    }
  }
  return y;
}

}  // namespace attn
