/// @file
/// A decoder made of attention and nothing else, forward and backward: the model the training
/// chapter teaches the induction-heads task (Olsson et al. 2022, "In-context learning and
/// induction heads"): a random segment, then the same segment again, and the model must predict
/// each token of the second copy from the first.
///
///     x      = tok_embed[ids] sqrt(E) + pos_embed[:n]          [n x E]
///     x      = x + MHA_l(LN_l(x), causal)   for l = 0 .. L-1    [n x E]  pre-norm residual
///     logits = LN_final(x) W_unembed^T + b_unembed              [n x V]
///     loss   = cross_entropy(logits, targets, ignore id), the mean over the counted targets
///
/// **No feed-forward network.** Every layer is one causal multi-head self-attention on a
/// residual stream, so everything the model computes is attention patterns and the linear maps
/// around them: with two layers that is enough for an induction head (a "previous token" head
/// in layer 0 writes, into each position, which token came before it; a head in layer 1 then
/// looks for the earlier position whose previous token is the current token, and copies the
/// token found there). The per-head weights the chapter draws and scores are in the cache
/// (AttentionOnlyCacheOf::layers[l].attn.weights).
///
/// **Learned positions.** pos_embed [T x E] is a parameter (state_dict key "pos_embed"), drawn
/// N(0, 1), not the sinusoidal table of Seq2Seq: T is the longest sequence the model can read.
///
/// **Why embedding_std = 1/sqrt(E).** The paper's recipe scales the token vectors by sqrt(E)
/// (section 3.4 of "Attention Is All You Need"). With nn.Embedding's default N(0, 1) table,
/// tok_embed[id] sqrt(E) has entries of variance E, sqrt(E) times the standard deviation they
/// should have and of the position vectors beside them: the positions, which a previous-token
/// head needs, become a small part of the sum, and every LayerNorm sees a stream ruled by the
/// token. The PyTorch prototype of this chapter did not learn the task that way. Drawn
/// N(0, 1/E) instead, tok_embed[id] sqrt(E) has unit variance, the same as pos_embed, and token
/// and position reach the first layer on equal terms; that prototype reached 99.8%. Only the
/// product of the factor and the table's scale reaches the forward pass (1/sqrt(E) sqrt(E) = 1);
/// the factor is kept because it is the paper's, and because it scales the table's gradient.
///
/// **Parameter names** are those of the PyTorch module the replay script builds:
///
///     pos_embed                 [T x E]    nn.Parameter, registered on the model itself
///     tok_embed.weight          [V x E]    nn.Embedding
///     layers.N.norm.weight/bias [E]        nn.LayerNorm (gamma 1, beta 0)
///     layers.N.attn.in_proj_weight [3E x E], in_proj_bias [3E], out_proj.weight [E x E],
///                    out_proj.bias [E]     nn.MultiheadAttention(E, H, batch_first=True)
///     norm.weight/bias          [E]        the final nn.LayerNorm
///     unembed.weight [V x E], unembed.bias [V]   nn.Linear(E, V)
///
/// listed in that order by for_each_parameter, which is PyTorch's named_parameters() order:
/// a module yields its own parameters before its submodules', so pos_embed, a Parameter of the
/// model itself, comes first whatever line of __init__ registered it, and tok_embed.weight
/// (a parameter of the submodule tok_embed) second.
///
/// A batch is processed one sequence at a time (every layer works on one sequence), and the
/// loss is the mean over every counted target of the batch, as Seq2Seq's is: each sequence's
/// cross-entropy is summed and divided by the batch's count, so its gradient is scaled by
/// 1 / (the batch's count).
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/ops/loss.hpp"

#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace attn {

/// The sizes of an attention-only decoder.
struct AttentionOnlyConfig {
  Index vocab = 0;    ///< V
  Index d_model = 0;  ///< E
  Index heads = 1;    ///< H, dividing E
  Index layers = 2;   ///< L: two are what an induction head needs (the file comment)
  Index context = 0;  ///< T: the longest sequence, pos_embed's rows
  /// The standard deviation of tok_embed's entries; unset = 1/sqrt(E), so that
  /// tok_embed[id] sqrt(E) has unit variance (the file comment says why not nn.Embedding's 1).
  std::optional<double> embedding_std{};
};

/// One layer: LayerNorm, then causal self-attention, added to the residual stream.
template <Real T>
struct AttentionOnlyLayerOf {
  using Scalar = T;
  LayerNormOf<T> norm;           ///< layers.N.norm: gamma, beta [1 x E]
  MultiHeadAttentionOf<T> attn;  ///< layers.N.attn: four [E x E] projections with biases
};

template <Real T>
struct AttentionOnlyOf {
  using Scalar = T;
  MatrixOf<T> tok_embed;                        ///< [V x E]
  MatrixOf<T> pos_embed;                        ///< [T x E], learned
  std::vector<AttentionOnlyLayerOf<T>> layers;  ///< layers.N
  LayerNormOf<T> norm;                          ///< the final LayerNorm, [1 x E] each
  LinearOf<T> unembed;                          ///< weight [V x E], bias [1 x V]

  Index vocab() const { return tok_embed.rows(); }
  Index d_model() const { return tok_embed.cols(); }
  Index context() const { return pos_embed.rows(); }
};
using AttentionOnly = AttentionOnlyOf<float>;
using AttentionOnlyD = AttentionOnlyOf<double>;

/// A fresh model: tok_embed ~ N(0, embedding_std^2), pos_embed ~ N(0, 1), every LayerNorm as
/// layer_norm_init, every attention as multi_head_init (nn.MultiheadAttention's), unembed as
/// linear_init (nn.Linear's), drawn in that order. Throws std::invalid_argument naming the
/// size that does not fit: vocab >= 1, d_model, heads, layers, context >= 1, heads dividing
/// d_model, embedding_std finite and > 0; and, before drawing anything, sizes whose parameters
/// need more memory than the machine has or more elements than an Index can count:
/// "attention_only_init: d_model 1099511627776 (vocab 7, layers 2, context 6) needs ... of
/// parameters; this machine has 23.4 GiB" (core/memory.hpp).
AttentionOnly attention_only_init(Rng& rng, const AttentionOnlyConfig& config);

/// What one layer's forward computed, for its backward and for the figures.
template <Real T>
struct AttentionOnlyLayerCacheOf {
  MatrixOf<T> x;              ///< the residual stream entering the layer [n x E]
  LayerNormCache norm;        ///< LN_l's per-row mean and rstd
  MatrixOf<T> normed;         ///< LN_l(x) [n x E]: the attention's query, key and value
  MultiHeadResultOf<T> attn;  ///< Q, K, V, every head's weights [n x n] (causal), concat, out
};

/// Everything one forward pass on a sequence computed.
template <Real T>
struct AttentionOnlyCacheOf {
  std::vector<AttentionOnlyLayerCacheOf<T>> layers;  ///< one per layer
  MatrixOf<T> norm_in;  ///< the residual stream after the last layer [n x E]
  LayerNormCache norm;  ///< the final LayerNorm's statistics
  MatrixOf<T> normed;   ///< LN_final(norm_in) [n x E]: the unembedding's input
  MatrixOf<T> logits;   ///< [n x V]
};
using AttentionOnlyCache = AttentionOnlyCacheOf<float>;
using AttentionOnlyCacheD = AttentionOnlyCacheOf<double>;

/// One sequence of ids [n], 1 <= n <= T -> logits [n x V] (also in the cache when given): row i
/// is the prediction of the token after position i, made from positions 0..i only. Throws
/// std::invalid_argument for an empty sequence, one longer than the context T, or an id
/// outside the vocabulary (its position named).
/// The attention runs the tiled path unless `need` asks the cache to keep every head's weights.
template <Real T>
MatrixOf<T> attention_only_forward(const AttentionOnlyOf<T>& model, std::span<const int> ids,
                                   AttentionOnlyCacheOf<T>* cache = nullptr,
                                   NeedWeights need = NeedWeights::no);

/// The backward pass of one sequence from its forward's cache, given d_logits [n x V]:
/// accumulates every parameter's gradient into grads (zeros_like(model) before the first
/// sequence). pos_embed's rows n..T-1 were not read, and get nothing. Throws
/// std::invalid_argument, before accumulating anything, for shapes that do not fit or when
/// grads shares memory with the model or d_logits (check_grads_like).
template <Real T>
void attention_only_backward(const AttentionOnlyOf<T>& model, std::span<const int> ids,
                             const AttentionOnlyCacheOf<T>& cache, const InView<T>& d_logits,
                             AttentionOnlyOf<T>& grads);

/// A batch of sequences of one length n: what the model reads and what each position must
/// predict. For the induction task the targets of the first copy of the segment are the
/// ignore id (nothing there can be predicted) and those of the second copy are the next token.
struct AttentionOnlyBatch {
  TokenIds inputs;     ///< [B x n], ids in [0, V)
  TokenIds targets;    ///< [B x n], ids in [0, V) or ignore_id
  int ignore_id = -1;  ///< a target equal to it counts for nothing (no loss, no gradient)
};

/// What one training step's forward and backward computed.
template <Real T>
struct AttentionOnlyStepOf {
  T loss = 0;         ///< the mean cross-entropy over the batch's counted targets (0 if none)
  Index count = 0;    ///< the counted targets (not ignore_id)
  Index correct = 0;  ///< of those, how many the argmax of the logits predicts
  std::vector<MatrixOf<T>> logits;  ///< per sequence [n x V], when asked for
};
using AttentionOnlyStep = AttentionOnlyStepOf<float>;
using AttentionOnlyStepD = AttentionOnlyStepOf<double>;

/// The loss of a batch and, when grads is not null, its gradient accumulated into *grads:
/// every sequence forward, cross_entropy with the batch's ignore_id (Reduction::sum), summed
/// and divided by the batch's count, backward. `keep_logits` fills the result's logits.
/// The sequences run side by side on `threads` OpenMP threads (0: default_threads()), their
/// gradients summed in an order the batch fixes (sequence_shards.hpp): the same bits for any
/// number of threads. Throws std::invalid_argument unless inputs and targets have one shape,
/// grads is shaped like the model and has memory of its own (`attention_only_loss(model, batch,
/// &model)` is refused) and threads >= 0; *grads is untouched when it throws.
template <Real T>
AttentionOnlyStepOf<T> attention_only_loss(const AttentionOnlyOf<T>& model,
                                           const AttentionOnlyBatch& batch,
                                           std::type_identity_t<AttentionOnlyOf<T>>* grads,
                                           bool keep_logits = false, int threads = 0);

/// One layer: norm.weight, norm.bias, then attn.* as nn.MultiheadAttention names them.
template <typename L, typename F>
requires IsA<L, AttentionOnlyLayerOf>
void for_each_parameter(L& layer, const std::string& prefix, F&& f) {
  for_each_parameter(layer.norm, prefix + "norm.", f);
  for_each_parameter(layer.attn, prefix + "attn.", f);
}

/// Every parameter in PyTorch's named_parameters() order: the model's own pos_embed first,
/// then its submodules in registration order (the file comment).
template <typename L, typename F>
requires IsA<L, AttentionOnlyOf>
void for_each_parameter(L& model, const std::string& prefix, F&& f) {
  f(prefix + "pos_embed", model.pos_embed, Index{0});
  f(prefix + "tok_embed.weight", model.tok_embed, Index{0});
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    for_each_parameter(model.layers[l], prefix + "layers." + std::to_string(l) + ".", f);
  }
  for_each_parameter(model.norm, prefix + "norm.", f);
  for_each_parameter(model.unembed, prefix + "unembed.", f);
}

/// The same layer in another precision.
template <Real U, Real T>
AttentionOnlyLayerOf<U> cast(const AttentionOnlyLayerOf<T>& l) {
  return {cast<U>(l.norm), cast<U>(l.attn)};
}

/// The same model in another precision (float -> double is exact).
template <Real U, Real T>
AttentionOnlyOf<U> cast(const AttentionOnlyOf<T>& m) {
  AttentionOnlyOf<U> out;
  out.tok_embed = m.tok_embed.template cast<U>();
  out.pos_embed = m.pos_embed.template cast<U>();
  for (const auto& l : m.layers) out.layers.push_back(cast<U>(l));
  out.norm = cast<U>(m.norm);
  out.unembed = cast<U>(m.unembed);
  return out;
}

}  // namespace attn
