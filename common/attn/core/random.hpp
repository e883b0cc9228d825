/// @file
/// One seeded generator for every chapter, identical on every platform.
///
/// std::normal_distribution (and even std::uniform_real_distribution) are specified only up
/// to their distribution, so libstdc++, libc++ and MSVC print different numbers for the same
/// seed. The course needs the same bytes everywhere, so it fixes the whole chain itself:
///   seed --SplitMix64--> xoshiro256** state --> 53-bit uniform --> Marsaglia polar normal.
/// Every step is integer arithmetic or IEEE-exact (+, *, /, sqrt) except one std::log call.
#pragma once

#include "attn/core/matrix.hpp"

#include <array>
#include <cstdint>
#include <string_view>

namespace attn {

/// SplitMix64 (Steele, Lea, Flood 2014): expands one 64-bit seed into well-mixed words.
std::uint64_t splitmix64(std::uint64_t& state);

/// The 64-bit FNV-1a hash of `bytes` (Fowler, Noll, Vo): from the offset basis
/// 0xCBF29CE484222325, xor each byte in, then multiply by the prime 0x100000001B3. Not a
/// cryptographic hash: a fingerprint that names a stream (stream_seed below) or tells one text
/// from another (chapter 12 checks its corpus with it), the same on every platform.
std::uint64_t fnv1a64(std::string_view bytes);

/// The seed of the stream called `name` under `seed`, for a second use of randomness in one
/// run (a held-out set, the upstream gradient of a backward demo): SplitMix64 of seed XOR the
/// name's fnv1a64 hash. Rng(seed + 1) would be seed + 1's own stream, so --seed 5's
/// "second" draws would be --seed 6's first; a named stream is no seed's own stream, and two
/// names under one seed differ. Integer arithmetic only: the same on every platform.
std::uint64_t stream_seed(std::uint64_t seed, std::string_view name);

class Rng {
 public:
  explicit Rng(std::uint64_t seed);

  /// Next raw output of xoshiro256** (Blackman & Vigna 2018).
  std::uint64_t next_u64();

  /// Uniform on [0, 1): the top 53 bits of next_u64() scaled by 2^-53, so every value is exact.
  double uniform();
  /// lo + (hi - lo) uniform(). Throws std::invalid_argument unless lo <= hi and lo, hi and
  /// hi - lo are finite (otherwise the result would be NaN or inf).
  double uniform(double lo, double hi);

  /// Standard normal by Marsaglia's polar method. Values come in pairs; the second is kept
  /// for the next call, so the sequence depends only on the seed and the call order.
  double normal();
  /// mean + stddev normal(). Throws std::invalid_argument unless both are finite, stddev >= 0.
  double normal(double mean, double stddev);

  /// Where the stream stands: all it takes to continue it exactly, as a training checkpoint
  /// saves it (PyTorch saves torch.get_rng_state() for the same reason).
  struct State {
    std::array<std::uint64_t, 4> words{};  ///< xoshiro256**'s state
    bool has_spare = false;                ///< normal() holds the second value of a pair
    double spare = 0.0;                    ///< that value
  };
  State state() const { return {state_, has_spare_, spare_}; }
  /// Continues the stream from `s`: the draws after it are those that followed state().
  /// Throws std::invalid_argument for four zero words (the one state xoshiro never leaves,
  /// which no seed makes) or a held spare that is not finite.
  void restore(const State& s);

 private:
  std::array<std::uint64_t, 4> state_{};
  bool has_spare_ = false;
  double spare_ = 0.0;
};

/// A [rows x cols] matrix of N(mean, stddev^2) samples, filled row by row (row-major order),
/// each drawn in double and rounded once to float. Throws std::invalid_argument for a negative
/// shape, a shape whose floats the machine cannot hold or an Index cannot count (memory.hpp),
/// or unless mean and stddev are finite and stddev >= 0.
Matrix random_normal(Rng& rng, Index rows, Index cols, double mean = 0.0, double stddev = 1.0);

/// A [rows x cols] matrix of U[lo, hi) samples, filled row by row. Throws
/// std::invalid_argument for a negative shape, one the machine cannot hold, or unless lo <= hi and
/// lo, hi and hi - lo are finite (random_uniform(-inf, inf) would be NaN everywhere).
Matrix random_uniform(Rng& rng, Index rows, Index cols, double lo, double hi);

}  // namespace attn
