// Chapter 11's figures, laid out from what main.cpp computed.
#pragma once

#include "attn/core/matrix.hpp"
#include "course/plot.hpp"
#include "measure.hpp"

#include <vector>

namespace decoding {

/// 11_rope_decay: the mean score of a vector with itself, rotated, against the distance m - n
/// (log axis), for two bases.
void draw_rope_decay(course::Plotter& plot, const std::vector<double>& distances,
                     const std::vector<std::vector<double>>& scores,
                     const std::vector<double>& bases, attn::Index dim);

/// 11_receptive_field: for L = 1, 2, 3 layers of windows of W, which inputs (columns) move
/// which outputs (rows): 1 where changing the token moves the logits, 0 where it does not.
void draw_receptive_field(course::Plotter& plot, const std::vector<attn::Matrix>& reach,
                          attn::Index window);

/// 11_decode_speed: tokens per second with the cache and recomputing, against the context.
void draw_decode_speed(course::Plotter& plot, const Measurements& m);

/// 11_cache_sizes: every published model's KV cache against the context (both axes log).
void draw_cache_sizes(course::Plotter& plot);

}  // namespace decoding
