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
#pragma once

#include "attn/batch.hpp"
#include "attn/matrix.hpp"

#include <limits>
#include <span>

namespace attn {

/// true = query i may attend to key j. [n_q x n_k], row-major like the scores it masks.
using AllowedMask = Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A stack of B masks, [B, n_q, n_k]: one per batch element (padding differs per sentence).
using AllowedBatch = BatchOf<bool>;

/// The score given to a blocked entry: -inf, so exp() makes its weight exactly 0 and a row
/// with every key blocked has a defined result (zeros; see softmax.hpp).
inline constexpr float kBlockedScore = -std::numeric_limits<float>::infinity();

/// Every query may attend to every key: [n_q x n_k] of true.
AllowedMask full_mask(Index n_q, Index n_k);

/// Causal (sequence) mask: query i may attend to keys j <= i only. [n x n], lower triangle
/// and diagonal true, the future (upper triangle) blocked.
AllowedMask causal_mask(Index n);

/// Local window ("truncated" attention, note 002): query i may attend to keys with
/// |i - j| <= window. [n x n]; window = 0 leaves only the diagonal. Throws for window < 0.
AllowedMask window_mask(Index n, Index window);

/// Padding mask for one sentence of token ids: every query may attend to key j unless
/// ids[j] == pad_id. [n_q x n_k] with n_k = ids.size(); all rows alike (it masks keys).
AllowedMask padding_mask(std::span<const int> ids, Index n_q, int pad_id = 0);

/// The padding masks of a batch of sentences, ids [B x n] (one sentence per row, all padded
/// to n): [B, n, n], element b = padding_mask(row b of ids, n, pad_id).
AllowedBatch padding_masks(const TokenIds& ids, int pad_id = 0);

/// PyTorch's key_padding_mask (True = blocked, [n_k]) turned into this course's convention,
/// repeated for n_q queries: [n_q x n_k] with allowed(i, j) = !blocked[j].
AllowedMask padding_mask_from_blocked(std::span<const bool> blocked, Index n_q);

/// The additive form of a mask (note 003's `scores += mask`): 0 where allowed, `fill` where
/// blocked. [n_q x n_k]. With fill = -inf adding it is the same as replacing blocked scores.
Matrix additive_mask(const AllowedMask& allowed, float fill = kBlockedScore);

}  // namespace attn
