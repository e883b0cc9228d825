// masks.cpp: the allowed-entry masks (true = may attend) and their additive form.
#include "attn/ops/masks.hpp"

#include "attn/core/memory.hpp"

#include <string>

namespace attn {

namespace {

void require_size(Index n, const char* where, const char* what) {
  require(n >= 0, where,
          [&] { return std::string(what) + " is " + std::to_string(n) + ": it must be >= 0"; });
}

// A mask of [n_q x n_k] booleans, refused before it is allocated when it cannot fit.
void require_mask_fits(Index n_q, Index n_k, const char* where) {
  require_fits_in_memory(where, ElementCount(n_q, n_k), sizeof(bool), "for the mask",
                         [&] { return "a mask of " + shape_str(n_q, n_k); });
}

}  // namespace

MaskView::MaskView(const AllowedBatch& masks, Index b) : MaskView(nullptr, 0, 0) {
  const auto element = masks[b];  // [n_q x n_k], checks b
  data_ = element.data();
  rows_ = element.rows();
  cols_ = element.cols();
}

MaskView BatchMaskView::element(Index b) const {
  if (shared()) return {data_, rows_, cols_};
  require(b >= 0 && b < batch_, "BatchMaskView", [&] {
    return "element " + std::to_string(b) + " is outside a stack of " + std::to_string(batch_) +
           " masks";
  });
  return {data_ + b * rows_ * cols_, rows_, cols_};
}

std::string BatchMaskView::shape_str() const {
  return "[" + std::to_string(batch_) + ", " + std::to_string(rows_) + ", " +
         std::to_string(cols_) + "]";
}

AllowedMask full_mask(Index n_q, Index n_k) {
  require_size(n_q, "full_mask", "n_q");
  require_size(n_k, "full_mask", "n_k");
  require_mask_fits(n_q, n_k, "full_mask");
  return AllowedMask::Constant(n_q, n_k, true);  // [n_q x n_k]
}

AllowedMask causal_mask(Index n) {
  require_size(n, "causal_mask", "n");
  require_mask_fits(n, n, "causal_mask");
  AllowedMask m(n, n);  // [n x n]
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < n; ++j) m(i, j) = j <= i;  // the past and the present, not the future
  }
  return m;
}

AllowedMask window_mask(Index n, Index window) {
  require_size(n, "window_mask", "n");
  require(window >= 0, "window_mask", [&] {
    return "window is " + std::to_string(window) + ": it must be >= 0 (0 keeps only the diagonal)";
  });
  require_mask_fits(n, n, "window_mask");
  AllowedMask m(n, n);  // [n x n]
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < n; ++j) m(i, j) = (i > j ? i - j : j - i) <= window;
  }
  return m;
}

AllowedMask sliding_window_mask(Index n, Index window) {
  require_size(n, "sliding_window_mask", "n");
  require(window >= 1, "sliding_window_mask", [&] {
    return "window is " + std::to_string(window) +
           ": it must be >= 1 (the keys a query reads, counting its own)";
  });
  require_mask_fits(n, n, "sliding_window_mask");
  AllowedMask m(n, n);  // [n x n]
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < n; ++j) m(i, j) = j <= i && i - j < window;  // j in (i - window, i]
  }
  return m;
}

AllowedMask padding_mask(std::span<const int> ids, Index n_q, int pad_id) {
  require_size(n_q, "padding_mask", "n_q");
  require_mask_fits(n_q, static_cast<Index>(ids.size()), "padding_mask");
  AllowedMask m(n_q, static_cast<Index>(ids.size()));  // [n_q x n_k]
  for (Index j = 0; j < m.cols(); ++j) {
    m.col(j).setConstant(ids[static_cast<std::size_t>(j)] != pad_id);  // a pad key is blocked
  }
  return m;
}

AllowedBatch padding_masks(const TokenIds& ids, int pad_id) {
  const Index B = ids.rows(), n = ids.cols();
  // B n^2 booleans from B n ids: a modest batch of long sentences asks for far more than it holds.
  require_fits_in_memory("padding_masks", ElementCount(n, n, B), sizeof(bool), "for the masks",
                         [&] { return "ids of " + shape_str(ids) + " (B x n)"; });
  AllowedBatch masks(B, n, n);  // [B, n, n]
  for (Index b = 0; b < B; ++b) {
    masks[b] = padding_mask({ids.row(b).data(), static_cast<std::size_t>(n)}, n, pad_id);
  }
  return masks;
}

AllowedMask padding_mask_from_blocked(std::span<const bool> blocked, Index n_q) {
  require_size(n_q, "padding_mask_from_blocked", "n_q");
  require_mask_fits(n_q, static_cast<Index>(blocked.size()), "padding_mask_from_blocked");
  AllowedMask m(n_q, static_cast<Index>(blocked.size()));  // [n_q x n_k]
  for (Index j = 0; j < m.cols(); ++j) {
    m.col(j).setConstant(!blocked[static_cast<std::size_t>(j)]);  // PyTorch's True = blocked
  }
  return m;
}

float largest_blocked(const MatrixView& weights, const Eigen::Ref<const AllowedMask>& allowed) {
  require(weights.rows() == allowed.rows() && weights.cols() == allowed.cols(), "largest_blocked",
          [&] {
            return "weights are " + shape_str(weights) + " but allowed is " + shape_str(allowed) +
                   ": the mask needs an entry per weight";
          });
  if (weights.size() == 0) return 0.0f;  // maxCoeff of nothing is undefined
  // An allowed entry counts as 0, which a blocked weight that leaked (> 0) exceeds.
  return allowed.array().select(0.0f, weights.array()).maxCoeff();
}

Matrix additive_mask(const AllowedMask& allowed, float fill) {
  require(is_blocking_score(fill), "additive_mask",
          "the fill must be negative (-inf or a large negative number), as attention's "
          "blocked_score");
  // Four bytes per entry of a mask that holds one.
  require_fits_in_memory("additive_mask", ElementCount(allowed.rows(), allowed.cols()),
                         sizeof(float), "for the additive mask",
                         [&] { return "a mask of " + shape_str(allowed); });
  Matrix m(allowed.rows(), allowed.cols());  // [n_q x n_k]
  for (Index i = 0; i < m.rows(); ++i) {
    for (Index j = 0; j < m.cols(); ++j) m(i, j) = allowed(i, j) ? 0.0f : fill;
  }
  return m;
}

}  // namespace attn
