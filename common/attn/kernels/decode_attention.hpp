/// @file
/// Decoding one token at a time with a KV cache (chapter 11): the keys and values of every
/// earlier token are kept, so each new token computes only its own row of causal attention.
///
/// A decoder generating token p needs out_p = softmax(q_p K^T * scale) V over the keys and
/// values of positions 0 .. p (causal attention's row p). Without a cache, each new token
/// recomputes the whole prefix; with one, the step is
///
///     append k_p, v_p to the cache                   [1 x g d_k] each
///     out_p = attend(q_p, the cache's keys and values) [1 x h d_k]
///
/// O(n d) work per token instead of O(n^2 d), for cache memory 2 n g d_k numbers per layer.
///
/// **Heads.** q holds h query heads side by side, [1 x h d_k], head a in columns
/// [a d_k, (a + 1) d_k); the cache holds g key/value heads ([capacity x g d_k] each, g <= h,
/// h a multiple of g). Query head a reads kv head a / (h / g): the h / g query heads of a group
/// are adjacent, as Llama's repeat_kv (torch.repeat_interleave) lays them out. g = h is
/// multi-head attention, 1 < g < h grouped-query attention (GQA), g = 1 multi-query (MQA); the
/// cache shrinks by h / g.
///
/// **Sliding window.** With window W >= 1 the query at position p reads positions
/// max(0, p - W + 1) .. p, the last W keys counting its own (sliding_window_mask(n, W) in
/// masks.hpp, Mistral's window). A rolling cache of capacity W (row_cache.hpp) holds exactly
/// those: its memory stays W rows however long the sequence.
///
/// **Cached equals uncached, bit for bit.** causal_attention_rows() computes every row of the
/// same (windowed) causal attention without a cache, by the same row kernel the decode step
/// runs, so decoding token by token gives the same bits as the full computation, across a
/// rolling window's wrap-around too. A GEMM would not: Eigen's row i of Q K^T rounds
/// differently from the product of Q's row i alone (~1e-6 relative). The kernel, per head:
///
///     s_j = dot(q_a, k_j) * scale       for the held keys in position order; each dot product
///                                       runs in fixed lanes over the d_k features, so its bits
///                                       do not depend on where row j sits in memory
///     p   = softmax(s)                  softmax_inplace (softmax.hpp): the max, a vectorised
///                                       exp and a sum in a fixed order of the positions
///     out_a = sum_j p_j v_j             one key at a time in position order (an axpy over the
///                                       d_k features), so splitting the keys into the ring's
///                                       two segments cannot change a rounding
///
/// It equals attention() (ops/attention.hpp) with causal_mask or sliding_window_mask to a few
/// float ulps (different summation orders), and in double to ~1e-15 relative.
///
/// **Which query.** A decode step appends the token's own key and value first, then attends:
/// the query is at position next_position() - 1 and reads every key the cache holds, which
/// must be exactly the keys that position reads (all of them without a window; the last W with
/// one). A cache holding fewer (a rolling cache that dropped keys the query needs) or more (a
/// plain cache past the window) is refused rather than read silently wrong.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/kernels/row_cache.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>

namespace attn {

/// One layer's KV cache: the keys and values of the tokens seen so far, g kv heads side by
/// side in each row. Make one with make_kv_cache(); append each token's key and value rows,
/// then decode its query with decode_attention_into().
template <Real T>
struct KvCacheOf {
  RowCacheOf<T> keys;    ///< [capacity x kv_heads d_k]: row of position p = that token's keys
  RowCacheOf<T> values;  ///< [capacity x kv_heads d_k]: its values, the same positions
  Index kv_heads = 0;    ///< g
  Index d_k = 0;         ///< the width of one head (values are as wide as keys)

  /// Rows of room; W for a rolling cache.
  Index capacity() const { return keys.capacity(); }
  /// Whether the oldest row is overwritten once full (a sliding window's cache).
  bool rolling() const { return keys.rolling(); }
  /// Tokens held: min(tokens appended, capacity).
  Index size() const { return keys.size(); }
  /// The position of the next token appended: how many were ever appended.
  Index next_position() const { return keys.next_position(); }
  /// The position of the oldest token held (0 until a rolling cache wraps).
  Index first_position() const { return keys.first_position(); }
  /// The bytes of both caches, 2 capacity g d_k sizeof(T), whatever is held.
  std::size_t bytes() const { return keys.bytes() + values.bytes(); }

  /// Appends the keys and values [m x g d_k] of the next m tokens (m > 1: a prefill).
  /// Throws std::invalid_argument, before changing anything, for another width, for k_rows
  /// and v_rows of different shapes, and when a plain cache has no room for them.
  void append(const InView<T>& k_rows, const InView<T>& v_rows) {
    require(k_rows.rows() == v_rows.rows() && k_rows.cols() == v_rows.cols(), "KvCache::append",
            [&] {
              return "k_rows are " + shape_str(k_rows) + " but v_rows are " + shape_str(v_rows) +
                     ": one key row and one value row per token";
            });
    require(k_rows.cols() == kv_heads * d_k && keys.width() == kv_heads * d_k, "KvCache::append",
            [&] {
              return "rows are " + shape_str(k_rows) + " but the cache holds " +
                     std::to_string(kv_heads) + " kv heads of d_k = " + std::to_string(d_k) +
                     ": rows of width " + std::to_string(keys.width());
            });
    // Both caches are in the same state, so values.append() accepts what keys.append() did:
    // the plain cache's room is checked (and named) once, before either changes.
    require(keys.next_position() == values.next_position() && keys.size() == values.size(),
            "KvCache::append", "the keys and values hold different positions");
    keys.append(k_rows);
    values.append(v_rows);
  }

  /// Empties the cache for a new sequence: positions start at 0 again, the memory stays.
  void clear() {
    keys.clear();
    values.clear();
  }
};
using KvCache = KvCacheOf<float>;
using KvCacheD = KvCacheOf<double>;

/// A cache for `kv_heads` heads of width d_k. window = 0: plain, room for `capacity` tokens
/// (the longest sequence; appending past it throws). window = W >= 1: rolling, holding the last
/// W tokens; `capacity` must then be W, the memory actually allocated (a rolling cache larger
/// than the window would hold keys the query must not read; a smaller one would have dropped
/// keys it must). Throws std::invalid_argument for sizes < 1, window < 0, capacity != window
/// when window >= 1, and, before allocating, for a cache the machine cannot hold.
template <Real T>
KvCacheOf<T> make_kv_cache(Index capacity, Index kv_heads, Index d_k, Index window = 0);

/// How a decode step (and the uncached reference) attends.
struct DecodeOptions {
  /// h, the query heads: q is [1 x h d_k], a multiple of the cache's kv heads g.
  Index heads = 1;
  /// The factor on q k^T. Unset: 1/sqrt(d_k), as in attention().
  std::optional<float> scale{};
  /// 0: every earlier key (causal attention). W >= 1: the last W keys, counting the query's
  /// own (sliding_window_mask(n, W)).
  Index window = 0;
};

/// out [1 x h d_k] = the attention of q [1 x h d_k] (the newest token, at position
/// next_position() - 1) over every key and value the cache holds, each query head reading its
/// kv head. Throws std::invalid_argument, before writing, for: an empty cache ("a decode step
/// before prefill"), heads < 1, window < 0, h not a multiple of the cache's g, q or out not
/// [1 x h d_k], a scale that is not finite, a cache whose keys and values disagree, a cache that
/// does not hold exactly the keys the query reads (more than the window; or keys dropped that it
/// needs: a wrapped rolling cache with window 0 or another W), and out sharing memory with q or
/// the cache.
template <Real T>
void decode_attention_into(const InView<T>& q, const KvCacheOf<T>& cache,
                           std::type_identity_t<Eigen::Ref<MatrixOf<T>>> out,
                           const DecodeOptions& opts);

/// The same, returning out [1 x h d_k].
template <Real T>
MatrixOf<T> decode_attention(const InView<T>& q, const KvCacheOf<T>& cache,
                             const DecodeOptions& opts);

/// The uncached reference: causal (windowed) attention of every row, out [n x h d_k], row i
/// computed by decode's row kernel over the keys and values of positions max(0, i - W + 1) .. i
/// (0 .. i without a window). Q [n x h d_k], K and V [n x g d_k]; d_k = Q's columns / h.
/// Throws std::invalid_argument naming the shapes: n < 1, heads < 1, window < 0, Q's columns
/// not a multiple of h, K's not a multiple of d_k, h not a multiple of g, K, V or Q with other
/// rows, V not K's shape, a scale that is not finite.
Matrix causal_attention_rows(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                             const DecodeOptions& opts);
MatrixD causal_attention_rows(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                              const DecodeOptions& opts);

}  // namespace attn
