// softmax.cpp: the stable softmax and its naive twin (kept only to show why it is not used).
#include "attn/ops/softmax.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace attn {

namespace {

// The softmax is most of attention's time at n = 1024 (71%, measured with perf) when each
// exponential is a scalar call to expf and the sum is serial, which GCC vectorises neither of
// without -ffast-math. Eigen's vectorised exp (its packet math, Eigen::internal: the same function
// that array().exp() calls) takes the softmax of a 1024-wide row from 5.4 to 1.0 ns an entry
// (AMD EPYC, AVX2, 2026-11), within 2 units of float's roundoff (2^-24) of the exact value
// (measured over every float in [ln FLT_MIN, 0]; glibc's expf is within 1). Its last bit
// differs from expf's now and then, and between instruction sets: AVX-512 builds use another
// Eigen kernel for float.
namespace ep = Eigen::internal;

// Below ln of the smallest normal number Eigen's exp cannot be used as it is: it clamps its
// argument (float: at -88.72) and returns a tiny positive number for anything below, -inf
// included (float 2.9e-39 on AVX2, double 5.6e-309), where a masked key must weigh exactly 0
// and glibc's exp returns the subnormal exp(x) down to -103.97 (double: -745.13), then 0.
// So the exp is taken of max(x, cutoff) and kept only where x >= cutoff, which makes exp(-inf)
// exactly 0 on every instruction set and computes no subnormal on the way (each would cost a
// microcode assist on many CPUs, and a causal mask makes half a row -inf). A lane between the
// floor and the cutoff gets exp(x / 2)^2 instead: x / 2 is exact, exp(x / 2) a normal number
// to 2 u, and the square is rounded once onto the subnormal grid, so the weight is the
// subnormal glibc gives to within 2.5 units of its last place (measured over every float of
// that window: within 1.01; one input in 50 differs from expf by one unit). Such spreads
// (x more than 87 below the maximum) are rare in attention, and a packet without such a lane
// skips the second exp: chapter 04's unscaled scores make them, and its test compares them.
template <Real T>
constexpr T kExpCutoff = T(0);  // the smallest x whose exp is a normal T (= ln(min()), rounded up)
template <>
constexpr float kExpCutoff<float> = -0x1.5d589ep+6f;  // -87.33654
template <>
constexpr double kExpCutoff<double> = -0x1.6232bdd7abcd2p+9;  // -708.3964185322641

template <Real T>
constexpr T kExpFloor = T(0);  // below it exp(x) is under half the smallest subnormal: 0
template <>
constexpr float kExpFloor<float> = -104.0f;  // exp(-103.972) = 2^-150
template <>
constexpr double kExpFloor<double> = -746.0;  // exp(-745.133) = 2^-1075

// The row is worked through in blocks of 64 bytes (16 floats or 8 doubles: one AVX-512
// register, two AVX ones, four SSE ones), the last, partial block a packet at a time and its
// last, partial packet in a copy padded with -inf. So every entry goes through the same vector
// exp wherever it sits; array().exp() on a map of the row would send the entries before the
// first aligned address and after the last full packet through scalar expf, so that a score's
// weight would depend on the address of its row. Lane i of the sum adds the entries i, i + 16,
// i + 32, ... (floats), and the lanes are added pairwise in one fixed order at the end: a row's
// weights are the same bits wherever it sits in memory, its sum is added in the same order
// whatever the packet width, and each exponential passes through at most n / 16 + 4
// additions instead of n - 1 (40 rows of 1000: weights within 3.8 u of exact, 14 u serially).
template <Real T>
class ExpBlocks {
 public:
  static constexpr std::size_t kLanes = 64 / sizeof(T);

  explicit ExpBlocks(T max)
      : max_(ep::pset1<Packet>(max)),
        cutoff_(ep::pset1<Packet>(kExpCutoff<T>)),
        floor_(ep::pset1<Packet>(kExpFloor<T>)),
        half_(ep::pset1<Packet>(T(0.5))) {
    for (Packet& s : sums_) s = ep::pset1<Packet>(T(0));
  }

  // The kLanes entries at p become exp(entry - max), added to the lanes of the sum.
  void add(T* p) {
    for (std::size_t k = 0; k < kPackets; ++k) add_packet(k, p + k * kWidth);
  }

  // The same for the last n < kLanes entries of the row. Only the last packet is padded (with
  // -inf: weight 0, adding nothing to the sum), so a row of 4 costs one packet, not a block.
  void add_tail(T* p, std::size_t n) {
    std::size_t k = 0;
    for (; (k + 1) * kWidth <= n; ++k) add_packet(k, p + k * kWidth);
    const std::size_t done = k * kWidth;
    if (done == n) return;
    alignas(64) T padded[kWidth];
    std::fill(padded, padded + kWidth, -std::numeric_limits<T>::infinity());
    std::copy(p + done, p + n, padded);
    add_packet(k, padded);
    std::copy(padded, padded + (n - done), p + done);
  }

  // The lanes added pairwise, lane i to lane i + 8, then i + 4, ..., in the same order
  // whatever the packet width: whole packets first, then the lanes of the last one.
  T sum() {
    for (std::size_t half = kPackets / 2; half > 0; half /= 2) {
      for (std::size_t k = 0; k < half; ++k) sums_[k] = ep::padd(sums_[k], sums_[k + half]);
    }
    alignas(64) T lanes[kWidth];
    ep::pstore(lanes, sums_[0]);
    for (std::size_t half = kWidth / 2; half > 0; half /= 2) {
      for (std::size_t i = 0; i < half; ++i) lanes[i] += lanes[i + half];
    }
    return lanes[0];
  }

 private:
  using Packet = typename ep::packet_traits<T>::type;
  static constexpr std::size_t kWidth = ep::packet_traits<T>::size;
  static constexpr std::size_t kPackets = kLanes / kWidth;
  static_assert(kLanes % kWidth == 0, "a block is a whole number of packets");

  // Packet k of a block: exp(x - max) for its entries into sums_[k] (see kExpCutoff).
  void add_packet(std::size_t k, T* p) {
    const Packet shifted = ep::psub(ep::ploadu<Packet>(p), max_);  // <= 0, or -inf
    const Packet normal = ep::pcmp_le(cutoff_, shifted);
    Packet e = ep::pand(ep::pexp(ep::pmax(shifted, cutoff_)), normal);
    const Packet subnormal = ep::pandnot(ep::pcmp_le(floor_, shifted), normal);
    if (ep::predux_any(subnormal)) [[unlikely]] {
      const Packet root = ep::pexp(ep::pmax(ep::pmul(shifted, half_), cutoff_));
      e = ep::por(e, ep::pand(ep::pmul(root, root), subnormal));
    }
    ep::pstoreu(p, e);
    sums_[k] = ep::padd(sums_[k], e);
  }

  Packet max_, cutoff_, floor_, half_;
  Packet sums_[kPackets];
};

template <Real T>
bool stable_softmax(std::span<T> z) {
  if (z.empty()) return true;
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;  // [n], the span itself
  Row row(z.data(), static_cast<Index>(z.size()));
  // Pass 1: the maximum. PropagateNaN makes a NaN anywhere the maximum, instead of letting it
  // vanish (or not) depending on where it sits in the row; the maximum is exact in any order.
  const T max = row.template maxCoeff<Eigen::PropagateNaN>();
  // A NaN, or a +inf (every exp(x - inf) would be 0 or NaN, the sum NaN): the row is NaN,
  // as exp-normalisation gives it. Said here, so that pass 2 sees only a finite maximum.
  if (std::isnan(max) || max == std::numeric_limits<T>::infinity()) {
    row.setConstant(std::numeric_limits<T>::quiet_NaN());
    return true;
  }
  // Every key masked: exp(-inf - (-inf)) would be NaN. Attend to nothing instead.
  if (max == -std::numeric_limits<T>::infinity()) {
    row.setZero();
    return false;
  }
  // Pass 2: shifted exponentials, all in [0, 1], and their sum (>= 1: the max gives exp(0)).
  // x - max is -inf for a -inf entry and for a finite one more than max() below the maximum.
  ExpBlocks<T> blocks(max);
  constexpr std::size_t kLanes = ExpBlocks<T>::kLanes;
  const std::size_t full = z.size() - z.size() % kLanes;
  for (std::size_t i = 0; i < full; i += kLanes) blocks.add(z.data() + i);
  if (full < z.size()) blocks.add_tail(z.data() + full, z.size() - full);
  // Pass 3: normalise. One division, then multiplications, as PyTorch's CPU kernel does.
  row *= T(1) / blocks.sum();
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
