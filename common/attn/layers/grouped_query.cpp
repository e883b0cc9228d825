// grouped_query.cpp: h query heads over g key/value heads, as column blocks of three
// projections, with RoPE and a sliding window; the backward pass sums each kv head's group.
#include "attn/layers/grouped_query.hpp"

#include "attn/core/memory.hpp"
#include "attn/core/threads.hpp"
#include "attn/kernels/tiled_attention.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include <algorithm>
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

// The threads for H (sequence, head) attentions over n tokens, each d_k wide: the caller's
// count, or by default one team when the work is worth a parallel region (threads.hpp).
int team(int threads, Index n, Index H, Index d_k) {
  const double flops =
      4.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(H * d_k);
  return team_for(threads, H, flops);
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
              d_k = layer.d_k(), B = opts.sequences;
  require(B >= 1 && x.rows() % std::max<Index>(B, 1) == 0, where, [&] {
    return "x has " + std::to_string(x.rows()) + " rows, which are not " + std::to_string(B) +
           " sequences of one length: sequences must be >= 1 and divide the rows";
  });
  const Index n = x.rows() / B;  // each sequence's tokens
  require(n >= 1 && x.cols() == E, where, [&] {
    return "x is " + shape_str(x) + " but the layer takes [n x d_model] = [n x " +
           std::to_string(E) + "], n >= 1";
  });
  gqa::check_options(opts, d_k, n, where);
  GroupedQueryResultOf<T> r;
  r.options = opts;
  // ---- three projections, every head (and every sequence) at once -------------------------------
  r.Q = linear_forward(layer.q_proj, x);  // [B n x h d_k]
  r.K = linear_forward(layer.k_proj, x);  // [B n x g d_k]
  r.V = linear_forward(layer.v_proj, x);  // [B n x g d_k]
  if (opts.rope != nullptr) {  // rotate every head of Q and of K; row b n + i sits at position i
    for (Index b = 0; b < B; ++b) {
      rope_inplace<T>(r.Q.middleRows(b * n, n), *opts.rope,
                      {.layout = opts.rope_layout, .heads = H});
      rope_inplace<T>(r.K.middleRows(b * n, n), *opts.rope,
                      {.layout = opts.rope_layout, .heads = g});
    }
  }
  // ---- one attention per (sequence, query head), on the columns of its kv head ------------------
  // Task t = b h + q reads sequence b's rows of head q's columns (and of kv head q / G's), and
  // writes only its own block: any number of threads gives the same bytes.
  r.concat.resize(B * n, H * d_k);  // [B n x h d_k]
  const auto block = [&](auto& m, Index b, Index head) {
    return m.block(b * n, head * d_k, n, d_k);  // [n x d_k]
  };
  const int team = gqa::team(opts.threads, n, B * H, d_k);
  if (opts.need_weights || gqa::fits_one_tile(n)) {
    require_fits_in_memory(where, ElementCount(n, n, B * H), sizeof(T), "for the weights", [&] {
      return std::to_string(B * H) + " heads over " + std::to_string(n) + " tokens";
    });
    const AllowedMask mask = gqa::plain_mask(opts, n);  // [n x n], empty: every key
    AttentionOptions head_opts;                         // scale 1/sqrt(d_k), blocked scores -inf
    if (mask.size() != 0) head_opts.allowed.emplace(mask);
    r.weights.resize(static_cast<std::size_t>(B * H));
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
    for (Index t = 0; t < B * H; ++t) {
      const Index b = t / H, q = t % H, j = q / G;  // sequence, query head, its kv head
      MatrixOf<T>& W = r.weights[static_cast<std::size_t>(t)];
      attention_into(block(r.Q, b, q), block(r.K, b, j), block(r.V, b, j),  // [n x d_k] each
                     W, block(r.concat, b, q), head_opts);  // W [n x n], head q's columns
    }
  } else {
    // The tiled path: no [n x n] matrix per head, each head's log-sum-exp kept instead.
    r.lse.resize(B * n, H);  // [B n x h]
    // The window needs no mask in memory: the kernel skips the tiles older than every window.
    const TiledAttentionOptions head_opts{.causal = opts.causal, .window = opts.window};
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
    for (Index t = 0; t < B * H; ++t) {
      const Index b = t / H, q = t % H, j = q / G;
      tiled_attention_into(block(r.Q, b, q), block(r.K, b, j), block(r.V, b, j),  // views
                           block(r.concat, b, q),  // head q's columns [n x d_k]
                           r.lse.col(q).segment(b * n, n), head_opts);  // L of head q [n]
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
  const GroupedQueryOptions& opts = cache.options;
  const Index E = layer.d_model(), H = layer.heads, g = layer.kv_heads, G = layer.group_size(),
              d_k = layer.d_k(), B = opts.sequences, rows = x.rows();
  require(B >= 1 && rows % std::max<Index>(B, 1) == 0 && rows >= B, where, [&] {
    return "x has " + std::to_string(rows) + " rows, which are not the forward's " +
           std::to_string(B) + " sequences of one length";
  });
  const Index n = rows / B;
  const bool plain = !cache.weights.empty();
  bool weights_ok = cache.weights.size() == static_cast<std::size_t>(B * H);
  for (const MatrixOf<T>& W : cache.weights)
    weights_ok = weights_ok && W.rows() == n && W.cols() == n;
  require(x.cols() == E && d_out.rows() == rows && d_out.cols() == E && cache.Q.rows() == rows &&
              cache.Q.cols() == H * d_k && cache.K.rows() == rows && cache.K.cols() == g * d_k &&
              cache.V.rows() == rows && cache.V.cols() == g * d_k && cache.concat.rows() == rows &&
              cache.concat.cols() == H * d_k &&
              (plain ? weights_ok : cache.lse.rows() == rows && cache.lse.cols() == H),
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
      linear_backward(layer.out_proj, cache.concat, d_out, grads.out_proj);  // [B n x h d_k]
  // ---- each (sequence, query head)'s attention --------------------------------------------------
  // Task t = b h + q writes dQ_q into its own block of dQ, and its share of dK_j, dV_j into its
  // own block of dK_heads, dV_heads (one column block per query head, as if K and V had been
  // repeated); each kv head then sums its group's blocks in order. With G = 1 they are dK, dV.
  MatrixOf<T> dQ(rows, H * d_k);                                 // [B n x h d_k]
  MatrixOf<T> dK_heads(rows, H * d_k), dV_heads(rows, H * d_k);  // [B n x h d_k]
  const TiledAttentionOptions tiled_opts{.causal = opts.causal, .window = opts.window};
  const auto block = [&](auto& m, Index b, Index head) {
    return m.block(b * n, head * d_k, n, d_k);  // [n x d_k]
  };
  const int team = gqa::team(opts.threads, n, B * H, d_k);
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
  for (Index t = 0; t < B * H; ++t) {
    const Index b = t / H, q = t % H, j = q / G;
    if (plain) {  // the plain path's cache: every head's weights
      attention_backward_into(block(cache.Q, b, q), block(cache.K, b, j), block(cache.V, b, j),
                              cache.weights[static_cast<std::size_t>(t)], block(d_concat, b, q),
                              block(dQ, b, q), block(dK_heads, b, q), block(dV_heads, b, q));
    } else {  // the tiled path's: the head's output (its block of concat) and its L
      tiled_attention_backward_into(
          block(cache.Q, b, q), block(cache.K, b, j), block(cache.V, b, j),
          block(cache.concat, b, q), cache.lse.col(q).segment(b * n, n), block(d_concat, b, q),
          block(dQ, b, q), block(dK_heads, b, q), block(dV_heads, b, q), tiled_opts);
    }
  }
  MatrixOf<T> dK, dV;  // [B n x g d_k]
  if (G == 1) {
    dK = std::move(dK_heads);
    dV = std::move(dV_heads);
  } else {
    // The backward of repeat_interleave: kv head j's gradient is the sum over query heads
    // jG .. jG + G - 1, added in that order.
    dK.resize(rows, g * d_k);
    dV.resize(rows, g * d_k);
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
    for (Index b = 0; b < B; ++b) {
      rope_backward_inplace<T>(dQ.middleRows(b * n, n), *opts.rope,
                               {.layout = opts.rope_layout, .heads = H});
      rope_backward_inplace<T>(dK.middleRows(b * n, n), *opts.rope,
                               {.layout = opts.rope_layout, .heads = g});
    }
  }
  // ---- back through the three projections: x reached the output three ways ----------------------
  MatrixOf<T> dx = linear_backward(layer.q_proj, x, dQ, grads.q_proj);  // [B n x d_model]
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
