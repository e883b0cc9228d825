// Chapter 09's knobs and the two models they make: main.cpp teaches with them, and
// checkpoints.cpp checks a --load against the models they make before anything runs.
#pragma once

#include "attn/models/attention_only.hpp"
#include "attn/models/seq2seq.hpp"
#include "tasks.hpp"

#include <cmath>
#include <string>

namespace training {

inline constexpr Index kMaxSteps = 100000;  // --steps' largest value

struct Knobs {
  std::string task = "both";  // "reversal", "induction" or "both"
  Index steps = 800;          // training steps of each task
  double lr = 3e-3;           // Adam's peak learning rate, after the warm-up
  Index layers = 2;           // encoder and decoder layers (reversal), attention layers (induction)
  Index heads = 1;            // heads per attention; must divide d_model
  Index d_model = 32;         // features per token
  Index length = 8;           // reversal: symbols per sequence
  Index context = 24;         // induction: tokens per sequence
  double label_smoothing = 0.0;
  std::string norm = "pre";  // reversal: "pre" (x + f(Norm(x))) or "post" (Norm(x + f(x)))
  std::string save;          // --save DIR: the trained weights, DIR/reversal and DIR/induction
  std::string load;          // --load DIR: start from them (evaluate only, unless --steps)
  Index stop_at = 0;         // --stop-at K: stop after step K of the schedule (0: at its end)
  bool steps_given = false;  // --steps on the command line (with --load: train on)

  // With --load and neither --steps nor --stop-at the weights are only evaluated.
  bool trains() const { return load.empty() || steps_given || stop_at > 0; }
};

// Task 1's encoder-decoder: d_ff = 2 d_model, untied embeddings, N(0, 1/d_model) embeddings.
inline attn::Seq2SeqConfig reversal_config(const Knobs& k) {
  return {.vocab = kReversalVocab,
          .d_model = k.d_model,
          .heads = k.heads,
          .d_ff = 2 * k.d_model,
          .layers = k.layers,
          .norm = k.norm == "pre" ? attn::NormPlacement::pre : attn::NormPlacement::post,
          .tied = false,
          .pad_id = kPad,
          .max_len = k.length,
          .embedding_std = 1.0 / std::sqrt(static_cast<double>(k.d_model))};
}

// Task 2's attention-only decoder.
inline attn::AttentionOnlyConfig induction_config(const Knobs& k) {
  return {.vocab = kInductionVocab,
          .d_model = k.d_model,
          .heads = k.heads,
          .layers = k.layers,
          .context = k.context};
}

}  // namespace training
