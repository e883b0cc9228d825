/// @file
/// Choosing the next token from a row of logits: greedy, or a draw from the softmax at a
/// temperature, optionally among the k largest logits only (nanoGPT's generate()).
///
///     p_j = exp((z_j - m) / T) / sum_{i in K} exp((z_i - m) / T)   for j in K, 0 otherwise
///
/// with m = max_j z_j and K the ids kept by top-k (every id when k = 0). Subtracting m before
/// dividing by T changes nothing mathematically (the factor cancels) but keeps every exponent
/// <= 0, and z / T itself could overflow for a tiny T where (z - m) / T only goes to -inf, whose
/// exp is 0.
///
/// - T -> 0 concentrates the mass on the largest logit; T = 0 is greedy decoding, exactly
///   (no division by zero, and no draw from the generator).
/// - T = 1 samples the model's own distribution; T > 1 flattens it towards uniform.
/// - top_k = k > 0 keeps the ids whose logit is at least the k-th largest, v_k. As nanoGPT
///   does it (after torch.topk, every logit strictly below v_k becomes minus infinity), an id
///   tied with v_k is kept too, so a tie can keep more than k ids; k = 1 is greedy only when the
///   largest logit is unique. A k above the vocabulary keeps every id (nanoGPT takes
///   min(k, V)).
///
/// The draw is one uniform u in [0, 1) from the generator, and the inverse of the cumulative
/// distribution in id order: the first id j whose running sum of weights exceeds u times their
/// total. Every call with T > 0 takes exactly one draw, whatever k, so a seed gives the same
/// sequence on every platform (Rng is integer arithmetic, the weights IEEE double).
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"

namespace attn {

struct SamplingOptions {
  double temperature = 1.0;  ///< T, finite and >= 0; 0 is greedy
  Index top_k = 0;           ///< k >= 0: sample among the k largest logits (and ties); 0: all
};

/// Throws std::invalid_argument, naming `where`, for a temperature that is negative or not
/// finite, or a negative top_k: what sample_token checks of its options, for a caller (the
/// generation loop) to check them before any work.
void check_sampling_options(const SamplingOptions& opts, const char* where);

/// The id of the largest logit of a row [1 x V], the lowest id on a tie: greedy decoding.
/// Throws std::invalid_argument unless the row is [1 x V] with V >= 1.
template <Real T>
int greedy_token(const InView<T>& logits_row);

/// The next token drawn from a row of logits [1 x V] (the model's last row): greedy when
/// temperature is 0 (rng untouched), otherwise one draw from rng from softmax(logits / T)
/// restricted to the top k, computed in double. Throws std::invalid_argument, before drawing,
/// for a row that is not [1 x V] with V >= 1, a temperature that is negative or not finite, a
/// negative top_k, or a logit that is NaN or infinite (naming its id).
template <Real T>
int sample_token(const InView<T>& logits_row, const SamplingOptions& opts, Rng& rng);

}  // namespace attn
