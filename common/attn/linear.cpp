// linear.cpp: y = x W^T + b with PyTorch's [out x in] weight.
#include "attn/linear.hpp"

#include <cmath>
#include <string>

namespace attn {

Linear linear_init(Rng& rng, Index in_features, Index out_features, bool bias) {
  require(in_features >= 1 && out_features >= 1, "linear_init", [&] {
    return "in_features " + std::to_string(in_features) + " and out_features " +
           std::to_string(out_features) + " must both be at least 1";
  });
  const double k = 1.0 / std::sqrt(static_cast<double>(in_features));
  Linear layer;
  layer.weight = random_uniform(rng, out_features, in_features, -k, k);  // [out x in]
  if (bias) layer.bias = random_uniform(rng, 1, out_features, -k, k);    // [1 x out]
  return layer;
}

void check_linear(const Linear& layer, const char* where) {
  require(layer.weight.rows() >= 1 && layer.weight.cols() >= 1, where, [&] {
    return "the weight is " + shape_str(layer.weight) + ": it needs at least one row and column";
  });
  require(!layer.has_bias() || layer.bias.cols() == layer.weight.rows(), where, [&] {
    return "the weight is " + shape_str(layer.weight) + " but the bias is " +
           shape_str(layer.bias) + ": the bias must be [1 x " +
           std::to_string(layer.weight.rows()) + "]";
  });
}

Matrix linear_forward(const Linear& layer, const MatrixView& x) {
  check_linear(layer, "linear_forward");
  require(x.cols() == layer.in_features(), "linear_forward", [&] {
    return "x is " + shape_str(x) + " but the weight is " + shape_str(layer.weight) +
           ": x must have " + std::to_string(layer.in_features()) + " columns (in_features)";
  });
  Matrix y(x.rows(), layer.out_features());  // [n x out]
  y.noalias() = x * layer.weight.transpose();
  if (layer.has_bias()) y.rowwise() += layer.bias;
  return y;
}

}  // namespace attn
