// training_loop.hpp: the training loop of chapter 09's two models and chapter 12's language
// model, as chapter 09 teaches it:
//
//   for step = 1 .. steps:
//     grads = 0                                  (PyTorch: optimizer.zero_grad())
//     loss  = forward + backward on a fresh batch (loss.backward())
//     if loss is not finite: stop, naming the step
//     clip the gradients' norm to 1              (clip_grad_norm_)
//     lr    = warm-up, then cosine                (a LambdaLR)
//     Adam's update                              (optimizer.step())
//
// plus what the chapter draws: the loss and accuracy of every step, a held-out evaluation every
// `eval_every` steps, and a snapshot callback at chosen steps (attention maps for a time-lapse).
//
// A run may start where a checkpoint stopped (course::TrainingState: Adam's moments and step,
// the schedule's position) and stop before the schedule ends (--stop-at): the steps it takes
// are then exactly those the whole run would have taken.
#pragma once

#include "attn/core/threads.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/training/optim.hpp"
#include "course/checkpoint.hpp"
#include "course/progress.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace training {

using attn::Index;

struct Schedule {
  Index steps = 800;  // the schedule's length: the cosine reaches 0 at this step
  Index stop = 800;   // the last step this run takes (--stop-at), at most `steps`
  double peak_lr = 3e-3;
  Index warmup = 100;
  double clip = 1.0;
  Index eval_every = 50;
};

/// The schedule of a run that starts at `run` (step 0, or where --load's checkpoint stopped)
/// and stops after step `stop`: the cosine ends at the schedule's length, run.steps, after a
/// warm-up of 100 steps (every step of a shorter schedule).
inline Schedule schedule_of(const course::TrainingState& run, Index stop, double peak_lr) {
  return {.steps = run.steps,
          .stop = stop,
          .peak_lr = peak_lr,
          .warmup = std::min<Index>(100, run.steps)};
}

/// One step's numbers, as every model's loss function returns them.
struct StepResult {
  double loss = 0;
  Index count = 0;    // the counted targets
  Index correct = 0;  // of those, predicted right
};

/// What training recorded, for the figures.
struct History {
  std::vector<double> step, loss, accuracy;                 // every step (train batches)
  std::vector<double> eval_step, eval_loss, eval_accuracy;  // every eval_every steps
  double seconds = 0, tokens_per_second = 0;                // measured: stderr only
};

/// Trains `model` in place, from the step after `state.step` to `s.stop`, with Adam continuing
/// from `state.adam` (fresh when it is empty), and leaves in `state` where it stopped: the step,
/// the schedule's length and Adam's state (the caller keeps the batches' stream in it).
/// `loss_of(grads)` runs one fresh batch forward and backward into
/// grads (the library runs a batch's sequences side by side on the cores: sequence_shards.hpp);
/// `evaluate()` returns held-out {loss, accuracy}; `snapshot(step)` is called at step 0 and
/// after every step in `snapshot_steps`. Throws std::runtime_error naming the step when the
/// loss stops being finite (the model is then left as it was before that step's update).
template <typename Model>
History train(const std::string& task, Model& model, const Schedule& s,
              course::TrainingState& state, const std::function<StepResult(Model& grads)>& loss_of,
              const std::function<std::pair<double, double>()>& evaluate,
              const std::vector<Index>& snapshot_steps,
              const std::function<void(Index)>& snapshot) {
  Model grads = attn::zeros_like(model);
  const auto params = attn::parameters(model);
  const auto grad_list = attn::parameters(grads);
  attn::Adam adam({.lr = s.peak_lr, .betas = {0.9, 0.98}, .eps = 1e-9});
  if (!state.adam.empty()) adam.restore(state.adam);
  const Index first = state.step + 1;
  course::ProgressLine progress(task, s.stop - state.step, std::cerr,
                                course::ProgressLine::is_terminal());
  History h;
  snapshot(state.step);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  double tokens = 0;
  for (Index step = first; step <= s.stop; ++step) {
    attn::set_zero(grads);
    const StepResult r = loss_of(grads);
    if (!std::isfinite(r.loss)) {
      throw std::runtime_error(fmt::format(
          "{}: the loss is {} at step {}: training diverged and stopped before that step's "
          "update (nothing was saved); try a smaller --lr",
          task, r.loss, step));
    }
    attn::clip_grad_norm(grad_list, s.clip);
    adam.set_lr(attn::warmup_cosine_lr(step, s.peak_lr, s.warmup, s.steps));
    adam.step(params, grad_list);
    tokens += static_cast<double>(r.count);
    const double accuracy =
        r.count ? static_cast<double>(r.correct) / static_cast<double>(r.count) : 0;
    h.step.push_back(static_cast<double>(step));
    h.loss.push_back(r.loss);
    h.accuracy.push_back(accuracy);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    progress.update(step - state.step, r.loss, accuracy, seconds > 0 ? tokens / seconds : 0);
    if (step % s.eval_every == 0 || step == s.stop) {
      const auto [loss, acc] = evaluate();
      h.eval_step.push_back(static_cast<double>(step));
      h.eval_loss.push_back(loss);
      h.eval_accuracy.push_back(acc);
    }
    for (Index at : snapshot_steps) {
      if (at == step) snapshot(step);
    }
  }
  h.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  h.tokens_per_second = h.seconds > 0 ? tokens / h.seconds : 0;
  const int threads = attn::default_threads();
  progress.finish(fmt::format("{}: {} steps, {:.1f} s on {} thread{}, {} target tokens/s "
                              "(with the evaluations)",
                              task, std::max<Index>(0, s.stop - state.step), h.seconds, threads,
                              threads == 1 ? "" : "s", course::short_count(h.tokens_per_second)));
  if (s.stop > state.step) {
    state.step = s.stop;
    state.adam = adam.state();
  }
  state.steps = s.steps;
  return h;
}

}  // namespace training
