// measure.hpp: chapter 11's stopwatch. The speed figure comes from a table of measurements:
// the one committed beside this file (measured.tsv, taken on the course's machine, its CPU and
// date in the header), or, with --measure, one taken live on the reader's machine. Seconds
// never reach stdout, which must be the same bytes on every run: a live measurement reports on
// stderr.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/models/language_model.hpp"
#include "course/chapter.hpp"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace decoding {

using attn::Index;

/// Tokens per second of generating the token at position n, one thread.
struct SpeedRow {
  Index n = 0;
  double cached = 0;      ///< a decode step against a cache of n tokens
  double recomputed = 0;  ///< the whole sequence of n + 1 tokens again (blocked arithmetic)
};

struct Measurements {
  std::string machine, date;  ///< the CPU's model name and the day it was measured
  std::vector<SpeedRow> speed;
};

/// The model timed: E = 256, 8 query heads over 2 key/value heads, d_ff = 1024, 4 layers,
/// context 4096, vocabulary 256 (a small decoder; its weights are random).
attn::LanguageModelConfig timed_model();

/// Times both ways of generating at n = 128, 256, ... up to `longest` (a power of two from 128
/// to 4096), on one thread; `progress` is told what runs next (for stderr). About ten seconds at
/// 4096 on the course's machine.
Measurements measure(Index longest, const std::function<void(const std::string&)>& progress);

/// The table as the chapter prints it, without indent: the header and a row per n.
std::vector<std::string> speed_lines(const Measurements& m);

/// The table as text (tab-separated, '#' header lines), and back. read_measurements returns
/// nothing when the file does not exist; a malformed file throws std::runtime_error naming the
/// line.
std::string to_tsv(const Measurements& m);
std::optional<Measurements> read_measurements(const std::filesystem::path& path);

/// The speed table on stdout (from measured.tsv) or, when `live`, measured now up to `longest`
/// and reported on stderr; then the figure 11_decode_speed (and, live, 11_measured.tsv).
void show_speed(course::Chapter& ch, bool live, Index longest);

/// chapters/11_decoding/measured.tsv in the source tree.
std::filesystem::path committed_measurements();

}  // namespace decoding
