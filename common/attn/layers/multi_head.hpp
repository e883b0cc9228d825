/// @file
/// Multi-head attention, as torch.nn.MultiheadAttention computes it (batch_first):
///
///     Q = query W_Q^T + b_Q,  K = key W_K^T + b_K,  V = value W_V^T + b_V     [n x d_model]
///     head_h = softmax(mask(Q_h K_h^T / sqrt(d_k))) V_h                        [n_q x d_k]
///     out    = Concat(head_1 .. head_H) W_O^T + b_O                           [n_q x d_model]
///
/// with d_k = d_model / H and Q_h the columns [h d_k, (h+1) d_k) of Q.
///
/// **Heads are column blocks.** W_Q is [d_model x d_model] in PyTorch's [out x in] layout,
/// and its rows [h d_k, (h+1) d_k) are head h's own [d_k x d_model] projection W_Q^h, so
/// one big product makes every head's queries at once: Q_h = query (W_Q^h)^T. In PyTorch the
/// split is a reshape, [B, n, d_model] -> [B, n, H, d_k] -> [B, H, n, d_k]; here it is
/// Q.middleCols(h d_k, d_k), a view of the same memory. Each head writes its output straight
/// into its own columns of the concatenation, so splitting and concatenating copy nothing.
///
/// Masks are shared by every head (PyTorch broadcasts [B, n_q, n_k] to [B, H, n_q, n_k]);
/// true = may attend (masks.hpp). A query with no allowed key gets zeros from its heads,
/// written as zeros whatever the values hold (attention.hpp), so its output is b_O exactly
/// (PyTorch 1.13 returns NaN there). Non-finite inputs otherwise follow attention.hpp per head.
///
/// The cache (attn.hpp): MultiHeadResult holds Q, K, V, every head's weights and the
/// concatenation (or, without need_weights, each head's log-sum-exp and the mask), which is what
/// the backward pass needs besides the inputs and the parameters.
#pragma once

#include "attn/core/batch.hpp"
#include "attn/core/random.hpp"
#include "attn/layers/linear.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include <optional>
#include <vector>

namespace attn {

template <Real T>
struct MultiHeadAttentionOf {
  using Scalar = T;
  Index heads = 1;
  LinearOf<T> q_proj, k_proj,
      v_proj;            ///< each [d_model x d_model]; head h = rows [h d_k, (h+1) d_k)
  LinearOf<T> out_proj;  ///< W_O [d_model x d_model], applied to the concatenation

  Index d_model() const { return q_proj.out_features(); }
  Index d_k() const { return d_model() / heads; }
  /// 4 d_model^2 (+ 4 d_model with biases), whatever the number of heads.
  Index parameter_count() const {
    return q_proj.parameter_count() + k_proj.parameter_count() + v_proj.parameter_count() +
           out_proj.parameter_count();
  }
};
using MultiHeadAttention = MultiHeadAttentionOf<float>;
using MultiHeadAttentionD = MultiHeadAttentionOf<double>;

/// nn.MultiheadAttention's initialisation: the stacked [3 d_model x d_model] input projection
/// ~ xavier_uniform (bound sqrt(6 / (4 d_model))), its bias 0; out_proj's weight as nn.Linear
/// (bound 1/sqrt(d_model)), its bias 0. Throws std::invalid_argument unless d_model >= 1,
/// heads >= 1 and heads divides d_model (check_head_sizes), and, before drawing anything, for a
/// d_model whose four [d_model x d_model] projections the machine cannot hold (core/memory.hpp).
MultiHeadAttention multi_head_init(Rng& rng, Index d_model, Index heads, bool bias = true);

/// Loads nn.MultiheadAttention's parameters: in_proj_weight [3E x E] (rows: W_Q, W_K, W_V in
/// that order), in_proj_bias [1 x 3E] (empty: no bias), out_proj.weight [E x E],
/// out_proj.bias [1 x E] (empty: no bias).
MultiHeadAttention multi_head_from_pytorch(const Matrix& in_proj_weight,
                                           const RowVector& in_proj_bias,
                                           const Matrix& out_proj_weight,
                                           const RowVector& out_proj_bias, Index heads);

/// The inverse of multi_head_from_pytorch: W_Q, W_K, W_V stacked as PyTorch's in_proj_weight
/// [3E x E], and their biases as in_proj_bias [1 x 3E] (empty without biases).
Matrix in_proj_weight(const MultiHeadAttention& mha);
RowVector in_proj_bias(const MultiHeadAttention& mha);

/// Throws std::invalid_argument unless the four projections are [d_model x d_model] with
/// matching biases and heads divides d_model.
template <Real T>
void check_multi_head(const MultiHeadAttentionOf<T>& mha, const char* where);

/// Throws std::invalid_argument from `where` unless d_model >= 1, heads >= 1 (each named
/// when it is not) and heads divides d_model. Every function that makes a multi-head layer
/// from sizes (multi_head_init, encoder_layer_init, decoder_layer_init) checks with it.
void check_head_sizes(Index d_model, Index heads, const char* where);

/// Whether a model's forward (seq2seq.hpp, attention_only.hpp) keeps every head's weights in its
/// cache, for a chapter that draws or scores them (MultiHeadOptions::need_weights below).
enum class NeedWeights : bool { no = false, yes = true };

struct MultiHeadOptions {
  /// [n_q x n_k], true = query i may attend to key j, the same for every head. Unset: every key.
  std::optional<MaskView> allowed{};
  /// Keep every head's [n_q x n_k] weights in the result, as nn.MultiheadAttention's
  /// need_weights=True (its default, and this one's): the plain path (attention.hpp), for
  /// callers that draw or score the weights. false, as nn.TransformerEncoderLayer calls it: the
  /// tiled path (tiled_attention.hpp), memory linear in n and faster; the result then holds
  /// each head's log-sum-exp instead (`lse`), and `weights` is empty. Except when the scores
  /// fit in one tile (n_q and n_k up to 128): there is nothing to tile, and the plain path,
  /// weights kept (64 KiB at most), does the same work with less bookkeeping. The outputs agree
  /// to rounding, and the backward pass takes either cache.
  bool need_weights = true;
};

/// Everything one forward pass makes, named as the chapter prints it. It is also the layer's
/// cache: multi_head_backward reads Q, K, V, the weights and concat from it.
template <Real T>
struct MultiHeadResultOf {
  MatrixOf<T> Q, K, V;               ///< [n_q x d_model], [n_k x d_model], [n_k x d_model]
  std::vector<MatrixOf<T>> weights;  ///< one [n_q x n_k] per head; empty unless need_weights
  /// [n_q x H]: column h is head h's log-sum-exp per query (tiled_attention.hpp); empty when
  /// need_weights (the weights are the cache then).
  MatrixOf<T> lse;
  /// [n_q x n_k]: a copy of the mask, which the tiled backward needs to recompute the weights
  /// (1 byte an entry, a 32nd of 8 heads' weights); empty without a mask or with need_weights.
  AllowedMask allowed;
  MatrixOf<T> concat;  ///< [n_q x d_model], head h in columns [h d_k, (h+1) d_k)
  MatrixOf<T> out;     ///< [n_q x d_model] = concat W_O^T + b_O

  /// The mean of the heads' weights, [n_q x n_k]: what nn.MultiheadAttention returns with
  /// need_weights=True (average_attn_weights=True). Throws std::invalid_argument when the
  /// forward ran without need_weights.
  MatrixOf<T> average_weights() const {
    require(!weights.empty(), "average_weights",
            "the forward kept no weights: run it with need_weights = true");
    MatrixOf<T> mean = MatrixOf<T>::Zero(weights.front().rows(), weights.front().cols());
    for (const MatrixOf<T>& w : weights) mean += w;  // [n_q x n_k]
    return mean / static_cast<T>(weights.size());
  }
};
using MultiHeadResult = MultiHeadResultOf<float>;
using MultiHeadResultD = MultiHeadResultOf<double>;

/// One sequence: query [n_q x d_model], key and value [n_k x d_model], opts.allowed [n_q x n_k].
template <Real T>
MultiHeadResultOf<T> multi_head_forward(const MultiHeadAttentionOf<T>& mha, const InView<T>& query,
                                        const InView<T>& key, const InView<T>& value,
                                        const MultiHeadOptions& opts = {});

/// dL/d(query), dL/d(key), dL/d(value) of one multi-head call. In self-attention the three are
/// one matrix x, and its gradient is their sum (x reached the output three ways).
template <Real T>
struct MultiHeadInputGradsOf {
  MatrixOf<T> d_query;  ///< [n_q x d_model]
  MatrixOf<T> d_key;    ///< [n_k x d_model]
  MatrixOf<T> d_value;  ///< [n_k x d_model]
};

/// The backward pass, given d_out [n_q x d_model] and the forward's result (its cache), the
/// same inputs and options:
///
///     d_concat = d_out W_O                      (and W_O's, b_O's gradients)    [n_q x d_model]
///     head h:  attention_backward on Q_h, K_h, V_h with its weights and the columns of d_concat
///              -> the columns h of dQ, dK, dV                                   [n x d_model]
///     d_query = dQ W_Q,  d_key = dK W_K,  d_value = dV W_V    (and their weights' gradients)
///
/// Splitting into heads and concatenating were views of columns, so their backward is writing
/// each head's gradient into its own columns: nothing to add up. Parameter gradients are
/// accumulated into grads (zeros_like(mha) before the first call). Throws
/// std::invalid_argument (check_grads_like) unless grads is shaped like mha and shares no
/// memory with it (`multi_head_backward(mha, ..., mha)`), query, key, value or d_out.
template <Real T>
MultiHeadInputGradsOf<T> multi_head_backward(const MultiHeadAttentionOf<T>& mha,
                                             const InView<T>& query, const InView<T>& key,
                                             const InView<T>& value,
                                             const MultiHeadResultOf<T>& cache,
                                             const InView<T>& d_out,
                                             MultiHeadAttentionOf<T>& grads);

struct MultiHeadBatchOptions {
  /// [B, n_q, n_k] (one mask per element) or [1, n_q, n_k] (shared). Unset: every key.
  std::optional<BatchMaskView> allowed{};
};

struct MultiHeadBatchResult {
  Batch out;      ///< [B, n_q, d_model]
  Batch weights;  ///< [B * H, n_q, n_k]: element b H + h, PyTorch's [B, H, n_q, n_k] layout
  Index heads = 1;

  /// Head h of batch element b, [n_q x n_k].
  auto head_weights(Index b, Index h) const { return weights[b * heads + h]; }
  /// The mean over heads, [B, n_q, n_k].
  Batch average_weights() const;
};

/// A batch: query [B, n_q, d_model], key and value [B, n_k, d_model], opts.allowed
/// [B, n_q, n_k] or [1, n_q, n_k] (shared) or unset.
MultiHeadBatchResult multi_head_forward(const MultiHeadAttention& mha, const Batch& query,
                                        const Batch& key, const Batch& value,
                                        const MultiHeadBatchOptions& opts = {});

}  // namespace attn
