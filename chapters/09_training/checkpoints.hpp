// Chapter 09's --save and --load: the trained weights as checkpoints (course/checkpoint.hpp),
// with held-out examples and their logits for scripts/check_training_checkpoint.py to replay.
#pragma once

#include "attn/models/attention_only.hpp"
#include "attn/models/seq2seq.hpp"
#include "course/chapter.hpp"
#include "knobs.hpp"
#include "tasks.hpp"

#include <string>
#include <vector>

namespace training {

/// The reversal model in `dir`, with the first 8 held-out pairs, their logits under teacher
/// forcing and their greedy decodings; says where it went.
void save_reversal(course::Chapter& ch, const std::string& dir, const attn::Seq2Seq& model,
                   const attn::Seq2SeqBatch& held_out);

/// The induction model in `dir`, with the first 8 held-out sequences and their logits.
void save_induction(course::Chapter& ch, const std::string& dir, const attn::AttentionOnly& model,
                    const std::vector<InductionSequence>& held_out);

/// What is wrong with --save or --load, or "": checked before anything runs, so that a bad
/// folder or checkpoint is a usage error (exit 2), not a failure after minutes of training.
/// --load is read whole into models of the sizes the knobs give: a missing, unfinished,
/// foreign, truncated or differently shaped checkpoint is named here.
std::string checkpoint_problem(const course::Chapter& ch, const Knobs& k);

}  // namespace training
