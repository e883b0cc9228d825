// softmax_stats.cpp: entropy of a row of weights and the softmax Jacobian with its norm.
#include "attn/softmax_stats.hpp"

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace attn {

namespace {

void check_weights(std::span<const float> p, const char* where) {
  for (std::size_t j = 0; j < p.size(); ++j) {
    require(std::isfinite(p[j]) && p[j] >= 0.0f, where, [&] {  // built only on failure
      return "weight " + std::to_string(j) + " is " + std::to_string(p[j]) +
             ": weights must be finite and >= 0";
    });
  }
}

// others[i] = sum_{j != i} f(p_j), from a prefix and a suffix sum of non-negative terms.
// (total - f(p_i) would lose every digit when f(p_i) is nearly the whole total.)
template <typename F>
std::vector<double> sums_of_others(std::span<const float> p, F f) {
  const std::size_t n = p.size();
  std::vector<double> others(n, 0.0);
  double before = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    others[i] = before;
    before += f(static_cast<double>(p[i]));
  }
  double after = 0.0;
  for (std::size_t i = n; i-- > 0;) {
    others[i] += after;
    after += f(static_cast<double>(p[i]));
  }
  return others;
}

}  // namespace

double entropy(std::span<const float> p) {
  check_weights(p, "entropy");
  double h = 0.0;
  for (float pj : p) {
    if (pj > 0.0f) h -= static_cast<double>(pj) * std::log(static_cast<double>(pj));
  }
  return h;
}

MatrixD softmax_jacobian(std::span<const float> p) {
  check_weights(p, "softmax_jacobian");
  const Index n = static_cast<Index>(p.size());
  const std::vector<double> rest = sums_of_others(p, [](double x) { return x; });
  MatrixD J(n, n);  // J [n x n], J(i, j) = d p_i / d z_j
  for (Index i = 0; i < n; ++i) {
    const double pi = p[static_cast<std::size_t>(i)];
    for (Index j = 0; j < n; ++j) {
      J(i, j) = i == j ? pi * rest[static_cast<std::size_t>(i)]
                       : -pi * static_cast<double>(p[static_cast<std::size_t>(j)]);
    }
  }
  return J;
}

double softmax_jacobian_norm(std::span<const float> p) {
  check_weights(p, "softmax_jacobian_norm");
  const std::vector<double> rest = sums_of_others(p, [](double x) { return x; });
  const std::vector<double> rest_sq = sums_of_others(p, [](double x) { return x * x; });
  double sum = 0.0;  // sum over rows i of |row i of J|^2
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double pi = p[i];
    sum += pi * pi * (rest[i] * rest[i] + rest_sq[i]);
  }
  return std::sqrt(sum);
}

}  // namespace attn
