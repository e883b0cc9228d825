/// @file
/// A whole encoder-decoder transformer for sequence-to-sequence tasks, forward and backward:
/// the model the training chapter teaches to reverse sequences.
///
///     x      = src_embed[src] sqrt(E) + PE                  [n_s x E]
///     memory = encoder layers (source padding masked), then encoder_norm (pre-norm only)
///     y      = tgt_embed[tgt_in] sqrt(E) + PE               [n_t x E]
///     y      = decoder layers (causal + target padding; cross: source padding),
///              then decoder_norm (pre-norm only)
///     logits = y W_gen^T + b_gen                            [n_t x V]
///     loss   = cross_entropy(logits, tgt_out, ignore PAD, label smoothing)
///
/// The paper multiplies the embeddings by sqrt(E) (section 3.4) before adding the position
/// vectors, whose entries lie in [-1, 1]. Pre-norm stacks end in a
/// LayerNorm because their residual stream is never normalised otherwise (PyTorch's
/// nn.Transformer always has one; the course adds it only where it matters). With `tied`, the
/// generator's weight is tgt_embed itself (Press and Wolf 2017): one [V x E] table read as
/// embeddings on the way in and as output vectors on the way out, its gradient the sum of both.
///
/// Parameter names follow the PyTorch module scripts/fixtures/train_step.py builds (src_embed,
/// tgt_embed, encoder.layers.N.*, encoder.norm, decoder.layers.N.*, decoder.norm, generator),
/// so a checkpoint is a state_dict and tests/attn/models/test_seq2seq.cpp compares one training
/// step with PyTorch's, gradient by gradient.
///
/// A batch is processed one sequence pair at a time (every layer works on one sequence; the
/// pairs run side by side on the cores); the
/// loss is the mean over every counted target of the batch, as PyTorch's would be on the
/// padded batch, so each sequence's gradient is scaled by 1 / (the batch's count).
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/layers/transformer.hpp"
#include "attn/ops/loss.hpp"
#include "attn/ops/masks.hpp"

#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace attn {

/// The sizes and choices of a Seq2Seq model.
struct Seq2SeqConfig {
  Index vocab = 0;    ///< V, including the padding id and the begin token
  Index d_model = 0;  ///< E
  Index heads = 1;    ///< H, dividing E
  Index d_ff = 0;     ///< the feed-forward width
  Index layers = 1;   ///< encoder layers = decoder layers
  NormPlacement norm = NormPlacement::post;
  bool tied = false;   ///< the generator's weight is tgt_embed
  int pad_id = 0;      ///< the padding token: masked as a key, ignored as a target
  Index max_len = 64;  ///< the longest sequence (the positional table's length)
  /// The embeddings' initial standard deviation. 1 is nn.Embedding's default; the chapter uses
  /// 1/sqrt(E), so that the scaled embedding sqrt(E) x has entries of variance 1, like the
  /// position vectors it is added to (with 1 it is sqrt(E) times larger and, measured with
  /// PyTorch, the reversal model does not learn at all in 600 steps).
  double embedding_std = 1.0;
};

template <Real T>
struct Seq2SeqOf {
  using Scalar = T;
  MatrixOf<T> src_embed;                       ///< [V x E]
  MatrixOf<T> tgt_embed;                       ///< [V x E]
  std::vector<EncoderLayerOf<T>> encoder;      ///< encoder.layers.N
  std::optional<LayerNormOf<T>> encoder_norm;  ///< encoder.norm (pre-norm only)
  std::vector<DecoderLayerOf<T>> decoder;      ///< decoder.layers.N
  std::optional<LayerNormOf<T>> decoder_norm;  ///< decoder.norm (pre-norm only)
  LinearOf<T> generator;  ///< weight [V x E] (empty when tied: tgt_embed is used), bias [1 x V]
  bool tied = false;
  int pad_id = 0;
  MatrixOf<T> positions;  ///< [max_len x E] sinusoidal table: a buffer, not a parameter

  Index vocab() const { return src_embed.rows(); }
  Index d_model() const { return src_embed.cols(); }
  Index max_len() const { return positions.rows(); }
  /// The generator's weight: its own, or tgt_embed when tied. [V x E]
  const MatrixOf<T>& output_weight() const { return tied ? tgt_embed : generator.weight; }
};
using Seq2Seq = Seq2SeqOf<float>;
using Seq2SeqD = Seq2SeqOf<double>;

/// A fresh model as PyTorch would initialise its modules (embeddings N(0, 1), layers as
/// encoder_layer_init / decoder_layer_init, the generator as nn.Linear). Throws
/// std::invalid_argument naming the size that does not fit (vocab >= 2, heads dividing d_model,
/// max_len >= 1, pad_id in the vocabulary, ...), and, before drawing anything, for sizes whose
/// parameters the machine cannot hold or an Index cannot count (core/memory.hpp).
Seq2Seq seq2seq_init(Rng& rng, const Seq2SeqConfig& config);

/// Everything one forward pass on a sequence pair computed, for the backward pass and for the
/// figures (the attention maps are in the layer caches).
template <Real T>
struct Seq2SeqCacheOf {
  AllowedMask src_allowed;    ///< [n_s x n_s] source padding
  AllowedMask tgt_allowed;    ///< [n_t x n_t] causal and target padding
  AllowedMask cross_allowed;  ///< [n_t x n_s] source padding
  std::vector<EncoderLayerCacheOf<T>> encoder;
  MatrixOf<T> encoder_norm_in;  ///< pre-norm: the last encoder layer's output [n_s x E]
  LayerNormCache encoder_norm;
  MatrixOf<T> memory;  ///< [n_s x E]
  std::vector<DecoderLayerCacheOf<T>> decoder;
  MatrixOf<T> decoder_norm_in;  ///< pre-norm: the last decoder layer's output [n_t x E]
  LayerNormCache decoder_norm;
  MatrixOf<T> decoder_out;  ///< the generator's input [n_t x E]
  MatrixOf<T> logits;       ///< [n_t x V]
};
using Seq2SeqCache = Seq2SeqCacheOf<float>;

/// One sequence pair: src [n_s] and tgt_in [n_t] token ids -> logits [n_t x V] (also in the
/// cache). Throws std::invalid_argument for an id outside the vocabulary or a sequence longer
/// than max_len. The attention runs the tiled path unless `need` asks the cache to keep every
/// head's weights (multi_head.hpp); the logits agree to rounding either way.
template <Real T>
MatrixOf<T> seq2seq_forward(const Seq2SeqOf<T>& model, std::span<const int> src,
                            std::span<const int> tgt_in, Seq2SeqCacheOf<T>* cache = nullptr,
                            NeedWeights need = NeedWeights::no);

/// The backward pass of one pair from its cache, given d_logits [n_t x V]: accumulates every
/// parameter's gradient into grads (zeros_like(model) before the first pair). Throws
/// std::invalid_argument, before accumulating anything, when grads is not shaped like the model
/// or shares memory with it or d_logits (check_grads_like).
template <Real T>
void seq2seq_backward(const Seq2SeqOf<T>& model, std::span<const int> src,
                      std::span<const int> tgt_in, const Seq2SeqCacheOf<T>& cache,
                      const InView<T>& d_logits, Seq2SeqOf<T>& grads);

/// A batch of pairs, [B x n] each, padded with the model's pad_id.
struct Seq2SeqBatch {
  TokenIds src;      ///< [B x n_s]
  TokenIds tgt_in;   ///< [B x n_t], begins with the begin token (teacher forcing)
  TokenIds tgt_out;  ///< [B x n_t], tgt_in shifted left: what each position must predict
};

/// What one training step's forward and backward computed.
template <Real T>
struct Seq2SeqStepOf {
  T loss = 0;                       ///< the mean cross-entropy over the batch's counted targets
  Index count = 0;                  ///< the counted (non-pad) targets
  Index correct = 0;                ///< of those, how many the argmax of the logits predicts
  std::vector<MatrixOf<T>> logits;  ///< per pair [n_t x V], when asked for
};
using Seq2SeqStep = Seq2SeqStepOf<float>;

/// The loss of a batch and, when grads is not null, its gradient accumulated into *grads:
/// every pair forward, cross_entropy with the model's pad_id ignored and `label_smoothing`,
/// summed and divided by the batch's count, backward. `keep_logits` fills the result's logits.
/// The pairs run side by side on `threads` OpenMP threads (0: default_threads()), their
/// gradients summed in an order the batch fixes (sequence_shards.hpp): the same bits for any
/// number of threads. Throws std::invalid_argument for a malformed batch, grads not shaped like
/// the model or sharing its memory (`&model`), or a negative `threads`; *grads is untouched when
/// it throws.
template <Real T>
Seq2SeqStepOf<T> seq2seq_loss(const Seq2SeqOf<T>& model, const Seq2SeqBatch& batch,
                              double label_smoothing, std::type_identity_t<Seq2SeqOf<T>>* grads,
                              bool keep_logits = false, int threads = 0);

/// Greedy decoding of every source row of `src` [B x n_s]: the target starts as `bos`, and
/// `steps` times the argmax of the logits' last row (the first, on a tie) is appended and fed
/// back in. Each step runs the whole forward again (no cache of keys and values: the course's
/// sequences are short). The sources run side by side on `threads` OpenMP threads (0:
/// default_threads()); each is decoded by one thread alone, so the tokens do not depend on the
/// count. Returns the decoded tokens [B x steps], `bos` not included. Throws
/// std::invalid_argument unless 1 <= steps <= max_len, bos is in the vocabulary and
/// threads >= 0, or for a source the forward refuses.
TokenIds seq2seq_greedy(const Seq2Seq& model, const TokenIds& src, int bos, Index steps,
                        int threads = 0);

/// Every parameter in PyTorch's named_parameters() order (see train_step.py's keys.txt).
template <typename L, typename F>
requires IsA<L, Seq2SeqOf>
void for_each_parameter(L& model, const std::string& prefix, F&& f) {
  f(prefix + "src_embed.weight", model.src_embed, Index{0});
  f(prefix + "tgt_embed.weight", model.tgt_embed, Index{0});
  for (std::size_t l = 0; l < model.encoder.size(); ++l) {
    for_each_parameter(model.encoder[l], prefix + "encoder.layers." + std::to_string(l) + ".", f);
  }
  if (model.encoder_norm) for_each_parameter(*model.encoder_norm, prefix + "encoder.norm.", f);
  for (std::size_t l = 0; l < model.decoder.size(); ++l) {
    for_each_parameter(model.decoder[l], prefix + "decoder.layers." + std::to_string(l) + ".", f);
  }
  if (model.decoder_norm) for_each_parameter(*model.decoder_norm, prefix + "decoder.norm.", f);
  if (!model.tied) f(prefix + "generator.weight", model.generator.weight, Index{0});
  if (model.generator.has_bias()) f(prefix + "generator.bias", model.generator.bias, Index{0});
}

/// The same model in another precision (the positional table recomputed in it).
template <Real U, Real T>
Seq2SeqOf<U> cast(const Seq2SeqOf<T>& m) {
  Seq2SeqOf<U> out;
  out.src_embed = m.src_embed.template cast<U>();
  out.tgt_embed = m.tgt_embed.template cast<U>();
  for (const auto& l : m.encoder) out.encoder.push_back(cast<U>(l));
  for (const auto& l : m.decoder) out.decoder.push_back(cast<U>(l));
  if (m.encoder_norm) out.encoder_norm = cast<U>(*m.encoder_norm);
  if (m.decoder_norm) out.decoder_norm = cast<U>(*m.decoder_norm);
  out.generator = cast<U>(m.generator);
  out.tied = m.tied;
  out.pad_id = m.pad_id;
  out.positions = m.positions.template cast<U>();
  return out;
}

}  // namespace attn
