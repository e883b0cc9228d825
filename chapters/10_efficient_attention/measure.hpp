// measure.hpp: chapter 10's stopwatch. The speed figures come from a table of measurements:
// the one committed beside this file (measured.tsv, taken on the course's machine, its
// date and CPU in the header), or, with --measure, one taken live on the reader's machine.
// Seconds never reach stdout, which must be the same bytes on every run: a live measurement
// reports on stderr and draws the figures from what it measured.
#pragma once

#include "attn/core/matrix.hpp"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace efficiency {

using attn::Index;

/// GFLOP/s of each path at one n (d = 64, one thread, 4 n^2 d flops counted for all).
struct SpeedRow {
  Index n = 0;
  double plain = 0, tiled = 0, tiled_causal = 0, gemms = 0;
};

/// GFLOP/s of the tiled forward at n = 1024 for one pair of tile sizes.
struct SweepCell {
  Index query_tile = 0, key_tile = 0;
  double gflops = 0;
};

/// The tiled forward at n = 4096 with this many threads (wall-clock GFLOP/s).
struct ThreadRow {
  int threads = 0;
  double gflops = 0;
};

/// Peak resident memory above the inputs and the output during one call, measured by
/// benchmarks/attention_memory (scripts/measure_efficiency.sh), for the memory figure.
struct MemoryPoint {
  std::string path;  ///< "plain", "tiled" or "tiled-causal"
  Index n = 0;
  double mib = 0;
};

struct Measurements {
  std::string machine, date;  ///< the CPU's model name and the day it was measured
  double peak = 0;            ///< one core's FMA peak, GFLOP/s, measured in the same run
  std::vector<SpeedRow> speed;
  std::vector<SweepCell> sweep;
  std::vector<ThreadRow> threads;
  std::vector<MemoryPoint> memory;  ///< optional: only the committed table has them
  Index sweep_n = 1024;             ///< the n of the tile sweep
  Index threads_n = 4096;           ///< the n of the thread comparison
};

/// Naive attention's three passes at n queries and keys, d = 64, timed apart (seconds, the best
/// of three calls): the product Q K^T, the softmax pass over the n x n scores (without the copy
/// that restores them between calls), and the product P V.
struct NaiveSplit {
  double scores = 0, softmax = 0, values = 0;
  double total() const { return scores + softmax + values; }
};
NaiveSplit time_naive_attention(Index n);

/// Times every path on this machine up to n = `longest`; `progress` is told what runs next (for
/// stderr). The speed table's rows are n = longest / 16, ..., longest / 2, longest (those of 16
/// or more), the tile sweep runs at min(1024, longest) with the tiles that fit, and the thread
/// comparison at `longest`. At the default 4096 it takes some twenty seconds, at 16 about two.
Measurements measure(Index longest, const std::function<void(const std::string&)>& progress);

/// The table as the chapter prints it, without indent: the peak, the header and a row per n.
std::vector<std::string> speed_lines(const Measurements& m);
/// The lines that follow the table's note: the best tile size and the threads' speed-up.
std::vector<std::string> tile_and_thread_lines(const Measurements& m);

/// The table as text (tab-separated, '#' header lines), and back. read_measurements returns
/// nothing when the file does not exist; a malformed file throws std::runtime_error naming the
/// line.
std::string to_tsv(const Measurements& m);
std::optional<Measurements> read_measurements(const std::filesystem::path& path);

/// Where the committed table is: measured.tsv in this chapter's source folder.
std::filesystem::path committed_measurements();

/// Seconds one call of `f` takes: the best of repeated runs of at least ~50 ms each.
double seconds_per_call(const std::function<void()>& f);
/// The same from three single calls: a quick look (the chapter's every run makes one).
double best_of_three(const std::function<void()>& f);

}  // namespace efficiency
