// Chapter 10's figures from a table of measurements (figures.hpp).
#include "figures.hpp"

#include "attn/kernels/tiled_attention.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace efficiency {

namespace {

// One labelled tick per value of n: {n, "1024"}, ...
std::vector<std::pair<double, std::string>> n_tics(const std::vector<double>& ns) {
  std::vector<std::pair<double, std::string>> tics;
  for (const double n : ns) tics.emplace_back(n, fmt::format("{:.0f}", n));
  return tics;
}

// GFLOP/s against n: one curve per path, the two GEMMs dashed, the FMA peak a line.
void draw_speed(course::Plotter& plot, const Measurements& m) {
  std::vector<double> n_axis, plain, tiled, causal, gemms;
  for (const SpeedRow& r : m.speed) {
    n_axis.push_back(static_cast<double>(r.n));
    plain.push_back(r.plain);
    tiled.push_back(r.tiled);
    causal.push_back(r.tiled_causal);
    gemms.push_back(r.gemms);
  }
  plot.lines(
      "10_speed",
      {course::curve("plain (weights kept)", n_axis, plain), course::curve("tiled", n_axis, tiled),
       // Counted at 4 n^2 d as if no tile were skipped: its line can pass the peak.
       course::curve("tiled, causal (skipped tiles counted as done: can pass the peak)", n_axis,
                     causal),
       course::curve("the plain path's two GEMMs alone", n_axis, gemms, {.dashed = true})},
      {.title = fmt::format("Attention, d = 64, one thread ({})", m.date),
       .xlabel = "n (tokens)",
       .ylabel = "GFLOP/s (4 n^2 d counted)",
       .logx = true,
       // Every measured n labelled: gnuplot's own log ticks label only the powers of 10.
       .xtics = n_tics(n_axis),
       .hlines = {{m.peak, "one core's FMA peak"}}});
}

// Memory beyond the inputs and the output: counted for both paths, measured where we have it.
void draw_memory(course::Plotter& plot, const Measurements& m) {
  // By count: the plain path's n x n weights against the tiled path's tiles (B_q x B_k
  // scores, B_q x d accumulator, per thread) and L.
  std::vector<double> ns, plain_mib, tiled_mib;
  for (double n = 256; n <= 65536; n *= 2) {
    ns.push_back(n);
    plain_mib.push_back(n * n * 4 / (1024.0 * 1024));
    // One thread's score tile [B_k x B_q], Q_i^T [64 x B_q] and output accumulator [B_q x 64];
    // per call L [n] and V in the kernel's panels [n x 64] (tiled_attention.hpp).
    const attn::TiledAttentionOptions tiles;
    const auto bq = static_cast<double>(tiles.query_tile), bk = static_cast<double>(tiles.key_tile);
    tiled_mib.push_back((bq * bk + 2 * bq * 64 + n + n * 64) * 4 / (1024.0 * 1024));
  }
  std::vector<course::Series> memory{
      course::curve("plain, counted: the n x n weights", ns, plain_mib, {.points = false}),
      course::curve("tiled, counted: one thread's tiles, L and V's panels", ns, tiled_mib,
                    {.points = false})};
  for (const char* path : {"plain", "tiled", "tiled-causal"}) {
    std::vector<double> n_measured, mib_measured;
    for (const MemoryPoint& p : m.memory) {
      if (p.path != path) continue;
      n_measured.push_back(static_cast<double>(p.n));
      // Peak RSS moves in pages: a call that allocated nothing new reads 0, which a log
      // axis cannot show; 4 KiB (one page) is the resolution of the measurement.
      mib_measured.push_back(std::max(p.mib, 4.0 / 1024));
    }
    if (!n_measured.empty()) {
      memory.push_back(course::curve(fmt::format("{}, measured peak RSS", path), n_measured,
                                     mib_measured, {.line = false}));
    }
  }
  plot.lines("10_memory", memory,
             {.title = "Memory beyond the inputs and the output, one head, float32",
              .xlabel = "n (tokens)",
              .ylabel = "MiB",
              .logx = true,
              .logy = true,
              .xtics = n_tics(ns)});
}

// GFLOP/s by tile size: the sweep's cells placed in a [B_q x B_k] grid.
void draw_tile_sweep(course::Plotter& plot, const Measurements& m) {
  std::vector<Index> sizes;
  for (const SweepCell& c : m.sweep) {
    if (std::find(sizes.begin(), sizes.end(), c.query_tile) == sizes.end()) {
      sizes.push_back(c.query_tile);
    }
  }
  const auto count = static_cast<Index>(sizes.size());
  attn::Matrix sweep = attn::Matrix::Zero(count, count);  // [B_q x B_k]
  std::vector<std::string> tics;
  for (Index s : sizes) tics.push_back(fmt::format("{}", s));
  for (const SweepCell& c : m.sweep) {
    const auto i = std::find(sizes.begin(), sizes.end(), c.query_tile) - sizes.begin();
    const auto j = std::find(sizes.begin(), sizes.end(), c.key_tile) - sizes.begin();
    if (j < std::ssize(sizes)) sweep(i, j) = static_cast<float>(c.gflops);
  }
  plot.heatmap(
      "10_tile_sweep", sweep,
      {.title = fmt::format("Tiled attention, n = {}, d = 64: GFLOP/s by tile size", m.sweep_n),
       .xlabel = "B_k (keys per tile)",
       .ylabel = "B_q (queries per tile)",
       .xtics = tics,
       .ytics = tics,
       .show_values = true,
       .value_precision = 0,
       .value_name = "GFLOP/s"});
}

}  // namespace

void show_tile_map(course::Chapter& ch, const attn::TileMap& map) {
  // Up to 9 key tiles a column of 2 characters, then 3, so that "10" does not touch "9";
  // beyond 24 tiles the map is not drawn (it would pass 100 columns), only counted.
  if (map.key_tiles > 24 || map.query_tiles > 24) return;
  const int width = map.key_tiles > 9 ? 3 : 2;
  std::string header;
  for (Index j = 0; j < map.key_tiles; ++j) header += fmt::format("{:>{}}", j + 1, width);
  ch.say("{:>12}  {}", "key tile:", header);
  for (Index i = 0; i < map.query_tiles; ++i) {
    std::string s;
    for (Index j = 0; j < map.key_tiles; ++j) {
      const attn::TileKind kind = map(i, j);
      s += fmt::format("{:>{}}",
                       kind == attn::TileKind::full    ? "#"
                       : kind == attn::TileKind::mixed ? "/"
                                                       : ".",
                       width);
    }
    ch.say("query tile {:>2}{}", i + 1, s);
  }
}

void draw_figures(course::Plotter& plot, const Measurements& m) {
  draw_speed(plot, m);
  draw_memory(plot, m);
  draw_tile_sweep(plot, m);
}

}  // namespace efficiency
