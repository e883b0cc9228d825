// random.cpp: SplitMix64 seeding, xoshiro256** stream, 53-bit uniforms, polar-method normals.
#include "attn/core/random.hpp"

#include "attn/core/memory.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace attn {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t hash = 0xCBF29CE484222325ULL;  // the offset basis
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);  // the byte's value, whatever char's signedness
    hash *= 0x100000001B3ULL;               // the FNV prime; unsigned, so it wraps mod 2^64
  }
  return hash;
}

std::uint64_t stream_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t state = seed ^ fnv1a64(name);
  return splitmix64(state);
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

void Rng::restore(const State& s) {
  require(s.words != std::array<std::uint64_t, 4>{}, "Rng::restore",
          "the state is four zero words, which xoshiro256** never leaves: not a saved state");
  require(!s.has_spare || std::isfinite(s.spare), "Rng::restore",
          [&] { return "the spare normal value is " + std::to_string(s.spare); });
  state_ = s.words;
  has_spare_ = s.has_spare;
  spare_ = s.has_spare ? s.spare : 0.0;
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

namespace {

// A bound as a message shows it: "%g", so -DBL_MAX is -1.79769e+308, not 309 digits.
std::string num(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", x);
  return buffer;
}

// [lo, hi) is a range to draw from: lo <= hi, and hi - lo finite, which also makes both bounds
// finite (an infinite bound makes it inf or NaN; a NaN, NaN) and catches a finite range whose
// width overflows, (-DBL_MAX, DBL_MAX). Otherwise lo + (hi - lo) u is NaN or inf.
void check_range(double lo, double hi, const char* where) {
  const double width = hi - lo;
  require(width >= 0.0 && width <= std::numeric_limits<double>::max(), where, [&] {
    return "the range [" + num(lo) + ", " + num(hi) +
           ") cannot be sampled: it needs lo <= hi, both finite, and a finite width hi - lo";
  });
}

void check_normal(double mean, double stddev, const char* where) {
  require(std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0.0, where, [&] {
    return "mean " + num(mean) + " and stddev " + num(stddev) +
           ": both must be finite, and stddev >= 0";
  });
}

}  // namespace

double Rng::uniform(double lo, double hi) {
  check_range(lo, hi, "Rng::uniform");
  return lo + (hi - lo) * uniform();
}

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

double Rng::normal(double mean, double stddev) {
  check_normal(mean, stddev, "Rng::normal");
  return mean + stddev * normal();
}

Matrix random_normal(Rng& rng, Index rows, Index cols, double mean, double stddev) {
  require(rows >= 0 && cols >= 0, "random_normal",
          [&] { return "negative shape " + shape_str(rows, cols); });
  require_fits_in_memory("random_normal", ElementCount(rows, cols), sizeof(float), "for the matrix",
                         [&] { return shape_str(rows, cols); });
  check_normal(mean, stddev, "random_normal");
  Matrix m(rows, cols);  // m [rows x cols]
  // Row-major storage, so data() order is row by row: the documented fill order.
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(rng.normal(mean, stddev));
  return m;
}

Matrix random_uniform(Rng& rng, Index rows, Index cols, double lo, double hi) {
  require(rows >= 0 && cols >= 0, "random_uniform",
          [&] { return "negative shape " + shape_str(rows, cols); });
  require_fits_in_memory("random_uniform", ElementCount(rows, cols), sizeof(float),
                         "for the matrix", [&] { return shape_str(rows, cols); });
  check_range(lo, hi, "random_uniform");
  Matrix m(rows, cols);  // m [rows x cols]
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(rng.uniform(lo, hi));
  return m;
}

}  // namespace attn
