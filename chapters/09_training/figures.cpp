// Chapter 09's figures (figures.hpp).
#include "figures.hpp"

#include "attn/ops/attention.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace training {

void draw_gradient_check(course::Plotter& plot, const std::vector<attn::GradientReport>& reports) {
  std::vector<double> x, errors;
  std::vector<std::pair<double, std::string>> names;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    x.push_back(static_cast<double>(i + 1));
    errors.push_back(std::max(reports[i].worst(), 1e-16));  // a log axis cannot show an exact 0
    names.push_back({static_cast<double>(i + 1), reports[i].layer});
  }
  plot.lines("09_gradient_check",
             {course::curve_for_log_y("worst relative error of the layer's gradients", x, errors,
                                      {.line = false})},
             {.title = "Backward passes against central differences (double precision)",
              .ylabel = "max |analytic - numeric| / scale",
              .logy = true,
              .width_px = 1000,
              .height_px = 640,
              .xtics = names,
              .hlines = {{attn::kGradientCheckTolerance, "the bar, 1e-6"}}});
}

void draw_reversal_training(course::Plotter& plot, const std::vector<course::HeatmapPanel>& frames,
                            const History& h) {
  plot.heatmap_grid("09_reversal_timelapse", frames,
                    {.title = "Reversal: cross-attention as training goes (one held-out "
                              "sequence; rows output, columns source)",
                     .xlabel = "source token",
                     .ylabel = "output token",
                     .columns = static_cast<int>(std::min<std::size_t>(frames.size(), 3)),
                     .cmin = 0.0,
                     .cmax = 1.0,
                     .panel_px = 260,
                     .value_name = "weight"});
  plot.lines("09_reversal_curves",
             {course::curve("train loss (each step)", h.step, h.loss, {.points = false}),
              course::curve("held-out loss", h.eval_step, h.eval_loss),
              course::curve("held-out sequences exactly reversed", h.eval_step, h.eval_accuracy,
                            {.dashed = true})},
             {.title = "Reversal: loss and accuracy against training steps",
              .xlabel = "step",
              .ylabel = "loss (cross-entropy) / fraction"});
}

void draw_induction_heads(course::Plotter& plot, const attn::AttentionOnly& model,
                          const std::vector<int>& ids, const std::vector<std::string>& tokens,
                          const attn::AllowedMask& causal) {
  attn::AttentionOnlyCache cache;
  attn::attention_only_forward<float>(model, ids, &cache, attn::NeedWeights::yes);
  std::vector<course::HeatmapPanel> heads;
  for (std::size_t l = 0; l < cache.layers.size(); ++l) {
    const attn::MultiHeadResult& a = cache.layers[l].attn;
    const Index d_k = model.layers[l].attn.d_k();
    for (std::size_t hd = 0; hd < a.weights.size(); ++hd) {
      const Index first = static_cast<Index>(hd) * d_k;  // head hd's columns of Q and K
      heads.push_back({a.weights[hd], fmt::format("layer {} head {}", l + 1, hd + 1), tokens,
                       tokens, causal,
                       attn::attention_scores(a.Q.middleCols(first, d_k),  // [T x T], the twin's
                                              a.K.middleCols(first, d_k), {.allowed = causal})});
    }
  }
  plot.heatmap_grid("09_induction_heads", heads,
                    {.title = "Induction: every head on one held-out sequence (rows query, "
                              "columns key; causal)",
                     .xlabel = "key token",
                     .ylabel = "query token",
                     .columns = static_cast<int>(std::min<std::size_t>(heads.size(), 4)),
                     .cmin = 0.0,
                     .cmax = 1.0,
                     .panel_px = 420,
                     .value_name = "weight"});
}

void draw_induction_training(course::Plotter& plot, const std::vector<course::HeatmapPanel>& frames,
                             const History& h, Index layers) {
  plot.heatmap_grid("09_induction_timelapse", frames,
                    {.title = fmt::format("Induction: layer {}, head 1, as training goes", layers),
                     .xlabel = "key token",
                     .ylabel = "query token",
                     .columns = static_cast<int>(std::min<std::size_t>(frames.size(), 3)),
                     .cmin = 0.0,
                     .cmax = 1.0,
                     .panel_px = 300,
                     .value_name = "weight"});
  plot.lines("09_induction_curves",
             {course::curve("train loss (each step)", h.step, h.loss, {.points = false}),
              course::curve("held-out loss", h.eval_step, h.eval_loss),
              course::curve("held-out accuracy (second copy)", h.eval_step, h.eval_accuracy,
                            {.dashed = true})},
             {.title = "Induction heads: loss and accuracy against training steps",
              .xlabel = "step",
              .ylabel = "loss (cross-entropy) / fraction"});
}

}  // namespace training
