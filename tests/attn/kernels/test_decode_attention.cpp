// The KV cache and its decode step (chapter 11, decode_attention.hpp):
//
//   - bit for bit: decoding token by token (appending each key and value row, then attending
//     with its query) gives exactly causal_attention_rows(), the uncached reference, for MHA,
//     GQA and MQA, without and with a sliding window that wraps the rolling cache several times,
//     after a prefill of several rows, in float and double;
//   - the reference really is causal (windowed) attention: attention() (ops/attention.hpp) per
//     head with causal_mask / sliding_window_mask and the kv heads repeated per group agrees
//     within rounding, and in double to 1e-12; a hand-worked example;
//   - the window's boundary: W keys, not W + 1 (the off-by-one a 129-key window makes);
//   - the rolling cache: W rows of memory whatever n, the positions after the wrap, clear();
//   - bad input named.
//
// Units: u = 2^-24 is float's unit roundoff.
#include "attn/kernels/decode_attention.hpp"

#include "attn/core/random.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace test_decode_attention {

using attn_test::identical;
using attn_test::message_of;

using attn::AllowedMask;
using attn::DecodeOptions;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::MatrixOf;

constexpr double kU = 0x1p-24;  // float's unit roundoff
// The float paths' agreement with attention(), in units of max|V| (DecodeAgainstAttention).
constexpr double kTolerance = 16 * kU;

// ---- Inputs and the two ways of computing them
// -----------------------------------------------------

// One attention problem: n tokens, h query heads and g kv heads of width d.
struct Shape {
  Index n, h, g, d;
};

template <typename T>
struct Inputs {
  MatrixOf<T> Q, K, V;  // [n x h d], [n x g d], [n x g d]
};

template <typename T>
Inputs<T> random_inputs(std::uint64_t seed, const Shape& s) {
  attn::Rng rng(seed);
  const Matrix Q = attn::random_normal(rng, s.n, s.h * s.d);  // [n x h d]
  const Matrix K = attn::random_normal(rng, s.n, s.g * s.d);  // [n x g d]
  const Matrix V = attn::random_normal(rng, s.n, s.g * s.d);  // [n x g d]
  return {Q.cast<T>(), K.cast<T>(), V.cast<T>()};
}

// Decoding with a cache: rows 0 .. prefill - 1 appended at once, then one row at a time; after
// each append the newest query is decoded. Returns the outputs of rows prefill - 1 .. n - 1
// [(n - prefill + 1) x h d]. A window W > 0 decodes from a rolling cache of capacity W, no
// window from a plain cache of capacity n.
template <typename T>
MatrixOf<T> decode_all(attn::KvCacheOf<T>& cache, const Inputs<T>& x, const DecodeOptions& opts,
                       Index prefill = 1) {
  const Index n = x.Q.rows();
  MatrixOf<T> out(n - prefill + 1, x.Q.cols());  // [(n - prefill + 1) x h d]
  cache.append(x.K.topRows(prefill), x.V.topRows(prefill));
  attn::decode_attention_into<T>(x.Q.row(prefill - 1), cache, out.row(0), opts);
  for (Index i = prefill; i < n; ++i) {
    cache.append(x.K.row(i), x.V.row(i));
    attn::decode_attention_into<T>(x.Q.row(i), cache, out.row(i - prefill + 1), opts);
  }
  return out;
}

template <typename T>
attn::KvCacheOf<T> cache_for(const Shape& s, Index window) {
  return attn::make_kv_cache<T>(window > 0 ? window : s.n, s.g, s.d, window);
}

// K or V [n x g d] with each kv head repeated for the h / g query heads of its group, [n x h d]:
// torch.repeat_interleave(k, h // g, dim=heads), as Llama's repeat_kv, written out.
template <typename T>
MatrixOf<T> repeat_kv(const MatrixOf<T>& kv, Index h, Index g, Index d) {
  MatrixOf<T> out(kv.rows(), h * d);  // [n x h d]
  for (Index a = 0; a < h; ++a) out.middleCols(a * d, d) = kv.middleCols(a / (h / g) * d, d);
  return out;
}

// The library's plain path: attention() per head over the repeated kv heads, with the mask.
template <typename T>
MatrixOf<T> plain_attention(const Inputs<T>& x, Index h, Index g, const AllowedMask& mask,
                            float scale) {
  const Index d = x.Q.cols() / h;
  const MatrixOf<T> K = repeat_kv(x.K, h, g, d), V = repeat_kv(x.V, h, g, d);  // [n x h d]
  MatrixOf<T> out(x.Q.rows(), h * d);                                          // [n x h d]
  for (Index a = 0; a < h; ++a) {
    out.middleCols(a * d, d) =
        attn::attention(x.Q.middleCols(a * d, d), K.middleCols(a * d, d), V.middleCols(a * d, d),
                        {.scale = scale, .allowed = mask})
            .out;
  }
  return out;
}

AllowedMask mask_for(Index n, Index window) {
  return window > 0 ? attn::sliding_window_mask(n, window) : attn::causal_mask(n);
}

template <typename T>
class DecodeBitwise : public testing::Test {};
using Reals = testing::Types<float, double>;
TYPED_TEST_SUITE(DecodeBitwise, Reals);

// ---- Cached == uncached, to the last bit
// ------------------------------------------------------------

// d = 36: whole packets and a tail of 4 in every dot product and every row of values, for
// packets of 4, 8 or 16 lanes (the kernel takes 2 packets at a time: 32 floats with AVX-512).
// W = 5 and n = 3W + 2 = 17: the ring wraps three times and its seam moves through every slot.
TYPED_TEST(DecodeBitwise, TokenByTokenEqualsTheReferenceForMhaGqaMqaWithAndWithoutAWindow) {
  using T = TypeParam;
  constexpr Index kW = 5, kN = 3 * kW + 2, kH = 4, kD = 36;
  for (const Index g : {kH, Index{2}, Index{1}}) {  // MHA, GQA, MQA
    for (const Index window : {Index{0}, kW}) {
      SCOPED_TRACE("g = " + std::to_string(g) + ", window = " + std::to_string(window));
      const Shape s{kN, kH, g, kD};
      const Inputs<T> x = random_inputs<T>(100 + static_cast<std::uint64_t>(g), s);
      const DecodeOptions opts{.heads = kH, .window = window};
      attn::KvCacheOf<T> cache = cache_for<T>(s, window);
      const MatrixOf<T> cached = decode_all(cache, x, opts);
      const MatrixOf<T> reference = attn::causal_attention_rows(x.Q, x.K, x.V, opts);
      EXPECT_EQ(attn::max_abs_diff(cached, reference), 0.0);
      if (window > 0) {
        EXPECT_EQ(cache.first_position(), kN - kW);  // it did wrap: positions 12 .. 16 held
        EXPECT_EQ(cache.size(), kW);
      }
    }
  }
}

// A prompt of several rows appended at once (a prefill), then decoding: the same bits as the
// reference from the prompt's last row on. Prefills shorter than, equal to and longer than
// the window (the rolling cache keeps only the prompt's last W rows).
TYPED_TEST(DecodeBitwise, PrefillThenDecodeEqualsTheReference) {
  using T = TypeParam;
  constexpr Index kW = 6, kN = 23, kH = 6, kG = 2, kD = 16;
  const Shape s{kN, kH, kG, kD};
  const Inputs<T> x = random_inputs<T>(7, s);
  for (const Index window : {Index{0}, kW}) {
    const DecodeOptions opts{.heads = kH, .scale = 0.3f, .window = window};
    const MatrixOf<T> reference = attn::causal_attention_rows(x.Q, x.K, x.V, opts);
    for (const Index prefill : {Index{4}, kW, Index{11}}) {
      SCOPED_TRACE("window " + std::to_string(window) + ", prefill " + std::to_string(prefill));
      attn::KvCacheOf<T> cache = cache_for<T>(s, window);
      const MatrixOf<T> cached = decode_all(cache, x, opts, prefill);
      EXPECT_EQ(attn::max_abs_diff(cached, reference.bottomRows(kN - prefill + 1)), 0.0);
    }
  }
}

// The reference reads column blocks of bigger matrices in place (a projection's Q, K, V
// columns), and gives the same bits as on compact copies.
TYPED_TEST(DecodeBitwise, ReferenceReadsColumnBlocksInPlace) {
  using T = TypeParam;
  const Shape s{9, 2, 1, 8};
  const Inputs<T> x = random_inputs<T>(3, s);
  MatrixOf<T> qkv(s.n, 16 + 8 + 8 + 3);  // [n x (h d + 2 g d + 3)]: Q | K | V | spare
  qkv.setConstant(T(99));
  qkv.middleCols(0, 16) = x.Q;
  qkv.middleCols(16, 8) = x.K;
  qkv.middleCols(24, 8) = x.V;
  const DecodeOptions opts{.heads = 2, .window = 4};
  EXPECT_EQ(
      attn::max_abs_diff(attn::causal_attention_rows(qkv.middleCols(0, 16), qkv.middleCols(16, 8),
                                                     qkv.middleCols(24, 8), opts),
                         attn::causal_attention_rows(x.Q, x.K, x.V, opts)),
      0.0);
}

// ---- The reference is causal (windowed) attention
// ---------------------------------------------------

// By hand: one head of d_k = 1, scale 1, q = 1; key 0 scores 0 and key 1 scores ln 3, so the
// weights are 1/4 and 3/4, and with values 4 and 8 the output is 1 + 6 = 7. The first token
// reads only itself: exactly 4; with a window of 1 the second reads only itself: exactly 8.
TEST(DecodeByHand, TwoTokens) {
  const Matrix q = Matrix::Constant(1, 1, 1.0f);  // [1 x 1]
  attn::KvCache cache = attn::make_kv_cache<float>(2, 1, 1);
  cache.append(Matrix::Constant(1, 1, 0.0f), Matrix::Constant(1, 1, 4.0f));
  const DecodeOptions opts{.heads = 1, .scale = 1.0f};
  EXPECT_EQ(attn::decode_attention<float>(q, cache, opts)(0, 0), 4.0f);  // one key: weight 1
  cache.append(Matrix::Constant(1, 1, std::log(3.0f)), Matrix::Constant(1, 1, 8.0f));
  // ln 3 rounded to float, its exp and the sum 1 + 3 are each off by ~u: a few u of 7.
  EXPECT_NEAR(attn::decode_attention<float>(q, cache, opts)(0, 0), 7.0f, 4 * kU * 7.0);

  attn::KvCache window = attn::make_kv_cache<float>(1, 1, 1, 1);
  window.append(Matrix::Constant(1, 1, 0.0f), Matrix::Constant(1, 1, 4.0f));
  window.append(Matrix::Constant(1, 1, std::log(3.0f)), Matrix::Constant(1, 1, 8.0f));
  EXPECT_EQ(
      attn::decode_attention<float>(q, window, {.heads = 1, .scale = 1.0f, .window = 1})(0, 0),
      8.0f);
}

// Against attention() per head, in float. Both paths compute the same formula with other
// summation orders (Eigen's GEMM for Q K^T and W V against lanes and one key at a time), so
// they differ by rounding alone: the scores by a few u of sum_f |q_f k_f| scale (~2, with
// d = 16 features of N(0, 1)), which moves a weight by as much relative, and the output, a
// weighted mean of values |v| <= ~4, by about that times |v|; plus the exps (2 u each) and the
// sums over at most 40 keys. Measured: at most 9 u, 2.7 u max|V|, over the cases below (0 with
// a window of 1: one key, weight exactly 1). The tolerance, 16 u max|V|, is a few float ulps of
// the largest output with a margin of 6; a formula error (a key too many or too few, a wrong
// kv head, a missing scale) moves outputs by 1e-3 or more (below).
TEST(DecodeAgainstAttention, CausalAndWindowedMhaGqaMqaWithinRounding) {
  constexpr Index kN = 40, kH = 4, kD = 16;
  const float scale = 1.0f / 4.0f;  // 1/sqrt(16), exact
  for (const Index g : {kH, Index{2}, Index{1}}) {
    for (const Index window : {Index{0}, Index{1}, Index{7}, kN, kN + 3}) {
      SCOPED_TRACE("g = " + std::to_string(g) + ", window = " + std::to_string(window));
      const Inputs<float> x =
          random_inputs<float>(11 + static_cast<std::uint64_t>(g), {kN, kH, g, kD});
      const DecodeOptions opts{.heads = kH, .window = window};  // the default scale, 1/4
      const Matrix reference = attn::causal_attention_rows(x.Q, x.K, x.V, opts);
      const Matrix plain = plain_attention(x, kH, g, mask_for(kN, window), scale);
      const double tolerance = kTolerance * x.V.cwiseAbs().maxCoeff();
      EXPECT_LE(attn::max_abs_diff(reference, plain), tolerance);
    }
  }
}

// In double the two paths agree to the rounding of double: a few u_d = 1.1e-16 of the same
// magnitudes, ~1e-15; 1e-12 leaves a factor 1000 and is still 1e9 below a formula error.
TEST(DecodeAgainstAttention, DoubleReferenceEqualsFloat64AttentionTo1em12) {
  constexpr Index kN = 33, kH = 6, kG = 3, kD = 12;
  for (const Index window : {Index{0}, Index{5}}) {
    const Inputs<double> x = random_inputs<double>(21, {kN, kH, kG, kD});
    const DecodeOptions opts{.heads = kH, .scale = 0.25f, .window = window};
    const MatrixD reference = attn::causal_attention_rows(x.Q, x.K, x.V, opts);
    const MatrixD plain = plain_attention(x, kH, kG, mask_for(kN, window), 0.25f);
    EXPECT_LE(attn::max_abs_diff(reference, plain), 1e-12) << "window " << window;
  }
}

// The boundary: a rolling cache of W = 128 gives attention() with sliding_window_mask(n, 128)
// within rounding (tolerance as above), and differs from sliding_window_mask(n, 129), the
// off-by-one that reads 129 keys, by far more: once the queries are past the window, one key
// in 129 is extra, its weight ~1/129 and its value ~1 away from the mean, ~1e-3 and up
// (measured: 1.9e-3 in the closest row, 0.27 at most; the tolerance is 4e-6).
TEST(DecodeWindowBoundary, WindowOf128ReadsExactly128Keys) {
  constexpr Index kW = 128, kN = 300, kH = 2, kG = 1, kD = 16;
  const Shape s{kN, kH, kG, kD};
  const Inputs<float> x = random_inputs<float>(128, s);
  const DecodeOptions opts{.heads = kH, .window = kW};
  attn::KvCache cache = cache_for<float>(s, kW);
  const Matrix cached = decode_all(cache, x, opts);
  const double tolerance = kTolerance * x.V.cwiseAbs().maxCoeff();
  const Matrix right = plain_attention(x, kH, kG, attn::sliding_window_mask(kN, kW), 0.25f);
  const Matrix off_by_one =
      plain_attention(x, kH, kG, attn::sliding_window_mask(kN, kW + 1), 0.25f);
  EXPECT_LE(attn::max_abs_diff(cached, right), tolerance);
  // Rows 0 .. 127 read the same keys under both masks; from row 128 on, the 129th key differs.
  EXPECT_LE(attn::max_abs_diff(cached.topRows(kW), off_by_one.topRows(kW)), tolerance);
  EXPECT_GT(attn::max_abs_diff(cached.bottomRows(kN - kW), off_by_one.bottomRows(kN - kW)),
            1000 * tolerance);
  // And every row past the window differs, not just one unlucky row.
  for (Index i = kW; i < kN; ++i) {
    EXPECT_GT(attn::max_abs_diff(cached.row(i), off_by_one.row(i)), 10 * tolerance) << "row " << i;
  }
}

// A key missing is as visible: the full causal attention differs from the windowed one past
// the window (a cache that silently dropped keys would pass for the wrong one).
TEST(DecodeWindowBoundary, WindowedDiffersFromFullCausal) {
  const Shape s{20, 2, 2, 8};
  const Inputs<float> x = random_inputs<float>(5, s);
  const Matrix full = attn::causal_attention_rows(x.Q, x.K, x.V, {.heads = 2});
  const Matrix windowed = attn::causal_attention_rows(x.Q, x.K, x.V, {.heads = 2, .window = 8});
  EXPECT_EQ(attn::max_abs_diff(full.topRows(8), windowed.topRows(8)), 0.0);  // the same keys
  EXPECT_GT(attn::max_abs_diff(full.bottomRows(12), windowed.bottomRows(12)), 1e-2);
}

// ---- The rolling cache
// ------------------------------------------------------------------------------

// W rows of memory, however long the sequence: 2 caches x W rows x g d floats.
TEST(KvCacheRolling, BytesStayWRowsWhateverN) {
  constexpr Index kW = 8, kG = 2, kD = 4;
  attn::KvCache cache = attn::make_kv_cache<float>(kW, kG, kD, kW);
  const std::size_t bytes = 2 * kW * kG * kD * sizeof(float);  // 512
  EXPECT_EQ(cache.bytes(), bytes);
  attn::Rng rng(1);
  for (Index n = 1; n <= 100; ++n) {
    cache.append(attn::random_normal(rng, 1, kG * kD), attn::random_normal(rng, 1, kG * kD));
    ASSERT_EQ(cache.bytes(), bytes) << "after " << n << " tokens";
    ASSERT_EQ(cache.size(), std::min(n, kW));
  }
  EXPECT_EQ(cache.next_position(), 100);
  // A plain cache for the same 100 tokens holds them all: 100 / W times the memory.
  EXPECT_EQ(attn::make_kv_cache<float>(100, kG, kD).bytes(), bytes * 100 / kW);
}

// Right after the wrap: W + 1 tokens appended, position 0 is gone, position W sits in slot 0,
// and the two segments give positions 1 .. W in order.
TEST(KvCacheRolling, PositionsRightAfterTheWrap) {
  constexpr Index kW = 4, kG = 1, kD = 2;
  attn::KvCache cache = attn::make_kv_cache<float>(kW, kG, kD, kW);
  Matrix K(kW + 1, kD), V(kW + 1, kD);  // [W + 1 x d]: row p = (p, 10 p) and (-p, -10 p)
  for (Index p = 0; p <= kW; ++p) {
    K.row(p) << static_cast<float>(p), static_cast<float>(10 * p);
    V.row(p) = -K.row(p);
  }
  cache.append(K.topRows(kW), V.topRows(kW));
  EXPECT_EQ(cache.first_position(), 0);
  EXPECT_EQ(cache.size(), kW);
  cache.append(K.row(kW), V.row(kW));
  EXPECT_EQ(cache.first_position(), 1);
  EXPECT_EQ(cache.next_position(), kW + 1);
  EXPECT_EQ(cache.size(), kW);
  EXPECT_EQ(cache.keys.storage()(0, 0), static_cast<float>(kW));  // slot 0 = position W
  const auto keys = cache.keys.segments();
  ASSERT_EQ(keys.older.rows(), kW - 1);  // positions 1 .. W - 1, slots 1 .. W - 1
  ASSERT_EQ(keys.newer.rows(), 1);       // position W, slot 0
  EXPECT_TRUE(identical(keys.older, K.middleRows(1, kW - 1)));
  EXPECT_TRUE(identical(keys.newer, K.row(kW)));
  EXPECT_TRUE(identical(cache.values.segments().newer, V.row(kW)));
  for (Index p = 1; p <= kW; ++p) EXPECT_TRUE(identical(cache.keys.row(p), K.row(p))) << p;
}

// clear() starts a new sequence at position 0 (the bug it prevents: a position pointer not
// reset, which puts the new sequence's first token at the old one's next position and, with
// RoPE, rotates it by the wrong angle; or stale keys left to be read). Decoding a second
// sequence after clear() gives the same bits as decoding it in a fresh cache.
TEST(KvCacheRolling, ClearResetsPositionsAndDecodesLikeAFreshCache) {
  constexpr Index kW = 5;
  for (const Index window : {Index{0}, kW}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const Shape first{13, 4, 2, 8}, second{11, 4, 2, 8};
    const Inputs<float> a = random_inputs<float>(1, first), b = random_inputs<float>(2, second);
    const DecodeOptions opts{.heads = 4, .window = window};
    attn::KvCache reused = cache_for<float>(first, window);
    decode_all(reused, a, opts);
    reused.clear();
    EXPECT_EQ(reused.size(), 0);
    EXPECT_EQ(reused.next_position(), 0);
    EXPECT_EQ(reused.first_position(), 0);
    EXPECT_NE(message_of([&] {
                attn::decode_attention<float>(b.Q.row(0), reused, opts);
              }).find("before prefill"),
              std::string::npos);
    attn::KvCache fresh = cache_for<float>(first, window);  // the same capacity
    const Matrix after_clear = decode_all(reused, b, opts);
    EXPECT_EQ(attn::max_abs_diff(after_clear, decode_all(fresh, b, opts)), 0.0);
    EXPECT_EQ(reused.next_position(), second.n);
  }
}

// ---- Bad input ----------------------------------------------------------------------------------

// Whether `f` throws std::invalid_argument whose message starts with `where` and contains
// `what`.
template <typename F>
void expect_error(F&& f, const std::string& where, const std::string& what) {
  const std::string m = message_of(f);
  EXPECT_EQ(m.rfind(where + ": ", 0), 0u) << m;
  EXPECT_NE(m.find(what), std::string::npos) << m;
}

TEST(DecodeBadInput, EmptyCacheIsADecodeStepBeforePrefill) {
  const attn::KvCache cache = attn::make_kv_cache<float>(4, 1, 8);
  const Matrix q = Matrix::Zero(1, 8);
  expect_error([&] { attn::decode_attention<float>(q, cache, {.heads = 1}); }, "decode_attention",
               "a decode step before prefill");
}

TEST(DecodeBadInput, PlainCachePastCapacityThrowsAndKeepsWhatItHeld) {
  attn::KvCache cache = attn::make_kv_cache<float>(4, 1, 2);
  cache.append(Matrix::Ones(3, 2), Matrix::Ones(3, 2));
  expect_error([&] { cache.append(Matrix::Ones(2, 2), Matrix::Ones(2, 2)); }, "RowCache::append",
               "2 rows do not fit: 3 of 4 held");
  EXPECT_EQ(cache.size(), 3);  // nothing appended, neither keys nor values
  EXPECT_EQ(cache.values.size(), 3);
  cache.append(Matrix::Ones(1, 2), Matrix::Ones(1, 2));
  expect_error([&] { cache.append(Matrix::Ones(1, 2), Matrix::Ones(1, 2)); }, "RowCache::append",
               "do not fit");
}

TEST(DecodeBadInput, WrongWidthsAreNamed) {
  attn::KvCache cache = attn::make_kv_cache<float>(4, 2, 8);  // rows of 2 x 8
  expect_error([&] { cache.append(Matrix::Ones(1, 8), Matrix::Ones(1, 8)); }, "KvCache::append",
               "rows are [1 x 8] but the cache holds 2 kv heads of d_k = 8: rows of width 16");
  expect_error([&] { cache.append(Matrix::Ones(2, 16), Matrix::Ones(1, 16)); }, "KvCache::append",
               "k_rows are [2 x 16] but v_rows are [1 x 16]");
  EXPECT_EQ(cache.size(), 0);
  cache.append(Matrix::Ones(1, 16), Matrix::Ones(1, 16));
  Matrix out(1, 32);
  expect_error(
      [&] { attn::decode_attention_into<float>(Matrix::Ones(1, 24), cache, out, {.heads = 4}); },
      "decode_attention", "q is [1 x 24] but 4 heads of d_k 8 need [1 x 32]");
  expect_error(
      [&] { attn::decode_attention_into<float>(Matrix::Ones(2, 32), cache, out, {.heads = 4}); },
      "decode_attention", "q is [2 x 32]");
  Matrix narrow(1, 16);
  expect_error(
      [&] { attn::decode_attention_into<float>(Matrix::Ones(1, 32), cache, narrow, {.heads = 4}); },
      "decode_attention", "out is [1 x 16] but q is [1 x 32]");
  const Matrix Q = Matrix::Ones(5, 32), K = Matrix::Ones(5, 16);
  expect_error([&] { attn::causal_attention_rows(Q, K, Matrix::Ones(5, 8), {.heads = 4}); },
               "causal_attention_rows", "K is [5 x 16] but V is [5 x 8]");
  expect_error(
      [&] {
        attn::causal_attention_rows(Q, Matrix::Ones(4, 16), Matrix::Ones(4, 16), {.heads = 4});
      },
      "causal_attention_rows", "but K is [4 x 16]");
  expect_error(
      [&] {
        attn::causal_attention_rows(Q, Matrix::Ones(5, 12), Matrix::Ones(5, 12), {.heads = 4});
      },
      "causal_attention_rows", "g kv heads of the same d_k");
  expect_error([&] { attn::causal_attention_rows(Q, K, K, {.heads = 3}); }, "causal_attention_rows",
               "its columns are not 3 heads");
}

TEST(DecodeBadInput, KvHeadsMustDivideQueryHeads) {
  attn::KvCache cache = attn::make_kv_cache<float>(4, 3, 2);
  cache.append(Matrix::Ones(1, 6), Matrix::Ones(1, 6));
  expect_error([&] { attn::decode_attention<float>(Matrix::Ones(1, 8), cache, {.heads = 4}); },
               "decode_attention", "4 query heads are not a multiple of 3 kv heads");
  expect_error(
      [&] {
        attn::causal_attention_rows(Matrix::Ones(2, 8), Matrix::Ones(2, 6), Matrix::Ones(2, 6),
                                    {.heads = 4});
      },
      "causal_attention_rows", "4 query heads are not a multiple of 3 kv heads");
}

TEST(DecodeBadInput, NegativeWindowsAndBadSizes) {
  attn::KvCache cache = attn::make_kv_cache<float>(4, 1, 2);
  cache.append(Matrix::Ones(1, 2), Matrix::Ones(1, 2));
  expect_error(
      [&] { attn::decode_attention<float>(Matrix::Ones(1, 2), cache, {.heads = 1, .window = -1}); },
      "decode_attention", "window is -1");
  expect_error(
      [&] {
        attn::causal_attention_rows(Matrix::Ones(2, 2), Matrix::Ones(2, 2), Matrix::Ones(2, 2),
                                    {.heads = 1, .window = -3});
      },
      "causal_attention_rows", "window is -3");
  expect_error([&] { attn::make_kv_cache<float>(4, 1, 2, -1); }, "make_kv_cache", "window is -1");
  expect_error([&] { attn::decode_attention<float>(Matrix::Ones(1, 2), cache, {.heads = 0}); },
               "decode_attention", "heads is 0");
  expect_error(
      [&] {
        attn::decode_attention<float>(
            Matrix::Ones(1, 2), cache,
            {.heads = 1, .scale = std::numeric_limits<float>::quiet_NaN()});
      },
      "decode_attention", "the scale is not finite");
  expect_error([&] { attn::make_kv_cache<float>(0, 1, 2); }, "make_kv_cache", "capacity is 0");
  expect_error([&] { attn::make_kv_cache<float>(4, 0, 2); }, "make_kv_cache", "kv_heads is 0");
  expect_error([&] { attn::make_kv_cache<double>(4, 1, 0); }, "make_kv_cache", "d_k is 0");
  expect_error([&] { attn::make_kv_cache<float>(Index{1} << 40, 8, 128); }, "make_kv_cache",
               "for the keys and values; this machine has");
  expect_error(
      [&] { attn::causal_attention_rows(Matrix(0, 2), Matrix(0, 2), Matrix(0, 2), {.heads = 1}); },
      "causal_attention_rows", "need at least one row");
}

// The cache must hold exactly the keys the query reads: a windowed decode of a plain cache past
// the window (it would read W + 1 keys or more), a rolling cache of 129 for a window of 128,
// a wrapped rolling cache decoded without its window (keys it needs are gone).
TEST(DecodeBadInput, CacheThatDoesNotHoldTheWindowIsRefused) {
  expect_error([&] { attn::make_kv_cache<float>(129, 1, 2, 128); }, "make_kv_cache",
               "capacity 129 with window 128");
  attn::KvCache plain = attn::make_kv_cache<float>(8, 1, 2);
  plain.append(Matrix::Ones(4, 2), Matrix::Ones(4, 2));
  const Matrix q = Matrix::Ones(1, 2);
  EXPECT_NO_THROW(attn::decode_attention<float>(q, plain, {.heads = 1, .window = 4}));  // 4 of 4
  plain.append(Matrix::Ones(1, 2), Matrix::Ones(1, 2));
  expect_error([&] { attn::decode_attention<float>(q, plain, {.heads = 1, .window = 4}); },
               "decode_attention",
               "holds 5 keys (positions 0 .. 4) but the window reads the last 4");

  attn::KvCache rolling = attn::make_kv_cache<float>(4, 1, 2, 4);
  rolling.append(Matrix::Ones(4, 2), Matrix::Ones(4, 2));
  EXPECT_NO_THROW(attn::decode_attention<float>(q, rolling, {.heads = 1}));  // not wrapped yet
  rolling.append(Matrix::Ones(2, 2), Matrix::Ones(2, 2));
  expect_error([&] { attn::decode_attention<float>(q, rolling, {.heads = 1}); }, "decode_attention",
               "holds positions 2 .. 5 but the query at position 5 reads positions 0 .. 5");
  expect_error([&] { attn::decode_attention<float>(q, rolling, {.heads = 1, .window = 5}); },
               "decode_attention", "reads positions 1 .. 5 (window 5)");
  expect_error([&] { attn::decode_attention<float>(q, rolling, {.heads = 1, .window = 3}); },
               "decode_attention",
               "holds 4 keys (positions 2 .. 5) but the window reads the last 3");
  EXPECT_NO_THROW(attn::decode_attention<float>(q, rolling, {.heads = 1, .window = 4}));
}

TEST(DecodeBadInput, OutMayNotShareMemoryWithQOrTheCache) {
  attn::KvCache cache = attn::make_kv_cache<float>(4, 2, 4);
  cache.append(Matrix::Ones(2, 8), Matrix::Ones(2, 8));
  Matrix q = Matrix::Ones(1, 16);  // [1 x 16]: 4 heads over 2 kv heads
  expect_error([&] { attn::decode_attention_into<float>(q, cache, q, {.heads = 4}); },
               "decode_attention", "out shares memory with q");
  Matrix wide = Matrix::Ones(1, 32);  // q and out side by side: no element shared, accepted
  attn::decode_attention_into<float>(wide.leftCols(16), cache, wide.rightCols(16), {.heads = 4});
  EXPECT_TRUE(
      identical(wide.rightCols(16), Matrix::Ones(1, 16)));       // every value is 1: so is the mean
  attn::KvCache one_head = attn::make_kv_cache<float>(4, 1, 4);  // rows as wide as q
  one_head.append(Matrix::Ones(1, 4), Matrix::Ones(1, 4));
  Eigen::Map<Matrix> slot(const_cast<float*>(one_head.values.storage().data()), 1, 4);
  expect_error(
      [&] { attn::decode_attention_into<float>(Matrix::Ones(1, 4), one_head, slot, {.heads = 1}); },
      "decode_attention", "out shares memory with the cache's values");
}

TEST(DecodeBadInput, KeysAndValuesThatDisagreeAreRefused) {
  attn::KvCache cache = attn::make_kv_cache<float>(4, 1, 2);
  cache.append(Matrix::Ones(2, 2), Matrix::Ones(2, 2));
  cache.keys.append(Matrix::Ones(1, 2));  // the fields are public: keys one row ahead
  expect_error([&] { attn::decode_attention<float>(Matrix::Ones(1, 2), cache, {.heads = 1}); },
               "decode_attention", "the cache is inconsistent");
  expect_error([&] { cache.append(Matrix::Ones(1, 2), Matrix::Ones(1, 2)); }, "KvCache::append",
               "the keys and values hold different positions");
}

}  // namespace test_decode_attention
