// decode_attention.cpp: the KV cache's decode step and the uncached reference, both running the
// one row kernel below (decode_attention.hpp).
#include "attn/kernels/decode_attention.hpp"

#include "attn/core/memory.hpp"
#include "attn/ops/softmax.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace attn {

namespace {

namespace ep = Eigen::internal;

// ---- The row kernel ----------------------------------------------------------------------------

template <Real T>
using PacketOf = typename ep::packet_traits<T>::type;
template <Real T>
constexpr Index kWidth = ep::packet_traits<T>::size;  // lanes: 16 floats with AVX-512, 8 AVX2

// dot(a, b) over d features: packet k of the sum takes the products of features k, k + L, ...
// (L = 2 packets, fused multiply-adds), the two packets are added, reduced to one number by
// Eigen's predux (a fixed order of its lanes), and the last d mod L products are added in
// order. The bits depend on the d numbers of a and b alone, not on their addresses (unaligned
// loads, no peeling for alignment), so key j scores the same in a ring slot as in row j of K.
// Two accumulators hide the latency of the multiply-adds; more buy nothing at d_k = 64.
template <Real T>
T dot(const T* a, const T* b, Index d) {
  using P = PacketOf<T>;
  constexpr Index w = kWidth<T>;
  P s0 = ep::pset1<P>(T(0)), s1 = ep::pset1<P>(T(0));
  Index f = 0;
  for (; f + 2 * w <= d; f += 2 * w) {
    s0 = ep::pmadd(ep::ploadu<P>(a + f), ep::ploadu<P>(b + f), s0);
    s1 = ep::pmadd(ep::ploadu<P>(a + f + w), ep::ploadu<P>(b + f + w), s1);
  }
  T s = ep::predux(ep::padd(s0, s1));
  for (; f < d; ++f) s += a[f] * b[f];
  return s;
}

// acc += p v over d features: the same operation in every lane, a packet at a time, then the
// last d mod w features one by one. Each acc[f] is updated by itself, so the order of the
// keys is the order of its sum.
template <Real T>
void axpy(T p, const T* v, T* acc, Index d) {
  using P = PacketOf<T>;
  constexpr Index w = kWidth<T>;
  const P pp = ep::pset1<P>(p);
  Index f = 0;
  for (; f + w <= d; f += w)
    ep::pstoreu(acc + f, ep::pmadd(pp, ep::ploadu<P>(v + f), ep::ploadu<P>(acc + f)));
  for (; f < d; ++f) acc[f] += p * v[f];
}

// Rows of keys and values in position order, contiguous within the block: `rows` keys at
// k, k + k_stride, ... and their values at v, v + v_stride, ... (each row holds the g heads).
template <Real T>
struct KeyBlock {
  const T* k = nullptr;
  const T* v = nullptr;
  Index rows = 0;
  Index k_stride = 0, v_stride = 0;
};

// The query's heads and the cache's: h query heads, g kv heads, d_k wide.
struct Heads {
  Index h = 0, g = 0, d_k = 0;
};

// Per-thread scratch, kept between calls: every head's scores [h x n] and its output's
// accumulator [h x d_k]. Grown, never shrunk: no allocation once a thread has seen the longest
// row.
template <Real T>
struct RowScratch {
  std::vector<T> scores, acc;
};

template <Real T>
RowScratch<T>& row_scratch() {
  thread_local RowScratch<T> s;
  return s;
}

template <typename V>
void grow(V& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

// One query row q [h d_k] against the keys of `older` then `newer` (position order; newer may
// be empty), into out [h d_k]. The one function both the decode step and the reference call,
// and never inlined into either, so that both run the same machine code (the header's "bit for
// bit"). Keys are the outer loop: each row of K and of V (all g heads, contiguous) is read
// once, in order, as the cache streams from memory; each query head's arithmetic is its own
// and the same whatever the other heads do.
template <Real T>
[[gnu::noinline]] void attend_row(const T* q, const KeyBlock<T>& older, const KeyBlock<T>& newer,
                                  const Heads& heads, T scale, T* out) {
  const Index n = older.rows + newer.rows, h = heads.h, d = heads.d_k;
  const Index group = h / heads.g;  // query heads per kv head: head a reads kv head a / group
  RowScratch<T>& w = row_scratch<T>();
  grow(w.scores, static_cast<std::size_t>(h * n));
  grow(w.acc, static_cast<std::size_t>(h * d));
  T* scores = w.scores.data();  // [h x n]: head a's scores in row a
  T* acc = w.acc.data();        // [h x d]

  // Scores: s[a][j] = dot(q_a, k_j) * scale, key by key in position order.
  Index j = 0;
  for (const KeyBlock<T>* block : {&older, &newer}) {
    for (Index r = 0; r < block->rows; ++r, ++j) {
      const T* k = block->k + r * block->k_stride;  // [g d]
      for (Index a = 0; a < h; ++a)
        scores[a * n + j] = dot(q + a * d, k + a / group * d, d) * scale;
    }
  }
  // Weights: each head's row of scores softmaxed in place. A query always reads at least its
  // own key, so scores that are all -inf came from the inputs: NaN, as attention() says.
  for (Index a = 0; a < h; ++a) {
    T* s = scores + a * n;
    if (!softmax_inplace(std::span<T>(s, static_cast<std::size_t>(n)))) [[unlikely]] {
      std::fill(s, s + n, std::numeric_limits<T>::quiet_NaN());
    }
  }
  // Outputs: acc_a += p_aj v_j, one key at a time in position order.
  std::fill(acc, acc + h * d, T(0));
  j = 0;
  for (const KeyBlock<T>* block : {&older, &newer}) {
    for (Index r = 0; r < block->rows; ++r, ++j) {
      const T* v = block->v + r * block->v_stride;  // [g d]
      for (Index a = 0; a < h; ++a) axpy(scores[a * n + j], v + a / group * d, acc + a * d, d);
    }
  }
  std::copy(acc, acc + h * d, out);
}

// ---- Checks shared by both entry points --------------------------------------------------------

void require_options(const DecodeOptions& opts, const char* where) {
  require_at_least_one(opts.heads, where, "heads");
  require(opts.window >= 0, where, [&] {
    return "window is " + std::to_string(opts.window) +
           ": it must be >= 0 (0: every earlier key; W: the last W keys)";
  });
}

void require_groups(Index h, Index g, const char* where) {
  require(h % g == 0, where, [&] {
    return std::to_string(h) + " query heads are not a multiple of " + std::to_string(g) +
           " kv heads: each kv head serves h / g query heads";
  });
}

template <Real T>
T scale_of(const DecodeOptions& opts, Index d_k, const char* where) {
  const T scale = opts.scale ? static_cast<T>(*opts.scale) : T(1) / std::sqrt(static_cast<T>(d_k));
  require(std::isfinite(scale), where, "the scale is not finite");
  return scale;
}

// "positions 3 .. 10"
std::string positions_str(Index first, Index last) {
  return "positions " + std::to_string(first) + " .. " + std::to_string(last);
}

}  // namespace

// ---- The cache --------------------------------------------------------------------------------

template <Real T>
KvCacheOf<T> make_kv_cache(Index capacity, Index kv_heads, Index d_k, Index window) {
  require_at_least_one(capacity, "make_kv_cache", "capacity");
  require_at_least_one(kv_heads, "make_kv_cache", "kv_heads");
  require_at_least_one(d_k, "make_kv_cache", "d_k");
  require(window >= 0, "make_kv_cache", [&] {
    return "window is " + std::to_string(window) + ": it must be >= 0 (0: a plain cache)";
  });
  require(window == 0 || capacity == window, "make_kv_cache", [&] {
    return "capacity " + std::to_string(capacity) + " with window " + std::to_string(window) +
           ": a rolling cache holds exactly the window's keys, so its capacity must be " +
           std::to_string(window);
  });
  // Both caches at once, and the width g d_k checked before it is multiplied out.
  const ElementCount width(kv_heads, d_k);
  const ElementCount both(ElementCount(width, capacity), 2);
  require_fits_in_memory("make_kv_cache", both, sizeof(T), "for the keys and values", [&] {
    return "capacity " + std::to_string(capacity) + ", " + std::to_string(kv_heads) +
           " kv heads and d_k " + std::to_string(d_k);
  });
  KvCacheOf<T> cache;
  cache.keys = RowCacheOf<T>(capacity, width.value(), window > 0);  // [capacity x g d_k]
  cache.values = RowCacheOf<T>(capacity, width.value(), window > 0);
  cache.kv_heads = kv_heads;
  cache.d_k = d_k;
  return cache;
}

// ---- The decode step --------------------------------------------------------------------------

template <Real T>
void decode_attention_into(const InView<T>& q, const KvCacheOf<T>& cache,
                           std::type_identity_t<Eigen::Ref<MatrixOf<T>>> out,
                           const DecodeOptions& opts) {
  constexpr const char* kWhere = "decode_attention";
  require_options(opts, kWhere);
  const Index g = cache.kv_heads, d_k = cache.d_k, h = opts.heads;
  // The cache's fields are public: check that they still describe one cache.
  require(g >= 1 && d_k >= 1 && cache.keys.width() == g * d_k && cache.values.width() == g * d_k &&
              cache.keys.capacity() == cache.values.capacity() &&
              cache.keys.rolling() == cache.values.rolling() &&
              cache.keys.size() == cache.values.size() &&
              cache.keys.next_position() == cache.values.next_position(),
          kWhere, [&] {
            return "the cache is inconsistent: " + std::to_string(g) + " kv heads of d_k " +
                   std::to_string(d_k) + ", keys " + shape_str(cache.keys.storage()) + " holding " +
                   std::to_string(cache.keys.size()) + " rows, values " +
                   shape_str(cache.values.storage()) + " holding " +
                   std::to_string(cache.values.size());
          });
  require_groups(h, g, kWhere);
  require(q.rows() == 1 && q.cols() == h * d_k, kWhere, [&] {
    return "q is " + shape_str(q) + " but " + std::to_string(h) + " heads of d_k " +
           std::to_string(d_k) + " need [1 x " + std::to_string(h * d_k) + "]: one token's query";
  });
  require(out.rows() == 1 && out.cols() == h * d_k, kWhere, [&] {
    return "out is " + shape_str(out) + " but q is " + shape_str(q) + ": they must match";
  });
  const T scale = scale_of<T>(opts, d_k, kWhere);
  require(cache.size() >= 1, kWhere,
          "the cache is empty: a decode step before prefill (append the token's key and value "
          "first; the query reads its own key too)");
  // The query at position p reads positions first .. p: all of them, or the last W.
  const Index p = cache.next_position() - 1;
  const Index first = opts.window == 0 ? 0 : std::max(Index{0}, p - opts.window + 1);
  require(cache.first_position() <= first, kWhere, [&] {
    return "the cache holds " + positions_str(cache.first_position(), p) +
           " but the query at position " + std::to_string(p) + " reads " + positions_str(first, p) +
           (opts.window == 0 ? std::string(" (window 0: every earlier key)")
                             : " (window " + std::to_string(opts.window) + ")") +
           ": a rolling cache of capacity " + std::to_string(cache.capacity()) +
           " dropped keys it needs; decode it with window = its capacity";
  });
  require(cache.first_position() >= first, kWhere, [&] {
    return "the cache holds " + std::to_string(cache.size()) + " keys (" +
           positions_str(cache.first_position(), p) + ") but the window reads the last " +
           std::to_string(opts.window) + ": a windowed decode needs a rolling cache of capacity " +
           std::to_string(opts.window) + " (make_kv_cache(..., window))";
  });
  require_apart(kWhere, {{"out", memory_of(out)}},
                {{"q", memory_of(q)},
                 {"the cache's keys", memory_of(cache.keys.storage())},
                 {"the cache's values", memory_of(cache.values.storage())}});

  const auto keys = cache.keys.segments();
  const auto values = cache.values.segments();
  const KeyBlock<T> older{keys.older.data(), values.older.data(), keys.older.rows(),
                          keys.older.outerStride(), values.older.outerStride()};
  const KeyBlock<T> newer{keys.newer.data(), values.newer.data(), keys.newer.rows(),
                          keys.newer.outerStride(), values.newer.outerStride()};
  attend_row<T>(q.data(), older, newer, Heads{h, g, d_k}, scale, out.data());
}

template <Real T>
MatrixOf<T> decode_attention(const InView<T>& q, const KvCacheOf<T>& cache,
                             const DecodeOptions& opts) {
  MatrixOf<T> out(1, q.cols());  // [1 x h d_k]; its shape is checked against q's
  decode_attention_into<T>(q, cache, out, opts);
  return out;
}

// ---- The uncached reference -------------------------------------------------------------------

namespace {

template <Real T>
MatrixOf<T> attention_rows(const ViewOf<T>& Q, const ViewOf<T>& K, const ViewOf<T>& V,
                           const DecodeOptions& opts) {
  constexpr const char* kWhere = "causal_attention_rows";
  require_options(opts, kWhere);
  const Index n = Q.rows(), h = opts.heads;
  require(n >= 1, kWhere, [&] { return "Q is " + shape_str(Q) + ": need at least one row"; });
  require(Q.cols() >= h && Q.cols() % h == 0, kWhere, [&] {
    return "Q is " + shape_str(Q) + ": its columns are not " + std::to_string(h) +
           " heads of a width d_k >= 1";
  });
  const Index d_k = Q.cols() / h;
  require(K.rows() == n && K.cols() >= d_k && K.cols() % d_k == 0, kWhere, [&] {
    return "Q is " + shape_str(Q) + " (" + std::to_string(h) + " heads of d_k " +
           std::to_string(d_k) + ") but K is " + shape_str(K) + ": it must be [" +
           std::to_string(n) + " x g d_k], g kv heads of the same d_k";
  });
  const Index g = K.cols() / d_k;
  require_groups(h, g, kWhere);
  require(V.rows() == K.rows() && V.cols() == K.cols(), kWhere, [&] {
    return "K is " + shape_str(K) + " but V is " + shape_str(V) + ": they must match";
  });
  const T scale = scale_of<T>(opts, d_k, kWhere);

  MatrixOf<T> out(n, h * d_k);  // [n x h d_k], as big as Q
  for (Index i = 0; i < n; ++i) {
    const Index first = opts.window == 0 ? 0 : std::max(Index{0}, i - opts.window + 1);
    const KeyBlock<T> keys{K.data() + first * K.outerStride(), V.data() + first * V.outerStride(),
                           i - first + 1, K.outerStride(), V.outerStride()};
    attend_row<T>(Q.data() + i * Q.outerStride(), keys, KeyBlock<T>{}, Heads{h, g, d_k}, scale,
                  out.data() + i * out.outerStride());
  }
  return out;
}

}  // namespace

Matrix causal_attention_rows(const MatrixView& Q, const MatrixView& K, const MatrixView& V,
                             const DecodeOptions& opts) {
  return attention_rows<float>(Q, K, V, opts);
}

MatrixD causal_attention_rows(const MatrixViewD& Q, const MatrixViewD& K, const MatrixViewD& V,
                              const DecodeOptions& opts) {
  return attention_rows<double>(Q, K, V, opts);
}

#define ATTN_INSTANTIATE_DECODE(T)                                                      \
  template KvCacheOf<T> make_kv_cache<T>(Index, Index, Index, Index);                   \
  template void decode_attention_into<T>(const InView<T>&, const KvCacheOf<T>&,         \
                                         std::type_identity_t<Eigen::Ref<MatrixOf<T>>>, \
                                         const DecodeOptions&);                         \
  template MatrixOf<T> decode_attention<T>(const InView<T>&, const KvCacheOf<T>&,       \
                                           const DecodeOptions&);
ATTN_INSTANTIATE_DECODE(float)
ATTN_INSTANTIATE_DECODE(double)
#undef ATTN_INSTANTIATE_DECODE

}  // namespace attn
