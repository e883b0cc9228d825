/// @file
/// Tiled attention with an online softmax, in FlashAttention-2's loop order (Dao, 2023): the
/// same out = softmax(mask(Q K^T * scale)) V as attention.hpp, without ever holding the
/// [n_q x n_k] weights. Memory is linear in n; the arithmetic stays in tiles that fit in cache.
///
/// Forward, for each tile of B_q query rows (the rows of one tile belong to one thread):
///
///     m = -inf, l = 0, O = 0                          [B_q], [B_q], [B_q x d_v]
///     for each tile of B_k keys (K_j [B_k x d_k], V_j [B_k x d_v]):
///       S     = Q_i K_j^T * scale, masked               [B_q x B_k]
///       m_new = max(m, rowmax(S))
///       P     = exp(S - m_new)                          [B_q x B_k], blocked entries exactly 0
///       l     = l exp(m - m_new) + rowsum(P)
///       O     = O exp(m - m_new) + P V_j                 unnormalised, rescaled as m grows
///       m     = m_new
///     out_i = O / l, and L_i = m + log l                 L: the row's log-sum-exp, kept
///
/// Backward (FlashAttention's, from L instead of the weights): with D = rowsum(d_out * out),
///   P = exp(S - L), dV += P^T dO, dP = dO V^T, dS = P * (dP - D), dQ += scale dS K,
///   dK += scale dS^T Q, every tile recomputed. It equals attention_backward() to rounding.
///
/// Masks. `causal` blocks key j for query i when j > i (PyTorch's is_causal: the top-left
/// triangle, also for n_q != n_k) without a mask in memory; `allowed` is any [n_q x n_k]
/// mask (masks.hpp). Both may be given; a key is then allowed when both allow it.
///
/// Sliding window (Mistral's; chapter 11). `window` = W >= 1, with `causal`, also blocks the
/// keys W or more positions back: query i reads key j iff
///
///     i - W < j <= i                                  W keys counting its own, min(i + 1, W)
///
/// exactly sliding_window_mask(n, W) of masks.hpp, again without a mask in memory (and combined
/// with `allowed` as causal is). It keeps causal's top-left alignment for n_q != n_k: query i and
/// key i are the same position, so with n_q > n_k the queries i >= n_k + W - 1 read no key, and
/// a chunk of queries that continues a sequence (positions p, p + 1, ...: a decoding step's
/// bottom-right alignment) needs its mask in `allowed` instead. W >= n_q blocks nothing causal
/// does not (i - W < 0 <= j): it IS causal, the same tiles and the same bytes. window = 0 (the
/// default) is no window; W < 0, or W >= 1 without causal, is refused.
///
/// Each (query tile, key tile) pair is classified once, from its corners for causal and the
/// window: wholly blocked tiles are skipped (above the causal diagonal, older than every query's
/// window, padded keys), wholly allowed ones run without a mask test, and only mixed tiles test
/// element by element. With a window the computed tiles are a band about W wide along the
/// diagonal: the work grows as n W instead of causal's n^2 / 2. Blocked keys get weight exactly 0;
/// a query with no allowed key gets a zero output row and L = -inf, as attention() gives a zero
/// row. Non-finite scores follow attention.hpp: a NaN or +inf allowed score, or allowed scores that
/// are all -inf, make the row NaN. One difference from the plain path: a NaN or an infinity in
/// value row j reaches the queries whose tiles include key j (0 * inf = NaN in P V_j, as
/// attention() gives every query), but not those for which j's whole tile is skipped, which never
/// read V_j. There is no finite blocked_score here: -1e9 is chapter 05's lesson on the plain path.
///
/// Threads: OpenMP over query tiles (forward) and over groups of key tiles (backward: at most 8
/// groups, each with a copy of dQ of its own, added in group order at the end; dK and dV rows
/// belong to one group). Every output sums its tiles in an order the call fixes, so the result is
/// the same bytes for any number of threads. Scratch tiles are per thread and kept between calls:
/// no allocation on the hot path once a thread has seen the largest tile.
///
/// Arithmetic: every product of a tile, forward and backward, runs on a register-blocked kernel
/// (tile_kernel.hpp: 6 x 16 floats of the output in registers with AVX2, 12 x 32 with AVX-512). The
/// forward keeps its score tile transposed, keys as rows and queries as vector lanes, so the online
/// softmax's max, exps and sums run across queries without a reduction inside a vector.
///
/// Memory beyond the inputs and outputs, linear in n: in the forward, per thread, a score
/// tile, Q_i^T and an accumulator, B_q (B_k + d_k + d_v) numbers (128 KiB with the default
/// tiles at d = 64); per call, L and V copied into the kernel's panels (the backward: K, and
/// D = rowsum(d_out * out), n_q numbers), n_k d numbers, the size of that input.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include <optional>
#include <span>
#include <vector>

namespace attn {

/// A column of n floats (or doubles) that may be strided: L of one head, a column of an
/// [n_q x H] row-major matrix that holds every head's L.
template <Real T>
using LseRef = Eigen::Ref<Eigen::Matrix<T, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>>;
template <Real T>
using LseView = Eigen::Ref<const Eigen::Matrix<T, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>>;

/// One options struct for the tiled forward and its backward: pass the backward the same.
struct TiledAttentionOptions {
  /// The factor on Q K^T. Unset: 1/sqrt(d_k), as in attention().
  std::optional<float> scale{};
  /// [n_q x n_k], true = query i may attend to key j. Unset: every key.
  std::optional<MaskView> allowed{};
  /// Block key j for query i when j > i, without a mask in memory (combined with `allowed`).
  bool causal = false;
  /// Sliding window W (needs `causal`): query i reads keys i - W < j <= i only, W keys counting
  /// itself (the file comment). 0: no window; W >= n_q: the same as causal alone.
  Index window = 0;
  /// Rows of Q per tile (B_q) and rows of K and V per tile (B_k); any value >= 1, larger than
  /// n included (one tile). 128 x 128 was among the fastest of the tile sweep (chapter 10,
  /// benchmarks/bench_efficient.cpp) at d = 64, with and without a causal mask, on the
  /// course's machine: large enough to spread each tile's fixed costs (packing Q_i^T, the
  /// rescaling of O) over much arithmetic, small enough that the causal diagonal's partly
  /// masked tiles waste little and a 128 x 128 score tile (64 KiB) stays in the L2 cache.
  Index query_tile = 128;
  Index key_tile = 128;
  /// The order in which each query tile visits the key tiles (a permutation of 0 .. T_k - 1,
  /// T_k = ceil(n_k / key_tile)). Empty: 0, 1, 2, ... The result is the same to rounding in any
  /// order (the online softmax's merge is order-independent); chapter 10 and the tests use it
  /// to show so. Causal tiles that are skipped are skipped in any order. The span must stay
  /// valid for the call.
  std::span<const Index> key_tile_order{};
  /// OpenMP threads for this call; 0: OpenMP's default (OMP_NUM_THREADS or every core).
  int threads = 0;
};

/// The tiled forward's output and its cache: the backward needs out and the log-sum-exp L
/// (with Q, K, V and the options, which the caller has), O(n) instead of the [n_q x n_k] weights.
template <Real T>
struct TiledAttentionResultOf {
  MatrixOf<T> out;  ///< [n_q x d_v]
  /// [n_q]: L_i = log sum_j exp(s_ij) over query i's allowed scaled scores; -inf when it has no
  /// allowed key, NaN when its row is NaN.
  Eigen::Matrix<T, Eigen::Dynamic, 1> lse;
};
using TiledAttentionResult = TiledAttentionResultOf<float>;
using TiledAttentionResultD = TiledAttentionResultOf<double>;

/// out = softmax(mask(Q K^T * scale)) V and L, tile by tile. Throws std::invalid_argument naming
/// the shapes: Q [n_q x d_k], K [n_k x d_k], V [n_k x d_v], allowed [n_q x n_k], n_q >= 1,
/// n_k >= 1, d_k >= 1, d_v >= 1; tile sizes < 1; window < 0, or window >= 1 without causal;
/// a key_tile_order that is not a permutation of the key tiles; a scale that is not finite; an
/// output [n_q x d_v] the machine cannot hold.
TiledAttentionResult tiled_attention(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                                     const TiledAttentionOptions& opts = {});
TiledAttentionResultD tiled_attention(const MatrixViewD& Q, const MatrixViewD& K,
                                      const MatrixViewD& V, const TiledAttentionOptions& opts = {});

/// The same, into caller-kept storage: `out` [n_q x d_v] (may be a column block of a bigger
/// matrix: multi-head attention passes a head's columns of the concatenation) and `lse` [n_q]
/// (a column of an [n_q x H] matrix, say). Throws std::invalid_argument, before writing, when
/// they have other shapes, when out or lse shares memory with Q, K or V, or when out and lse
/// share memory with each other (lse in a column of out: each would overwrite the other).
/// A column of the same matrix beside out's columns shares nothing and is accepted.
void tiled_attention_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                          Eigen::Ref<Matrix> out, LseRef<float> lse,
                          const TiledAttentionOptions& opts = {});
void tiled_attention_into(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                          Eigen::Ref<MatrixD> out, LseRef<double> lse,
                          const TiledAttentionOptions& opts = {});

/// dL/dQ, dL/dK, dL/dV from the forward's out and L (FlashAttention's backward, tiles
/// recomputed), given d_out [n_q x d_v] and the forward's options. Equals attention_backward()
/// to rounding; a query with no allowed key (L = -inf) passes nothing back.
AttentionGrads tiled_attention_backward(const MatrixView& Q, const MatrixView& K,
                                        const MatrixView& V, const TiledAttentionResult& forward,
                                        const MatrixView& d_out,
                                        const TiledAttentionOptions& opts = {});
AttentionGradsD tiled_attention_backward(const MatrixViewD& Q, const MatrixViewD& K,
                                         const MatrixViewD& V, const TiledAttentionResultD& forward,
                                         const MatrixViewD& d_out,
                                         const TiledAttentionOptions& opts = {});

/// The same, written (not accumulated) into dQ, dK, dV of Q's, K's and V's shapes, which may be
/// column blocks of bigger matrices (multi-head attention passes each head's columns); `out`
/// and `lse` are the forward's, possibly column blocks too. Throws std::invalid_argument,
/// before writing, on a shape mismatch, when an output shares memory with an input, or when
/// two outputs share memory ("tiled_attention_backward: dQ and dK share memory: ..."; as one
/// matrix, dQ, written last, would overwrite dK).
void tiled_attention_backward_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                                   const MatrixView& out, const LseView<float>& lse,
                                   const MatrixView& d_out, Eigen::Ref<Matrix> dQ,
                                   Eigen::Ref<Matrix> dK, Eigen::Ref<Matrix> dV,
                                   const TiledAttentionOptions& opts = {});
void tiled_attention_backward_into(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                                   const MatrixViewD& out, const LseView<double>& lse,
                                   const MatrixViewD& d_out, Eigen::Ref<MatrixD> dQ,
                                   Eigen::Ref<MatrixD> dK, Eigen::Ref<MatrixD> dV,
                                   const TiledAttentionOptions& opts = {});

/// What the causal flag, the window and the mask make of one (query tile, key tile) pair.
enum class TileKind : char {
  skipped,  ///< wholly blocked: never computed
  mixed,    ///< partly blocked: tested element by element
  full,     ///< wholly allowed: no mask test
};

/// How many tiles of each kind a call has, of the T_q x T_k pairs: what the work is.
struct TileCounts {
  Index total = 0;    ///< T_q T_k
  Index skipped = 0;  ///< wholly blocked: never computed
  Index mixed = 0;    ///< partly blocked: tested element by element
  Index full = 0;     ///< wholly allowed: no mask test
};

/// The kind of every tile pair, T_q x T_k, row = query tile: the map chapter 10 draws.
struct TileMap {
  Index query_tiles = 0, key_tiles = 0;
  std::vector<TileKind> kinds{};  ///< row-major, query tile i, key tile j at i * key_tiles + j
  TileKind operator()(Index i, Index j) const {
    return kinds[static_cast<std::size_t>(i * key_tiles + j)];
  }
  TileCounts counts() const;
};

/// The tile map of a call on n_q queries and n_k keys with these options (tile sizes, causal,
/// window, allowed). Throws std::invalid_argument as tiled_attention() for n < 1, tile sizes
/// < 1, a window < 0 or without causal, or a mask of another shape; and, before allocating, for
/// sizes whose T_q x T_k map the machine cannot hold or an Index cannot count ("count_tiles: n_q
/// 2147483648 and n_k 2147483648 in tiles of 128 x 128 (16777216 x 16777216 tiles) needs 256.0 TiB
/// for the tile map; ..."), n = Index's largest value included.
TileMap tile_map(Index n_q, Index n_k, const TiledAttentionOptions& opts = {});
/// tile_map(n_q, n_k, opts).counts(): chapter 10 prints it, the benchmarks count work with it.
TileCounts count_tiles(Index n_q, Index n_k, const TiledAttentionOptions& opts = {});

}  // namespace attn
