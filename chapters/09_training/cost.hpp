// cost.hpp: what a run of chapter 09 costs, known from its knobs before anything runs: how many
// held-out sequences it scores, and about how long it takes.
//
// The largest knobs train slowly (a step of --layers 8 --d-model 256 --length 32 takes seconds)
// and greedy decoding, which runs the whole model once per output token, costs more than
// training where training is short. So the evaluations grow with the training, up to the
// default run's 1,000 held-out sequences, and a run expected to take more than a minute says so
// on stderr before it starts, with its estimate.
#pragma once

#include "knobs.hpp"

#include <string>

namespace training {

inline constexpr Index kBatch = 32;         // sequences per training step
inline constexpr Index kMaxHeldOut = 1000;  // held-out sequences for the final scores, at most

/// The held-out sequences a schedule of `schedule_steps` is scored on: as many as it trains on
/// (steps x kBatch), at most kMaxHeldOut, so that a short run's evaluation costs no more than
/// about its training (800 steps: 1,000; one step: 32). It follows the schedule's length, not
/// --stop-at, so that the pieces of a run stopped and resumed are scored on the same sequences.
Index held_out_count(Index schedule_steps);

/// The held-out sequences of the curves (an evaluation every 50 steps): a fifth of the final
/// set, at least one (200 of 1,000).
Index curve_count(Index held_out);

/// A run's estimated wall time on this machine, from the multiply-adds, softmax entries and
/// layer calls its sizes imply, at the speeds measured on the course machine (cost.cpp).
struct CostEstimate {
  double seconds = 0;       // the whole run
  double step_seconds = 0;  // one step of --steps (both tasks' when both run)
  double eval_seconds = 0;  // the evaluations: the curves and the final scores
};

/// The estimate for knobs `k` with `threads` threads and vectors of `lanes` floats (the course
/// machine's AVX-512: 16). With --load it counts the schedule from step 0: an upper bound.
CostEstimate estimate_cost(const Knobs& k, int threads, int lanes);

/// The line to print on stderr before a run whose estimate is over a minute, or "":
/// "09_training: note: these knobs take about 3 hours here (...); Ctrl-C stops the run".
std::string cost_note(const std::string& chapter, const CostEstimate& e);

/// Prints cost_note() for this machine's threads and vector width on stderr, when there is one.
void announce_cost(const std::string& chapter, const Knobs& k);

}  // namespace training
