/// @file
/// Matrices as the course prints them, a shape header then fixed-precision rows.
///
///     Q [4 x 2]
///       1.0000   2.0000
///       3.0000   1.0000
///       ...
///
/// Big matrices are shown compactly: the first and last few rows and columns, with "..."
/// standing in for the rest, so a [5 x 512] activation fits on a terminal line.
#pragma once

#include "course/types.hpp"

#include <cstddef>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace course {

/// The widest line the course writes: the narration (course::Chapter::kWidth) and --help.
inline constexpr std::size_t kLineWidth = 100;

struct PrintOptions {
  int precision = 4;   ///< digits after the decimal point
  Index max_rows = 8;  ///< beyond this many rows, show the first and last max_rows/2
  Index max_cols = 8;  ///< beyond this many columns, show the first and last max_cols/2
  int indent = 2;      ///< spaces before every row
  /// A label per row, printed before it ("k^1", "<pad>"): empty for none, else one per row.
  std::vector<std::string> row_labels{};
  /// A label per column, printed above it, right-aligned like the numbers.
  std::vector<std::string> col_labels{};
};

/// "[4 x 2]": a matrix's shape as the course prints it.
template <typename Derived>
std::string shape(const Eigen::EigenBase<Derived>& m) {
  return shape_str(m.rows(), m.cols());
}
/// "[2, 5, 512]": a batch's shape as PyTorch prints a tensor's.
template <typename T>
std::string shape(const BatchOf<T>& x) {
  return x.shape_str();
}

/// The labels of sentence `row` of a batch of token ids: each id, or its name where `names`
/// has one: {"5", "2", "1", "<pad>", "<pad>"} with the default {0: "<pad>"}.
std::vector<std::string> token_labels(const attn::TokenIds& ids, Index row,
                                      const std::map<int, std::string>& names = {{0, "<pad>"}});

/// token_labels for a figure's axis, where a bare number would be read as a position (the
/// axes count positions from 1): an id without a name is written "id 5".
/// {"id 5", "id 2", "id 1", "<pad>", "<pad>"} with the default {0: "<pad>"}.
std::vector<std::string> id_labels(const attn::TokenIds& ids, Index row,
                                   const std::map<int, std::string>& names = {{0, "<pad>"}});

/// {"k^1", "k^2", ...}: n labels counted from 1, as the notes count tokens.
std::vector<std::string> labels(std::string_view prefix, Index n);

/// 640000 -> "640,000": big counts read at a glance.
std::string with_commas(long long n);

/// `v` with `precision` decimals ("0.1250"), '.' as the decimal point whatever the locale;
/// "inf", "-inf" or "nan" when `v` is not finite. Every number the course prints or writes
/// into a figure's script in fixed point goes through here.
std::string fixed_text(double v, int precision);

/// Formats `m` under the header "<name> [rows x cols]" (no header when name is empty).
std::string format_matrix(std::string_view name, const MatrixD& m, const PrintOptions& opts = {});

/// `text` broken at spaces into lines of at most `width` columns, each ending in "\n": the
/// first starts with `first`, the others with `rest` (a hanging indent). A run of spaces is one
/// break and a space inside [brackets] is none, so a shape "[2, 6, 32]" or a range "[1 - 64]"
/// stays on one line; a word longer than a line is not cut, it gets a line of its own. Text with
/// no word is the one line `first`.
std::string wrap(std::string_view text, std::string_view first, std::string_view rest,
                 std::size_t width = kLineWidth);

/// A step's banner, as course::Chapter::step prints it (88 columns, or the title's width):
///
///     == 2. Scores: alpha_ij = q_i . k_j =============================================
void banner(std::ostream& os, std::string_view title);

/// Prints format_matrix(name, m, opts) to `os`. Accepts any Eigen matrix or expression; it
/// is evaluated once and widened to double (exactly, for float input) for printing.
template <typename Derived>
void print_matrix(std::ostream& os, std::string_view name, const Eigen::MatrixBase<Derived>& m,
                  const PrintOptions& opts = {});

}  // namespace course

#include <ostream>

template <typename Derived>
void course::print_matrix(std::ostream& os, std::string_view name,
                          const Eigen::MatrixBase<Derived>& m, const PrintOptions& opts) {
  const MatrixD widened = m.template cast<double>();
  os << format_matrix(name, widened, opts);
}
