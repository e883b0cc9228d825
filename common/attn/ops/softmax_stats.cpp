// softmax_stats.cpp: entropy of a row of weights and the softmax Jacobian with its norm, and
// the row statistics chapter 04 tabulates from them.
#include "attn/ops/softmax_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
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

// The row count of a tally as a divisor, checked: a mean of no rows would be 0 / 0 = NaN.
double rows_added(const WeightRowsTally& t, const char* where) {
  require(t.rows() > 0, where, "no rows added yet");
  return static_cast<double>(t.rows());
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

WeightStats weight_stats(std::span<const float> p, double threshold) {
  require(!p.empty(), "weight_stats", "no weights");
  check_weights(p, "weight_stats");
  const auto top = std::ranges::max_element(p);
  return {.largest = *top,
          .runner_up = p.size() > 1 ? two_largest(p).second : 0.0f,
          .entropy = entropy(p),
          .jacobian_norm = softmax_jacobian_norm(p),
          .argmax = top - p.begin(),
          .above = std::ranges::count_if(p, [&](float w) { return w > threshold; }),
          .zeros = std::ranges::count(p, 0.0f)};
}

void WeightRowsTally::add(MatrixView P) {
  require(P.cols() > 0 || P.rows() == 0, "WeightRowsTally::add", "rows of no weights");
  for (Index r = 0; r < P.rows(); ++r) {
    const std::span<const float> p(P.row(r).data(), static_cast<std::size_t>(P.cols()));
    check_weights(p, "WeightRowsTally::add");
    largest_sum_ += std::ranges::max(p);
    entropy_sum_ += entropy(p);
    jacobian_norms_.push_back(softmax_jacobian_norm(p));
  }
}

double WeightRowsTally::mean_largest() const {
  return largest_sum_ / rows_added(*this, "WeightRowsTally::mean_largest");
}

double WeightRowsTally::mean_entropy() const {
  return entropy_sum_ / rows_added(*this, "WeightRowsTally::mean_entropy");
}

double WeightRowsTally::mean_jacobian_norm() const {
  const double n = rows_added(*this, "WeightRowsTally::mean_jacobian_norm");
  return std::accumulate(jacobian_norms_.begin(), jacobian_norms_.end(), 0.0) / n;
}

double WeightRowsTally::median_jacobian_norm() const {
  rows_added(*this, "WeightRowsTally::median_jacobian_norm");
  return median(jacobian_norms_);
}

std::pair<float, float> two_largest(std::span<const float> v) {
  require(v.size() >= 2, "two_largest",
          [&] { return "v has " + std::to_string(v.size()) + " entries: two or more are needed"; });
  require(std::ranges::none_of(v, [](float x) { return std::isnan(x); }), "two_largest",
          "v holds a NaN, which has no place in an order");
  float first = std::max(v[0], v[1]), second = std::min(v[0], v[1]);
  for (const float x : v.subspan(2)) {
    if (x > first) {
      second = first;
      first = x;
    } else if (x > second) {
      second = x;
    }
  }
  return {first, second};
}

double median(std::span<const double> v) {
  require(!v.empty(), "median", "no values");
  require(std::ranges::none_of(v, [](double x) { return std::isnan(x); }), "median",
          "the values hold a NaN, which has no place in an order");
  std::vector<double> sorted(v.begin(), v.end());
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

Eigen::RowVectorXd mean_std_min_max(const Matrix& m) {
  require(m.size() > 0, "mean_std_min_max", "m is empty");
  const Eigen::ArrayXd v = Eigen::Map<const Eigen::ArrayXf>(m.data(), m.size()).cast<double>();
  const double mean = v.mean();
  Eigen::RowVectorXd s(4);  // [1 x 4]: dynamic, as GCC 12 misreads a fixed [1 x 4] under AVX-512
  s << mean, std::sqrt((v - mean).square().mean()), v.minCoeff(), v.maxCoeff();
  return s;
}

}  // namespace attn
