// course::format_matrix / print_matrix / banner: the exact text the chapters print.
#include "course/print.hpp"

#include <gtest/gtest.h>

#include <sstream>

namespace test_print {

TEST(FormatMatrix, ShapeHeaderThenAlignedFixedPrecisionRows) {
  attn::MatrixD q(2, 2);
  q << 1, 2, 3, -0.5;
  EXPECT_EQ(course::format_matrix("Q", q),
            "Q [2 x 2]\n"
            "   1.0000   2.0000\n"  // one width (7, for "-0.5000") for every cell
            "   3.0000  -0.5000\n");
}

TEST(FormatMatrix, PrecisionIndentAndNoHeader) {
  attn::MatrixD m(1, 3);
  m << 0.125, 10, -1;
  course::PrintOptions opts;
  opts.precision = 1;
  opts.indent = 0;
  // 0.125 rounds to 0.1 (printf's round-half-even on the exact binary value 0.125).
  EXPECT_EQ(course::format_matrix("", m, opts), " 0.1  10.0  -1.0\n");
}

TEST(FormatMatrix, BigMatricesShowCornersAndEllipses) {
  attn::MatrixD m(10, 10);
  for (int r = 0; r < 10; ++r)
    for (int c = 0; c < 10; ++c) m(r, c) = r * 10 + c;
  course::PrintOptions opts;
  opts.precision = 0;
  opts.max_rows = 4;
  opts.max_cols = 4;
  EXPECT_EQ(course::format_matrix("M", m, opts), "M [10 x 10]\n"
                                                 "    0    1  ...    8    9\n"
                                                 "   10   11  ...   18   19\n"
                                                 "  ...  ...  ...  ...  ...\n"
                                                 "   80   81  ...   88   89\n"
                                                 "   90   91  ...   98   99\n");
}

TEST(FormatMatrix, RejectsAbsurdPrecision) {
  attn::MatrixD m(1, 1);
  m << 1;
  course::PrintOptions opts;
  opts.precision = 40;
  EXPECT_THROW(course::format_matrix("m", m, opts), std::invalid_argument);
}

TEST(PrintMatrix, AcceptsFloatExpressions) {
  attn::Matrix a(1, 2);
  a << 1.5f, 2.0f;
  std::ostringstream os;
  course::print_matrix(os, "2a", 2 * a);
  EXPECT_EQ(os.str(), "2a [1 x 2]\n  3.0000  4.0000\n");
}

TEST(Banner, PadsTheTitleToOneWidth) {
  std::ostringstream os;
  course::banner(os, "1. Title");
  EXPECT_EQ(os.str(), "\n== 1. Title " + std::string(88 - 12, '=') + "\n");
}

}  // namespace test_print
