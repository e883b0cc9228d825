/// @file
/// A fully connected layer as torch.nn.Linear stores and computes it.
///
///     weight [out x in]   (PyTorch's layout: one row per output feature)
///     bias   [1 x out]    (empty: no bias)
///     y = x W^T + b       x [n x in] -> y [n x out], one token per row
///
/// Keeping PyTorch's [out x in] layout means a state_dict loads without a transpose; the
/// product uses W^T as a view, so nothing is copied either way.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"

namespace attn {

template <Real T>
struct LinearOf {
  using Scalar = T;
  MatrixOf<T> weight;   ///< [out x in]
  RowVectorOf<T> bias;  ///< [1 x out], or empty for a layer without bias

  Index in_features() const { return weight.cols(); }
  Index out_features() const { return weight.rows(); }
  bool has_bias() const { return bias.size() != 0; }
  /// out * in (+ out with a bias): what PyTorch's parameter count says.
  Index parameter_count() const { return weight.size() + bias.size(); }
};
using Linear = LinearOf<float>;
using LinearD = LinearOf<double>;

/// nn.Linear's default initialisation: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)), filled
/// row by row in that order. (kaiming_uniform_ with a = sqrt(5) works out to that bound.) Throws
/// std::invalid_argument, before drawing anything, for sizes whose parameters need more memory
/// than the machine has or more elements than an Index can count (core/memory.hpp).
Linear linear_init(Rng& rng, Index in_features, Index out_features, bool bias = true);

/// y = x W^T + b: x [n x in] -> [n x out]. Throws std::invalid_argument naming the shapes.
/// No options and no cache: linear_backward needs only x, which its caller already has.
template <Real T>
MatrixOf<T> linear_forward(const LinearOf<T>& layer, const InView<T>& x);

/// The backward pass of y = x W^T + b, given dy = dL/dy [n x out]:
///
///     dx = dy W        [n x in]     returned
///     dW += dy^T x     [out x in]   into grads.weight
///     db += sum_rows dy [1 x out]   into grads.bias (when the layer has a bias)
///
/// grads has the layer's shapes (zeros_like(layer) before the first call); accumulating lets a
/// layer used on several sequences, or shared, sum its contributions (attn.hpp). Throws
/// std::invalid_argument naming the shapes, or, before accumulating anything, when grads shares
/// memory with the layer (`linear_backward(l, x, dy, l)`), x or dy.
template <Real T>
MatrixOf<T> linear_backward(const LinearOf<T>& layer, const InView<T>& x, const InView<T>& dy,
                            LinearOf<T>& grads);

/// Throws std::invalid_argument unless weight and bias agree; `where` names the caller.
template <Real T>
void check_linear(const LinearOf<T>& layer, const char* where);

}  // namespace attn
