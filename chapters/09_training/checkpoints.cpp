// Chapter 09's checkpoints (checkpoints.hpp).
#include "checkpoints.hpp"

#include "course/checkpoint.hpp"
#include "course/dump.hpp"

#include <optional>
#include <span>
#include <utility>

namespace training {

namespace {

constexpr Index kSavedExamples = 8;  // held-out sequences saved with a checkpoint, for its replay

// Where the weights went, and the command that replays them in PyTorch.
void say_saved(course::Chapter& ch, const std::string& dir) {
  ch.say("saved the weights to {} (replay: /usr/bin/python3 scripts/check_training_checkpoint.py "
         "{})",
         dir, dir);
}

// Loads DIR/<task> into `model` (checked at parse time already) and returns the training state
// to start from; see start_training.
template <typename Model>
course::TrainingState load_and_plan(course::Chapter& ch, const Knobs& k, const std::string& task,
                                    Model& model, attn::Rng& batches) {
  course::TrainingState start{.step = 0, .steps = k.steps, .adam = {}, .batches = {}};
  if (k.load.empty()) return start;
  const std::string dir = k.load + "/" + task;
  const std::optional<course::TrainingState> saved = course::load_checkpoint(dir, ch.name(), model);
  if (saved) {
    start = *saved;
    start.steps = k.steps;  // --steps, or the saved run's (checkpoint_problem set it)
    batches.restore(saved->batches);
  }
  if (!k.trains()) {
    ch.say("weights loaded from {}: evaluated as they are", dir);
  } else if (!saved) {
    ch.say("weights loaded from {}; it holds no optimiser state, so training goes on with a "
           "fresh Adam for {} steps",
           dir, last_step(k, start));
  } else {
    ch.say("weights, Adam's state and the batch stream loaded from {}: it stopped after step {} "
           "of {}; training goes on from step {} to step {}{}",
           dir, saved->step, saved->steps, saved->step + 1, last_step(k, start),
           start.steps == saved->steps
               ? ""
               : fmt::format(" of a schedule now {} steps long", start.steps));
  }
  return start;
}

}  // namespace

course::TrainingState start_training(course::Chapter& ch, const Knobs& k, attn::Seq2Seq& model,
                                     attn::Rng& batches) {
  return load_and_plan(ch, k, "reversal", model, batches);
}

course::TrainingState start_training(course::Chapter& ch, const Knobs& k,
                                     attn::AttentionOnly& model, attn::Rng& batches) {
  return load_and_plan(ch, k, "induction", model, batches);
}

Index last_step(const Knobs& k, const course::TrainingState& start) {
  if (!k.trains()) return start.step;
  return k.stop_at > 0 ? k.stop_at : start.steps;
}

namespace {

// The checkpoint, with the training state when the run trained or loaded one.
template <typename Model>
void save_with_state(const std::string& dir, const course::DumpSource& source, const Model& model,
                     course::TrainingState run, const attn::Rng& batches,
                     const course::CheckpointExtras& extras) {
  if (run.adam.empty()) {  // evaluated only, from weights saved without a state
    course::save_checkpoint(dir, source, model, extras);
    return;
  }
  run.batches = batches.state();
  course::save_checkpoint(dir, source, model, run, extras);
}

}  // namespace

void save_reversal(course::Chapter& ch, const std::string& dir, const attn::Seq2Seq& model,
                   course::TrainingState run, const attn::Rng& batches,
                   const attn::Seq2SeqBatch& held_out) {
  const Index k = kSavedExamples, n = held_out.src.cols();
  attn::Batch logits(k, n, model.vocab());  // [k, n, V]
  attn::Matrix greedy(k, n);                // [k x n]
  for (Index b = 0; b < k; ++b) {
    const std::span<const int> src(held_out.src.row(b).data(), static_cast<std::size_t>(n));
    logits[b] = attn::seq2seq_forward<float>(
        model, src, {held_out.tgt_in.row(b).data(), static_cast<std::size_t>(n)});
    const std::vector<int> got = greedy_reverse(model, src);
    for (Index i = 0; i < n; ++i)
      greedy(b, i) = static_cast<float>(got[static_cast<std::size_t>(i)]);
  }
  save_with_state(dir, ch.source(), model, std::move(run), batches, [&](course::Dumper& d) {
    d("eval_src", attn::Matrix(held_out.src.topRows(k).cast<float>()));
    d("eval_tgt_in", attn::Matrix(held_out.tgt_in.topRows(k).cast<float>()));
    d("eval_logits", logits);
    d("eval_greedy", greedy);
  });
  say_saved(ch, dir);
}

void save_induction(course::Chapter& ch, const std::string& dir, const attn::AttentionOnly& model,
                    course::TrainingState run, const attn::Rng& batches,
                    const std::vector<InductionSequence>& held_out) {
  const Index k = kSavedExamples, T = model.context();
  attn::Matrix ids(k, T);                   // [k x T]
  attn::Batch logits(k, T, model.vocab());  // [k, T, V]
  for (Index b = 0; b < k; ++b) {
    const std::vector<int>& seq = held_out[static_cast<std::size_t>(b)].ids;
    for (Index t = 0; t < T; ++t) ids(b, t) = static_cast<float>(seq[static_cast<std::size_t>(t)]);
    logits[b] = attn::attention_only_forward<float>(model, seq);
  }
  save_with_state(dir, ch.source(), model, std::move(run), batches, [&](course::Dumper& d) {
    d("eval_ids", ids);
    d("eval_logits", logits);
  });
  say_saved(ch, dir);
}

std::string checkpoint_problem(const course::Chapter& ch, Knobs& k) {
  bool adopted = false;  // k.steps was set from a checkpoint's schedule
  std::vector<std::string> tasks;
  if (k.task != "induction") tasks.push_back("reversal");
  if (k.task != "reversal") tasks.push_back("induction");
  for (const std::string& task : tasks) {
    if (!k.save.empty()) {
      const std::string problem = course::check_dump_folder(k.save + "/" + task);
      if (!problem.empty()) return "--save: " + problem;
    }
    if (k.load.empty()) continue;
    try {
      // --heads changes no tensor's shape, only how Q, K, V are split: compare it by name.
      const auto recorded = course::checkpoint_options(k.load + "/" + task, ch.name());
      const auto heads = recorded.find("--heads");
      if (heads != recorded.end() && heads->second != std::to_string(k.heads)) {
        return fmt::format("--load: {}/{} was trained with --heads {}, but this run has --heads "
                           "{}: the same weights split into other heads compute another model",
                           k.load, task, heads->second, k.heads);
      }
      attn::Rng rng(0);
      std::optional<course::TrainingState> saved;
      if (task == "reversal") {
        attn::Seq2Seq model = attn::seq2seq_init(rng, reversal_config(k));
        saved = course::load_checkpoint(k.load + "/reversal", ch.name(), model);
      } else {
        attn::AttentionOnly model = attn::attention_only_init(rng, induction_config(k));
        saved = course::load_checkpoint(k.load + "/induction", ch.name(), model);
      }
      if (saved && !k.steps_given) {
        // No --steps: the schedule is the saved run's, so that what is printed and recorded
        // is the schedule used.
        if (saved->steps > kMaxSteps) {
          return fmt::format("--load: {}/{} records a schedule of {} steps, past --steps' "
                             "largest, {}",
                             k.load, task, saved->steps, kMaxSteps);
        }
        if (adopted && k.steps != saved->steps) {
          return fmt::format("--load: the checkpoints in {} planned schedules of {} and {} "
                             "steps: give --steps",
                             k.load, k.steps, saved->steps);
        }
        k.steps = saved->steps;
        adopted = true;
      }
      if (saved && k.trains()) {
        const std::string problem = course::resume_problem(
            fmt::format("--load: {}/{}", k.load, task), *saved, k.steps, k.stop_at,
            "give a larger --steps (the schedule's length) or --stop-at to train on");
        if (!problem.empty()) return problem;
      }
    } catch (const course::CheckpointError& e) {
      return std::string("--load: ") + e.what();
    }
  }
  if (k.stop_at > k.steps) {
    return fmt::format("--stop-at {} is past the end of the schedule, --steps {}", k.stop_at,
                       k.steps);
  }
  return "";
}

}  // namespace training
