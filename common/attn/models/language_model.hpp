/// @file
/// A decoder-only language model with today's attention, and how it generates: the model
/// chapter 11 decodes with and chapter 12 trains.
///
///     x      = tok_embed[ids]                                           [n x E]
///     x      = x + GQA_l(LN1_l(x); causal, RoPE, window W)  l = 0..L-1  [n x E]  pre-norm
///     x      = x + FFN_l(LN2_l(x))                                      [n x E]
///     logits = LN(x) W_head^T   (W_head = tok_embed when tied)          [n x V]
///
/// The attention is grouped-query (layers/grouped_query.hpp: h query heads over g key/value
/// heads; g = h is multi-head, g = 1 multi-query), positions enter only through RoPE
/// (ops/rope.hpp) on q and k, and a window W >= 1 limits each query to the last W keys
/// (ops/masks.hpp, sliding_window_mask). Llama and Mistral attend this way. They also use
/// RMSNorm and a gated (SwiGLU) feed-forward, where this model keeps chapter 08's LayerNorm and
/// ReLU network: the attention is what the course is about.
///
/// ## Generation with a KV cache
///
/// Row i of every layer depends on the rows 0..i below it, so the rows of tokens already seen
/// never change: a generator that recomputes the whole sequence for each new token (nanoGPT's
/// generate) redoes all of that work, O(n) rows per token. A KV cache keeps each layer's keys
/// and values (kernels/decode_attention.hpp); a decode step then computes one row per layer:
/// the new token's q, k and v, its k and v appended, its q against the cache.
///
///     state  = make_decode_state(model)                    one KvCache per layer
///     logits = language_model_prefill(model, prompt, state)  the prompt at once  [m x V]
///     logits = language_model_decode(model, id, state)       one token          [1 x V]
///
/// ## The same bits, by design
///
/// A cached run and an uncached one compute the same function; whether they print the same bits
/// depends on the arithmetic. The library's matrix product (core/gemm.hpp) sums every entry
/// in the same order for one row or n, so row i of x W^T is x_i W^T bit for bit; the attention
/// is where they part: the tiled kernel sums keys tile by tile, a decode step one key at a time.
/// So the forward pass has two arithmetics:
///
///   - Arithmetic::rows computes every row as a decode step computes its one row: each
///     projection as the product of that row alone, each attention row by decode's row kernel
///     (causal_attention_rows). Uncached generation with it equals cached generation bit for
///     bit, logits and tokens, whatever W: the test of the cache is exact.
///   - Arithmetic::blocked is the fast path: GEMMs over all rows and the tiled attention
///     (kernels/tiled_attention.hpp) for the prompt. Its logits differ from rows' by the
///     attention's rounding (a few float ulps per layer; chapter 11 prints the difference).
///
/// Prefill takes either: rows makes the whole run exact, blocked is the fast prefill.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/decode_attention.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/grouped_query.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/ops/rope.hpp"
#include "attn/ops/sampling.hpp"  // greedy_token, sample_token: choosing the next id

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace attn {

/// The sizes and choices of a language model.
struct LanguageModelConfig {
  Index vocab = 0;     ///< V
  Index d_model = 0;   ///< E
  Index heads = 1;     ///< h query heads, dividing E (d_k = E / h, even for RoPE's pairs)
  Index kv_heads = 1;  ///< g key/value heads, dividing h
  Index d_ff = 0;      ///< the feed-forward network's hidden width
  Index layers = 1;    ///< L
  /// The longest sequence: the RoPE table's positions and a plain KV cache's room.
  Index context = 0;
  /// W >= 1: each query reads the last W keys, counting its own (a rolling cache of W).
  /// 0: every earlier key.
  Index window = 0;
  RopeLayout rope_layout = RopeLayout::interleaved;
  double rope_base = 10000.0;  ///< theta_i = base^(-2i / d_k); Llama 3 uses 500000
  /// The output layer is tok_embed itself (GPT-2's weight tying) instead of its own [V x E].
  bool tied_embeddings = false;
  /// tok_embed ~ N(0, std^2): 0.02, GPT-2's. nn.Embedding's 1 would make tied logits large.
  double embedding_std = 0.02;
};

/// One block: LayerNorm, grouped-query attention, LayerNorm, feed-forward, each sub-layer
/// added to the residual stream.
template <Real T>
struct LanguageModelBlockOf {
  using Scalar = T;
  LayerNormOf<T> norm1;             ///< before the attention, [1 x E] each
  GroupedQueryAttentionOf<T> attn;  ///< W_Q [h d_k x E], W_K and W_V [g d_k x E], W_O [E x h d_k]
  LayerNormOf<T> norm2;             ///< before the feed-forward network
  FeedForwardOf<T> ffn;             ///< [d_ff x E] and [E x d_ff]
};

template <Real T>
struct LanguageModelOf {
  using Scalar = T;
  LanguageModelConfig config;
  MatrixOf<T> tok_embed;                        ///< [V x E]
  std::vector<LanguageModelBlockOf<T>> blocks;  ///< L blocks
  LayerNormOf<T> norm;                          ///< the final LayerNorm
  LinearOf<T> lm_head;  ///< [V x E], no bias; empty when the embeddings are tied
  RopeTable rope;       ///< context positions of d_k features, config's base

  Index vocab() const { return tok_embed.rows(); }
  Index d_model() const { return tok_embed.cols(); }
  /// The output weights [V x E]: lm_head's, or tok_embed when tied.
  const MatrixOf<T>& head_weight() const {
    return config.tied_embeddings ? tok_embed : lm_head.weight;
  }
};
using LanguageModel = LanguageModelOf<float>;
using LanguageModelD = LanguageModelOf<double>;

/// Throws std::invalid_argument from `where` naming the size that does not fit: vocab, d_model,
/// heads, kv_heads, d_ff, layers, context >= 1; g dividing h dividing E; d_k = E / h even;
/// window >= 0; rope_base finite and > 1; embedding_std finite and > 0.
void check_language_model_config(const LanguageModelConfig& config, const char* where);

/// A fresh model: tok_embed ~ N(0, embedding_std^2), then per block norm1 (ones, zeros),
/// grouped_query_init (nn.Linear's), norm2, ffn_init (nn.Linear's), then the final norm and,
/// untied, lm_head as nn.Linear without bias, drawn in that order; the RoPE table made for
/// config.context positions. Throws as check_language_model_config, and, before drawing
/// anything, for parameters the machine cannot hold.
LanguageModel language_model_init(Rng& rng, const LanguageModelConfig& config);

/// How a forward pass multiplies (the file comment): each row alone, as decoding does, or
/// every row at once, fast.
enum class Arithmetic : char {
  blocked,  ///< GEMMs over all rows and tiled attention: fast, equal to rows' to rounding
  rows,     ///< each row as a decode step computes it: bit for bit decoding's
};

/// Logits [n x V] for ids [n], 1 <= n <= context: row i predicts the token after position i
/// from positions 0..i (within the window). No cache is kept or used. Throws
/// std::invalid_argument for an empty sequence, one longer than the context, or an id outside
/// the vocabulary (its position named).
template <Real T>
MatrixOf<T> language_model_forward(const LanguageModelOf<T>& model, std::span<const int> ids,
                                   Arithmetic arithmetic = Arithmetic::blocked);

/// What generation keeps between tokens: one KV cache per layer.
template <Real T>
struct DecodeStateOf {
  std::vector<KvCacheOf<T>> layers;  ///< layer l's keys and values, [capacity x g d_k] each

  /// The position of the next token: how many tokens the state has seen.
  Index next_position() const { return layers.empty() ? 0 : layers.front().next_position(); }
  /// Tokens held per layer: all of them, or the last W with a window.
  Index size() const { return layers.empty() ? 0 : layers.front().size(); }
  /// The bytes of every layer's keys and values, as allocated.
  std::size_t bytes() const {
    std::size_t total = 0;
    for (const KvCacheOf<T>& c : layers) total += c.bytes();
    return total;
  }
  /// Forgets the sequence: the next token is position 0 again. The memory stays.
  void clear() {
    for (KvCacheOf<T>& c : layers) c.clear();
  }
};
using DecodeState = DecodeStateOf<float>;
using DecodeStateD = DecodeStateOf<double>;

/// Empty caches for the model: room for config.context tokens per layer, or a rolling cache of
/// W with a window (2 W g d_k numbers per layer, whatever the length).
template <Real T>
DecodeStateOf<T> make_decode_state(const LanguageModelOf<T>& model);

/// Starts a sequence: runs the prompt ids [m] at once, appends every layer's keys and values
/// to the state, and returns the prompt's logits [m x V] (the last row predicts the first new
/// token). Throws std::invalid_argument, before changing the state, for an empty prompt, one
/// longer than the context, an id outside the vocabulary, a state that has already seen tokens
/// ("prefill starts a sequence: clear() the state first") or that was made for another model.
template <Real T>
MatrixOf<T> language_model_prefill(const LanguageModelOf<T>& model, std::span<const int> ids,
                                   DecodeStateOf<T>& state,
                                   Arithmetic arithmetic = Arithmetic::rows);

/// One decode step: the token `id` at position state.next_position(), its keys and values
/// appended, its logits [1 x V] returned. Throws std::invalid_argument, before changing the
/// state, for an id outside the vocabulary, a state that has seen no token ("a decode step
/// before prefill"), one made for another model, or a position at the end of the context.
template <Real T>
MatrixOf<T> language_model_decode(const LanguageModelOf<T>& model, int id, DecodeStateOf<T>& state);

/// One block's parameters: norm1.*, attn.{q,k,v,o}_proj.*, norm2.*, ffn.linear1.*, ffn.linear2.*.
template <typename L, typename F>
requires IsA<L, LanguageModelBlockOf>
void for_each_parameter(L& block, const std::string& prefix, F&& f) {
  for_each_parameter(block.norm1, prefix + "norm1.", f);
  for_each_parameter(block.attn, prefix + "attn.", f);
  for_each_parameter(block.norm2, prefix + "norm2.", f);
  for_each_parameter(block.ffn, prefix + "ffn.", f);
}

/// Every parameter in the named_parameters() order of the PyTorch replica
/// (scripts/fixtures/language_model.py): tok_embed.weight [V x E], blocks.N.* per block,
/// norm.weight/bias [E], then lm_head.weight [V x E] unless the embeddings are tied (a tied
/// head is tok_embed itself, listed once, as PyTorch lists a shared Parameter once).
template <typename L, typename F>
requires IsA<L, LanguageModelOf>
void for_each_parameter(L& model, const std::string& prefix, F&& f) {
  f(prefix + "tok_embed.weight", model.tok_embed, Index{0});
  for (std::size_t l = 0; l < model.blocks.size(); ++l) {
    for_each_parameter(model.blocks[l], prefix + "blocks." + std::to_string(l) + ".", f);
  }
  for_each_parameter(model.norm, prefix + "norm.", f);
  if (!model.config.tied_embeddings) for_each_parameter(model.lm_head, prefix + "lm_head.", f);
}

/// The same model in another precision (float -> double is exact); the RoPE table is shared
/// data in double already and is copied as it is.
template <Real U, Real T>
LanguageModelOf<U> cast(const LanguageModelOf<T>& m) {
  LanguageModelOf<U> out;
  out.config = m.config;
  out.tok_embed = m.tok_embed.template cast<U>();
  for (const LanguageModelBlockOf<T>& b : m.blocks) {
    out.blocks.push_back({cast<U>(b.norm1), cast<U>(b.attn), cast<U>(b.norm2), cast<U>(b.ffn)});
  }
  out.norm = cast<U>(m.norm);
  out.lm_head = cast<U>(m.lm_head);
  out.rope = m.rope;
  return out;
}

}  // namespace attn
