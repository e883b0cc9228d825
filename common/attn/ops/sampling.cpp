// sampling.cpp: greedy decoding and temperature / top-k sampling of the next token.
#include "attn/ops/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace attn {

namespace {

// A number as a message shows it: "%g" keeps 1e-300 and NaN short.
std::string num(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", x);
  return buffer;
}

template <Real T>
void check_row(const ViewOf<T>& logits_row, const char* where) {
  require(logits_row.rows() == 1 && logits_row.cols() >= 1, where, [&] {
    return "logits are " + shape_str(logits_row) + ": one row of at least one logit";
  });
}

}  // namespace

void check_sampling_options(const SamplingOptions& opts, const char* where) {
  require(std::isfinite(opts.temperature) && opts.temperature >= 0.0, where, [&] {
    return "temperature " + num(opts.temperature) + ": it must be finite and >= 0 (0 is greedy)";
  });
  require(opts.top_k >= 0, where, [&] {
    return "top_k " + std::to_string(opts.top_k) + ": it must be >= 0 (0 keeps every id)";
  });
}

template <Real T>
int greedy_token(const InView<T>& logits_row) {
  check_row<T>(logits_row, "greedy_token");
  Index best = 0;
  for (Index j = 1; j < logits_row.cols(); ++j) {
    if (logits_row(0, j) > logits_row(0, best)) best = j;  // strictly: the lowest id on a tie
  }
  return static_cast<int>(best);
}

template <Real T>
int sample_token(const InView<T>& logits_row, const SamplingOptions& opts, Rng& rng) {
  check_row<T>(logits_row, "sample_token");
  check_sampling_options(opts, "sample_token");
  const double temperature = opts.temperature;
  const Index V = logits_row.cols();
  for (Index j = 0; j < V; ++j) {
    require(std::isfinite(logits_row(0, j)), "sample_token", [&] {
      return "the logit of id " + std::to_string(j) + " is " +
             num(static_cast<double>(logits_row(0, j))) + ": every logit must be finite";
    });
  }
  if (temperature == 0.0) return greedy_token<T>(logits_row);

  // float -> double is exact, so the comparisons below see the logits as they are.
  std::vector<double> z(static_cast<std::size_t>(V));
  for (Index j = 0; j < V; ++j) z[static_cast<std::size_t>(j)] = logits_row(0, j);
  const double m = *std::max_element(z.begin(), z.end());

  // v_k, the k-th largest logit: ids below it are dropped, ids equal to it kept (nanoGPT).
  double threshold = -std::numeric_limits<double>::infinity();  // k = 0: every logit is kept
  const Index k = std::min(opts.top_k, V);
  if (k > 0) {
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<>());
    threshold = sorted[static_cast<std::size_t>(k - 1)];
  }

  // Unnormalised weights exp((z_j - m) / T) <= 1; the largest logit's is exactly 1, so the
  // total is at least 1 and never 0.
  std::vector<double> w(z.size(), 0.0);
  double total = 0.0;
  for (std::size_t j = 0; j < z.size(); ++j) {
    if (z[j] < threshold) continue;
    w[j] = std::exp((z[j] - m) / temperature);
    total += w[j];
  }

  // Inverse CDF in id order: the first id whose running sum exceeds u * total. The running sum
  // is the same additions in the same order as `total`, so it ends at total exactly; u < 1 but
  // u * total may round up to total, so the last id of positive weight is the fallback. An id
  // of weight 0 is never chosen: its running sum equals its predecessor's.
  const double target = rng.uniform() * total;
  double running = 0.0;
  std::size_t last_positive = 0;
  for (std::size_t j = 0; j < w.size(); ++j) {
    if (w[j] == 0.0) continue;
    running += w[j];
    last_positive = j;
    if (target < running) return static_cast<int>(j);
  }
  return static_cast<int>(last_positive);
}

#define ATTN_INSTANTIATE(T)                       \
  template int greedy_token<T>(const InView<T>&); \
  template int sample_token<T>(const InView<T>&, const SamplingOptions&, Rng&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
