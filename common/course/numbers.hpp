/// @file
/// Numbers as the course reads them from what a learner types: written in decimal, the whole
/// text one number, and a message that names the text when it is not.
///
///     read_whole_number("064", 1, 1024, n)   // n = 64: decimal, whatever the leading digit
///     read_whole_number("0x40", 1, 1024, n)  // "'0x40' is not a whole number in decimal
///                                            //  digits (did you mean 64?)"
///     read_decimal("1e-40", x)               // x = 1e-40, the nearest double
///     read_decimal("0x1p3", x)               // "'0x1p3' is not a number in decimal digits
///                                            //  (did you mean 8?)"
///
/// The same rules for every number a chapter reads: its integer and floating-point knobs
/// (course/cli.hpp), each entry of a list knob ("--row 3,1,4"), chapter 05's token ids. C's
/// readers are lenient in ways that change a value silently: strtol and CLI11 take "064" as
/// octal 52 and "0x40" as hex, strtod reads "0x1p3", "inf" and " 7", stoi stops at the first
/// character it cannot use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace course {

/// A whole number as read: its sign and its magnitude, so that every value of both
/// std::intmax_t and std::uintmax_t (the seed) can be read.
struct WholeNumber {
  bool negative = false;
  std::uintmax_t magnitude = 0;
};

/// Reads `text` as a whole number in decimal digits with an optional sign ("064" is 64, "+5"
/// is 5, "-0" is 0) between `lo` and `hi`. Anything else is refused: "64.0", "1e3", "0x40",
/// "0b1", " 7", "". Returns the problem, which quotes the text ("'0x40' is not a whole number in
/// decimal digits (did you mean 64?)", "'300' is too large (the largest is 255)"), or "" after
/// storing the number in `number`.
std::string read_whole_number(std::string_view text, std::intmax_t lo, std::uintmax_t hi,
                              WholeNumber& number);

/// read_whole_number() for a value that fits a long long (a token id, a count), stored in
/// `number`; `lo` <= `hi`.
std::string read_whole_number(std::string_view text, long long lo, long long hi, long long& number);

/// Reads `text` as a number written in decimal: an optional sign, digits with an optional
/// decimal point ("2", "-0.5", ".5", "5.") and an optional exponent ("1e-3", "2.5E+2"). The whole
/// text is the number: no space around it, no hexadecimal ("0x10", "0x1p3"), no "inf" or "nan".
///
/// The value is the double nearest to the decimal number, as Python's float() and NumPy read
/// it (correctly rounded; strtold followed by a cast to double, CLI11's way, rounds twice and
/// can miss by one unit in the last place). A number too small for a double is read as the
/// nearest one, a subnormal or zero ("1e-310" is 9.9999999999999694e-311, "1e-400" is 0); a
/// number too large for one is refused. A knob that holds a float rounds this double once more,
/// as np.float32(float(text)) does: 1e-40 becomes the subnormal float 9.99995e-41.
///
/// Returns the problem, which quotes the text ("'0x10' is not a number in decimal digits (did
/// you mean 16?)", "'nan' is not a finite number", "'1e999' is too large (the largest double is
/// about 1.8e308)"), or "" after storing the value in `value`.
std::string read_decimal(std::string_view text, double& value);

/// `text` cut at every `delimiter`, empty pieces kept, so that a list can name the entry that
/// is missing: "1,2," is {"1", "2", ""}, "1,,2" is {"1", "", "2"}, "" is {""}.
std::vector<std::string_view> split_keeping_empty(std::string_view text, char delimiter);

}  // namespace course
