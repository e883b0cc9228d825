// latent_attention.cpp: MLA's naive form (K and V formed, attention() per head) and its
// absorbed form (queries taken into the latent space), with the one-token decoding step that
// the absorbed form runs row by row.
#include "attn/layers/latent_attention.hpp"

#include "attn/core/memory.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"
#include "attn/ops/softmax.hpp"

#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace attn {

namespace {

// d_rope is RoPE's dim: even, and at least one pair.
void require_latent_rope_width(Index d_rope, const char* where) {
  require(d_rope >= 2 && d_rope % 2 == 0, where, [&] {
    return "d_rope is " + std::to_string(d_rope) + ": it must be even and >= 2 (RoPE turns pairs)";
  });
}

void check_latent_sizes(Index d_model, Index heads, Index d_nope, Index d_rope, Index d_v,
                        Index d_c, const char* where) {
  require_at_least_one(d_model, where, "d_model");
  require_at_least_one(heads, where, "heads");
  require_at_least_one(d_nope, where, "d_nope");
  require_latent_rope_width(d_rope, where);
  require_at_least_one(d_v, where, "d_v");
  require_at_least_one(d_c, where, "d_c");
}

// The RoPE table must exist, be d_rope wide and reach `last_position`.
void check_latent_rope_table(const LatentAttentionOptions& opts, Index d_rope, Index last_position,
                             const char* where) {
  require(opts.rope != nullptr, where,
          "no RoPE table: set opts.rope to a rope_table(positions, d_rope) for q^R and k^R");
  require(opts.rope->dim == d_rope, where, [&] {
    return "the RoPE table's dim is " + std::to_string(opts.rope->dim) +
           " but the layer's d_rope is " + std::to_string(d_rope) +
           ": the table rotates q^R and k^R, so they must agree";
  });
  require(last_position < opts.rope->positions, where, [&] {
    return "position " + std::to_string(last_position) + " is beyond the RoPE table of " +
           std::to_string(opts.rope->positions) + " positions (0 .. " +
           std::to_string(opts.rope->positions - 1) + ")";
  });
}

template <Real T>
void check_latent_input(const LatentAttentionOf<T>& layer, const InView<T>& x,
                        const LatentAttentionOptions& opts, const char* where) {
  check_latent_attention(layer, where);
  require(x.rows() >= 1 && x.cols() == layer.d_model(), where, [&] {
    return "x is " + shape_str(x) + " but the layer's d_model is " +
           std::to_string(layer.d_model()) + ": x must be [n x " + std::to_string(layer.d_model()) +
           "] with n >= 1";
  });
  check_latent_rope_table(opts, layer.d_rope, x.rows() - 1, where);
}

// One token's projections, as a decoding step makes them.
template <Real T>
struct LatentTokenProjection {
  MatrixOf<T> q;         // [1 x h d_qk]: head h's q^C, then its q^R rotated
  MatrixOf<T> q_latent;  // [h x d_c]: row h = q_lat_h = q_h^C W_UK_h
  MatrixOf<T> q_rope;    // [h x d_rope]: row h = RoPE(q_h^R)
  MatrixOf<T> c;         // [1 x d_c]
  MatrixOf<T> k_rope;    // [1 x d_rope], rotated
};

// The projections of the token at `position`, x_row [1 x d_model].
template <Real T>
LatentTokenProjection<T> project_latent_token(const LatentAttentionOf<T>& layer,
                                              const InView<T>& x_row, Index position,
                                              const LatentAttentionOptions& opts) {
  const Index H = layer.heads, dn = layer.d_nope, dr = layer.d_rope, dqk = layer.d_qk();
  // A copy of its own, so that a row of a sequence and a lone decoded row enter the products
  // from equally aligned memory: Eigen's vectorised loops may split a sum by the alignment of
  // their operands, and the two paths must run the same arithmetic to the bit.
  const MatrixOf<T> x = x_row;  // [1 x d_model]
  const RopeOptions at{.layout = opts.layout, .first_position = position};
  LatentTokenProjection<T> t;
  t.q = linear_forward(layer.q_proj, x);  // [1 x h d_qk]
  for (Index h = 0; h < H; ++h) rope_inplace<T>(t.q.middleCols(h * dqk + dn, dr), *opts.rope, at);
  t.q_latent.resize(H, layer.d_c);  // [h x d_c]
  t.q_rope.resize(H, dr);           // [h x d_rope]
  for (Index h = 0; h < H; ++h) {
    // q_h^C [1 x d_nope] times W_UK_h [d_nope x d_c]: the query in the latent space.
    t.q_latent.row(h).noalias() =
        t.q.middleCols(h * dqk, dn) * layer.k_up.weight.middleRows(h * dn, dn);
    t.q_rope.row(h) = t.q.middleCols(h * dqk + dn, dr);
  }
  t.c = linear_forward(layer.kv_down, x);      // [1 x d_c]
  t.k_rope = linear_forward(layer.k_rope, x);  // [1 x d_rope]
  rope_inplace<T>(t.k_rope, *opts.rope, at);
  return t;
}

// One query's output over m keys held as C [m x d_c] and KR [m x d_rope]: per head, the scores
// q_lat_h . c_j + RoPE(q_h^R) . k^R_j, scaled, their softmax p, the latent sum p^T C, and
// W_UV_h last. Writes the concatenation into concat [1 x h d_v] and, when `weights` is not
// null, head h's p into the first m entries of row `row` of (*weights)[h]. Returns the output
// row [1 x d_model].
template <Real T>
MatrixOf<T> attend_latent(const LatentAttentionOf<T>& layer, const LatentTokenProjection<T>& t,
                          const InView<T>& C, const InView<T>& KR, MatrixOf<T>& concat,
                          std::type_identity_t<std::vector<MatrixOf<T>>>* weights, Index row) {
  using Column = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  const Index H = layer.heads, dv = layer.d_v, m = C.rows();
  // The naive form's scale, computed as attention() computes its default.
  const T scale = T(1) / std::sqrt(static_cast<T>(layer.d_qk()));
  concat.resize(1, H * dv);          // [1 x h d_v]
  Column p(m);                       // [m]
  MatrixOf<T> summed(1, layer.d_c);  // [1 x d_c]
  for (Index h = 0; h < H; ++h) {
    p.noalias() = C * t.q_latent.row(h).transpose();  // [m x d_c] [d_c]: q_lat_h . c_j
    p.noalias() += KR * t.q_rope.row(h).transpose();  // [m x d_rope] [d_rope]: the RoPE part
    p *= scale;
    softmax_inplace(std::span<T>(p.data(), static_cast<std::size_t>(m)));
    if (weights) (*weights)[static_cast<std::size_t>(h)].row(row).head(m) = p.transpose();
    summed.noalias() = p.transpose() * C;  // [1 x m] [m x d_c]: sum_j p_j c_j
    // W_UV_h [d_v x d_c] applied once, to the sum: V_h is never formed.
    concat.middleCols(h * dv, dv).noalias() =
        summed * layer.v_up.weight.middleRows(h * dv, dv).transpose();
    // The weights sum to 1, so b_UV_h passes through the sum unchanged. (b_UK_h shifts every
    // score of the row alike, and the softmax drops it: header.)
    if (layer.v_up.has_bias()) concat.middleCols(h * dv, dv) += layer.v_up.bias.segment(h * dv, dv);
  }
  return linear_forward(layer.out_proj, concat);  // [1 x d_model]
}

}  // namespace

LatentAttention latent_attention_init(Rng& rng, const LatentAttentionSizes& s, bool bias) {
  const char* where = "latent_attention_init";
  check_latent_sizes(s.d_model, s.heads, s.d_nope, s.d_rope, s.d_v, s.d_c, where);
  // Every weight, then every bias, counted with each product checked: h (d_nope + d_rope) and
  // friends are only computed once they are known to fit.
  ElementCount count;
  count.add(s.heads, s.d_nope, s.d_model).add(s.heads, s.d_rope, s.d_model);  // q_proj
  count.add(s.d_c, s.d_model).add(s.heads, s.d_nope, s.d_c);                  // kv_down, k_up
  count.add(s.heads, s.d_v, s.d_c).add(s.d_rope, s.d_model);                  // v_up, k_rope
  count.add(s.d_model, s.heads, s.d_v);                                       // out_proj
  if (bias) {
    count.add(s.heads, s.d_nope).add(s.heads, s.d_rope).add(1, s.d_c).add(s.heads, s.d_nope);
    count.add(s.heads, s.d_v).add(1, s.d_rope).add(1, s.d_model);
  }
  require_fits_in_memory(where, count, sizeof(float), "of parameters", [&] {
    return "d_model " + std::to_string(s.d_model) + ", heads " + std::to_string(s.heads) +
           ", d_nope " + std::to_string(s.d_nope) + ", d_rope " + std::to_string(s.d_rope) +
           ", d_v " + std::to_string(s.d_v) + " and d_c " + std::to_string(s.d_c);
  });
  LatentAttention l{s.heads, s.d_nope, s.d_rope, s.d_v, s.d_c, {}, {}, {}, {}, {}, {}};
  l.q_proj = linear_init(rng, s.d_model, s.heads * (s.d_nope + s.d_rope), bias);
  l.kv_down = linear_init(rng, s.d_model, s.d_c, bias);
  l.k_up = linear_init(rng, s.d_c, s.heads * s.d_nope, bias);
  l.v_up = linear_init(rng, s.d_c, s.heads * s.d_v, bias);
  l.k_rope = linear_init(rng, s.d_model, s.d_rope, bias);
  l.out_proj = linear_init(rng, s.heads * s.d_v, s.d_model, bias);
  return l;
}

template <Real T>
void check_latent_attention(const LatentAttentionOf<T>& l, const char* where) {
  const Index d_model = l.q_proj.in_features();
  check_latent_sizes(d_model, l.heads, l.d_nope, l.d_rope, l.d_v, l.d_c, where);
  const auto check_shape = [&](const LinearOf<T>& p, const char* name, Index out, Index in) {
    check_linear(p, where);
    require(p.weight.rows() == out && p.weight.cols() == in, where, [&] {
      return std::string(name) + " is " + shape_str(p.weight) + " but heads " +
             std::to_string(l.heads) + ", d_nope " + std::to_string(l.d_nope) + ", d_rope " +
             std::to_string(l.d_rope) + ", d_v " + std::to_string(l.d_v) + ", d_c " +
             std::to_string(l.d_c) + " and d_model " + std::to_string(d_model) +
             " (q_proj's columns) make it " + shape_str(out, in);
    });
  };
  check_shape(l.q_proj, "q_proj", l.heads * l.d_qk(), d_model);
  check_shape(l.kv_down, "kv_down", l.d_c, d_model);
  check_shape(l.k_up, "k_up", l.heads * l.d_nope, l.d_c);
  check_shape(l.v_up, "v_up", l.heads * l.d_v, l.d_c);
  check_shape(l.k_rope, "k_rope", l.d_rope, d_model);
  check_shape(l.out_proj, "out_proj", d_model, l.heads * l.d_v);
}

template <Real T>
LatentAttentionResultOf<T> latent_attention_forward(const LatentAttentionOf<T>& layer,
                                                    const InView<T>& x,
                                                    const LatentAttentionOptions& opts) {
  check_latent_input(layer, x, opts, "latent_attention_forward");
  const Index n = x.rows(), H = layer.heads, dn = layer.d_nope, dr = layer.d_rope;
  const Index dqk = layer.d_qk(), dv = layer.d_v;
  const RopeOptions from_zero{.layout = opts.layout};  // row r is position r
  LatentAttentionResultOf<T> r;
  // ---- queries: every head's [q^C, RoPE(q^R)] ---------------------------------------------------
  r.Q = linear_forward(layer.q_proj, x);  // [n x h d_qk]
  for (Index h = 0; h < H; ++h)
    rope_inplace<T>(r.Q.middleCols(h * dqk + dn, dr), *opts.rope, from_zero);
  // ---- the cached pair, c and k^R
  // ----------------------------------------------------------------
  r.c = linear_forward(layer.kv_down, x);      // [n x d_c]
  r.k_rope = linear_forward(layer.k_rope, x);  // [n x d_rope]
  rope_inplace<T>(r.k_rope, *opts.rope, from_zero);
  // ---- K and V formed from c, as the paper writes them
  // ---------------------------------------------
  const MatrixOf<T> K_content = linear_forward(layer.k_up, r.c);  // [n x h d_nope]
  r.V = linear_forward(layer.v_up, r.c);                          // [n x h d_v]
  r.K.resize(n, H * dqk);                                         // [n x h d_qk]
  for (Index h = 0; h < H; ++h) {
    r.K.middleCols(h * dqk, dn) = K_content.middleCols(h * dn, dn);  // K_h^C
    r.K.middleCols(h * dqk + dn, dr) = r.k_rope;                     // k^R, the same for all
  }
  // ---- one attention per head: softmax(Q_h K_h^T / sqrt(d_qk)) V_h
  // ---------------------------------
  const AllowedMask causal = opts.causal ? causal_mask(n) : AllowedMask();  // [n x n]
  AttentionOptions head_opts;  // scale 1/sqrt(d_qk): Q_h is d_qk wide
  if (opts.causal) head_opts.allowed.emplace(causal);
  r.weights.resize(static_cast<std::size_t>(H));
  r.concat.resize(n, H * dv);  // [n x h d_v]
  for (Index h = 0; h < H; ++h) {
    MatrixOf<T>& W = r.weights[static_cast<std::size_t>(h)];
    const Index empty_rows = attention_weights_into(r.Q.middleCols(h * dqk, dqk),  // [n x d_qk]
                                                    r.K.middleCols(h * dqk, dqk),  // [n x d_qk]
                                                    W, head_opts);                 // [n x n]
    weighted_values_into(W, r.V.middleCols(h * dv, dv), r.concat.middleCols(h * dv, dv),
                         empty_rows);
  }
  r.out = linear_forward(layer.out_proj, r.concat);  // [n x d_model]
  return r;
}

template <Real T>
LatentAttentionResultOf<T> latent_attention_absorbed(const LatentAttentionOf<T>& layer,
                                                     const InView<T>& x,
                                                     const LatentAttentionOptions& opts) {
  const char* where = "latent_attention_absorbed";
  check_latent_input(layer, x, opts, where);
  const Index n = x.rows(), H = layer.heads, dc = layer.d_c;
  // Every head's [n x n] weights, and every token's q_lat kept twice (its projection and the
  // result's row): refused before allocating when the machine cannot hold them.
  require_fits_in_memory(where, ElementCount(n, n, H).add(n, H * dc, 2), sizeof(T),
                         "for the weights and the latent queries", [&] {
                           return std::to_string(n) + " tokens and " + std::to_string(H) +
                                  " heads with d_c " + std::to_string(dc);
                         });
  LatentAttentionResultOf<T> r;
  r.Q.resize(n, H * layer.d_qk());   // [n x h d_qk]
  r.q_latent.resize(n, H * dc);      // [n x h d_c]
  r.c.resize(n, dc);                 // [n x d_c]
  r.k_rope.resize(n, layer.d_rope);  // [n x d_rope]
  // ---- every token's projections, one at a time, as decoding makes them -------------------------
  std::vector<LatentTokenProjection<T>> tokens(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) {
    LatentTokenProjection<T>& t = tokens[static_cast<std::size_t>(i)];
    t = project_latent_token(layer, x.row(i), i, opts);
    r.Q.row(i) = t.q;
    r.q_latent.row(i) = Eigen::Map<const RowVectorOf<T>>(t.q_latent.data(), H * dc);
    r.c.row(i) = t.c;  // r.c and r.k_rope play the cache: rows of the same width, so row j
    r.k_rope.row(i) = t.k_rope;  // sits at the same alignment as in a LatentCache's storage
  }
  // ---- every query over its keys in the latent space
  // -----------------------------------------------
  r.weights.assign(static_cast<std::size_t>(H), MatrixOf<T>::Zero(n, n));  // [n x n] each
  r.concat.resize(n, H * layer.d_v);                                       // [n x h d_v]
  r.out.resize(n, layer.d_model());                                        // [n x d_model]
  MatrixOf<T> concat;                                                      // [1 x h d_v]
  for (Index i = 0; i < n; ++i) {
    const Index m = opts.causal ? i + 1 : n;  // keys 0 .. m - 1
    r.out.row(i) = attend_latent(layer, tokens[static_cast<std::size_t>(i)], r.c.topRows(m),
                                 r.k_rope.topRows(m), concat, &r.weights, i);
    r.concat.row(i) = concat;
  }
  return r;
}

template <Real T>
MatrixOf<T> latent_attention_decode(const LatentAttentionOf<T>& layer, const InView<T>& x_row,
                                    LatentCacheOf<T>& cache, const LatentAttentionOptions& opts) {
  const char* where = "latent_attention_decode";
  check_latent_attention(layer, where);
  require(x_row.rows() == 1 && x_row.cols() == layer.d_model(), where, [&] {
    return "x_row is " + shape_str(x_row) + ": one token, [1 x " + std::to_string(layer.d_model()) +
           "] (d_model)";
  });
  require(opts.causal, where,
          "opts.causal is false: a decoded token reads the tokens before it and itself, never "
          "later ones");
  require(cache.latent.width() == layer.d_c && cache.rope_key.width() == layer.d_rope, where, [&] {
    return "the cache holds rows of " + std::to_string(cache.latent.width()) + " (latent) and " +
           std::to_string(cache.rope_key.width()) + " (rope_key) numbers but the layer's d_c is " +
           std::to_string(layer.d_c) + " and d_rope " + std::to_string(layer.d_rope) +
           ": make it LatentCacheOf(capacity, d_c, d_rope)";
  });
  require(!cache.latent.rolling() && !cache.rope_key.rolling(), where,
          "the cache is rolling: latent attention here attends to every past token, so its "
          "cache must be plain");
  require(cache.latent.capacity() == cache.rope_key.capacity() &&
              cache.latent.next_position() == cache.rope_key.next_position(),
          where, [&] {
            return "the cache's latent holds " + std::to_string(cache.latent.next_position()) +
                   " of " + std::to_string(cache.latent.capacity()) + " rows but its rope_key " +
                   std::to_string(cache.rope_key.next_position()) + " of " +
                   std::to_string(cache.rope_key.capacity()) +
                   ": the two are appended together, one row per token";
          });
  const Index p = cache.latent.next_position();  // this token's position
  require(p < cache.latent.capacity(), where, [&] {
    return "decoding past the cache's capacity: it holds " + std::to_string(p) + " of " +
           std::to_string(cache.latent.capacity()) + " tokens (a plain cache drops none)";
  });
  check_latent_rope_table(opts, layer.d_rope, p, where);
  // ---- this token's projections; its c and k^R join the cache ----------------------------------
  const LatentTokenProjection<T> t = project_latent_token(layer, x_row, p, opts);
  cache.latent.append(t.c);
  cache.rope_key.append(t.k_rope);
  // ---- attend over the p + 1 tokens held, in the latent space
  // ------------------------------------- A plain cache holds its rows in position order in one
  // block (row_cache.hpp: `older`).
  MatrixOf<T> concat;  // [1 x h d_v]
  return attend_latent(layer, t, cache.latent.segments().older, cache.rope_key.segments().older,
                       concat, nullptr, 0);
}

#define ATTN_INSTANTIATE(T)                                                                   \
  template void check_latent_attention(const LatentAttentionOf<T>&, const char*);             \
  template LatentAttentionResultOf<T> latent_attention_forward(                               \
      const LatentAttentionOf<T>&, const InView<T>&, const LatentAttentionOptions&);          \
  template LatentAttentionResultOf<T> latent_attention_absorbed(                              \
      const LatentAttentionOf<T>&, const InView<T>&, const LatentAttentionOptions&);          \
  template MatrixOf<T> latent_attention_decode(const LatentAttentionOf<T>&, const InView<T>&, \
                                               LatentCacheOf<T>&, const LatentAttentionOptions&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
