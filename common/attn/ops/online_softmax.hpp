/// @file
/// Online softmax (Milakov and Gimelshein, 2018): the softmax's normaliser in one pass, and the
/// merge of two partial results, which is what lets attention be computed one tile at a time.
///
/// The safe softmax of chapter 04 reads its row three times: the maximum m, then the sum
/// d = sum_j exp(x_j - m), then each exp(x_j - m) / d. The first two passes fold into one by
/// keeping a running maximum and rescaling the running sum whenever the maximum grows:
///
///     m_j = max(m_{j-1}, x_j)
///     d_j = d_{j-1} exp(m_{j-1} - m_j) + exp(x_j - m_j)          m_0 = -inf, d_0 = 0
///
/// Two states over disjoint parts of a row merge the same way, so the parts can be summed in
/// any order and in parallel (the merge is commutative and, up to rounding, associative):
///
///     m = max(m_a, m_b),   d = d_a exp(m_a - m) + d_b exp(m_b - m)
///
/// The row's log-sum-exp is m + log d, all the backward pass of tiled attention keeps of a row.
///
/// Non-finite entries follow softmax.hpp: -inf adds exactly nothing (a blocked key); a NaN or
/// +inf makes the state NaN (inf - inf); a state that has seen only -inf is (-inf, 0), and
/// merging it changes nothing.
#pragma once

#include "attn/core/matrix.hpp"

#include <cmath>
#include <limits>
#include <span>

namespace attn {

template <Real T>
struct OnlineSoftmaxOf {
  T max = -std::numeric_limits<T>::infinity();  ///< m: the largest entry seen so far
  T sum = T(0);                                 ///< d: sum of exp(x - m) over what was seen

  /// exp(from - to) for to >= from, exactly 0 when from is -inf (nothing seen yet) rather than
  /// exp(-inf - (-inf)) = NaN, which would poison an empty state's first rescaling.
  static T rescale(T from, T to) {
    return from == -std::numeric_limits<T>::infinity() ? T(0) : std::exp(from - to);
  }

  /// One more entry of the row: the recurrence above.
  void add(T x) {
    if (x == -std::numeric_limits<T>::infinity() && !std::isnan(max)) return;  // adds 0
    const T m = std::isnan(x) || x > max ? x : max;  // a NaN takes over (softmax.hpp)
    sum = sum * rescale(max, m) + std::exp(x - m);
    max = m;
  }

  /// Every entry of a part of the row, in order.
  void add(std::span<const T> xs) {
    for (T x : xs) add(x);
  }

  /// The state of the whole of two disjoint parts: order-independent.
  static OnlineSoftmaxOf merge(const OnlineSoftmaxOf& a, const OnlineSoftmaxOf& b) {
    if (std::isnan(a.max) || std::isnan(b.max)) {
      return {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::quiet_NaN()};
    }
    const T m = a.max > b.max ? a.max : b.max;
    return {m, a.sum * rescale(a.max, m) + b.sum * rescale(b.max, m)};
  }

  /// log sum_j exp(x_j) = m + log d: -inf for a row of -inf only (or nothing), NaN after a NaN.
  T log_sum_exp() const { return max + std::log(sum); }

  /// softmax(x) for an entry x of the row this state has seen in full.
  T weight(T x) const { return std::exp(x - max) / sum; }
};
using OnlineSoftmax = OnlineSoftmaxOf<float>;
using OnlineSoftmaxD = OnlineSoftmaxOf<double>;

}  // namespace attn
