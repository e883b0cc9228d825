// attn::entropy, attn::softmax_jacobian, attn::softmax_jacobian_norm: hand-computed values,
// finite differences, the identities and bounds chapter 04 states, saturated rows, bad input.
#include "attn/softmax_stats.hpp"

#include <Eigen/Eigenvalues>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace {

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

}  // namespace
