// attn::softmax_*: values by hand, invariances, and the awkward inputs (masks, overflow, NaN).
#include "attn/softmax.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Softmax in float: each weight carries a few float roundings (exp, sum, one reciprocal,
// one product), so 1e-6 absolute is a few ulps of weights <= 1.
constexpr float kTol = 1e-6f;

TEST(Softmax, HandComputedValues) {
  // exp(0) : exp(ln 2) : exp(ln 3) = 1 : 2 : 3, so the weights are 1/6, 2/6, 3/6.
  attn::Matrix z(1, 3);
  z << 0.0f, std::log(2.0f), std::log(3.0f);
  const attn::Matrix w = attn::softmax_rows(z);
  EXPECT_NEAR(w(0, 0), 1.0f / 6, kTol);
  EXPECT_NEAR(w(0, 1), 2.0f / 6, kTol);
  EXPECT_NEAR(w(0, 2), 3.0f / 6, kTol);
  // Equal logits share equally.
  const attn::Matrix flat = attn::softmax_rows(attn::Matrix::Constant(1, 4, 7.0f));
  for (int j = 0; j < 4; ++j) EXPECT_EQ(flat(0, j), 0.25f);  // exp(0)=1, 1/4 exact
}

TEST(Softmax, RowsSumToOneAndShiftInvariance) {
  attn::Matrix z(3, 5);
  z << 1, -2, 3, 0.5, 9,  //
      -40, -41, -39, -40, -40,  //
      100, 0, -100, 50, 99;
  const attn::Matrix w = attn::softmax_rows(z);
  const attn::Matrix shifted = attn::softmax_rows((z.array() + 1234.0f).matrix());
  for (int r = 0; r < 3; ++r) {
    EXPECT_NEAR(w.row(r).sum(), 1.0f, kTol);
    for (int c = 0; c < 5; ++c) {
      EXPECT_GE(w(r, c), 0.0f);
      // Adding 1234 rounds each logit to float spacing 2^-13 ~ 1.2e-4 near 1234, which moves
      // a weight w by up to w * 1.2e-4: the tolerance is that, not kTol.
      EXPECT_NEAR(shifted(r, c), w(r, c), 1.3e-4f * w(r, c) + kTol);
    }
  }
}

TEST(Softmax, ColumnsAreRowsOfTheTranspose) {
  attn::Matrix z(3, 4);
  z << 1, 2, 3, 4, -1, 0, 1, 2, 5, 5, 5, 5;
  const attn::Matrix by_col = attn::softmax_cols(z);
  const attn::Matrix by_row = attn::softmax_rows(z.transpose());
  EXPECT_EQ(by_col, by_row.transpose());  // the same float operations in the same order
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(by_col.col(c).sum(), 1.0f, kTol);
}

TEST(Softmax, MaskedEntriesGetExactlyZero) {
  attn::Matrix z(1, 4);
  z << 2.0f, -kInf, 1.0f, -kInf;
  const attn::Matrix w = attn::softmax_rows(z);
  EXPECT_EQ(w(0, 1), 0.0f);
  EXPECT_EQ(w(0, 3), 0.0f);
  EXPECT_NEAR(w(0, 0) + w(0, 2), 1.0f, kTol);
  EXPECT_NEAR(w(0, 0) / w(0, 2), std::exp(1.0f), 1e-5f);  // e^2 / e^1, ratio of float exps
}

TEST(Softmax, FullyMaskedRowIsZerosNotNaN) {
  attn::Matrix z(2, 3);
  z << -kInf, -kInf, -kInf, 0, 0, 0;
  const attn::Matrix w = attn::softmax_rows(z);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(w(0, c), 0.0f);
    EXPECT_NEAR(w(1, c), 1.0f / 3, kTol);
  }
}

// Issue 11 (item 14): attention must tell a row the mask emptied from one whose scores all came
// out -inf, so softmax_inplace reports the one case it turns into zeros: every entry -inf.
TEST(Softmax, InplaceReportsARowThatWasAllMinusInfinity) {
  std::vector<float> all_blocked = {-kInf, -kInf};
  EXPECT_FALSE(attn::softmax_inplace(all_blocked));
  EXPECT_EQ(all_blocked, (std::vector<float>{0.0f, 0.0f}));
  std::vector<float> one_left = {-kInf, 3.0f};  // exp(-inf - 3) = 0 and exp(0) / 1 = 1, exactly
  EXPECT_TRUE(attn::softmax_inplace(one_left));
  EXPECT_EQ(one_left, (std::vector<float>{0.0f, 1.0f}));
  std::vector<float> with_nan = {-kInf, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(attn::softmax_inplace(with_nan));  // NaN, not the zeros of an empty row
  EXPECT_TRUE(std::isnan(with_nan[0]) && std::isnan(with_nan[1]));
  std::vector<float> plus_inf = {kInf, -kInf};
  EXPECT_TRUE(attn::softmax_inplace(plus_inf));
  EXPECT_TRUE(std::isnan(plus_inf[0]));
}

TEST(Softmax, HugeLogitsStayFinite) {
  attn::Matrix z(2, 3);
  z << 1e30f, -1e30f, 0.0f, -1e30f, -1e30f, -1e30f;
  const attn::Matrix w = attn::softmax_rows(z);
  EXPECT_TRUE(w.allFinite());
  EXPECT_EQ(w(0, 0), 1.0f);
  EXPECT_EQ(w(0, 1), 0.0f);
  EXPECT_NEAR(w(1, 0), 1.0f / 3, kTol);  // equal (huge negative) logits still share equally
}

TEST(Softmax, RandomLogitsUpTo1e30AreFiniteAndOneHot) {
  // 64 logits spread over +-1e30: the two largest differ by ~1e28, and exp(-1e28) is 0 in
  // float, so every row is exactly one-hot at its maximum, with no inf or NaN on the way.
  attn::Matrix z(16, 64);
  for (int i = 0; i < z.size(); ++i) {
    z.data()[i] = 1e30f * std::sin(0.7f * static_cast<float>(i * i) + 0.1f);
  }
  const attn::Matrix w = attn::softmax_rows(z);
  ASSERT_TRUE(w.allFinite());
  for (int r = 0; r < z.rows(); ++r) {
    attn::Index at = 0;
    z.row(r).maxCoeff(&at);
    EXPECT_EQ(w(r, at), 1.0f) << r;
    EXPECT_EQ(w.row(r).sum(), 1.0f) << r;  // one 1 and 63 exact zeros
  }
}

TEST(Softmax, LogitsAtFloatMaxStayFinite) {
  // The extremes of float: -FLT_MAX - FLT_MAX overflows to -inf, and exp(-inf) = 0 exactly.
  constexpr float kMax = std::numeric_limits<float>::max();
  attn::Matrix z(3, 3);
  z << kMax, -kMax, 0.0f,  //
      kMax, kMax, kMax,    //
      -kMax, -kMax, -kMax;
  const attn::Matrix w = attn::softmax_rows(z);
  ASSERT_TRUE(w.allFinite());
  EXPECT_EQ(w(0, 0), 1.0f);
  EXPECT_EQ(w(0, 1), 0.0f);
  EXPECT_EQ(w(0, 2), 0.0f);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(w(1, c), 1.0f / 3, kTol);  // equal logits share equally, however large
    EXPECT_NEAR(w(2, c), 1.0f / 3, kTol);
  }
}

TEST(Softmax, NaNMakesTheWholeRowNaNAndOnlyThatRow) {
  attn::Matrix z(2, 3);
  z << 1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f, 1.0f, 2.0f, 3.0f;
  const attn::Matrix w = attn::softmax_rows(z);
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(std::isnan(w(0, c)));
  EXPECT_TRUE(w.row(1).allFinite());
}

TEST(Softmax, StableEqualsNaiveWhereNaiveIsSafe) {
  attn::Matrix z(2, 4);
  z << 0.1f, -0.3f, 2.0f, 1.0f, -5, 5, 10, 20;
  const attn::Matrix stable = attn::softmax_rows(z);
  const attn::Matrix naive = attn::naive_softmax_rows(z);
  for (int i = 0; i < z.size(); ++i) EXPECT_NEAR(stable.data()[i], naive.data()[i], kTol);
}

TEST(Softmax, NaiveOverflowsWhereStableDoesNot) {
  // exp(400) is beyond float's 3.4e38: the naive formula gives inf / inf = NaN.
  attn::Matrix z(1, 3);
  z << 400.0f, 0.0f, -400.0f;
  EXPECT_TRUE(std::isnan(attn::naive_softmax_rows(z)(0, 0)));
  const attn::Matrix w = attn::softmax_rows(z);
  EXPECT_EQ(w(0, 0), 1.0f);
  EXPECT_TRUE(w.allFinite());
}

TEST(Softmax, EmptyInputsAreFine) {
  EXPECT_EQ(attn::softmax_rows(attn::Matrix(0, 3)).size(), 0);
  EXPECT_EQ(attn::softmax_rows(attn::Matrix(2, 0)).size(), 0);
  attn::softmax_inplace(std::span<float>{});
}

}  // namespace
