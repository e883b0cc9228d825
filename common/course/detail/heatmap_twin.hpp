// heatmap_twin.hpp: the interactive twin of a heat map, <name>.html beside <name>.png: the same
// numbers in one self-contained page that a learner opens in a browser and explores cell by
// cell (hover a cell: its row and column with their labels, its value, and the score before the
// softmax where the figure has one). Plotter::heatmap and heatmap_grid write it; internal.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/ops/masks.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace course::plot_detail {

/// One map of the twin: a heat map, or one panel of a grid.
struct TwinMap {
  std::string title;
  const attn::Matrix* values = nullptr;             ///< [rows x cols]
  const attn::Matrix* scores = nullptr;             ///< the same shape, or null: none to show
  const std::vector<std::string>* xtics = nullptr;  ///< one label per column, or empty
  const std::vector<std::string>* ytics = nullptr;  ///< one label per row, or empty
  const attn::AllowedMask* allowed = nullptr;       ///< empty or the values' shape
};

/// The whole figure: its maps and what the page says about them.
struct TwinFigure {
  std::string title, xlabel, ylabel;
  std::string value_name;            ///< what a cell holds: "weight", "value", ...
  int first_index = 1;               ///< the number of the first row and column
  std::optional<double> cmin, cmax;  ///< one colour range for every map, or each its own
  std::vector<TwinMap> maps;
};

/// The page's bytes: HTML, CSS, the viewer's script and the figure as JSON. Every number is
/// written with 6 significant digits (the non-finite as "inf", "-inf", "nan"), so the same
/// figure gives the same bytes.
std::string twin_html(const TwinFigure& figure);

/// Writes twin_html(figure) to out_dir/<name>.html (through a temporary file and a rename) and
/// returns the path.
std::filesystem::path write_twin(const std::filesystem::path& out_dir, const std::string& name,
                                 const TwinFigure& figure);

}  // namespace course::plot_detail
