// Chapter 05's two figures, laid out from what main.cpp computed.
#pragma once

#include "attn/core/batch.hpp"
#include "attn/ops/masks.hpp"
#include "course/plot.hpp"

#include <string>
#include <vector>

namespace masking {

/// 05_batch_weights: each sentence's weights [n x n] (the first 8 sentences), its tokens as the
/// labels, blocked keys hatched, and in the twin each weight's score (`scores` [B, n, n], the
/// masked scores the softmax read); `title` opens the figure's title, `mask` names the mask.
void draw_batch_weights(course::Plotter& plot, const attn::Batch& weights,
                        const attn::Batch& scores, const attn::AllowedBatch& allowed,
                        const attn::TokenIds& ids, const std::string& title,
                        const std::string& mask);

/// 05_masks: the same scores' weights under four masks, two by two (each panel with its scores).
void draw_four_masks(course::Plotter& plot, const std::vector<course::HeatmapPanel>& panels);

}  // namespace masking
