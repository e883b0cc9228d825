// The transformer block (chapter 08): nn.TransformerEncoderLayer / TransformerDecoderLayer
// fixtures (post- and pre-norm, padding and causal masks), the behaviour the masks promise
// through whole stacks, the caches the backward passes will read, the feed-forward layer, and
// shape errors.
#include "attn/core/random.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/transformer.hpp"
#include "course/npy.hpp"

#include "backward_fixture.hpp"
#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace attn {
// Norm placements by name in test names and ctest's listing ("post", not "4-byte object").
void PrintTo(NormPlacement p, std::ostream* os) {
  *os << (p == NormPlacement::post ? "post" : "pre");
}
}  // namespace attn

namespace test_transformer {

using attn_test::identical;
using attn_test::message_of;

using attn::AllowedBatch;
using attn::Batch;
using attn::Index;
using attn::Matrix;
using attn::NormPlacement;
using attn::RowVector;

// ---- Loading a PyTorch state_dict written by scripts/fixtures/transformer.py --------------------

struct StateDict {
  std::string prefix;  // "tf_enc_post_"
  course::NpyArray get(const std::string& name) const {
    return course::read_npy(attn_test::fixture("transformer", prefix + name + ".npy"));
  }
  Matrix matrix(const std::string& name) const { return get(name).to_matrix(); }
  RowVector row(const std::string& name) const { return RowVector(get(name).to_matrix()); }

  attn::MultiHeadAttention mha(const std::string& name, Index heads) const {
    return attn::multi_head_from_pytorch(
        matrix(name + "_in_proj_weight"), row(name + "_in_proj_bias"),
        matrix(name + "_out_proj_weight"), row(name + "_out_proj_bias"), heads);
  }
  attn::FeedForward ff() const {
    return {{matrix("linear1_weight"), row("linear1_bias")},
            {matrix("linear2_weight"), row("linear2_bias")}};
  }
  attn::LayerNorm norm(const std::string& name) const {
    return {row(name + "_weight"), row(name + "_bias"), 1e-5f};
  }
  AllowedBatch mask(const std::string& name) const {
    const Batch ones = get(name).to_batch();  // 1 = may attend
    AllowedBatch m(ones.batch(), ones.rows(), ones.cols());
    m.data() = ones.data().array() != 0.0f;
    return m;
  }
};

// float32 on both sides with d_model 16: each sub-layer adds a few ulps of O(1) values and
// LayerNorm divides by stds ~1; the fixture script found PyTorch within 3.6e-7 of float64.
// 1e-5 leaves room for both; a wrong norm placement or mask moves outputs by > 1e-1.
constexpr float kTolerance = 1e-5f;

class EncoderFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(EncoderFixture, MatchesTorchTransformerEncoderLayer) {
  const std::string c = GetParam();
  const StateDict sd{"tf_" + c + "_"};
  attn::EncoderLayer layer{sd.mha("self_attn", 4), sd.ff(), sd.norm("norm1"), sd.norm("norm2"),
                           c == "enc_pre" ? NormPlacement::pre : NormPlacement::post};
  const AllowedBatch allowed = sd.mask("allowed");
  const Batch out = attn::encoder_forward({layer}, sd.get("x").to_batch(), {.allowed = allowed});
  const Batch expected = sd.get("out").to_batch();
  ASSERT_EQ(out.shape(), expected.shape());
  EXPECT_LT((out.data() - expected.data()).cwiseAbs().maxCoeff(), kTolerance) << c;
}

INSTANTIATE_TEST_SUITE_P(Cases, EncoderFixture, ::testing::Values("enc_post", "enc_pre"));

// A fixture case: its file prefix and its heads, printed by name (the same test names in every
// build, not a pointer's address).
struct DecoderCase {
  const char* name;
  Index heads;
};
void PrintTo(const DecoderCase& c, std::ostream* os) { *os << c.name; }

class DecoderFixture : public ::testing::TestWithParam<DecoderCase> {};

TEST_P(DecoderFixture, MatchesTorchTransformerDecoderLayer) {
  const auto [c, heads] = GetParam();
  const StateDict sd{"tf_" + std::string(c) + "_"};
  attn::DecoderLayer layer{sd.mha("self_attn", heads),
                           sd.mha("multihead_attn", heads),
                           sd.ff(),
                           sd.norm("norm1"),
                           sd.norm("norm2"),
                           sd.norm("norm3"),
                           std::string(c) == "dec_pre" ? NormPlacement::pre : NormPlacement::post};
  const AllowedBatch self_allowed = sd.mask("allowed"), cross_allowed = sd.mask("cross_allowed");
  const Batch out =
      attn::decoder_forward({layer}, sd.get("x").to_batch(), sd.get("memory").to_batch(),
                            {.self_allowed = self_allowed, .cross_allowed = cross_allowed});
  const Batch expected = sd.get("out").to_batch();
  ASSERT_EQ(out.shape(), expected.shape());
  EXPECT_LT((out.data() - expected.data()).cwiseAbs().maxCoeff(), kTolerance) << c;
}

INSTANTIATE_TEST_SUITE_P(Cases, DecoderFixture,
                         ::testing::Values(DecoderCase{"dec_post", 4}, DecoderCase{"dec_pre", 2}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- What the masks promise, through whole stacks -----------------------------------------------

struct Model {
  std::vector<attn::EncoderLayer> encoder;
  std::vector<attn::DecoderLayer> decoder;
};

Model random_model(std::uint64_t seed, NormPlacement norm) {
  attn::Rng rng(seed);
  Model m;
  for (int l = 0; l < 2; ++l) m.encoder.push_back(attn::encoder_layer_init(rng, 16, 4, 32, norm));
  for (int l = 0; l < 2; ++l) m.decoder.push_back(attn::decoder_layer_init(rng, 16, 4, 32, norm));
  return m;
}

Batch random_batch(attn::Rng& rng, Index B, Index n, Index d) {
  Batch x(B, n, d);
  x.data() = attn::random_normal(rng, B * n, d);
  return x;
}

class Behaviour : public ::testing::TestWithParam<NormPlacement> {};

TEST_P(Behaviour, FutureTargetTokensCannotChangeEarlierOutputs) {
  const Model m = random_model(1, GetParam());
  attn::Rng rng(2);
  const Batch memory = random_batch(rng, 1, 6, 16);
  Batch target = random_batch(rng, 1, 5, 16);
  const AllowedBatch causal(attn::causal_mask(5));
  const Batch before = attn::decoder_forward(m.decoder, target, memory, {.self_allowed = causal});
  target[0].bottomRows(2) = attn::random_normal(rng, 2, 16, 0.0, 5.0);  // tokens 3 and 4
  const Batch after = attn::decoder_forward(m.decoder, target, memory, {.self_allowed = causal});
  EXPECT_TRUE(identical(after[0].topRows(3), before[0].topRows(3)));
  EXPECT_FALSE(identical(after[0].bottomRows(2), before[0].bottomRows(2)));
}

TEST_P(Behaviour, SourcePaddingDoesNotLeakIntoTheDecoder) {
  // Source of 6 tokens, the last 2 padding: change them, and neither the encoder's real rows
  // nor anything the decoder computes may change.
  const Model m = random_model(3, GetParam());
  attn::Rng rng(4);
  Batch source = random_batch(rng, 1, 6, 16);
  const Batch target = random_batch(rng, 1, 4, 16);
  attn::TokenIds ids(1, 6);
  ids << 3, 1, 4, 1, 0, 0;
  const AllowedBatch src_mask = attn::padding_masks(ids);  // [1, 6, 6]
  AllowedBatch cross(1, 4, 6);  // [1, 4, 6]: every target query, the 4 real source keys
  cross[0] = attn::padding_mask({ids.data(), 6}, 4);
  const AllowedBatch causal(attn::causal_mask(4));
  const auto run = [&](const Batch& src) {
    const Batch memory = attn::encoder_forward(m.encoder, src, {.allowed = src_mask});
    const attn::DecoderOptions masks{.self_allowed = causal, .cross_allowed = cross};
    return std::pair{memory, attn::decoder_forward(m.decoder, target, memory, masks)};
  };
  const auto [mem1, out1] = run(source);
  source[0].bottomRows(2) = attn::random_normal(rng, 2, 16, 0.0, 5.0);
  const auto [mem2, out2] = run(source);
  EXPECT_TRUE(identical(mem2[0].topRows(4), mem1[0].topRows(4)));
  EXPECT_TRUE(identical(out2[0], out1[0]));
  // Without the cross mask the padded memory rows reach the decoder: the test can fail.
  const Batch leak1 = attn::decoder_forward(m.decoder, target, mem1, {.self_allowed = causal});
  const Batch leak2 = attn::decoder_forward(m.decoder, target, mem2, {.self_allowed = causal});
  EXPECT_FALSE(identical(leak1[0], leak2[0]));
}

// ---- Caches: every piece a backward pass will need, and the same output ------------------------

// Checks one residual step's cache against the formulas in SublayerCache's comment, with the
// step's own LayerNorm recomputed from what the cache says it read.
void expect_step(const attn::SublayerCache& c, const attn::LayerNorm& norm, NormPlacement p,
                 const std::string& what) {
  attn::LayerNormCache stats;
  const Matrix normed = attn::layer_norm_forward(norm, c.norm_in, &stats);  // [n x d_model]
  EXPECT_EQ(stats.mean, c.norm.mean) << what;
  EXPECT_EQ(stats.rstd, c.norm.rstd) << what;
  if (p == NormPlacement::post) {  // output = LayerNorm(x + f(x))
    EXPECT_TRUE(identical(c.sublayer_in, c.input)) << what;
    EXPECT_TRUE(identical(c.norm_in, c.input + c.sublayer_out)) << what;
    EXPECT_TRUE(identical(c.output, normed)) << what;
  } else {  // output = x + f(LayerNorm(x))
    EXPECT_TRUE(identical(c.norm_in, c.input)) << what;
    EXPECT_TRUE(identical(c.sublayer_in, normed)) << what;
    EXPECT_TRUE(identical(c.output, c.input + c.sublayer_out)) << what;
  }
}

void expect_ffn(const attn::FeedForwardCache& c, const attn::FeedForward& ff,
                const attn::SublayerCache& step) {
  EXPECT_TRUE(identical(c.pre_activation, attn::linear_forward(ff.linear1, step.sublayer_in)));
  EXPECT_TRUE(identical(c.hidden, c.pre_activation.cwiseMax(0.0f)));  // no NaN here
  EXPECT_TRUE(identical(step.sublayer_out, attn::linear_forward(ff.linear2, c.hidden)));
}

TEST_P(Behaviour, EncoderLayerCacheHoldsEverySublayer) {
  const Model m = random_model(7, GetParam());
  const attn::EncoderLayer& layer = m.encoder[0];
  attn::Rng rng(8);
  const Matrix x = attn::random_normal(rng, 5, 16);  // [5 x 16]
  const attn::AllowedMask causal = attn::causal_mask(5);
  attn::EncoderLayerCache c;
  const Matrix y =
      attn::encoder_layer_forward(layer, x, {.allowed = causal, .need_weights = true}, &c);
  EXPECT_TRUE(identical(
      y, attn::encoder_layer_forward(layer, x, {.allowed = causal, .need_weights = true})));
  EXPECT_TRUE(identical(c.sublayer1.input, x));
  EXPECT_TRUE(identical(c.sublayer2.input, c.sublayer1.output));
  EXPECT_TRUE(identical(c.sublayer2.output, y));
  expect_step(c.sublayer1, layer.norm1, GetParam(), "self-attention");
  expect_step(c.sublayer2, layer.norm2, GetParam(), "feed-forward");
  // The attention's MultiHeadResult is the one its sub-layer computed and returned.
  const Matrix& a = c.sublayer1.sublayer_in;
  const attn::MultiHeadResult r =
      attn::multi_head_forward(layer.self_attn, a, a, a, {.allowed = causal});
  EXPECT_TRUE(identical(c.self_attn.out, c.sublayer1.sublayer_out));
  EXPECT_TRUE(identical(c.self_attn.Q, r.Q));
  EXPECT_TRUE(identical(c.self_attn.V, r.V));
  EXPECT_TRUE(identical(c.self_attn.concat, r.concat));
  ASSERT_EQ(c.self_attn.weights.size(), 4u);
  for (std::size_t h = 0; h < 4; ++h) EXPECT_TRUE(identical(c.self_attn.weights[h], r.weights[h]));
  expect_ffn(c.ff, layer.ff, c.sublayer2);
}

TEST_P(Behaviour, StackCachesHoldEveryElementAndLayer) {
  const Model m = random_model(9, GetParam());
  attn::Rng rng(10);
  const Batch source = random_batch(rng, 2, 6, 16), target = random_batch(rng, 2, 4, 16);
  attn::TokenIds ids(2, 6);
  ids << 3, 1, 4, 1, 0, 0,  //
      2, 7, 1, 8, 2, 8;
  const AllowedBatch src_mask = attn::padding_masks(ids);  // [2, 6, 6]
  AllowedBatch cross(2, 4, 6);                             // [2, 4, 6]
  for (Index b = 0; b < 2; ++b) cross[b] = attn::padding_mask({ids.row(b).data(), 6}, 4);
  const attn::AllowedMask causal = attn::causal_mask(4);  // shared, [1, 4, 4]
  attn::EncoderCache enc;
  const Batch memory = attn::encoder_forward(m.encoder, source, {.allowed = src_mask}, &enc);
  attn::DecoderCache dec;
  // need_weights: the cache keeps every head's weights, which the checks below read.
  const attn::DecoderOptions masks{
      .self_allowed = causal, .cross_allowed = cross, .need_weights = true};
  const Batch out = attn::decoder_forward(m.decoder, target, memory, masks, &dec);
  // The cache changes nothing.
  const Batch memory_plain = attn::encoder_forward(m.encoder, source, {.allowed = src_mask});
  const Batch out_plain = attn::decoder_forward(m.decoder, target, memory, masks);
  EXPECT_TRUE(identical(memory.data(), memory_plain.data()));
  EXPECT_TRUE(identical(out.data(), out_plain.data()));
  ASSERT_EQ(enc.batch(), 2);
  ASSERT_EQ(enc.layers(), 2);
  ASSERT_EQ(dec.batch(), 2);
  ASSERT_EQ(dec.layers(), 2);
  for (Index b = 0; b < 2; ++b) {
    // Layer l reads what layer l - 1 wrote; the last layer's output is the stack's.
    EXPECT_TRUE(identical(enc.at(b, 0).sublayer1.input, source[b])) << b;
    EXPECT_TRUE(identical(enc.at(b, 1).sublayer1.input, enc.at(b, 0).sublayer2.output)) << b;
    EXPECT_TRUE(identical(enc.at(b, 1).sublayer2.output, memory[b])) << b;
    EXPECT_TRUE(identical(dec.at(b, 0).sublayer1.input, target[b])) << b;
    EXPECT_TRUE(identical(dec.at(b, 1).sublayer1.input, dec.at(b, 0).sublayer3.output)) << b;
    EXPECT_TRUE(identical(dec.at(b, 1).sublayer3.output, out[b])) << b;
    for (Index l = 0; l < 2; ++l) {
      const attn::DecoderLayerCache& c = dec.at(b, l);
      const attn::DecoderLayer& layer = m.decoder[static_cast<std::size_t>(l)];
      expect_step(c.sublayer1, layer.norm1, GetParam(), "decoder self-attention");
      expect_step(c.sublayer2, layer.norm2, GetParam(), "cross-attention");
      expect_step(c.sublayer3, layer.norm3, GetParam(), "decoder feed-forward");
      expect_ffn(c.ff, layer.ff, c.sublayer3);
      // Cross-attention: K and V are memory's projections; padded source keys get weight 0.
      EXPECT_EQ(c.multihead_attn.K.rows(), 6);
      for (const Matrix& w : c.multihead_attn.weights) {
        EXPECT_TRUE((cross[b].array() || w.array() == 0.0f).all()) << b << l;
      }
      for (const Matrix& w : c.self_attn.weights) {
        EXPECT_TRUE((causal.array() || w.array() == 0.0f).all()) << b << l;
      }
    }
  }
  EXPECT_THROW(enc.at(2, 0), std::invalid_argument);
  EXPECT_THROW(dec.at(0, 2), std::invalid_argument);
}

TEST_P(Behaviour, StackedGathersOneMatrixPerElementIntoABatch) {
  const Model m = random_model(11, GetParam());
  attn::Rng rng(12);
  const Batch source = random_batch(rng, 3, 5, 16), target = random_batch(rng, 3, 4, 16);
  attn::EncoderCache enc;
  const Batch memory = attn::encoder_forward(m.encoder, source, {}, &enc);
  attn::DecoderCache dec;
  attn::decoder_forward(m.decoder, target, memory, {}, &dec);
  using Enc = attn::EncoderLayerCache;
  using Dec = attn::DecoderLayerCache;
  using Sub = attn::SublayerCache;
  for (Index l = 0; l < 2; ++l) {
    const Batch hidden = enc.stacked(l, &Enc::ff, &attn::FeedForwardCache::hidden);
    EXPECT_EQ(hidden.shape(), (std::vector<std::size_t>{3, 5, 32}));  // [B, n_s, d_ff]
    const Batch cross = dec.stacked(l, &Dec::sublayer2, &Sub::sublayer_out);
    EXPECT_EQ(cross.shape(), (std::vector<std::size_t>{3, 4, 16}));  // [B, n_t, d_model]
    for (Index b = 0; b < 3; ++b) {
      EXPECT_TRUE(identical(hidden[b], enc.at(b, l).ff.hidden)) << b << l;
      EXPECT_TRUE(identical(cross[b], dec.at(b, l).sublayer2.sublayer_out)) << b << l;
    }
  }
  // The last layer's output, gathered, is the stack's output.
  EXPECT_TRUE(identical(enc.stacked(1, &Enc::sublayer2, &Sub::output).data(), memory.data()));
  EXPECT_EQ(message_of([&] { enc.stacked(2, &Enc::sublayer1, &Sub::input); }),
            "StackCache::stacked: layer 2 of 3 batch elements x 2 layers: there is no such layer");
  EXPECT_THROW(enc.stacked(-1, &Enc::sublayer1, &Sub::input), std::invalid_argument);
  EXPECT_THROW(attn::EncoderCache().stacked(0, &Enc::sublayer1, &Sub::input),
               std::invalid_argument);
  attn::EncoderCache ragged(2, 1);  // filled by hand with two lengths: not one batch
  ragged.at(0, 0).sublayer1.input = Matrix::Zero(3, 4);
  ragged.at(1, 0).sublayer1.input = Matrix::Zero(2, 4);
  EXPECT_EQ(message_of([&] { ragged.stacked(0, &Enc::sublayer1, &Sub::input); }),
            "StackCache::stacked: element 1 is [2 x 4] but element 0 is [3 x 4]: a batch holds "
            "one shape");
}

INSTANTIATE_TEST_SUITE_P(Norms, Behaviour,
                         ::testing::Values(NormPlacement::post, NormPlacement::pre),
                         [](const auto& info) {
                           return std::string(info.param == NormPlacement::post ? "post" : "pre");
                         });

TEST(Transformer, PreNormLayerWithSilentSublayersIsTheIdentity) {
  // Zero W_O, its bias, and the FFN's second layer: every sub-layer returns 0. Pre-norm adds 0
  // to x (the residual path is untouched); post-norm still normalises x.
  attn::Rng rng(5);
  attn::EncoderLayer pre = attn::encoder_layer_init(rng, 8, 2, 16, NormPlacement::pre);
  pre.self_attn.out_proj.weight.setZero();
  pre.self_attn.out_proj.bias.setZero();
  pre.ff.linear2.weight.setZero();
  pre.ff.linear2.bias.setZero();
  attn::EncoderLayer post = pre;
  post.norm = NormPlacement::post;
  const Matrix x = attn::random_normal(rng, 5, 8, 3.0, 2.0);
  EXPECT_TRUE(identical(attn::encoder_layer_forward(pre, x), x));
  const Matrix y = attn::encoder_layer_forward(post, x);
  EXPECT_LT(std::abs(y.row(0).mean()), 1e-6f);  // normalised: mean 0 instead of ~3
}

TEST(Transformer, ShapeErrorsNameTheShapes) {
  attn::Rng rng(6);
  const attn::DecoderLayer dec = attn::decoder_layer_init(rng, 8, 2, 16);
  try {
    attn::decoder_layer_forward(dec, Matrix::Zero(3, 8), Matrix::Zero(4, 6));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "decoder_layer_forward: x is [3 x 8] but memory is [4 x 6]: the "
                           "encoder's output must have the decoder's d_model columns");
  }
  EXPECT_THROW(attn::encoder_layer_init(rng, 10, 4, 16), std::invalid_argument);
  attn::FeedForward bad{{Matrix(4, 8), RowVector(4)}, {Matrix(8, 3), RowVector(8)}};
  EXPECT_THROW(attn::ffn_forward(bad, Matrix::Zero(2, 8)), std::invalid_argument);
  const Batch x(2, 3, 8), memory(3, 4, 8);
  EXPECT_THROW(attn::decoder_forward({dec}, x, memory), std::invalid_argument);
}

// Issue 11: the layers' sizes were checked only by the functions they call, so a zero d_ff was
// "linear_init: in_features 16 and out_features 0 ...", and encoder_layer_init(rng, 0, 1, 16)
// "multi_head_init: 1 heads do not divide d_model = 0". Each init now names itself and the size.
TEST(Transformer, ZeroSizesAreNamedByTheFunctionCalled) {
  attn::Rng rng(6);
  EXPECT_EQ(message_of([&] { attn::ffn_init(rng, 0, 16); }),
            "ffn_init: d_model is 0: it must be at least 1");
  EXPECT_EQ(message_of([&] { attn::ffn_init(rng, 8, 0); }),
            "ffn_init: d_ff is 0: it must be at least 1");
  using Init = std::function<void(Index, Index, Index)>;
  const Init encoder = [&](Index d, Index h, Index f) { attn::encoder_layer_init(rng, d, h, f); };
  const Init decoder = [&](Index d, Index h, Index f) { attn::decoder_layer_init(rng, d, h, f); };
  for (const auto& named : {std::pair{std::string("encoder_layer_init"), encoder},
                            std::pair{std::string("decoder_layer_init"), decoder}}) {
    const std::string& name = named.first;  // not a structured binding: clang 14 cannot
    const Init& init = named.second;        // capture one in the lambdas below
    EXPECT_EQ(message_of([&] { init(0, 1, 16); }), name + ": d_model is 0: it must be at least 1");
    EXPECT_EQ(message_of([&] { init(8, 0, 16); }), name + ": heads is 0: it must be at least 1");
    EXPECT_EQ(message_of([&] { init(8, 2, 0); }), name + ": d_ff is 0: it must be at least 1");
    EXPECT_EQ(message_of([&] { init(10, 4, 16); }),
              name + ": 4 heads do not divide d_model = 10: each head needs d_k = d_model / heads "
                     "columns");
  }
}

// Issue 11: eps = 0 is refused wherever a LayerNorm is used, so also inside a layer.
TEST(Transformer, ALayerNormWithEpsZeroIsRefusedInsideALayer) {
  attn::Rng rng(6);
  attn::EncoderLayer layer = attn::encoder_layer_init(rng, 8, 2, 16);
  layer.norm2.eps = 0.0f;
  EXPECT_EQ(message_of([&] { attn::encoder_layer_forward(layer, Matrix::Constant(3, 8, 1.0f)); }),
            "layer_norm_forward: eps must be finite and > 0 (with eps = 0 a constant row would "
            "divide 0 by 0)");
}

// ---- The backward pass (chapter 09) ------------------------------------------------------------

using attn::AllowedMask;
using attn_test::all_zero;
using attn_test::Comparison;
using attn_test::Fixture;
using attn_test::names;
using attn_test::untouched;

class BackwardEncoderFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(BackwardEncoderFixture, MatchesTorchTransformerEncoderLayer) {
  const std::string name = GetParam();
  Comparison c(name);
  const Fixture& fx = c.fixture();
  const attn::EncoderLayer layer{fx.mha("self_attn_", 4), fx.ff(), fx.norm("norm1_"),
                                 fx.norm("norm2_"),
                                 name == "enc_pre" ? NormPlacement::pre : NormPlacement::post};
  const Matrix x = fx.matrix("x");
  const AllowedMask allowed = fx.mask("allowed");  // key 5 blocked
  attn::EncoderLayerCache cache;
  c.check("out", attn::encoder_layer_forward(layer, x, {.allowed = allowed}, &cache));
  attn::EncoderLayer grads = attn::zeros_like(layer);
  c.check("d_x", attn::encoder_layer_backward(layer, cache, fx.matrix("dy"), grads));
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardEncoderFixture, ::testing::Values("enc_post", "enc_pre"));

class BackwardDecoderFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(BackwardDecoderFixture, MatchesTorchTransformerDecoderLayer) {
  const std::string name = GetParam();
  Comparison c(name);
  const Fixture& fx = c.fixture();
  const attn::DecoderLayer layer{fx.mha("self_attn_", 4),
                                 fx.mha("multihead_attn_", 4),
                                 fx.ff(),
                                 fx.norm("norm1_"),
                                 fx.norm("norm2_"),
                                 fx.norm("norm3_"),
                                 name == "dec_pre" ? NormPlacement::pre : NormPlacement::post};
  const Matrix x = fx.matrix("x"), memory = fx.matrix("memory");
  const AllowedMask self_allowed = fx.mask("self_allowed");    // causal
  const AllowedMask cross_allowed = fx.mask("cross_allowed");  // memory key 5 blocked
  attn::DecoderLayerCache cache;
  c.check("out", attn::decoder_layer_forward(
                     layer, x, memory,
                     {.self_allowed = self_allowed, .cross_allowed = cross_allowed}, &cache));
  attn::DecoderLayer grads = attn::zeros_like(layer);
  const auto g = attn::decoder_layer_backward(layer, memory, cache, fx.matrix("dy"), grads);
  c.check("d_x", g.d_x);
  c.check("d_memory", g.d_memory);
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardDecoderFixture, ::testing::Values("dec_post", "dec_pre"));

TEST(TransformerBackward, AccumulatingTwiceDoublesToRoundOff) {
  attn::Rng rng(12);
  const Matrix x = attn::random_normal(rng, 6, 16, 1.0, 2.0), dy = attn::random_normal(rng, 6, 16);
  for (const NormPlacement placement : {NormPlacement::post, NormPlacement::pre}) {
    const attn::EncoderLayer enc = attn::encoder_layer_init(rng, 16, 4, 32, placement);
    attn::EncoderLayerCache cache;
    attn::encoder_layer_forward(enc, x, {}, &cache);
    attn::EncoderLayer once = attn::zeros_like(enc), again = attn::zeros_like(enc);
    attn::encoder_layer_backward(enc, cache, dy, once);
    attn::encoder_layer_backward(enc, cache, dy, again);
    attn::encoder_layer_backward(enc, cache, dy, again);
    attn_test::expect_doubled_to_round_off(once, again);

    const attn::DecoderLayer dec = attn::decoder_layer_init(rng, 16, 4, 32, placement);
    const Matrix memory = attn::random_normal(rng, 7, 16);
    const AllowedMask causal = attn::causal_mask(6);
    attn::DecoderLayerCache dcache;
    attn::decoder_layer_forward(dec, x, memory, {.self_allowed = causal}, &dcache);
    attn::DecoderLayer donce = attn::zeros_like(dec), dagain = attn::zeros_like(dec);
    attn::decoder_layer_backward(dec, memory, dcache, dy, donce);
    attn::decoder_layer_backward(dec, memory, dcache, dy, dagain);
    attn::decoder_layer_backward(dec, memory, dcache, dy, dagain);
    attn_test::expect_doubled_to_round_off(donce, dagain);
  }
}

class BackwardPaddedEncoder : public ::testing::TestWithParam<NormPlacement> {};

TEST_P(BackwardPaddedEncoder, PaddedTokenChangesNoRealGradient) {
  // Encoder layer on x [6 x 16], token 5 is padding: key 5 blocked for every query (the padding
  // mask; query 5 still attends to keys 0..4, as in PyTorch). Upstream gradient zero at row 5.
  // x row 5 changed (random, and huge: 1e6). Invariant to the bit: out rows 0..4, d_x rows
  // 0..4 and every parameter gradient. Exactly 0: d_x row 5. Why: the real rows never read
  // row 5 forward (blocked key; LayerNorm and FFN act per row); backward, row 5 starts from
  // d_out = 0, which every per-row step (LayerNorm', FFN', the residual) keeps 0, and in the
  // attention a zero d_out row gives a zero dS row, and key 5's column of P is 0; so row 5's
  // inputs only ever meet zeros in the sums that form the parameter gradients.
  const NormPlacement placement = GetParam();
  attn::Rng rng(26);
  attn::EncoderLayer layer = attn::encoder_layer_init(rng, 16, 4, 32, placement);
  for (auto& p : attn::parameters(layer)) {  // biases and norms away from their initial 0 / 1
    if (p.is_vector) p.value += attn::random_normal(rng, 1, p.value.cols(), 0.0, 0.2);
  }
  Matrix x = attn::random_normal(rng, 6, 16);
  const std::vector<int> ids{5, 9, 2, 7, 3, 0};  // id 0 = padding at position 5
  const AllowedMask allowed = attn::padding_mask(ids, 6);
  ASSERT_TRUE(!allowed.col(5).any() && allowed.leftCols(5).all());
  Matrix dy = attn::random_normal(rng, 6, 16);
  dy.row(5).setZero();
  struct Run {
    Matrix out, d_x;
    attn::EncoderLayer grads;
  };
  const auto run = [&] {
    attn::EncoderLayerCache cache;
    Run r{attn::encoder_layer_forward(layer, x, {.allowed = allowed}, &cache),
          {},
          attn::zeros_like(layer)};
    r.d_x = attn::encoder_layer_backward(layer, cache, dy, r.grads);
    return r;
  };
  const Run r0 = run();
  EXPECT_TRUE(all_zero(r0.d_x.row(5)));
  for (const double size : {1.0, 1e6}) {
    x.row(5) = attn::random_normal(rng, 1, 16, 0.5, 3.0 * size);
    const Run r1 = run();
    EXPECT_TRUE(identical(r1.out.topRows(5), r0.out.topRows(5))) << size;
    EXPECT_FALSE(identical(r1.out.row(5), r0.out.row(5))) << size;
    EXPECT_TRUE(identical(r1.d_x.topRows(5), r0.d_x.topRows(5))) << size;
    EXPECT_TRUE(all_zero(r1.d_x.row(5))) << size;
    const auto p0 = attn::parameters(r0.grads), p1 = attn::parameters(r1.grads);
    for (std::size_t i = 0; i < p0.size(); ++i) {
      EXPECT_TRUE(identical(p1[i].value, p0[i].value))
          << size << " " << p0[i].key << " from " << p0[i].first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Placements, BackwardPaddedEncoder,
                         ::testing::Values(NormPlacement::post, NormPlacement::pre),
                         [](const auto& info) {
                           return info.param == NormPlacement::post ? "post" : "pre";
                         });

TEST(TransformerBackward, EncoderLayerRejectsWrongShapes) {
  attn::Rng rng(36);
  const attn::EncoderLayer layer = attn::encoder_layer_init(rng, 8, 2, 16);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 8);
  attn::EncoderLayerCache cache;
  attn::encoder_layer_forward(layer, x, {}, &cache);
  attn::EncoderLayer grads = attn::zeros_like(layer);
  EXPECT_TRUE(
      names(message_of([&] { attn::encoder_layer_backward(layer, cache, Matrix(4, 8), grads); }),
            "encoder_layer_backward"));  // d_out of another n (the cache's input was 5)
  EXPECT_TRUE(names(message_of([&] {
                      attn::encoder_layer_backward(layer, attn::EncoderLayerCache{}, dy, grads);
                    }),
                    "encoder_layer_backward"));  // no forward filled this cache
  EXPECT_TRUE(untouched(grads));
  attn::EncoderLayer wrong = attn::zeros_like(layer);
  wrong.norm1.gamma.resize(7);  // norm1's gradient is the last one written
  EXPECT_TRUE(names(message_of([&] { attn::encoder_layer_backward(layer, cache, dy, wrong); }),
                    "encoder_layer_backward"));
  wrong.norm1.gamma.setZero(8);
  EXPECT_TRUE(untouched(wrong)) << "encoder_layer_backward accumulated before it threw";
}

TEST(TransformerBackward, DecoderLayerRejectsWrongShapes) {
  attn::Rng rng(37);
  const attn::DecoderLayer layer = attn::decoder_layer_init(rng, 8, 2, 16);
  const Matrix x = attn::random_normal(rng, 5, 8), memory = attn::random_normal(rng, 6, 8),
               dy = attn::random_normal(rng, 5, 8);
  attn::DecoderLayerCache cache;
  attn::decoder_layer_forward(layer, x, memory, {}, &cache);
  attn::DecoderLayer grads = attn::zeros_like(layer);
  EXPECT_TRUE(names(
      message_of([&] { attn::decoder_layer_backward(layer, memory, cache, Matrix(5, 7), grads); }),
      "decoder_layer_backward"));
  EXPECT_TRUE(names(
      message_of([&] { attn::decoder_layer_backward(layer, memory.topRows(4), cache, dy, grads); }),
      "decoder_layer_backward"));  // a memory other than the forward's
  EXPECT_TRUE(untouched(grads));
  attn::DecoderLayer wrong = attn::zeros_like(layer);
  wrong.self_attn.q_proj.bias.resize(5);  // the self-attention's gradient, the last one written
  EXPECT_TRUE(
      names(message_of([&] { attn::decoder_layer_backward(layer, memory, cache, dy, wrong); }),
            "decoder_layer_backward"));
  wrong.self_attn.q_proj.bias.setZero(8);
  EXPECT_TRUE(untouched(wrong)) << "decoder_layer_backward accumulated before it threw";
}

}  // namespace test_transformer
