/// @file
/// Training the decoder-only language model (language_model.hpp): the loss of a batch of text
/// windows, forward and backward, with the batch's rows stacked so that every layer that works
/// row by row runs as one product over all of them.
///
/// A batch is B windows of n consecutive tokens of a text; each position predicts the next
/// token (the target is the input shifted by one), and the loss is the mean cross-entropy over
/// all B n positions, in nats per token, as nanoGPT's and llm.c's are:
///
///     inputs  [B x n]   text[s_b .. s_b + n - 1]       one window per row
///     targets [B x n]   text[s_b + 1 .. s_b + n]
///     x       [B n x E] tok_embed[inputs], the windows' rows one after another
///     block l:  x = x + GQA(LN1(x)),  x = x + FFN(LN2(x))       [B n x E]
///     logits  [B n x V] = LN(x) W_head^T
///     loss    = mean over the B n rows of cross_entropy(logits, targets)
///
/// **Stacked rows.** Embedding, LayerNorm, the four projections, the feed-forward network and
/// the head act on each row alone, so they take all B n rows at once: [B n x E] times
/// [E x E]^T is one large product where B products of [n x E] would be B small ones (the
/// larger product reuses each weight across more rows, and a GEMM's speed grows with that).
/// Only the attention mixes rows, and only within a window: each (window, head) pair is its own
/// attention on its block of rows (GroupedQueryOptions::sequences), with positions restarting
/// at 0 in every window (RoPE).
///
/// **Backward**, as llm.c writes it: every layer's backward in the reverse order, each
/// reading what its forward kept (LanguageModelCacheOf), and the gradients accumulated into a
/// model-shaped holder (zeros_like(model)). With tied embeddings the head's gradient
/// d_logits^T LN(x) is added to the embedding's (one tensor read twice gets both gradients).
///
/// **Threads.** The batch's windows are cut into shards (a power of two, chosen from B and n
/// alone) that run side by side on the cores, each into a gradient of its own; the shards'
/// gradients are then added in shard order. Within a shard every sum has an order the data
/// fixes, so the result is the same bytes for any number of threads (not the same bytes as an
/// unsharded run: a weight's gradient is summed over rows in another grouping).
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/grouped_query.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/models/language_model.hpp"

#include <type_traits>
#include <vector>

namespace attn {

/// B windows of n tokens and the tokens that follow each position.
struct LanguageModelBatch {
  TokenIds inputs;   ///< [B x n], ids in [0, V)
  TokenIds targets;  ///< [B x n], ids in [0, V): targets(b, i) follows inputs(b, i)
};

/// What one block's forward kept for its backward (every matrix [B n x ...]).
template <Real T>
struct LanguageModelBlockCacheOf {
  MatrixOf<T> x;                 ///< the residual stream entering the block [B n x E]
  LayerNormCache norm1;          ///< LN1's per-row statistics
  MatrixOf<T> normed1;           ///< LN1(x) [B n x E]: the attention's input
  GroupedQueryResultOf<T> attn;  ///< Q, K, V, concat, out and the weights or log-sum-exps
  MatrixOf<T> mid;               ///< x + attention [B n x E]: LN2's input
  LayerNormCache norm2;
  MatrixOf<T> normed2;        ///< LN2(mid) [B n x E]: the feed-forward network's input
  FeedForwardCacheOf<T> ffn;  ///< its hidden pre-activation
};

/// Everything one forward pass on a batch computed.
template <Real T>
struct LanguageModelCacheOf {
  std::vector<LanguageModelBlockCacheOf<T>> blocks;  ///< one per block
  MatrixOf<T> final_in;                              ///< the stream after the last block [B n x E]
  LayerNormCache norm;                               ///< the final LayerNorm's statistics
  MatrixOf<T> normed;                                ///< LN(final_in) [B n x E]: the head's input
  MatrixOf<T> logits;                                ///< [B n x V]
};
using LanguageModelCache = LanguageModelCacheOf<float>;
using LanguageModelCacheD = LanguageModelCacheOf<double>;

/// One training step's numbers.
template <Real T>
struct LanguageModelStepOf {
  T loss = 0;         ///< the mean cross-entropy over the B n positions, nats per token
  Index count = 0;    ///< B n
  Index correct = 0;  ///< positions whose largest logit is the target
};
using LanguageModelStep = LanguageModelStepOf<float>;
using LanguageModelStepD = LanguageModelStepOf<double>;

/// The forward pass on a batch's inputs [B x n], 1 <= n <= context: logits [B n x V] (row
/// b n + i predicts the token after inputs(b, i)), with everything the backward needs kept in
/// `cache`. `need_weights` keeps every (window, head)'s [n x n] weights in the cache (for
/// figures and head scores; otherwise windows longer than one tile run the tiled kernel).
/// Throws std::invalid_argument for an empty batch, windows longer than the context, or an id
/// outside the vocabulary (its row and position named). `threads`: the attention's
/// (GroupedQueryOptions::threads; 0 is the default), which never change the bytes.
template <Real T>
const MatrixOf<T>& language_model_forward_batch(const LanguageModelOf<T>& model,
                                                const TokenIds& inputs,
                                                LanguageModelCacheOf<T>& cache,
                                                bool need_weights = false, int threads = 0);

/// The loss of a batch and, when grads is not null, its gradient accumulated into *grads
/// (zeros_like(model) before the first step): forward, cross-entropy (the mean over all B n
/// positions), backward. `cache` may be passed to keep what the forward computed (the logits,
/// the attention weights with `need_weights`): the batch then runs as one shard; otherwise the
/// shards' caches are kept by the calling thread between calls, so a step allocates little. Throws
/// std::invalid_argument, before accumulating anything, unless inputs and targets have one shape,
/// every id and target is in the vocabulary, and grads is shaped like the model with memory of its
/// own (`language_model_loss(model, batch, &model)` is refused).
template <Real T>
LanguageModelStepOf<T> language_model_loss(
    const LanguageModelOf<T>& model, const LanguageModelBatch& batch,
    std::type_identity_t<LanguageModelOf<T>>* grads,
    std::type_identity_t<LanguageModelCacheOf<T>>* cache = nullptr, bool need_weights = false,
    int threads = 0);

}  // namespace attn
