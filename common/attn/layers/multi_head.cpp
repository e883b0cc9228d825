// multi_head.cpp: H heads as column blocks of three projections, one W_O.
#include "attn/layers/multi_head.hpp"

#include "attn/core/memory.hpp"
#include "attn/core/threads.hpp"
#include "attn/kernels/tiled_attention.hpp"
#include "attn/layers/parameters.hpp"

#include <cmath>
#include <string>

namespace attn {

namespace {

// Whether the scores fit in one tile of the tiled path (128 x 128 by default): then tiling has
// nothing to split, the weights are at most 64 KiB a head, and the plain path does the same
// work with less bookkeeping (chapter 09's training, on 8 and 24 tokens, ran 27% slower tiled).
bool fits_one_tile(Index n_q, Index n_k) {
  const TiledAttentionOptions tiles;
  return n_q <= tiles.query_tile && n_k <= tiles.key_tile;
}

// Whether H heads of attention over n_q queries and n_k keys, d_model wide in all, are worth
// a thread each: a parallel region costs microseconds, and the training chapter runs thousands
// of multi-head calls on 8 tokens, each far cheaper than that.
bool worth_threads(Index n_q, Index n_k, Index d_model) {
  return 4.0 * static_cast<double>(n_q) * static_cast<double>(n_k) * static_cast<double>(d_model) >=
         kThreadedFlops;
}

// The block of rows [first, first + count) of a PyTorch-layout weight, as its own Linear.
Linear rows_of(const Matrix& weight, const RowVector& bias, Index first, Index count) {
  Linear l;
  l.weight = weight.middleRows(first, count);                 // [count x in]
  if (bias.size() != 0) l.bias = bias.segment(first, count);  // [1 x count]
  return l;
}

}  // namespace

void check_head_sizes(Index d_model, Index heads, const char* where) {
  require_at_least_one(d_model, where, "d_model");
  require_at_least_one(heads, where, "heads");
  require(d_model % heads == 0, where, [&] {
    return std::to_string(heads) + " heads do not divide d_model = " + std::to_string(d_model) +
           ": each head needs d_k = d_model / heads columns";
  });
}

template <Real T>
void check_multi_head(const MultiHeadAttentionOf<T>& mha, const char* where) {
  const Index E = mha.q_proj.out_features();
  check_head_sizes(E, mha.heads, where);
  const auto check_square = [&](const LinearOf<T>& l, const char* name) {
    check_linear(l, where);
    require(l.weight.rows() == E && l.weight.cols() == E, where, [&] {
      return std::string(name) + " is " + shape_str(l.weight) + " but W_Q is " +
             shape_str(mha.q_proj.weight) + ": every projection must be " + shape_str(E, E);
    });
  };
  check_square(mha.q_proj, "W_Q");
  check_square(mha.k_proj, "W_K");
  check_square(mha.v_proj, "W_V");
  check_square(mha.out_proj, "W_O");
}

MultiHeadAttention multi_head_init(Rng& rng, Index d_model, Index heads, bool bias) {
  check_head_sizes(d_model, heads, "multi_head_init");
  // Four [E x E] projections and four biases [E] (3 * d_model below needs this first: it
  // overflows Index for a d_model near its largest value).
  require_fits_in_memory(
      "multi_head_init", ElementCount(d_model, d_model, 4).add(1, bias ? d_model : 0, 4),
      sizeof(float), "of parameters", [&] { return "d_model " + std::to_string(d_model); });
  // xavier_uniform_ on the stacked [3E x E] in_proj_weight: fan_in E, fan_out 3E.
  const double bound = std::sqrt(6.0 / static_cast<double>(4 * d_model));
  const Matrix in_proj = random_uniform(rng, 3 * d_model, d_model, -bound, bound);  // [3E x E]
  const RowVector in_bias = bias ? RowVector(RowVector::Zero(3 * d_model)) : RowVector();
  const double k = 1.0 / std::sqrt(static_cast<double>(d_model));
  const Matrix out_w = random_uniform(rng, d_model, d_model, -k, k);  // [E x E]
  const RowVector out_b = bias ? RowVector(RowVector::Zero(d_model)) : RowVector();
  return multi_head_from_pytorch(in_proj, in_bias, out_w, out_b, heads);
}

MultiHeadAttention multi_head_from_pytorch(const Matrix& in_proj_weight,
                                           const RowVector& in_proj_bias,
                                           const Matrix& out_proj_weight,
                                           const RowVector& out_proj_bias, Index heads) {
  const Index E = in_proj_weight.cols();
  require(in_proj_weight.rows() == 3 * E, "multi_head_from_pytorch", [&] {
    return "in_proj_weight is " + shape_str(in_proj_weight) +
           ": it must be [3E x E] = " + shape_str(3 * E, E) + " (W_Q, W_K, W_V stacked)";
  });
  require(in_proj_bias.size() == 0 || in_proj_bias.size() == 3 * E, "multi_head_from_pytorch", [&] {
    return "in_proj_bias is " + shape_str(in_proj_bias) + ": it must be [1 x " +
           std::to_string(3 * E) + "] or empty";
  });
  MultiHeadAttention mha;
  mha.heads = heads;
  mha.q_proj = rows_of(in_proj_weight, in_proj_bias, 0, E);
  mha.k_proj = rows_of(in_proj_weight, in_proj_bias, E, E);
  mha.v_proj = rows_of(in_proj_weight, in_proj_bias, 2 * E, E);
  mha.out_proj = {out_proj_weight, out_proj_bias};
  check_multi_head(mha, "multi_head_from_pytorch");
  return mha;
}

Matrix in_proj_weight(const MultiHeadAttention& mha) {
  check_multi_head(mha, "in_proj_weight");
  Matrix w(3 * mha.d_model(), mha.d_model());  // [3E x E]
  w << mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight;
  return w;
}

RowVector in_proj_bias(const MultiHeadAttention& mha) {
  check_multi_head(mha, "in_proj_bias");
  if (!mha.q_proj.has_bias()) return {};
  RowVector b(3 * mha.d_model());  // [1 x 3E]
  b << mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias;
  return b;
}

template <Real T>
MultiHeadResultOf<T> multi_head_forward(const MultiHeadAttentionOf<T>& mha, const InView<T>& query,
                                        const InView<T>& key, const InView<T>& value,
                                        const MultiHeadOptions& opts) {
  check_multi_head(mha, "multi_head_forward");
  const Index E = mha.d_model(), H = mha.heads, d_k = mha.d_k();
  require(key.rows() == value.rows(), "multi_head_forward", [&] {
    return "key is " + shape_str(key) + " but value is " + shape_str(value) +
           ": every key needs a value (same number of rows)";
  });
  MultiHeadResultOf<T> r;
  // ---- three projections, all heads at once -----------------------------------------------------
  r.Q = linear_forward(mha.q_proj, query);  // [n_q x E]
  r.K = linear_forward(mha.k_proj, key);    // [n_k x E]
  r.V = linear_forward(mha.v_proj, value);  // [n_k x E]
  // ---- one attention per head, on column blocks -------------------------------------------------
  r.concat.resize(query.rows(), E);  // [n_q x E]
  if (opts.need_weights || fits_one_tile(query.rows(), key.rows())) {
    r.weights.resize(static_cast<std::size_t>(H));
    const AttentionOptions head_opts{.allowed = opts.allowed};  // scale 1/sqrt(d_k), -inf
    for (Index h = 0; h < H; ++h) {
      MatrixOf<T>& W = r.weights[static_cast<std::size_t>(h)];
      attention_into(r.Q.middleCols(h * d_k, d_k),       // Q_h [n_q x d_k], a view
                     r.K.middleCols(h * d_k, d_k),       // K_h [n_k x d_k]
                     r.V.middleCols(h * d_k, d_k),       // V_h [n_k x d_k]
                     W,                                  // W   [n_q x n_k]
                     r.concat.middleCols(h * d_k, d_k),  // head h's columns of the concat
                     head_opts);
    }
  } else {
    // The tiled path: no [n_q x n_k] matrix at all. One head per thread when the heads are
    // worth a thread each; each head writes only its own columns, so the bytes do not depend
    // on the number of threads.
    r.lse.resize(query.rows(), H);                         // [n_q x H]
    if (opts.allowed) r.allowed = opts.allowed->matrix();  // [n_q x n_k], for the backward
    const TiledAttentionOptions head_opts{.allowed = opts.allowed};
    const bool parallel = H > 1 && worth_threads(query.rows(), key.rows(), E);
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (Index h = 0; h < H; ++h) {
      tiled_attention_into(r.Q.middleCols(h * d_k, d_k), r.K.middleCols(h * d_k, d_k),
                           r.V.middleCols(h * d_k, d_k),       // Q_h, K_h, V_h: views
                           r.concat.middleCols(h * d_k, d_k),  // head h's columns [n_q x d_k]
                           r.lse.col(h), head_opts);           // L of head h [n_q]
    }
  }
  // ---- mix the heads ----------------------------------------------------------------------------
  r.out = linear_forward(mha.out_proj, r.concat);  // [n_q x E]
  return r;
}

template <Real T>
MultiHeadInputGradsOf<T> multi_head_backward(const MultiHeadAttentionOf<T>& mha,
                                             const InView<T>& query, const InView<T>& key,
                                             const InView<T>& value,
                                             const MultiHeadResultOf<T>& cache,
                                             const InView<T>& d_out,
                                             MultiHeadAttentionOf<T>& grads) {
  check_multi_head(mha, "multi_head_backward");
  check_grads_like(mha, grads, "multi_head_backward",
                   {{"query", memory_of(query)},
                    {"key", memory_of(key)},
                    {"value", memory_of(value)},
                    {"d_out", memory_of(d_out)}});
  const Index E = mha.d_model(), H = mha.heads, d_k = mha.d_k();
  const Index n_q = query.rows(), n_k = key.rows();
  const bool plain = !cache.weights.empty();
  require((plain ? cache.weights.size() == static_cast<std::size_t>(H)
                 : cache.lse.rows() == n_q && cache.lse.cols() == H) &&
              cache.Q.rows() == n_q && cache.K.rows() == n_k && cache.concat.rows() == n_q &&
              d_out.rows() == n_q && d_out.cols() == E && value.rows() == n_k,
          "multi_head_backward", [&] {
            return "query is " + shape_str(query) + ", key " + shape_str(key) + ", d_out " +
                   shape_str(d_out) + " and the cache holds Q " + shape_str(cache.Q) + " and " +
                   std::to_string(cache.weights.size()) +
                   " heads' weights: pass the result of "
                   "the forward on these inputs, and d_out [n_q x d_model]";
          });
  // ---- back through the mixing of the heads -----------------------------------------------------
  const MatrixOf<T> d_concat =
      linear_backward(mha.out_proj, cache.concat, d_out, grads.out_proj);  // [n_q x E]
  // ---- each head's attention, into its own columns ----------------------------------------------
  MatrixOf<T> dQ(n_q, E), dK(n_k, E), dV(n_k, E);  // [n_q x E], [n_k x E], [n_k x E]
  if (plain) {                                     // the plain path's cache: every head's weights
    for (Index h = 0; h < H; ++h) {
      attention_backward_into(cache.Q.middleCols(h * d_k, d_k), cache.K.middleCols(h * d_k, d_k),
                              cache.V.middleCols(h * d_k, d_k),
                              cache.weights[static_cast<std::size_t>(h)],
                              d_concat.middleCols(h * d_k, d_k), dQ.middleCols(h * d_k, d_k),
                              dK.middleCols(h * d_k, d_k), dV.middleCols(h * d_k, d_k));
    }
  } else {  // the tiled path's cache: each head's output (its columns of concat), L and the mask
    TiledAttentionOptions head_opts;
    if (cache.allowed.size() != 0) head_opts.allowed.emplace(cache.allowed);
    const bool parallel = H > 1 && worth_threads(n_q, n_k, E);
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (Index h = 0; h < H; ++h) {
      tiled_attention_backward_into(
          cache.Q.middleCols(h * d_k, d_k), cache.K.middleCols(h * d_k, d_k),
          cache.V.middleCols(h * d_k, d_k), cache.concat.middleCols(h * d_k, d_k), cache.lse.col(h),
          d_concat.middleCols(h * d_k, d_k), dQ.middleCols(h * d_k, d_k),
          dK.middleCols(h * d_k, d_k), dV.middleCols(h * d_k, d_k), head_opts);
    }
  }
  // ---- back through the three projections -------------------------------------------------------
  return {linear_backward(mha.q_proj, query, dQ, grads.q_proj),   // [n_q x E]
          linear_backward(mha.k_proj, key, dK, grads.k_proj),     // [n_k x E]
          linear_backward(mha.v_proj, value, dV, grads.v_proj)};  // [n_k x E]
}

#define ATTN_INSTANTIATE(T)                                                                    \
  template void check_multi_head(const MultiHeadAttentionOf<T>&, const char*);                 \
  template MultiHeadResultOf<T> multi_head_forward(const MultiHeadAttentionOf<T>&,             \
                                                   const InView<T>&, const InView<T>&,         \
                                                   const InView<T>&, const MultiHeadOptions&); \
  template MultiHeadInputGradsOf<T> multi_head_backward(                                       \
      const MultiHeadAttentionOf<T>&, const InView<T>&, const InView<T>&, const InView<T>&,    \
      const MultiHeadResultOf<T>&, const InView<T>&, MultiHeadAttentionOf<T>&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

Batch MultiHeadBatchResult::average_weights() const {
  const Index B = weights.batch() / heads;
  Batch mean(B, weights.rows(), weights.cols());  // [B, n_q, n_k]
  for (Index b = 0; b < B; ++b) {
    for (Index h = 0; h < heads; ++h) mean[b] += head_weights(b, h);
    mean[b] /= static_cast<float>(heads);
  }
  return mean;
}

MultiHeadBatchResult multi_head_forward(const MultiHeadAttention& mha, const Batch& query,
                                        const Batch& key, const Batch& value,
                                        const MultiHeadBatchOptions& opts) {
  check_multi_head(mha, "multi_head_forward");
  const Index B = query.batch(), H = mha.heads;
  require(key.batch() == B && value.batch() == B, "multi_head_forward", [&] {
    return "query is " + query.shape_str() + ", key is " + key.shape_str() + ", value is " +
           value.shape_str() + ": the batch sizes (first dimension) must agree";
  });
  require(!opts.allowed || opts.allowed->fits(B), "multi_head_forward", [&] {
    return "the mask is " + opts.allowed->shape_str() + " but query is " + query.shape_str() +
           ": the mask's batch must be " + std::to_string(B) + " or 1 (shared)";
  });
  MultiHeadBatchResult r{Batch(B, query.rows(), mha.d_model()),
                         Batch(B * H, query.rows(), key.rows()), H};
  for (Index b = 0; b < B; ++b) {
    MultiHeadOptions one_opts;
    if (opts.allowed) one_opts.allowed.emplace(opts.allowed->element(b));
    const MultiHeadResult one = multi_head_forward(mha, query[b], key[b], value[b], one_opts);
    r.out[b] = one.out;  // [n_q x E]
    for (Index h = 0; h < H; ++h) r.weights[b * H + h] = one.weights[static_cast<std::size_t>(h)];
  }
  return r;
}

}  // namespace attn
