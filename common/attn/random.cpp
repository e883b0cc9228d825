// random.cpp: SplitMix64 seeding, xoshiro256** stream, 53-bit uniforms, polar-method normals.
#include "attn/random.hpp"

#include <cmath>

namespace attn {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

namespace {
constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(std::uint64_t seed) {
  // SplitMix64 never yields four zero words in a row, so the state is never all-zero
  // (the one state xoshiro cannot leave).
  std::uint64_t sm = seed;
  for (auto& word : state_) word = splitmix64(sm);
}

std::uint64_t Rng::next_u64() {
  const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const std::uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

double Rng::uniform() {
  // 53 random bits fill a double's mantissa exactly: k * 2^-53 for k in [0, 2^53).
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // Marsaglia's polar method: a uniform point in the unit disc (rejecting the corners of the
  // square, ~21% of draws) turns into two independent N(0, 1) values. Unlike Box-Muller it
  // needs no sin/cos, only log and the IEEE-exact sqrt.
  double u, v, s;
  do {
    u = 2.0 * uniform() - 1.0;
    v = 2.0 * uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double factor = std::sqrt(-2.0 * std::log(s) / s);
  spare_ = v * factor;
  has_spare_ = true;
  return u * factor;
}

double Rng::normal(double mean, double stddev) { return mean + stddev * normal(); }

Matrix random_normal(Rng& rng, Index rows, Index cols, double mean, double stddev) {
  require(rows >= 0 && cols >= 0, "random_normal", [&] {
    return "negative shape " + shape_str(rows, cols);
  });
  require(stddev >= 0.0, "random_normal", [&] {
    return "stddev must be >= 0, got " + std::to_string(stddev);
  });
  Matrix m(rows, cols);  // m [rows x cols]
  // Row-major storage, so data() order is row by row: the documented fill order.
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(rng.normal(mean, stddev));
  return m;
}

Matrix random_uniform(Rng& rng, Index rows, Index cols, double lo, double hi) {
  require(rows >= 0 && cols >= 0, "random_uniform", [&] {
    return "negative shape " + shape_str(rows, cols);
  });
  require(lo <= hi, "random_uniform", [&] {
    return "empty range [" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
  });
  Matrix m(rows, cols);  // m [rows x cols]
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(rng.uniform(lo, hi));
  return m;
}

}  // namespace attn
