// attn::entropy, attn::softmax_jacobian, attn::softmax_jacobian_norm: hand-computed values,
// finite differences, the identities and bounds chapter 04 states, saturated rows, bad input.
// Then the row statistics chapter 04 tabulates (weight_stats, WeightRowsTally, two_largest,
// median, mean_std_min_max), on rows small enough to work out by hand.
#include "attn/ops/softmax_stats.hpp"

#include <gtest/gtest.h>
#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace test_softmax_stats {

using attn::MatrixD;

// A reference softmax in double, independent of the library's float one.
std::vector<double> softmax_d(const std::vector<double>& z) {
  const double m = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size());
  double sum = 0.0;
  for (std::size_t j = 0; j < z.size(); ++j) sum += p[j] = std::exp(z[j] - m);
  for (double& x : p) x /= sum;
  return p;
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

TEST(Entropy, HandComputedValues) {
  // n equal weights: -n (1/n) ln(1/n) = ln n. 1/4 and 1/8 are exact in float.
  EXPECT_NEAR(attn::entropy(std::vector<float>(4, 0.25f)), std::log(4.0), 1e-15);
  EXPECT_NEAR(attn::entropy(std::vector<float>(8, 0.125f)), std::log(8.0), 1e-15);
  // One-hot: 1 ln 1 = 0, and 0 ln 0 is taken as its limit 0.
  EXPECT_EQ(attn::entropy(std::vector<float>{0.0f, 1.0f, 0.0f}), 0.0);
  // (1/4, 3/4): -(1/4) ln(1/4) - (3/4) ln(3/4) = ln 4 - (3/4) ln 3 = 0.5623351446...
  EXPECT_NEAR(attn::entropy(std::vector<float>{0.25f, 0.75f}), std::log(4.0) - 0.75 * std::log(3.0),
              1e-15);
  // Zero weights add nothing: (1/2, 0, 1/2) has the entropy of (1/2, 1/2).
  EXPECT_NEAR(attn::entropy(std::vector<float>{0.5f, 0.0f, 0.5f}), std::log(2.0), 1e-15);
  EXPECT_EQ(attn::entropy(std::vector<float>{}), 0.0);
}

TEST(Entropy, RejectsWeightsThatAreNotWeights) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {-0.25f, nan, inf}) {
    const std::vector<float> p = {0.5f, bad, 0.5f};
    EXPECT_THROW(attn::entropy(p), std::invalid_argument) << bad;
    EXPECT_THROW(attn::softmax_jacobian(p), std::invalid_argument) << bad;
    EXPECT_THROW(attn::softmax_jacobian_norm(p), std::invalid_argument) << bad;
  }
  try {
    attn::entropy(std::vector<float>{0.5f, -0.25f});
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("entropy: weight 1 is -0.25"), std::string::npos)
        << e.what();
  }
}

TEST(SoftmaxJacobian, HandComputedTwoWeights) {
  // p = (1/4, 3/4): J = [[p1 (1 - p1), -p1 p2], [-p2 p1, p2 (1 - p2)]] = 3/16 [[1, -1], [-1, 1]],
  // every number exact in binary, so the comparison is exact too.
  const MatrixD J = attn::softmax_jacobian(std::vector<float>{0.25f, 0.75f});
  MatrixD expected(2, 2);
  expected << 0.1875, -0.1875, -0.1875, 0.1875;
  EXPECT_EQ(J, expected);
  EXPECT_EQ(attn::softmax_jacobian(std::vector<float>{}).size(), 0);
}

TEST(SoftmaxJacobian, MatchesCentralDifferencesOfSoftmax) {
  const std::vector<double> z = {0.3, -1.2, 2.0, 0.7, -0.4, 1.1};
  const std::vector<double> p = softmax_d(z);
  const MatrixD J = attn::softmax_jacobian(to_float(p));
  const double h = 1e-5;
  for (std::size_t j = 0; j < z.size(); ++j) {
    std::vector<double> up = z, down = z;
    up[j] += h;
    down[j] -= h;
    const std::vector<double> pu = softmax_d(up), pd = softmax_d(down);
    for (std::size_t i = 0; i < z.size(); ++i) {
      const double fd = (pu[i] - pd[i]) / (2.0 * h);
      // Central differences are off by ~h^2 |p'''| ~ 1e-10 plus rounding ~1e-16 / h ~ 1e-11.
      // J is computed from p rounded to float (relative 6e-8 per weight): an entry
      // p_i * (sum of others) or p_i p_j moves by at most ~1.2e-7. So 3e-7 absolute.
      EXPECT_NEAR(J(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)), fd, 3e-7)
          << i << "," << j;
    }
  }
}

TEST(SoftmaxJacobian, SymmetricRowsSumToZeroPositiveSemidefinite) {
  const std::vector<float> p = to_float(softmax_d({1.0, 2.0, -0.5, 0.0, 3.0}));
  const MatrixD J = attn::softmax_jacobian(p);
  EXPECT_EQ(J, J.transpose());  // -p_i p_j and -p_j p_i are the same product
  // Row i sums to p_i (sum of the others) - p_i (sum of the others): equal terms in double,
  // so only the rounding of adding up five numbers of size <= 1/4 remains: < 1e-16.
  for (Eigen::Index i = 0; i < J.rows(); ++i) EXPECT_NEAR(J.row(i).sum(), 0.0, 1e-16);
  // diag(p) - p p^T is the covariance of a one-hot draw with probabilities p: its eigenvalues
  // are >= 0 (up to double rounding of entries <= 1/4), and one of them is 0 (direction 1...1).
  // The largest lies between the two largest weights (a rank-one update of diag(p) interlaces).
  const Eigen::SelfAdjointEigenSolver<MatrixD> eig(J);
  const Eigen::VectorXd ev = eig.eigenvalues();  // ascending
  EXPECT_GT(ev(0), -1e-15);
  EXPECT_LT(std::abs(ev(0)), 1e-15);
  std::vector<float> sorted = p;
  std::sort(sorted.rbegin(), sorted.rend());
  EXPECT_GE(ev(ev.size() - 1), sorted[1] - 1e-15);
  EXPECT_LE(ev(ev.size() - 1), sorted[0] + 1e-15);
}

TEST(SoftmaxJacobianNorm, HandComputedValues) {
  // Uniform over n: J = (1/n)(I - 11^T/n), whose squared entries sum to (n - 1) / n^2.
  for (int n : {1, 2, 4, 64}) {
    const std::vector<float> p(static_cast<std::size_t>(n), 1.0f / static_cast<float>(n));
    EXPECT_NEAR(attn::softmax_jacobian_norm(p), std::sqrt(n - 1.0) / n, 1e-15) << n;
  }
  // One-hot: every entry has a factor that is exactly 0.
  EXPECT_EQ(attn::softmax_jacobian_norm(std::vector<float>{0.0f, 1.0f, 0.0f}), 0.0);
  EXPECT_EQ(attn::softmax_jacobian_norm(std::vector<float>{}), 0.0);
}

TEST(SoftmaxJacobianNorm, EqualsTheFrobeniusNormOfTheMatrix) {
  for (double scale : {0.1, 1.0, 5.0, 30.0}) {
    std::vector<double> z;
    for (int j = 0; j < 16; ++j) z.push_back(scale * std::sin(1.7 * j + 0.3));
    const std::vector<float> p = to_float(softmax_d(z));
    // Both are sums of the same squares in double, added in another order: ~1e-16 relative.
    EXPECT_NEAR(attn::softmax_jacobian_norm(p), attn::softmax_jacobian(p).norm(),
                1e-14 * attn::softmax_jacobian(p).norm() + 1e-300)
        << scale;
  }
}

TEST(SoftmaxJacobianNorm, BoundedByTheLargestWeight) {
  // Chapter 04's bounds: p_max (1 - p_max) <= ||J||_F <= 2 (1 - p_max). The lower one is the
  // diagonal entry of the largest weight alone; the upper one: the row of p_max has squared
  // length <= 2 (1 - p_max)^2, and every other row i <= 2 p_i^2, which sum to <= 2 (1 - p_max)^2.
  for (double scale : {0.01, 0.3, 1.0, 3.0, 10.0, 40.0}) {
    std::vector<double> z;
    for (int j = 0; j < 64; ++j) z.push_back(scale * std::cos(2.3 * j * j + 0.1 * j));
    const std::vector<float> p = to_float(softmax_d(z));
    double p_max = 0.0, rest = 0.0;
    for (float x : p) p_max = std::max(p_max, static_cast<double>(x));
    for (float x : p) rest += x;
    rest -= p_max;  // 1 - p_max, from the float weights themselves
    const double norm = attn::softmax_jacobian_norm(p);
    EXPECT_GE(norm, p_max * rest * (1.0 - 1e-12)) << scale;
    EXPECT_LE(norm, 2.0 * rest * (1.0 + 1e-12)) << scale;
  }
}

TEST(SoftmaxJacobianNorm, SaturatedRowIsSmallButNotZero) {
  // p = (1, e, 0, 0) with e = 1e-20 (as float). Row 1 of J: (e, -e, 0, 0); row 2: (-e, e, 0, 0);
  // so ||J||_F = sqrt(4 e^2) = 2e. The textbook closed form sum p^2 - 2 sum p^3 + (sum p^2)^2
  // gives 1 - 2 + 1 = 0 in double here: the sums of the other weights are what keep 2e.
  const float e = 1e-20f;
  const std::vector<float> p = {1.0f, e, 0.0f, 0.0f};
  EXPECT_NEAR(attn::softmax_jacobian_norm(p), 2.0 * e, 1e-15 * e);
  const MatrixD J = attn::softmax_jacobian(p);
  EXPECT_EQ(J(0, 0), static_cast<double>(e));  // p_1 (1 - p_1) with 1 - p_1 taken as e, not 0
  EXPECT_EQ(J(1, 1), static_cast<double>(e));
}

// ---- Row statistics -----------------------------------------------------------------------------

// Several tests below compare exactly: their weights are dyadic (1/2, 1/4, 1/8), so every sum
// and product of them is exact in double, and a square root of an exact value is correctly
// rounded, the same double as the expected sqrt(.) written here.

TEST(WeightStats, HandComputedRow) {
  const std::vector<float> p = {0.125f, 0.5f, 0.25f, 0.125f, 0.0f};
  const attn::WeightStats s = attn::weight_stats(p);
  EXPECT_EQ(s.largest, 0.5);
  EXPECT_EQ(s.argmax, 1);
  EXPECT_EQ(s.runner_up, 0.25);
  EXPECT_EQ(s.above, 4);  // every weight but the 0 is above 1e-3
  EXPECT_EQ(s.zeros, 1);
  // H = 2 (1/8) ln 8 + (1/2) ln 2 + (1/4) ln 4 = (3/4 + 1/2 + 1/2) ln 2 = (7/4) ln 2. Four
  // logarithms of O(1) times weights <= 1/2, each rounded (~1.1e-16): 1e-15 absolute.
  EXPECT_NEAR(s.entropy, 1.75 * std::log(2.0), 1e-15);
  // ||J||_F^2 = sum_i p_i^2 ((1 - p_i)^2 + sum_{j != i} p_j^2), with sum_j p_j^2 = 22/64:
  // 1/8: (1/64)(49/64 + 21/64) = 70/4096 (twice); 1/2: (1/4)(16/64 + 6/64) = 352/4096;
  // 1/4: (1/16)(36/64 + 18/64) = 216/4096; 0: nothing. Total 708/4096. Exact (see above).
  EXPECT_EQ(s.jacobian_norm, std::sqrt(708.0) / 64.0);
}

TEST(WeightStats, TiesThresholdAndASingleWeight) {
  // Four equal weights: the first index wins the tie, the runner-up equals the leader, and
  // the entropy is ln 4 (two logarithms' rounding: 1e-15).
  const attn::WeightStats tie = attn::weight_stats(std::vector<float>(4, 0.25f));
  EXPECT_EQ(tie.argmax, 0);
  EXPECT_EQ(tie.largest, 0.25);
  EXPECT_EQ(tie.runner_up, 0.25);
  EXPECT_NEAR(tie.entropy, std::log(4.0), 1e-15);
  EXPECT_EQ(tie.zeros, 0);
  // "above" is strictly above: 0.25 > 0.2 counts, 0.25 > 0.25 does not.
  const std::vector<float> p = {0.5f, 0.25f, 0.125f, 0.125f};
  EXPECT_EQ(attn::weight_stats(p, 0.2).above, 2);
  EXPECT_EQ(attn::weight_stats(p, 0.25).above, 1);
  // One weight: it is 1, nothing competes, the entropy and the gradient are exactly 0.
  const attn::WeightStats one = attn::weight_stats(std::vector<float>{1.0f});
  EXPECT_EQ(one.largest, 1.0);
  EXPECT_EQ(one.runner_up, 0.0);
  EXPECT_EQ(one.entropy, 0.0);
  EXPECT_EQ(one.jacobian_norm, 0.0);
  EXPECT_EQ(one.above, 1);
}

TEST(WeightStats, RejectsNoWeightsAndBadWeights) {
  EXPECT_THROW(attn::weight_stats(std::vector<float>{}), std::invalid_argument);
  try {
    attn::weight_stats(std::vector<float>{0.5f, -0.25f, 0.75f});
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("weight_stats: weight 1 is -0.25"), std::string::npos)
        << e.what();
  }
}

TEST(WeightRowsTally, MeansAndMedianOverRowsAddedInBatches) {
  MatrixD rows(2, 4);              // [2 x 4]: uniform, then one-hot
  rows << 0.25, 0.25, 0.25, 0.25,  //
      1.0, 0.0, 0.0, 0.0;
  attn::WeightRowsTally t{attn::Matrix(rows.cast<float>())};
  // Uniform over 4: p_max 1/4, H = ln 4, ||J||_F = sqrt(3)/4 (sqrt(n - 1)/n); one-hot: 1, 0, 0.
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.mean_largest(), 0.625);
  EXPECT_NEAR(t.mean_entropy(), std::log(2.0), 1e-15);  // (ln 4) / 2: a logarithm's rounding
  EXPECT_EQ(t.mean_jacobian_norm(), std::sqrt(3.0) / 8.0);
  EXPECT_EQ(t.median_jacobian_norm(), std::sqrt(3.0) / 8.0);  // the mean of the middle two
  // A second batch: (1/2, 1/2, 0, 0) has p_max 1/2, H = ln 2, J = (1/4)[[1, -1], [-1, 1]] in
  // its first two rows and columns, so ||J||_F = sqrt(4/16) = 1/2.
  attn::Matrix half(1, 4);  // [1 x 4]
  half << 0.5f, 0.5f, 0.0f, 0.0f;
  t.add(half);
  EXPECT_EQ(t.rows(), 3);
  EXPECT_EQ(t.jacobian_norms(), (std::vector<double>{std::sqrt(3.0) / 4.0, 0.0, 0.5}));
  // Means of three: (1/4 + 1 + 1/2) / 3 and (sqrt(3)/4 + 0 + 1/2) / 3 are a sum and a division
  // of values below 1, two roundings of at most 2^-54 = 5.6e-17 each, so 1e-16; the entropies
  // (ln 4 + 0 + ln 2) / 3 = ln 2 carry the logarithms' rounding too, so 1e-15. The median of
  // {0.433, 0, 0.5} is the middle one, exactly.
  EXPECT_NEAR(t.mean_largest(), 1.75 / 3.0, 1e-16);
  EXPECT_NEAR(t.mean_entropy(), std::log(2.0), 1e-15);
  EXPECT_NEAR(t.mean_jacobian_norm(), (std::sqrt(3.0) / 4.0 + 0.5) / 3.0, 1e-16);
  EXPECT_EQ(t.median_jacobian_norm(), std::sqrt(3.0) / 4.0);
}

TEST(WeightRowsTally, ReadsAColumnBlockInPlace) {
  // Columns 1..2 of a [2 x 4] matrix are rows (1/2, 1/2) and (1, 0): a view with an outer
  // stride of 4, which must be read row by row, not as one contiguous run.
  attn::Matrix P(2, 4);         // [2 x 4]
  P << 9.0f, 0.5f, 0.5f, 9.0f,  //
      9.0f, 1.0f, 0.0f, 9.0f;
  const attn::WeightRowsTally t(P.middleCols(1, 2));
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.mean_largest(), 0.75);
  EXPECT_EQ(t.jacobian_norms(), (std::vector<double>{0.5, 0.0}));
}

TEST(WeightRowsTally, RejectsEmptyTalliesAndBadRows) {
  const attn::WeightRowsTally empty;
  EXPECT_EQ(empty.rows(), 0);
  EXPECT_THROW(empty.mean_largest(), std::invalid_argument);
  EXPECT_THROW(empty.mean_entropy(), std::invalid_argument);
  EXPECT_THROW(empty.mean_jacobian_norm(), std::invalid_argument);
  EXPECT_THROW(empty.median_jacobian_norm(), std::invalid_argument);
  EXPECT_THROW(attn::WeightRowsTally(attn::Matrix(2, 0)), std::invalid_argument);
  attn::Matrix negative(1, 2);  // [1 x 2]
  negative << 1.5f, -0.5f;
  EXPECT_THROW(attn::WeightRowsTally{negative}, std::invalid_argument);
}

TEST(TwoLargest, LeaderAndRunnerUp) {
  using P = std::pair<float, float>;
  EXPECT_EQ(attn::two_largest(std::vector<float>{1.0f, 2.0f}), P(2.0f, 1.0f));
  EXPECT_EQ(attn::two_largest(std::vector<float>{3.0f, -1.0f, 7.0f, 2.0f}), P(7.0f, 3.0f));
  EXPECT_EQ(attn::two_largest(std::vector<float>{3.0f, 7.0f, -1.0f, 7.0f}), P(7.0f, 7.0f));
  EXPECT_EQ(attn::two_largest(std::vector<float>{-5.0f, -2.0f, -9.0f}), P(-2.0f, -5.0f));
  // A masked logit is -inf: it can be the runner-up, and is when nothing else is left.
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(attn::two_largest(std::vector<float>{-inf, 1.0f, -inf}), P(1.0f, -inf));
  EXPECT_THROW(attn::two_largest(std::vector<float>{1.0f}), std::invalid_argument);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(attn::two_largest(std::vector<float>{1.0f, nan, 2.0f}), std::invalid_argument);
}

TEST(Median, OddAndEvenCounts) {
  const std::vector<double> odd = {3.0, 1.0, 2.0};
  EXPECT_EQ(attn::median(odd), 2.0);
  EXPECT_EQ(odd, (std::vector<double>{3.0, 1.0, 2.0}));  // the caller's order is left alone
  EXPECT_EQ(attn::median(std::vector<double>{4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(attn::median(std::vector<double>{5.0}), 5.0);
  EXPECT_THROW(attn::median(std::vector<double>{}), std::invalid_argument);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(attn::median(std::vector<double>{1.0, nan}), std::invalid_argument);
}

TEST(MeanStdMinMax, HandComputedSamples) {
  // 1, 2, 3, 6: mean 12/4 = 3, squared deviations 4 + 1 + 0 + 9 = 14, std sqrt(14/4). All
  // exact in binary until the square root, which is correctly rounded: compared exactly.
  attn::Matrix row(1, 4);  // [1 x 4]
  row << 1.0f, 2.0f, 3.0f, 6.0f;
  Eigen::RowVectorXd expected(4);  // [1 x 4]: mean, std, min, max
  expected << 3.0, std::sqrt(3.5), 1.0, 6.0;
  EXPECT_EQ(attn::mean_std_min_max(row), expected);
  // Every entry of a matrix counts, whatever its shape.
  attn::Matrix square(2, 2);  // [2 x 2]
  square << 6.0f, 2.0f, 3.0f, 1.0f;
  EXPECT_EQ(attn::mean_std_min_max(square), expected);
  EXPECT_THROW(attn::mean_std_min_max(attn::Matrix(0, 3)), std::invalid_argument);
}

}  // namespace test_softmax_stats
