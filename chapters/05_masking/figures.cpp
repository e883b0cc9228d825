// Chapter 05's figures (figures.hpp).
#include "figures.hpp"

#include "course/print.hpp"

#include <fmt/format.h>

namespace masking {

using attn::Index;

void draw_batch_weights(course::Plotter& plot, const attn::Batch& weights,
                        const attn::Batch& scores, const attn::AllowedBatch& allowed,
                        const attn::TokenIds& ids, const std::string& title,
                        const std::string& mask) {
  std::vector<course::HeatmapPanel> batch_panels;  // one [n x n] panel per sentence
  for (Index b = 0; b < weights.batch() && b < 8; ++b) {
    const std::vector<std::string> tokens = course::id_labels(ids, b);
    batch_panels.push_back({attn::Matrix(weights[b]), fmt::format("sentence {}", b + 1), tokens,
                            tokens, attn::AllowedMask(allowed[b]), attn::Matrix(scores[b])});
  }
  plot.heatmap_grid(
      "05_batch_weights", batch_panels,
      {.title = title + std::string(": each sentence's weights with the ") + mask + " mask",
       .xlabel = "key",
       .ylabel = "query",
       .columns = 2,
       .cmin = 0.0,
       .cmax = 1.0,
       .show_values = ids.cols() <= 8,
       .panel_px = 340,
       .value_name = "weight"});
}

void draw_four_masks(course::Plotter& plot, const std::vector<course::HeatmapPanel>& panels) {
  // Two by two, so the figure reads at the width of a page (four in a row made it 1390 px).
  plot.heatmap_grid("05_masks", panels,
                    {.title = "The same scores under four masks (weights; blocked keys "
                              "hatched)",
                     .xlabel = "key j",
                     .ylabel = "query i",
                     .columns = 2,
                     .cmin = 0.0,
                     .cmax = 1.0,
                     .panel_px = 260,
                     .value_name = "weight"});
}

}  // namespace masking
