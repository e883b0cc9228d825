// course/numbers.hpp: every number a learner types is read as written in decimal, the whole
// text, and the message names the text when it is not a number.
#include "course/numbers.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace test_numbers {

TEST(WholeNumbers, AreDecimalWhateverTheLeadingDigit) {
  const std::vector<std::pair<std::string, long long>> cases = {{"0", 0},
                                                                {"064", 64},
                                                                {"+5", 5},
                                                                {"-0", 0},
                                                                {"-12", -12},
                                                                {"09", 9},
                                                                {"2147483647", INT_MAX}};
  for (const auto& [text, expected] : cases) {
    long long n = -99;
    EXPECT_EQ(course::read_whole_number(text, INT_MIN, INT_MAX, n), "") << text;
    EXPECT_EQ(n, expected) << text;
  }
  // The whole range of the seed's type, std::uint64_t.
  course::WholeNumber seed;
  EXPECT_EQ(course::read_whole_number("18446744073709551615", 0, UINTMAX_MAX, seed), "");
  EXPECT_EQ(seed.magnitude, UINTMAX_MAX);
  EXPECT_FALSE(seed.negative);
}

TEST(WholeNumbers, AnythingElseIsNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0x10", "'0x10' is not a whole number in decimal digits (did you mean 16?)"},
      {"64.0", "'64.0' is not a whole number in decimal digits (did you mean 64?)"},
      {" 7", "' 7' is not a whole number in decimal digits (did you mean 7?)"},
      {"1e3", "'1e3' is not a whole number in decimal digits (did you mean 1000?)"},
      {"2.5", "'2.5' is not a whole number in decimal digits"},
      {"", "'' is not a whole number in decimal digits"},
      {"-", "'-' is not a whole number in decimal digits"},
      {"2147483648", "'2147483648' is too large (the largest is 2147483647)"},
      {"-2147483649", "'-2147483649' is too small (the smallest is -2147483648)"},
      {"99999999999999999999999", "'99999999999999999999999' is too large (the largest is "
                                  "2147483647)"},
  };
  for (const auto& [text, says] : cases) {
    long long n = 7;
    EXPECT_EQ(course::read_whole_number(text, INT_MIN, INT_MAX, n), says) << text;
    EXPECT_EQ(n, 7) << text << ": a refused text leaves the number alone";
  }
  long long id = 0;  // a range that starts above the type's smallest value: a token id
  EXPECT_EQ(course::read_whole_number("-3", 0, INT_MAX, id),
            "'-3' is too small (the smallest is 0)");
  EXPECT_EQ(course::read_whole_number("-0", 0, INT_MAX, id), "");
  EXPECT_EQ(course::read_whole_number("0", 1, 64, id), "'0' is too small (the smallest is 1)");
}

TEST(DecimalNumbers, AreTheNearestDouble) {
  const std::vector<std::pair<std::string, double>> cases = {
      {"0.5", 0.5},
      {"-2", -2.0},
      {"+3", 3.0},
      {".5", 0.5},
      {"5.", 5.0},
      {"2.5E+2", 250.0},
      {"1e-3", 0.001},
      {"0.1", 0.1},
      {"-1e9", -1e9},
      // Below the normal doubles: the nearest subnormal, as Python's float("1e-310") is.
      {"1e-310", 9.9999999999999694e-311},
      {"3e-324", std::numeric_limits<double>::denorm_min()},
      // Nearer to 0 than to the smallest subnormal: 0, as float("1e-400") is.
      {"1e-400", 0.0},
      {"2e-324", 0.0},
      {"0e999999", 0.0},
      // Just above the midpoint between 1 and the next double: rounding to long double first
      // (CLI11: strtold, then a cast) lands on the midpoint, which rounds to even, 1.
      {"1.000000000000000111022302462515654042363166809082031251", std::nextafter(1.0, 2.0)},
  };
  for (const auto& [text, expected] : cases) {
    double x = -99.0;
    EXPECT_EQ(course::read_decimal(text, x), "") << text;
    EXPECT_EQ(x, expected) << text;
  }
  double x = 1.0;
  EXPECT_EQ(course::read_decimal("-1e-400", x), "");
  EXPECT_TRUE(x == 0.0 && std::signbit(x)) << "a negative number too small is -0, as in Python";
  // A float knob rounds that double once more: 1e-40 is the subnormal float 9.99995e-41.
  EXPECT_EQ(course::read_decimal("1e-40", x), "");
  EXPECT_EQ(static_cast<float>(x), 71362 * std::numeric_limits<float>::denorm_min());
}

TEST(DecimalNumbers, AnythingElseIsNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0x10", "'0x10' is not a number in decimal digits (did you mean 16?)"},
      {"0x1p3", "'0x1p3' is not a number in decimal digits (did you mean 8?)"},
      {" 1", "' 1' is not a number in decimal digits (did you mean 1?)"},
      {"1 ", "'1 ' is not a number in decimal digits"},
      {"inf", "'inf' is not a finite number"},
      {"-Infinity", "'-Infinity' is not a finite number"},
      {"nan", "'nan' is not a finite number"},
      {"NaN", "'NaN' is not a finite number"},
      {"", "'' is not a number in decimal digits"},
      {"+", "'+' is not a number in decimal digits"},
      {".", "'.' is not a number in decimal digits"},
      {"1e", "'1e' is not a number in decimal digits"},
      {"1e+", "'1e+' is not a number in decimal digits"},
      {"1,5", "'1,5' is not a number in decimal digits"},
      {"1.5.2", "'1.5.2' is not a number in decimal digits"},
      {"--1", "'--1' is not a number in decimal digits"},
      {"1e400", "'1e400' is too large (the largest double is about 1.8e308)"},
      {"-1e400", "'-1e400' is too large (the largest double is about 1.8e308)"},
  };
  for (const auto& [text, says] : cases) {
    double x = 7.0;
    EXPECT_EQ(course::read_decimal(text, x), says) << text;
    EXPECT_EQ(x, 7.0) << text << ": a refused text leaves the value alone";
  }
}

TEST(SplitKeepingEmpty, KeepsEveryPiece) {
  using Pieces = std::vector<std::string_view>;
  EXPECT_EQ(course::split_keeping_empty("1,2,", ','), (Pieces{"1", "2", ""}));
  EXPECT_EQ(course::split_keeping_empty("1,,2", ','), (Pieces{"1", "", "2"}));
  EXPECT_EQ(course::split_keeping_empty(",1", ','), (Pieces{"", "1"}));
  EXPECT_EQ(course::split_keeping_empty("", ','), (Pieces{""}));
  EXPECT_EQ(course::split_keeping_empty("3", ','), (Pieces{"3"}));
}

}  // namespace test_numbers
