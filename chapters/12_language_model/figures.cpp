// Chapter 12's figures (figures.hpp).
#include "figures.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <utility>

namespace lm {

void draw_loss(course::Plotter& plot, const training::History& h, double uniform, double unigram) {
  plot.lines(
      "12_loss",
      {course::curve("training batch (each step)", h.step, h.loss, {.points = false}),
       course::curve("validation (held-out text)", h.eval_step, h.eval_loss)},
      {.title = "Learning English: cross-entropy per character as training goes",
       .xlabel = "step",
       .ylabel = "nats per character",
       .hlines = {{uniform, fmt::format("ln V = {:.2f}: every character equally likely", uniform)},
                  {unigram, fmt::format("{:.2f}: character frequencies only", unigram)}}});
}

namespace {

// The indices of the heads ordered by their last score, highest first.
std::vector<std::size_t> ranked(const std::vector<HeadScore>& last, double HeadScore::*score) {
  std::vector<std::size_t> order(last.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return last[a].*score > last[b].*score; });
  return order;
}

std::vector<double> along(const HeadHistory& heads, std::size_t which, double HeadScore::*score) {
  std::vector<double> y;
  for (const std::vector<HeadScore>& at : heads.scores) y.push_back(at[which].*score);
  return y;
}

}  // namespace

void draw_heads_training(course::Plotter& plot, const HeadHistory& heads,
                         const training::History& h, const HeadScore& even) {
  const std::vector<HeadScore>& last = heads.scores.back();
  std::vector<course::Series> series;
  const std::vector<std::size_t> induction = ranked(last, &HeadScore::induction);
  for (std::size_t r = 0; r < std::min<std::size_t>(2, induction.size()); ++r) {
    const HeadScore& s = last[induction[r]];
    series.push_back(course::curve(
        fmt::format("induction score, layer {} head {}", s.layer + 1, s.head + 1), heads.step,
        along(heads, induction[r], &HeadScore::induction), {.points = false}));
  }
  const HeadScore& prev = last[ranked(last, &HeadScore::previous)[0]];
  series.push_back(course::curve(
      fmt::format("previous-token score, layer {} head {}", prev.layer + 1, prev.head + 1),
      heads.step, along(heads, ranked(last, &HeadScore::previous)[0], &HeadScore::previous),
      {.points = false, .dashed = true}));
  series.push_back(course::curve("loss on the second copy of the repeated strings", heads.step,
                                 heads.second_copy_loss, {.points = false, .right_axis = true}));
  if (!h.eval_step.empty()) {
    series.push_back(course::curve("loss on held-out text", h.eval_step, h.eval_loss,
                                   {.points = false, .dashed = true, .right_axis = true}));
  }
  plot.lines("12_heads_training", series,
             {.title = "Heads forming as the model learns: mean attention weight on the key "
                       "each job needs",
              .xlabel = "step",
              .ylabel = "score (mean weight)",
              .y2label = "nats per character",
              .hlines = {{even.induction, fmt::format("{:.2f}: weight spread evenly over the keys",
                                                      even.induction)}}});
}

void draw_head_scores(course::Plotter& plot, const std::vector<HeadScore>& scores, Index layers,
                      Index heads) {
  const std::array<std::pair<const char*, double HeadScore::*>, 5> kinds = {{
      {"previous token", &HeadScore::previous},
      {"induction", &HeadScore::induction},
      {"spaces", &HeadScore::space},
      {"punctuation", &HeadScore::punctuation},
      {"start of the word", &HeadScore::word_start},
  }};
  std::vector<course::HeatmapPanel> panels;
  std::vector<std::string> head_tics, layer_tics;
  for (Index q = 0; q < heads; ++q) head_tics.push_back(fmt::format("h{}", q + 1));
  for (Index l = 0; l < layers; ++l) layer_tics.push_back(fmt::format("L{}", l + 1));
  for (const auto& [title, score] : kinds) {
    attn::Matrix m(layers, heads);  // [L x H]
    for (const HeadScore& s : scores) m(s.layer, s.head) = static_cast<float>(s.*score);
    panels.push_back({.values = m, .title = title, .xtics = head_tics, .ytics = layer_tics});
  }
  plot.heatmap_grid("12_head_scores", panels,
                    {.title = "What each head attends to (mean weight, held-out text and "
                              "repeated random strings)",
                     .xlabel = "head",
                     .ylabel = "layer",
                     .columns = 5,
                     .cmin = 0.0,
                     .cmax = 1.0,
                     .show_values = true,
                     .panel_px = 170,
                     .max_width_px = 1000,
                     .value_name = "mean weight"});
}

void draw_head_map(course::Plotter& plot, const std::string& name, const std::string& title,
                   const HeadMap& map, const std::string& sentence) {
  std::vector<std::string> tics;
  for (const char c : sentence) tics.push_back(c == ' ' ? "_" : std::string(1, c));
  const Index m = map.weights.rows();
  plot.heatmap(name, map.weights,
               {.title = title,
                .xlabel = "key (the character read)",
                .ylabel = "query (the character predicting the next)",
                .xtics = tics,
                .ytics = tics,
                .allowed = map.allowed,
                .cmin = 0.0,
                .cmax = 1.0,
                // 15 pixels a character, so that every one of them is labelled on both axes.
                .width_px = std::max(640, 15 * static_cast<int>(m) + 230),
                .height_px = std::max(560, 15 * static_cast<int>(m) + 170),
                .value_name = "weight",
                .scores = map.scores});
}

}  // namespace lm
