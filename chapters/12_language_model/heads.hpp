// heads.hpp: what chapter 12's attention heads learned, measured on text.
//
// Every layer x head is scored on two kinds of input, each a batch of windows of the context's
// length, drawn once so that scores at different steps of training compare the same inputs:
//
//   real text          held-out windows of the corpus
//     previous token   the mean weight of query i on key i - 1 (i >= 1)
//     space            the mean weight a query puts on keys that are spaces
//     punctuation      ... on keys that are punctuation (std::ispunct: , . ; : ! ? ' ( ) ...)
//     word start       the mean weight of a letter inside a word on that word's first letter
//   repeated strings   R random lowercase letters, then the same R again (R = n / 2)
//     induction        the mean weight of a query in the second copy on the key just after
//                      the same character's place in the first copy (i - R + 1): the head
//                      that reads "what came next last time" (Olsson et al. 2022)
//
// A score is a mean attention weight, so it lies in [0, 1]. What it is worth is read against
// a head that spreads its weight evenly over the keys it may see (`uniform` below): a space
// score of 0.18 means nothing when 18% of the characters are spaces.
#pragma once

#include "attn/core/random.hpp"
#include "attn/models/language_model.hpp"
#include "attn/ops/masks.hpp"
#include "corpus.hpp"

#include <array>
#include <span>
#include <string>
#include <vector>

namespace lm {

using attn::Index;

/// The inputs every scoring reads, fixed once.
struct HeadProbes {
  attn::TokenIds text;      ///< [B x n] held-out windows of the corpus
  attn::TokenIds repeated;  ///< [B x n]: R random lowercase letters, then the same R again
  Index period = 0;         ///< R = n / 2
  std::string chars;        ///< id -> byte (the vocabulary), for the character classes
};

/// B windows of the held-out ids and B repeated strings of `context` tokens, drawn from `rng`.
/// The strings draw from the vocabulary's lowercase letters (the whole vocabulary when it has
/// fewer than two). Throws std::invalid_argument for B < 1, a context < 2, or held-out ids
/// shorter than a window.
HeadProbes make_head_probes(std::span<const int> held_out, const corpus::CharVocab& vocab,
                            Index batch, Index context, attn::Rng& rng);

/// The five scores of one head, each a mean attention weight in [0, 1].
struct HeadScore {
  Index layer = 0, head = 0;  // from 0
  double previous = 0, induction = 0, space = 0, punctuation = 0, word_start = 0;
};

/// Every layer x head's scores (layer-major: layer l's head q at l h + q), from one forward
/// pass over each probe batch with the weights kept. The model's context must hold the
/// probes' windows. With `second_copy_loss`, also the mean cross-entropy (nats) of the model's
/// predictions of the repeated strings' second copy (positions R - 1 .. n - 2 predicting
/// R .. n - 1): a model that reads the first copy can take it towards 0; one that cannot stays
/// near the log of the letters' count, as each letter was drawn at random.
std::vector<HeadScore> score_heads(const attn::LanguageModel& model, const HeadProbes& probes,
                                   double* second_copy_loss = nullptr);

/// The scores of a head that gives every key it may see the same weight (causal, or the last
/// W keys with a window): the level each score is read against.
HeadScore uniform_scores(const HeadProbes& probes, Index window);

/// The head of `scores` whose `score` is largest (the first on a tie).
const HeadScore& best_head(const std::vector<HeadScore>& scores, double HeadScore::*score);

/// Scores measured along training: one entry per step measured.
struct HeadHistory {
  std::vector<double> step;
  std::vector<std::vector<HeadScore>> scores;  // scores[t]: every head's at step[t]
  std::vector<double> second_copy_loss;        // score_heads' second_copy_loss at step[t]
};

/// The steps the heads are scored at: every eval_every / 4 steps for the first 5 eval_every
/// (where induction heads form, and fast), then every eval_every, from `first` to `last`.
std::vector<Index> head_score_steps(Index first, Index last, Index eval_every);

/// A sentence of the held-out text to draw maps on: the first whole line (after the first
/// newline, as the text may start inside one) of between m / 2 and m = min(n, 56) characters
/// in which a word of three or more letters occurs twice (so that an induction head has
/// something to find), else the first such line, else the first m characters from there.
std::string map_sentence(const std::string& held_out_text, Index context);

/// One head's attention on a sentence: its weights [m x m], and the scores before the softmax
/// they came from [m x m] (blocked keys at -inf), which the figure's twin shows beside them.
struct HeadMap {
  attn::Matrix weights;       ///< [m x m], row i = query i's weights over the keys
  attn::Matrix scores;        ///< [m x m], the masked Q_q K_j^T / sqrt(d_k) the softmax read
  attn::AllowedMask allowed;  ///< [m x m], the keys the head let each query see
};

/// The keys every head of the model lets each of n queries see [n x n]: the last `window` up to
/// its own (a sliding window), or with window 0 all of them up to its own (causal).
attn::AllowedMask head_mask(Index n, Index window);

/// One head's attention map on the ids of a sentence (m <= context).
HeadMap head_map(const attn::LanguageModel& model, std::span<const int> ids, Index layer,
                 Index head);

}  // namespace lm
