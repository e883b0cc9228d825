// Chapter 12's figures (figures.hpp).
#include "figures.hpp"

#include <fmt/format.h>

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

}  // namespace lm
