// cost.cpp: the evaluation sizes and the time estimate of a chapter 09 run (cost.hpp).
//
// The estimate counts, for every forward pass a run makes, three kinds of work:
//
//   multiply-adds   the projections (4 n d^2 per attention, 2 n d d_ff per feed-forward
//                   network), the scores and the weighted sum (2 n_q n_k d), the generator
//   softmax entries h n_q n_k per attention: an exp each, whatever d_k is, which is what
//                   makes --heads 16 at --d-model 32 slow (d_k = 2)
//   layer calls     a fixed cost per layer and sequence, which dominates at the smallest sizes
//
// and gives each a time per unit, fitted to one-thread timings of the library's calls on the
// course machine (2026-11-27, AMD EPYC with AVX-512, g++ 12, release build; 9 sizes from
// --layers 1 to 8, --d-model 32 to 256, --heads 1 to 16, --length 8 to 32, --context 8 to 40):
// training steps, teacher-forced losses, greedy decoding and the forwards that keep the weights.
// Every call was within a factor 1.5 of the fit (the forwards that keep the weights, one
// sequence at a time, ran 1.5 times slower: they count so here). A training step is a forward
// and a backward, three forwards' work.
//
// Another machine: vectors of fewer floats than AVX-512's 16 do proportionally less per
// instruction (an AVX2 core's measured FMA peak is ~92 GFLOP/s against ~210), so the time is
// scaled by 16 / lanes. (The one-core FMA peak, course/fma_peak.hpp, would take the clock into
// account too, in 0.05 to 0.3 s; but measured while other programs ran it read 16-49 GFLOP/s on
// a core that does ~210: it would multiply the estimate by 4 to 13 for a moment's load.)
// The cores: the batch's sequences run side by side in at most 8 shards
// (sequence_shards.hpp), and a second thread gained 1.2-1.7x, so each thread past the first
// counts half of one. The clock, the memory and the other programs running are not known: the
// estimate is within about a factor of 2, which is what a learner deciding whether to wait
// needs.
#include "cost.hpp"

#include "attn/core/threads.hpp"
#include "course/fma_peak.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>

namespace training {

Index held_out_count(Index schedule_steps) {
  return std::clamp<Index>(schedule_steps * kBatch, 1, kMaxHeldOut);
}

Index curve_count(Index held_out) { return std::max<Index>(1, held_out / 5); }

namespace {

// The course machine, one thread: seconds per unit of each kind of work (see the top).
constexpr double kSecondsPerMultiplyAdd = 4.3e-11;  // 23 G multiply-adds a second
constexpr double kSecondsPerSoftmaxEntry = 2.7e-9;
constexpr double kSecondsPerLayerCall = 3.2e-6;
constexpr double kFixedSeconds = 0.5;  // the worked step, the gradient checks, the figures
constexpr Index kEvalEvery = 50;       // Schedule::eval_every

// The work of some forward passes.
struct Work {
  double mads = 0, softmax = 0, calls = 0;
  Work& operator+=(const Work& w) {
    mads += w.mads;
    softmax += w.softmax;
    calls += w.calls;
    return *this;
  }
  Work operator+(const Work& w) const { return Work(*this) += w; }
  Work operator*(double times) const { return {mads * times, softmax * times, calls * times}; }
  double seconds() const {
    return mads * kSecondsPerMultiplyAdd + softmax * kSecondsPerSoftmaxEntry +
           calls * kSecondsPerLayerCall;
  }
};

// One encoder-decoder forward: n_s source and n_t target tokens (reversal_config: d_ff = 2 d).
Work seq2seq_forward(const Knobs& k, double ns, double nt) {
  const auto d = static_cast<double>(k.d_model), L = static_cast<double>(k.layers);
  const auto h = static_cast<double>(k.heads);
  const double encoder = 4 * ns * d * d + 2 * ns * ns * d + 4 * ns * d * d;   // attention, FFN
  const double decoder = 4 * nt * d * d + 2 * nt * nt * d                     // self-attention
                         + 2 * nt * d * d + 2 * ns * d * d + 2 * nt * ns * d  // cross-attention
                         + 4 * nt * d * d;                                    // FFN
  return {L * (encoder + decoder) + nt * d * static_cast<double>(kReversalVocab),
          L * h * (ns * ns + nt * nt + nt * ns), 2 * L};
}

// Greedy decoding of one source of n tokens: the whole forward again for each output token.
Work seq2seq_greedy(const Knobs& k, double n) {
  Work w;
  for (double i = 1; i <= n; ++i) w += seq2seq_forward(k, n, i);
  return w;
}

// One forward of the attention-only decoder on T tokens.
Work induction_forward(const Knobs& k, double T) {
  const auto d = static_cast<double>(k.d_model), L = static_cast<double>(k.layers);
  return {L * (4 * T * d * d + 2 * T * T * d) + T * d * static_cast<double>(kInductionVocab),
          L * static_cast<double>(k.heads) * T * T, L};
}

// "40 s", "25 minutes", "3.2 hours", "4.5 days".
std::string duration(double seconds) {
  if (seconds < 1) return fmt::format("{:.0f} ms", seconds * 1000);
  if (seconds < 10) return fmt::format("{:.1f} s", seconds);
  if (seconds < 90) return fmt::format("{:.0f} s", seconds);
  if (seconds < 90 * 60) return fmt::format("{:.0f} minutes", seconds / 60);
  const double hours = seconds / 3600;
  if (hours < 10) return fmt::format("{:.1f} hours", hours);
  if (hours < 48) return fmt::format("{:.0f} hours", hours);
  return fmt::format("{:.1f} days", hours / 24);
}

}  // namespace

CostEstimate estimate_cost(const Knobs& k, int threads, int lanes) {
  // The steps this run trains, and the schedule its evaluation sets follow (with --load and no
  // --steps the saved schedule, unknown here: the largest sets).
  const Index stop = k.stop_at > 0 ? k.stop_at : k.steps;
  const double steps = k.trains() ? static_cast<double>(stop) : 0.0;
  const auto held =
      static_cast<double>(k.load.empty() || k.steps_given ? held_out_count(k.steps) : kMaxHeldOut);
  const auto curve = static_cast<double>(curve_count(static_cast<Index>(held)));
  const double curves = std::ceil(steps / static_cast<double>(kEvalEvery));
  const auto n = static_cast<double>(k.length), T = static_cast<double>(k.context);
  const auto batch = static_cast<double>(kBatch);

  Work step, eval;
  if (k.task != "induction") {
    const Work pair = seq2seq_forward(k, n, n), greedy = seq2seq_greedy(k, n);
    step += pair * (3 * batch);
    eval += (pair + greedy) * (curve * curves);   // the curves: loss and exact reversals
    eval += (pair + greedy + pair * 1.5) * held;  // loss, exact reversals, the anti-diagonal
  }
  if (k.task != "reversal") {
    const Work one = induction_forward(k, T);
    step += one * (3 * batch);
    eval += one * (curve * curves);  // the curves: loss and accuracy
    eval += one * (2 * held);        // loss and accuracy, the head scores
  }
  const double speed = std::min(threads, 8) * 0.5 + 0.5;  // each thread past the first: half
  const double scale = 16.0 / std::max(1, lanes) / std::max(1.0, speed);
  CostEstimate e;
  e.step_seconds = step.seconds() * scale;
  e.eval_seconds = eval.seconds() * scale;
  e.seconds = kFixedSeconds + steps * e.step_seconds + e.eval_seconds;
  return e;
}

std::string cost_note(const std::string& chapter, const CostEstimate& e) {
  if (e.seconds <= 60) return "";
  return fmt::format("{}: note: these knobs take about {} here (about {} per training step and {} "
                     "of evaluations; estimated from the sizes); Ctrl-C stops the run",
                     chapter, duration(e.seconds), duration(e.step_seconds),
                     duration(e.eval_seconds));
}

void announce_cost(const std::string& chapter, const Knobs& k) {
  const std::string note =
      cost_note(chapter, estimate_cost(k, attn::default_threads(), course::fma_kernel().lanes));
  if (!note.empty()) std::cerr << note << std::endl;  // flushed: it comes before the work
}

}  // namespace training
