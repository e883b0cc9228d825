// Chapter 12's --save and --load: the language model's weights as a checkpoint
// (course/checkpoint.hpp), with the training state that resumes the run exactly (Adam's
// moments and step, the schedule's position, the stream the batches are drawn from) and the
// vocabulary, so that --load can sample without training.
#pragma once

#include "attn/core/random.hpp"
#include "attn/models/language_model.hpp"
#include "course/chapter.hpp"
#include "course/checkpoint.hpp"
#include "knobs.hpp"

#include <string>

namespace lm {

/// Where training starts: step 0 of a schedule of --steps with a fresh Adam, or, with --load,
/// the weights of DIR loaded into `model` and the training state saved with them (restoring
/// `batches` too). Says what was loaded.
course::TrainingState start_training(course::Chapter& ch, const Knobs& k,
                                     attn::LanguageModel& model, attn::Rng& batches);

/// The step this run trains to: --stop-at, else the schedule's end; with --load and neither
/// --steps nor --stop-at, the step it starts at (nothing is trained: it samples).
Index last_step(const Knobs& k, const course::TrainingState& start);

/// The model in `dir`, with the run's training state, the batches' position and the
/// vocabulary (its characters' byte values, [1 x V]); says where it went.
void save_model(course::Chapter& ch, const std::string& dir, const attn::LanguageModel& model,
                course::TrainingState run, const attn::Rng& batches, const std::string& vocab);

/// What is wrong with --save, --load or --stop-at, or "": checked before anything runs (exit 2,
/// not a failure after minutes of training). The checkpoint is read whole into a model of the
/// knobs' sizes and `vocab` characters. Without --steps a checkpoint's schedule sets k.steps.
std::string checkpoint_problem(const course::Chapter& ch, Knobs& k, Index vocab);

}  // namespace lm
