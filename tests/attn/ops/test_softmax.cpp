// attn::softmax_*: values by hand, invariances, and the awkward inputs (masks, overflow, NaN).
#include "attn/core/random.hpp"
#include "attn/ops/softmax.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace test_softmax {

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
  z << 1, -2, 3, 0.5, 9,        //
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

// ---- The vectorised softmax: every rule at every position, both precisions ------------------
// softmax.cpp takes the exponentials a packet (4, 8 or 16 floats) at a time, in blocks of 64
// bytes (16 floats, 8 doubles), the last partial packet through a padded copy. The lengths
// below put an entry in the first, a middle and the last lane of a packet, of a block and of
// a tail, for packets of any width: a rule kept by the body but not by a tail, or only at some
// addresses, fails at one of them.

constexpr std::size_t kLengths[] = {1, 7, 8, 15, 16, 17, 33, 1000};

template <typename T>
class SoftmaxRules : public testing::Test {};
using Reals = testing::Types<float, double>;
TYPED_TEST_SUITE(SoftmaxRules, Reals);

template <typename T>
constexpr T kInfT = std::numeric_limits<T>::infinity();

// n logits on the grid k / 1024, |k| <= 32768: any two differ by a multiple of 2^-10 below 64
// in size, which float holds exactly (16 significant bits), so x - max is exact and the
// reference below sees the same shifted logits as the code under test.
template <typename T>
std::vector<T> grid_row(attn::Rng& rng, std::size_t n) {
  std::vector<T> row(n);
  for (T& x : row) {
    const auto k = static_cast<std::int64_t>(rng.next_u64() % 65537) - 32768;
    x = static_cast<T>(k) / T(1024);
  }
  return row;
}

// The first few positions where a check failed, for a message that stays one line long.
std::string positions(const std::vector<std::size_t>& at) {
  std::string s;
  for (std::size_t i = 0; i < at.size() && i < 8; ++i) s += " " + std::to_string(at[i]);
  return at.size() > 8 ? s + " ... (" + std::to_string(at.size()) + ")" : s;
}

template <typename T>
bool is_plus_zero(T x) {
  return x == T(0) && !std::signbit(x);
}

template <typename T>
bool all_nan(const std::vector<T>& row) {
  return std::all_of(row.begin(), row.end(), [](T x) { return std::isnan(x); });
}

TYPED_TEST(SoftmaxRules, MinusInfinityWeighsExactlyZeroAtEveryPosition) {
  using T = TypeParam;
  attn::Rng rng(11);
  for (std::size_t n : kLengths) {
    std::vector<std::size_t> bad;
    for (std::size_t p = 0; p < n; ++p) {
      std::vector<T> row = grid_row<T>(rng, n);
      row[p] = -kInfT<T>;
      const bool normalised = attn::softmax_inplace(std::span<T>(row));
      // Eigen's vector exp gives 2.9e-39 (float) for -inf unless the code zeroes it. The
      // others are exp(>= -64) > 0, each within 85 u (float, n = 1000: weight_bound below) of
      // its exact value, so their sum, added in long double, is within 5.1e-6 of 1.
      const long double sum = std::accumulate(row.begin(), row.end(), 0.0L);
      const bool others_positive = std::all_of(
          row.begin(), row.end(), [&](const T& w) { return &w == &row[p] || w > T(0); });
      if (n == 1) {
        if (normalised || !is_plus_zero(row[0])) bad.push_back(p);  // all -inf: zeros, false
      } else if (!normalised || !is_plus_zero(row[p]) || !others_positive ||
                 std::abs(sum - 1.0L) > 1e-5L) {
        bad.push_back(p);
      }
    }
    EXPECT_TRUE(bad.empty()) << "n = " << n << ", -inf not weighing +0 at" << positions(bad);
  }
}

TYPED_TEST(SoftmaxRules, OneFiniteAmongMinusInfinitiesGetsExactlyOne) {
  // exp(0) = 1 and every other exponential exactly 0: the sum is 1 and the weights exact.
  using T = TypeParam;
  for (std::size_t n : kLengths) {
    std::vector<std::size_t> bad;
    for (std::size_t p = 0; p < n; ++p) {
      std::vector<T> row(n, -kInfT<T>);
      row[p] = T(-3.25);
      const bool normalised = attn::softmax_inplace(std::span<T>(row));
      for (std::size_t j = 0; j < n; ++j) {
        if (!normalised || (j == p ? row[j] != T(1) : !is_plus_zero(row[j]))) {
          bad.push_back(p);
          break;
        }
      }
    }
    EXPECT_TRUE(bad.empty()) << "n = " << n << ", the one finite logit at" << positions(bad);
  }
}

TYPED_TEST(SoftmaxRules, AllMinusInfinityIsZerosAndReported) {
  using T = TypeParam;
  for (std::size_t n : kLengths) {
    std::vector<T> row(n, -kInfT<T>);
    EXPECT_FALSE(attn::softmax_inplace(std::span<T>(row))) << n;
    EXPECT_TRUE(std::all_of(row.begin(), row.end(), is_plus_zero<T>)) << n;
  }
}

TYPED_TEST(SoftmaxRules, NaNAtAnyPositionMakesTheRowNaN) {
  using T = TypeParam;
  attn::Rng rng(12);
  for (std::size_t n : kLengths) {
    std::vector<std::size_t> bad;
    for (std::size_t p = 0; p < n; ++p) {
      std::vector<T> finite = grid_row<T>(rng, n), masked(n, -kInfT<T>);
      finite[p] = masked[p] = std::numeric_limits<T>::quiet_NaN();
      // Among finite logits, and among -inf ones (NaN, not the zeros of an empty row).
      const bool a = attn::softmax_inplace(std::span<T>(finite));
      const bool b = attn::softmax_inplace(std::span<T>(masked));
      if (!a || !b || !all_nan(finite) || !all_nan(masked)) bad.push_back(p);
    }
    EXPECT_TRUE(bad.empty()) << "n = " << n << ", a NaN left numbers at" << positions(bad);
  }
}

TYPED_TEST(SoftmaxRules, PlusInfinityAtAnyPositionMakesTheRowNaN) {
  // exp(x - inf) is 0 for every finite x but exp(inf - inf) is NaN, and so is the sum.
  using T = TypeParam;
  attn::Rng rng(13);
  for (std::size_t n : kLengths) {
    std::vector<std::size_t> bad;
    for (std::size_t p = 0; p < n; ++p) {
      std::vector<T> finite = grid_row<T>(rng, n), masked(n, -kInfT<T>);
      finite[p] = masked[p] = kInfT<T>;
      const bool a = attn::softmax_inplace(std::span<T>(finite));
      const bool b = attn::softmax_inplace(std::span<T>(masked));
      if (!a || !b || !all_nan(finite) || !all_nan(masked)) bad.push_back(p);
    }
    EXPECT_TRUE(bad.empty()) << "n = " << n << ", a +inf left numbers at" << positions(bad);
  }
}

// Finite logits so far below the maximum that their exponential rounds to 0 even as a
// subnormal (float: below -103.97, double: below -745.13): weight exactly 0, at every
// position. -3.4e38 - 0 is finite; -FLT_MAX - FLT_MAX is -inf.
template <typename T>
std::vector<T> far_below() {
  constexpr T kMax = std::numeric_limits<T>::max();
  if constexpr (std::is_same_v<T, float>) {
    return {-110.0f, -1e30f, -3.4e38f, -kMax};
  } else {
    return {-800.0, -1e300, -kMax};
  }
}

TYPED_TEST(SoftmaxRules, HugeNegativeSpreadsWeighExactlyZero) {
  using T = TypeParam;
  for (T low : far_below<T>()) {
    for (std::size_t n : kLengths) {
      std::vector<std::size_t> bad;
      for (std::size_t p = 0; p < n; ++p) {
        // The maximum alone among the low ones: exactly one-hot.
        std::vector<T> one_high(n, low);
        one_high[p] = T(0);
        bool ok = attn::softmax_inplace(std::span<T>(one_high)) && one_high[p] == T(1);
        for (std::size_t j = 0; j < n; ++j) ok = ok && (j == p || is_plus_zero(one_high[j]));
        // One low among zeros: it weighs +0, the others share equally (exp(0) = 1 each); a
        // row of one is its own maximum.
        std::vector<T> one_low(n, T(0));
        one_low[p] = low;
        ok = ok && attn::softmax_inplace(std::span<T>(one_low));
        if (n == 1) {
          ok = ok && one_low[0] == T(1);
        } else {
          ok = ok && is_plus_zero(one_low[p]);
          for (std::size_t j = 0; j < n; ++j) {
            ok = ok && (j == p || one_low[j] == T(1) / static_cast<T>(n - 1));
          }
        }
        if (!ok) bad.push_back(p);
      }
      EXPECT_TRUE(bad.empty()) << "n = " << n << ", " << low << " below 0 at" << positions(bad);
    }
  }
}

// Between ln(smallest normal) and the floor above, exp(x) is a subnormal, and the softmax
// gives it as glibc's exp does, to within kSubnormalUnits units of the smallest subnormal:
// softmax.cpp squares exp(x / 2), a normal number within e u (u = 2^-24, or 2^-53), so the
// square is within 2e u of a number below the smallest normal 2^-126 (2^-1022), under e units
// of 2^-149 (2^-1074), plus half a unit for its rounding onto the subnormal grid. The
// exponential's error e depends on the vector unit, since Eigen has a kernel per width:
//   - e = 2 for Eigen's generic kernel (SSE2, AVX2, NEON; double everywhere): 2.5 units;
//   - an AVX-512 build's float kernel reduces x / 2 by m ln 2 with ln 2 rounded to one float
//     constant, 1.9e-9 off, which adds |m| * 1.9e-9 = 2.4 u at m = 75 (x / 2 down to -52, the
//     floor's half), so e = 4.4 and the bound 4.9 units (measured there: 2.9).
#if defined(EIGEN_VECTORIZE_AVX512)
constexpr double kSubnormalUnitsFloat = 4.9;
#else
constexpr double kSubnormalUnitsFloat = 2.5;
#endif
template <typename T>
constexpr double kSubnormalUnits = std::is_same_v<T, float> ? kSubnormalUnitsFloat : 2.5;

template <typename T>
T ln_smallest_normal_rounded_up() {
  const long double ln_min = std::log(static_cast<long double>(std::numeric_limits<T>::min()));
  const T cut = static_cast<T>(ln_min);
  return static_cast<long double>(cut) < ln_min ? std::nextafter(cut, T(0)) : cut;
}

TYPED_TEST(SoftmaxRules, SubnormalExponentialsAreGlibcs) {
  using T = TypeParam;
  constexpr T kTiny = std::numeric_limits<T>::denorm_min();
  const T cut = ln_smallest_normal_rounded_up<T>();
  const T floor = std::is_same_v<T, float> ? T(-104) : T(-746);
  // A sweep of the window, next to a 0: the sum is 1 + a subnormal = 1.
  double worst = 0;
  for (int i = 1; i <= 4096; ++i) {
    const T x = cut + (floor - cut) * static_cast<T>(i) / T(4096);
    std::vector<T> row = {T(0), x};
    attn::softmax_inplace(std::span<T>(row));
    ASSERT_EQ(row[0], T(1)) << x;
    const long double ref = std::exp(static_cast<long double>(x));
    worst = std::max(worst, static_cast<double>(std::abs(row[1] - ref) / kTiny));
  }
  EXPECT_LE(worst, kSubnormalUnits<T>) << "units of the smallest subnormal";
  // Either side of the cut: the last normal exponential and the first subnormal one, in order.
  std::vector<T> at_cut = {T(0), cut}, below = {T(0), std::nextafter(cut, -kInfT<T>)};
  attn::softmax_inplace(std::span<T>(at_cut));
  attn::softmax_inplace(std::span<T>(below));
  EXPECT_GE(at_cut[1], std::numeric_limits<T>::min());
  EXPECT_GT(below[1], T(0));
  EXPECT_LE(below[1], at_cut[1]);
  // At every position (the subnormal lanes take their own path in softmax.cpp): one 0 among
  // logits in the window, float -100 (exp = 3.7e-44), double -740 (4.2e-322).
  const T low = std::is_same_v<T, float> ? T(-100) : T(-740);
  const long double ref = std::exp(static_cast<long double>(low));
  for (std::size_t n : kLengths) {
    std::vector<std::size_t> bad;
    for (std::size_t p = 0; p < n && n > 1; ++p) {
      std::vector<T> row(n, low);
      row[p] = T(0);
      bool ok = attn::softmax_inplace(std::span<T>(row)) && row[p] == T(1);
      for (std::size_t j = 0; j < n; ++j) {
        ok = ok &&
             (j == p || (row[j] > T(0) && std::abs(row[j] - ref) <= kSubnormalUnits<T> * kTiny));
      }
      if (!ok) bad.push_back(p);
    }
    EXPECT_TRUE(bad.empty()) << "n = " << n << ", exp(" << low << ") wrong around"
                             << positions(bad);
  }
  // And far from the cut nothing is lost: exp(-80) (float) and exp(-700) (double) are normal.
  const T normal = std::is_same_v<T, float> ? T(-80) : T(-700);
  std::vector<T> small = {normal, T(0)};
  attn::softmax_inplace(std::span<T>(small));
  EXPECT_NEAR(small[0] / std::exp(normal), T(1), 1e-5);
}

// Weights against softmax in long double (64-bit significand, 2^11 times finer than double) on
// grid logits, where x - max is exact for both. A weight p_j = e_j / S, with u the unit
// roundoff (2^-24 float, 2^-53 double), carries to first order:
//   - the exponential's error, e_j to within kExpUlps u: Eigen's vector exp measured <= 2 u
//     over every float in [ln FLT_MIN, 0] and <= 2.3 u for double (3e7 samples) with AVX2 +
//     FMA; AVX-512 builds use another float kernel whose one-constant ln 2 reduction adds up
//     to |m| * 1.9e-9 (~4 u at m = 126), so 8;
//   - the same error in the sum (at most kExpUlps u, a weighted mean of the e_j's errors);
//   - the sum's roundings: softmax.cpp adds a row in 64-byte lanes (16 floats, 8 doubles),
//     each lane n / lanes terms, then the lanes pairwise, log2(lanes) levels; a sum of
//     positive terms along a chain of k additions is off by at most k u. (A serial sum would
//     need n - 1 here; rounding errors of random sign typically give about sqrt(k) u.)
//   - one rounding for 1 / S and one for the product.
// Float n = 1000: (8 + 8 + 63 + 4 + 2) u = 85 u = 5.1e-6 relative; n = 7: 23 u = 1.4e-6.
template <typename T>
double weight_bound(std::size_t n) {
  constexpr double kExpUlps = 8;
  constexpr std::size_t lanes = 64 / sizeof(T);
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double chain = static_cast<double>((n + lanes - 1) / lanes) + std::log2(lanes);
  return (2 * kExpUlps + chain + 2) * u;
}

TYPED_TEST(SoftmaxRules, WeightsMatchALongDoubleReference) {
  using T = TypeParam;
  attn::Rng rng(14);
  for (std::size_t n : kLengths) {
    double worst = 0;
    for (int trial = 0; trial < 40; ++trial) {
      const std::vector<T> logits = grid_row<T>(rng, n);
      std::vector<T> row = logits;
      ASSERT_TRUE(attn::softmax_inplace(std::span<T>(row)));
      const long double max = *std::max_element(logits.begin(), logits.end());
      long double sum = 0;
      for (T x : logits) sum += std::exp(static_cast<long double>(x) - max);
      for (std::size_t j = 0; j < n; ++j) {
        const long double ref = std::exp(static_cast<long double>(logits[j]) - max) / sum;
        worst = std::max(worst, static_cast<double>(std::abs(row[j] - ref) / ref));
      }
    }
    EXPECT_LE(worst, weight_bound<T>(n)) << "n = " << n << ": worst relative error "
                                         << worst / (std::numeric_limits<T>::epsilon() / 2) << " u";
  }
}

TYPED_TEST(SoftmaxRules, SameBitsWhereverTheRowSits) {
  // A row's weights do not depend on its address (softmax.cpp: no aligned head or scalar
  // tail): the same logits at 16 different offsets in memory give identical bits, so a row of
  // the weights matrix is the same whichever row of it the query is, and the column form's
  // transpose equals the row form to the last bit.
  using T = TypeParam;
  attn::Rng rng(15);
  for (std::size_t n : kLengths) {
    const std::vector<T> logits = grid_row<T>(rng, n);
    std::vector<T> first = logits;
    attn::softmax_inplace(std::span<T>(first));
    std::vector<std::size_t> bad;
    for (std::size_t offset = 1; offset < 16; ++offset) {
      // The row between guards of 7s, which must come out untouched.
      std::vector<T> buffer(offset + n + 16, T(7));
      const auto at = buffer.begin() + static_cast<std::ptrdiff_t>(offset);
      std::copy(logits.begin(), logits.end(), at);
      attn::softmax_inplace(std::span<T>(buffer).subspan(offset, n));
      const bool guards = std::all_of(buffer.begin(), at, [](T x) { return x == T(7); }) &&
                          std::all_of(at + static_cast<std::ptrdiff_t>(n), buffer.end(),
                                      [](T x) { return x == T(7); });
      if (!std::equal(first.begin(), first.end(), at) || !guards) bad.push_back(offset);
    }
    EXPECT_TRUE(bad.empty()) << "n = " << n << ": other bits at offsets" << positions(bad);
  }
}

}  // namespace test_softmax
