// attn::Rng: bit-exact against published SplitMix64 values and an independent Python
// transcription of xoshiro256** (scripts/fixtures/rng.py), plus distribution statistics.
#include "attn/core/random.hpp"
#include "course/npy.hpp"

#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace test_random {

const std::string kData = attn_test::fixture_folder("rng").string();

TEST(SplitMix64, MatchesPublishedReferenceOutputs) {
  // The first outputs for seed 1234567 from the reference implementation (Vigna).
  std::uint64_t state = 1234567;
  EXPECT_EQ(attn::splitmix64(state), 6457827717110365317ULL);
  EXPECT_EQ(attn::splitmix64(state), 3203168211198807973ULL);
  EXPECT_EQ(attn::splitmix64(state), 9817491932198370423ULL);
  EXPECT_EQ(attn::splitmix64(state), 4593380528125082431ULL);
  EXPECT_EQ(attn::splitmix64(state), 16408922859458223821ULL);
}

class RngStream : public ::testing::TestWithParam<int> {};

TEST_P(RngStream, RawWordsMatchIndependentPythonImplementation) {
  const int seed = GetParam();
  const course::NpyArray ref =
      course::read_npy(kData + "/rng_u64_seed" + std::to_string(seed) + ".npy");
  ASSERT_EQ(ref.shape.size(), 2u);
  attn::Rng rng(static_cast<std::uint64_t>(seed));
  for (std::size_t i = 0; i < ref.shape[0]; ++i) {
    const auto hi = static_cast<std::uint64_t>(ref.data[2 * i]);
    const auto lo = static_cast<std::uint64_t>(ref.data[2 * i + 1]);
    EXPECT_EQ(rng.next_u64(), (hi << 32) | lo) << "word " << i;
  }
}

TEST_P(RngStream, UniformsMatchExactly) {
  const int seed = GetParam();
  const course::NpyArray ref =
      course::read_npy(kData + "/rng_uniform_seed" + std::to_string(seed) + ".npy");
  attn::Rng rng(static_cast<std::uint64_t>(seed));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double u = rng.uniform();
    EXPECT_EQ(u, ref.data[i]) << "draw " << i;  // k * 2^-53 is exact on both sides
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST_P(RngStream, NormalsMatchPythonPolarMethod) {
  const int seed = GetParam();
  const course::NpyArray ref =
      course::read_npy(kData + "/rng_normal_seed" + std::to_string(seed) + ".npy");
  attn::Rng rng(static_cast<std::uint64_t>(seed));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    // Same operations in the same order; only log comes from the C library, and glibc's is
    // correctly rounded in practice. EXPECT_DOUBLE_EQ (4 ulps) leaves room for another libm.
    EXPECT_DOUBLE_EQ(rng.normal(), ref.data[i]) << "draw " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RngStream, ::testing::Values(0, 42, 2026));

TEST(Rng, SameSeedSameStreamDifferentSeedDifferentStream) {
  attn::Rng a(7), b(7), c(8);
  bool any_difference = false;
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    any_difference |= (x != c.next_u64());
  }
  EXPECT_TRUE(any_difference);
}

// stream_seed = SplitMix64(seed ^ FNV-1a(name)). The expected words come from a separate
// Python implementation of both (its FNV-1a gives the published vectors: "" cbf29ce484222325,
// "a" af63dc4c8601ec8c, "foobar" 85944171f73967e8).
TEST(StreamSeed, MatchesAnIndependentImplementation) {
  EXPECT_EQ(attn::stream_seed(0, ""), 0xC3817C016BA4FF30ULL);
  EXPECT_EQ(attn::stream_seed(0, "a"), 0x5F29C2AADD9B8527ULL);
  EXPECT_EQ(attn::stream_seed(42, "held-out"), 0x18A0EA43123ECD9CULL);
  EXPECT_EQ(attn::stream_seed(7, "dO"), 0x8571F6BB4B066D47ULL);
}

// What seed + 1 got wrong: seed s's second stream was seed s + 1's main one. A named stream
// is none of the seeds a learner would type, and two names under one seed start differently.
TEST(StreamSeed, IsNoSmallSeedsMainStreamAndNamesDiffer) {
  for (std::uint64_t seed = 0; seed < 1000; ++seed) {
    const std::uint64_t held_out = attn::stream_seed(seed, "held-out");
    EXPECT_GE(held_out, 1000000u) << "seed " << seed;
    EXPECT_NE(held_out, attn::stream_seed(seed, "held-out "));
    EXPECT_NE(held_out, attn::stream_seed(seed + 1, "held-out"));
    EXPECT_EQ(held_out, attn::stream_seed(seed, "held-out"));  // a function of its arguments
  }
}

TEST(Rng, NormalMomentsWithinSamplingError) {
  // n draws of N(3, 2^2): the sample mean has standard error 2/sqrt(n); the sample variance
  // of a normal has standard error sigma^2 sqrt(2/(n-1)). Five standard errors is a bound a
  // correct generator fails with probability ~6e-7, while a wrong transform misses by far more.
  constexpr int n = 200000;
  attn::Rng rng(123);
  double sum = 0.0, sum_sq = 0.0;
  for (int i = 0; i < n; ++i) {
    const double x = rng.normal(3.0, 2.0);
    sum += x;
    sum_sq += x * x;
  }
  const double mean = sum / n;
  const double var = (sum_sq - n * mean * mean) / (n - 1);
  EXPECT_NEAR(mean, 3.0, 5.0 * 2.0 / std::sqrt(n));
  EXPECT_NEAR(var, 4.0, 5.0 * 4.0 * std::sqrt(2.0 / (n - 1)));
}

TEST(Rng, UniformMomentsWithinSamplingError) {
  // U[-1, 1): mean 0 with standard error sqrt(1/3)/sqrt(n); variance 1/3 with standard error
  // sqrt((mu4 - sigma^4)/n) = sqrt((1/5 - 1/9)/n). Same five-standard-error bound as above.
  constexpr int n = 200000;
  attn::Rng rng(321);
  double sum = 0.0, sum_sq = 0.0;
  for (int i = 0; i < n; ++i) {
    const double x = rng.uniform(-1.0, 1.0);
    ASSERT_GE(x, -1.0);
    ASSERT_LT(x, 1.0);
    sum += x;
    sum_sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 5.0 * std::sqrt(1.0 / 3.0 / n));
  EXPECT_NEAR(sum_sq / n, 1.0 / 3.0, 5.0 * std::sqrt((1.0 / 5.0 - 1.0 / 9.0) / n));
}

TEST(RandomMatrix, FillsRowByRowFromTheStream) {
  attn::Rng stream(5), for_matrix(5);
  const attn::Matrix m = attn::random_normal(for_matrix, 2, 3, 1.0, 0.5);  // m [2 x 3]
  ASSERT_EQ(m.rows(), 2);
  ASSERT_EQ(m.cols(), 3);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(m(r, c), static_cast<float>(stream.normal(1.0, 0.5))) << r << "," << c;
    }
  }
  const attn::Matrix u = attn::random_uniform(for_matrix, 4, 5, -2.0, 2.0);  // u [4 x 5]
  EXPECT_LE(u.maxCoeff(), 2.0f);
  EXPECT_GE(u.minCoeff(), -2.0f);
}

TEST(RandomMatrix, RejectsBadArgumentsLoudly) {
  attn::Rng rng(1);
  EXPECT_THROW(attn::random_normal(rng, -1, 3), std::invalid_argument);
  EXPECT_THROW(attn::random_normal(rng, 2, 3, 0.0, -1.0), std::invalid_argument);
  EXPECT_THROW(attn::random_uniform(rng, 2, 2, 1.0, 0.0), std::invalid_argument);
  EXPECT_EQ(attn::random_normal(rng, 0, 3).size(), 0);  // empty is fine, not an error
}

// Issue 11: random_uniform(-inf, inf) passed the check lo <= hi and returned NaN everywhere
// (lo + (hi - lo) u = -inf + inf u). A range is now refused unless its bounds and its width are
// finite and lo <= hi: (-DBL_MAX, DBL_MAX) has finite bounds but a width that overflows to inf.
// The same for the draws of Rng itself, and for random_normal's mean and stddev.
TEST(RandomMatrix, RejectsRangesAndParametersThatAreNotFinite) {
  attn::Rng rng(1);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double big = std::numeric_limits<double>::max();
  for (const auto& [lo, hi] :
       {std::pair{-inf, inf}, std::pair{0.0, inf}, std::pair{-inf, 0.0}, std::pair{nan, 1.0},
        std::pair{0.0, nan}, std::pair{1.0, 0.0}, std::pair{-big, big}}) {
    // Clang 14 cannot capture a structured binding; the lambda takes the pair's halves by value.
    const std::string m = attn_test::message_of(
        [&rng, lo = lo, hi = hi] { attn::random_uniform(rng, 2, 2, lo, hi); });
    EXPECT_EQ(m.rfind("random_uniform: the range [", 0), 0u) << lo << ", " << hi << ": " << m;
    EXPECT_NE(m.find("lo <= hi, both finite, and a finite width hi - lo"), std::string::npos) << m;
    EXPECT_THROW(rng.uniform(lo, hi), std::invalid_argument) << lo << ", " << hi;
  }
  for (const auto& [mean, stddev] :
       {std::pair{inf, 1.0}, std::pair{nan, 1.0}, std::pair{0.0, inf}, std::pair{0.0, nan}}) {
    const std::string m = attn_test::message_of(
        [&rng, mean = mean, stddev = stddev] { attn::random_normal(rng, 2, 2, mean, stddev); });
    EXPECT_EQ(m.rfind("random_normal: ", 0), 0u) << mean << ", " << stddev << ": " << m;
    EXPECT_THROW(rng.normal(mean, stddev), std::invalid_argument) << mean << ", " << stddev;
  }
  // What stays allowed: an empty range lo == hi gives lo exactly (lo + 0 * u); a wide range whose
  // samples fit a float gives finite samples.
  EXPECT_TRUE(attn::random_uniform(rng, 1, 3, 2.5, 2.5).isConstant(2.5f, 0.0f));
  EXPECT_TRUE(attn::random_uniform(rng, 4, 4, -1e30, 1e30).allFinite());
  EXPECT_TRUE(attn::random_normal(rng, 1, 3, 1.5, 0.0).isConstant(1.5f, 0.0f));  // stddev 0: mean
}

// ---- Saving and restoring the stream ---------------------------------------------------------

TEST(RngState, ARestoredStreamContinuesExactly) {
  attn::Rng a(11);
  for (int i = 0; i < 5; ++i) a.next_u64();
  a.normal();  // one normal: its pair's second value is held for the next call
  const attn::Rng::State saved = a.state();
  EXPECT_TRUE(saved.has_spare);
  attn::Rng b(999);  // another stream altogether, until restored
  b.restore(saved);
  EXPECT_EQ(a.normal(), b.normal()) << "the held value came along";
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(a.next_u64(), b.next_u64()) << "draw " << i;
    ASSERT_EQ(a.normal(), b.normal()) << "draw " << i;
  }
}

TEST(RngState, ARestoreDropsAHeldValueTheStateDoesNotHave) {
  attn::Rng a(12);
  const attn::Rng::State fresh = a.state();  // nothing held
  attn::Rng b(12);
  b.normal();  // b holds a value a does not
  b.restore(fresh);
  EXPECT_EQ(a.normal(), b.normal());
}

TEST(RngState, AStateNoStreamCanBeInIsRefused) {
  attn::Rng rng(13);
  const attn::Rng::State before = rng.state();
  EXPECT_NE(attn_test::message_of([&] { rng.restore({}); }).find("Rng::restore"),
            std::string::npos);
  attn::Rng::State nan_spare = before;
  nan_spare.has_spare = true;
  nan_spare.spare = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(attn_test::message_of([&] { rng.restore(nan_spare); }), "(no exception)");
  EXPECT_EQ(rng.state().words, before.words) << "a refused restore changes nothing";
}

TEST(RandomShapes, MatricesTheMachineCannotHoldAreRefusedBeforeDrawing) {
  attn::Rng rng(5);
  const attn::Index n = attn::Index{1} << 20;
  const std::string m = attn_test::message_of([&] { attn::random_normal(rng, n, n); });
  EXPECT_EQ(m.rfind("random_normal: [1048576 x 1048576] needs 4.0 TiB for the matrix", 0), 0u) << m;
  const std::string u =
      attn_test::message_of([&] { attn::random_uniform(rng, n, n * n * n, 0.0, 1.0); });
  EXPECT_NE(u.find("(more elements than an Index can count)"), std::string::npos) << u;
}

}  // namespace test_random
