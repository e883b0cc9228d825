// matrix.hpp: the checks every public function makes (attn::require) and the distance the
// tests compare with (attn::max_abs_diff).
#include "attn/core/matrix.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace test_matrix {

using attn_test::message_of;

using attn::Matrix;

TEST(Require, BuildsTheMessageOnlyOnFailure) {
  int built = 0;
  const auto what = [&] {
    ++built;
    return "Q is " + attn::shape_str(4, 16);
  };
  attn::require(true, "f", what);
  EXPECT_EQ(built, 0);  // a check that passes builds nothing
  EXPECT_EQ(message_of([&] { attn::require(false, "f", what); }), "f: Q is [4 x 16]");
  EXPECT_EQ(built, 1);
  EXPECT_EQ(message_of([] { attn::require(false, "g", "a fixed message"); }), "g: a fixed message");
  EXPECT_EQ(message_of([] { attn::require(false, "h", std::string("built") + " before"); }),
            "h: built before");
}

TEST(MaxAbsDiff, LargestDifferenceOfTwoSameShapedMatrices) {
  Matrix a(2, 3), b(2, 3);
  a << 1, 2, 3,  //
      4, 5, 6;
  b << 1, 2, 3.25f,  //
      3.5f, 5, 6;
  EXPECT_EQ(attn::max_abs_diff(a, b), 0.5);  // |4 - 3.5|, exact in float and double
  EXPECT_EQ(attn::max_abs_diff(a, a), 0.0);
  EXPECT_EQ(attn::max_abs_diff(a.topRows(1), b.topRows(1)), 0.25);  // blocks and views too
  EXPECT_EQ(attn::max_abs_diff(a.array(), b.array()), 0.5);
  // Float against double: compared in double, so 1 + 2^-30 is not rounded back to 1.
  attn::MatrixD d = a.cast<double>();
  d(0, 0) += std::ldexp(1.0, -30);
  EXPECT_EQ(attn::max_abs_diff(a, d), std::ldexp(1.0, -30));
  // A NaN anywhere is reported, not skipped by the maximum.
  b(0, 0) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(attn::max_abs_diff(a, b)));
  EXPECT_EQ(attn::max_abs_diff(Matrix(0, 3), Matrix(0, 3)), 0.0);
  EXPECT_EQ(message_of([&] { attn::max_abs_diff(a, b.topRows(1)); }),
            "max_abs_diff: a is [2 x 3] but b is [1 x 3]: they must have the same shape");
}

}  // namespace test_matrix
