// grouped_query.cpp: h query heads over g key/value heads, as column blocks of three
// projections, with RoPE and a sliding window; the backward pass sums each kv head's group.
#include "attn/layers/grouped_query.hpp"

#include "attn/core/memory.hpp"
#include "attn/core/threads.hpp"
#include "attn/kernels/tiled_attention.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

namespace attn {

// The helpers' own namespace: the unity build compiles layers/ as one unit, where
// multi_head.cpp's helpers of the same names live in the same anonymous namespace.
namespace gqa {
namespace {

// Whether n x n scores fit in one tile of the tiled path (128 x 128 by default): then tiling
// has nothing to split and the plain path does the same work with less bookkeeping, as
// multi_head.cpp decides (chapter 09's training on 8 and 24 tokens ran 27% slower tiled).
bool fits_one_tile(Index n) {
  const TiledAttentionOptions tiles;
  return n <= tiles.query_tile && n <= tiles.key_tile;
}

// Whether H heads of attention over n tokens, each d_k wide, are worth a thread each: a
// parallel region costs microseconds, far more than the heads of a short sequence.
bool worth_threads(Index n, Index H, Index d_k) {
  return 4.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(H * d_k) >=
         kThreadedFlops;
}

// The options against the layer and n tokens: the window, and the RoPE table's width and reach.
void check_options(const GroupedQueryOptions& opts, Index d_k, Index n, const char* where) {
  require(opts.window >= 0, where, [&] {
    return "window is " + std::to_string(opts.window) + ": it must be >= 1, or 0 for no window";
  });
  require(opts.window == 0 || opts.causal, where, [&] {
    return "a sliding window (window = " + std::to_string(opts.window) +
           ") needs causal = true: query i reads keys (i - W, i], never a later one";
  });
  if (opts.rope == nullptr) return;
  const RopeTable& table = *opts.rope;
  require(table.dim == d_k, where, [&] {
    return "the RoPE table rotates " + std::to_string(table.dim) +
           " features per head but the layer's heads are d_k = " + std::to_string(d_k) +
           " wide: make the table with rope_table(positions, d_k)";
  });
  require(n <= table.positions, where, [&] {
    return "x has " + std::to_string(n) + " tokens (positions 0 .. " + std::to_string(n - 1) +
           ") but the RoPE table covers " + std::to_string(table.positions) +
           " positions: make a longer table";
  });
}

// The plain path's mask [n x n]: causal, or the sliding window (which is causal too); empty
// when the attention is not causal (every key).
AllowedMask plain_mask(const GroupedQueryOptions& opts, Index n) {
  if (!opts.causal) return {};
  return opts.window > 0 ? sliding_window_mask(n, opts.window) : causal_mask(n);
}

}  // namespace
}  // namespace gqa

void check_grouped_query_sizes(Index d_model, Index heads, Index kv_heads, const char* where) {
  require_at_least_one(d_model, where, "d_model");
  require_at_least_one(heads, where, "heads");
  require_at_least_one(kv_heads, where, "kv_heads");
  require(heads % kv_heads == 0, where, [&] {
    return std::to_string(kv_heads) + " kv_heads do not divide " + std::to_string(heads) +
           " heads: each kv head serves a group of heads / kv_heads query heads";
  });
  require(d_model % heads == 0, where, [&] {
    return std::to_string(heads) + " heads do not divide d_model = " + std::to_string(d_model) +
           ": each head needs d_k = d_model / heads columns";
  });
}

template <Real T>
void check_grouped_query(const GroupedQueryAttentionOf<T>& layer, const char* where) {
  const Index E = layer.q_proj.in_features();
  check_grouped_query_sizes(E, layer.heads, layer.kv_heads, where);
  const Index d_k = E / layer.heads;
  const auto check_shape = [&](const LinearOf<T>& l, const char* name, Index rows, Index cols) {
    check_linear(l, where);
    require(l.weight.rows() == rows && l.weight.cols() == cols, where, [&] {
      return std::string(name) + " is " + shape_str(l.weight) + " but " +
             std::to_string(layer.heads) + " heads and " + std::to_string(layer.kv_heads) +
             " kv heads of d_k = " + std::to_string(d_k) + " over d_model = " + std::to_string(E) +
             " make it " + shape_str(rows, cols);
    });
  };
  check_shape(layer.q_proj, "W_Q", layer.heads * d_k, E);
  check_shape(layer.k_proj, "W_K", layer.kv_heads * d_k, E);
  check_shape(layer.v_proj, "W_V", layer.kv_heads * d_k, E);
  check_shape(layer.out_proj, "W_O", E, layer.heads * d_k);
}

GroupedQueryAttention grouped_query_init(Rng& rng, Index d_model, Index heads, Index kv_heads,
                                         bool bias) {
  check_grouped_query_sizes(d_model, heads, kv_heads, "grouped_query_init");
  const Index kv_width = kv_heads * (d_model / heads);  // g d_k <= d_model: no overflow
  // W_Q and W_O [E x E], W_K and W_V [g d_k x E], and their biases: checked as a whole before
  // the first draw, so a refusal draws nothing.
  require_fits_in_memory("grouped_query_init",
                         ElementCount(d_model, d_model, 2)
                             .add(kv_width, d_model, 2)
                             .add(1, bias ? d_model : 0, 2)
                             .add(1, bias ? kv_width : 0, 2),
                         sizeof(float), "of parameters",
                         [&] { return "d_model " + std::to_string(d_model); });
  GroupedQueryAttention layer;
  layer.heads = heads;
  layer.kv_heads = kv_heads;
  layer.q_proj = linear_init(rng, d_model, d_model, bias);    // [h d_k x E]
  layer.k_proj = linear_init(rng, d_model, kv_width, bias);   // [g d_k x E]
  layer.v_proj = linear_init(rng, d_model, kv_width, bias);   // [g d_k x E]
  layer.out_proj = linear_init(rng, d_model, d_model, bias);  // [E x h d_k]
  return layer;
}

template <Real T>
GroupedQueryResultOf<T> grouped_query_forward(const GroupedQueryAttentionOf<T>& layer,
                                              const InView<T>& x, const GroupedQueryOptions& opts) {
  const char* where = "grouped_query_forward";
  check_grouped_query(layer, where);
  const Index E = layer.d_model(), H = layer.heads, g = layer.kv_heads, G = layer.group_size(),
              d_k = layer.d_k(), n = x.rows();
  require(n >= 1 && x.cols() == E, where, [&] {
    return "x is " + shape_str(x) + " but the layer takes [n x d_model] = [n x " +
           std::to_string(E) + "], n >= 1";
  });
  gqa::check_options(opts, d_k, n, where);
  GroupedQueryResultOf<T> r;
  r.options = opts;
  // ---- three projections, every head at once ----------------------------------------------------
  r.Q = linear_forward(layer.q_proj, x);  // [n x h d_k]
  r.K = linear_forward(layer.k_proj, x);  // [n x g d_k]
  r.V = linear_forward(layer.v_proj, x);  // [n x g d_k]
  if (opts.rope != nullptr) {  // rotate every head of Q and of K; token r sits at position r
    rope_inplace<T>(r.Q, *opts.rope, {.layout = opts.rope_layout, .heads = H});
    rope_inplace<T>(r.K, *opts.rope, {.layout = opts.rope_layout, .heads = g});
  }
  // ---- one attention per query head, on the columns of its kv head ------------------------------
  r.concat.resize(n, H * d_k);  // [n x h d_k]
  if (opts.need_weights || gqa::fits_one_tile(n)) {
    require_fits_in_memory(where, ElementCount(n, n, H), sizeof(T), "for the weights", [&] {
      return std::to_string(H) + " heads over " + std::to_string(n) + " tokens";
    });
    const AllowedMask mask = gqa::plain_mask(opts, n);  // [n x n], empty: every key
    AttentionOptions head_opts;                         // scale 1/sqrt(d_k), blocked scores -inf
    if (mask.size() != 0) head_opts.allowed.emplace(mask);
    r.weights.resize(static_cast<std::size_t>(H));
    for (Index q = 0; q < H; ++q) {
      const Index j = q / G;  // the kv head of query head q
      MatrixOf<T>& W = r.weights[static_cast<std::size_t>(q)];
      const Index empty_rows = attention_weights_into(r.Q.middleCols(q * d_k, d_k),  // [n x d_k]
                                                      r.K.middleCols(j * d_k, d_k),  // [n x d_k]
                                                      W, head_opts);                 // [n x n]
      weighted_values_into(W, r.V.middleCols(j * d_k, d_k),    // [n x n] [n x d_k]
                           r.concat.middleCols(q * d_k, d_k),  // head q's columns
                           empty_rows);
    }
  } else {
    // The tiled path: no [n x n] matrix per head. One head per thread when worth it; each head
    // writes only its own columns, so the bytes do not depend on the number of threads.
    r.lse.resize(n, H);  // [n x h]
    // The window needs no mask in memory: the kernel skips the tiles older than every window.
    const TiledAttentionOptions head_opts{.causal = opts.causal, .window = opts.window};
    const bool parallel = H > 1 && gqa::worth_threads(n, H, d_k);
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (Index q = 0; q < H; ++q) {
      const Index j = q / G;
      tiled_attention_into(r.Q.middleCols(q * d_k, d_k), r.K.middleCols(j * d_k, d_k),
                           r.V.middleCols(j * d_k, d_k),       // Q_q, K_j, V_j: views
                           r.concat.middleCols(q * d_k, d_k),  // head q's columns [n x d_k]
                           r.lse.col(q), head_opts);           // L of head q [n]
    }
  }
  // ---- mix the heads ----------------------------------------------------------------------------
  r.out = linear_forward(layer.out_proj, r.concat);  // [n x d_model]
  return r;
}

template <Real T>
MatrixOf<T> grouped_query_backward(const GroupedQueryAttentionOf<T>& layer, const InView<T>& x,
                                   const GroupedQueryResultOf<T>& cache, const InView<T>& d_out,
                                   GroupedQueryAttentionOf<T>& grads) {
  const char* where = "grouped_query_backward";
  check_grouped_query(layer, where);
  check_grads_like(layer, grads, where, {{"x", memory_of(x)}, {"d_out", memory_of(d_out)}});
  const Index E = layer.d_model(), H = layer.heads, g = layer.kv_heads, G = layer.group_size(),
              d_k = layer.d_k(), n = x.rows();
  const GroupedQueryOptions& opts = cache.options;
  const bool plain = !cache.weights.empty();
  bool weights_ok = cache.weights.size() == static_cast<std::size_t>(H);
  for (const MatrixOf<T>& W : cache.weights)
    weights_ok = weights_ok && W.rows() == n && W.cols() == n;
  require(x.cols() == E && d_out.rows() == n && d_out.cols() == E && cache.Q.rows() == n &&
              cache.Q.cols() == H * d_k && cache.K.rows() == n && cache.K.cols() == g * d_k &&
              cache.V.rows() == n && cache.V.cols() == g * d_k && cache.concat.rows() == n &&
              cache.concat.cols() == H * d_k &&
              (plain ? weights_ok : cache.lse.rows() == n && cache.lse.cols() == H),
          where, [&] {
            return "x is " + shape_str(x) + ", d_out " + shape_str(d_out) +
                   " and the cache holds Q " + shape_str(cache.Q) + ", K " + shape_str(cache.K) +
                   ", V " + shape_str(cache.V) + ", concat " + shape_str(cache.concat) + ", " +
                   std::to_string(cache.weights.size()) + " heads' weights and lse " +
                   shape_str(cache.lse) + ": pass the result of the forward on this x (" +
                   std::to_string(H) + " heads, " + std::to_string(g) +
                   " kv heads), and d_out [n x d_model]";
          });
  gqa::check_options(opts, d_k, n, where);
  // ---- back through the mixing of the heads -----------------------------------------------------
  const MatrixOf<T> d_concat =
      linear_backward(layer.out_proj, cache.concat, d_out, grads.out_proj);  // [n x h d_k]
  // ---- each query head's attention --------------------------------------------------------------
  // Head q writes dQ_q into its own columns of dQ, and its share of dK_j, dV_j into its own
  // columns of dK_heads, dV_heads (one block per query head, as if K and V had been repeated);
  // each kv head then sums its group's blocks in order. With G = 1 the blocks are dK, dV.
  MatrixOf<T> dQ(n, H * d_k);                              // [n x h d_k]
  MatrixOf<T> dK_heads(n, H * d_k), dV_heads(n, H * d_k);  // [n x h d_k]
  const TiledAttentionOptions tiled_opts{.causal = opts.causal, .window = opts.window};
  // Threads on the tiled path only, as multi_head.cpp: the plain path's GEMMs are Eigen's.
  const bool parallel = !plain && H > 1 && gqa::worth_threads(n, H, d_k);
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (Index q = 0; q < H; ++q) {
    const Index j = q / G;
    const auto cols = [&](const auto& m, Index head) { return m.middleCols(head * d_k, d_k); };
    if (plain) {  // the plain path's cache: every head's weights
      attention_backward_into(cols(cache.Q, q), cols(cache.K, j), cols(cache.V, j),
                              cache.weights[static_cast<std::size_t>(q)], cols(d_concat, q),
                              dQ.middleCols(q * d_k, d_k), dK_heads.middleCols(q * d_k, d_k),
                              dV_heads.middleCols(q * d_k, d_k));
    } else {  // the tiled path's: the head's output (its columns of concat) and its L
      tiled_attention_backward_into(cols(cache.Q, q), cols(cache.K, j), cols(cache.V, j),
                                    cols(cache.concat, q), cache.lse.col(q), cols(d_concat, q),
                                    dQ.middleCols(q * d_k, d_k), dK_heads.middleCols(q * d_k, d_k),
                                    dV_heads.middleCols(q * d_k, d_k), tiled_opts);
    }
  }
  MatrixOf<T> dK, dV;  // [n x g d_k]
  if (G == 1) {
    dK = std::move(dK_heads);
    dV = std::move(dV_heads);
  } else {
    // The backward of repeat_interleave: kv head j's gradient is the sum over query heads
    // jG .. jG + G - 1, added in that order.
    dK.resize(n, g * d_k);
    dV.resize(n, g * d_k);
    for (Index j = 0; j < g; ++j) {
      dK.middleCols(j * d_k, d_k) = dK_heads.middleCols(j * G * d_k, d_k);
      dV.middleCols(j * d_k, d_k) = dV_heads.middleCols(j * G * d_k, d_k);
      for (Index r = 1; r < G; ++r) {
        dK.middleCols(j * d_k, d_k) += dK_heads.middleCols((j * G + r) * d_k, d_k);
        dV.middleCols(j * d_k, d_k) += dV_heads.middleCols((j * G + r) * d_k, d_k);
      }
    }
  }
  // ---- back through RoPE: a rotation's transpose turns the gradient back ------------------------
  if (opts.rope != nullptr) {
    rope_backward_inplace<T>(dQ, *opts.rope, {.layout = opts.rope_layout, .heads = H});
    rope_backward_inplace<T>(dK, *opts.rope, {.layout = opts.rope_layout, .heads = g});
  }
  // ---- back through the three projections: x reached the output three ways ----------------------
  MatrixOf<T> dx = linear_backward(layer.q_proj, x, dQ, grads.q_proj);  // [n x d_model]
  dx += linear_backward(layer.k_proj, x, dK, grads.k_proj);
  dx += linear_backward(layer.v_proj, x, dV, grads.v_proj);
  return dx;
}

#define ATTN_INSTANTIATE(T)                                                                        \
  template void check_grouped_query(const GroupedQueryAttentionOf<T>&, const char*);               \
  template GroupedQueryResultOf<T> grouped_query_forward(                                          \
      const GroupedQueryAttentionOf<T>&, const InView<T>&, const GroupedQueryOptions&);            \
  template MatrixOf<T> grouped_query_backward(const GroupedQueryAttentionOf<T>&, const InView<T>&, \
                                              const GroupedQueryResultOf<T>&, const InView<T>&,    \
                                              GroupedQueryAttentionOf<T>&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
