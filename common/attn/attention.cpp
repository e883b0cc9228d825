// attention.cpp: softmax(Q K^T / sqrt(d_k)) V with tokens as rows, two GEMMs and a row pass.
#include "attn/attention.hpp"

#include "attn/softmax.hpp"

#include <cmath>
#include <cstddef>
#include <span>
#include <string>

namespace attn {

void attention_weights_into(const MatrixView& Q, const MatrixView& K, Matrix& W,
                            const AttentionOptions& opts) {
  require(Q.cols() == K.cols(), "attention",
          "Q is " + shape_str(Q) + " but K is " + shape_str(K) +
              ": queries and keys must have the same width d_k (columns)");
  require(K.rows() >= 1 && K.cols() >= 1, "attention",
          "K is " + shape_str(K) + ": need at least one key and d_k >= 1");
  const Index n_q = Q.rows(), n_k = K.rows(), d_k = K.cols();
  if (opts.allowed) {
    require(opts.allowed->rows() == n_q && opts.allowed->cols() == n_k, "attention",
            "the mask is " + shape_str(*opts.allowed) + " but Q is " + shape_str(Q) + " and K is " +
                shape_str(K) + ": it must be [n_q x n_k] = " + shape_str(n_q, n_k));
  }
  const float scale = opts.scale.value_or(1.0f / std::sqrt(static_cast<float>(d_k)));
  require(std::isfinite(scale), "attention", "the scale is not finite");
  require(!std::isnan(opts.blocked_score) && opts.blocked_score < 0.0f, "attention",
          "blocked_score must be negative (-inf or a large negative number)");

  // ---- scores: W = Q K^T ------------------------------------------------------------------------
  W.resize(n_q, n_k);               // a no-op when the shape is unchanged: the buffer is reused
  W.noalias() = Q * K.transpose();  // [n_q x n_k] = [n_q x d_k] [d_k x n_k]

  // ---- one row at a time: scale, mask, softmax --------------------------------------------------
  // A row is contiguous in row-major storage and small enough to stay in L1 across the
  // passes; this is ~2x faster than chained rowwise() expressions (DESIGN.md). The scale is
  // applied to the finished dot product, as the column form does, so both round alike.
  const auto cols = static_cast<std::size_t>(n_k);
  for (Index r = 0; r < n_q; ++r) {
    float* row = W.row(r).data();
    if (scale != 1.0f) {
      for (std::size_t c = 0; c < cols; ++c) row[c] *= scale;
    }
    // Masked after the scaling, as PyTorch's masked_fill after the division: a blocked score
    // is then exactly blocked_score whatever the scale (-1e9 * 0.125 would not be -1e9).
    if (opts.allowed) {
      const bool* allowed = opts.allowed->row(r).data();  // [n_k], contiguous
      for (std::size_t c = 0; c < cols; ++c) {
        if (!allowed[c]) row[c] = opts.blocked_score;
      }
    }
    softmax_inplace(std::span<float>(row, cols));
  }
}

void attention_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                    AttentionResult& result, const AttentionOptions& opts) {
  require(K.rows() == V.rows(), "attention",
          "K is " + shape_str(K) + " but V is " + shape_str(V) +
              ": every key needs a value (same number of rows)");
  attention_weights_into(Q, K, result.weights, opts);  // [n_q x n_k]
  result.out.resize(Q.rows(), V.cols());
  result.out.noalias() = result.weights * V;  // [n_q x d_v] = [n_q x n_k] [n_k x d_v]
}

AttentionResult attention(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                          const AttentionOptions& opts) {
  AttentionResult result;
  attention_into(Q, K, V, result, opts);
  return result;
}

BatchAttentionResult attention(const Batch& Q, const Batch& K, const Batch& V,
                               const BatchAttentionOptions& opts) {
  const Index B = Q.batch();
  require(K.batch() == B && V.batch() == B, "attention",
          "Q is " + Q.shape_str() + ", K is " + K.shape_str() + ", V is " + V.shape_str() +
              ": the batch sizes (first dimension) must agree");
  if (opts.allowed) {
    require(opts.allowed->batch() == B || opts.allowed->batch() == 1, "attention",
            "the mask is " + opts.allowed->shape_str() + " but Q is " + Q.shape_str() +
                ": the mask's batch must be " + std::to_string(B) + " or 1 (shared)");
  }
  BatchAttentionResult result{Batch(B, Q.rows(), V.cols()), Batch(B, Q.rows(), K.rows())};
  AttentionResult one;  // [n_q x d_v] and [n_q x n_k], reused for every element
  for (Index b = 0; b < B; ++b) {
    AttentionOptions element{.scale = opts.scale, .blocked_score = opts.blocked_score};
    if (opts.allowed) element.allowed.emplace((*opts.allowed)[opts.allowed->batch() == 1 ? 0 : b]);
    attention_into(Q[b], K[b], V[b], one, element);
    result.out[b] = one.out;          // [n_q x d_v]
    result.weights[b] = one.weights;  // [n_q x n_k]
  }
  return result;
}

}  // namespace attn
