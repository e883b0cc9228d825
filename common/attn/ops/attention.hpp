/// @file
/// Scaled dot-product attention in the row convention (tokens are rows), the paper's and
/// PyTorch's form, which the library speaks from chapter 04 on:
///
///     weights = softmax(Q K^T / sqrt(d_k))   [n_q x n_k], every row sums to 1
///     out     = weights V                    [n_q x d_v]
///
///     Q [n_q x d_k]   one query per row
///     K [n_k x d_k]   one key per row
///     V [n_k x d_v]   one value per row (d_v may differ from d_k)
///
/// It is the transpose of the notes' column form (column_attention.hpp): out = Y^T and
/// weights = A'^T when both scale alike; chapter 03 checks this to the last bit.
///
/// Speed (chapters 03 and 10 measure it): two GEMMs, the scores scaled and softmaxed one
/// contiguous row at a time in the weights buffer itself (no temporaries), and attention_into()
/// for callers that run many times and want to keep that buffer. Up to 256 x 256 weights the
/// products are Eigen's (noalias()). Larger float weights run a block of query rows at a time
/// (about 256 KiB of weights) on the library's GEMM (gemm.hpp), K^T and V packed once: a
/// block's scores, its softmax and, in attention_into(), its share of weights V, while the
/// block is still in cache. With a mask whose blocked scores are -inf, a block multiplies only
/// the keys up to the last one its rows allow (a causal block's: about half the work); the
/// weights past them are written as zeros, and a value row it skips is read anyway when it is
/// not finite (0 * inf must stay NaN, below).
///
/// Inputs are Eigen::Ref views, so a head's column block of a bigger projection
/// (Q.middleCols(h * d_k, d_k), chapter 06) is used in place, without a copy.
///
/// Masks (chapter 05): `allowed(i, j) == true` means query i may attend to key j; blocked
/// scores become blocked_score (-inf by default) after the scaling and before the softmax, so
/// their weights are exactly 0, whatever the scores were (NaN included). A query with no
/// allowed key gets zero weights and a zero output row, the output written as zeros rather
/// than computed as 0 * V, so it is zero whatever Q, K and V hold, inf and NaN included.
/// Recent PyTorch's scaled_dot_product_attention also gives such a row zero weights, but
/// computes 0 * V (NaN when V holds inf or NaN); Debian's PyTorch 1.13 returns NaN for the
/// whole row, which scripts/fixtures/masked_attention.py records.
///
/// Non-finite inputs are never silently turned into ordinary numbers; for a query with at
/// least one allowed key (tested in test_masked_attention.cpp, NonFiniteInputs.*):
///   - a NaN or +inf among its allowed scores makes its row of the weights and of the output
///     NaN (inf - inf in the softmax); a finite dot product beyond +3.4e38 is +inf;
///   - a -inf score gives that key weight exactly 0, like a blocked key; but when every
///     allowed score of the row is -inf the weights are 0 / 0, and the row is NaN, so that it
///     cannot pass for a row the mask emptied (recent PyTorch's SDPA gives zeros there);
///   - hence a NaN or an infinity in query row i makes row i NaN: each of its scores is then
///     +-inf or NaN. An infinity in key row j scores +inf (row NaN) for a query of the same
///     sign in that column, -inf (weight 0) for one of the other sign, NaN for a 0 there;
///   - a NaN or an infinity in value row j reaches the output of every query that attends at
///     all, blocked from j or not: where j's weight is 0 the product weights V has 0 * inf or
///     0 * NaN = NaN (PyTorch alike), where it is positive an infinity stays +-inf. Garbage in
///     a padded token is loud.
/// Finite scores of any size up to +-3.4e38 are safe. With a finite blocked_score (-1e9) a
/// blocked key is only a low score, and the rules above apply to it like to any other: a row
/// with every key blocked is uniform, its output the mean of V.
///
/// Every entry point behaves alike: attention(), attention_into(), the batch (element by
/// element), attention_weights_into() with weighted_values_into() (multi-head attention, each
/// head), and without a mask the column form (column_attention.hpp).
///
/// Outputs never alias inputs, nor each other: attention_into(), attention_weights_into(),
/// weighted_values_into() and attention_backward_into() throw std::invalid_argument when an
/// output's memory overlaps an input (the weights would be written over a Q still being read,
/// or a resize would free it) or another output (dQ and dK as one matrix: one overwrites the
/// other), before writing anything. Column blocks side by side in one matrix share no element
/// and are accepted (core/memory.hpp compares them exactly).
///
/// The [n_q x n_k] weights are what makes this path quadratic: every entry point refuses,
/// before allocating, weights (or an output) of more bytes than the machine's physical memory,
/// naming the sizes ("attention: 4194304 queries over 4194304 keys needs 64.0 TiB for the
/// weights; this machine has 23.4 GiB"). The tiled path (tiled_attention.hpp) needs no weights.
///
/// The cache (attn.hpp): AttentionResult keeps the weights, which is all the backward pass
/// needs besides Q, K, V and the scale; there is no separate cache type.
#pragma once

#include "attn/core/batch.hpp"
#include "attn/core/matrix.hpp"
#include "attn/ops/masks.hpp"

#include <optional>

namespace attn {

struct AttentionOptions {
  /// The factor on Q K^T. Unset: 1/sqrt(d_k), as in the paper and PyTorch. 1: unscaled.
  std::optional<float> scale{};
  /// [n_q x n_k], true = query i may attend to key j (masks.hpp). Unset: every key.
  /// A view of a named mask: `{.allowed = causal}` with `const AllowedMask causal = ...`.
  std::optional<MaskView> allowed{};
  /// What a blocked score becomes before the softmax. -inf (the default) gives blocked keys
  /// weight exactly 0 and a row with no allowed key all zeros; -1e9, as much older code
  /// writes it, gives the same weights on ordinary rows but a uniform row (the mean of V)
  /// when every key is blocked. Chapter 05 shows both.
  float blocked_score = kBlockedScore;
};

/// What attention computes, and its cache: the backward pass needs the weights (with Q, K, V
/// and the scale, which the caller has), so the result is what a training step keeps.
template <Real T>
struct AttentionResultOf {
  MatrixOf<T> out;      ///< [n_q x d_v]
  MatrixOf<T> weights;  ///< [n_q x n_k], row i = query i's weights over the keys
};
using AttentionResult = AttentionResultOf<float>;
using AttentionResultD = AttentionResultOf<double>;

/// out = softmax(mask(Q K^T * scale)) V. Throws std::invalid_argument naming the shapes when
/// they do not fit: Q [n_q x d_k], K [n_k x d_k], V [n_k x d_v], allowed [n_q x n_k],
/// n_k >= 1, d_k >= 1; for a scale that is not finite; and for weights or an output the
/// machine cannot hold (above).
AttentionResult attention(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                          const AttentionOptions& opts = {});
AttentionResultD attention(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                           const AttentionOptions& opts = {});

/// The weights alone, softmax(mask(Q K^T * scale)), into W [n_q x n_k] (resized only when its
/// shape changes). Multi-head attention uses it to write each head's W V straight into that
/// head's columns of the concatenation. Checks as attention(), less V, and throws
/// std::invalid_argument when W shares memory with Q or K. Returns the number of queries the
/// mask left no key (their rows of W are all zeros), for weighted_values_into().
Index attention_weights_into(const MatrixView& Q, const MatrixView& K, Matrix& W,
                             const AttentionOptions& opts = {});
Index attention_weights_into(const MatrixViewD& Q, const MatrixViewD& K, MatrixD& W,
                             const AttentionOptions& opts = {});

/// The scores the softmax above is taken over, mask(Q K^T * scale) [n_q x n_k]: the same
/// product, the same scale and, where the mask blocks, opts.blocked_score (-inf by default),
/// so that with the forward's Q, K and options softmax_rows(attention_scores(Q, K, opts)) is
/// its weights bit for bit (for finite inputs; a row the mask empties included). The forward
/// never keeps the scores (it turns each row into weights in place); this is for a figure that
/// shows each weight beside its score (the course's heat-map twins). Checks as
/// attention_weights_into().
Matrix attention_scores(const MatrixView& Q, const MatrixView& K,
                        const AttentionOptions& opts = {});
MatrixD attention_scores(const MatrixViewD& Q, const MatrixViewD& K,
                         const AttentionOptions& opts = {});

/// out = W V for weights from attention_weights_into(), with the rows of the queries that had
/// no allowed key (W's all-zero rows; `empty_rows` of them, as it returned) written as zeros,
/// so they are zero whatever V holds: the product would make them 0 * inf = NaN. attention_into()
/// does the same; multi-head attention calls this for each head's columns of the concatenation.
/// With empty_rows = 0 it is exactly the product. Throws std::invalid_argument unless V is
/// [cols(W) x d_v] and out [rows(W) x d_v], or when out shares memory with W or V.
void weighted_values_into(const Matrix& W, const MatrixView& V, Eigen::Ref<Matrix> out,
                          Index empty_rows);
void weighted_values_into(const MatrixD& W, const MatrixViewD& V, Eigen::Ref<MatrixD> out,
                          Index empty_rows);

/// The same, into `result`: its two matrices are resized only when their shapes change, so a
/// caller that keeps one AttentionResult across calls allocates the [n_q x n_k] buffer once.
/// Throws std::invalid_argument when result.out or result.weights shares memory with Q, K or V
/// (`attention_into(r.out, r.out, r.out, r)`), leaving `result` untouched.
void attention_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                    AttentionResult& result, const AttentionOptions& opts = {});
void attention_into(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                    AttentionResultD& result, const AttentionOptions& opts = {});

/// The weights into W [n_q x n_k] (resized only when its shape changes) and the output into
/// `out` [n_q x d_v], a view (a head's columns of multi-head attention's concatenation): the
/// numbers of attention_weights_into() followed by weighted_values_into(), in one call, so that
/// large weights are multiplied by V a block at a time while still in cache (above). Returns the
/// queries the mask left no key. Checks as attention(), and throws std::invalid_argument unless
/// out is [n_q x d_v], or when W or out shares memory with Q, K, V or each other.
Index attention_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V, Matrix& W,
                     Eigen::Ref<Matrix> out, const AttentionOptions& opts = {});
Index attention_into(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V, MatrixD& W,
                     Eigen::Ref<MatrixD> out, const AttentionOptions& opts = {});

// ---- The backward pass --------------------------------------------------------------------------

/// dL/dQ, dL/dK, dL/dV of one attention call.
template <Real T>
struct AttentionGradsOf {
  MatrixOf<T> dQ;  ///< [n_q x d_k]
  MatrixOf<T> dK;  ///< [n_k x d_k]
  MatrixOf<T> dV;  ///< [n_k x d_v]
};
using AttentionGrads = AttentionGradsOf<float>;
using AttentionGradsD = AttentionGradsOf<double>;

/// The backward pass of out = P V, P = softmax(S), S = mask(Q K^T * scale), given
/// d_out = dL/d(out) [n_q x d_v] and the forward's weights P (its cache; the same options):
///
///     dV = P^T d_out                          [n_k x d_v]
///     dP = d_out V^T                          [n_q x n_k]
///     dS = P * (dP - rowsum(P * dP))          [n_q x n_k], elementwise; the row sum broadcast
///     dQ = scale dS K                         [n_q x d_k]
///     dK = scale dS^T Q                       [n_k x d_k]
///
/// The third line is the softmax's Jacobian, diag(p) - p p^T for a row p, applied to the row
/// dP without ever forming the [n_k x n_k] Jacobian: O(n_q n_k), not O(n_q n_k^2). Two GEMMs
/// for dP and dV and two for dQ and dK, like the forward's two.
///
/// A blocked key has weight exactly 0, so its dS is exactly 0 and no gradient reaches its
/// score, its key or its value from that query; a query with no allowed key has a zero row
/// of weights, so it passes nothing back at all. Pass the forward's options: with a finite
/// blocked_score (-1e9) a fully blocked row has uniform weights, yet its scores are constants,
/// so the backward zeroes dS wherever opts.allowed blocks.
AttentionGrads attention_backward(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                                  const Matrix& weights, const MatrixView& d_out,
                                  const AttentionOptions& opts = {});
AttentionGradsD attention_backward(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                                   const MatrixD& weights, const MatrixViewD& d_out,
                                   const AttentionOptions& opts = {});

/// The same, written (not accumulated) into dQ, dK, dV of Q's, K's and V's shapes, which may
/// be column blocks of bigger matrices: multi-head attention passes each head's columns.
/// Throws std::invalid_argument, before writing, when an output shares memory with an input or
/// with another output ("attention_backward: dQ and dK share memory: ...").
void attention_backward_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                             const Matrix& weights, const MatrixView& d_out, Eigen::Ref<Matrix> dQ,
                             Eigen::Ref<Matrix> dK, Eigen::Ref<Matrix> dV,
                             const AttentionOptions& opts = {});
void attention_backward_into(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                             const MatrixD& weights, const MatrixViewD& d_out,
                             Eigen::Ref<MatrixD> dQ, Eigen::Ref<MatrixD> dK, Eigen::Ref<MatrixD> dV,
                             const AttentionOptions& opts = {});

// ---- A batch: Q [B, n_q, d_k], K [B, n_k, d_k], V [B, n_k, d_v] ---------------------------------

struct BatchAttentionOptions {
  std::optional<float> scale{};  ///< as AttentionOptions::scale
  /// [B, n_q, n_k] (one mask per batch element, e.g. padding) or [1, n_q, n_k] (one mask
  /// shared by the whole batch, e.g. causal); true = may attend. Unset: every key.
  std::optional<BatchMaskView> allowed{};
  float blocked_score = kBlockedScore;  ///< as AttentionOptions::blocked_score
};

struct BatchAttentionResult {
  Batch out;      ///< [B, n_q, d_v]
  Batch weights;  ///< [B, n_q, n_k]
};

/// attention() for every batch element b on Q[b], K[b], V[b] with mask element b (or 0 when
/// the mask is shared). The batch sizes must agree; shapes are checked as for one element.
BatchAttentionResult attention(const Batch& Q, const Batch& K, const Batch& V,
                               const BatchAttentionOptions& opts = {});

}  // namespace attn
