/// @file
/// Grouped-query attention, GQA (Ainslie et al. 2023), as Llama 2 70B, Llama 3 and Mistral use
/// it: h query heads share g key/value heads, a group of G = h / g query heads reading the same
/// K and V. Self-attention on one sequence x [n x d_model], with d_k = d_model / h:
///
///     Q = rope(x W_Q^T + b_Q)      [n x h d_k]     h query heads, rotated (optional)
///     K = rope(x W_K^T + b_K)      [n x g d_k]     g key heads, rotated the same way
///     V =      x W_V^T + b_V       [n x g d_k]     g value heads
///     head_q = softmax(mask(Q_q K_j^T / sqrt(d_k))) V_j,   j = q / G                  [n x d_k]
///     out    = Concat(head_0 .. head_{h-1}) W_O^T + b_O                             [n x d_model]
///
/// Query head q reads kv head j = floor(q / G): heads 0 .. G-1 share kv head 0, the next G kv
/// head 1, and so on. That is PyTorch's K.repeat_interleave(G, dim=heads) (Hugging Face's
/// repeat_kv), so GQA is multi-head attention (multi_head.hpp) whose key and value heads are
/// tied in groups: copying kv head j's rows of W_K, W_V to every query head of its group gives
/// an MHA layer that computes the same output. The two ends of the family:
///   - g = h (G = 1): multi-head attention, every query head with its own K, V;
///   - g = 1 (G = h): multi-query attention, MQA (Shazeer 2019), one K, V for all heads.
///
/// **Why.** In decoding, the keys and values of every past token are kept (the KV cache), and
/// reading them dominates the time per token. Here K and V are [n x g d_k] each instead of
/// [n x d_model]: h / g times smaller, for h / g times fewer bytes read per token. The queries,
/// which are not cached, keep all h heads.
///
/// **Heads are column blocks,** as in multi_head.hpp: Q_q = Q.middleCols(q d_k, d_k) and
/// K_j = K.middleCols(j d_k, d_k), views of one big projection each. Nothing is repeated in
/// memory: query head q's attention simply reads kv head j's columns. In PyTorch the
/// same tensors are [B, n, h, d_k] -> [B, h, n, d_k] for Q and [B, g, n, d_k] for K and V.
///
/// **RoPE** (rope.hpp), when a table is given, rotates every head of Q and of K after the
/// projection, pair i of the token at position m by m theta_i (positions 0 .. n - 1; the table
/// must cover n positions and have table.dim = d_k). V is not rotated.
///
/// **Masks.** causal: query i reads keys j <= i. With a sliding window W (Mistral): keys
/// j in (i - W, i], at most W of them counting itself (sliding_window_mask, masks.hpp); a
/// window needs causal. Every query reads at least its own key, so no row is ever empty.
///
/// **The backward pass.** Query head q's attention backward gives dQ_q, and a dK, dV for kv head
/// j that are its share only: kv head j reached the output through all G query heads of its
/// group, so its gradient is the sum of their G contributions (the backward of
/// repeat_interleave is a sum over each group). RoPE is a rotation, so its backward turns dQ
/// and dK back (rope_backward). x reached the output through three projections: dx is their sum.
#pragma once

#include "attn/core/random.hpp"
#include "attn/layers/linear.hpp"
#include "attn/ops/rope.hpp"

#include <vector>

namespace attn {

template <Real T>
struct GroupedQueryAttentionOf {
  using Scalar = T;
  Index heads = 1;       ///< h, the query heads
  Index kv_heads = 1;    ///< g, the key/value heads; query head q reads kv head q / (h / g)
  LinearOf<T> q_proj;    ///< W_Q [h d_k x d_model]; query head q = rows [q d_k, (q+1) d_k)
  LinearOf<T> k_proj;    ///< W_K [g d_k x d_model]; kv head j = rows [j d_k, (j+1) d_k)
  LinearOf<T> v_proj;    ///< W_V [g d_k x d_model]
  LinearOf<T> out_proj;  ///< W_O [d_model x h d_k], applied to the concatenation

  Index d_model() const { return q_proj.in_features(); }
  Index d_k() const { return d_model() / heads; }
  /// G = h / g: the query heads that share one kv head.
  Index group_size() const { return heads / kv_heads; }
  /// 2 d_model^2 + 2 g d_k d_model (+ 2 d_model + 2 g d_k with biases): W_K and W_V are g / h
  /// of MHA's.
  Index parameter_count() const {
    return q_proj.parameter_count() + k_proj.parameter_count() + v_proj.parameter_count() +
           out_proj.parameter_count();
  }
};
using GroupedQueryAttention = GroupedQueryAttentionOf<float>;
using GroupedQueryAttentionD = GroupedQueryAttentionOf<double>;

/// Throws std::invalid_argument from `where` unless d_model >= 1, heads >= 1 and
/// kv_heads >= 1 (each named when it is not), kv_heads divides heads (every query head
/// needs a kv head, the groups all of one size) and heads divides d_model (d_k = d_model / heads).
void check_grouped_query_sizes(Index d_model, Index heads, Index kv_heads, const char* where);

/// Throws std::invalid_argument from `where` unless the sizes pass check_grouped_query_sizes
/// and the four projections have the shapes above, with biases that match their weights.
template <Real T>
void check_grouped_query(const GroupedQueryAttentionOf<T>& layer, const char* where);

/// Each projection drawn as nn.Linear initialises it (linear.hpp: weight and bias ~
/// U(-1/sqrt(d_model), 1/sqrt(d_model)) for W_Q, W_K, W_V; U(-1/sqrt(h d_k), ...) for W_O),
/// in the order q_proj, k_proj, v_proj, out_proj: what Hugging Face's LlamaAttention gets from
/// its four nn.Linear before any model-wide re-initialisation. No biases by default, as Llama
/// (bias = true gives each projection one, as Qwen2's q, k, v). Throws std::invalid_argument
/// (check_grouped_query_sizes) before drawing anything.
GroupedQueryAttention grouped_query_init(Rng& rng, Index d_model, Index heads, Index kv_heads,
                                         bool bias = false);

struct GroupedQueryOptions {
  /// Query i reads keys j <= i only. false: every key (no mask).
  bool causal = true;
  /// A sliding window W >= 1: query i reads keys j in (i - W, i] (W keys counting itself;
  /// W >= n is plain causal). 0: no window. Needs causal.
  Index window = 0;
  /// Rotate Q and K per head after the projection (rope.hpp); nullptr: no RoPE. table.dim must
  /// be d_k and the table must cover the n positions. The table must outlive the backward
  /// pass: the result keeps this pointer.
  const RopeTable* rope = nullptr;
  RopeLayout rope_layout = RopeLayout::interleaved;
  /// true: the plain path (attention.hpp), every head's [n x n] weights kept in the result, for
  /// figures. false: the tiled path (tiled_attention.hpp), memory linear in n, each head's
  /// log-sum-exp kept instead. As in multi_head.hpp, when the scores fit in one tile
  /// (n <= 128) there is nothing to tile and the plain path runs either way (weights kept, 64 KiB
  /// a head at most). The two agree to rounding, and the backward pass takes either cache.
  bool need_weights = false;
  /// B >= 1 sequences of one length stacked by rows: x [B n x d_model] holds sequence b in rows
  /// [b n, (b + 1) n), each attends within itself only, and its positions restart at 0 (RoPE
  /// rotates row b n + i as position i). The projections, which work row by row, run on all
  /// B n rows at once as one product each: this is how a training batch reaches the layer.
  Index sequences = 1;
  /// The threads of the (sequence, head) loop: 0 for default_threads() when the work is worth
  /// them (core/threads.hpp). The bytes are the same for any count.
  int threads = 0;
};

/// Everything one forward pass makes; also the cache grouped_query_backward reads.
template <Real T>
struct GroupedQueryResultOf {
  // Shapes for one sequence of n rows; B stacked sequences (options.sequences) have B n rows.
  MatrixOf<T> Q;  ///< [n x h d_k], rotated when RoPE is on
  MatrixOf<T> K;  ///< [n x g d_k], rotated when RoPE is on: the KV cache, h / g times MHA's
  MatrixOf<T> V;  ///< [n x g d_k]
  /// B h of [n x n]: sequence b's query head q at b h + q; empty on the tiled path
  std::vector<MatrixOf<T>> weights;
  MatrixOf<T> lse;     ///< [n x h]: column q is head q's log-sum-exp; empty on the plain path
  MatrixOf<T> concat;  ///< [n x h d_k], head q in columns [q d_k, (q+1) d_k)
  MatrixOf<T> out;     ///< [n x d_model] = concat W_O^T + b_O
  /// The options the forward ran with: the backward pass rebuilds the mask of the tiled path
  /// and turns the RoPE rotation back from them.
  GroupedQueryOptions options;
};
using GroupedQueryResult = GroupedQueryResultOf<float>;
using GroupedQueryResultD = GroupedQueryResultOf<double>;

/// The forward pass on x [n x d_model] (or B stacked sequences, options.sequences). Heads, and
/// with B > 1 the sequences too, run side by side on the cores when the work is worth it; each
/// writes only its own block, so the bytes do not depend on the number of threads. Throws
/// std::invalid_argument naming the shapes: sequences < 1 or not dividing x's rows;
/// check_grouped_query; x not d_model wide or without rows; a negative window, or a window
/// without causal; a RoPE table whose dim is not d_k or that covers fewer than n positions.
template <Real T>
GroupedQueryResultOf<T> grouped_query_forward(const GroupedQueryAttentionOf<T>& layer,
                                              const InView<T>& x,
                                              const GroupedQueryOptions& opts = {});

/// The backward pass, given the forward's x and result (its cache) and d_out [n x d_model]:
///
///     d_concat = d_out W_O                 (and W_O's, b_O's gradients)           [n x h d_k]
///     head q:  attention backward on Q_q, K_j, V_j with head q's columns of d_concat
///              -> dQ_q; dK_j += its dK, dV_j += its dV     (j = q / G, G terms per kv head)
///     dQ, dK turned back by RoPE's backward (when the forward rotated)
///     dx = dQ W_Q + dK W_K + dV W_V        (and their weights' gradients)           [n x d_model]
///
/// Returns dx; parameter gradients are accumulated into grads (zeros_like(layer) before the
/// first call). Each kv head's sum is taken in the order of its query heads, so the result is
/// the same bytes for any number of threads. Throws std::invalid_argument when the cache is not
/// a forward's on this x, d_out is not [n x d_model], or (check_grads_like) grads is not shaped
/// like layer or shares memory with it, x or d_out.
template <Real T>
MatrixOf<T> grouped_query_backward(const GroupedQueryAttentionOf<T>& layer, const InView<T>& x,
                                   const GroupedQueryResultOf<T>& cache, const InView<T>& d_out,
                                   GroupedQueryAttentionOf<T>& grads);

}  // namespace attn
