// Chapter 12's knobs and the model they make: main.cpp teaches with them, and checkpoints.cpp
// checks a --load against the model they make before anything runs.
#pragma once

#include "attn/models/language_model.hpp"
#include "corpus.hpp"
#include "course/chapter.hpp"

#include <string>

namespace lm {

using attn::Index;

inline constexpr Index kMaxSteps = 100000;  // --steps' largest value
inline constexpr Index kMaxMerges = 1024;   // --merges' largest: a vocabulary of about 1,100

struct Knobs {
  // The model: nanoGPT's CPU configuration for Shakespeare (4 layers, 4 heads, 128 features,
  // 64 characters of context), with grouped queries (2 kv heads) and RoPE from chapter 11.
  Index d_model = 128, heads = 4, kv_heads = 2, layers = 4, context = 64;
  Index d_ff = 0;  // 0: 4 d_model, as GPT-2
  Index window = 0;
  bool tied = false;
  // Training: 12 windows a step, Adam's peak rate after a warm-up of 100 steps, then cosine.
  Index steps = 3000, batch = 12;
  double lr = 2e-3;
  Index eval_every = 100;
  // Windows of each batch written as a piece of the book twice: text that repeats itself
  // within the context, which only an induction head can predict (the book alone rarely
  // repeats itself within 64 characters, and no induction head forms in 3,000 steps of it).
  Index merges = 0;    // byte-pair merges on top of the characters (tokens.hpp)
  Index repeated = 3;  // unless given: a quarter of the batch, rounded down (knobs_problem)
  // Writing: nanoGPT's sample.py draws at temperature 0.8 among the 200 largest logits; with
  // under 80 characters the top-k that matters is smaller.
  double temperature = 0.8;
  Index top_k = 20;
  Index sample_length = 240;
  std::string prompt = "And God said";
  std::string corpus;  // --corpus FILE: a text of the learner's own instead of the Bible
  bool quick = false;  // the test command's small run
  std::string save, load;
  Index stop_at = 0;
  bool steps_given = false;

  bool trains() const { return load.empty() || steps_given || stop_at > 0; }
  Index ff() const { return d_ff > 0 ? d_ff : 4 * d_model; }
};

/// --quick: a model and a run small enough for the test command (seconds, not minutes).
inline void make_quick(Knobs& k) {
  k.d_model = 32;
  k.heads = 4;
  k.kv_heads = 2;
  k.layers = 2;
  k.context = 32;
  k.steps = 60;
  k.batch = 4;
  k.eval_every = 20;
  k.sample_length = 60;
}

inline attn::LanguageModelConfig config_of(const Knobs& k, Index vocab) {
  return {.vocab = vocab,
          .d_model = k.d_model,
          .heads = k.heads,
          .kv_heads = k.kv_heads,
          .d_ff = k.ff(),
          .layers = k.layers,
          .context = k.context,
          .window = k.window,
          .tied_embeddings = k.tied};
}

/// --quick's sizes for the knobs the command line did not give, then what is wrong with the
/// knobs together, or "": heads dividing d_model into an even d_k, kv heads dividing heads, a
/// prompt of the corpus's characters, a held-out tenth longer than a window, --save, --load and
/// --stop-at (checkpoint_problem). Reads the corpus into `source` (once, for the lesson too);
/// a corpus that cannot be read is left to the lesson, which says what failed.
std::string knobs_problem(const course::Chapter& ch, Knobs& k, corpus::Source& source);

}  // namespace lm
