// Chapter 10's pictures: the tile map in characters, and the three speed and memory figures
// drawn from a table of measurements (the reshaping of rows into plot series lives here, so
// that main.cpp says what was measured).
#pragma once

#include "attn/kernels/tiled_attention.hpp"
#include "course/chapter.hpp"
#include "course/plot.hpp"
#include "measure.hpp"

namespace efficiency {

/// The tile map as characters, a row per query tile: '#' computed without a mask test, '/'
/// mixed, '.' skipped. Beyond 24 tiles either way it is not drawn (it would pass 100 columns).
void show_tile_map(course::Chapter& ch, const attn::TileMap& map);

/// 10_speed (GFLOP/s against n, each path a curve, the FMA peak a line), 10_memory (memory
/// beyond the inputs and output: counted for the plain and tiled paths, and measured peak RSS)
/// and 10_tile_sweep (GFLOP/s by tile size).
void draw_figures(course::Plotter& plot, const Measurements& m);

}  // namespace efficiency
