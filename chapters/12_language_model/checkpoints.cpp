// Chapter 12's checkpoints (checkpoints.hpp).
#include "checkpoints.hpp"

#include "course/dump.hpp"

#include <optional>
#include <utility>

namespace lm {

course::TrainingState start_training(course::Chapter& ch, const Knobs& k,
                                     attn::LanguageModel& model, attn::Rng& batches) {
  course::TrainingState start{.step = 0, .steps = k.steps, .adam = {}, .batches = {}};
  if (k.load.empty()) return start;
  const std::optional<course::TrainingState> saved =
      course::load_checkpoint(k.load, ch.name(), model);
  if (saved) {
    start = *saved;
    start.steps = k.steps;  // --steps, or the saved run's (checkpoint_problem set it)
    batches.restore(saved->batches);
  }
  if (!k.trains()) {
    ch.say("weights loaded from {}: no training, the model writes as it is", k.load);
  } else if (!saved) {
    ch.say("weights loaded from {}; it holds no optimiser state, so training goes on with a "
           "fresh Adam for {} steps",
           k.load, last_step(k, start));
  } else {
    ch.say("weights, Adam's state and the batch stream loaded from {}: it stopped after step {} "
           "of {}; training goes on from step {} to step {}",
           k.load, saved->step, saved->steps, saved->step + 1, last_step(k, start));
  }
  return start;
}

Index last_step(const Knobs& k, const course::TrainingState& start) {
  if (!k.trains()) return start.step;
  return k.stop_at > 0 ? k.stop_at : start.steps;
}

void save_model(course::Chapter& ch, const std::string& dir, const attn::LanguageModel& model,
                course::TrainingState run, const attn::Rng& batches, const std::string& vocab) {
  attn::Matrix chars(1, static_cast<Index>(vocab.size()));  // [1 x V]: each id's byte value
  for (std::size_t i = 0; i < vocab.size(); ++i) {
    chars(0, static_cast<Index>(i)) = static_cast<float>(static_cast<unsigned char>(vocab[i]));
  }
  const course::CheckpointExtras extras = [&](course::Dumper& d) { d("vocab_bytes", chars); };
  if (run.adam.empty()) {  // loaded without a state and not trained: the weights alone
    course::save_checkpoint(dir, ch.source(), model, extras);
  } else {
    run.batches = batches.state();
    course::save_checkpoint(dir, ch.source(), model, run, extras);
  }
  ch.say("saved the model to {} (sample from it: --load {})", dir, dir);
}

std::string checkpoint_problem(const course::Chapter& ch, Knobs& k, Index vocab) {
  if (!k.save.empty()) {
    const std::string problem = course::check_dump_folder(k.save);
    if (!problem.empty()) return "--save: " + problem;
  }
  if (!k.load.empty()) {
    try {
      // --heads and --kv-heads change how W_Q, W_K split into heads, not every shape: compare
      // them by name, as the shapes cannot tell. --merges changes the vocabulary's size, and
      // is named so that the message says which knob to give.
      const auto recorded = course::checkpoint_options(k.load, ch.name());
      for (const auto& [flag, value, why] :
           {std::tuple{"--heads", k.heads,
                       "the same weights split into other heads compute "
                       "another model"},
            std::tuple{"--kv-heads", k.kv_heads,
                       "the same weights split into other heads "
                       "compute another model"},
            std::tuple{"--merges", k.merges, "its tokens are other pieces of text"}}) {
        const auto it = recorded.find(flag);
        if (it != recorded.end() && it->second != std::to_string(value)) {
          return fmt::format("--load: {} was trained with {} {}, but this run has {} {}: {}",
                             k.load, flag, it->second, flag, value, why);
        }
      }
      attn::Rng rng(0);
      attn::LanguageModel model = attn::language_model_init(rng, config_of(k, vocab));
      const std::optional<course::TrainingState> saved =
          course::load_checkpoint(k.load, ch.name(), model);
      if (saved && !k.steps_given) {
        if (saved->steps > kMaxSteps) {
          return fmt::format("--load: {} records a schedule of {} steps, past --steps' largest, {}",
                             k.load, saved->steps, kMaxSteps);
        }
        k.steps = saved->steps;  // the saved run's schedule, printed and recorded as used
      }
      if (saved && k.trains()) {
        const std::string problem = course::resume_problem(
            "--load: " + k.load, *saved, k.steps, k.stop_at,
            "give a larger --steps or --stop-at to train on, or neither to sample from it");
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

}  // namespace lm
