// Chapter 11's figures (figures.hpp).
#include "figures.hpp"

#include "course/print.hpp"
#include "real_sizes.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <utility>

namespace decoding {

using attn::Index;

void draw_rope_decay(course::Plotter& plot, const std::vector<double>& distances,
                     const std::vector<std::vector<double>>& scores,
                     const std::vector<double>& bases, Index dim) {
  std::vector<course::Series> curves;
  for (std::size_t b = 0; b < bases.size(); ++b) {
    curves.push_back(
        course::curve(fmt::format("base {:g}", bases[b]), distances, scores[b], {.points = false}));
  }
  plot.lines("11_rope_decay", curves,
             {.title = fmt::format("RoPE: mean of cos(m theta_i) over d = {}, a vector's score "
                                   "with itself m positions away",
                                   dim),
              .xlabel = "distance m - n (positions)",
              .ylabel = "mean score (1 at distance 0)",
              .logx = true,
              .hlines = {{0.0, ""}}});  // the axis has its 0; the line shows where it runs
}

void draw_receptive_field(course::Plotter& plot, const std::vector<attn::Matrix>& reach,
                          Index window) {
  std::vector<course::HeatmapPanel> panels;
  for (std::size_t l = 0; l < reach.size(); ++l) {
    // Titled by what was measured: the inputs that moved the last output.
    const Index moved = static_cast<Index>(reach[l].bottomRows(1).sum());
    std::vector<std::string> every_fifth;  // "0", "", "", "", "", "5", ...: readable at 16 wide
    for (Index c = 0; c < reach[l].cols(); ++c)
      every_fifth.push_back(c % 5 == 0 ? std::to_string(c) : "");
    panels.push_back(
        {.values = reach[l],
         .title = fmt::format("{} layer{}: the last output, {} inputs", l + 1, l ? "s" : "", moved),
         .xtics = every_fifth,
         .ytics = every_fifth});  // square: outputs and inputs are the same positions
  }
  plot.heatmap_grid("11_receptive_field", panels,
                    {.title = fmt::format("Which inputs move which outputs, window W = {} "
                                          "(yellow: changing the input changes the output)",
                                          window),
                     .xlabel = "input position",
                     .ylabel = "output position",
                     .columns = 3,
                     .first_index = 0,
                     .cmin = 0.0,
                     .cmax = 1.0,
                     .colorbar = false,
                     .panel_px = 280});
}

namespace {

// One tick per context measured, "128" .. "4,096": a log axis would label only 1000.
std::vector<std::pair<double, std::string>> context_tics(const std::vector<double>& n) {
  std::vector<std::pair<double, std::string>> tics;
  for (const double x : n) tics.emplace_back(x, course::with_commas(static_cast<Index>(x)));
  return tics;
}

}  // namespace

void draw_decode_speed(course::Plotter& plot, const Measurements& m) {
  std::vector<double> n, cached, recomputed;
  for (const SpeedRow& r : m.speed) {
    n.push_back(static_cast<double>(r.n));
    cached.push_back(r.cached);
    recomputed.push_back(r.recomputed);
  }
  plot.lines("11_decode_speed",
             {course::curve("with the KV cache (one row per layer)", n, cached),
              course::curve("recomputing the whole sequence", n, recomputed)},
             {.title = fmt::format("Generating one token, one thread ({}, {})", m.machine, m.date),
              .xlabel = "tokens before it (context)",
              .ylabel = "tokens per second",
              .logx = true,
              .logy = true,
              .xtics = context_tics(n)});
}

void draw_cache_sizes(course::Plotter& plot) {
  std::vector<double> context;
  for (double n = 256; n <= 131072; n *= 2) context.push_back(n);
  std::vector<course::Series> curves;
  for (const PublishedModel& m : published_models()) {
    std::vector<double> gib;
    for (const double n : context) gib.push_back(cache_bytes(m, n) / (1024.0 * 1024 * 1024));
    curves.push_back(course::curve(m.name + " (" + m.attention + ")", context, gib));
  }
  plot.lines("11_cache_sizes", curves,
             {.title = "KV cache of one sequence, 16-bit numbers, all layers",
              .xlabel = "context (tokens)",
              .ylabel = "GiB",
              .logx = true,
              .logy = true});
}

}  // namespace decoding
