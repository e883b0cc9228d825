// linear.cpp: y = x W^T + b with PyTorch's [out x in] weight.
#include "attn/layers/linear.hpp"

#include "attn/core/gemm.hpp"
#include "attn/core/memory.hpp"

#include <cmath>
#include <string>

namespace attn {

Linear linear_init(Rng& rng, Index in_features, Index out_features, bool bias) {
  require(in_features >= 1 && out_features >= 1, "linear_init", [&] {
    return "in_features " + std::to_string(in_features) + " and out_features " +
           std::to_string(out_features) + " must both be at least 1";
  });
  require_fits_in_memory("linear_init",
                         ElementCount(out_features, in_features).add(1, bias ? out_features : 0),
                         sizeof(float), "of parameters", [&] {
                           return "in_features " + std::to_string(in_features) +
                                  " and out_features " + std::to_string(out_features);
                         });
  const double k = 1.0 / std::sqrt(static_cast<double>(in_features));
  Linear layer;
  layer.weight = random_uniform(rng, out_features, in_features, -k, k);  // [out x in]
  if (bias) layer.bias = random_uniform(rng, 1, out_features, -k, k);    // [1 x out]
  return layer;
}

template <Real T>
void check_linear(const LinearOf<T>& layer, const char* where) {
  require(layer.weight.rows() >= 1 && layer.weight.cols() >= 1, where, [&] {
    return "the weight is " + shape_str(layer.weight) + ": it needs at least one row and column";
  });
  require(!layer.has_bias() || layer.bias.cols() == layer.weight.rows(), where, [&] {
    return "the weight is " + shape_str(layer.weight) + " but the bias is " +
           shape_str(layer.bias) + ": the bias must be [1 x " +
           std::to_string(layer.weight.rows()) + "]";
  });
}

template <Real T>
MatrixOf<T> linear_forward(const LinearOf<T>& layer, const InView<T>& x) {
  check_linear(layer, "linear_forward");
  require(x.cols() == layer.in_features(), "linear_forward", [&] {
    return "x is " + shape_str(x) + " but the weight is " + shape_str(layer.weight) +
           ": x must have " + std::to_string(layer.in_features()) + " columns (in_features)";
  });
  MatrixOf<T> y(x.rows(), layer.out_features());  // [n x out]
  gemm<T>(x, Op::plain, layer.weight, Op::transposed, y);
  if (layer.has_bias()) y.rowwise() += layer.bias;
  return y;
}

template <Real T>
MatrixOf<T> linear_backward(const LinearOf<T>& layer, const InView<T>& x, const InView<T>& dy,
                            LinearOf<T>& grads) {
  check_linear(layer, "linear_backward");
  require(
      x.cols() == layer.in_features() && dy.cols() == layer.out_features() && dy.rows() == x.rows(),
      "linear_backward", [&] {
        return "x is " + shape_str(x) + ", dy is " + shape_str(dy) + " and the weight is " +
               shape_str(layer.weight) + ": x must be [n x in] and dy [n x out]";
      });
  require(grads.weight.rows() == layer.weight.rows() &&
              grads.weight.cols() == layer.weight.cols() && grads.bias.size() == layer.bias.size(),
          "linear_backward", [&] {
            return "grads are " + shape_str(grads.weight) + " and " + shape_str(grads.bias) +
                   " but the layer is " + shape_str(layer.weight) + " and " +
                   shape_str(layer.bias) + ": start them from zeros_like(layer)";
          });
  // grads.weight is written before dx reads the weight, and read with x and dy: the gradients
  // must be memory of their own (zeros_like(layer)), not the layer's or an input's.
  require_apart("linear_backward",
                {{"grads.weight", memory_of(grads.weight)}, {"grads.bias", memory_of(grads.bias)}},
                {{"the layer's weight", memory_of(layer.weight)},
                 {"the layer's bias", memory_of(layer.bias)},
                 {"x", memory_of(x)},
                 {"dy", memory_of(dy)}});
  gemm<T>(dy, Op::transposed, x, Op::plain, grads.weight, Accumulate::yes);  // [out x in]
  if (layer.has_bias()) grads.bias += dy.colwise().sum();                    // [1 x out]
  MatrixOf<T> dx(x.rows(), layer.in_features());                             // [n x in]
  gemm<T>(dy, Op::plain, layer.weight, Op::plain, dx);
  return dx;
}

#define ATTN_INSTANTIATE(T)                                                                    \
  template void check_linear(const LinearOf<T>&, const char*);                                 \
  template MatrixOf<T> linear_forward(const LinearOf<T>&, const InView<T>&);                   \
  template MatrixOf<T> linear_backward(const LinearOf<T>&, const InView<T>&, const InView<T>&, \
                                       LinearOf<T>&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
