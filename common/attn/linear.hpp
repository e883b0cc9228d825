/// @file
/// A fully connected layer as torch.nn.Linear stores and computes it.
///
///   weight [out x in]   (PyTorch's layout: one row per output feature)
///   bias   [1 x out]    (empty: no bias)
///   y = x W^T + b       x [n x in] -> y [n x out], one token per row
///
/// Keeping PyTorch's [out x in] layout means a state_dict loads without a transpose; the
/// product uses W^T as a view, so nothing is copied either way.
#pragma once

#include "attn/matrix.hpp"
#include "attn/random.hpp"

namespace attn {

struct Linear {
  Matrix weight;   ///< [out x in]
  RowVector bias;  ///< [1 x out], or empty for a layer without bias

  Index in_features() const { return weight.cols(); }
  Index out_features() const { return weight.rows(); }
  bool has_bias() const { return bias.size() != 0; }
  /// out * in (+ out with a bias): what PyTorch's parameter count says.
  Index parameter_count() const { return weight.size() + bias.size(); }
};

/// nn.Linear's default initialisation: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)), filled
/// row by row in that order. (kaiming_uniform_ with a = sqrt(5) works out to that bound.)
Linear linear_init(Rng& rng, Index in_features, Index out_features, bool bias = true);

/// y = x W^T + b: x [n x in] -> [n x out]. Throws std::invalid_argument naming the shapes.
/// No options and no cache: linear_backward will need only x, which its caller already has.
Matrix linear_forward(const Linear& layer, const MatrixView& x);

/// Throws std::invalid_argument unless weight and bias agree; `where` names the caller.
void check_linear(const Linear& layer, const char* where);

}  // namespace attn
