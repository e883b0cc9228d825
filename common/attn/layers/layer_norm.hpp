/// @file
/// Layer normalisation exactly as torch.nn.LayerNorm(d) defines it, over each row (token):
///
///     mean = (1/d) sum_c x_c
///     var  = (1/d) sum_c (x_c - mean)^2          the biased variance: 1/d, not 1/(d-1)
///     y_c  = (x_c - mean) / sqrt(var + eps) * gamma_c + beta_c,   eps = 1e-5 inside the root
///
/// gamma (PyTorch's `weight`) starts at 1 and beta (`bias`) at 0, so a fresh layer only
/// standardises. The mean and variance are accumulated in double and the result rounded once
/// to float: a few ulps from the exact value, for any row length.
///
/// The course requires eps > 0 (and finite), where PyTorch also accepts eps = 0: a constant
/// row (every feature equal, e.g. a zero padding vector) has var = 0, and with eps = 0 its
/// y = 0 / sqrt(0) is NaN, which every later layer then spreads. With any eps > 0,
/// 1 / sqrt(var + eps) is at most 1 / sqrt(eps), finite, and such a row comes out as beta.
#pragma once

#include "attn/core/matrix.hpp"

namespace attn {

template <Real T>
struct LayerNormOf {
  using Scalar = T;
  RowVectorOf<T> gamma;  ///< [1 x d], PyTorch's weight
  RowVectorOf<T> beta;   ///< [1 x d], PyTorch's bias
  T eps = T(1e-5);       ///< inside the square root, PyTorch's default; must be > 0 (above)

  Index size() const { return gamma.size(); }
};
using LayerNorm = LayerNormOf<float>;
using LayerNormD = LayerNormOf<double>;

/// What layer_norm_backward needs besides x and the parameters: each row's statistics, as
/// PyTorch's native_layer_norm saves them (its `mean` and `rstd` outputs, one per row). They
/// are kept in double, the precision this forward computes them in, so the backward starts
/// from exactly the numbers the forward used (PyTorch keeps float32 for float32 input; cast to
/// compare).
struct LayerNormCache {
  VectorD mean;  ///< [n], row r's mean
  VectorD rstd;  ///< [n], row r's 1 / sqrt(var + eps), the biased variance
};

/// nn.LayerNorm(d)'s initial state: gamma = 1, beta = 0, eps = 1e-5. Throws
/// std::invalid_argument for d < 1, or a d whose two [1 x d] tensors the machine cannot hold.
LayerNorm layer_norm_init(Index d);

/// Normalises each row of x [n x d] -> [n x d], and fills `cache` when given. Throws
/// std::invalid_argument naming the shapes when x, gamma and beta disagree, or when eps is not
/// finite and > 0. No options: eps is a parameter of the layer, as in PyTorch.
template <Real T>
MatrixOf<T> layer_norm_forward(const LayerNormOf<T>& norm, const InView<T>& x,
                               LayerNormCache* cache = nullptr);

/// The backward pass, from the forward's cache (required: the statistics it used). Per row,
/// with xhat = (x - mean) rstd the normalised row and g = dy * gamma (elementwise):
///
///     dx     = rstd (g - mean(g) - xhat mean(g * xhat))     [n x d]   returned
///     dgamma += sum over rows of dy * xhat                  [1 x d]   into grads.gamma
///     dbeta  += sum over rows of dy                         [1 x d]   into grads.beta
///
/// The first line is the derivative through the mean (the - mean(g) term) and through the
/// variance (the xhat term) of the row; it is PyTorch's layer_norm_backward. Computed in
/// double, like the forward, and rounded once. Throws std::invalid_argument naming the shapes,
/// or, before any row, when grads shares memory with the norm, x or dy.
template <Real T>
MatrixOf<T> layer_norm_backward(const LayerNormOf<T>& norm, const InView<T>& x,
                                const LayerNormCache& cache, const InView<T>& dy,
                                LayerNormOf<T>& grads);

}  // namespace attn
