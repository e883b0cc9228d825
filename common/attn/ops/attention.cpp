// attention.cpp: softmax(Q K^T / sqrt(d_k)) V with tokens as rows, two GEMMs and a row pass.
#include "attn/ops/attention.hpp"

#include "attn/core/gemm.hpp"
#include "attn/core/memory.hpp"
#include "attn/ops/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace attn {

namespace {

// The weights without the aliasing check: attention_into() has made it, with its own names.
// Returns the number of queries with no allowed key, whose rows of W are all zeros.
// The factor on Q K^T: the caller's, or 1/sqrt(d_k) computed in the scalar type of the layer.
template <Real T>
T scale_of(const AttentionOptions& opts, Index d_k) {
  const T scale = opts.scale ? static_cast<T>(*opts.scale) : T(1) / std::sqrt(static_cast<T>(d_k));
  require(std::isfinite(scale), "attention", "the scale is not finite");
  return scale;
}

// The weights (or their gradient dS) of n_q queries over n_k keys, refused before allocating
// when the machine cannot hold them.
template <Real T>
void require_weights_fit(Index n_q, Index n_k, const char* where) {
  require_fits_in_memory(where, ElementCount(n_q, n_k), sizeof(T), "for the weights", [&] {
    return std::to_string(n_q) + " queries over " + std::to_string(n_k) + " keys";
  });
}

// Row r of the dot products, its first n entries, made the scores the softmax reads: scaled,
// then masked. The scale is applied to the finished dot product, as the column form does, so
// both round alike. softmax_row() and attention_scores() both run it, so the scores a figure
// shows are the ones the weights came from.
template <Real T>
void scale_and_mask_row(T* row, Index r, std::size_t n, T scale, const AttentionOptions& opts) {
  if (scale != T(1)) {
    for (std::size_t c = 0; c < n; ++c) row[c] *= scale;
  }
  // Masked after the scaling, as PyTorch's masked_fill after the division: a blocked score
  // is then exactly blocked_score whatever the scale (-1e9 * 0.125 would not be -1e9).
  if (opts.allowed) {
    const std::span<const bool> allowed = opts.allowed->row(r);  // [n_k], contiguous
    for (std::size_t c = 0; c < n; ++c) {
      if (!allowed[c]) row[c] = static_cast<T>(opts.blocked_score);
    }
  }
}

// Row r of the scores, its first `cols` entries (the keys a causal block may see; the rest are
// blocked and already 0): scale, mask, softmax. A row is contiguous in row-major storage and
// small enough to stay in L1 across the passes; this is ~2x faster than chained rowwise()
// expressions (measured). Returns false for a query the mask left no key (its row zeros).
template <Real T>
bool softmax_row(T* row, Index r, Index cols, Index n_k, T scale, const AttentionOptions& opts) {
  const auto n = static_cast<std::size_t>(cols);
  scale_and_mask_row<T>(row, r, n, scale, opts);
  // Every score -inf, and the row zeros: the mask left the query nothing (attend to nothing),
  // or its allowed scores all came out -inf from the inputs, where the weights are 0 / 0 and
  // NaN says so, rather than pass for an empty row. Checked once per row, on this path only.
  if (softmax_inplace(std::span<T>(row, n))) [[likely]]
    return true;
  const std::span<const bool> allowed =
      opts.allowed ? opts.allowed->row(r) : std::span<const bool>();
  const bool has_key =
      !opts.allowed || std::find(allowed.begin(), allowed.end(), true) != allowed.end();
  if (!has_key) return false;
  std::fill(row, row + n_k, std::numeric_limits<T>::quiet_NaN());
  return true;
}

// Q, K and the options against each other (attention.hpp), before anything is allocated;
// returns the scale.
template <Real T>
T check_scores(const ViewOf<T>& Q, const ViewOf<T>& K, const AttentionOptions& opts) {
  require(Q.cols() == K.cols(), "attention", [&] {
    return "Q is " + shape_str(Q) + " but K is " + shape_str(K) +
           ": queries and keys must have the same width d_k (columns)";
  });
  require(K.rows() >= 1 && K.cols() >= 1, "attention",
          [&] { return "K is " + shape_str(K) + ": need at least one key and d_k >= 1"; });
  const Index n_q = Q.rows(), n_k = K.rows(), d_k = K.cols();
  if (opts.allowed) {
    const MaskView& m = *opts.allowed;
    require(m.rows() == n_q && m.cols() == n_k, "attention", [&] {
      return "the mask is " + shape_str(m.rows(), m.cols()) + " but Q is " + shape_str(Q) +
             " and K is " + shape_str(K) + ": it must be [n_q x n_k] = " + shape_str(n_q, n_k);
    });
  }
  const T scale = scale_of<T>(opts, d_k);
  require(is_blocking_score(opts.blocked_score), "attention",
          "blocked_score must be negative (-inf or a large negative number)");
  // The [n_q x n_k] weights are what makes plain attention quadratic (chapter 10): Q and K of a
  // million tokens fit in memory, their weights do not. Refused before the resize.
  require_weights_fit<T>(n_q, n_k, "attention");
  return scale;
}

// The keys row block [r0, r0 + rows) may see: 1 + the last key any of its rows allows, when
// blocked scores are -inf and every row allows some key (the weights past it are then exactly
// 0 for every row of the block); otherwise every key. For a causal mask, r0 + rows.
Index keys_seen(const AttentionOptions& opts, Index r0, Index rows, Index n_k) {
  if (!opts.allowed || opts.blocked_score != -std::numeric_limits<float>::infinity()) return n_k;
  Index seen = 0;
  for (Index r = r0; r < r0 + rows; ++r) {
    const std::span<const bool> allowed = opts.allowed->row(r);
    Index last = n_k;
    while (last > seen && !allowed[static_cast<std::size_t>(last - 1)]) --last;
    if (last == seen && (seen == 0 || std::find(allowed.begin(), allowed.begin() + seen, true) ==
                                          allowed.begin() + seen)) {
      return n_k;  // a row with no key: its softmax must see the whole row (attention.hpp)
    }
    seen = last;
  }
  return seen;
}

// Whether float's attention runs blocked: when its weights outgrow one block (256 KiB, more than
// 256 x 256). Below that the weights stay in cache anyway, and Eigen's product keeps the bits the
// chapters' hand computations reproduce with Eigen expressions (a small product is computed
// coefficient by coefficient there, not as one fused chain).
bool runs_blocked(Index n_q, Index n_k) { return n_q * n_k > 256 * 256; }

// Rows of the weights a block holds: about 256 KiB of them, so that a block's scores stay in
// cache from the product through the softmax to W V; a multiple of 24 rows (two or four of the
// product's register blocks, gemm.cpp), at least 24.
Index rows_per_block(Index n_k) {
  constexpr Index kBytes = 256 * 1024, kQuantum = 24;
  return std::max(kQuantum,
                  kBytes / (n_k * static_cast<Index>(sizeof(float))) / kQuantum * kQuantum);
}

// The rows of out whose row of W is all zeros, written as zeros: `empty_rows` of them, the
// queries with no allowed key (only such a row of weights is all zeros, attention.hpp). Usually
// there are none, and then nothing is scanned.
template <typename Weights, typename Out>
void zero_empty_rows(const Weights& W, Out&& out, Index empty_rows) {
  for (Index r = 0; r < W.rows() && empty_rows > 0; ++r) {
    if ((W.row(r).array() == typename Weights::Scalar(0)).all()) {
      out.row(r).setZero();
      --empty_rows;
    }
  }
}

// float's plain attention, a block of query rows at a time: the block's scores Q_b K^T (against
// K^T packed once), its softmax row by row, and, when V is given, its output W_b V (against V
// packed once), while the block's weights are still in cache: the [n_q x n_k] weights are written
// once and never read back from memory. A causal block multiplies only the keys it may see
// (keys_seen); the weights past them are written as zeros. Every entry is the same chain of
// multiply-adds as one product over all rows (gemm.hpp), so the block size changes no bit.
// Returns the queries with no allowed key; their rows of W and of out are zeros.
Index blocked_attention(const MatrixView& Q, const MatrixView& K, const MatrixView* V, Matrix& W,
                        Eigen::Ref<Matrix>* out, float scale, const AttentionOptions& opts) {
  const Index n_q = Q.rows(), n_k = K.rows();
  W.resize(n_q, n_k);  // a no-op when the shape is unchanged: the buffer is reused
  const PackedOperand keys(K, Op::transposed);  // K^T [d_k x n_k]
  std::optional<PackedOperand> values;          // V [n_k x d_v]
  // A value row past a block's keys is skipped, which is exact (its weight is 0 and 0 v adds
  // nothing) unless v is not finite: 0 * inf = NaN must still reach the output (attention.hpp).
  Index finite_after = 0;  // the rows of V from here on are all finite
  if (V != nullptr) {
    values.emplace(*V, Op::plain);
    for (Index j = n_k; j > 0 && finite_after == 0; --j) {
      if (!V->row(j - 1).allFinite()) finite_after = j;
    }
  }
  const Index block_rows = rows_per_block(n_k);
  Index empty_rows = 0;
  for (Index r0 = 0; r0 < n_q; r0 += block_rows) {
    const Index rows = std::min(block_rows, n_q - r0);
    const Index seen = keys_seen(opts, r0, rows, n_k);
    gemm(Q.middleRows(r0, rows), Op::plain, keys, W.block(r0, 0, rows, seen));  // [rows x seen]
    W.block(r0, seen, rows, n_k - seen).setZero();  // blocked for every row of the block
    Index empty_here = 0;
    for (Index r = r0; r < r0 + rows; ++r) {
      if (!softmax_row<float>(W.row(r).data(), r, seen, n_k, scale, opts)) ++empty_here;
    }
    empty_rows += empty_here;
    if (V == nullptr) continue;
    const Index reach = finite_after <= seen ? seen : n_k;  // the value rows the product reads
    auto out_rows = out->middleRows(r0, rows);              // [rows x d_v]
    gemm(W.block(r0, 0, rows, reach), Op::plain, *values, out_rows);
    zero_empty_rows(W.middleRows(r0, rows), out_rows, empty_here);
  }
  return empty_rows;
}

template <Real T>
Index weights_into(const ViewOf<T>& Q, const ViewOf<T>& K, MatrixOf<T>& W,
                   const AttentionOptions& opts) {
  const T scale = check_scores<T>(Q, K, opts);
  if constexpr (std::is_same_v<T, float>) {
    if (runs_blocked(Q.rows(), K.rows())) {
      return blocked_attention(Q, K, nullptr, W, nullptr, scale, opts);
    }
  }
  const Index n_q = Q.rows(), n_k = K.rows();

  // ---- scores: W = Q K^T ------------------------------------------------------------------------
  W.resize(n_q, n_k);               // a no-op when the shape is unchanged: the buffer is reused
  W.noalias() = Q * K.transpose();  // [n_q x n_k] = [n_q x d_k] [d_k x n_k]

  // ---- one row at a time: scale, mask, softmax --------------------------------------------------
  Index empty_rows = 0;
  for (Index r = 0; r < n_q; ++r) {
    if (!softmax_row<T>(W.row(r).data(), r, n_k, n_k, scale, opts)) ++empty_rows;
  }
  return empty_rows;
}

// The scores alone, mask(Q K^T * scale) [n_q x n_k]: the product weights_into() makes for these
// sizes (float past 256 x 256 on the library's GEMM, as blocked_attention(), whose blocks and
// skipped keys change no bit of an entry), then every row as softmax_row() makes it before its
// softmax. A key a causal block skips is blocked, so it gets blocked_score here too.
template <Real T>
MatrixOf<T> scores_of(const ViewOf<T>& Q, const ViewOf<T>& K, const AttentionOptions& opts) {
  const T scale = check_scores<T>(Q, K, opts);
  const Index n_q = Q.rows(), n_k = K.rows();
  MatrixOf<T> S(n_q, n_k);  // [n_q x n_k]
  bool multiplied = false;
  if constexpr (std::is_same_v<T, float>) {
    if (runs_blocked(n_q, n_k)) {
      gemm(Q, Op::plain, PackedOperand(K, Op::transposed), S);  // K^T [d_k x n_k], packed
      multiplied = true;
    }
  }
  if (!multiplied) S.noalias() = Q * K.transpose();  // [n_q x d_k] [d_k x n_k]
  for (Index r = 0; r < n_q; ++r) {
    scale_and_mask_row<T>(S.row(r).data(), r, static_cast<std::size_t>(n_k), scale, opts);
  }
  return S;
}

// out = W V, written as zeros in the rows of the queries with no allowed key (W's zero rows),
// so such a row is zero whatever V holds: the product would give 0 * inf = NaN. `empty_rows`
// (from weights_into) is almost always 0, and then nothing is scanned.
template <Real T, typename Out>
void multiply_values(const MatrixOf<T>& W, const ViewOf<T>& V, Out&& out, Index empty_rows) {
  out.noalias() = W * V;  // [n_q x d_v] = [n_q x n_k] [n_k x d_v]
  zero_empty_rows(W, out, empty_rows);
}

template <Real T>
Index checked_weights_into(const ViewOf<T>& Q, const ViewOf<T>& K, MatrixOf<T>& W,
                           const AttentionOptions& opts) {
  require_apart("attention_weights_into", {{"W", memory_of(W)}},
                {{"Q", memory_of(Q)}, {"K", memory_of(K)}});
  return weights_into<T>(Q, K, W, opts);
}

template <Real T>
void checked_values_into(const MatrixOf<T>& W, const ViewOf<T>& V, Eigen::Ref<MatrixOf<T>> out,
                         Index empty_rows) {
  require(W.cols() == V.rows() && out.rows() == W.rows() && out.cols() == V.cols(),
          "weighted_values_into", [&] {
            return "W is " + shape_str(W) + ", V is " + shape_str(V) + " and out is " +
                   shape_str(out) + ": out must be [rows(W) x cols(V)] and V [cols(W) x d_v]";
          });
  require_apart("weighted_values_into", {{"out", memory_of(out)}},
                {{"W", memory_of(W)}, {"V", memory_of(V)}});
  multiply_values<T>(W, V, out, empty_rows);
}

// The weights into W [n_q x n_k] and out = W V [n_q x d_v], out already shaped: float past
// 256 x 256 a block at a time (blocked_attention), otherwise the two products whole. Returns the
// queries with no allowed key.
template <Real T>
Index weights_and_values(const ViewOf<T>& Q, const ViewOf<T>& K, const ViewOf<T>& V, MatrixOf<T>& W,
                         Eigen::Ref<MatrixOf<T>> out, const AttentionOptions& opts) {
  if constexpr (std::is_same_v<T, float>) {
    if (runs_blocked(Q.rows(), K.rows())) {
      return blocked_attention(Q, K, &V, W, &out, check_scores<float>(Q, K, opts), opts);
    }
  }
  const Index empty_rows = weights_into<T>(Q, K, W, opts);  // [n_q x n_k]
  multiply_values<T>(W, V, out, empty_rows);                // [n_q x d_v]
  return empty_rows;
}

template <Real T>
void checked_attention_into(const ViewOf<T>& Q, const ViewOf<T>& K, const ViewOf<T>& V,
                            AttentionResultOf<T>& result, const AttentionOptions& opts) {
  require(K.rows() == V.rows(), "attention", [&] {
    return "K is " + shape_str(K) + " but V is " + shape_str(V) +
           ": every key needs a value (same number of rows)";
  });
  // result.out and result.weights are two matrices of their own: only the inputs can alias them.
  require_apart(
      "attention_into",
      {{"result.weights", memory_of(result.weights)}, {"result.out", memory_of(result.out)}},
      {{"Q", memory_of(Q)}, {"K", memory_of(K)}, {"V", memory_of(V)}});
  require_fits_in_memory("attention", ElementCount(Q.rows(), V.cols()), sizeof(T), "for the output",
                         [&] { return "Q " + shape_str(Q) + " and V " + shape_str(V); });
  check_scores<T>(Q, K, opts);  // before anything is resized
  result.out.resize(Q.rows(), V.cols());
  weights_and_values<T>(Q, K, V, result.weights, result.out, opts);
}

template <Real T>
Index checked_parts_into(const ViewOf<T>& Q, const ViewOf<T>& K, const ViewOf<T>& V, MatrixOf<T>& W,
                         Eigen::Ref<MatrixOf<T>> out, const AttentionOptions& opts) {
  require(K.rows() == V.rows() && out.rows() == Q.rows() && out.cols() == V.cols(), "attention",
          [&] {
            return "Q is " + shape_str(Q) + ", K " + shape_str(K) + ", V " + shape_str(V) +
                   " and out " + shape_str(out) +
                   ": every key needs a value (same number of rows), and out is [n_q x d_v]";
          });
  require_apart("attention_into", {{"W", memory_of(W)}, {"out", memory_of(out)}},
                {{"Q", memory_of(Q)}, {"K", memory_of(K)}, {"V", memory_of(V)}});
  return weights_and_values<T>(Q, K, V, W, out, opts);
}

// The backward pass of out = P V, P = softmax(S), S = mask(Q K^T * scale) (attention.hpp).
template <Real T>
void checked_backward_into(const ViewOf<T>& Q, const ViewOf<T>& K, const ViewOf<T>& V,
                           const MatrixOf<T>& P, const ViewOf<T>& d_out, Eigen::Ref<MatrixOf<T>> dQ,
                           Eigen::Ref<MatrixOf<T>> dK, Eigen::Ref<MatrixOf<T>> dV,
                           const AttentionOptions& opts) {
  const Index n_q = Q.rows(), n_k = K.rows(), d_k = K.cols(), d_v = V.cols();
  require(Q.cols() == d_k && V.rows() == n_k && P.rows() == n_q && P.cols() == n_k &&
              d_out.rows() == n_q && d_out.cols() == d_v,
          "attention_backward", [&] {
            return "Q is " + shape_str(Q) + ", K " + shape_str(K) + ", V " + shape_str(V) +
                   ", the weights " + shape_str(P) + " and d_out " + shape_str(d_out) +
                   ": they must be [n_q x d_k], [n_k x d_k], [n_k x d_v], [n_q x n_k] and "
                   "[n_q x d_v]";
          });
  require(dQ.rows() == n_q && dQ.cols() == d_k && dK.rows() == n_k && dK.cols() == d_k &&
              dV.rows() == n_k && dV.cols() == d_v,
          "attention_backward", [&] {
            return "dQ, dK and dV are " + shape_str(dQ) + ", " + shape_str(dK) + " and " +
                   shape_str(dV) + ": they must have the shapes of Q, K and V";
          });
  // dV is written before dS is computed from P and d_out, dQ before dK reads Q: any overlap
  // among the outputs, or of an output with an input, gives a silently wrong gradient.
  require_apart("attention_backward",
                {{"dQ", memory_of(dQ)}, {"dK", memory_of(dK)}, {"dV", memory_of(dV)}},
                {{"Q", memory_of(Q)},
                 {"K", memory_of(K)},
                 {"V", memory_of(V)},
                 {"the weights", memory_of(P)},
                 {"d_out", memory_of(d_out)}});
  const T scale = scale_of<T>(opts, d_k);
  require_weights_fit<T>(n_q, n_k, "attention_backward");  // dS, [n_q x n_k]
  // dV = P^T dO: value j received P(i, j) of every query i's output.
  dV.noalias() = P.transpose() * d_out;  // [n_k x d_v] = [n_k x n_q] [n_q x d_v]
  // dP = dO V^T, then through the softmax row by row: dS = P * (dP - rowsum(P * dP)).
  MatrixOf<T> dS(n_q, n_k);  // [n_q x n_k], first dP, then dS in place
  dS.noalias() = d_out * V.transpose();
  for (Index r = 0; r < n_q; ++r) {
    const T* p = P.row(r).data();
    T* g = dS.row(r).data();
    T dot = T(0);  // sum_j P(r, j) dP(r, j): the weighted mean of the row's dP
    for (Index c = 0; c < n_k; ++c) dot += p[c] * g[c];
    // A blocked key has P = 0, so its dS is exactly 0: no gradient reaches its score.
    for (Index c = 0; c < n_k; ++c) g[c] = p[c] * (g[c] - dot);
    // With a finite blocked_score (-1e9) a row with every key blocked is uniform, P > 0, but its
    // scores are constants, not functions of Q and K: their gradient is 0 too.
    if (opts.allowed) {
      const std::span<const bool> allowed = opts.allowed->row(r);
      for (Index c = 0; c < n_k; ++c) {
        if (!allowed[static_cast<std::size_t>(c)]) g[c] = T(0);
      }
    }
  }
  // S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q.
  dQ.noalias() = dS * K;  // [n_q x d_k]
  dQ *= scale;
  dK.noalias() = dS.transpose() * Q;  // [n_k x d_k]
  dK *= scale;
}

}  // namespace

Index attention_weights_into(const MatrixView& Q, const MatrixView& K, Matrix& W,
                             const AttentionOptions& opts) {
  return checked_weights_into<float>(Q, K, W, opts);
}
Index attention_weights_into(const MatrixViewD& Q, const MatrixViewD& K, MatrixD& W,
                             const AttentionOptions& opts) {
  return checked_weights_into<double>(Q, K, W, opts);
}

Matrix attention_scores(const MatrixView& Q, const MatrixView& K, const AttentionOptions& opts) {
  return scores_of<float>(Q, K, opts);
}
MatrixD attention_scores(const MatrixViewD& Q, const MatrixViewD& K, const AttentionOptions& opts) {
  return scores_of<double>(Q, K, opts);
}

void weighted_values_into(const Matrix& W, const MatrixView& V, Eigen::Ref<Matrix> out,
                          Index empty_rows) {
  checked_values_into<float>(W, V, out, empty_rows);
}
void weighted_values_into(const MatrixD& W, const MatrixViewD& V, Eigen::Ref<MatrixD> out,
                          Index empty_rows) {
  checked_values_into<double>(W, V, out, empty_rows);
}

void attention_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                    AttentionResult& result, const AttentionOptions& opts) {
  checked_attention_into<float>(Q, K, V, result, opts);
}
void attention_into(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                    AttentionResultD& result, const AttentionOptions& opts) {
  checked_attention_into<double>(Q, K, V, result, opts);
}

Index attention_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V, Matrix& W,
                     Eigen::Ref<Matrix> out, const AttentionOptions& opts) {
  return checked_parts_into<float>(Q, K, V, W, out, opts);
}
Index attention_into(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V, MatrixD& W,
                     Eigen::Ref<MatrixD> out, const AttentionOptions& opts) {
  return checked_parts_into<double>(Q, K, V, W, out, opts);
}

AttentionResult attention(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                          const AttentionOptions& opts) {
  AttentionResult result;
  attention_into(Q, K, V, result, opts);
  return result;
}
AttentionResultD attention(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                           const AttentionOptions& opts) {
  AttentionResultD result;
  attention_into(Q, K, V, result, opts);
  return result;
}

void attention_backward_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                             const Matrix& weights, const MatrixView& d_out, Eigen::Ref<Matrix> dQ,
                             Eigen::Ref<Matrix> dK, Eigen::Ref<Matrix> dV,
                             const AttentionOptions& opts) {
  checked_backward_into<float>(Q, K, V, weights, d_out, dQ, dK, dV, opts);
}
void attention_backward_into(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                             const MatrixD& weights, const MatrixViewD& d_out,
                             Eigen::Ref<MatrixD> dQ, Eigen::Ref<MatrixD> dK, Eigen::Ref<MatrixD> dV,
                             const AttentionOptions& opts) {
  checked_backward_into<double>(Q, K, V, weights, d_out, dQ, dK, dV, opts);
}

AttentionGrads attention_backward(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                                  const Matrix& weights, const MatrixView& d_out,
                                  const AttentionOptions& opts) {
  AttentionGrads g{Matrix(Q.rows(), Q.cols()), Matrix(K.rows(), K.cols()),
                   Matrix(V.rows(), V.cols())};
  attention_backward_into(Q, K, V, weights, d_out, g.dQ, g.dK, g.dV, opts);
  return g;
}
AttentionGradsD attention_backward(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                                   const MatrixD& weights, const MatrixViewD& d_out,
                                   const AttentionOptions& opts) {
  AttentionGradsD g{MatrixD(Q.rows(), Q.cols()), MatrixD(K.rows(), K.cols()),
                    MatrixD(V.rows(), V.cols())};
  attention_backward_into(Q, K, V, weights, d_out, g.dQ, g.dK, g.dV, opts);
  return g;
}

BatchAttentionResult attention(const Batch& Q, const Batch& K, const Batch& V,
                               const BatchAttentionOptions& opts) {
  const Index B = Q.batch();
  require(K.batch() == B && V.batch() == B, "attention", [&] {
    return "Q is " + Q.shape_str() + ", K is " + K.shape_str() + ", V is " + V.shape_str() +
           ": the batch sizes (first dimension) must agree";
  });
  if (opts.allowed) {
    require(opts.allowed->fits(B), "attention", [&] {
      return "the mask is " + opts.allowed->shape_str() + " but Q is " + Q.shape_str() +
             ": the mask's batch must be " + std::to_string(B) + " or 1 (shared)";
    });
  }
  BatchAttentionResult result{Batch(B, Q.rows(), V.cols()), Batch(B, Q.rows(), K.rows())};
  AttentionResult one;  // [n_q x d_v] and [n_q x n_k], reused for every element
  for (Index b = 0; b < B; ++b) {
    AttentionOptions element{.scale = opts.scale, .blocked_score = opts.blocked_score};
    if (opts.allowed) element.allowed.emplace(opts.allowed->element(b));
    attention_into(Q[b], K[b], V[b], one, element);
    result.out[b] = one.out;          // [n_q x d_v]
    result.weights[b] = one.weights;  // [n_q x n_k]
  }
  return result;
}

}  // namespace attn
