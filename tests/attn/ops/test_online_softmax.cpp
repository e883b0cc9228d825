// attn::OnlineSoftmax (chapter 10): the one-pass recurrence against the three-pass softmax on a
// row small enough to work out by hand, the merge of partial states (equal to the state of the
// whole row, commutative to the last bit, associative to rounding), the non-finite rules of the
// header (-inf adds nothing, NaN and +inf poison, an all -inf state is neutral) and the
// log-sum-exp against a float64 reference.
//
// Tolerances are in units of u = 2^-24, float's unit roundoff (half of FLT_EPSILON): one
// correctly rounded float operation is off by at most u relative. glibc's expf and logf are
// within 1 ulp (<= 2u relative); we count 2u for each.
#include "attn/ops/online_softmax.hpp"

#include "attn/core/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

namespace test_online_softmax {

using attn::OnlineSoftmax;
using attn::OnlineSoftmaxD;

constexpr double kU = 0x1p-24;  // float's unit roundoff
constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

OnlineSoftmax state_of(std::span<const float> xs) {
  OnlineSoftmax s;
  s.add(xs);
  return s;
}

// The float64 reference: the max, and sum_j exp(x_j - max) in double (the three-pass way).
struct RefState {
  double max;
  double sum;
  double lse() const { return max + std::log(sum); }
};

RefState reference(std::span<const float> xs) {
  double m = -std::numeric_limits<double>::infinity();
  for (float x : xs) m = std::max(m, static_cast<double>(x));
  double d = 0.0;
  for (float x : xs) d += std::exp(static_cast<double>(x) - m);
  return {m, d};
}

bool same_bits(const OnlineSoftmax& a, const OnlineSoftmax& b) {
  // == is bitwise for finite and infinite floats except +0 / -0, which no state here holds
  // (sums are of positive terms or exactly 0); NaN is checked separately where it may occur.
  return a.max == b.max && a.sum == b.sum;
}

// ---- The recurrence by hand ---------------------------------------------------------------------

TEST(OnlineSoftmax, ShortRowEqualsThreePassMaxAndSum) {
  // Row (1, 3, 2): the three passes give m = 3 and d = e^(1-3) + e^(3-3) + e^(2-3)
  // = e^-2 + 1 + e^-1 = 1.5032147244...
  const std::array<float, 3> row = {1.0f, 3.0f, 2.0f};
  const double d_hand = std::exp(-2.0) + 1.0 + std::exp(-1.0);
  OnlineSoftmax s;
  s.add(row[0]);  // m = 1, d = e^0 = 1 exactly
  EXPECT_EQ(s.max, 1.0f);
  EXPECT_EQ(s.sum, 1.0f);
  s.add(row[1]);  // the max grows: d = 1 e^(1-3) + e^0
  EXPECT_EQ(s.max, 3.0f);
  EXPECT_NEAR(s.sum, std::exp(-2.0) + 1.0, 4 * kU * 1.2);  // one expf (2u) + one add (u), of ~1.14
  s.add(row[2]);                                           // the max stays: d = d e^0 + e^(2-3)
  EXPECT_EQ(s.max, 3.0f);                                  // a max is exact
  // Two expf (2u each on terms < 1) and two additions (u each on sums < 1.6): |error| < 6u * 1.6.
  EXPECT_NEAR(s.sum, d_hand, 6 * kU * 1.6);

  // The same float operations as the three-pass sum, in the same order: once the max is reached
  // every rescale is exp(0) = 1 exactly and 1 * e^-2 is exact, so the bits agree.
  const float three_pass = (std::exp(1.0f - 3.0f) + std::exp(3.0f - 3.0f)) + std::exp(2.0f - 3.0f);
  EXPECT_EQ(s.sum, three_pass);

  // Its log-sum-exp is m + log d = 3 + log(1.5032...) = 3.40761...: log d is off by d's relative
  // error (6u * 1.6 / 1.5 < 7u) plus logf's 2u * |log d| (< u), and the add rounds by u * 3.4.
  EXPECT_NEAR(s.log_sum_exp(), 3.0 + std::log(d_hand), (6 + 2 + 4) * kU);
  // softmax(3) = 1 / d and the three weights sum to 1 (each weight: 2u expf + u division).
  EXPECT_NEAR(s.weight(3.0f), 1.0 / d_hand, 10 * kU);
  EXPECT_NEAR(s.weight(1.0f) + s.weight(3.0f) + s.weight(2.0f), 1.0, 16 * kU);

  // In double, against the same hand value: the error bound in u_double = 2^-53 units, as above.
  OnlineSoftmaxD sd;
  for (float x : row) sd.add(static_cast<double>(x));
  EXPECT_EQ(sd.max, 3.0);
  EXPECT_NEAR(sd.sum, d_hand, 6 * 0x1p-53 * 1.6);
}

TEST(OnlineSoftmax, EmptyStateIsMinusInfinityAndZero) {
  const OnlineSoftmax s;
  EXPECT_EQ(s.max, -kInf);
  EXPECT_EQ(s.sum, 0.0f);
  EXPECT_EQ(s.log_sum_exp(), -kInf);  // -inf + log 0 = -inf - inf
}

// ---- Merging ------------------------------------------------------------------------------------

TEST(OnlineSoftmax, MergeOfTwoPartsIsTheStateOfTheWholeRow) {
  // Row (1, 3 | 2, -1, 0.5): m = 3, d = e^-2 + 1 + e^-1 + e^-4 + e^-2.5.
  const std::vector<float> row = {1.0f, 3.0f, 2.0f, -1.0f, 0.5f};
  const double d_hand = std::exp(-2.0) + 1.0 + std::exp(-1.0) + std::exp(-4.0) + std::exp(-2.5);
  const std::span<const float> all(row);
  const OnlineSoftmax whole = state_of(all);
  for (std::size_t cut = 0; cut <= row.size(); ++cut) {  // empty parts included
    const OnlineSoftmax a = state_of(all.first(cut));
    const OnlineSoftmax b = state_of(all.subspan(cut));
    const OnlineSoftmax m = OnlineSoftmax::merge(a, b);
    EXPECT_EQ(m.max, 3.0f) << cut;
    // A sum of five positive terms: each term through one expf (2u), a rescale by a rounded exp
    // (2u) and a product (u), 5u relative at worst (its argument x - m is exact here: small
    // integers and halves), plus u per addition, at most 5 + 1 of them with the merge: 11u
    // relative of a sum of ~1.74. The whole row's state is within that too, hence 2x between.
    EXPECT_NEAR(m.sum, d_hand, 11 * kU * 1.8) << cut;
    EXPECT_NEAR(m.sum, whole.sum, 2 * 11 * kU * 1.8) << cut;
  }
}

TEST(OnlineSoftmax, MergeWithTheEmptyStateChangesNothing) {
  const std::array<float, 4> row = {0.25f, -2.0f, 7.5f, 1.0f};
  const OnlineSoftmax s = state_of(row);
  const OnlineSoftmax empty;
  // rescale(-inf, m) is exactly 0 and rescale(m, m) = e^0 exactly 1: the bits survive.
  EXPECT_TRUE(same_bits(OnlineSoftmax::merge(s, empty), s));
  EXPECT_TRUE(same_bits(OnlineSoftmax::merge(empty, s), s));
  EXPECT_TRUE(same_bits(OnlineSoftmax::merge(empty, empty), empty));
}

TEST(OnlineSoftmax, MergeIsCommutativeToTheLastBit) {
  // m = max(m_a, m_b) and d = d_a r_a + d_b r_b: the same two products added either way round,
  // and float addition is commutative. Equal maxima, disjoint ranges and empty states included.
  attn::Rng rng(2026);
  std::vector<OnlineSoftmax> states = {OnlineSoftmax{}, state_of(std::array<float, 1>{3.0f}),
                                       state_of(std::array<float, 2>{3.0f, -1.0f})};
  for (int k = 0; k < 20; ++k) {
    const attn::Matrix x = attn::random_normal(rng, 1, 1 + k % 7, 0.0, 1.0 + k);
    states.push_back(
        state_of(std::span<const float>(x.data(), static_cast<std::size_t>(x.size()))));
  }
  for (const OnlineSoftmax& a : states) {
    for (const OnlineSoftmax& b : states) {
      const OnlineSoftmax ab = OnlineSoftmax::merge(a, b), ba = OnlineSoftmax::merge(b, a);
      EXPECT_TRUE(same_bits(ab, ba)) << a.max << " " << a.sum << " | " << b.max << " " << b.sum;
    }
  }
}

TEST(OnlineSoftmax, EveryOrderOfFourPartsAgreesToRounding) {
  // Four parts of a row of 23 entries in [-3, 3), merged in all 24 orders (left fold) and as a
  // tree, against the float64 state of the whole row.
  attn::Rng rng(7);
  const attn::Matrix x = attn::random_uniform(rng, 1, 23, -3.0, 3.0);
  const std::span<const float> row(x.data(), 23);
  const std::array<std::span<const float>, 4> parts = {row.subspan(0, 2), row.subspan(2, 9),
                                                       row.subspan(11, 5), row.subspan(16, 7)};
  std::array<OnlineSoftmax, 4> state;
  for (std::size_t p = 0; p < 4; ++p) state[p] = state_of(parts[p]);
  const RefState ref = reference(row);
  // The error of a sum, relative: within a part the recurrence rounds each term by expf (2u),
  // its argument x - m (|x - m| <= 6, so u * 6 relative through exp), the rescale (the same two,
  // 8u), the product and the add (2u): 18u per entry is more than any term sees, and a sum of
  // positive terms keeps the worst relative error of its terms plus u per addition: 23 entries,
  // at most 23 + 3 merges of additions and rescales, bound (18 + 26) u. Two orders differ by at
  // most twice that.
  const double one_order = (18 + 26) * kU;
  std::array<int, 4> order = {0, 1, 2, 3};
  int orders = 0;
  do {
    OnlineSoftmax s;
    for (int p : order) s = OnlineSoftmax::merge(s, state[static_cast<std::size_t>(p)]);
    EXPECT_EQ(s.max, static_cast<float>(ref.max));  // the max is exact in any order
    EXPECT_NEAR(s.sum, ref.sum, one_order * ref.sum) << orders;
    EXPECT_NEAR(s.sum, state_of(row).sum, 2 * one_order * ref.sum) << orders;
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 24);
  const OnlineSoftmax tree = OnlineSoftmax::merge(OnlineSoftmax::merge(state[2], state[0]),
                                                  OnlineSoftmax::merge(state[3], state[1]));
  EXPECT_NEAR(tree.sum, ref.sum, one_order * ref.sum);
  EXPECT_NEAR(tree.log_sum_exp(), ref.lse(), one_order + 2 * kU * (1 + std::abs(ref.lse())));
}

// ---- Non-finite entries (the header: as softmax.hpp) --------------------------------------------

TEST(OnlineSoftmax, MinusInfinityAddsNothing) {
  const std::array<float, 4> with = {1.0f, -kInf, 3.0f, -kInf};
  const std::array<float, 2> without = {1.0f, 3.0f};
  EXPECT_TRUE(same_bits(state_of(with), state_of(without)));
  const std::array<float, 3> leading = {-kInf, 1.0f, 3.0f};
  EXPECT_TRUE(same_bits(state_of(leading), state_of(without)));
}

TEST(OnlineSoftmax, OnlyMinusInfinityIsTheEmptyStateAndANeutralMerge) {
  const std::array<float, 3> blocked = {-kInf, -kInf, -kInf};
  const OnlineSoftmax none = state_of(blocked);
  EXPECT_EQ(none.max, -kInf);
  EXPECT_EQ(none.sum, 0.0f);
  EXPECT_EQ(none.log_sum_exp(), -kInf);
  const std::array<float, 3> row = {0.5f, -4.0f, 2.0f};
  const OnlineSoftmax s = state_of(row);
  EXPECT_TRUE(same_bits(OnlineSoftmax::merge(s, none), s));
  EXPECT_TRUE(same_bits(OnlineSoftmax::merge(none, s), s));
  const OnlineSoftmax both = OnlineSoftmax::merge(none, none);
  EXPECT_EQ(both.max, -kInf);
  EXPECT_EQ(both.sum, 0.0f);
}

TEST(OnlineSoftmax, NaNOrPlusInfinityMakesTheLogSumExpNaN) {
  for (float bad : {kNaN, kInf}) {
    for (std::size_t at = 0; at < 4; ++at) {  // first, in the middle, last
      std::vector<float> row = {0.5f, 2.0f, -1.0f};
      row.insert(row.begin() + static_cast<std::ptrdiff_t>(at), bad);
      const OnlineSoftmax s = state_of(row);
      EXPECT_TRUE(std::isnan(s.log_sum_exp())) << bad << " at " << at;
      // More entries, -inf included, do not wash it out.
      OnlineSoftmax t = s;
      t.add(5.0f);
      t.add(-kInf);
      EXPECT_TRUE(std::isnan(t.log_sum_exp())) << bad << " at " << at;
      // Nor does a merge, in either order, with a clean, an empty or a -inf-only state.
      const std::array<float, 2> clean = {1.0f, 9.0f};
      const std::array<float, 1> minus_inf = {-kInf};
      for (const OnlineSoftmax& other : {state_of(clean), OnlineSoftmax{}, state_of(minus_inf)}) {
        EXPECT_TRUE(std::isnan(OnlineSoftmax::merge(s, other).log_sum_exp())) << bad << at;
        EXPECT_TRUE(std::isnan(OnlineSoftmax::merge(other, s).log_sum_exp())) << bad << at;
      }
    }
  }
  // Two +inf states: inf - inf inside.
  const std::array<float, 1> inf = {kInf};
  EXPECT_TRUE(std::isnan(OnlineSoftmax::merge(state_of(inf), state_of(inf)).log_sum_exp()));
}

// ---- Against float64 ----------------------------------------------------------------------------

TEST(OnlineSoftmax, LogSumExpMatchesFloat64) {
  attn::Rng rng(99);
  struct Row {
    const char* what;
    attn::Matrix x;
  };
  std::vector<Row> rows;
  rows.push_back({"N(0, 1), 1000 entries", attn::random_normal(rng, 1, 1000)});
  rows.push_back({"N(0, 9), 1000 entries", attn::random_normal(rng, 1, 1000, 0.0, 3.0)});
  // exp(x) overflows float beyond 88.7: the naive log(sum(exp(x))) would be inf here.
  rows.push_back(
      {"N(100, 400): beyond expf's range", attn::random_normal(rng, 1, 300, 100.0, 20.0)});
  attn::Matrix rising(1, 200);  // the max grows with every entry: 199 rescales
  for (int j = 0; j < 200; ++j) rising(0, j) = 0.05f * static_cast<float>(j);
  rows.push_back({"rising: a rescale at every step", rising});
  for (const Row& r : rows) {
    const std::span<const float> row(r.x.data(), static_cast<std::size_t>(r.x.size()));
    const RefState ref = reference(row);
    const double range = ref.max - static_cast<double>(r.x.minCoeff());
    const double n = static_cast<double>(row.size());
    // log d's absolute error is d's relative error. Per entry: expf (2u), its argument x - m
    // rounded (u |x - m| <= u range, through exp), the product and the add (2u); the rescales'
    // arguments m_old - m_new add up (telescoping) to at most the range, each through exp (2u per
    // rescale, at most n of them). So d is off by at most (4n + 2n + 2 range) u relative, and
    // L = m + log d adds logf's 2u |log d| and the add's u |L|.
    const double tol =
        (6 * n + 2 * range) * kU + 2 * kU * std::log(ref.sum) + kU * std::abs(ref.lse());
    OnlineSoftmax s = state_of(row);
    EXPECT_NEAR(s.log_sum_exp(), ref.lse(), tol) << r.what;
    EXPECT_EQ(s.max, static_cast<float>(ref.max)) << r.what;
    // And the double state against the same reference, to double's rounding: the same bound in
    // u_double = 2^-53 (the reference's own rounding is of that size too, hence 2x).
    OnlineSoftmaxD sd;
    for (float x : row) sd.add(static_cast<double>(x));
    EXPECT_NEAR(sd.log_sum_exp(), ref.lse(), 2 * tol * 0x1p-29) << r.what;  // 2^-53 / 2^-24
  }
}

}  // namespace test_online_softmax
