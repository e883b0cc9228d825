/// @file
/// Which keys each query may attend to.
///
/// **The course's one convention: `allowed(i, j) == true` means query i MAY attend to key j.**
/// A false entry is blocked: its score becomes the fill value (-inf by default) before the
/// softmax, so its weight is exactly 0.
///
/// PyTorch uses both meanings, and learners trip on it:
///   - `F.scaled_dot_product_attention(attn_mask=...)`: True = may attend (the same as here);
///   - `nn.MultiheadAttention(key_padding_mask=..., attn_mask=...)` and
///     `nn.Transformer*(src_key_padding_mask=...)`: True = blocked (the opposite);
///   - a float mask in either is *added* to the scores (0 = keep, -inf = block).
/// The type is named AllowedMask and every builder below returns the allowed entries, so a
/// mask read anywhere in the course reads the same way: true = allowed. Loading a PyTorch
/// `key_padding_mask` means negating it (`!mask`, see padding_mask_from_blocked()).
///
/// Shapes: a mask for n_q queries and n_k keys is [n_q x n_k], rows = queries, like the scores.
///
/// **Masks cannot dangle.** Functions read masks through views (MaskView for one sequence,
/// BatchMaskView for a batch or a stack), and a view can only be made of a mask that has a name:
///
///     const AllowedMask causal = causal_mask(4);
///     attention(Q, K, V, {.allowed = causal});                      // compiles, reads `causal`
///     const AttentionOptions o{.allowed = causal_mask(4)};          // does not compile
///     std::optional<MaskView> m = causal_mask(4);                   // does not compile
///     MaskView row0 = padding_masks(ids)[0];                        // does not compile
///
/// The last three kept a view of a temporary that was destroyed at the end of the statement,
/// and the next call read freed memory (AddressSanitizer: heap-use-after-free; a release build
/// silently ignored the mask). The rvalue constructors are deleted, so the compiler says so.
#pragma once

#include "attn/core/batch.hpp"
#include "attn/core/matrix.hpp"

#include <limits>
#include <span>
#include <string>

namespace attn {

/// true = query i may attend to key j. [n_q x n_k], row-major like the scores it masks.
using AllowedMask = Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A stack of B masks, [B, n_q, n_k]: one per batch element (padding differs per sentence).
using AllowedBatch = BatchOf<bool>;

/// A read-only view of one [n_q x n_k] mask: an AllowedMask with a name, or element b of an
/// AllowedBatch with a name. It holds a pointer, not a copy, so what it views must outlive it
/// (as for std::string_view); a temporary cannot be viewed at all (the file comment).
class MaskView {
 public:
  /// Views `mask`. Implicit, so `{.allowed = mask}` reads as it should.
  MaskView(const AllowedMask& mask) : MaskView(mask.data(), mask.rows(), mask.cols()) {}
  /// A temporary mask is gone at the end of the statement, before the view is read.
  MaskView(AllowedMask&&) = delete;
  MaskView(const AllowedMask&&) = delete;
  /// Element b of `masks`, [n_q x n_k]. Throws std::invalid_argument unless 0 <= b < B.
  MaskView(const AllowedBatch& masks, Index b);
  MaskView(const AllowedBatch&&, Index) = delete;

  Index rows() const { return rows_; }  ///< n_q
  Index cols() const { return cols_; }  ///< n_k
  /// true = query i may attend to key j. Unchecked, like Eigen's operator().
  bool operator()(Index i, Index j) const { return data_[i * cols_ + j]; }
  /// Row i (query i), n_k contiguous entries.
  std::span<const bool> row(Index i) const {
    return {data_ + i * cols_, static_cast<std::size_t>(cols_)};
  }
  /// The mask as a read-only Eigen matrix (no copy), for expressions: `m.matrix().count()`.
  Eigen::Map<const AllowedMask> matrix() const { return {data_, rows_, cols_}; }

 private:
  friend class BatchMaskView;
  MaskView(const bool* data, Index rows, Index cols) : data_(data), rows_(rows), cols_(cols) {}

  const bool* data_;
  Index rows_, cols_;
};

/// A read-only view of a stack of masks for a batch, [B, n_q, n_k] (one mask per element,
/// e.g. padding) or [1, n_q, n_k] (one mask shared by every element, e.g. causal). It views
/// an AllowedBatch with a name, or one AllowedMask with a name as the shared [1, n_q, n_k].
class BatchMaskView {
 public:
  BatchMaskView(const AllowedBatch& masks)
      : data_(masks.data().data()),
        batch_(masks.batch()),
        rows_(masks.rows()),
        cols_(masks.cols()) {}
  BatchMaskView(AllowedBatch&&) = delete;
  BatchMaskView(const AllowedBatch&&) = delete;
  /// One mask for the whole batch: [1, n_q, n_k].
  BatchMaskView(const AllowedMask& shared)
      : data_(shared.data()), batch_(1), rows_(shared.rows()), cols_(shared.cols()) {}
  BatchMaskView(AllowedMask&&) = delete;
  BatchMaskView(const AllowedMask&&) = delete;

  Index batch() const { return batch_; }  ///< B, or 1 when shared
  Index rows() const { return rows_; }    ///< n_q
  Index cols() const { return cols_; }    ///< n_k
  bool shared() const { return batch_ == 1; }

  /// The mask of batch element b: element b, or the shared one when batch() == 1 (for any b).
  /// Throws std::invalid_argument for a b outside [0, B) of an unshared stack.
  MaskView element(Index b) const;

  /// Whether the stack fits a batch of B elements: one mask each, or one shared.
  bool fits(Index B) const { return batch_ == B || batch_ == 1; }

  /// "[2, 5, 5]", as AllowedBatch::shape_str().
  std::string shape_str() const;

 private:
  const bool* data_;
  Index batch_, rows_, cols_;
};

/// The score given to a blocked entry: -inf, so exp() makes its weight exactly 0 and a row
/// with every key blocked has a defined result (zeros; see softmax.hpp).
inline constexpr float kBlockedScore = -std::numeric_limits<float>::infinity();

/// Whether `score` may stand for a blocked entry: a negative number, -inf included. 0 or more
/// would not block (a blocked key would weigh as much as an allowed one, or more) and NaN would
/// make the row NaN. attention()'s blocked_score and additive_mask()'s fill follow this one rule.
constexpr bool is_blocking_score(float score) { return score < 0.0f; }  // false for NaN

// Every builder below throws std::invalid_argument for a negative size, and, before allocating,
// for a mask of more bytes than the machine's physical memory ("causal_mask: a mask of
// [2147483648 x 2147483648] needs 4.0 EiB for the mask; this machine has 23.4 GiB") or of more
// entries than an Index can count (core/memory.hpp). padding_masks() checks its B n^2 entries
// the same way, and additive_mask() its four bytes per entry.

/// Every query may attend to every key: [n_q x n_k] of true.
AllowedMask full_mask(Index n_q, Index n_k);

/// Causal (sequence) mask: query i may attend to keys j <= i only. [n x n], lower triangle
/// and diagonal true, the future (upper triangle) blocked.
AllowedMask causal_mask(Index n);

/// Local window ("truncated" attention, note 002): query i may attend to keys with
/// |i - j| <= window. [n x n]; window = 0 leaves only the diagonal. Throws for window < 0.
AllowedMask window_mask(Index n, Index window);

/// Sliding window (Mistral, Longformer's causal form; chapter 11): query i may attend to the
/// last `window` keys, counting itself, j in (i - window, i]: at most `window` keys per row,
/// never a future one. [n x n]. window >= n is causal_mask(n); window = 1 keeps only the
/// diagonal. Unlike window_mask above (a band on both sides, chapter 05), the count includes
/// the query's own key. Throws std::invalid_argument for window < 1: a query with no key at all.
AllowedMask sliding_window_mask(Index n, Index window);

/// Padding mask for one sentence of token ids: every query may attend to key j unless
/// ids[j] == pad_id. [n_q x n_k] with n_k = ids.size(); all rows alike (it masks keys).
AllowedMask padding_mask(std::span<const int> ids, Index n_q, int pad_id = 0);

/// The padding masks of a batch of sentences, ids [B x n] (one sentence per row, all padded
/// to n): [B, n, n], element b = padding_mask(row b of ids, n, pad_id).
AllowedBatch padding_masks(const TokenIds& ids, int pad_id = 0);

/// PyTorch's key_padding_mask (True = blocked, [n_k]) turned into this course's convention,
/// repeated for n_q queries: [n_q x n_k] with allowed(i, j) = !blocked[j].
AllowedMask padding_mask_from_blocked(std::span<const bool> blocked, Index n_q);

/// The largest weight where `allowed` blocks: exactly 0 when a mask kept its promise, so a
/// chapter or a test checks a whole [n_q x n_k] weight matrix in one number. Takes views (an
/// element of an AllowedBatch too); 0 when nothing is blocked. Throws std::invalid_argument
/// naming both shapes unless they agree.
float largest_blocked(const MatrixView& weights, const Eigen::Ref<const AllowedMask>& allowed);

/// The additive form of a mask (note 003's `scores += mask`): 0 where allowed, `fill` where
/// blocked. [n_q x n_k]. With fill = -inf adding it is the same as replacing blocked scores.
/// Throws std::invalid_argument unless is_blocking_score(fill), as attention() does.
Matrix additive_mask(const AllowedMask& allowed, float fill = kBlockedScore);

}  // namespace attn
