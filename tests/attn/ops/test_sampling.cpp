// sampling.hpp (chapters 11 and 12): greedy decoding and its ties; temperature 0 and top-k 1
// are greedy; the empirical frequencies of many draws against softmax(logits / T) computed
// here, with and without top-k (ties at the k-th logit kept, as nanoGPT keeps them); the draw
// is the inverse CDF of one uniform in id order; low temperatures concentrate, tiny ones do
// not overflow; a seed gives one sequence, in float and double alike; the errors.
//
// The frequency tests' tolerance: with N independent draws, the count of id j is binomial
// (N, p_j), of standard deviation sqrt(N p_j (1 - p_j)). A count is allowed 5 of those from
// N p_j: a correct sampler leaves that band with probability 5.7e-7 per id where N p_j is
// large, and at most 2.2e-6 for the rarest id below (N p = 44; both from the exact binomial
// tails), and the seeds are fixed, so a pass is not luck that could change between runs. A
// wrong sampler misses by far more: sampling at T = 1 instead of T = 0.5 moves that id's p
// from 0.00022 to 0.0083, a count 240 standard deviations off at N = 200,000.
#include "attn/core/random.hpp"
#include "attn/ops/sampling.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

namespace test_sampling {

using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::Rng;
using attn::SamplingOptions;
using attn_test::message_of;

constexpr int kDraws = 200'000;
constexpr double kSigmas = 5.0;

Matrix row(std::initializer_list<float> values) {
  Matrix m(1, static_cast<Index>(values.size()));  // [1 x V]
  Index j = 0;
  for (float v : values) m(0, j++) = v;
  return m;
}

// softmax(z / T) over the ids whose logit is at least the k-th largest (all when k = 0),
// written directly from the formula (no maximum subtracted: these logits are small).
std::vector<double> expected_probabilities(const Matrix& z, double T, Index k) {
  std::vector<double> values(z.data(), z.data() + z.size());
  std::vector<double> sorted = values;
  std::sort(sorted.rbegin(), sorted.rend());
  const double threshold = k == 0 ? -std::numeric_limits<double>::infinity()
                                  : sorted[static_cast<std::size_t>(std::min(k, z.cols()) - 1)];
  std::vector<double> p(values.size(), 0.0);
  double sum = 0.0;
  for (std::size_t j = 0; j < values.size(); ++j) {
    if (values[j] >= threshold) sum += p[j] = std::exp(values[j] / T);
  }
  for (double& x : p) x /= sum;
  return p;
}

std::vector<int> counts_of(const Matrix& z, const SamplingOptions& opts, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<int> counts(static_cast<std::size_t>(z.cols()), 0);
  for (int i = 0; i < kDraws; ++i) ++counts[attn::sample_token<float>(z, opts, rng)];
  return counts;
}

// Every id's count within kSigmas binomial standard deviations of N p (header); an id of
// probability 0 never drawn at all.
void expect_frequencies(const Matrix& z, const SamplingOptions& opts, std::uint64_t seed) {
  const std::vector<double> p = expected_probabilities(z, opts.temperature, opts.top_k);
  const std::vector<int> counts = counts_of(z, opts, seed);
  for (std::size_t j = 0; j < p.size(); ++j) {
    const double mean = kDraws * p[j];
    const double sd = std::sqrt(kDraws * p[j] * (1.0 - p[j]));
    if (p[j] == 0.0) {
      EXPECT_EQ(counts[j], 0) << "id " << j << " is outside the top " << opts.top_k;
    } else {
      EXPECT_NEAR(counts[j], mean, kSigmas * sd) << "id " << j << ", T = " << opts.temperature
                                                 << ", top_k = " << opts.top_k << ": p = " << p[j];
    }
  }
}

TEST(SampleToken, GreedyIsTheLargestLogitTheLowestIdOnATie) {
  EXPECT_EQ(attn::greedy_token<float>(row({0.5f, 2.0f, -1.0f, 1.0f})), 1);
  EXPECT_EQ(attn::greedy_token<float>(row({0.5f, 2.0f, -1.0f, 2.0f})), 1);  // tie: lower id
  EXPECT_EQ(attn::greedy_token<float>(row({3.0f})), 0);
  EXPECT_EQ(attn::greedy_token<double>(MatrixD::Constant(1, 5, -7.0)), 0);

  // Temperature 0 is greedy, ties included, and takes no draw from the generator.
  Rng rng(3);
  const Rng::State before = rng.state();
  for (const Matrix& z : {row({0.5f, 2.0f, -1.0f, 2.0f}), row({-4.0f, -3.0f, -3.5f})}) {
    EXPECT_EQ(attn::sample_token<float>(z, {.temperature = 0.0}, rng),
              attn::greedy_token<float>(z));
    EXPECT_EQ(attn::sample_token<float>(z, {.temperature = 0.0, .top_k = 2}, rng),
              attn::greedy_token<float>(z));
  }
  EXPECT_EQ(rng.state().words, before.words);
}

TEST(SampleToken, TopKOfOneIsGreedyWhenTheLargestLogitIsUnique) {
  // Random rows (a tie among 50 normal floats would be a coincidence; checked below), at a
  // temperature high enough that plain sampling would often pick another id.
  Rng data(11), rng(12);
  int differs_without_k = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const Matrix z = attn::random_normal(data, 1, 50);
    ASSERT_EQ((z.array() == z.maxCoeff()).count(), 1);
    const int greedy = attn::greedy_token<float>(z);
    EXPECT_EQ(attn::sample_token<float>(z, {.temperature = 3.0, .top_k = 1}, rng), greedy);
    differs_without_k += attn::sample_token<float>(z, {.temperature = 3.0}, rng) != greedy;
  }
  EXPECT_GT(differs_without_k, 100);  // so the top-k of 1 above is what made it greedy
}

TEST(SampleToken, FrequenciesMatchTheSoftmaxAtTheTemperature) {
  const Matrix z = row({1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 2.5f});
  expect_frequencies(z, {.temperature = 1.0}, 1);
  expect_frequencies(z, {.temperature = 0.5}, 2);  // sharper: id 3 has p = 0.00022
  expect_frequencies(z, {.temperature = 4.0}, 3);  // flatter, towards uniform
}

TEST(SampleToken, TopKSamplesTheRenormalisedSoftmaxOfTheKLargest) {
  const Matrix z = row({1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 2.5f});
  expect_frequencies(z, {.temperature = 1.0, .top_k = 3}, 4);  // ids 1, 4, 5
  expect_frequencies(z, {.temperature = 2.0, .top_k = 5}, 5);  // all but id 3
  // A tie at the k-th largest keeps every id tied with it (nanoGPT drops only logits < v_k):
  // k = 2 keeps 3.0 and both 2.0s, three ids.
  const Matrix tied = row({1.0f, 2.0f, 3.0f, 2.0f, 0.0f});
  const std::vector<int> counts = counts_of(tied, {.temperature = 1.0, .top_k = 2}, 6);
  EXPECT_EQ(counts[0] + counts[4], 0);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[3], 0);
  expect_frequencies(tied, {.temperature = 1.0, .top_k = 2}, 6);
}

TEST(SampleToken, TopKNeverReturnsAnIdOutsideTheTopK) {
  Rng data(21), rng(22);
  for (int trial = 0; trial < 100; ++trial) {
    const Matrix z = attn::random_normal(data, 1, 40);
    std::vector<float> sorted(z.data(), z.data() + z.size());
    std::sort(sorted.rbegin(), sorted.rend());
    for (const Index k : {Index{1}, Index{2}, Index{5}, Index{10}}) {
      const float v_k = sorted[static_cast<std::size_t>(k - 1)];
      for (int draw = 0; draw < 50; ++draw) {
        // A high temperature, so that the ids outside the top k would be drawn if they could.
        const int id = attn::sample_token<float>(z, {.temperature = 10.0, .top_k = k}, rng);
        EXPECT_GE(z(0, id), v_k) << "k = " << k << ", id " << id;
      }
    }
  }
}

TEST(SampleToken, ATopKAboveTheVocabularyKeepsEveryId) {
  const Matrix z = row({1.0f, 2.0f, 0.5f});
  Rng a(8), b(8);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(attn::sample_token<float>(z, {.top_k = 0}, a),
              attn::sample_token<float>(z, {.top_k = 50}, b));
  }
}

TEST(SampleToken, IsTheInverseCdfOfOneUniformInIdOrder) {
  // Two equal logits: p = (1/2, 1/2), so the id is 0 exactly when the draw u is below 1/2.
  // A copy of the generator shows each u; that every call took exactly one draw is what keeps
  // the copy in step for 1,000 calls.
  const Matrix z = row({0.25f, 0.25f});
  Rng rng(9);
  Rng copy = rng;
  for (int i = 0; i < 1000; ++i) {
    const double u = copy.uniform();
    EXPECT_EQ(attn::sample_token<float>(z, {.temperature = 0.7}, rng), u < 0.5 ? 0 : 1) << u;
  }
  // Three logits, top-k 2 at any temperature: still one draw per call.
  for (int i = 0; i < 100; ++i) {
    attn::sample_token<float>(row({1.0f, -2.0f, 0.5f}), {.temperature = 1.5, .top_k = 2}, rng);
    copy.uniform();
  }
  EXPECT_EQ(rng.state().words, copy.state().words);
}

TEST(SampleToken, ALowTemperatureConcentratesOnTheLargestLogit) {
  // At T = 0.01 the runner-up, 0.2 below the largest, has weight exp(-20) = 2e-9.
  const Matrix z = row({1.0f, 1.2f, 0.9f, 1.0f});
  Rng rng(10);
  for (int i = 0; i < 10'000; ++i) {
    ASSERT_EQ(attn::sample_token<float>(z, {.temperature = 0.01}, rng), 1);
  }
  // At a tiny temperature z / T would overflow (1e30 / 1e-300 is inf, and inf - inf NaN);
  // (z - max) / T is -inf at worst, whose exp is 0. Two tied maxima keep weight 1 each, so
  // both are drawn (NaN weights would leave the draw to the fallback, the last id, always).
  const MatrixD huge = (MatrixD(1, 4) << 1e30, -1e30, 0.0, 1e30).finished();
  std::vector<int> huge_counts(4, 0);
  for (int i = 0; i < 1000; ++i) {
    ++huge_counts[attn::sample_token<double>(huge, {.temperature = 1e-300}, rng)];
  }
  EXPECT_EQ(huge_counts[1] + huge_counts[2], 0);
  EXPECT_GT(huge_counts[0], 400);
  EXPECT_GT(huge_counts[3], 400);
  // Two tied maxima at a tiny temperature: each keeps weight 1, so both are drawn.
  const Matrix tie = row({2.0f, -1.0f, 2.0f});
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 1000; ++i)
    ++counts[attn::sample_token<float>(tie, {.temperature = 1e-6}, rng)];
  EXPECT_EQ(counts[1], 0);
  EXPECT_GT(counts[0], 400);
  EXPECT_GT(counts[2], 400);
}

TEST(SampleToken, TheSameSeedGivesTheSameSequenceInFloatAndDouble) {
  Rng data(13);
  const Matrix z = attn::random_normal(data, 1, 30);
  const MatrixD zd = z.cast<double>();  // the same values: the sampler works in double anyway
  const SamplingOptions opts{.temperature = 0.8, .top_k = 12};
  Rng a(14), b(14), c(14), other(15);
  int differs = 0;
  for (int i = 0; i < 1000; ++i) {
    const int id = attn::sample_token<float>(z, opts, a);
    EXPECT_EQ(id, attn::sample_token<float>(z, opts, b));
    EXPECT_EQ(id, attn::sample_token<double>(zd, opts, c));
    differs += id != attn::sample_token<float>(z, opts, other);
  }
  EXPECT_GT(differs, 100);  // another seed is another sequence
}

TEST(SampleToken, RefusesBadRowsOptionsAndLogits) {
  Rng rng(1);
  const Matrix z = row({0.0f, 1.0f, 2.0f});
  const auto sample = [&](const Matrix& logits, SamplingOptions opts) {
    return message_of([&] { attn::sample_token<float>(logits, opts, rng); });
  };
  EXPECT_EQ(sample(Matrix::Zero(2, 3), {}),
            "sample_token: logits are [2 x 3]: one row of at least one logit");
  EXPECT_EQ(sample(Matrix::Zero(1, 0), {}),
            "sample_token: logits are [1 x 0]: one row of at least one logit");
  EXPECT_EQ(message_of([] { attn::greedy_token<float>(Matrix::Zero(3, 1)); }),
            "greedy_token: logits are [3 x 1]: one row of at least one logit");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(sample(z, {.temperature = -0.5}),
            "sample_token: temperature -0.5: it must be finite and >= 0 (0 is greedy)");
  EXPECT_EQ(sample(z, {.temperature = nan}),
            "sample_token: temperature nan: it must be finite and >= 0 (0 is greedy)");
  EXPECT_EQ(sample(z, {.temperature = inf}),
            "sample_token: temperature inf: it must be finite and >= 0 (0 is greedy)");
  EXPECT_EQ(sample(z, {.top_k = -1}), "sample_token: top_k -1: it must be >= 0 (0 keeps every id)");
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    Matrix with_bad = z;
    with_bad(0, 2) = bad;
    // Refused at temperature 0 too: greedy would silently pass over a NaN.
    for (const double T : {0.0, 1.0}) {
      EXPECT_EQ(sample(with_bad, {.temperature = T}), "sample_token: the logit of id 2 is " +
                                                          std::string(std::isnan(bad) ? "nan"
                                                                      : bad > 0       ? "inf"
                                                                                      : "-inf") +
                                                          ": every logit must be finite");
    }
  }
  // Nothing was drawn by a refused call.
  EXPECT_EQ(rng.state().words, Rng(1).state().words);
}

}  // namespace test_sampling
