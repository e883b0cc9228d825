// layer_norm.cpp: PyTorch's LayerNorm, row by row, statistics in double.
#include "attn/layers/layer_norm.hpp"

#include "attn/core/memory.hpp"

#include <cmath>
#include <string>

namespace attn {

LayerNorm layer_norm_init(Index d) {
  require(d >= 1, "layer_norm_init",
          [&] { return "d is " + std::to_string(d) + ": it must be at least 1"; });
  require_fits_in_memory("layer_norm_init", ElementCount(1, d, 2), sizeof(float), "of parameters",
                         [&] { return "d " + std::to_string(d); });
  return {RowVector::Ones(d), RowVector::Zero(d), 1e-5f};
}

template <Real T>
MatrixOf<T> layer_norm_forward(const LayerNormOf<T>& norm, const InView<T>& x,
                               LayerNormCache* cache) {
  const Index d = norm.gamma.size();
  require(norm.beta.size() == d && d >= 1, "layer_norm_forward", [&] {
    return "gamma is " + shape_str(norm.gamma) + " and beta is " + shape_str(norm.beta) +
           ": they must be the same [1 x d], d >= 1";
  });
  require(x.cols() == d, "layer_norm_forward", [&] {
    return "x is " + shape_str(x) + " but gamma is " + shape_str(norm.gamma) +
           ": each row of x must have d = " + std::to_string(d) + " features";
  });
  require(std::isfinite(norm.eps) && norm.eps > T(0), "layer_norm_forward",
          "eps must be finite and > 0 (with eps = 0 a constant row would divide 0 by 0)");
  if (cache) {
    cache->mean.resize(x.rows());  // [n]
    cache->rstd.resize(x.rows());  // [n]
  }
  MatrixOf<T> y(x.rows(), d);  // [n x d]
  // Whole-row operations, which Eigen vectorises. Each entry's arithmetic is the formula's, in
  // its order: z = (x - mean) * inv_std, then y = z * gamma + beta. The two row sums (mean and
  // variance, in double) are Eigen's vectorised sums, whose grouping follows the vector width:
  // they may differ from a left-to-right sum in a double's last bits, far below float's.
  const Eigen::RowVectorXd gamma = norm.gamma.template cast<double>();  // [1 x d]
  const Eigen::RowVectorXd beta = norm.beta.template cast<double>();    // [1 x d]
  Eigen::RowVectorXd centred(d);                                        // [1 x d]
  for (Index r = 0; r < x.rows(); ++r) {
    centred = x.row(r).template cast<double>();
    const double mean = centred.mean();
    centred.array() -= mean;
    const double var = centred.array().square().mean();  // biased: divide by d
    const double inv_std = 1.0 / std::sqrt(var + static_cast<double>(norm.eps));
    y.row(r) = ((centred.array() * inv_std) * gamma.array() + beta.array()).template cast<T>();
    if (cache) {
      cache->mean(r) = mean;
      cache->rstd(r) = inv_std;
    }
  }
  return y;
}

template <Real T>
MatrixOf<T> layer_norm_backward(const LayerNormOf<T>& norm, const InView<T>& x,
                                const LayerNormCache& cache, const InView<T>& dy,
                                LayerNormOf<T>& grads) {
  const Index n = x.rows(), d = norm.size();
  require(x.cols() == d && dy.rows() == n && dy.cols() == d && cache.mean.size() == n &&
              cache.rstd.size() == n && norm.beta.size() == d,
          "layer_norm_backward", [&] {
            return "x is " + shape_str(x) + ", dy is " + shape_str(dy) + ", gamma is " +
                   shape_str(norm.gamma) + " and the cache holds " +
                   std::to_string(cache.mean.size()) +
                   " rows: x and dy must be [n x d] and the cache the forward's of this x";
          });
  require(grads.gamma.size() == d && grads.beta.size() == d, "layer_norm_backward", [&] {
    return "grads are " + shape_str(grads.gamma) + " and " + shape_str(grads.beta) +
           ": start them from zeros_like(norm), [1 x " + std::to_string(d) + "] each";
  });
  // Row by row, grads are accumulated while gamma, x and dy are still read for later rows.
  require_apart("layer_norm_backward",
                {{"grads.gamma", memory_of(grads.gamma)}, {"grads.beta", memory_of(grads.beta)}},
                {{"the layer's gamma", memory_of(norm.gamma)},
                 {"the layer's beta", memory_of(norm.beta)},
                 {"x", memory_of(x)},
                 {"dy", memory_of(dy)}});
  MatrixOf<T> dx(n, d);                                                 // [n x d]
  const Eigen::RowVectorXd gamma = norm.gamma.template cast<double>();  // [1 x d]
  Eigen::RowVectorXd xhat(d), dyr(d), g(d);                             // [1 x d] each
  for (Index r = 0; r < n; ++r) {
    const double mean = cache.mean(r), rstd = cache.rstd(r);
    xhat = (x.row(r).template cast<double>().array() - mean) * rstd;
    dyr = dy.row(r).template cast<double>();
    g = dyr.cwiseProduct(gamma);
    grads.gamma += dyr.cwiseProduct(xhat).template cast<T>();
    grads.beta += dy.row(r);
    const double mean_g = g.mean();
    const double mean_g_xhat = g.dot(xhat) / static_cast<double>(d);
    dx.row(r) = (rstd * (g.array() - mean_g - xhat.array() * mean_g_xhat)).template cast<T>();
  }
  return dx;
}

#define ATTN_INSTANTIATE(T)                                                         \
  template MatrixOf<T> layer_norm_forward(const LayerNormOf<T>&, const InView<T>&,  \
                                          LayerNormCache*);                         \
  template MatrixOf<T> layer_norm_backward(const LayerNormOf<T>&, const InView<T>&, \
                                           const LayerNormCache&, const InView<T>&, \
                                           LayerNormOf<T>&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
