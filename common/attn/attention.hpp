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
#pragma once

#include "attn/matrix.hpp"

#include <optional>

namespace attn {

/// A read-only view of a row-major float matrix or of a block of one (rows contiguous).
using MatrixView = Eigen::Ref<const Matrix>;

struct AttentionOptions {
  /// The factor on Q K^T. Unset: 1/sqrt(d_k), as in the paper and PyTorch. 1: unscaled.
  std::optional<float> scale;
  // Chapter 05 adds the mask here: masked scores become -inf between the scaling and the
  // softmax (see attention.cpp), which softmax_inplace turns into weights of exactly 0.
};

struct AttentionResult {
  Matrix out;      ///< [n_q x d_v]
  Matrix weights;  ///< [n_q x n_k], row i = query i's weights over the keys
};

/// out = softmax(Q K^T * scale) V. Throws std::invalid_argument naming the shapes when they
/// do not fit: Q [n_q x d_k], K [n_k x d_k], V [n_k x d_v], n_k >= 1, d_k >= 1.
AttentionResult attention(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                          const AttentionOptions& opts = {});

/// The same, into `result`: its two matrices are resized only when their shapes change, so a
/// caller that keeps one AttentionResult across calls allocates the [n_q x n_k] buffer once.
void attention_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                    AttentionResult& result, const AttentionOptions& opts = {});

}  // namespace attn
