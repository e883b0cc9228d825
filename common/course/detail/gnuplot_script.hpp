/// @file
/// Internal to course/plot: what every figure's gnuplot script is made of (numbers and text
/// as gnuplot reads them, the checks every figure's arguments go through, the colour scale,
/// the pixel layout of heat-map cells, the script's shared sections, histogram bins). Used by
/// heatmaps.cpp and line_plots.cpp; not part of the course's interface.
#pragma once

#include "course/plot.hpp"
#include "course/print.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace course::plot_detail {

// ---- Numbers and strings as gnuplot reads them --------------------------------------------------

// Shortest text that reads back to the same value: exact, locale-independent and the same
// bytes on every run. gnuplot reads "nan", "inf" and "-inf" in data files.
template <typename T>
inline std::string num(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// A gnuplot double-quoted string. Inside "..." gnuplot interprets backslash escapes, so a
// backslash and a double quote are escaped; a newline becomes \n (a line break in the figure);
// other control characters become spaces because they have no visible form.
inline std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A user string inside a '#' comment must stay on one line.
inline std::string one_line(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return out;
}

// Characters on screen, for layout: UTF-8 continuation bytes do not start a character.
inline int text_chars(std::string_view s) {
  int n = 0, line = 0;
  for (const char c : s) {
    if (c == '\n') {
      n = std::max(n, line);
      line = 0;
    } else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
      ++line;
    }
  }
  return std::max(n, line);
}

inline int text_lines(std::string_view s) {
  return s.empty() ? 0 : 1 + static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

inline int widest(const std::vector<std::string>& v) {
  int w = 0;
  for (const auto& s : v) w = std::max(w, text_chars(s));
  return w;
}

// "# ---- Title ------" to 78 columns: the same banners as the C++ sources.
inline std::string section(std::string_view title) {
  std::string s = "\n# ---- " + std::string(title) + " ";
  if (s.size() < 79) s.append(79 - s.size(), '-');
  return s + "\n";
}

// ---- Validation ---------------------------------------------------------------------------------

[[noreturn]] inline void invalid(std::string_view where, const std::string& what) {
  throw std::invalid_argument("Plotter::" + std::string(where) + ": " + what);
}

// The name becomes three file names and a command-line argument of gnuplot, so it is kept to
// characters that need no quoting anywhere; a leading '-' would read as an option and a
// leading '.' would hide the files.
inline void check_name(std::string_view where, const std::string& name) {
  if (name.empty()) invalid(where, "the figure name is empty");
  for (const char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok)
      invalid(where, "figure name \"" + one_line(name) +
                         "\" may only use letters, digits, '_', '.' and '-' (no '/')");
  }
  if (name.front() == '-' || name.front() == '.')
    invalid(where, "figure name \"" + name + "\" must not start with '-' or '.'");
}

// Below ~64 px there is no room for a plot; above 10000 px a typo is more likely than intent.
inline void check_px(std::string_view where, std::string_view what, int px) {
  if (px < 64 || px > 10000)
    invalid(where, std::string(what) + " must be in [64, 10000] pixels, got " + std::to_string(px));
}

inline void check_precision(std::string_view where, int p) {
  if (p < 0 || p > 9) invalid(where, "value_precision must be in [0, 9], got " + std::to_string(p));
}

inline void check_first_index(std::string_view where, int first) {
  if (first != 0 && first != 1)
    invalid(where, "first_index must be 0 or 1, got " + std::to_string(first));
}

// A mask must be empty (no mask) or have the matrix's shape.
inline void check_mask(std::string_view where, const std::string& what,
                       const attn::AllowedMask& allowed, const Matrix& m) {
  if (allowed.size() != 0 && (allowed.rows() != m.rows() || allowed.cols() != m.cols()))
    invalid(where, what + "mask " + shape_str(allowed.rows(), allowed.cols()) + " for a matrix " +
                       shape_str(m) + " (the same shape, or empty for no mask)");
}

// The scores shown in a heat map's twin: none (empty) or one per cell of the matrix.
inline void check_scores(std::string_view where, const std::string& what, const Matrix& scores,
                         const Matrix& m) {
  if (scores.size() != 0 && (scores.rows() != m.rows() || scores.cols() != m.cols()))
    invalid(where, what + "scores " + shape_str(scores) + " for a matrix " + shape_str(m) +
                       " (the same shape, or empty for none)");
}

inline void check_limit(std::string_view where, const char* what, const std::optional<double>& v) {
  if (v && !std::isfinite(*v)) invalid(where, std::string(what) + " must be finite");
}

// ---- The colour scale ---------------------------------------------------------------------------

struct Range {
  double lo, hi;
};

// The colour range of one matrix: the given limits, the finite data's extremes for the
// missing ones, and a unit-wide range around a constant (gnuplot refuses an empty range).
inline Range colour_range(std::string_view where, const Matrix& m, std::optional<double> cmin,
                          std::optional<double> cmax) {
  check_limit(where, "cmin", cmin);
  check_limit(where, "cmax", cmax);
  if (cmin && cmax && !(*cmin < *cmax))
    invalid(where, "cmin (" + num(*cmin) + ") must be below cmax (" + num(*cmax) + ")");
  float lo = 0, hi = 0;
  bool any = false;
  for (Index i = 0; i < m.size(); ++i) {
    const float v = m.data()[i];
    if (!std::isfinite(v)) continue;
    lo = any ? std::min(lo, v) : v;
    hi = any ? std::max(hi, v) : v;
    any = true;
  }
  if (!any) invalid(where, "the matrix " + shape_str(m) + " has no finite value to colour");
  // Keep the float's own value (0.1f stays 0.1 in the script, not 0.100000001).
  Range r{std::stod(num(lo)), std::stod(num(hi))};
  if (cmin) r.lo = *cmin;
  if (cmax) r.hi = *cmax;
  if (!(r.lo < r.hi)) {
    if (cmin)
      r.hi = r.lo + 1;
    else if (cmax)
      r.lo = r.hi - 1;
    else
      r = {r.lo - 0.5, r.hi + 0.5};
  }
  return r;
}

// ---- Script pieces shared by every figure -------------------------------------------------------

constexpr const char* kViridis[9] = {"#440154", "#472c7a", "#3b518b", "#2c718e", "#21908d",
                                     "#27ad81", "#5cc863", "#aadc32", "#fde725"};

// Qualitative colours for line plots (Okabe and Ito): distinguishable with colour-blindness.
constexpr const char* kLineColours[8] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                         "#e69f00", "#56b4e9", "#000000", "#f0e442"};

// Text sizes, and what they take on screen in pixels (pngcairo's sans at these sizes).
constexpr int kFont = 10;       // tics, labels, legend
constexpr int kTitleFont = 12;  // titles
constexpr int kCharPx = 7;      // average character width at kFont
constexpr int kLinePx = 16;     // line height at kFont
constexpr int kTitleLinePx = 19;

inline std::string frac(double px, double total) { return fixed_text(px / total, 4); }

inline std::string script_head(const std::string& name, std::string_view what,
                               std::string_view data_columns, int w, int h) {
  std::string s;
  s += "# " + name + ".gp: " + std::string(what) + ", written by course::Plotter\n";
  s += "# (Attention, Step by Step). Edit freely, then re-render in this folder with\n";
  s += "#   gnuplot " + name + ".gp\n";
  s += "# Data: " + name + ".dat, " + std::string(data_columns) + "\n";
  s += section("Output");
  s += "# pngcairo draws anti-aliased text and lines. noenhanced: every text appears exactly as\n";
  s += "# written (x_1 stays x_1); say enhanced instead to get gnuplot's sub/superscript markup.\n";
  s += "set terminal pngcairo size " + std::to_string(w) + "," + std::to_string(h) +
       " noenhanced font \"Sans," + std::to_string(kFont) + "\"\n";
  s += "set encoding utf8\n";
  s += "# The course has gnuplot write the PNG to its standard output (gnuplot -e to_stdout=1)\n";
  s += "# and saves it itself, checking that it is whole and that every byte reached the disk;\n";
  s += "# run by hand, the output is this file:\n";
  s += "if (exists(\"to_stdout\")) { set output } else { set output \"" + name + ".png\" }\n";
  s += "datafile = \"" + name + ".dat\"\n";
  return s;
}

inline std::string palette_section() {
  std::string s = section("Palette: viridis");
  s += "# gnuplot 5.4 has no built-in viridis, so it is defined by its nine anchor colours,\n";
  s += "# dark purple (low) to yellow (high); gnuplot interpolates between neighbours.\n";
  s += "set palette defined (";
  for (int i = 0; i < 9; ++i) {
    s += std::to_string(i) + " \"" + kViridis[i] + "\"";
    if (i < 8) s += i == 4 ? ", \\\n                      " : ", ";
  }
  return s + ")\n";
}

// The cells of a heat map, and the text colour rule, as gnuplot functions: the same for a
// single heat map and every panel of a grid.
inline std::string cell_functions_section() {
  std::string s = section("Cells");
  s += "# Each cell is a filled box centred on (column, row). NaN and the -inf of masked scores\n";
  s += "# have no colour: finite() sends them to NaN, which gnuplot leaves blank.\n";
  s += "finite(v) = v == v && abs(v) <= 1e308\n";
  s += "# Cell text: white on the dark (low) end of viridis, black on the light (high) end. The\n";
  s += "# switch at 43% of the colour range is where white and black text have equal contrast\n";
  s += "# (WCAG) against the cell colour; blank cells get black text.\n";
  s += "ink(v) = (!finite(v) || (v - cmin) / (cmax - cmin) >= 0.43) ? 0x000000 : 0xffffff\n";
  return s;
}

// Blocked cells (a mask's false entries): light grey under dark-grey diagonal hatching, two
// colours viridis never takes, so "blocked" cannot be read as "a small weight".
constexpr const char* kBlockedFill = "#e3e3e3";
constexpr const char* kBlockedHatch = "#8c8c8c";
constexpr double kBlockedKeyPx = 24;  // the strip at the bottom that holds the "blocked" key
constexpr int kMinPanelPx = 100;      // a grid's squares shrink to fit a page, not below this

// The plot command of one heat map: boxes (not `with image`, which needs at least 2 x 2 cells)
// and, when wanted, the value of each cell on top. Each box reaches one pixel past its cell
// (cell_w x cell_h pixels): neighbours overlap, so no anti-aliased seam shows between them.
// With a mask, the .dat has a fourth column (1 allowed, 0 blocked): allowed cells are coloured
// and labelled, blocked ones hatched and left without a value.
inline std::string cell_plot(const std::string& block, double cell_w, double cell_h, int value_font,
                             int precision, bool masked) {
  std::string s = "# Boxes reach half a cell plus one pixel from their centre: neighbours overlap\n"
                  "# by a pixel, so no anti-aliased seam shows between them.\n";
  s += "half_w = " + fixed_text(0.5 + 1.0 / cell_w, 4) +
       "; half_h = " + fixed_text(0.5 + 1.0 / cell_h, 4) + "\n";
  // x of an allowed cell (NaN, which gnuplot skips, for a blocked one), and the reverse.
  const std::string x_allowed = masked ? "($4 != 0 ? $1 : NaN)" : "1";
  if (masked)
    s += "# Column 4 is the mask: blocked cells (0) get no colour and no value, but grey\n"
         "# hatching instead.\n";
  s += "plot datafile" + block + " using " + x_allowed +
       ":2:(half_w):(half_h):(finite($3) ? $3 : NaN) \\\n"
       "       with boxxyerror fillstyle solid 1.0 noborder fillcolor palette notitle";
  if (masked) {
    s += ", \\\n     datafile" + block +
         " using ($4 != 0 ? NaN : $1):2:(half_w):(half_h) \\\n"
         "       with boxxyerror fillstyle solid 1.0 noborder fillcolor rgb \"" +
         kBlockedFill + "\" notitle";
    s += ", \\\n     datafile" + block +
         " using ($4 != 0 ? NaN : $1):2:(0.5):(0.5) \\\n"
         "       with boxxyerror fillstyle pattern 5 transparent noborder linecolor rgb \"" +
         kBlockedHatch + "\" notitle";
  }
  if (value_font > 0) {
    s += ", \\\n     datafile" + block + " using " + x_allowed + ":2:(sprintf(\"%." +
         std::to_string(precision) + "f\", $3)):(ink($3)) \\\n       with labels font \",";
    s += std::to_string(value_font) + "\" textcolor rgb variable notitle";
  }
  return s + "\n";
}

// The "blocked" key: a hatched swatch and the word, in a strip along the bottom-right corner of
// a W x H pixel figure.
inline std::string blocked_key(double W, double H) {
  const double x0 = W - 96, x1 = W - 80, y0 = 7, y1 = kBlockedKeyPx - 7;
  const std::string rect = "rect from screen " + frac(x0, W) + ", screen " + frac(y0, H) +
                           " to screen " + frac(x1, W) + ", screen " + frac(y1, H);
  std::string s = "# Key: what a hatched cell means.\n";
  s += "set object 1 " + rect + " fillcolor rgb \"" + kBlockedFill +
       "\" fillstyle solid 1.0 noborder front\n";
  s += "set object 2 " + rect + " fillcolor rgb \"" + kBlockedHatch +
       "\" fillstyle pattern 5 transparent border linecolor rgb \"" + kBlockedHatch + "\" front\n";
  s += "set label 1 \"blocked\" at screen " + frac(x1 + 6, W) + ", screen " +
       frac((y0 + y1) / 2, H) + " left front\n";
  return s;
}

// Tics of one heat-map axis: the given labels, or the numbers first, first + 1, ... at the
// cells (the data's coordinates are those numbers); every step-th cell's only, when cells are
// too small for a label each.
inline std::string cell_tics(char axis, const std::vector<std::string>& labels, Index n, int first,
                             Index step) {
  std::string s = "set " + std::string(1, axis) + "tics ";
  if (step > 1)
    s = "# A label every " + std::to_string(step) + " cells: one each would overlap.\n" + s;
  if (!labels.empty()) {
    s += "(";
    for (std::size_t i = 0, written = 0; i < labels.size(); i += static_cast<std::size_t>(step)) {
      if (written > 0) s += written % 6 == 0 ? ", \\\n    " : ", ";
      s += quote(labels[i]) + " " + std::to_string(static_cast<Index>(i) + first);
      ++written;
    }
    return s + ")\n";
  }
  // Every number (or step-th) while they fit; beyond 24 let gnuplot choose round steps.
  if (n <= 24)
    return s + std::to_string(first) + ", " + std::to_string(step) + ", " +
           std::to_string(first + n - 1) + "\n";
  return s + "autofreq\nset format " + std::string(1, axis) + " \"%.0f\"\n";
}

// How many cells of `cell_px` one tic label needs along its axis: a line of text across rows,
// or a label `chars` wide along columns (a turned one needs about a line's height, sideways).
inline Index rows_per_label(double cell_px) {
  return std::max<Index>(1, static_cast<Index>(std::ceil(0.85 * kLinePx / cell_px - 1e-9)));
}
inline Index columns_per_label(double cell_px, int chars, bool turned) {
  const double need = turned ? 0.7 * kLinePx : chars * kCharPx + 4;
  return std::max<Index>(1, static_cast<Index>(std::ceil(need / cell_px - 1e-9)));
}

// The widest tic label of one axis of n cells: the longest given label, or the digits of the
// last number.
inline int tic_chars(const std::vector<std::string>& labels, Index n, int first) {
  return labels.empty() ? static_cast<int>(std::to_string(first + n - 1).size()) : widest(labels);
}

// The range of one heat-map axis, half a cell beyond the first and last numbers.
inline std::string cell_range(Index n, int first) {
  return num(static_cast<double>(first) - 0.5) + ":" + num(static_cast<double>(first + n) - 0.5);
}

// The same from the last number down to the first: the y axis, whose first row is on top.
inline std::string cell_range_reversed(Index n, int first) {
  return num(static_cast<double>(first + n) - 0.5) + ":" + num(static_cast<double>(first) - 0.5);
}

// The widest value text a cell may hold ("-0.25", "-inf").
inline int value_chars(const Matrix& m, int precision) {
  int w = 4;
  for (Index i = 0; i < m.size(); ++i)
    w = std::max(w, text_chars(fixed_text(static_cast<double>(m.data()[i]), precision)));
  return w;
}

// Font size for the values in cells of cell_w x cell_h pixels, or 0 when text would not fit.
inline int value_font_for(double cell_w, double cell_h, int chars) {
  const double by_width = cell_w * 0.9 / (0.62 * chars * 1.4);  // ~0.62 em per digit, 1.4 px/pt
  const double by_height = cell_h * 0.45 / 1.4;
  const int f = static_cast<int>(std::min({by_width, by_height, 14.0}));
  return f >= 8 ? f : 0;  // smaller values are not readable on a page
}

// Whether a mask blocks anything (an empty mask, or one that allows every cell, is drawn as
// no mask: no hatching, no fourth column, no key).
inline bool blocks_any(const attn::AllowedMask& allowed) {
  return allowed.size() != 0 && !allowed.all();
}

// The .dat block of one matrix: one line per cell, rows in order, a blank line between rows;
// column and row numbered from `first`, and with a mask a fourth column, 1 allowed, 0 blocked.
inline void matrix_block(std::string& dat, const Matrix& m, const attn::AllowedMask& allowed,
                         int first) {
  const bool masked = blocks_any(allowed);
  for (Index r = 0; r < m.rows(); ++r) {
    for (Index c = 0; c < m.cols(); ++c) {
      dat += std::to_string(c + first) + " " + std::to_string(r + first) + " " + num(m(r, c));
      if (masked) dat += allowed(r, c) ? " 1" : " 0";
      dat += "\n";
    }
    if (r + 1 < m.rows()) dat += "\n";
  }
}

// The .dat header line of a heat map.
inline std::string cells_header(bool masked, int first) {
  return "# column row value" + std::string(masked ? " allowed" : "") +
         "   (one line per cell, numbered from " + std::to_string(first) +
         "; the first row is drawn at the top" +
         (masked ? "; allowed 0 = blocked by the mask" : "") + ")\n";
}

// A log axis over [lo, hi] (both > 0): labels as 1e-06 ... 1e+06 rather than gnuplot's long
// fixed form, and over many decades a label every few decades (at most ~8) with a minor tic at
// each decade between them; gnuplot's default there crowds the minor tics into black blobs.
inline std::string log_axis(char axis, double lo, double hi) {
  const std::string a(1, axis);
  std::string s = "set logscale " + a + " 10\nset format " + a + " \"%g\"\n";
  const int span = static_cast<int>(std::ceil(std::log10(hi)) - std::floor(std::log10(lo)));
  const int step = std::max(1, (span + 7) / 8);
  if (step > 1) {
    s += "set " + a + "tics 1e" + std::to_string(step) + "  # a label every " +
         std::to_string(step) + " decades\n";
    s += "set m" + a + "tics " + std::to_string(step) + "  # a minor tic at every decade\n";
  }
  return s;
}

// ---- Histogram bins -----------------------------------------------------------------------------

struct Bins {
  double lo = 0, width = 1;
  std::vector<long long> counts;
  std::size_t skipped = 0;  // non-finite samples
};

inline Bins make_bins(const std::vector<double>& values, int bins) {
  Bins b;
  double lo = 0, hi = 0;
  bool any = false;
  for (const double v : values) {
    if (!std::isfinite(v)) {
      ++b.skipped;
      continue;
    }
    lo = any ? std::min(lo, v) : v;
    hi = any ? std::max(hi, v) : v;
    any = true;
  }
  if (lo == hi) {  // all samples equal: one unit-wide range centred on them
    lo -= 0.5;
    hi += 0.5;
  }
  b.lo = lo;
  b.width = (hi - lo) / bins;
  b.counts.assign(static_cast<std::size_t>(bins), 0);
  for (const double v : values) {
    if (!std::isfinite(v)) continue;
    // floor((v - lo) / width), clamped: the maximum lands in the last bin, and rounding can
    // never push a sample outside the range.
    const double k = std::floor((v - lo) / b.width);
    const auto i = static_cast<std::size_t>(std::clamp(k, 0.0, static_cast<double>(bins - 1)));
    ++b.counts[i];
  }
  return b;
}

}  // namespace course::plot_detail
