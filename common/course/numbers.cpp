// numbers.cpp: whole and decimal numbers read strictly, with a message that names the text.
#include "course/numbers.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <system_error>

namespace course {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// " (did you mean 64?)" when C's lenient reader takes the whole text as a number (hex, a
// leading space, "64.0"), which is likely what was meant; "" otherwise. `whole`: only for a
// value that is a whole number.
std::string hint(std::string_view text, bool whole) {
  const std::string copy(text);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(v)) return "";
  if (whole) {
    if (v != std::trunc(v) || std::fabs(v) >= 1e15) return "";
    return " (did you mean " + std::to_string(static_cast<long long>(v)) + "?)";
  }
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // the shortest that reads back
  return " (did you mean " + std::string(buf, r.ptr) + "?)";
}

// The power of ten of the decimal number's first significant digit (0.05 -> -2, 123 -> 2), to
// tell a value too small for a double from one too large: `text` has passed the syntax check,
// and the exponent saturates far beyond any double's range.
long long decimal_exponent(std::string_view text) {
  const std::size_t start = (text.front() == '+' || text.front() == '-') ? 1 : 0;
  const std::size_t e = std::min(text.find_first_of("eE"), text.size());
  const std::string_view mantissa = text.substr(start, e - start);
  const std::size_t point = std::min(mantissa.find('.'), mantissa.size());
  const std::size_t first = mantissa.find_first_of("123456789");
  if (first == std::string_view::npos) return 0;  // zero, never out of range
  const long long position = first < point ? static_cast<long long>(point - first) - 1
                                           : -static_cast<long long>(first - point);
  long long exponent = 0;
  std::size_t i = e + 1;
  const bool negative = i < text.size() && text[i] == '-';
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  for (; i < text.size(); ++i) exponent = std::min(exponent * 10 + (text[i] - '0'), 1000000LL);
  return position + (negative ? -exponent : exponent);
}

}  // namespace

std::string read_whole_number(std::string_view text, std::intmax_t lo, std::uintmax_t hi,
                              WholeNumber& number) {
  std::string_view digits = text;
  const bool minus = !digits.empty() && digits.front() == '-';
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), is_digit)) {
    return "'" + std::string(text) + "' is not a whole number in decimal digits" + hint(text, true);
  }
  std::uintmax_t magnitude = 0;  // base 10 whatever the leading digit: "064" is 64
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude);
  const bool beyond = ec == std::errc::result_out_of_range;
  const bool negative = minus && (magnitude != 0 || beyond);  // "-0" is 0
  // |lo| when lo is negative, computed without overflowing.
  const std::uintmax_t lo_magnitude = lo < 0 ? static_cast<std::uintmax_t>(-(lo + 1)) + 1 : 0;
  const bool too_small = negative
                             ? (lo >= 0 || beyond || magnitude > lo_magnitude)
                             : (lo > 0 && !beyond && magnitude < static_cast<std::uintmax_t>(lo));
  const bool too_large = !negative && (beyond || magnitude > hi);
  if (too_small) {
    return "'" + std::string(text) + "' is too small (the smallest is " + std::to_string(lo) + ")";
  }
  if (too_large) {
    return "'" + std::string(text) + "' is too large (the largest is " + std::to_string(hi) + ")";
  }
  number = {negative, magnitude};
  return "";
}

std::string read_whole_number(std::string_view text, long long lo, long long hi,
                              long long& number) {
  WholeNumber read;
  std::string problem = read_whole_number(text, static_cast<std::intmax_t>(lo),
                                          static_cast<std::uintmax_t>(std::max(hi, 0LL)), read);
  if (!problem.empty()) return problem;
  if (hi < 0 && !read.negative) {  // (a range of negative numbers only: not used, but kept whole)
    return "'" + std::string(text) + "' is too large (the largest is " + std::to_string(hi) + ")";
  }
  number = read.negative ? -static_cast<long long>(read.magnitude - 1) - 1
                         : static_cast<long long>(read.magnitude);
  if (number > hi) {
    return "'" + std::string(text) + "' is too large (the largest is " + std::to_string(hi) + ")";
  }
  return "";
}

std::string read_decimal(std::string_view text, double& value) {
  const std::string quoted = "'" + std::string(text) + "'";
  // The syntax: [sign] digits [. digits] [e [sign] digits], with a digit before or after the point.
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  const std::size_t mantissa = i;
  std::size_t digit_count = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) ++digit_count;
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && is_digit(text[i]); ++i) ++digit_count;
  }
  bool ok = digit_count > 0;
  if (ok && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    const std::size_t exponent_digits = i;
    while (i < text.size() && is_digit(text[i])) ++i;
    ok = i > exponent_digits;
  }
  if (!ok || i != text.size()) {
    std::string word(text.substr(mantissa));
    std::transform(word.begin(), word.end(), word.begin(),
                   [](char c) { return static_cast<char>(c | 0x20); });  // ASCII lower case
    if (word == "inf" || word == "infinity" || word == "nan") {
      return quoted + " is not a finite number";
    }
    return quoted + " is not a number in decimal digits" + hint(text, false);
  }
  // from_chars rounds correctly and takes no '+'.
  const std::string_view number = text.front() == '+' ? text.substr(1) : text;
  double read = 0.0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), read);
  if (ec == std::errc::result_out_of_range) {
    if (decimal_exponent(text) >= 0) {
      return quoted + " is too large (the largest double is about 1.8e308)";
    }
    read = text.front() == '-' ? -0.0 : 0.0;  // nearer to 0 than to the smallest subnormal
  } else if (ec != std::errc() || end != number.data() + number.size()) {
    return quoted + " is not a number in decimal digits";  // (the syntax check let it through)
  }
  value = read;
  return "";
}

std::vector<std::string_view> split_keeping_empty(std::string_view text, char delimiter) {
  std::vector<std::string_view> pieces;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find(delimiter, start);
    pieces.push_back(text.substr(start, end == std::string_view::npos ? text.npos : end - start));
    if (end == std::string_view::npos) return pieces;
    start = end + 1;
  }
}

}  // namespace course
