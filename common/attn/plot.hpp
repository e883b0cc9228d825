// plot.hpp: figures through gnuplot, each one three files side by side in the output folder:
//   <name>.dat   the numbers, as plain columns a learner can open in anything
//   <name>.gp    a readable, self-contained gnuplot script (restyle it and run it again)
//   <name>.png   what gnuplot renders from the two (pngcairo terminal)
// When gnuplot is not installed the .dat and .gp are still written and the one command that
// renders them is printed. Palette: viridis, defined from its nine anchor colours because
// gnuplot 5.4 has no built-in viridis.
#pragma once

#include "attn/matrix.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace attn {

/// What happened to one figure: the files written and whether the PNG was rendered.
struct Figure {
  std::filesystem::path png, gp, dat;
  bool rendered = false;
};

struct HeatmapOptions {
  std::string title;
  std::string xlabel;                  ///< columns of the matrix run along x
  std::string ylabel;                  ///< rows run along y, row 0 at the top
  std::vector<std::string> xtics;      ///< one label per column (empty: indices)
  std::vector<std::string> ytics;      ///< one label per row (empty: indices)
  bool show_values = false;            ///< print each cell's value inside it
  int value_precision = 2;
  bool colorbar = true;
  std::optional<double> cmin, cmax;    ///< fixed colour range (e.g. 0..1 for weights)
  int width_px = 800, height_px = 640;
};

/// One panel of a heat-map grid.
struct HeatmapPanel {
  Matrix values;
  std::string title;
};

struct GridOptions {
  std::string title;          ///< over the whole grid
  std::string xlabel, ylabel;
  int columns = 4;            ///< panels per row of the grid
  std::optional<double> cmin, cmax;  ///< one colour scale shared by all panels
  bool show_values = false;
  int value_precision = 2;
  int panel_px = 320;         ///< size of one panel's square
};

/// One histogram panel: the values and the title above it.
struct HistogramPanel {
  std::vector<double> values;
  std::string title;
  std::string xlabel;
  int bins = 50;
};

struct HistogramOptions {
  std::string title;           ///< over all panels
  int width_px = 1000, height_px = 450;
};

/// One curve of a line plot.
struct Series {
  std::string label;
  std::vector<double> x, y;
  bool points = true;          ///< draw markers at the data points as well as the line
  bool dashed = false;
};

struct LineOptions {
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false;
  int width_px = 900, height_px = 560;
};

/// Writes figures into one folder. Construct it with render = false (the chapters'
/// --no-plots) to write nothing at all.
class Plotter {
 public:
  explicit Plotter(std::filesystem::path out_dir, bool enabled = true);

  Figure heatmap(const std::string& name, const Matrix& values, const HeatmapOptions& opts);
  Figure heatmap_grid(const std::string& name, const std::vector<HeatmapPanel>& panels,
                      const GridOptions& opts);
  /// Panels drawn side by side, e.g. "Histogram of a" beside "Histogram of b".
  Figure histograms(const std::string& name, const std::vector<HistogramPanel>& panels,
                    const HistogramOptions& opts);
  Figure lines(const std::string& name, const std::vector<Series>& series, const LineOptions& opts);

  bool enabled() const { return enabled_; }
  const std::filesystem::path& out_dir() const { return out_dir_; }
  /// Whether a gnuplot executable was found on PATH (checked once).
  static bool gnuplot_available();

 private:
  Figure render(const std::string& name, const std::string& script, const std::string& data);

  std::filesystem::path out_dir_;
  bool enabled_;
};

}  // namespace attn
