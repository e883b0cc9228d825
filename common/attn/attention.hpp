/// @file
/// Scaled dot-product attention in the row convention (tokens are rows), the paper's and
/// PyTorch's form, which the library speaks from chapter 04 on:
///
///   weights = softmax(Q K^T / sqrt(d_k))   [n_q x n_k], every row sums to 1
///   out     = weights V                    [n_q x d_v]
///
///   Q [n_q x d_k]   one query per row
///   K [n_k x d_k]   one key per row
///   V [n_k x d_v]   one value per row (d_v may differ from d_k)
///
/// It is the transpose of the notes' column form (column_attention.hpp): out = Y^T and
/// weights = A'^T when both scale alike; chapter 03 checks this to the last bit.
///
/// Speed (DESIGN.md): two GEMMs through Eigen with noalias(), the scores scaled and
/// softmaxed one contiguous row at a time in the weights buffer itself (no temporaries), and
/// attention_into() for callers that run many times and want to keep that buffer.
///
/// Inputs are Eigen::Ref views, so a head's column block of a bigger projection
/// (Q.middleCols(h * d_k, d_k), chapter 06) is used in place, without a copy.
///
/// Masks (chapter 05): `allowed(i, j) == true` means query i may attend to key j; blocked
/// scores become -inf after the scaling and before the softmax, so their weights are exactly 0,
/// and a query with no allowed key gets zero weights and a zero output, never NaN (recent
/// PyTorch's scaled_dot_product_attention does the same; Debian's PyTorch 1.13 returns NaN
/// there, which scripts/fixtures/masked_attention.py records).
///
/// NaN and infinity in the inputs propagate as the arithmetic dictates, never silently turned
/// into ordinary numbers (tested in test_masked_attention.cpp, NonFiniteInputs...):
///   - a NaN in query row i makes row i of the weights and the output NaN, and nothing else;
///   - a NaN in key row j that query i may attend to makes row i NaN; if key j is blocked for
///     query i, its score is replaced by -inf before the softmax and row i is untouched;
///   - a NaN in value row j reaches every output row, blocked or not, because 0 * NaN = NaN in
///     the product weights V (PyTorch behaves the same): garbage in a padded token is loud;
///   - an infinite score (from inf in Q or K, or a finite product above 3.4e38) makes its row
///     NaN (inf - inf in the softmax); finite scores of any size, up to +-3.4e38, are safe.
///
/// Outputs never alias inputs: attention_into() and attention_weights_into() throw
/// std::invalid_argument when an output's memory overlaps Q, K or V (the weights would be
/// written over a Q still being read, or a resize would free it), before writing anything.
///
/// The cache (attn.hpp): AttentionResult keeps the weights, which is all the backward pass
/// needs besides Q, K, V and the scale; there is no separate cache type.
#pragma once

#include "attn/batch.hpp"
#include "attn/masks.hpp"
#include "attn/matrix.hpp"

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
struct AttentionResult {
  Matrix out;      ///< [n_q x d_v]
  Matrix weights;  ///< [n_q x n_k], row i = query i's weights over the keys
};

/// out = softmax(mask(Q K^T * scale)) V. Throws std::invalid_argument naming the shapes when
/// they do not fit: Q [n_q x d_k], K [n_k x d_k], V [n_k x d_v], allowed [n_q x n_k],
/// n_k >= 1, d_k >= 1; and for a scale that is not finite.
AttentionResult attention(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                          const AttentionOptions& opts = {});

/// The weights alone, softmax(mask(Q K^T * scale)), into W [n_q x n_k] (resized only when its
/// shape changes). Multi-head attention uses it to write each head's W V straight into that
/// head's columns of the concatenation. Checks as attention(), less V, and throws
/// std::invalid_argument when W shares memory with Q or K.
void attention_weights_into(const MatrixView& Q, const MatrixView& K, Matrix& W,
                            const AttentionOptions& opts = {});

/// The same, into `result`: its two matrices are resized only when their shapes change, so a
/// caller that keeps one AttentionResult across calls allocates the [n_q x n_k] buffer once.
/// Throws std::invalid_argument when result.out or result.weights shares memory with Q, K or V
/// (`attention_into(r.out, r.out, r.out, r)`), leaving `result` untouched.
void attention_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                    AttentionResult& result, const AttentionOptions& opts = {});

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
