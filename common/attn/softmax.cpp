// softmax.cpp: the stable softmax and its naive twin (kept only to show why it is not used).
#include "attn/softmax.hpp"

#include <cmath>
#include <limits>

namespace attn {

namespace {

template <Real T>
bool stable_softmax(std::span<T> z) {
  if (z.empty()) return true;
  // Pass 1: the maximum. NaN compares false with everything, so it is tracked explicitly
  // instead of letting it vanish (or not) depending on where it sits in the row.
  T max = -std::numeric_limits<T>::infinity();
  bool has_nan = false;
  for (T x : z) {
    has_nan |= std::isnan(x);
    max = x > max ? x : max;
  }
  if (has_nan) {
    for (T& x : z) x = std::numeric_limits<T>::quiet_NaN();
    return true;
  }
  // Every key masked: exp(-inf - (-inf)) would be NaN. Attend to nothing instead.
  if (max == -std::numeric_limits<T>::infinity()) {
    for (T& x : z) x = T(0);
    return false;
  }
  // Pass 2: shifted exponentials, all in (0, 1], and their sum (>= 1: the max gives exp(0)).
  T sum = T(0);
  for (T& x : z) {
    x = std::exp(x - max);  // exp(-inf) is exactly 0: masked entries get weight exactly 0
    sum += x;
  }
  // Pass 3: normalise. One division, then multiplications, as PyTorch's CPU kernel does.
  const T inv = T(1) / sum;
  for (T& x : z) x *= inv;
  return true;
}

}  // namespace

bool softmax_inplace(std::span<float> z) { return stable_softmax(z); }
bool softmax_inplace(std::span<double> z) { return stable_softmax(z); }

Matrix softmax_rows(const Matrix& scores) {
  Matrix out = scores;  // out [n x m]
  for (Index r = 0; r < out.rows(); ++r) {
    softmax_inplace({out.row(r).data(), static_cast<std::size_t>(out.cols())});
  }
  return out;
}

Matrix softmax_cols(const Matrix& scores) {
  // Row-major storage makes columns strided; transposing once gives contiguous rows.
  Matrix transposed = scores.transpose();  // transposed [m x n]
  return softmax_rows(transposed).transpose();
}

Matrix naive_softmax_rows(const Matrix& scores) {
  Matrix out(scores.rows(), scores.cols());  // out [n x m]
  for (Index r = 0; r < scores.rows(); ++r) {
    float sum = 0.0f;
    for (Index c = 0; c < scores.cols(); ++c) {
      out(r, c) = std::exp(scores(r, c));  // overflows to inf once scores(r, c) > ~88.7
      sum += out(r, c);
    }
    for (Index c = 0; c < scores.cols(); ++c) out(r, c) /= sum;  // inf / inf = NaN
  }
  return out;
}

}  // namespace attn
