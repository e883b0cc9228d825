// Multi-head latent attention (chapter 11): a PyTorch fixture of the naive form in float64 and
// float32 against both C++ forms and decoding, the absorption identity (absorbed == naive to
// rounding), decoding token by token against the absorbed forward bit for bit, the cache's
// size against MHA and GQA with DeepSeek-V2's numbers, the RoPE layouts, and every refusal.
#include "attn/core/random.hpp"
#include "attn/layers/latent_attention.hpp"
#include "attn/ops/rope.hpp"
#include "course/npy.hpp"

#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace test_latent_attention {

using attn::Index;
using attn::MatrixD;
using attn::MatrixOf;
using attn_test::identical;
using attn_test::message_of;

// ---- helpers ------------------------------------------------------------------------------------

// The fixture's sizes (scripts/fixtures/latent_attention.py).
constexpr attn::LatentAttentionSizes kFixtureSizes{
    .d_model = 16, .heads = 2, .d_nope = 4, .d_rope = 4, .d_v = 4, .d_c = 6};

course::NpyArray load(const std::string& name) {
  return course::read_npy(attn_test::fixture("latent_attention", "mla_" + name + ".npy"));
}

// The fixture's layer, in T (float32 values, so exact in both).
template <attn::Real T>
attn::LatentAttentionOf<T> fixture_layer() {
  const auto linear = [](const std::string& name) {
    return attn::LinearOf<T>{load(name).to_matrix_d().cast<T>(), {}};
  };
  return {kFixtureSizes.heads, kFixtureSizes.d_nope, kFixtureSizes.d_rope, kFixtureSizes.d_v,
          kFixtureSizes.d_c,   linear("q_proj"),     linear("kv_down"),    linear("k_up"),
          linear("v_up"),      linear("k_rope"),     linear("out_proj")};
}

// A random layer and tokens. The projections into q, c and k^R are scaled by 3 (nn.Linear's
// default bound gives this layer scores ~0.1 and nearly uniform weights, which would hide a
// wrong score); out_proj stays as drawn.
struct RandomLayer {
  attn::LatentAttention layer;
  attn::Matrix x;  // [n x d_model]
};

RandomLayer random_setup(std::uint64_t seed, const attn::LatentAttentionSizes& s, Index n,
                         bool bias) {
  attn::Rng rng(seed);
  RandomLayer setup{attn::latent_attention_init(rng, s, bias),
                    attn::random_normal(rng, n, s.d_model)};
  for (attn::Linear* l :
       {&setup.layer.q_proj, &setup.layer.kv_down, &setup.layer.k_up, &setup.layer.k_rope}) {
    l->weight *= 3.0f;
  }
  return setup;
}

// A config of chapter-like proportions: d_c larger than a head, smaller than h d_nope.
constexpr attn::LatentAttentionSizes kSizes{
    .d_model = 64, .heads = 4, .d_nope = 16, .d_rope = 8, .d_v = 16, .d_c = 32};
constexpr Index kTokens = 24;

// max |a - b| / max |b|: the difference relative to the output's scale.
template <typename A, typename B>
double relative_diff(const A& a, const B& b) {
  return attn::max_abs_diff(a, b) / static_cast<double>(b.cwiseAbs().maxCoeff());
}

// ---- the PyTorch fixture ------------------------------------------------------------------------

TEST(LatentAttentionFixture, BothFormsMatchTorchInDouble) {
  const attn::LatentAttentionD layer = fixture_layer<double>();
  const MatrixD x = load("x").to_matrix_d();  // [6 x 16]
  const attn::RopeTable table = attn::rope_table(6, 4);
  const MatrixD out = load("out_f64").to_matrix_d(), full = load("out_full_f64").to_matrix_d();
  const course::NpyArray weights = load("weights_f64");  // [2, 6, 6]
  // Both sides compute the same sums in float64, in other orders, of numbers |out| < 5: their
  // roundings are ~1e-15 (the script measured 9e-16 between its own two forms); 1e-12 leaves
  // room and still fails for any wrong term (a dropped RoPE part moves the output by ~1).
  constexpr double kTol = 1e-12;
  for (const bool absorbed : {false, true}) {
    const auto run = [&](bool causal) {
      const attn::LatentAttentionOptions opts{.causal = causal, .rope = &table};
      return absorbed ? attn::latent_attention_absorbed(layer, x, opts)
                      : attn::latent_attention_forward(layer, x, opts);
    };
    const attn::LatentAttentionResultD r = run(true);
    EXPECT_LT(attn::max_abs_diff(r.out, out), kTol) << absorbed;
    EXPECT_LT(attn::max_abs_diff(r.c, load("c_f64").to_matrix_d()), kTol) << absorbed;
    EXPECT_LT(attn::max_abs_diff(r.k_rope, load("k_rope_f64").to_matrix_d()), kTol) << absorbed;
    double worst = 0.0;
    for (Index h = 0; h < 2; ++h)
      for (Index i = 0; i < 6; ++i)
        for (Index j = 0; j < 6; ++j)
          worst =
              std::max(worst, std::abs(r.weights[static_cast<std::size_t>(h)](i, j) -
                                       weights.data[static_cast<std::size_t>(36 * h + 6 * i + j)]));
    EXPECT_LT(worst, kTol) << absorbed;
    EXPECT_LT(attn::max_abs_diff(run(false).out, full), kTol) << absorbed;
  }
}

TEST(LatentAttentionFixture, BothFormsMatchTorchInFloat) {
  const attn::LatentAttention layer = fixture_layer<float>();
  const attn::Matrix x = load("x").to_matrix();
  const attn::RopeTable table = attn::rope_table(6, 4);
  const MatrixD out = load("out_f64").to_matrix_d();
  const attn::Matrix out32 = load("out_f32").to_matrix();  // PyTorch's float32 run
  for (const bool absorbed : {false, true}) {
    const attn::LatentAttentionOptions opts{.rope = &table};
    const attn::Matrix ours = absorbed ? attn::latent_attention_absorbed(layer, x, opts).out
                                       : attn::latent_attention_forward(layer, x, opts).out;
    // float32 rounding (6e-8 relative) of |out| < 5 through four products of <= 16 terms and a
    // softmax: PyTorch's float32 run is 7.2e-7 from float64 (the script measured it). 1e-5 is
    // that with room for either side's order of summation; a wrong term moves it by ~1.
    EXPECT_LT(attn::max_abs_diff(ours, out), 1e-5) << absorbed;
    EXPECT_LT(attn::max_abs_diff(ours, out32), 1e-5f) << absorbed;
  }
}

TEST(LatentAttentionFixture, DecodingMatchesTorch) {
  const attn::RopeTable table = attn::rope_table(6, 4);
  const MatrixD out = load("out_f64").to_matrix_d();
  const auto decode_all = [&](const auto& layer, const auto& x) {
    using T = typename std::remove_cvref_t<decltype(layer)>::Scalar;
    attn::LatentCacheOf<T> cache(6, layer.d_c, layer.d_rope);
    MatrixOf<T> rows(6, layer.d_model());  // [6 x 16]
    for (Index i = 0; i < 6; ++i)
      rows.row(i) = attn::latent_attention_decode(layer, x.row(i), cache, {.rope = &table});
    return rows;
  };
  // The tolerances of the two tests above: float64 rounding, and float32's.
  EXPECT_LT(attn::max_abs_diff(decode_all(fixture_layer<double>(), load("x").to_matrix_d()), out),
            1e-12);
  EXPECT_LT(attn::max_abs_diff(decode_all(fixture_layer<float>(), load("x").to_matrix()), out),
            1e-5);
}

// ---- the absorption identity ------------------------------------------------------------------

// The worst relative difference between the absorbed and the naive output, over seeds, with and
// without biases, causal or not.
template <attn::Real T>
double worst_absorbed_vs_naive(const attn::LatentAttentionSizes& s) {
  const attn::RopeTable table = attn::rope_table(kTokens, s.d_rope);
  double worst = 0.0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    for (const bool bias : {false, true}) {
      for (const bool causal : {true, false}) {
        const RandomLayer setup = random_setup(seed, s, kTokens, bias);
        const attn::LatentAttentionOf<T> layer = attn::cast<T>(setup.layer);
        const MatrixOf<T> x = setup.x.cast<T>();
        const attn::LatentAttentionOptions opts{.causal = causal, .rope = &table};
        const MatrixOf<T> naive = attn::latent_attention_forward(layer, x, opts).out;
        const MatrixOf<T> absorbed = attn::latent_attention_absorbed(layer, x, opts).out;
        worst = std::max(worst, relative_diff(absorbed, naive));
      }
    }
  }
  return worst;
}

// The a-priori scale of the rounding: each form's output is a chain of dot products whose
// lengths add up to L = d_model (q, c, k^R) + d_nope (q_lat) + d_c + d_rope (a score) + n (the
// softmax's sum and the weighted sum) + d_c (W_UV) + h d_v (W_O), and a chain's relative error
// is at most ~L eps (Higham's gamma_L) times the growth through the softmax, where a score's
// absolute error e changes its weight by a factor exp(e). Measured over 5 seeds, with and
// without biases and the mask (the tests record it): 8.3 eps in float, 9.5 eps in double. L eps
// is 240 eps for kSizes, so L eps is the bound: a worst case the measurement stays far below,
// and still tight enough that a wrong term or a dropped bias (a relative change ~1e-2 to 1)
// fails it by orders of magnitude.
template <attn::Real T>
double rounding_bound(const attn::LatentAttentionSizes& s, Index n) {
  const Index L = s.d_model + s.d_nope + s.d_c + s.d_rope + n + s.d_c + s.heads * s.d_v;
  return static_cast<double>(L) * std::numeric_limits<T>::epsilon();
}

TEST(LatentAttentionIdentity, AbsorbedEqualsNaiveInFloat) {
  const double worst = worst_absorbed_vs_naive<float>(kSizes);
  RecordProperty("worst_relative_diff_float_in_eps",
                 std::to_string(worst / std::numeric_limits<float>::epsilon()));
  EXPECT_LT(worst, rounding_bound<float>(kSizes, kTokens));
}

TEST(LatentAttentionIdentity, AbsorbedEqualsNaiveInDouble) {
  const double worst = worst_absorbed_vs_naive<double>(kSizes);
  RecordProperty("worst_relative_diff_double_in_eps",
                 std::to_string(worst / std::numeric_limits<double>::epsilon()));
  // The same bound in double eps: ~4e-14, well under the brief's ~1e-12.
  EXPECT_LT(worst, rounding_bound<double>(kSizes, kTokens));
}

TEST(LatentAttentionIdentity, WeightsAgreeAndCausalZerosAreExact) {
  const RandomLayer setup = random_setup(7, kSizes, kTokens, false);
  const attn::RopeTable table = attn::rope_table(kTokens, kSizes.d_rope);
  const attn::LatentAttentionOptions opts{.rope = &table};
  const attn::LatentAttentionResult naive =
      attn::latent_attention_forward(setup.layer, setup.x, opts);
  const attn::LatentAttentionResult absorbed =
      attn::latent_attention_absorbed(setup.layer, setup.x, opts);
  ASSERT_EQ(naive.weights.size(), 4u);
  ASSERT_EQ(absorbed.weights.size(), 4u);
  for (std::size_t h = 0; h < 4; ++h) {
    // Weights are in [0, 1], so the output's relative bound is an absolute one here.
    EXPECT_LT(attn::max_abs_diff(naive.weights[h], absorbed.weights[h]),
              rounding_bound<float>(kSizes, kTokens))
        << h;
    for (Index i = 0; i < kTokens; ++i) {
      for (Index j = i + 1; j < kTokens; ++j) {
        EXPECT_EQ(naive.weights[h](i, j), 0.0f);
        EXPECT_EQ(absorbed.weights[h](i, j), 0.0f);
      }
    }
  }
  // The same queries and cached pair: both forms compute them with the same products.
  EXPECT_LT(relative_diff(absorbed.c, naive.c), 4 * std::numeric_limits<float>::epsilon());
  EXPECT_LT(relative_diff(absorbed.Q, naive.Q), 4 * std::numeric_limits<float>::epsilon());
}

TEST(LatentAttentionIdentity, LatentQueryScoresLikeTheFormedKeys) {
  // The identity itself, on the results: q_lat_h . c_j + RoPE(q_h^R) . k^R_j (absorbed form's
  // parts) equals Q_h . K_h(j) (naive form's formed keys), in double to rounding (16 + 8 terms
  // against 32 + 8 of numbers ~10: 1e-12).
  const RandomLayer setup = random_setup(8, kSizes, 6, false);
  const attn::LatentAttentionD layer = attn::cast<double>(setup.layer);
  const attn::RopeTable table = attn::rope_table(6, kSizes.d_rope);
  const attn::LatentAttentionOptions opts{.rope = &table};
  const MatrixD x = setup.x.cast<double>();
  const attn::LatentAttentionResultD naive = attn::latent_attention_forward(layer, x, opts);
  const attn::LatentAttentionResultD absorbed = attn::latent_attention_absorbed(layer, x, opts);
  const Index dqk = layer.d_qk();
  for (Index h = 0; h < layer.heads; ++h) {
    const MatrixD formed =
        naive.Q.middleCols(h * dqk, dqk) * naive.K.middleCols(h * dqk, dqk).transpose();  // [6 x 6]
    const MatrixD latent =
        absorbed.q_latent.middleCols(h * layer.d_c, layer.d_c) * absorbed.c.transpose() +
        absorbed.Q.middleCols(h * dqk + layer.d_nope, layer.d_rope) *
            absorbed.k_rope.transpose();  // [6 x 6]
    EXPECT_LT(attn::max_abs_diff(formed, latent), 1e-12) << h;
    EXPECT_GT(formed.cwiseAbs().maxCoeff(), 1.0) << "scores of size to compare";
  }
}

// ---- decoding -----------------------------------------------------------------------------------

// Decodes x token by token from an empty cache of `capacity`, returning the rows [n x d_model].
template <attn::Real T>
MatrixOf<T> decode_all(const attn::LatentAttentionOf<T>& layer, const MatrixOf<T>& x,
                       attn::LatentCacheOf<T>& cache, const attn::RopeTable& table) {
  MatrixOf<T> rows(x.rows(), layer.d_model());  // [n x d_model]
  for (Index i = 0; i < x.rows(); ++i)
    rows.row(i) = attn::latent_attention_decode(layer, x.row(i), cache, {.rope = &table});
  return rows;
}

template <attn::Real T>
void check_decoding_is_the_absorbed_forward(std::uint64_t seed, bool bias) {
  const RandomLayer setup = random_setup(seed, kSizes, kTokens, bias);
  const attn::LatentAttentionOf<T> layer = attn::cast<T>(setup.layer);
  const MatrixOf<T> x = setup.x.cast<T>();
  const attn::RopeTable table = attn::rope_table(kTokens, kSizes.d_rope);
  attn::LatentCacheOf<T> cache(kTokens + 3, layer.d_c, layer.d_rope);  // room to spare
  const MatrixOf<T> decoded = decode_all(layer, x, cache, table);
  const attn::LatentAttentionOptions opts{.rope = &table};
  const attn::LatentAttentionResultOf<T> absorbed = attn::latent_attention_absorbed(layer, x, opts);
  // Bit for bit: the absorbed forward runs the decoding step's own arithmetic row by row (each
  // token projected on its own from an aligned copy, each query over the same rows of c and
  // k^R at the same alignment), in this same binary.
  EXPECT_TRUE(identical(decoded, absorbed.out)) << attn::max_abs_diff(decoded, absorbed.out);
  EXPECT_TRUE(identical(cache.latent.storage().topRows(kTokens), absorbed.c));
  EXPECT_TRUE(identical(cache.rope_key.storage().topRows(kTokens), absorbed.k_rope));
  EXPECT_EQ(cache.size(), kTokens);
  // And within rounding of the naive form's rows (the identity's bound).
  const MatrixOf<T> naive = attn::latent_attention_forward(layer, x, opts).out;
  EXPECT_LT(relative_diff(decoded, naive), rounding_bound<T>(kSizes, kTokens));
  // A cleared cache starts again at position 0: the same bits.
  cache.clear();
  EXPECT_TRUE(identical(decode_all(layer, x, cache, table), decoded));
}

TEST(LatentAttentionDecode, TokenByTokenIsTheAbsorbedForwardBitForBitInFloat) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed)
    check_decoding_is_the_absorbed_forward<float>(seed, seed == 2);
}

TEST(LatentAttentionDecode, TokenByTokenIsTheAbsorbedForwardBitForBitInDouble) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed)
    check_decoding_is_the_absorbed_forward<double>(seed, seed == 2);
}

TEST(LatentAttentionDecode, FirstTokenAttendsToItselfOnly) {
  // One token: its one weight is 1, so its output is (c W_UV_h^T) per head, then W_O: computed
  // here by hand from the layer's matrices, in double (a few products of ~30 terms: 1e-12).
  const RandomLayer setup = random_setup(9, kSizes, 1, true);
  const attn::LatentAttentionD layer = attn::cast<double>(setup.layer);
  const MatrixD x = setup.x.cast<double>();  // [1 x 64]
  const attn::RopeTable table = attn::rope_table(1, kSizes.d_rope);
  attn::LatentCacheD cache(1, layer.d_c, layer.d_rope);
  const MatrixD row = attn::latent_attention_decode(layer, x, cache, {.rope = &table});
  MatrixD c = x * layer.kv_down.weight.transpose();  // [1 x d_c]
  c += layer.kv_down.bias;
  MatrixD values = c * layer.v_up.weight.transpose();  // [1 x h d_v]: every head's V
  values += layer.v_up.bias;
  MatrixD expected = values * layer.out_proj.weight.transpose();  // [1 x d_model]
  expected += layer.out_proj.bias;
  EXPECT_LT(attn::max_abs_diff(row, expected), 1e-12);
}

// ---- the cache's size ---------------------------------------------------------------------------

TEST(LatentCacheSize, DeepSeekV2KeepsFiveHundredSeventySixNumbersPerToken) {
  // DeepSeek-V2 (arXiv 2405.04434, section 2.1.4 and Table 1): d_c = 4 d_h = 512 and
  // d_h^R = d_h / 2 = 64, with n_h = 128 heads of d_h = 128. Table 1 gives the KV cache per
  // token as 2 n_h d_h l for MHA, 2 n_g d_h l for GQA and (d_c + d_h^R) l ~ 9/2 d_h l for MLA
  // (l layers), "equal to GQA with only 2.25 groups". (Checked against secondary sources that
  // quote the paper, not the PDF itself.) The layer's sizes alone, without its 100M weights:
  attn::LatentAttention deepseek;
  deepseek.heads = 128;
  deepseek.d_nope = 128;
  deepseek.d_rope = 64;
  deepseek.d_v = 128;
  deepseek.d_c = 512;
  const Index mla = deepseek.cache_numbers_per_token();
  EXPECT_EQ(mla, 576);
  const Index d_h = 128, n_h = 128;
  const Index mha = 2 * n_h * d_h;  // K and V of every head
  EXPECT_EQ(mha, 32768);
  EXPECT_EQ(2 * mla, 9 * d_h);  // (d_c + d_h^R) = 9/2 d_h exactly
  EXPECT_EQ(2.0 * 2.25 * static_cast<double>(d_h), static_cast<double>(mla));  // GQA, 2.25 groups
  EXPECT_EQ(2 * 8 * d_h, 2048);  // GQA with 8 groups keeps 2048, 3.6 times MLA's 576
  EXPECT_NEAR(static_cast<double>(mha) / static_cast<double>(mla), 56.9, 0.05);
  // The cache allocates exactly that: 576 floats (2304 bytes) per token and layer.
  const attn::LatentCache cache(16, deepseek.d_c, deepseek.d_rope);
  EXPECT_EQ(cache.bytes_per_token(), 576u * sizeof(float));
  EXPECT_EQ(cache.bytes(), 16u * 576u * sizeof(float));
  EXPECT_EQ(attn::LatentCacheD(16, 512, 64).bytes(), 16u * 576u * sizeof(double));
}

TEST(LatentCacheSize, ParameterCountByHand) {
  // The fixture's sizes: q_proj 16 x 16 (2 heads of 4 + 4), kv_down 6 x 16, k_up 8 x 6,
  // v_up 8 x 6, k_rope 4 x 16, out_proj 16 x 8: 256 + 96 + 48 + 48 + 64 + 128 = 640; biases
  // add 16 + 6 + 8 + 8 + 4 + 16 = 58.
  attn::Rng rng(1);
  EXPECT_EQ(attn::latent_attention_init(rng, kFixtureSizes).parameter_count(), 640);
  EXPECT_EQ(attn::latent_attention_init(rng, kFixtureSizes, true).parameter_count(), 698);
  EXPECT_EQ(fixture_layer<float>().parameter_count(), 640);
}

// ---- RoPE layouts -------------------------------------------------------------------------------

TEST(LatentAttentionRope, HalvesLayoutWithPermutedRowsIsTheSameLayer) {
  // rope.hpp: the halves layout is the interleaved one with the features permuted. Permuting
  // the rows of W_KR and of each head's W_Q^R the same way gives a layer whose scores sum the
  // same products in another order: the same output to float rounding (the identity's bound).
  const RandomLayer setup = random_setup(11, kSizes, kTokens, false);
  attn::LatentAttention halves = setup.layer;
  const std::vector<Index> perm = attn::rope_layout_permutation(kSizes.d_rope);
  const Index dqk = kSizes.d_nope + kSizes.d_rope;
  for (Index f = 0; f < kSizes.d_rope; ++f) {
    const Index to = perm[static_cast<std::size_t>(f)];
    halves.k_rope.weight.row(to) = setup.layer.k_rope.weight.row(f);
    for (Index h = 0; h < kSizes.heads; ++h) {
      halves.q_proj.weight.row(h * dqk + kSizes.d_nope + to) =
          setup.layer.q_proj.weight.row(h * dqk + kSizes.d_nope + f);
    }
  }
  const attn::RopeTable table = attn::rope_table(kTokens, kSizes.d_rope);
  const attn::Matrix interleaved_out =
      attn::latent_attention_forward(setup.layer, setup.x, {.rope = &table}).out;
  const attn::LatentAttentionOptions halves_opts{.rope = &table,
                                                 .layout = attn::RopeLayout::halves};
  EXPECT_LT(relative_diff(attn::latent_attention_forward(halves, setup.x, halves_opts).out,
                          interleaved_out),
            rounding_bound<float>(kSizes, kTokens));
  EXPECT_LT(relative_diff(attn::latent_attention_absorbed(halves, setup.x, halves_opts).out,
                          interleaved_out),
            rounding_bound<float>(kSizes, kTokens));
  // The permuted layer run in the wrong layout is another function: far from it.
  EXPECT_GT(relative_diff(attn::latent_attention_forward(halves, setup.x, {.rope = &table}).out,
                          interleaved_out),
            1e-3);
}

// ---- refusals -----------------------------------------------------------------------------------

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

TEST(LatentAttentionErrors, RopeTableMissingOfAnotherDimOrTooShort) {
  const attn::LatentAttention layer = fixture_layer<float>();
  const attn::Matrix x = load("x").to_matrix();  // [6 x 16]
  const attn::RopeTable wrong_dim = attn::rope_table(6, 8), short_table = attn::rope_table(5, 4);
  for (const bool absorbed : {false, true}) {
    const auto run = [&](const attn::RopeTable* table) {
      return message_of([&] {
        const attn::LatentAttentionOptions opts{.rope = table};
        if (absorbed)
          attn::latent_attention_absorbed(layer, x, opts);
        else
          attn::latent_attention_forward(layer, x, opts);
      });
    };
    const std::string fn = absorbed ? "latent_attention_absorbed: " : "latent_attention_forward: ";
    const std::string none = run(nullptr), dim = run(&wrong_dim), positions = run(&short_table);
    EXPECT_TRUE(starts_with(none, fn + "no RoPE table")) << none;
    EXPECT_TRUE(starts_with(dim, fn + "the RoPE table's dim is 8 but the layer's d_rope is 4"))
        << dim;
    EXPECT_TRUE(starts_with(positions, fn + "position 5 is beyond the RoPE table of 5 positions"))
        << positions;
  }
}

TEST(LatentAttentionErrors, SizesAtInit) {
  attn::Rng rng(1);
  const auto init = [&](attn::LatentAttentionSizes s) {
    return message_of([&] { attn::latent_attention_init(rng, s); });
  };
  attn::LatentAttentionSizes s = kFixtureSizes;
  s.d_c = 0;
  EXPECT_EQ(init(s), "latent_attention_init: d_c is 0: it must be at least 1");
  s = kFixtureSizes;
  s.d_rope = 3;
  EXPECT_EQ(init(s),
            "latent_attention_init: d_rope is 3: it must be even and >= 2 (RoPE turns pairs)");
  s = kFixtureSizes;
  s.heads = 0;
  EXPECT_EQ(init(s), "latent_attention_init: heads is 0: it must be at least 1");
  s = kFixtureSizes;
  s.d_model = Index{1} << 40;
  const std::string huge = init(s);
  EXPECT_TRUE(starts_with(huge, "latent_attention_init: d_model 1099511627776")) << huge;
}

TEST(LatentAttentionErrors, WrongWidthsAndMalformedLayers) {
  const attn::LatentAttention layer = fixture_layer<float>();
  const attn::RopeTable table = attn::rope_table(8, 4);
  const attn::LatentAttentionOptions opts{.rope = &table};
  const attn::Matrix narrow = attn::Matrix::Zero(3, 15), empty(0, 16);  // [3 x 15], [0 x 16]
  const std::string w = message_of([&] { attn::latent_attention_forward(layer, narrow, opts); });
  EXPECT_EQ(w, "latent_attention_forward: x is [3 x 15] but the layer's d_model is 16: x must be "
               "[n x 16] with n >= 1");
  EXPECT_TRUE(starts_with(message_of([&] { attn::latent_attention_absorbed(layer, empty, opts); }),
                          "latent_attention_absorbed: x is [0 x 16]"));
  attn::LatentAttention bad = layer;
  bad.k_up.weight = attn::Matrix::Zero(8, 5);  // d_c is 6
  const std::string k_up = message_of([&] { attn::latent_attention_forward(bad, narrow, opts); });
  EXPECT_TRUE(starts_with(k_up, "latent_attention_forward: k_up is [8 x 5] but heads 2")) << k_up;
  EXPECT_NE(k_up.find("make it [8 x 6]"), std::string::npos) << k_up;
  bad = layer;
  bad.d_c = 0;
  EXPECT_EQ(message_of([&] { attn::check_latent_attention(bad, "f"); }),
            "f: d_c is 0: it must be at least 1");
}

TEST(LatentAttentionErrors, DecodingRefusals) {
  const attn::LatentAttention layer = fixture_layer<float>();
  const attn::Matrix x = load("x").to_matrix();  // [6 x 16]
  const attn::RopeTable table = attn::rope_table(6, 4);
  const attn::LatentAttentionOptions opts{.rope = &table};
  attn::LatentCache cache(2, layer.d_c, layer.d_rope);
  const auto decode = [&](const auto& row, attn::LatentCache& c,
                          const attn::LatentAttentionOptions& o) {
    return message_of([&] { attn::latent_attention_decode(layer, row, c, o); });
  };
  EXPECT_EQ(decode(x.topRows(2), cache, opts),
            "latent_attention_decode: x_row is [2 x 16]: one token, [1 x 16] (d_model)");
  EXPECT_TRUE(starts_with(decode(x.row(0), cache, {.causal = false, .rope = &table}),
                          "latent_attention_decode: opts.causal is false"));
  EXPECT_TRUE(starts_with(decode(x.row(0), cache, {}), "latent_attention_decode: no RoPE table"));
  attn::LatentCache wrong(2, layer.d_c + 1, layer.d_rope);
  EXPECT_TRUE(starts_with(decode(x.row(0), wrong, opts),
                          "latent_attention_decode: the cache holds rows of 7 (latent) and 4"));
  attn::LatentCache unset;  // default-constructed: no rows at all
  EXPECT_TRUE(starts_with(decode(x.row(0), unset, opts),
                          "latent_attention_decode: the cache holds rows of 0"));
  // Past the capacity: two tokens fit, the third is refused and the cache left as it was.
  EXPECT_EQ(decode(x.row(0), cache, opts), "(no exception)");
  EXPECT_EQ(decode(x.row(1), cache, opts), "(no exception)");
  const attn::Matrix before = cache.latent.storage();
  EXPECT_EQ(decode(x.row(2), cache, opts),
            "latent_attention_decode: decoding past the cache's capacity: it holds 2 of 2 tokens "
            "(a plain cache drops none)");
  EXPECT_EQ(cache.size(), 2);
  EXPECT_TRUE(identical(cache.latent.storage(), before));
  // The RoPE table must reach the token's position: a table of 1 position refuses position 1.
  const attn::RopeTable one = attn::rope_table(1, 4);
  attn::LatentCache roomy(4, layer.d_c, layer.d_rope);
  EXPECT_EQ(decode(x.row(0), roomy, {.rope = &one}), "(no exception)");
  EXPECT_TRUE(starts_with(decode(x.row(1), roomy, {.rope = &one}),
                          "latent_attention_decode: position 1 is beyond the RoPE table of 1"));
  EXPECT_EQ(roomy.size(), 1);
  // A cache whose two parts disagree, or a rolling one.
  attn::LatentCache skewed(4, layer.d_c, layer.d_rope);
  skewed.latent.append(attn::Matrix::Zero(1, layer.d_c));
  EXPECT_TRUE(starts_with(decode(x.row(0), skewed, opts),
                          "latent_attention_decode: the cache's latent holds 1 of 4 rows but its "
                          "rope_key 0 of 4"));
  attn::LatentCache rolling(4, layer.d_c, layer.d_rope);
  rolling.latent = attn::RowCache(4, layer.d_c, true);
  EXPECT_TRUE(starts_with(decode(x.row(0), rolling, opts),
                          "latent_attention_decode: the cache is rolling"));
}

}  // namespace test_latent_attention
