// plot.cpp: figures as three files (<name>.dat, <name>.gp, <name>.png) through gnuplot.
//
// Each figure type has a small script builder that writes the numbers into the .dat text and a
// commented gnuplot script that reads them back by relative name. Plotter::render writes both
// atomically and runs gnuplot in the output folder, so the command a learner types to re-render
// a figure (`cd plots && gnuplot <name>.gp`) is exactly what the course ran.
//
// Layout is computed here in pixels (margins placed `at screen`) rather than left to gnuplot's
// automatic margins: then every heat-map cell has a known size, the value text inside it can be
// sized to fit, and the shared colour bar of a grid sits in a known place.
#include "course/plot.hpp"

#include "course/files.hpp"
#include "course/interrupt.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;  // the process environment, handed on to gnuplot

namespace course {

namespace {

// ---- Numbers and strings as gnuplot reads them --------------------------------------------------

// Shortest text that reads back to the same value: exact, locale-independent and the same
// bytes on every run. gnuplot reads "nan", "inf" and "-inf" in data files.
template <typename T>
std::string num(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Fixed-point text for layout fractions and cell values ("0.1250"); std::to_chars, so the
// decimal point is '.' whatever the global locale says.
std::string fixed(double v, int precision) {
  if (!std::isfinite(v)) return num(v);
  char buf[400];  // 1e308 with 9 decimals still fits
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, precision);
  return std::string(buf, r.ptr);
}

// A gnuplot double-quoted string. Inside "..." gnuplot interprets backslash escapes, so a
// backslash and a double quote are escaped; a newline becomes \n (a line break in the figure);
// other control characters become spaces because they have no visible form.
std::string quote(std::string_view s) {
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
std::string one_line(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return out;
}

// Characters on screen, for layout: UTF-8 continuation bytes do not start a character.
int text_chars(std::string_view s) {
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

int text_lines(std::string_view s) {
  return s.empty() ? 0 : 1 + static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

int widest(const std::vector<std::string>& v) {
  int w = 0;
  for (const auto& s : v) w = std::max(w, text_chars(s));
  return w;
}

// "# ---- Title ------" to 78 columns: the same banners as the C++ sources.
std::string section(std::string_view title) {
  std::string s = "\n# ---- " + std::string(title) + " ";
  if (s.size() < 79) s.append(79 - s.size(), '-');
  return s + "\n";
}

// ---- Validation ---------------------------------------------------------------------------------

[[noreturn]] void invalid(std::string_view where, const std::string& what) {
  throw std::invalid_argument("Plotter::" + std::string(where) + ": " + what);
}

// The name becomes three file names and a command-line argument of gnuplot, so it is kept to
// characters that need no quoting anywhere; a leading '-' would read as an option and a
// leading '.' would hide the files.
void check_name(std::string_view where, const std::string& name) {
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
void check_px(std::string_view where, std::string_view what, int px) {
  if (px < 64 || px > 10000)
    invalid(where, std::string(what) + " must be in [64, 10000] pixels, got " + std::to_string(px));
}

void check_precision(std::string_view where, int p) {
  if (p < 0 || p > 9)
    invalid(where, "value_precision must be in [0, 9], got " + std::to_string(p));
}

void check_first_index(std::string_view where, int first) {
  if (first != 0 && first != 1)
    invalid(where, "first_index must be 0 or 1, got " + std::to_string(first));
}

// A mask must be empty (no mask) or have the matrix's shape.
void check_mask(std::string_view where, const std::string& what, const attn::AllowedMask& allowed,
                const Matrix& m) {
  if (allowed.size() != 0 && (allowed.rows() != m.rows() || allowed.cols() != m.cols()))
    invalid(where, what + "mask " + shape_str(allowed.rows(), allowed.cols()) + " for a matrix " +
                       shape_str(m) + " (the same shape, or empty for no mask)");
}

void check_limit(std::string_view where, const char* what, const std::optional<double>& v) {
  if (v && !std::isfinite(*v)) invalid(where, std::string(what) + " must be finite");
}

// ---- The colour scale ---------------------------------------------------------------------------

struct Range {
  double lo, hi;
};

// The colour range of one matrix: the given limits, the finite data's extremes for the
// missing ones, and a unit-wide range around a constant (gnuplot refuses an empty range).
Range colour_range(std::string_view where, const Matrix& m, std::optional<double> cmin,
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
    if (cmin) r.hi = r.lo + 1;
    else if (cmax) r.lo = r.hi - 1;
    else r = {r.lo - 0.5, r.hi + 0.5};
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

std::string frac(double px, double total) { return fixed(px / total, 4); }

std::string script_head(const std::string& name, std::string_view what,
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

std::string palette_section() {
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
std::string cell_functions_section() {
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
constexpr int kMinPanelPx = 100;        // a grid's squares shrink to fit a page, not below this

// The plot command of one heat map: boxes (not `with image`, which needs at least 2 x 2 cells)
// and, when wanted, the value of each cell on top. Each box reaches one pixel past its cell
// (cell_w x cell_h pixels): neighbours overlap, so no anti-aliased seam shows between them.
// With a mask, the .dat has a fourth column (1 allowed, 0 blocked): allowed cells are coloured
// and labelled, blocked ones hatched and left without a value.
std::string cell_plot(const std::string& block, double cell_w, double cell_h, int value_font,
                      int precision, bool masked) {
  std::string s = "# Boxes reach half a cell plus one pixel from their centre: neighbours overlap\n"
                  "# by a pixel, so no anti-aliased seam shows between them.\n";
  s += "half_w = " + fixed(0.5 + 1.0 / cell_w, 4) + "; half_h = " + fixed(0.5 + 1.0 / cell_h, 4) +
       "\n";
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
         "       with boxxyerror fillstyle solid 1.0 noborder fillcolor rgb \"" + kBlockedFill +
         "\" notitle";
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
std::string blocked_key(double W, double H) {
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
std::string cell_tics(char axis, const std::vector<std::string>& labels, Index n, int first,
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
Index rows_per_label(double cell_px) {
  return std::max<Index>(1, static_cast<Index>(std::ceil(0.85 * kLinePx / cell_px - 1e-9)));
}
Index columns_per_label(double cell_px, int chars, bool turned) {
  const double need = turned ? 0.7 * kLinePx : chars * kCharPx + 4;
  return std::max<Index>(1, static_cast<Index>(std::ceil(need / cell_px - 1e-9)));
}

// The widest tic label of one axis of n cells: the longest given label, or the digits of the
// last number.
int tic_chars(const std::vector<std::string>& labels, Index n, int first) {
  return labels.empty() ? static_cast<int>(std::to_string(first + n - 1).size()) : widest(labels);
}

// The range of one heat-map axis, half a cell beyond the first and last numbers.
std::string cell_range(Index n, int first) {
  return num(static_cast<double>(first) - 0.5) + ":" +
         num(static_cast<double>(first + n) - 0.5);
}

// The same from the last number down to the first: the y axis, whose first row is on top.
std::string cell_range_reversed(Index n, int first) {
  return num(static_cast<double>(first + n) - 0.5) + ":" +
         num(static_cast<double>(first) - 0.5);
}

// The widest value text a cell may hold ("-0.25", "-inf").
int value_chars(const Matrix& m, int precision) {
  int w = 4;
  for (Index i = 0; i < m.size(); ++i)
    w = std::max(w, text_chars(fixed(static_cast<double>(m.data()[i]), precision)));
  return w;
}

// Font size for the values in cells of cell_w x cell_h pixels, or 0 when text would not fit.
int value_font_for(double cell_w, double cell_h, int chars) {
  const double by_width = cell_w * 0.9 / (0.62 * chars * 1.4);  // ~0.62 em per digit, 1.4 px/pt
  const double by_height = cell_h * 0.45 / 1.4;
  const int f = static_cast<int>(std::min({by_width, by_height, 14.0}));
  return f >= 8 ? f : 0;  // smaller values are not readable on a page
}

// Whether a mask blocks anything (an empty mask, or one that allows every cell, is drawn as
// no mask: no hatching, no fourth column, no key).
bool blocks_any(const attn::AllowedMask& allowed) {
  return allowed.size() != 0 && !allowed.all();
}

// The .dat block of one matrix: one line per cell, rows in order, a blank line between rows;
// column and row numbered from `first`, and with a mask a fourth column, 1 allowed, 0 blocked.
void matrix_block(std::string& dat, const Matrix& m, const attn::AllowedMask& allowed, int first) {
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
std::string cells_header(bool masked, int first) {
  return "# column row value" + std::string(masked ? " allowed" : "") +
         "   (one line per cell, numbered from " + std::to_string(first) +
         "; the first row is drawn at the top" +
         (masked ? "; allowed 0 = blocked by the mask" : "") + ")\n";
}

// A log axis over [lo, hi] (both > 0): labels as 1e-06 ... 1e+06 rather than gnuplot's long
// fixed form, and over many decades a label every few decades (at most ~8) with a minor tic at
// each decade between them; gnuplot's default there crowds the minor tics into black blobs.
std::string log_axis(char axis, double lo, double hi) {
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

Bins make_bins(const std::vector<double>& values, int bins) {
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

// ---- Running gnuplot ----------------------------------------------------------------------------

struct RunResult {
  bool found = true;  // false: no such program, or not executable (nothing ran)
  int status = 0;     // exit code, or 128 + signal number
  std::string out;    // everything the program wrote to stdout (the PNG)
  std::string err;    // everything it wrote to stderr
};

// Reads both pipes until the program closes them. Both at once (poll), because a program
// that fills one pipe while we wait on the other would block for ever.
void drain(int out_fd, int err_fd, std::string& out, std::string& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&out, &err};
  int open_pipes = 2;
  char buf[65536];
  while (open_pipes > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("Plotter: poll failed: ") + std::strerror(errno));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // closed (or broken): poll ignores a negative fd
        --open_pipes;
      }
    }
  }
}

// Runs `program args...` in `dir`, stdin on /dev/null, stdout and stderr captured. posix_spawnp
// looks the program up on PATH as execvp does (a name with '/' is used as it is) and reports a
// failed exec as its return value; no shell is involved, so names are never parsed as syntax.
// While it runs, a SIGINT/SIGTERM/SIGHUP to the course stops it too (course/interrupt.hpp).
RunResult run_in(const std::string& program, const std::vector<std::string>& args,
                 const std::filesystem::path& dir) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("Plotter: pipe failed: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw std::runtime_error(std::string("Plotter: pipe failed: ") + std::strerror(err));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());  // glibc 2.29+
  // The child starts with no signal held (ours are held while it starts; see below). Its
  // dispositions are left alone: exec resets the course's handlers to the default, and a
  // signal the user ignored (nohup's SIGHUP) stays ignored in gnuplot too.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);

  pid_t pid = 0;
  int spawned = 0;
  std::optional<interrupt::StopOnSignal> stop_child;
  {
    // Started and registered, or neither: a signal in between would orphan the child.
    const interrupt::HoldSignals hold;
    spawned = ::posix_spawnp(&pid, program.c_str(), &actions, &attr, argv.data(), environ);
    if (spawned == 0) stop_child.emplace(pid);
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (spawned != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    if (spawned == ENOENT || spawned == EACCES || spawned == ENOTDIR) return {false, 127, {}, {}};
    throw std::runtime_error("Plotter: cannot run " + program + " in " + dir.string() + ": " +
                             std::strerror(spawned));
  }
  RunResult result;
  try {
    drain(out_pipe[0], err_pipe[0], result.out, result.err);
  } catch (...) {  // poll failed or the output did not fit in memory: stop gnuplot, reap it
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ::kill(pid, SIGKILL);
    const interrupt::HoldSignals hold;
    stop_child.reset();
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw;
  }
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  // Wait for the exit without reaping (WNOWAIT): until it is reaped the pid cannot be reused,
  // so a signal meanwhile can still kill exactly this child. Then unregister it with signals
  // held, and only then reap it.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0) {
    if (errno != EINTR) throw std::runtime_error("Plotter: waitid failed");
  }
  int status = 0;
  {
    const interrupt::HoldSignals hold;
    stop_child.reset();
    while (::waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) throw std::runtime_error("Plotter: waitpid failed");
    }
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Whether `bytes` is a whole PNG file: the 8-byte signature first and the IEND chunk last
// (length 0, type "IEND", its CRC). gnuplot exits 0 even when its output was cut short, so
// the course checks what it wrote, not only how it exited.
bool is_complete_png(std::string_view bytes) {
  constexpr std::string_view signature("\x89PNG\r\n\x1a\n", 8);
  constexpr std::string_view iend("\0\0\0\0IEND\xae\x42\x60\x82", 12);
  return bytes.size() >= signature.size() + iend.size() && bytes.substr(0, 8) == signature &&
         bytes.substr(bytes.size() - iend.size()) == iend;
}

// How the printed hint names the folder: as is when the shell would read it unchanged,
// otherwise in single quotes.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("/._-+:,=@%", c);
  });
  if (plain) return s;
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

// ---- Plotter ------------------------------------------------------------------------------------

Plotter::Plotter(std::filesystem::path out_dir, bool enabled, std::string gnuplot)
    : out_dir_(std::move(out_dir)), enabled_(enabled), gnuplot_(std::move(gnuplot)) {}

bool Plotter::gnuplot_available() {
  static const bool available = run_in("gnuplot", {"--version"}, ".").found;  // asked once
  return available;
}

Figure Plotter::render(const std::string& name, const std::string& script,
                       const std::string& data) {
  Figure fig;
  if (!enabled_) return fig;
  fig.png = out_dir_ / (name + ".png");
  fig.gp = out_dir_ / (name + ".gp");
  fig.dat = out_dir_ / (name + ".dat");
  std::error_code ec;
  std::filesystem::create_directories(out_dir_, ec);
  if (ec) throw std::runtime_error("Plotter: cannot create " + out_dir_.string() + ": " +
                                   ec.message());
  write_file_atomically(fig.dat, data);
  write_file_atomically(fig.gp, script);

  const RunResult r = run_in(gnuplot_, {"-e", "to_stdout=1", name + ".gp"}, out_dir_);
  if (!r.found) {
    std::cout << "plot: gnuplot not found; render with: cd " << shell_word(out_dir_.string())
              << " && gnuplot " << name << ".gp\n";
    return fig;
  }
  std::string said = r.err;  // gnuplot's own words, without the final newline
  while (!said.empty() && std::isspace(static_cast<unsigned char>(said.back()))) said.pop_back();
  if (r.status != 0) {
    throw std::runtime_error("Plotter: " + gnuplot_ + " failed on " + fig.gp.string() +
                             " (exit status " + std::to_string(r.status) + ")" +
                             (said.empty() ? std::string() : ": " + said));
  }
  if (!is_complete_png(r.out)) {
    throw std::runtime_error("Plotter: " + gnuplot_ + " exited 0 on " + fig.gp.string() +
                             " but wrote no whole PNG (" + std::to_string(r.out.size()) +
                             " bytes, no IEND chunk at the end)" +
                             (said.empty() ? std::string() : ": " + said));
  }
  write_file_atomically(fig.png, r.out);
  fig.rendered = true;
  rendered_.push_back(fig.png);
  return fig;
}

std::string Plotter::summary() const {
  std::string s;
  for (std::size_t i = 0; i < rendered_.size(); ++i) {
    s += (i == 0 ? (rendered_.size() == 1 ? "  figure: " : "  figures: ") : "           ") +
         rendered_[i].string() + "\n";
  }
  return s;
}

// ---- Heat map -----------------------------------------------------------------------------------

Figure Plotter::heatmap(const std::string& name, const Matrix& values,
                        const HeatmapOptions& opts) {
  constexpr std::string_view where = "heatmap";
  check_name(where, name);
  if (values.size() == 0) invalid(where, "the matrix is empty " + shape_str(values));
  check_px(where, "width_px", opts.width_px);
  check_px(where, "height_px", opts.height_px);
  check_precision(where, opts.value_precision);
  if (!opts.xtics.empty() && static_cast<Index>(opts.xtics.size()) != values.cols())
    invalid(where, std::to_string(opts.xtics.size()) + " xtics for a matrix " +
                       shape_str(values) + " (one per column)");
  if (!opts.ytics.empty() && static_cast<Index>(opts.ytics.size()) != values.rows())
    invalid(where, std::to_string(opts.ytics.size()) + " ytics for a matrix " +
                       shape_str(values) + " (one per row)");
  check_first_index(where, opts.first_index);
  check_mask(where, "", opts.allowed, values);
  const Range cr = colour_range(where, values, opts.cmin, opts.cmax);
  if (!enabled_) return {};

  // Layout in pixels: margins for the text around the cells, the rest for the cells.
  const double W = opts.width_px, H = opts.height_px;
  const Index rows = values.rows(), cols = values.cols();
  const int first = opts.first_index;
  const bool masked = blocks_any(opts.allowed);
  const int ytic_chars = tic_chars(opts.ytics, rows, first);
  const int xtic_chars = tic_chars(opts.xtics, cols, first);
  const double left = 14 + (opts.ylabel.empty() ? 0 : kLinePx * text_lines(opts.ylabel) + 8) +
                      ytic_chars * kCharPx + 8;
  const double right = opts.colorbar ? 100 : 24;
  const double top = opts.title.empty() ? 16 : 16 + kTitleLinePx * text_lines(opts.title) + 8;
  const double cell_w = (W - left - right) / static_cast<double>(cols);
  // Column labels wider than their cell are turned 45 degrees so they cannot overlap (beyond
  // 24 unlabelled columns gnuplot spaces the index tics itself; see cell_tics).
  const bool rotate_x = (!opts.xtics.empty() || cols <= 24) && xtic_chars * kCharPx > 0.9 * cell_w;
  const double xtic_h = rotate_x ? 0.72 * xtic_chars * kCharPx + 14 : kLinePx + 8;
  const double bottom = 10 + xtic_h +
                        (opts.xlabel.empty() ? 0 : kLinePx * text_lines(opts.xlabel) + 6) +
                        (masked ? kBlockedKeyPx : 0);
  const double cell_h = (H - top - bottom) / static_cast<double>(rows);
  if (cell_w < 1 || cell_h < 1)
    invalid(where, "a " + std::to_string(opts.width_px) + " x " + std::to_string(opts.height_px) +
                       " px figure leaves no room for the cells of a matrix " + shape_str(values));
  const int value_font =
      opts.show_values ? value_font_for(cell_w, cell_h, value_chars(values, opts.value_precision))
                       : 0;

  std::string dat = "# " + name + ".dat: heat map of a matrix " + shape_str(values) + "\n";
  dat += cells_header(masked, first);
  matrix_block(dat, values, opts.allowed, first);

  std::string s = script_head(name, "a heat map of a matrix " + shape_str(values), "one line per "
                              "cell: column, row, value", opts.width_px, opts.height_px);
  s += palette_section();
  s += section("Colour range");
  s += "# Fixed rather than autoscaled, so colours mean the same value in every figure that\n";
  s += "# uses the same range (and so ink() below knows where the dark half ends).\n";
  s += "cmin = " + num(cr.lo) + "\n";
  s += "cmax = " + num(cr.hi) + "\n";
  s += "set cbrange [cmin:cmax]\n";
  s += opts.colorbar ? "set colorbox\n" : "unset colorbox\n";
  s += section("Axes: column c along x, row r down y (the first row at the top, as printed)");
  s += "set xrange [" + cell_range(cols, first) + "]\n";
  s += "set yrange [" + cell_range_reversed(rows, first) + "]  # reversed: the first row on top\n";
  s += "set tics scale 0  # no tick marks: the labels sit at the cell centres\n";
  s += cell_tics('x', opts.xtics, cols, first, columns_per_label(cell_w, xtic_chars, rotate_x));
  if (rotate_x) s += "set xtics rotate by 45 right  # labels wider than a cell\n";
  s += cell_tics('y', opts.ytics, rows, first, rows_per_label(cell_h));
  if (!opts.title.empty()) s += "set title " + quote(opts.title) + " font \"," +
                                std::to_string(kTitleFont) + "\"\n";
  if (!opts.xlabel.empty()) s += "set xlabel " + quote(opts.xlabel) + "\n";
  if (!opts.ylabel.empty()) s += "set ylabel " + quote(opts.ylabel) + "\n";
  s += section("Margins (fractions of the image), so every cell has a known size");
  s += "set lmargin at screen " + frac(left, W) + "\n";
  s += "set rmargin at screen " + frac(W - right, W) + "\n";
  s += "set bmargin at screen " + frac(bottom, H) + "\n";
  s += "set tmargin at screen " + frac(H - top, H) + "\n";
  s += cell_functions_section();
  if (opts.show_values && value_font == 0)
    s += "# The values are left out: cells of " + fixed(cell_w, 0) + " x " + fixed(cell_h, 0) +
         " px are too small for readable text.\n";
  if (masked) s += blocked_key(W, H);
  s += section("Plot");
  s += cell_plot("", cell_w, cell_h, value_font, opts.value_precision, masked);
  return render(name, s, dat);
}

// ---- Grid of heat maps --------------------------------------------------------------------------

Figure Plotter::heatmap_grid(const std::string& name, const std::vector<HeatmapPanel>& panels,
                             const GridOptions& opts) {
  constexpr std::string_view where = "heatmap_grid";
  check_name(where, name);
  if (panels.empty()) invalid(where, "no panels");
  if (opts.columns < 1) invalid(where, "columns must be at least 1, got " +
                                           std::to_string(opts.columns));
  check_px(where, "panel_px", opts.panel_px);
  check_px(where, "max_width_px", opts.max_width_px);
  check_precision(where, opts.value_precision);
  check_first_index(where, opts.first_index);
  std::vector<Range> ranges;
  for (std::size_t k = 0; k < panels.size(); ++k) {
    if (panels[k].values.size() == 0)
      invalid(where, "panel " + std::to_string(k) + " has an empty matrix " +
                         shape_str(panels[k].values));
    ranges.push_back(colour_range(std::string(where) + " panel " + std::to_string(k),
                                  panels[k].values, opts.cmin, opts.cmax));
    const auto tics_fit = [&](const std::vector<std::string>& tics, Index count, const char* axis) {
      if (!tics.empty() && static_cast<Index>(tics.size()) != count)
        invalid(where, "panel " + std::to_string(k) + " has " + std::to_string(tics.size()) + " " +
                           axis + " for a matrix " + shape_str(panels[k].values));
    };
    tics_fit(panels[k].xtics, panels[k].values.cols(), "xtics");
    tics_fit(panels[k].ytics, panels[k].values.rows(), "ytics");
    check_mask(where, "panel " + std::to_string(k) + " has a ", panels[k].allowed,
               panels[k].values);
  }
  if (!enabled_) return {};

  const bool shared = opts.cmin && opts.cmax;
  const int n = static_cast<int>(panels.size());
  const int C = std::min(opts.columns, n), R = (n + C - 1) / C;
  const int first = opts.first_index;
  // The widest tic label of any panel on each axis (a number or a token), and whether any
  // panel has a mask.
  int ytic_chars = 0, xtic_chars = 0;
  Index max_cols = 1;
  bool any_title = false, masked = false;
  bool every_x_tic = false;  // a panel labels every column (beyond 24 gnuplot picks round steps)
  for (const auto& p : panels) {
    const Index rows = p.values.rows(), cols = p.values.cols();
    ytic_chars = std::max(ytic_chars, tic_chars(p.ytics, rows, first));
    xtic_chars = std::max(xtic_chars, tic_chars(p.xtics, cols, first));
    max_cols = std::max(max_cols, cols);
    every_x_tic = every_x_tic || !p.xtics.empty() || cols <= 24;
    any_title = any_title || !p.title.empty();
    masked = masked || blocks_any(p.allowed);
  }
  // Pixels around each square: tics and labels on the left and below, the panel title above,
  // and the panel's own colour bar on the right when the scales are not shared.
  const double pad_l = 12 + (opts.ylabel.empty() ? 0 : kLinePx * text_lines(opts.ylabel) + 6) +
                       ytic_chars * kCharPx + 8;
  const double pad_r = shared ? 16 : 90;
  const double bar = shared ? 72 : 0;  // the one shared colour bar, right of all panels
  // The squares shrink (down to kMinPanelPx) until the grid fits max_width_px, so that a page
  // shows it at full size rather than scaled down to unreadable text.
  const double fit = (opts.max_width_px - bar) / C - pad_l - pad_r;
  const double a = std::max<double>(std::min<double>(opts.panel_px, fit), kMinPanelPx);
  // Column labels wider than their cells are turned 45 degrees (as in a single heat map).
  const bool rotate_x =
      every_x_tic && xtic_chars * kCharPx > 0.9 * a / static_cast<double>(max_cols);
  const double pad_t = any_title ? kLinePx + 16 : 10;
  const double xtic_h = rotate_x ? 0.72 * xtic_chars * kCharPx + 14 : kLinePx + 14;
  const double pad_b = xtic_h + (opts.xlabel.empty() ? 0 : kLinePx * text_lines(opts.xlabel) + 12);
  const double head = opts.title.empty() ? 8 : kTitleLinePx * text_lines(opts.title) + 18;
  const double W = C * (pad_l + a + pad_r) + bar;
  const double H = head + R * (pad_t + a + pad_b) + (masked ? kBlockedKeyPx : 0);
  const int Wpx = static_cast<int>(std::lround(W)), Hpx = static_cast<int>(std::lround(H));

  std::string dat = "# " + name + ".dat: " + std::to_string(n) + " heat maps, one block each\n";
  dat += cells_header(masked, first);
  std::string s = script_head(name, "a grid of " + std::to_string(n) + " heat maps",
                              "one block per panel (gnuplot's `index k`), one line per cell: "
                              "column, row, value",
                              Wpx, Hpx);
  s += palette_section();
  s += cell_functions_section();
  s += section("Shared settings");
  s += "set tics scale 0  # no tick marks: the labels sit at the cell centres\n";
  if (!opts.xlabel.empty()) s += "set xlabel " + quote(opts.xlabel) + "\n";
  if (!opts.ylabel.empty()) s += "set ylabel " + quote(opts.ylabel) + "\n";
  if (shared) {
    s += "# One colour scale for every panel, so the same colour is the same value everywhere.\n";
    s += "cmin = " + num(*opts.cmin) + "\n";
    s += "cmax = " + num(*opts.cmax) + "\n";
    s += "set cbrange [cmin:cmax]\n";
    // The bar runs from the top of the first row of squares to the bottom of the last.
    const double bar_top = head + pad_t;
    const double bar_bottom = head + (R - 1) * (pad_t + a + pad_b) + pad_t + a;
    s += "# The colour bar is drawn once, right of the grid.\n";
    s += "set colorbox user origin screen " + frac(W - bar + 14, W) + ", screen " +
         frac(H - bar_bottom, H) + " size screen " + frac(18, W) + ", screen " +
         frac(bar_bottom - bar_top, H) + "\n";
  } else {
    s += "# Each panel is scaled to its own values and has its own colour bar.\n";
  }
  if (rotate_x) s += "set xtics rotate by 45 right  # labels wider than a cell\n";
  s += section("Panels");
  s += "set multiplot";
  if (!opts.title.empty()) s += " title " + quote(opts.title) + " font \"," +
                                std::to_string(kTitleFont) + "\"";
  s += "\n";
  for (int k = 0; k < n; ++k) {
    const HeatmapPanel& p = panels[static_cast<std::size_t>(k)];
    const Index rows = p.values.rows(), cols = p.values.cols();
    const int r = k / C, c = k % C;
    const double x0 = c * (pad_l + a + pad_r) + pad_l;
    const double y_top = head + r * (pad_t + a + pad_b) + pad_t;  // from the top edge
    const double cell_w = a / static_cast<double>(cols), cell_h = a / static_cast<double>(rows);
    const int value_font =
        opts.show_values
            ? value_font_for(cell_w, cell_h, value_chars(p.values, opts.value_precision))
            : 0;

    dat += "\n\n# panel " + std::to_string(k) + ": " + shape_str(p.values) + " " +
           one_line(p.title) + "\n";
    matrix_block(dat, p.values, p.allowed, first);

    s += "\n# Panel " + std::to_string(k) + " (row " + std::to_string(r) + ", column " +
         std::to_string(c) + "): " + one_line(p.title) + "\n";
    s += "set lmargin at screen " + frac(x0, W) + "; set rmargin at screen " + frac(x0 + a, W) +
         "\n";
    s += "set tmargin at screen " + frac(H - y_top, H) + "; set bmargin at screen " +
         frac(H - y_top - a, H) + "\n";
    if (!shared) {
      s += "cmin = " + num(ranges[static_cast<std::size_t>(k)].lo) + "; cmax = " +
           num(ranges[static_cast<std::size_t>(k)].hi) + "\n";
      s += "set cbrange [cmin:cmax]\n";
    } else if (k == 1) {
      s += "unset colorbox  # drawn with panel 0 already\n";
    }
    s += "set xrange [" + cell_range(cols, first) + "]; set yrange [" +
         cell_range_reversed(rows, first) + "]\n";
    s += cell_tics('x', p.xtics, cols, first, columns_per_label(cell_w, xtic_chars, rotate_x)) +
         cell_tics('y', p.ytics, rows, first, rows_per_label(cell_h));
    s += "set title " + quote(p.title) + "\n";
    if (opts.show_values && value_font == 0)
      s += "# (values left out: the cells are too small for readable text)\n";
    // With the last panel only: objects and labels are drawn again with every later panel.
    if (masked && k == n - 1) s += blocked_key(W, H);
    s += cell_plot(" index " + std::to_string(k), cell_w, cell_h, value_font, opts.value_precision,
                   blocks_any(p.allowed));
  }
  s += "unset multiplot\n";
  return render(name, s, dat);
}

// ---- Histograms ---------------------------------------------------------------------------------

Figure Plotter::histograms(const std::string& name, const std::vector<HistogramPanel>& panels,
                           const HistogramOptions& opts) {
  constexpr std::string_view where = "histograms";
  check_name(where, name);
  if (panels.empty()) invalid(where, "no panels");
  check_px(where, "width_px", opts.width_px);
  check_px(where, "height_px", opts.height_px);
  for (std::size_t k = 0; k < panels.size(); ++k) {
    const HistogramPanel& p = panels[k];
    if (p.bins < 1 || p.bins > 10000)
      invalid(where, "panel " + std::to_string(k) + ": bins must be in [1, 10000], got " +
                         std::to_string(p.bins));
    if (std::none_of(p.values.begin(), p.values.end(), [](double v) { return std::isfinite(v); }))
      invalid(where, "panel " + std::to_string(k) + " has no finite values (" +
                         std::to_string(p.values.size()) + " samples)");
  }
  if (!enabled_) return {};

  const int n = static_cast<int>(panels.size());
  std::string dat = "# " + name + ".dat: " + std::to_string(n) + " histograms, one block each\n";
  dat += "# bin_centre count bin_width   (computed in C++; the last bin includes the maximum)\n";
  std::string s = script_head(name, std::to_string(n) + " histogram" + (n > 1 ? "s" : "") +
                                        " side by side",
                              "one block per panel (gnuplot's `index k`), one line per bin: "
                              "centre, count, width",
                              opts.width_px, opts.height_px);
  s += section("Style");
  s += "# Bars are counts computed by the C++ code (not gnuplot's `smooth frequency`), drawn as\n";
  s += "# boxes as wide as their bin, in viridis blue with thin white gaps between them.\n";
  s += "set style fill solid 1.0 border rgb \"white\"\n";
  s += "set grid ytics lc rgb \"#dddddd\"\n";
  s += "set tics out nomirror\n";
  s += "set border 3  # left and bottom only\n";
  s += "set ylabel \"count\"\n";
  s += "set yrange [0:*]\n";
  s += section("Panels");
  s += "set multiplot layout 1," + std::to_string(n);
  if (!opts.title.empty()) s += " title " + quote(opts.title) + " font \"," +
                                std::to_string(kTitleFont) + "\"";
  s += "\n";
  for (int k = 0; k < n; ++k) {
    const HistogramPanel& p = panels[static_cast<std::size_t>(k)];
    const Bins b = make_bins(p.values, p.bins);
    long long total = 0;
    for (const long long c : b.counts) total += c;
    dat += "\n\n# panel " + std::to_string(k) + ": " + one_line(p.title) + "\n";
    dat += "# " + std::to_string(total) + " finite samples in " + std::to_string(p.bins) +
           " bins from " + num(b.lo) + " in steps of " + num(b.width);
    dat += b.skipped ? "; " + std::to_string(b.skipped) + " non-finite samples skipped\n" : "\n";
    for (std::size_t i = 0; i < b.counts.size(); ++i)
      dat += num(b.lo + (static_cast<double>(i) + 0.5) * b.width) + " " +
             std::to_string(b.counts[i]) + " " + num(b.width) + "\n";

    s += "\n# Panel " + std::to_string(k) + ": " + one_line(p.title) + "\n";
    s += "set title " + quote(p.title) + "\n";
    s += "set xlabel " + quote(p.xlabel) + "\n";
    s += "set xrange [" + num(b.lo) + ":" + num(b.lo + p.bins * b.width) + "]\n";
    s += "plot datafile index " + std::to_string(k) +
         " using 1:2:3 with boxes fillcolor rgb \"#3b518b\" notitle\n";
  }
  s += "unset multiplot\n";
  return render(name, s, dat);
}

// ---- Curves from Eigen vectors ------------------------------------------------------------------

namespace {

void check_same_length(const char* where, const std::string& label, std::size_t nx,
                       std::size_t ny) {
  require(nx == ny, where, [&] {
    return "curve \"" + one_line(label) + "\" has " + std::to_string(nx) + " x but " +
           std::to_string(ny) + " y values";
  });
}

}  // namespace

Series curve(std::string label, std::vector<double> x, std::vector<double> y, CurveStyle style) {
  check_same_length("curve", label, x.size(), y.size());
  return {.label = std::move(label), .x = std::move(x), .y = std::move(y),
          .points = style.points, .dashed = style.dashed, .line = style.line};
}

Series curve_for_log_y(std::string label, std::vector<double> x, std::vector<double> y,
                       CurveStyle style) {
  check_same_length("curve_for_log_y", label, x.size(), y.size());
  std::vector<double> xs, ys;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!(y[i] <= 0.0)) xs.push_back(x[i]), ys.push_back(y[i]);  // NaN stays, for lines()
  }
  return curve(std::move(label), std::move(xs), std::move(ys), style);
}

// ---- Line plot ----------------------------------------------------------------------------------

Figure Plotter::lines(const std::string& name, const std::vector<Series>& series,
                      const LineOptions& opts) {
  constexpr std::string_view where = "lines";
  check_name(where, name);
  if (series.empty()) invalid(where, "no series");
  check_px(where, "width_px", opts.width_px);
  check_px(where, "height_px", opts.height_px);
  for (std::size_t k = 0; k < series.size(); ++k) {
    const Series& sr = series[k];
    const std::string which = "series " + std::to_string(k) + " (\"" + one_line(sr.label) + "\")";
    if (sr.x.size() != sr.y.size())
      invalid(where, which + " has " + std::to_string(sr.x.size()) + " x but " +
                         std::to_string(sr.y.size()) + " y values");
    if (sr.x.empty()) invalid(where, which + " has no points");
    for (std::size_t i = 0; i < sr.x.size(); ++i) {
      if (!std::isfinite(sr.x[i]) || !std::isfinite(sr.y[i]))
        invalid(where, which + " point " + std::to_string(i) + " is not finite (" + num(sr.x[i]) +
                           ", " + num(sr.y[i]) + ")");
      if (opts.logx && sr.x[i] <= 0)
        invalid(where, which + " point " + std::to_string(i) + " has x = " + num(sr.x[i]) +
                           ", which a log x axis cannot show");
      if (opts.logy && sr.y[i] <= 0)
        invalid(where, which + " point " + std::to_string(i) + " has y = " + num(sr.y[i]) +
                           ", which a log y axis cannot show");
    }
  }
  for (const auto& [x, label] : opts.xtics) {
    if (!std::isfinite(x)) invalid(where, "the xtic \"" + one_line(label) + "\" is not at a finite x");
  }
  for (const auto& [y, label] : opts.hlines) {
    if (!std::isfinite(y) || (opts.logy && y <= 0))
      invalid(where, "the line \"" + one_line(label) + "\" is at y = " + num(y) +
                         ", which the y axis cannot show");
  }
  if (!enabled_) return {};

  const int n = static_cast<int>(series.size());
  std::string dat = "# " + name + ".dat: " + std::to_string(n) + " series, one block each\n";
  dat += "# x y\n";
  std::string s = script_head(name, "a line plot of " + std::to_string(n) + " series",
                              "one block per series (gnuplot's `index k`), one line per point: "
                              "x, y",
                              opts.width_px, opts.height_px);
  s += section("Axes");
  if (!opts.title.empty()) s += "set title " + quote(opts.title) + " font \"," +
                                std::to_string(kTitleFont) + "\"\n";
  if (!opts.xlabel.empty()) s += "set xlabel " + quote(opts.xlabel) + "\n";
  if (!opts.ylabel.empty()) s += "set ylabel " + quote(opts.ylabel) + "\n";
  double xlo = series[0].x[0], xhi = xlo, ylo = series[0].y[0], yhi = ylo;
  for (const Series& sr : series) {
    const auto [x0, x1] = std::minmax_element(sr.x.begin(), sr.x.end());
    const auto [y0, y1] = std::minmax_element(sr.y.begin(), sr.y.end());
    xlo = std::min(xlo, *x0), xhi = std::max(xhi, *x1);
    ylo = std::min(ylo, *y0), yhi = std::max(yhi, *y1);
  }
  for (const auto& line : opts.hlines) ylo = std::min(ylo, line.first), yhi = std::max(yhi, line.first);
  if (opts.logx) s += log_axis('x', xlo, xhi);
  if (opts.logy) s += log_axis('y', ylo, yhi);
  s += "set autoscale xfix  # x runs exactly over the data, not to the next round number\n";
  s += "set grid lc rgb \"#dddddd\"\n";
  s += "set tics out nomirror\n";
  s += "set border 3  # left and bottom only\n";
  if (!opts.xtics.empty()) {
    s += "# Named ticks, slanted so that long names do not run into each other.\n";
    s += "set xtics (";
    for (std::size_t i = 0; i < opts.xtics.size(); ++i) {
      s += quote(opts.xtics[i].second) + " " + num(opts.xtics[i].first);
      if (i + 1 < opts.xtics.size()) s += ", \\\n    ";
    }
    s += ") rotate by 30 right\n";
    s += "set xrange [" + num(xlo - 0.5) + ":" + num(xhi + 0.5) + "]\n";
  }
  if (!opts.hlines.empty()) {
    // The lines need not lie within the curves' range: widen y to show them too.
    if (opts.logy) {
      s += "set yrange [" + num(std::pow(10.0, std::floor(std::log10(ylo)))) + ":" +
           num(std::pow(10.0, std::ceil(std::log10(yhi)))) + "]\n";
    } else {
      const double pad = 0.05 * (yhi > ylo ? yhi - ylo : 1.0);
      s += "set yrange [" + num(ylo - pad) + ":" + num(yhi + pad) + "]\n";
    }
  }
  for (const auto& [y, label] : opts.hlines) {
    s += "set arrow from graph 0, first " + num(y) + " to graph 1, first " + num(y) +
         " nohead dt 2 lw 1.5 lc rgb \"#666666\"\n";
    s += "set label " + quote(label) + " at graph 0.01, first " + num(y) +
         " offset 0, 0.7 tc rgb \"#444444\"\n";
  }
  s += section("Legend");
  s += "# Below the plot, one entry per line, so long labels never cover a curve; height 1 keeps\n";
  s += "# the first entry clear of the x label.\n";
  s += "set key below left Left reverse maxcols 1 samplen 4 height 1\n";
  s += section("Curves");
  s += "# Colours (Okabe and Ito) stay distinguishable with colour-blindness; dt 2 is dashed,\n";
  s += "# pt 7 a filled circle.\n";
  s += "plot ";
  for (int k = 0; k < n; ++k) {
    const Series& sr = series[static_cast<std::size_t>(k)];
    dat += "\n\n# series " + std::to_string(k) + ": " + one_line(sr.label) + "\n";
    for (std::size_t i = 0; i < sr.x.size(); ++i) dat += num(sr.x[i]) + " " + num(sr.y[i]) + "\n";
    if (k > 0) s += ", \\\n     ";
    s += "datafile index " + std::to_string(k) + " using 1:2 with " +
         (!sr.line ? "points pt 7 ps 1.2" : sr.points ? "linespoints pt 7 ps 0.7" : "lines") +
         " lw 2 lc rgb \"" +
         kLineColours[k % 8] + "\" dt " + (sr.dashed ? "2" : "1") + " " +
         (sr.label.empty() ? std::string("notitle") : "title " + quote(sr.label));
  }
  s += "\n";
  return render(name, s, dat);
}

}  // namespace course
