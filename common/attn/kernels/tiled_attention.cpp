// tiled_attention.cpp: FlashAttention-2's forward and backward on the CPU, one tile of queries
// (or keys) per OpenMP task. The forward's two products and the backward's scores run on the
// register kernel of tile_kernel.hpp, the backward's other four products on Eigen's GEMM.
#include "attn/kernels/tiled_attention.hpp"

#include "attn/core/detail/tile_kernel.hpp"
#include "attn/core/memory.hpp"
#include "attn/core/threads.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace attn {

namespace {

template <Real T>
constexpr T kInf = std::numeric_limits<T>::infinity();

// ---- The mask, a tile at a time --------------------------------------------------------------

// What the causal flag, the window and the mask make of query rows [q0, q1) against keys
// [k0, k1). Causal: key j is blocked for query i when j > i. Window W >= 1 (only with causal):
// also when j <= i - W, so query i keeps i - W < j <= i. Both are bounds on j that move with i,
// so a tile is classified from its corners, and a mixed tile's blocked keys are a prefix (too
// old) and a suffix (the future) of each query's row, filled without a mask in memory.
struct Masking {
  bool causal = false;
  const MaskView* allowed = nullptr;
  Index window = 0;  // 0: no window; else 1 <= window < n_q (masking_of)

  bool any() const { return causal || allowed != nullptr; }

  // Keys [first, last) of query i pass causal and the window (before the mask), within n_k.
  Index first_key(Index i) const { return window > 0 ? std::max<Index>(i - window + 1, 0) : 0; }
  Index last_key(Index i, Index n_k) const { return causal ? std::min(i + 1, n_k) : n_k; }

  // The mask alone over the tile: memchr finds a blocked (0) or an allowed (1) byte a vector at
  // a time, so classifying costs a sliver of the tile's exp and GEMM work.
  TileKind mask_kind(Index q0, Index q1, Index k0, Index k1) const {
    bool some_allowed = false, some_blocked = false;
    const auto len = static_cast<std::size_t>(k1 - k0);
    for (Index i = q0; i < q1 && !(some_allowed && some_blocked); ++i) {
      const bool* row = allowed->row(i).data() + k0;
      some_blocked = some_blocked || std::memchr(row, 0, len) != nullptr;
      some_allowed = some_allowed || std::memchr(row, 1, len) != nullptr;
    }
    return !some_allowed ? TileKind::skipped : some_blocked ? TileKind::mixed : TileKind::full;
  }

  TileKind kind(Index q0, Index q1, Index k0, Index k1) const {
    TileKind k = TileKind::full;
    if (causal) {
      if (k0 > q1 - 1) return TileKind::skipped;  // every key after every query
      if (k1 - 1 > q0) k = TileKind::mixed;       // the diagonal crosses the tile
    }
    if (window > 0) {
      // The newest key is too old even for the first query: every key older than every window.
      if (k1 - 1 <= q0 - window) return TileKind::skipped;
      if (k0 <= q1 - 1 - window) k = TileKind::mixed;  // the oldest key too old for the last query
    }
    if (allowed != nullptr) {
      const TileKind m = mask_kind(q0, q1, k0, k1);
      if (m == TileKind::skipped) return m;
      if (m == TileKind::mixed) k = TileKind::mixed;
    }
    return k;
  }

  // Whether query i may attend to any of the n_k keys.
  bool has_key(Index i, Index n_k) const {
    const Index first = first_key(i), last = last_key(i, n_k);
    if (first >= last) return false;  // (a query past n_k + W - 1 when n_q > n_k: none left)
    if (allowed == nullptr) return true;
    return std::memchr(allowed->row(i).data() + first, 1, static_cast<std::size_t>(last - first)) !=
           nullptr;
  }
};

// The masking of a call on n_q queries. A window of n_q or more blocks nothing causal does not
// (i - W < 0 <= j for every query i < n_q), so it is dropped here: W >= n_q is the causal call,
// the same arithmetic and the same bytes, and every bound below stays within [-n_q, n_q].
Masking masking_of(const TiledAttentionOptions& opts, Index n_q) {
  return {opts.causal, opts.allowed ? &*opts.allowed : nullptr,
          opts.window < n_q ? opts.window : Index{0}};
}

// ---- Arguments ---------------------------------------------------------------------------------

struct Tiling {
  Index n_q, n_k, bq, bk, tq, tk;  // sizes, tile sizes, tile counts
  std::vector<Index> order;        // key tiles in visiting order; empty: 0, 1, 2, ...
  Index key_tile(Index t) const { return order.empty() ? t : order[static_cast<std::size_t>(t)]; }
};

Tiling make_tiling(Index n_q, Index n_k, const TiledAttentionOptions& opts, const char* where) {
  require(opts.query_tile >= 1 && opts.key_tile >= 1, where, [&] {
    return "query_tile is " + std::to_string(opts.query_tile) + " and key_tile " +
           std::to_string(opts.key_tile) + ": a tile needs at least one row";
  });
  require(opts.threads >= 0, where, "threads must be 0 (OpenMP's default) or more");
  require(opts.window >= 0, where, [&] {
    return "window is " + std::to_string(opts.window) +
           ": it must be 0 (no window) or the number of keys W >= 1 each query reads";
  });
  require(opts.window == 0 || opts.causal, where, [&] {
    return "window is " + std::to_string(opts.window) +
           " but causal is false: the sliding window (keys i - W < j <= i) counts back from "
           "each query's own position and needs causal = true";
  });
  Tiling t{n_q, n_k, opts.query_tile, opts.key_tile, 0, 0, {}};
  t.bq = std::min(t.bq, std::max<Index>(n_q, 1));  // a tile larger than n is one tile of n
  t.bk = std::min(t.bk, std::max<Index>(n_k, 1));
  // ceil(n / b) without n + b - 1, which overflows for n near Index's largest value.
  t.tq = n_q / t.bq + (n_q % t.bq != 0 ? 1 : 0);
  t.tk = n_k / t.bk + (n_k % t.bk != 0 ? 1 : 0);
  if (!opts.key_tile_order.empty()) {
    // The length first: `seen` is then no larger than the order the caller holds.
    bool ok = static_cast<Index>(opts.key_tile_order.size()) == t.tk;
    std::vector<char> seen(ok ? static_cast<std::size_t>(t.tk) : 0, 0);
    for (Index j : opts.key_tile_order) {
      ok = ok && j >= 0 && j < t.tk && !seen[static_cast<std::size_t>(j)];
      if (ok) seen[static_cast<std::size_t>(j)] = 1;
    }
    require(ok, where, [&] {
      return "key_tile_order has " + std::to_string(opts.key_tile_order.size()) +
             " entries but must be a permutation of the " + std::to_string(t.tk) +
             " key tiles 0 .. " + std::to_string(t.tk - 1) + " (n_k = " + std::to_string(n_k) +
             ", key_tile = " + std::to_string(opts.key_tile) + ")";
    });
    t.order.assign(opts.key_tile_order.begin(), opts.key_tile_order.end());
  }
  return t;
}

template <Real T>
void check_inputs(const ViewOf<T>& Q, const ViewOf<T>& K, const ViewOf<T>& V,
                  const TiledAttentionOptions& opts, const char* where) {
  require(Q.cols() == K.cols() && K.rows() == V.rows(), where, [&] {
    return "Q is " + shape_str(Q) + ", K " + shape_str(K) + " and V " + shape_str(V) +
           ": Q and K need the same width d_k, K and V the same number of rows n_k";
  });
  require(Q.rows() >= 1 && K.rows() >= 1 && K.cols() >= 1 && V.cols() >= 1, where, [&] {
    return "Q is " + shape_str(Q) + ", K " + shape_str(K) + " and V " + shape_str(V) +
           ": need at least one query, one key, d_k >= 1 and d_v >= 1";
  });
  if (opts.allowed) {
    require(opts.allowed->rows() == Q.rows() && opts.allowed->cols() == K.rows(), where, [&] {
      return "the mask is " + shape_str(opts.allowed->rows(), opts.allowed->cols()) + " but Q is " +
             shape_str(Q) + " and K is " + shape_str(K) +
             ": it must be [n_q x n_k] = " + shape_str(Q.rows(), K.rows());
    });
  }
}

template <Real T>
T scale_of(const TiledAttentionOptions& opts, Index d_k, const char* where) {
  const T scale = opts.scale ? static_cast<T>(*opts.scale) : T(1) / std::sqrt(static_cast<T>(d_k));
  require(std::isfinite(scale), where, "the scale is not finite");
  return scale;
}

// OpenMP's team for `tasks` tiles worth `flops` in all: `threads` when the caller set it, else
// every thread OpenMP offers, but one for a call under ~4 MFLOP (threads.hpp's team_for).
int team_size(int threads, Index tasks, double flops) {
#ifdef _OPENMP
  return team_for(threads, tasks, flops);
#else
  (void)threads;
  (void)tasks;
  (void)flops;
  return 1;
#endif
}

// 4 n_q n_k d flops for the forward's two products, d = (d_k + d_v) / 2.
double forward_flops(Index n_q, Index n_k, Index d_k, Index d_v) {
  return 2.0 * static_cast<double>(n_q) * static_cast<double>(n_k) * static_cast<double>(d_k + d_v);
}

// ---- One tile of scores ------------------------------------------------------------------------

// The backward cuts the key tiles into at most this many groups, one task each, side by side on
// the cores. Each group adds its share of dQ into a copy of its own ([n_q x d_k]), so the extra
// memory is kBackwardGroups n_q d_k numbers: linear in n, as the rest. Eight keep 8 cores busy.
constexpr Index kBackwardGroups = 8;

// Each thread's scratch for the backward, kept between calls (thread_local): the score tile S
// [B_q x B_k'] (then the weights P in place), the gradient tile dP [B_q x B_k], an accumulator
// per side, and the key and value tiles K_j^T, V_j^T and K_j in the kernel's panels.
template <Real T>
struct Scratch {
  MatrixOf<T> S, dP, acc1, acc2;
  std::vector<T> Kt, Vt, Kr;  // the backward's key and value tiles in the kernel's panels
};

template <Real T>
Scratch<T>& scratch() {
  thread_local Scratch<T> s;
  return s;
}

// Resizes only when the shape changes, so a thread allocates once for the largest tile.
template <typename M>
void fit(M& m, Index rows, Index cols) {
  if (m.rows() != rows || m.cols() != cols) m.resize(rows, cols);
}

template <Real T>
using Kernel = detail::TileKernel<T>;

// Rows [r0, r0 + count) of M [_ x d], transposed into panels for the kernel (tile_kernel.hpp):
// panel p holds d rows of kCols entries, M's rows r0 + p kCols ... as its columns, the columns
// past `count` zero. Q_i^T for the forward's scores, K_j^T for the backward's.
template <Real T>
void pack_transposed(const ViewOf<T>& M, Index r0, Index count, T* panels) {
  constexpr Index nr = Kernel<T>::kCols;
  const Index d = M.cols();
  for (Index p = 0; p * nr < count; ++p) {
    T* panel = panels + p * d * nr;
    for (Index c = 0; c < nr; ++c) {
      const Index r = p * nr + c;
      if (r < count) {
        const T* m = M.row(r0 + r).data();
        for (Index k = 0; k < d; ++k) panel[k * nr + c] = m[k];
      } else {
        for (Index k = 0; k < d; ++k) panel[k * nr + c] = T(0);
      }
    }
  }
}

// Rows [r0, r0 + count) of M [_ x d] in panels for the kernel: panel p holds the `count` rows'
// columns p kCols ... p kCols + kCols - 1 (zero past d), one row of kCols after another. V_j for
// the forward's O += P V_j: each panel is read from start to end, contiguous, where V's own rows
// (in multi-head attention a head's 64 columns of a row 512 wide: 2 KiB apart) would fall into
// a few sets of the L1 cache and evict one another.
template <Real T>
void pack_rows(const ViewOf<T>& M, Index r0, Index count, T* panels) {
  constexpr Index nr = Kernel<T>::kCols;
  const Index d = M.cols();
  for (Index p = 0; p * nr < d; ++p) {
    const Index width = std::min(nr, d - p * nr);
    T* panel = panels + p * count * nr;
    for (Index r = 0; r < count; ++r) {
      std::copy_n(M.row(r0 + r).data() + p * nr, width, panel + r * nr);
      std::fill(panel + r * nr + width, panel + (r + 1) * nr, T(0));
    }
  }
}

// S = Q_i K_j^T * scale [B_q x B_k'] with the blocked entries of a mixed tile set to -inf, K_j^T
// packed (pack_transposed). Each score is the kernel's, with the same bits as the forward's
// transposed tile, since both sum d_k products in the same order: P recomputed from L is the
// forward's P. The scale is applied to the finished dot products, as attention() does.
template <Real T>
void score_tile(const ViewOf<T>& Q, const T* Kt, Index q0, Index bq, Index k0, Index bk, T scale,
                const Masking& masking, TileKind kind, MatrixOf<T>& S) {
  constexpr Index nr = Kernel<T>::kCols;
  const Index d_k = Q.cols();
  Kernel<T>::template multiply<detail::Into::store>(bq, Kernel<T>::padded(bk), d_k,
                                                    Q.row(q0).data(), Q.outerStride(), 1, Kt, nr,
                                                    d_k * nr, S.data(), S.cols(), scale);
  if (kind != TileKind::mixed) return;
  for (Index r = 0; r < bq; ++r) {
    T* row = S.row(r).data();
    const Index i = q0 + r;
    // Causal: the keys after query i are a suffix of the row, blocked in one fill.
    if (masking.causal) {
      const Index first_blocked = std::clamp<Index>(i + 1 - k0, 0, bk);
      std::fill(row + first_blocked, row + bk, -kInf<T>);
    }
    // The window: the keys j <= i - W are a prefix, blocked in one fill.
    if (masking.window > 0) {
      const Index first_kept = std::clamp<Index>(masking.first_key(i) - k0, 0, bk);
      std::fill(row, row + first_kept, -kInf<T>);
    }
    // A mask: a select per entry, without a branch, which the compiler vectorises.
    if (masking.allowed != nullptr) {
      const bool* allowed = masking.allowed->row(i).data() + k0;
      for (Index c = 0; c < bk; ++c) row[c] = allowed[c] ? row[c] : -kInf<T>;
    }
  }
}

// p = exp(s - shift) over one row, vectorised (Eigen's exp, a few ulps from glibc's expf), with
// every weight that would be subnormal flushed to exactly 0. Eigen's exp clamps its argument
// near -88.7 and returns ~3e-39 even for -inf, where a blocked key must get exactly 0; glibc's
// expf returns subnormals down to exp(-103.9). A weight below the smallest normal float (1.2e-38)
// beside the row's largest, which is 1, is far below the resolution of their sum, and
// subnormals would slow the GEMM that follows.
template <Real T>
void exp_shifted(T* row, Index n, T shift) {
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> x(row, n);
  x = (x - shift).exp();
  for (Index c = 0; c < n; ++c) row[c] = row[c] < std::numeric_limits<T>::min() ? T(0) : row[c];
}

// ---- Forward -----------------------------------------------------------------------------------
//
// The forward keeps its score tile transposed, S^T [B_k x B_q']: row c holds key k0 + c against
// every query of the tile, and B_q' is B_q padded to whole kernel panels (tile_kernel.hpp). Each
// query is then one lane of a vector: its running max, the exps and its running sum run on
// B_q'/W queries at a time with no reduction across lanes, and both products are the register
// kernel's: S^T = K_j (Q_i^T), with Q_i^T packed once per query tile, and O += (S^T)^T V_j,
// reading V_j in place.

template <Real T>
struct ForwardScratch {
  std::vector<T> Qt;    // Q_i^T in panels: panel p holds d_k rows of kCols queries
  std::vector<T> St;    // S^T, then P^T in place     [B_k x B_q']
  std::vector<T> O;     // unnormalised output        [B_q x d_v']
  std::vector<T> m, l;  // running max and sum per query       [B_q']
  std::vector<T> tile_max, tile_sum, shift, alpha;  // per query, this key tile [B_q']
};

template <Real T>
ForwardScratch<T>& forward_scratch() {
  thread_local ForwardScratch<T> s;
  return s;
}

template <typename V>
void fit(V& v, Index size) {
  if (static_cast<Index>(v.size()) < size) v.resize(static_cast<std::size_t>(size));
}

// The blocked entries of a mixed tile set to -inf in S^T (ld = wq).
template <Real T>
void mask_transposed(const Masking& masking, Index q0, Index bq, Index k0, Index bk, Index wq,
                     T* St) {
  for (Index r = 0; r < bq; ++r) {
    const Index i = q0 + r;
    // Causal: the keys after query i, a suffix of its column.
    if (masking.causal) {
      for (Index c = std::clamp<Index>(i + 1 - k0, 0, bk); c < bk; ++c) St[c * wq + r] = -kInf<T>;
    }
    // The window: the keys j <= i - W, a prefix of its column.
    if (masking.window > 0) {
      const Index first_kept = std::clamp<Index>(masking.first_key(i) - k0, 0, bk);
      for (Index c = 0; c < first_kept; ++c) St[c * wq + r] = -kInf<T>;
    }
    if (masking.allowed != nullptr) {
      const bool* allowed = masking.allowed->row(i).data() + k0;
      for (Index c = 0; c < bk; ++c) {
        if (!allowed[c]) St[c * wq + r] = -kInf<T>;
      }
    }
  }
}

// One query tile, rows [q0, q0 + bq): the online softmax over the key tiles, then out and L.
template <Real T>
void forward_tile(const ViewOf<T>& Q, const ViewOf<T>& K, const T* value_panels, Index d_v,
                  Index q0, Index bq, const Tiling& t, T scale, const Masking& masking,
                  Eigen::Ref<MatrixOf<T>> out, LseRef<T> lse) {
  namespace ep = Eigen::internal;
  using Packet = typename Kernel<T>::Packet;
  constexpr Index W = Kernel<T>::kWidth, nr = Kernel<T>::kCols;
  ForwardScratch<T>& w = forward_scratch<T>();
  const Index d_k = Q.cols();
  const Index wq = Kernel<T>::padded(bq), wv = Kernel<T>::padded(d_v);
  fit(w.Qt, d_k * wq);
  fit(w.St, t.bk * wq);
  fit(w.O, bq * wv);
  for (auto* v : {&w.m, &w.l, &w.tile_max, &w.tile_sum, &w.shift, &w.alpha}) fit(*v, wq);
  pack_transposed<T>(Q, q0, bq, w.Qt.data());  // Q_i^T      [d_k x B_q']
  std::fill_n(w.O.data(), bq * wv, T(0));      // O          [B_q x d_v']
  std::fill_n(w.m.data(), wq, -kInf<T>);       // running max of each query
  std::fill_n(w.l.data(), wq, T(0));           // running sum of exp(s - m)
  T* St = w.St.data();

  for (Index step = 0; step < t.tk; ++step) {
    const Index j = t.key_tile(step), k0 = j * t.bk, bk = std::min(t.bk, t.n_k - k0);
    const TileKind kind = masking.any() ? masking.kind(q0, q0 + bq, k0, k0 + bk) : TileKind::full;
    if (kind == TileKind::skipped) continue;
    // S^T = K_j Q_i^T * scale   [B_k x B_q']. The scale goes on the finished dot products, as
    // attention() applies it, so both round alike.
    Kernel<T>::template multiply<detail::Into::store>(bk, wq, d_k, K.row(k0).data(),
                                                      K.outerStride(), 1, w.Qt.data(), nr, d_k * nr,
                                                      St, wq, scale);
    if (kind == TileKind::mixed) mask_transposed<T>(masking, q0, bq, k0, bk, wq, St);

    // The tile's largest score of each query, key row by key row. A NaN is not tracked here:
    // exp(NaN - m) makes the query's sum l NaN, and with it its output and L (attention.hpp).
    for (Index p = 0; p < wq; p += W) ep::pstoreu(&w.tile_max[p], ep::ploadu<Packet>(St + p));
    for (Index c = 1; c < bk; ++c) {
      for (Index p = 0; p < wq; p += W) {
        const Packet seen = ep::ploadu<Packet>(&w.tile_max[p]);
        ep::pstoreu(&w.tile_max[p], ep::pmax(seen, ep::ploadu<Packet>(St + c * wq + p)));
      }
    }
    // m_new = max(m, tile max), and the factor exp(m - m_new) that rescales the past.
    for (Index r = 0; r < wq; ++r) {
      const T m_old = w.m[r], tile_max = w.tile_max[r];
      T m_new = tile_max > m_old ? tile_max : m_old;  // a NaN m_old (an earlier NaN) stays
      if (m_new == -kInf<T>) {  // nothing allowed (or finite) for this query yet
        bool nan = false;
        for (Index c = 0; c < bk && !nan; ++c) nan = std::isnan(St[c * wq + r]);
        if (!nan) {  // P = exp(S - inf) = 0 for this query, and nothing to rescale
          w.shift[r] = kInf<T>;
          w.alpha[r] = T(1);
          continue;
        }
        m_new = std::numeric_limits<T>::quiet_NaN();  // NaN beside only -inf: the query is NaN
      }
      w.shift[r] = m_new;
      w.alpha[r] = m_old == -kInf<T> ? T(0) : std::exp(m_old - m_new);
      w.m[r] = m_new;
    }
    // P = exp(S - m_new) in place, and its sum per query. Eigen's exp is a few ulps from
    // glibc's expf and clamps its argument near -88.7, returning ~3e-39 even for -inf, where a
    // blocked key must get exactly 0; glibc's expf returns subnormals down to exp(-103.9). A
    // weight below the smallest normal float (1.2e-38) beside the largest, which is 1, is far
    // below the resolution of their sum: it is flushed to 0, which also keeps subnormals out of
    // the product that follows. (A NaN compares false and stays.)
    const Packet tiny = ep::pset1<Packet>(std::numeric_limits<T>::min());
    std::fill_n(w.tile_sum.data(), wq, T(0));
    for (Index c = 0; c < bk; ++c) {
      T* s = St + c * wq;
      for (Index p = 0; p < wq; p += W) {
        Packet e = ep::pexp(ep::psub(ep::ploadu<Packet>(s + p), ep::ploadu<Packet>(&w.shift[p])));
        e = ep::pandnot(e, ep::pcmp_lt(e, tiny));
        ep::pstoreu(s + p, e);
        ep::pstoreu(&w.tile_sum[p], ep::padd(ep::ploadu<Packet>(&w.tile_sum[p]), e));
      }
    }
    for (Index r = 0; r < bq; ++r) {
      w.l[r] = w.l[r] * w.alpha[r] + w.tile_sum[r];
      if (w.alpha[r] != T(1)) {
        T* o = w.O.data() + r * wv;
        for (Index c = 0; c < wv; ++c) o[c] *= w.alpha[r];
      }
    }
    // O += P V_j   [B_q x d_v'], P read from S^T's columns, V_j from its panels.
    Kernel<T>::template multiply<detail::Into::chain>(
        bq, wv, bk, St, 1, wq, value_panels + j * t.bk * wv, nr, bk * nr, w.O.data(), wv, T(1));
  }

  // Normalise once: out = O / l, L = m + log l. l = 0 means every allowed score was -inf (a NaN
  // row, attention.hpp) or there was no allowed key (a zero row, L = -inf).
  for (Index r = 0; r < bq; ++r) {
    const Index i = q0 + r;
    const Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>> O_r(w.O.data() + r * wv, d_v);
    if (w.l[r] > T(0) || std::isnan(w.l[r])) {
      out.row(i) = O_r * (T(1) / w.l[r]);
      lse[i] = w.m[r] + std::log(w.l[r]);
    } else if (masking.any() && !masking.has_key(i, t.n_k)) {
      out.row(i).setZero();
      lse[i] = -kInf<T>;
    } else {
      out.row(i).setConstant(std::numeric_limits<T>::quiet_NaN());
      lse[i] = std::numeric_limits<T>::quiet_NaN();
    }
  }
}

template <Real T>
void checked_forward(const ViewOf<T>& Q, const ViewOf<T>& K, const ViewOf<T>& V,
                     Eigen::Ref<MatrixOf<T>> out, LseRef<T> lse,
                     const TiledAttentionOptions& opts) {
  const char* where = "tiled_attention";
  check_inputs<T>(Q, K, V, opts, where);
  require(out.rows() == Q.rows() && out.cols() == V.cols() && lse.size() == Q.rows(), where, [&] {
    return "out is " + shape_str(out) + " and lse has " + std::to_string(lse.size()) +
           " entries, but Q is " + shape_str(Q) + " and V " + shape_str(V) +
           ": out must be [n_q x d_v] and lse [n_q]";
  });
  // Each query tile writes its rows of out, then its entries of lse: lse over out would be
  // written over rows already finished.
  require_apart(where, {{"out", memory_of(out)}, {"lse", memory_of(lse)}},
                {{"Q", memory_of(Q)}, {"K", memory_of(K)}, {"V", memory_of(V)}});
  const Tiling t = make_tiling(Q.rows(), K.rows(), opts, where);
  const T scale = scale_of<T>(opts, K.cols(), where);
  const Masking masking = masking_of(opts, Q.rows());

  // Each query tile is one task, and each output row belongs to exactly one task: the bytes
  // do not depend on the number of threads.
  const int team = team_size(opts.threads, t.tq, forward_flops(t.n_q, t.n_k, K.cols(), V.cols()));
  // V_j of every key tile in panels (pack_rows), once per call: n_k x d_v numbers, the size of
  // V, kept by the calling thread between calls. (The pointer, not the name, goes into the
  // parallel region: there the name would be each thread's own buffer.)
  thread_local std::vector<T> value_panels;
  const Index d_v = V.cols(), panel_size = t.bk * Kernel<T>::padded(d_v);
  fit(value_panels, t.tk * panel_size);
  T* const panels = value_panels.data();
#pragma omp parallel num_threads(team) if (team > 1)
  {
#pragma omp for schedule(static)
    for (Index j = 0; j < t.tk; ++j) {
      pack_rows<T>(V, j * t.bk, std::min(t.bk, t.n_k - j * t.bk), panels + j * panel_size);
    }
#pragma omp for schedule(dynamic, 1)
    for (Index i = 0; i < t.tq; ++i) {
      const Index q0 = i * t.bq;
      forward_tile<T>(Q, K, panels, d_v, q0, std::min(t.bq, t.n_q - q0), t, scale, masking, out,
                      lse);
    }
  }
}

// ---- Backward ----------------------------------------------------------------------------------

// P = exp(S - L) for query rows [q0, q0 + bq) and keys [k0, k0 + bk), recomputed from Q, K and
// L: the forward's weights without having kept them. A row with no allowed key (L = -inf) has
// P = 0 and passes nothing back.
template <Real T>
void weights_tile(const ViewOf<T>& Q, const T* Kt, const LseView<T>& lse, Index q0, Index bq,
                  Index k0, Index bk, T scale, const Masking& masking, TileKind kind,
                  MatrixOf<T>& S) {
  score_tile<T>(Q, Kt, q0, bq, k0, bk, scale, masking, kind, S);
  for (Index r = 0; r < bq; ++r) {
    T* row = S.row(r).data();
    if (lse[q0 + r] == -kInf<T>) {
      std::fill(row, row + bk, T(0));
    } else {
      exp_shifted(row, bk, lse[q0 + r]);
    }
  }
}

// dS = P * (dP - D) in place in dP, D_r = rowsum(dO_r * out_r): the softmax's Jacobian applied
// row by row (attention.hpp), with sum_j P_rj dP_rj = D_r computed from the outputs instead.
template <Real T>
void softmax_backward_tile(const MatrixOf<T>& P, const T* D, Index bq, Index bk, MatrixOf<T>& dP) {
  for (Index r = 0; r < bq; ++r) {
    const T* p = P.row(r).data();
    T* g = dP.row(r).data();
    const T d = D[r];
    // A weight of exactly 0 (a blocked key, a query with none, an exp that underflowed) passes
    // nothing back, also where dP is NaN or inf from a value it never read: as attention_backward
    // zeroes dS where the mask blocks.
    for (Index c = 0; c < bk; ++c) g[c] = p[c] == T(0) ? T(0) : p[c] * (g[c] - d);
  }
}

template <Real T>
void checked_backward(const ViewOf<T>& Q, const ViewOf<T>& K, const ViewOf<T>& V,
                      const ViewOf<T>& out, const LseView<T>& lse, const ViewOf<T>& d_out,
                      Eigen::Ref<MatrixOf<T>> dQ, Eigen::Ref<MatrixOf<T>> dK,
                      Eigen::Ref<MatrixOf<T>> dV, const TiledAttentionOptions& opts) {
  const char* where = "tiled_attention_backward";
  check_inputs<T>(Q, K, V, opts, where);
  const Index n_q = Q.rows(), n_k = K.rows(), d_k = K.cols(), d_v = V.cols();
  require(out.rows() == n_q && out.cols() == d_v && d_out.rows() == n_q && d_out.cols() == d_v &&
              lse.size() == n_q,
          where, [&] {
            return "out is " + shape_str(out) + ", d_out " + shape_str(d_out) + " and lse has " +
                   std::to_string(lse.size()) + " entries, but Q is " + shape_str(Q) + " and V " +
                   shape_str(V) + ": out and d_out must be [n_q x d_v], lse [n_q]";
          });
  require(dQ.rows() == n_q && dQ.cols() == d_k && dK.rows() == n_k && dK.cols() == d_k &&
              dV.rows() == n_k && dV.cols() == d_v,
          where, [&] {
            return "dQ, dK and dV are " + shape_str(dQ) + ", " + shape_str(dK) + " and " +
                   shape_str(dV) + ": they must have the shapes of Q, K and V";
          });
  // The pass writes dV and dK tile by tile, then dQ at the end: outputs that overlap overwrite
  // each other (dQ over dK would lose dK entirely), and an output over an input is read after it
  // was written.
  require_apart(where, {{"dQ", memory_of(dQ)}, {"dK", memory_of(dK)}, {"dV", memory_of(dV)}},
                {{"Q", memory_of(Q)},
                 {"K", memory_of(K)},
                 {"V", memory_of(V)},
                 {"out", memory_of(out)},
                 {"lse", memory_of(lse)},
                 {"d_out", memory_of(d_out)}});
  const Tiling t = make_tiling(n_q, n_k, opts, where);
  const T scale = scale_of<T>(opts, d_k, where);
  const Masking masking = masking_of(opts, n_q);
  auto kind_of = [&](Index q0, Index bq, Index k0, Index bk) {
    return masking.any() ? masking.kind(q0, q0 + bq, k0, k0 + bk) : TileKind::full;
  };
  // D = rowsum(dO * out) [n_q], once per call: every key tile reads it.
  thread_local std::vector<T> row_dots;
  fit(row_dots, n_q);
  for (Index i = 0; i < n_q; ++i) row_dots[i] = d_out.row(i).dot(out.row(i));
  const T* const D = row_dots.data();

  // One pass, one task per group of consecutive key tiles (kBackwardGroups groups at most, a
  // number the call's size fixes, never the threads). For each key tile j of its group, in order,
  // and each query tile i, in order: P = exp(S - L), dV_j += P^T dO_i, dP = dO_i V_j^T,
  // dS = P * (dP - D), dK_j += dS^T Q_i, and dQ_i += dS K_j into the group's own copy of dQ.
  // dK_j and dV_j have one owner; dQ is then the groups' copies added in group order. So every
  // sum has an order the call fixes, and the bytes do not depend on the threads. Five products
  // per pair of tiles, S recomputed once: the four that chapter 09's backward runs, plus S.
  const Index groups = std::min(t.tk, kBackwardGroups);
  thread_local std::vector<MatrixOf<T>> dQ_parts;  // [groups] x [n_q x d_k'], kept between calls
  if (static_cast<Index>(dQ_parts.size()) < groups)
    dQ_parts.resize(static_cast<std::size_t>(groups));
  MatrixOf<T>* const parts = dQ_parts.data();  // the calling thread's, into the parallel region
  // dO_i and Q_i of every query tile in the kernel's panels (pack_rows), once per call: the
  // products dV_j += P^T dO_i and dK_j += dS^T Q_i read them for every key tile.
  constexpr Index nr = Kernel<T>::kCols;
  const Index wv = Kernel<T>::padded(d_v), wk = Kernel<T>::padded(d_k);
  thread_local std::vector<T> dO_kept, Q_kept;
  fit(dO_kept, t.tq * t.bq * wv);
  fit(Q_kept, t.tq * t.bq * wk);
  for (Index i = 0; i < t.tq; ++i) {
    const Index q0 = i * t.bq, bq = std::min(t.bq, n_q - q0);
    pack_rows<T>(d_out, q0, bq, dO_kept.data() + i * t.bq * wv);
    pack_rows<T>(Q, q0, bq, Q_kept.data() + i * t.bq * wk);
  }
  const T* const dO_panels = dO_kept.data();
  const T* const Q_panels = Q_kept.data();
  const double flops = 2.0 * forward_flops(n_q, n_k, d_k, d_v);
  const int team = team_size(opts.threads, groups, flops);
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
  for (Index g = 0; g < groups; ++g) {
    using detail::Into;
    Scratch<T>& w = scratch<T>();
    MatrixOf<T>& dQ_g = parts[g];
    fit(dQ_g, n_q, wk);
    dQ_g.setZero();
    const Index wb = Kernel<T>::padded(t.bk);
    fit(w.S, t.bq, wb);
    fit(w.dP, t.bq, wb);
    fit(w.acc1, t.bk, wv);
    fit(w.acc2, t.bk, wk);
    w.Kt.resize(static_cast<std::size_t>(d_k * wb));
    w.Vt.resize(static_cast<std::size_t>(d_v * wb));
    w.Kr.resize(static_cast<std::size_t>(t.bk * wk));
    for (Index j = g * t.tk / groups; j < (g + 1) * t.tk / groups; ++j) {
      const Index k0 = j * t.bk, bk = std::min(t.bk, n_k - k0);
      pack_transposed<T>(K, k0, bk, w.Kt.data());  // K_j^T [d_k x B_k'], for S
      pack_transposed<T>(V, k0, bk, w.Vt.data());  // V_j^T [d_v x B_k'], for dP
      pack_rows<T>(K, k0, bk, w.Kr.data());        // K_j [B_k x d_k'], for dQ
      w.acc1.setZero();                            // dV_j [B_k x d_v']
      w.acc2.setZero();                            // dK_j [B_k x d_k']
      for (Index i = 0; i < t.tq; ++i) {
        const Index q0 = i * t.bq, bq = std::min(t.bq, n_q - q0);
        const TileKind kind = kind_of(q0, bq, k0, bk);
        if (kind == TileKind::skipped) continue;
        weights_tile<T>(Q, w.Kt.data(), lse, q0, bq, k0, bk, scale, masking, kind, w.S);  // P
        // dV_j += P^T dO_i   [B_k x d_v']: P^T read from S's columns.
        Kernel<T>::template multiply<Into::add>(bk, wv, bq, w.S.data(), 1, wb,
                                                dO_panels + i * t.bq * wv, nr, bq * nr,
                                                w.acc1.data(), wv, T(1));
        // dP = dO_i V_j^T   [B_q x B_k']
        Kernel<T>::template multiply<Into::store>(bq, wb, d_v, d_out.row(q0).data(),
                                                  d_out.outerStride(), 1, w.Vt.data(), nr, d_v * nr,
                                                  w.dP.data(), wb, T(1));
        softmax_backward_tile<T>(w.S, D + q0, bq, bk, w.dP);  // dS, in dP's place
        // dK_j += dS^T Q_i   [B_k x d_k'];  dQ_i += dS K_j   [B_q x d_k'], the group's copy
        Kernel<T>::template multiply<Into::add>(bk, wk, bq, w.dP.data(), 1, wb,
                                                Q_panels + i * t.bq * wk, nr, bq * nr,
                                                w.acc2.data(), wk, T(1));
        Kernel<T>::template multiply<Into::add>(bq, wk, bk, w.dP.data(), wb, 1, w.Kr.data(), nr,
                                                bk * nr, dQ_g.row(q0).data(), wk, T(1));
      }
      dV.middleRows(k0, bk) = w.acc1.topLeftCorner(bk, d_v);
      dK.middleRows(k0, bk) = w.acc2.topLeftCorner(bk, d_k) * scale;
    }
  }
  // dQ = scale (dQ_0 + dQ_1 + ...), the groups added in order, row by row on the threads.
  const int team_q = team_size(opts.threads, n_q, static_cast<double>(n_q * d_k * groups));
#pragma omp parallel for schedule(static) num_threads(team_q) if (team_q > 1)
  for (Index i = 0; i < n_q; ++i) {
    auto row = dQ.row(i);
    row = parts[0].row(i).head(d_k);
    for (Index g = 1; g < groups; ++g) row += parts[g].row(i).head(d_k);
    row *= scale;
  }
}

// out [n_q x d_v] and L [n_q], allocated by tiled_attention() before the checks of the call:
// Q [n x 1] and V [1 x n] fit in memory where out [n x n] does not.
template <Real T>
void require_output_fits(const ViewOf<T>& Q, const ViewOf<T>& V) {
  require_fits_in_memory("tiled_attention", ElementCount(Q.rows(), V.cols()).add(1, Q.rows()),
                         sizeof(T), "for the output",
                         [&] { return "Q " + shape_str(Q) + " and V " + shape_str(V); });
}

}  // namespace

TiledAttentionResult tiled_attention(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                                     const TiledAttentionOptions& opts) {
  require_output_fits<float>(Q, V);
  TiledAttentionResult r{Matrix(Q.rows(), V.cols()), Vector(Q.rows())};
  tiled_attention_into(Q, K, V, r.out, r.lse, opts);
  return r;
}
TiledAttentionResultD tiled_attention(const MatrixViewD& Q, const MatrixViewD& K,
                                      const MatrixViewD& V, const TiledAttentionOptions& opts) {
  require_output_fits<double>(Q, V);
  TiledAttentionResultD r{MatrixD(Q.rows(), V.cols()), VectorD(Q.rows())};
  tiled_attention_into(Q, K, V, r.out, r.lse, opts);
  return r;
}

void tiled_attention_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                          Eigen::Ref<Matrix> out, LseRef<float> lse,
                          const TiledAttentionOptions& opts) {
  checked_forward<float>(Q, K, V, out, lse, opts);
}
void tiled_attention_into(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                          Eigen::Ref<MatrixD> out, LseRef<double> lse,
                          const TiledAttentionOptions& opts) {
  checked_forward<double>(Q, K, V, out, lse, opts);
}

AttentionGrads tiled_attention_backward(const MatrixView& Q, const MatrixView& K,
                                        const MatrixView& V, const TiledAttentionResult& forward,
                                        const MatrixView& d_out,
                                        const TiledAttentionOptions& opts) {
  AttentionGrads g{Matrix(Q.rows(), Q.cols()), Matrix(K.rows(), K.cols()),
                   Matrix(V.rows(), V.cols())};
  tiled_attention_backward_into(Q, K, V, forward.out, forward.lse, d_out, g.dQ, g.dK, g.dV, opts);
  return g;
}
AttentionGradsD tiled_attention_backward(const MatrixViewD& Q, const MatrixViewD& K,
                                         const MatrixViewD& V, const TiledAttentionResultD& forward,
                                         const MatrixViewD& d_out,
                                         const TiledAttentionOptions& opts) {
  AttentionGradsD g{MatrixD(Q.rows(), Q.cols()), MatrixD(K.rows(), K.cols()),
                    MatrixD(V.rows(), V.cols())};
  tiled_attention_backward_into(Q, K, V, forward.out, forward.lse, d_out, g.dQ, g.dK, g.dV, opts);
  return g;
}

void tiled_attention_backward_into(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                                   const MatrixView& out, const LseView<float>& lse,
                                   const MatrixView& d_out, Eigen::Ref<Matrix> dQ,
                                   Eigen::Ref<Matrix> dK, Eigen::Ref<Matrix> dV,
                                   const TiledAttentionOptions& opts) {
  checked_backward<float>(Q, K, V, out, lse, d_out, dQ, dK, dV, opts);
}
void tiled_attention_backward_into(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                                   const MatrixViewD& out, const LseView<double>& lse,
                                   const MatrixViewD& d_out, Eigen::Ref<MatrixD> dQ,
                                   Eigen::Ref<MatrixD> dK, Eigen::Ref<MatrixD> dV,
                                   const TiledAttentionOptions& opts) {
  checked_backward<double>(Q, K, V, out, lse, d_out, dQ, dK, dV, opts);
}

TileCounts TileMap::counts() const {
  TileCounts c{.total = query_tiles * key_tiles};
  for (TileKind k : kinds) {
    switch (k) {
      case TileKind::skipped:
        ++c.skipped;
        break;
      case TileKind::mixed:
        ++c.mixed;
        break;
      case TileKind::full:
        ++c.full;
        break;
    }
  }
  return c;
}

namespace {

TileMap checked_tile_map(Index n_q, Index n_k, const TiledAttentionOptions& opts,
                         const char* where) {
  require(n_q >= 1 && n_k >= 1, where, [&] {
    return "n_q is " + std::to_string(n_q) + " and n_k " + std::to_string(n_k) +
           ": need at least one query and one key";
  });
  if (opts.allowed) {
    require(opts.allowed->rows() == n_q && opts.allowed->cols() == n_k, where, [&] {
      return "the mask is " + shape_str(opts.allowed->rows(), opts.allowed->cols()) +
             " but it must be [n_q x n_k] = " + shape_str(n_q, n_k);
    });
  }
  const Tiling t = make_tiling(n_q, n_k, opts, where);
  // The map holds T_q T_k kinds, and each is classified: sizes no matrix could have (n = 2^31
  // in tiles of 128 is 2^48 tiles) are refused here, named, before the map is allocated.
  require_fits_in_memory(
      where, ElementCount(t.tq, t.tk), sizeof(TileKind), "for the tile map", [&] {
        return "n_q " + std::to_string(n_q) + " and n_k " + std::to_string(n_k) + " in tiles of " +
               std::to_string(t.bq) + " x " + std::to_string(t.bk) + " (" + std::to_string(t.tq) +
               " x " + std::to_string(t.tk) + " tiles)";
      });
  const Masking masking = masking_of(opts, n_q);
  TileMap map{t.tq, t.tk, {}};
  map.kinds.reserve(static_cast<std::size_t>(t.tq * t.tk));
  for (Index i = 0; i < t.tq; ++i) {
    const Index q0 = i * t.bq, q1 = std::min(q0 + t.bq, n_q);
    for (Index j = 0; j < t.tk; ++j) {
      const Index k0 = j * t.bk, k1 = std::min(k0 + t.bk, n_k);
      map.kinds.push_back(masking.any() ? masking.kind(q0, q1, k0, k1) : TileKind::full);
    }
  }
  return map;
}

}  // namespace

TileMap tile_map(Index n_q, Index n_k, const TiledAttentionOptions& opts) {
  return checked_tile_map(n_q, n_k, opts, "tile_map");
}

TileCounts count_tiles(Index n_q, Index n_k, const TiledAttentionOptions& opts) {
  return checked_tile_map(n_q, n_k, opts, "count_tiles").counts();
}

}  // namespace attn
