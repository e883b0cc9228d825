// tasks.hpp: the two things chapter 09 teaches a transformer, as data, and how each is scored.
//
//   reversal   a source of n symbols -> the same symbols backwards (encoder-decoder)
//   induction  a sequence in which a segment occurs twice; in the second copy, predict the token
//              that followed the current one in the first copy (attention-only decoder)
//
// Both draw from attn::Rng, so a seed gives the same sequences on every machine.
#pragma once

#include "attn/core/random.hpp"
#include "attn/models/attention_only.hpp"
#include "attn/models/seq2seq.hpp"

#include <string>
#include <vector>

namespace training {

using attn::Index;

// ---- Reversal -----------------------------------------------------------------------------------

inline constexpr int kPad = 0, kBos = 1;  // then the symbols 2 .. kReversalVocab - 1
inline constexpr Index kReversalVocab = 12;

/// "<pad>", "<bos>", then the symbols as the letters a .. j.
std::string reversal_token(int id);
std::vector<std::string> reversal_tokens(std::span<const int> ids);

/// B random sources of n symbols and their reversals, teacher-forced: tgt_in = <bos> y_1 ..
/// y_{n-1}, tgt_out = y_1 .. y_n. Every sequence has length n, so nothing is padded.
attn::Seq2SeqBatch reversal_batch(attn::Rng& rng, Index B, Index n);

/// Greedy decoding of one source (attn::seq2seq_greedy): start from <bos>, append the most likely
/// next symbol, n times. [n]
std::vector<int> greedy_reverse(const attn::Seq2Seq& model, std::span<const int> src);

/// The fraction of the batch's sources whose greedy decoding is exactly their reversal.
double exact_reversals(const attn::Seq2Seq& model, const attn::Seq2SeqBatch& batch);

// ---- Induction ----------------------------------------------------------------------------------

inline constexpr Index kInductionVocab = 32;

/// The tokens as letters: A .. Z, then a .. f.
std::string induction_token(int id);
std::vector<std::string> induction_tokens(std::span<const int> ids);

/// One sequence with a repeated segment, and where its two copies start.
struct InductionSequence {
  std::vector<int> ids;  ///< [T]
  Index first = 0;       ///< p1: the first copy starts here
  Index second = 0;      ///< p2: the second copy starts here
  Index length = 0;      ///< L: the segment's length
};

/// T tokens, all different except a segment of L (between T/4 and 5T/12) that occurs at p1 and
/// again at p2 >= p1 + L; random offsets, so no fixed position can hold the answer.
InductionSequence induction_sequence(attn::Rng& rng, Index T);

/// A batch of B such sequences: inputs the tokens, targets the next token at the positions
/// p2 .. p2 + L - 2 of the second copy (where the first copy says what comes next) and the
/// ignore id everywhere else.
attn::AttentionOnlyBatch induction_batch(const std::vector<InductionSequence>& seqs);
std::vector<InductionSequence> induction_sequences(attn::Rng& rng, Index B, Index T);

/// What one head of the trained model does, averaged over held-out sequences:
///   previous  the attention mass on position t - 1 (over every t >= 1)
///   induction at the positions t of the second copy, the mass on s + 1, where s = t - (p2 - p1)
///             is the same token's position in the first copy: the token that followed it then
struct HeadScores {
  Index layer = 0, head = 0;  // 0-based
  double previous = 0, induction = 0;
};
std::vector<HeadScores> head_scores(const attn::AttentionOnly& model,
                                    const std::vector<InductionSequence>& seqs);

}  // namespace training
