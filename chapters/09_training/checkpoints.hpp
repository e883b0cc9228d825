// Chapter 09's --save and --load: the trained weights as checkpoints (course/checkpoint.hpp),
// with the training state that resumes the run exactly, and held-out examples and their logits
// for scripts/check_training_checkpoint.py to replay.
#pragma once

#include "attn/models/attention_only.hpp"
#include "attn/models/seq2seq.hpp"
#include "course/chapter.hpp"
#include "course/checkpoint.hpp"
#include "knobs.hpp"
#include "tasks.hpp"

#include <string>
#include <vector>

namespace training {

/// Where a task's training starts. Without --load: step 0 of a schedule of --steps, Adam
/// fresh. With --load: the weights of DIR/<task> loaded into `model` and, when they were saved
/// with a training state, that state (Adam's moments and step, the schedule's position, and
/// the batches' stream, restored into `batches`); the schedule's length is then --steps if
/// given, else the saved run's. Says what was loaded.
course::TrainingState start_training(course::Chapter& ch, const Knobs& k, attn::Seq2Seq& model,
                                     attn::Rng& batches);
course::TrainingState start_training(course::Chapter& ch, const Knobs& k,
                                     attn::AttentionOnly& model, attn::Rng& batches);

/// The step this run trains to: --stop-at if given, else the end of the schedule; with --load
/// and neither --steps nor --stop-at, the step it starts at (nothing is trained).
Index last_step(const Knobs& k, const course::TrainingState& start);

/// The reversal model in `dir`, with `run`'s training state (and `batches`' position), the
/// first 8 held-out pairs, their logits under teacher forcing and their greedy decodings; says
/// where it went.
void save_reversal(course::Chapter& ch, const std::string& dir, const attn::Seq2Seq& model,
                   course::TrainingState run, const attn::Rng& batches,
                   const attn::Seq2SeqBatch& held_out);

/// The induction model in `dir`, with `run`'s training state, the first 8 held-out sequences
/// and their logits.
void save_induction(course::Chapter& ch, const std::string& dir, const attn::AttentionOnly& model,
                    course::TrainingState run, const attn::Rng& batches,
                    const std::vector<InductionSequence>& held_out);

/// What is wrong with --save, --load or --stop-at, or "": checked before anything runs, so that
/// a bad folder or checkpoint is a usage error (exit 2), not a failure after minutes of
/// training. --load is read whole into models of the sizes the knobs give: a missing,
/// unfinished, foreign, truncated or differently shaped checkpoint is named here, and so is
/// one that has trained as far as this run would (nothing left to train).
/// Without --steps, a checkpoint saved with a training state sets k.steps to its schedule's
/// length, so that the run uses, prints and records the saved schedule.
std::string checkpoint_problem(const course::Chapter& ch, Knobs& k);

}  // namespace training
