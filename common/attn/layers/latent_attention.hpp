/// @file
/// Multi-head latent attention, MLA (DeepSeek-AI 2024, "DeepSeek-V2", arXiv 2405.04434,
/// section 2.1): multi-head attention whose keys and values are made from one small latent
/// vector per token, so that decoding caches that latent instead of every head's K and V.
/// Forward only, in two forms that compute the same numbers: the naive one, which forms every
/// head's K and V as the paper writes them, and the absorbed one, which never does.
///
/// ## The layer
///
/// For x [n x d_model], one token per row, h heads:
///
///     c         = x W_DKV^T                   [n x d_c]      the latent, cached
///     k^R       = RoPE(x W_KR^T)              [n x d_rope]   one RoPE key for all heads, cached
///     K_h^C     = c W_UK_h^T                  [n x d_nope]   head h's content keys
///     V_h       = c W_UV_h^T                  [n x d_v]      head h's values
///     [q_h^C, q_h^R] = x W_Q_h^T              [n x (d_nope + d_rope)]
///     q_h       = [q_h^C, RoPE(q_h^R)]
///     S_h(i, j) = (q_h^C(i) . K_h^C(j) + RoPE(q_h^R)(i) . k^R(j)) / sqrt(d_nope + d_rope)
///     out       = concat_h(softmax(mask(S_h)) V_h) W_O^T              [n x d_model]
///
/// so head h is ordinary attention with query q_h and key k_h = [K_h^C, k^R], both
/// d_nope + d_rope wide. Why the RoPE part is separate ("decoupled"): RoPE rotates a key by its
/// position, R(j) K_h^C(j), and that rotation sits between q and W_UK_h, so W_UK_h could not be
/// moved to the query side (below). MLA therefore leaves the content part unrotated and adds a
/// few rotated features, d_rope of them, with a key shared by every head.
///
/// ## What is cached
///
/// Only c and k^R: d_c + d_rope numbers per token and layer, whatever the number of heads,
/// against 2 h d_k for multi-head attention and 2 g d_k for grouped-query attention with g
/// key/value groups. DeepSeek-V2 (paper's Table 1; d_c = 4 d_h = 512, d_rope = d_h / 2 = 64,
/// h = 128 heads of d_h = 128): 576 numbers against MHA's 32768, as much as GQA with 2.25 groups.
///
/// ## The absorbed form (what makes decoding cheap)
///
/// A dot product with K_h^C(j) = W_UK_h c_j can be grouped the other way:
///
///     q_h^C . (W_UK_h c_j) = (q_h^C W_UK_h) . c_j,      q_lat_h = q_h^C W_UK_h  [1 x d_c]
///
/// so each query is taken into the latent space once, per head, and scored against the cached
/// c directly; and the values are summed in the latent space before W_UV_h is applied,
///
///     out_h = sum_j p_j (W_UV_h c_j) = (sum_j p_j c_j) W_UV_h^T                  [1 x d_v]
///
/// so neither K_h^C nor V_h is ever formed. A decoding step over m cached tokens then costs,
/// per head, m (d_c + d_rope) multiplications for the scores and m d_c for the sum, instead of
/// rebuilding the m keys and values from c (m (d_nope + d_v) d_c). (W_UV_h could be folded
/// into W_O in the same way; this file keeps it separate, so the heads' outputs stay visible.)
/// The two forms associate their products differently and agree to rounding; the naive one is
/// what a prefill of a long prompt uses (one big GEMM per matrix), the absorbed one what a
/// decoding step uses.
///
/// Biases, when the layer has them, survive the absorption exactly: k_up's bias b_UK_h adds
/// q_h^C . b_UK_h to every score of query i, the same for all j, which the softmax removes (it
/// is shift-invariant), so the absorbed form drops it; v_up's bias is added after the sum,
/// since the weights sum to 1. DeepSeek-V2 has no biases in attention (bias = false).
///
/// ## Layout of the parameters
///
/// Each projection is a LinearOf<T> with PyTorch's [out x in] weight (linear.hpp), and each
/// head is a block of rows, as in multi_head.hpp:
///   - q_proj  [h (d_nope + d_rope) x d_model]: head h's rows start at h (d_nope + d_rope), its
///     d_nope content rows (W_Q_h^C) first, then its d_rope RoPE rows (W_Q_h^R); this is
///     DeepSeek's q_proj viewed as [h, d_nope + d_rope] and split;
///   - kv_down W_DKV [d_c x d_model] and k_rope W_KR [d_rope x d_model] (DeepSeek's checkpoint
///     stacks the two as kv_a_proj_with_mqa [(d_c + d_rope) x d_model]);
///   - k_up W_UK [h d_nope x d_c], head h = rows [h d_nope, (h + 1) d_nope), and v_up W_UV
///     [h d_v x d_c], head h = rows [h d_v, (h + 1) d_v) (DeepSeek's kv_b_proj interleaves
///     them per head: head h's d_nope key rows, then its d_v value rows);
///   - out_proj W_O [d_model x h d_v], applied to the concatenation of the heads.
///
/// ## What is left out
///
/// - No query compression: DeepSeek-V2 makes q from a second latent (W_DQ, an RMSNorm, W_UQ,
///   d'_c = 1536) to save activation memory in training; DeepSeek-V2-Lite projects q directly,
///   as here. It does not touch the cache.
/// - No RMSNorm on c: DeepSeek-V2 normalises the latent (kv_a_layernorm) before W_UK and W_UV;
///   here c goes to them as it is. The cache and the absorption are unchanged by it (the norm
///   would be applied to c before caching it).
/// - Plain RoPE (rope.hpp) with the table's base, not DeepSeek-V2's YaRN extension for long
///   contexts, and the softmax scale 1/sqrt(d_nope + d_rope) with no YaRN factor on it.
/// - No backward pass: chapter 11 decodes, it does not train.
///
/// Non-finite inputs get no special treatment here (attention.hpp describes the naive form's).
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/row_cache.hpp"
#include "attn/layers/linear.hpp"
#include "attn/ops/rope.hpp"

#include <cstddef>
#include <vector>

namespace attn {

template <Real T>
struct LatentAttentionOf {
  using Scalar = T;
  Index heads = 1;       ///< h
  Index d_nope = 0;      ///< the features of a head's query and key that are not rotated
  Index d_rope = 0;      ///< the rotated features: a head's q^R and the shared k^R (even)
  Index d_v = 0;         ///< a head's value width
  Index d_c = 0;         ///< the latent's width: what the cache keeps besides k^R
  LinearOf<T> q_proj;    ///< [h (d_nope + d_rope) x d_model]; head h: d_nope rows, then d_rope
  LinearOf<T> kv_down;   ///< W_DKV [d_c x d_model]
  LinearOf<T> k_up;      ///< W_UK [h d_nope x d_c]; head h = rows [h d_nope, (h + 1) d_nope)
  LinearOf<T> v_up;      ///< W_UV [h d_v x d_c]; head h = rows [h d_v, (h + 1) d_v)
  LinearOf<T> k_rope;    ///< W_KR [d_rope x d_model], shared by every head
  LinearOf<T> out_proj;  ///< W_O [d_model x h d_v]

  Index d_model() const { return q_proj.in_features(); }
  /// A head's query and key width, d_nope + d_rope: the softmax scale is 1/sqrt of it.
  Index d_qk() const { return d_nope + d_rope; }
  /// What the cache keeps per token (and layer): c and k^R, d_c + d_rope numbers.
  Index cache_numbers_per_token() const { return d_c + d_rope; }
  /// The six projections' weights (and biases), as PyTorch's parameter count says.
  Index parameter_count() const {
    return q_proj.parameter_count() + kv_down.parameter_count() + k_up.parameter_count() +
           v_up.parameter_count() + k_rope.parameter_count() + out_proj.parameter_count();
  }
};
using LatentAttention = LatentAttentionOf<float>;
using LatentAttentionD = LatentAttentionOf<double>;

/// The sizes of a latent attention layer, by name: `{.d_model = 16, .heads = 2, .d_nope = 4,
/// .d_rope = 4, .d_v = 4, .d_c = 6}` (six integers in a row would be easy to swap).
struct LatentAttentionSizes {
  Index d_model = 0;
  Index heads = 1;
  Index d_nope = 0;
  Index d_rope = 0;  ///< even: RoPE turns pairs
  Index d_v = 0;
  Index d_c = 0;
};

/// Fresh parameters: every projection as nn.Linear initialises it (linear_init: U(-1/sqrt(in),
/// 1/sqrt(in)), weight then bias), drawn in the struct's order q_proj, kv_down, k_up, v_up,
/// k_rope, out_proj.
/// Throws std::invalid_argument unless every size is >= 1 (each named) and d_rope is even,
/// and, before drawing anything, for parameters the machine cannot hold (core/memory.hpp).
LatentAttention latent_attention_init(Rng& rng, const LatentAttentionSizes& sizes,
                                      bool bias = false);

/// Throws std::invalid_argument from `where` unless the sizes are valid (as
/// latent_attention_init) and the six projections have the shapes above, biases included.
template <Real T>
void check_latent_attention(const LatentAttentionOf<T>& layer, const char* where);

/// The same layer in another precision, entry by entry (float -> double is exact), as
/// parameters.hpp's cast<U>() does for the other layers: `cast<double>(mla)`.
template <Real U, Real T>
LatentAttentionOf<U> cast(const LatentAttentionOf<T>& l) {
  const auto linear = [](const LinearOf<T>& p) {
    return LinearOf<U>{p.weight.template cast<U>(), p.bias.template cast<U>()};
  };
  return {l.heads,        l.d_nope,         l.d_rope,          l.d_v,
          l.d_c,          linear(l.q_proj), linear(l.kv_down), linear(l.k_up),
          linear(l.v_up), linear(l.k_rope), linear(l.out_proj)};
}

struct LatentAttentionOptions {
  /// Query i reads keys 0 .. i (a decoder). false: every key. Decoding is causal by nature and
  /// refuses false.
  bool causal = true;
  /// The RoPE table for q^R and k^R: required, its dim must be d_rope, and it must cover every
  /// position used (0 .. n - 1, or the decoded token's). The caller keeps it alive.
  const RopeTable* rope = nullptr;
  /// Which features of q^R and k^R form RoPE's pairs (rope.hpp).
  RopeLayout layout = RopeLayout::interleaved;
};

/// What a forward pass makes, named as the header writes it. The rows of x are the tokens at
/// positions 0 .. n - 1.
template <Real T>
struct LatentAttentionResultOf {
  MatrixOf<T> c;       ///< [n x d_c]: the latent, what the cache would keep
  MatrixOf<T> k_rope;  ///< [n x d_rope]: k^R, rotated at each row's position (cached too)
  /// [n x h (d_nope + d_rope)]: every head's query [q_h^C, RoPE(q_h^R)], in q_proj's layout.
  MatrixOf<T> Q;
  /// Naive form only: [n x h (d_nope + d_rope)], head h's keys [K_h^C, k^R] in the columns
  /// of its query, and [n x h d_v], head h's values in columns [h d_v, (h + 1) d_v).
  MatrixOf<T> K, V;
  /// Absorbed form only: [n x h d_c], q_lat_h = q_h^C W_UK_h in columns [h d_c, (h + 1) d_c).
  MatrixOf<T> q_latent;
  std::vector<MatrixOf<T>> weights;  ///< one [n x n] per head (zeros above the diagonal if causal)
  MatrixOf<T> concat;                ///< [n x h d_v]: head h's output in columns [h d_v, ...)
  MatrixOf<T> out;                   ///< [n x d_model] = concat W_O^T (+ b_O)
};
using LatentAttentionResult = LatentAttentionResultOf<float>;
using LatentAttentionResultD = LatentAttentionResultOf<double>;

/// The naive form: K_h = [c W_UK_h^T, k^R] and V_h = c W_UV_h^T are formed for every head,
/// then each head is attention() with its scale 1/sqrt(d_nope + d_rope), the way a prefill
/// runs MLA: a few large matrix products. x [n x d_model]. Throws std::invalid_argument naming
/// the shapes for a malformed layer, an x of another width or no rows, no RoPE table, a
/// table whose dim is not d_rope or which has fewer than n positions.
template <Real T>
LatentAttentionResultOf<T> latent_attention_forward(const LatentAttentionOf<T>& layer,
                                                    const InView<T>& x,
                                                    const LatentAttentionOptions& opts);

/// The absorbed form on a whole sequence: for each token its q_lat_h, then scores against c
/// and k^R, the weighted sum of c, and W_UV_h last (K and V stay empty in the result). It runs
/// latent_attention_decode's arithmetic one row at a time (each token projected on its own,
/// each query over its keys 0 .. i, or over all n without causal), so row i of its output is
/// the very bits that decoding the same tokens one by one returns. The same checks as
/// latent_attention_forward.
template <Real T>
LatentAttentionResultOf<T> latent_attention_absorbed(const LatentAttentionOf<T>& layer,
                                                     const InView<T>& x,
                                                     const LatentAttentionOptions& opts);

/// The decoding cache of one layer: per token, its latent c and its rotated RoPE key k^R,
/// nothing per head. Plain caches (row_cache.hpp): decoding past the capacity throws.
template <Real T>
struct LatentCacheOf {
  RowCacheOf<T> latent;    ///< [capacity x d_c]
  RowCacheOf<T> rope_key;  ///< [capacity x d_rope], each row rotated at its token's position

  LatentCacheOf() = default;
  /// Room for `capacity` tokens of a layer with these d_c and d_rope. Throws
  /// std::invalid_argument as RowCacheOf's constructor (sizes < 1, or too large).
  LatentCacheOf(Index capacity, Index d_c, Index d_rope)
      : latent(capacity, d_c), rope_key(capacity, d_rope) {}

  /// Tokens held (the next token's position).
  Index size() const { return latent.size(); }
  Index capacity() const { return latent.capacity(); }
  /// (d_c + d_rope) sizeof(T): the bytes one token adds, per layer.
  std::size_t bytes_per_token() const {
    return static_cast<std::size_t>(latent.width() + rope_key.width()) * sizeof(T);
  }
  /// The bytes allocated: capacity (d_c + d_rope) sizeof(T).
  std::size_t bytes() const { return latent.bytes() + rope_key.bytes(); }
  /// Empties both for a new sequence; the memory stays.
  void clear() {
    latent.clear();
    rope_key.clear();
  }
};
using LatentCache = LatentCacheOf<float>;
using LatentCacheD = LatentCacheOf<double>;

/// One decoding step, in the absorbed form: x_row [1 x d_model] is the token at position p =
/// cache.size(). Its c and its k^R (rotated at p) are appended to the cache, its queries are
/// rotated at p and taken into the latent space, and it attends over the p + 1 tokens the
/// cache then holds. Returns its output row [1 x d_model]. Throws std::invalid_argument,
/// before changing the cache, for a malformed layer, an x_row that is not [1 x d_model], no
/// RoPE table or one of another dim or too short for position p, opts.causal = false, a cache
/// whose widths are not d_c and d_rope, whose two parts disagree or are rolling, or that is
/// full ("decoding past the cache's capacity").
template <Real T>
MatrixOf<T> latent_attention_decode(const LatentAttentionOf<T>& layer, const InView<T>& x_row,
                                    LatentCacheOf<T>& cache, const LatentAttentionOptions& opts);

}  // namespace attn
