// plot.hpp: figures through gnuplot, each one three files side by side in the output folder:
//   <name>.dat   the numbers, as plain columns a learner can open in anything
//   <name>.gp    a readable, self-contained gnuplot script (restyle it and run it again)
//   <name>.png   what gnuplot renders from the two (pngcairo terminal)
// When gnuplot is not installed the .dat and .gp are still written and the one command that
// renders them is printed. Palette: viridis, defined from its nine anchor colours because
// gnuplot 5.4 has no built-in viridis.
//
// Conventions every figure follows:
// - Text (titles, labels, tics, legend entries) is drawn exactly as written: the terminal is
//   set `noenhanced`, so "W_hh" and "q^1" are not turned into sub/superscripts. Strings are
//   escaped for gnuplot's double quotes (backslash, double quote, control characters), and
//   UTF-8 is passed through (`set encoding utf8`), so "α" works.
// - Numbers in .dat and .gp files are written with std::to_chars in the shortest form that
//   reads back to the same value (float for Matrix entries, double otherwise): exact,
//   locale-independent, and byte-identical from run to run. No dates, no absolute paths.
// - Every file is written through course::AtomicFile (a unique temporary renamed into place),
//   so a failed or interrupted run never leaves half a file under a final name. gnuplot writes
//   the PNG to its standard output; the course checks that it is whole (signature to IEND
//   chunk: gnuplot exits 0 even when its output was cut short) and writes it itself, so a
//   full disk is an error that says so ("No space left on device").
// - Invalid input throws std::invalid_argument("Plotter::<function>: <problem>") before
//   anything is written, also when the plotter is disabled, so a --no-plots run catches the
//   same mistakes. Figure names must be non-empty and use only [A-Za-z0-9_.-].
// - Heat maps number rows and columns from 1, like the course's text ("query 1" is row 0 of
//   the matrix), unless tics name them (tokens) or first_index says 0 (a quantity that starts
//   at 0, such as the position pos of the sinusoidal encoding). The .dat uses the same numbers.
// - Blocked cells: given the mask (`allowed`, false = blocked), a heat map draws a blocked cell
//   hatched grey with no value, and a "blocked" key in the bottom-right corner, so a weight a
//   mask set to exactly 0 never looks like a small real weight (both would print "0.00").
// - Non-finite values: a heat map accepts NaN and +-inf (a masked score is -inf) and leaves
//   those cells blank, printing "nan"/"-inf" when values are shown; at least one value must be
//   finite. Histograms skip non-finite samples (the .dat header says how many); a panel needs at
//   least one finite sample. Line plots reject non-finite x or y, and x or y <= 0 on a log
//   axis: drop the point in the caller instead (curve_for_log_y() drops y <= 0 for a log y).
#pragma once

#include "attn/ops/masks.hpp"
#include "course/types.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace course {

// Every member of the structs below has a default (`{}` where no other value fits), so a
// designated initializer can name only what it changes without -Wmissing-field-initializers.

/// What happened to one figure: the files written and whether the PNG was rendered.
/// A disabled plotter writes nothing and returns empty paths.
struct Figure {
  std::filesystem::path png{}, gp{}, dat{};
  /// A heat map's interactive twin, NAME.html: the same numbers in a page a browser explores
  /// cell by cell (hover: row, column, their labels, the value, the score). Heat maps only.
  std::filesystem::path html{};
  bool rendered = false;
};

struct HeatmapOptions {
  std::string title{};
  std::string xlabel{};              ///< columns of the matrix run along x
  std::string ylabel{};              ///< rows run along y, row 0 at the top
  std::vector<std::string> xtics{};  ///< one label per column (empty: indices)
  std::vector<std::string> ytics{};  ///< one label per row (empty: indices)
  /// The number of the first row and column where no tics name them: 1, like the course's
  /// text; 0 where the quantity itself starts at 0 (the position pos of PE).
  int first_index = 1;
  /// Which cells a mask allows: empty (all), or the matrix's shape. Blocked cells (false) are
  /// drawn hatched grey, without a value; a mask that blocks nothing is drawn as no mask.
  attn::AllowedMask allowed{};
  /// Print each cell's value inside it, white on the dark (low) end of the palette and black
  /// on the light end. Left out (with a note in the .gp) when cells are too small for text.
  bool show_values = false;
  int value_precision = 2;  ///< digits after the point, 0..9
  bool colorbar = true;
  std::optional<double> cmin{}, cmax{};  ///< fixed colour range (e.g. 0..1 for weights)
  int width_px = 800, height_px = 640;
  /// For the interactive twin (Figure::html): what a cell holds ("weight"), and the scores
  /// before the softmax (the values' shape), shown beside each weight; empty: none.
  std::string value_name = "value";
  Matrix scores{};
};

/// One panel of a heat-map grid.
struct HeatmapPanel {
  Matrix values{};
  std::string title{};
  std::vector<std::string> xtics{};  ///< one label per column (empty: indices), e.g. tokens
  std::vector<std::string> ytics{};  ///< one label per row (empty: indices)
  attn::AllowedMask allowed{};       ///< blocked cells (false) hatched grey; empty: all allowed
  Matrix scores{};  ///< the scores before the softmax, for the twin (values' shape); empty: none
};

/// A grid of heat maps. With cmin and cmax both given, all panels share that colour scale and
/// one colour bar; otherwise each panel is scaled to its own values and gets its own bar.
struct GridOptions {
  std::string title{};                   ///< over the whole grid
  std::string xlabel{}, ylabel{};        ///< under / beside every panel
  int columns = 4;                       ///< panels per row of the grid
  int first_index = 1;                   ///< as in HeatmapOptions: rows and columns numbered from 1
  std::optional<double> cmin{}, cmax{};  ///< one colour scale shared by all panels
  /// false: no colour bar at all, for values whose two colours the title names (0 or 1, say).
  bool colorbar = true;
  bool show_values = false;
  int value_precision = 2;
  int panel_px = 320;  ///< side of one panel's square plot area, in pixels
  /// The widest the figure may be: panels shrink below panel_px (to 100 px at least) to fit,
  /// so that a page's text column (about 870 px on the site) shows it at full size.
  int max_width_px = 900;
  /// For the interactive twin: what a cell holds ("weight"), and what rows and columns are
  /// ("query", "key") where the grid leaves its axes untitled to give the panels the room.
  std::string value_name = "value";
  std::string row_name{}, column_name{};
};

/// One histogram panel: the values and the title above it. The bins are computed here, not
/// by gnuplot: `bins` equal widths from the smallest to the largest finite value, each bin
/// [lo, hi) except the last, which also holds the maximum.
struct HistogramPanel {
  std::vector<double> values{};
  std::string title{};
  std::string xlabel{};
  int bins = 50;  ///< 1..10000
  /// Nonzero (and finite): a second x axis along the top that reads x * top_per_x, labelled
  /// top_label; for one set of samples under two names (b = a / 100 is a, relabelled).
  double top_per_x = 0;
  std::string top_label{};
};

struct HistogramOptions {
  std::string title{};  ///< over all panels
  int width_px = 1000, height_px = 450;
};

/// One curve of a line plot.
struct Series {
  std::string label{};
  std::vector<double> x{}, y{};
  bool points = true;  ///< draw markers at the data points as well as the line
  bool dashed = false;
  bool line = true;  ///< false: markers only
  /// Read against a second y axis on the right (LineOptions::y2label), linear whatever logy
  /// says: a quantity of other units beside the others (a loss beside scores in [0, 1]).
  bool right_axis = false;
};

// ---- Curves from Eigen vectors ------------------------------------------------------------------

/// The entries of an Eigen vector, or of a matrix with one row or one column (a [1 x n] row of
/// weights, a column of a results table, an expression of them), as the doubles that Series and
/// HistogramPanel hold. Throws std::invalid_argument for a matrix of more rows and columns,
/// which has no one order to flatten it in.
template <typename Derived>
std::vector<double> values_of(const Eigen::DenseBase<Derived>& v) {
  require(v.rows() == 1 || v.cols() == 1, "values_of", [&] {
    return shape_str(v.rows(), v.cols()) + " is not a vector: pass one row or one column";
  });
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(v.size()));
  // Two indices, not v(i): a block such as m.topRows(1) has no one-index access.
  for (Index i = 0; i < v.size(); ++i)
    out.push_back(static_cast<double>(v.rows() == 1 ? v(0, i) : v(i, 0)));
  return out;
}

/// How curve() draws a series (the style members of Series).
struct CurveStyle {
  bool points = true;  ///< markers at the data points as well as the line
  bool dashed = false;
  bool line = true;  ///< false: markers only, for points that are not a curve (one per layer)
  bool right_axis = false;  ///< against the right-hand y axis (Series::right_axis)
};

/// A curve through the points (x_i, y_i). x and y must have the same length
/// (std::invalid_argument otherwise, naming the label).
Series curve(std::string label, std::vector<double> x, std::vector<double> y,
             CurveStyle style = {});

/// The same from Eigen vectors, e.g. two columns of a table of results:
///   course::curve("measured var(q . k)", variance.col(0), variance.col(3))
template <typename X, typename Y>
Series curve(std::string label, const Eigen::DenseBase<X>& x, const Eigen::DenseBase<Y>& y,
             CurveStyle style = {}) {
  return curve(std::move(label), values_of(x), values_of(y), style);
}

/// curve() without the points whose y is 0 or negative, for a plot with a log y axis. A log
/// axis cannot show them, and Plotter::lines rejects them rather than drop them unseen; a
/// quantity that can underflow to exactly 0 (the gradient of a saturated softmax) is drawn
/// through this, which says where points are dropped. A NaN y is kept, for lines() to reject.
Series curve_for_log_y(std::string label, std::vector<double> x, std::vector<double> y,
                       CurveStyle style = {});

template <typename X, typename Y>
Series curve_for_log_y(std::string label, const Eigen::DenseBase<X>& x,
                       const Eigen::DenseBase<Y>& y, CurveStyle style = {}) {
  return curve_for_log_y(std::move(label), values_of(x), values_of(y), style);
}

struct LineOptions {
  std::string title{}, xlabel{}, ylabel{};
  std::string y2label{};  ///< the right-hand axis, drawn when a series has right_axis
  bool logx = false, logy = false;
  int width_px = 900, height_px = 560;
  /// Named ticks on x instead of numbers, {x, label} each (e.g. one per layer), written
  /// slanted below the axis.
  std::vector<std::pair<double, std::string>> xtics{};
  /// Horizontal lines across the plot, {y, label} each (e.g. a tolerance), dashed grey.
  std::vector<std::pair<double, std::string>> hlines{};
};

/// Writes figures into one folder (created on the first figure). Construct it with
/// enabled = false (the chapters' --no-plots) to write nothing at all.
///
/// Rendering runs `gnuplot -e to_stdout=1 <name>.gp` as a child process in out_dir (no shell);
/// a signal to the course stops it (course/interrupt.hpp). A non-zero exit, or output that is
/// not a whole PNG, throws std::runtime_error with gnuplot's stderr; a failed write throws
/// course::WriteError with the reason. When the program is not found the
/// .dat and .gp are still written, rendered is false, and one line is printed to std::cout:
/// `plot: gnuplot not found; render with: cd <out_dir> && gnuplot <name>.gp`.
class Plotter {
 public:
  /// `gnuplot` names the program to run: a name looked up on PATH, or a path containing '/'.
  explicit Plotter(std::filesystem::path out_dir, bool enabled = true,
                   std::string gnuplot = "gnuplot");

  Figure heatmap(const std::string& name, const Matrix& values, const HeatmapOptions& opts);
  Figure heatmap_grid(const std::string& name, const std::vector<HeatmapPanel>& panels,
                      const GridOptions& opts);
  /// Panels drawn side by side, e.g. "Histogram of a" beside "Histogram of b".
  Figure histograms(const std::string& name, const std::vector<HistogramPanel>& panels,
                    const HistogramOptions& opts);
  Figure lines(const std::string& name, const std::vector<Series>& series, const LineOptions& opts);

  bool enabled() const { return enabled_; }
  /// The folder the figures go to (made on the first figure).
  const std::filesystem::path& out_dir() const { return out_dir_; }
  /// The PNGs rendered so far, one per line, for the end of a walk-through:
  ///   "  figures: plots/05_batch_weights.png\n           plots/05_masks.png\n"
  /// ("  figure: " for one; empty when nothing was rendered, e.g. with --no-plots).
  std::string summary() const;
  /// Whether `gnuplot --version` runs from PATH (asked once per process).
  static bool gnuplot_available();

 private:
  Figure render(const std::string& name, const std::string& script, const std::string& data);

  std::filesystem::path out_dir_;
  bool enabled_;
  std::string gnuplot_;
  std::vector<std::filesystem::path> rendered_;  // in the order they were drawn
};

}  // namespace course
