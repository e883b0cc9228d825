// Chapter 07's figures (figures.hpp).
#include "figures.hpp"

#include "course/print.hpp"

#include <fmt/format.h>

#include <cmath>

namespace positional {

using attn::Index;
using course::values_of;  // an Eigen vector as the std::vector<double> a figure takes

void draw_permutation(course::Plotter& plot, const SelfAttention& plain_a,
                      const SelfAttention& plain_b, const SelfAttention& pe_a,
                      const SelfAttention& pe_b, const std::vector<std::string>& words_a,
                      const std::vector<std::string>& words_b) {
  // A panel: the layer's weights [n x n], and the scores its softmax read (same options).
  const auto panel = [](const SelfAttention& s, const char* title,
                        const std::vector<std::string>& words) {
    return course::HeatmapPanel{.values = s.r.weights,
                                .title = title,
                                .xtics = words,
                                .ytics = words,
                                .scores = attn::attention_scores(s.Q, s.K)};  // [n x n]
  };
  plot.heatmap_grid(
      "07_permutation",
      {panel(plain_a, "no PE: dog bites man", words_a),
       panel(plain_b, "no PE: man bites dog", words_b),
       panel(pe_a, "with PE: dog bites man", words_a),
       panel(pe_b, "with PE: man bites dog", words_b)},
      {.title = "Attention weights; rows = queries, columns = keys, in sentence order",
       .xlabel = "key",
       .ylabel = "query",
       .columns = 2,
       .cmin = 0.0,
       .cmax = 1.0,
       .show_values = true,
       .panel_px = 300,
       .value_name = "weight"});
}

void draw_encoding(course::Plotter& plot, const attn::Matrix& pe) {
  plot.heatmap("07_encoding", pe,
               {.title = fmt::format("Sinusoidal position vectors PE {}", course::shape(pe)),
                .xlabel = "feature (columns 2i, 2i+1 = sin, cos of pair i)",
                .ylabel = "position pos",
                .first_index = 0,  // pos and the feature column count from 0 in the formula
                .cmin = -1.0,
                .cmax = 1.0,
                .width_px = 900,
                .height_px = 640,
                .value_name = "PE"});
}

void draw_frequencies(course::Plotter& plot, const attn::Matrix& pe, const attn::VectorD& omega) {
  const Index P = pe.rows(), pairs = omega.size();
  const std::vector<double> positions =  // 0..P-1
      values_of(Eigen::VectorXd::LinSpaced(P, 0, P - 1));
  std::vector<course::Series> waves;
  for (Index last = -1; const double share : {0.0, 1.0 / 4, 1.0 / 2}) {  // omega 1, 0.1, 0.01
    const Index i = std::lround(share * pairs);  // pair i at 2i / d_model = share
    if (i >= pairs || i == last) continue;       // small d_model: fewer distinct pairs
    last = i;
    // Pair 0 jumps a radian per position: its curve shows the samples.
    waves.push_back({.label = fmt::format("PE(pos, {}): sin, omega = {:.3g}", 2 * i, omega(i)),
                     .x = positions,
                     .y = values_of(pe.col(2 * i)),
                     .points = i == 0});
  }
  plot.lines("07_frequencies", waves,
             {.title = "Columns of PE: one sinusoid per pair, each slower than the last",
              .xlabel = "position pos",
              .ylabel = "PE(pos, 2i)"});
}

void draw_dot_product(course::Plotter& plot, const Eigen::VectorXd& dot_by_offset,
                      const Eigen::VectorXf& first, const Eigen::VectorXf& later, Index P,
                      Index d_model) {
  const Index K = dot_by_offset.size() - 1;
  const std::vector<double> offsets = values_of(Eigen::VectorXd::LinSpaced(K + 1, 0, K));  // 0..K
  plot.lines(
      "07_dot_product",
      {{.label = "sum_i cos(omega_i k)",
        .x = offsets,
        .y = values_of(dot_by_offset),
        .points = false},
       {.label = "PE(0) . PE(k)",
        .x = offsets,
        .y = values_of(first),
        .points = K <= 200,
        .dashed = true},
       {.label = fmt::format("PE({0}) . PE({0} + k)", P - 1),
        .x = offsets,
        .y = values_of(later),
        .points = K <= 200,
        .dashed = true}},
      {.title = fmt::format("Similarity of two position vectors depends only on their offset k "
                            "(d_model {})",
                            d_model),
       .xlabel = "offset k",
       .ylabel = "PE(pos) . PE(pos + k)"});
}

}  // namespace positional
