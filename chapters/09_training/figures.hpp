// Chapter 09's figures: what main.cpp has computed (gradient-check reports, attention maps
// taken during training, the training history) laid out as gnuplot figures.
#pragma once

#include "attn/models/attention_only.hpp"
#include "attn/training/gradient_check.hpp"
#include "course/plot.hpp"
#include "course/training_loop.hpp"

#include <string>
#include <vector>

namespace training {

/// 09_gradient_check: each case's worst relative error on a log axis, with the bar of 1e-6.
void draw_gradient_check(course::Plotter& plot, const std::vector<attn::GradientReport>& reports);

/// 09_reversal_timelapse (the cross-attention `frames`, three to a row) and
/// 09_reversal_curves (loss and exact reversals against steps).
void draw_reversal_training(course::Plotter& plot, const std::vector<course::HeatmapPanel>& frames,
                            const History& h);

/// 09_induction_heads: every head of `model` on one sequence `ids` (labelled `tokens`), with
/// the keys after each query (`causal`) hatched.
void draw_induction_heads(course::Plotter& plot, const attn::AttentionOnly& model,
                          const std::vector<int>& ids, const std::vector<std::string>& tokens,
                          const attn::AllowedMask& causal);

/// 09_induction_timelapse (the last layer's head 1 in `frames`) and 09_induction_curves.
void draw_induction_training(course::Plotter& plot, const std::vector<course::HeatmapPanel>& frames,
                             const History& h, Index layers);

}  // namespace training
