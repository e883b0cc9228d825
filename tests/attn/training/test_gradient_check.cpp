// attn::check_tensor, check_parameters, check_all_layers: every backward pass of the course
// agrees with central differences of its forward, and the checker itself can fail.
#include "attn/training/gradient_check.hpp"

#include "attn/core/random.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/grouped_query.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/layers/transformer.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_gradient_check {

using attn::Index;
using attn::MatrixD;

MatrixD normal(attn::Rng& rng, Index rows, Index cols) {
  MatrixD m(rows, cols);
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < cols; ++c) m(r, c) = rng.normal();
  }
  return m;
}

double sum_product(const MatrixD& out, const MatrixD& R) { return (out.array() * R.array()).sum(); }

// The worst over the single layers. The whole-model reports are left out: their ReLU inputs are
// kept only 1e-3 from the kink (gradient_check.cpp says why), which a step of 1e-3 crosses, so
// they would measure the kinks rather than the slopes these tests are about.
double worst_of(const std::vector<attn::GradientReport>& reports) {
  double worst = 0.0;
  for (const attn::GradientReport& r : reports) {
    if (r.layer.rfind("whole", 0) != 0) worst = std::max(worst, r.worst());
  }
  return worst;
}

const attn::TensorCheck& find(const attn::GradientReport& report, const std::string& name) {
  for (const attn::TensorCheck& t : report.tensors) {
    if (t.name == name) return t;
  }
  throw std::logic_error(report.layer + " has no tensor " + name);
}

// ---- Every layer meets the bar ------------------------------------------------------------------

// The bar, kGradientCheckTolerance = 1e-6: in double with h = 1e-5, truncation (h^2 |L'''| / 6)
// and rounding (eps |L| / h, eps = 2.2e-16, |L| ~ 10) are each ~1e-10 of gradients of size ~1;
// these small layers are well conditioned, and the measured worst is 1e-10 to 2e-9 for every
// tensor with a gradient, 2e-8 for the attention key bias (exactly 0, so measured as noise
// against the floor). A wrong backward pass (a missing term, a transposition, a wrong factor)
// is off by 1e-3 of the scale or far more (CheckerCanFail). 1e-6 is orders of magnitude from both.
class EveryLayer : public testing::TestWithParam<std::uint64_t> {};

TEST_P(EveryLayer, MeetsTheBar) {
  const std::vector<attn::GradientReport> reports = attn::check_all_layers(GetParam());
  ASSERT_EQ(reports.size(), 17u);
  for (const attn::GradientReport& r : reports) {
    ASSERT_FALSE(r.tensors.empty()) << r.layer;
    const attn::TensorCheck& worst = r.worst_tensor();
    EXPECT_LE(r.worst(), attn::kGradientCheckTolerance)
        << r.layer << ": " << worst.name << " is off by " << worst.max_abs_error
        << " at a scale of " << worst.scale;
    for (const attn::TensorCheck& t : r.tensors) {
      EXPECT_TRUE(std::isfinite(t.max_abs_error) && std::isfinite(t.scale)) << r.layer << t.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, EveryLayer, testing::Values(1u, 2u, 3u, 2026u));

TEST(CheckAllLayers, NamesEveryLayerOfTheCourse) {
  const std::vector<attn::GradientReport> reports = attn::check_all_layers(1);
  const std::vector<std::string> expected = {
      "linear",
      "layer norm",
      "feed-forward",
      "embedding",
      "attention, causal",
      "attention, padding + an empty row",
      "multi-head self-attention, causal",
      "multi-head cross-attention, padding",
      "encoder layer, post-norm",
      "encoder layer, pre-norm",
      "decoder layer, post-norm",
      "decoder layer, pre-norm",
      "softmax cross-entropy, ignore id + smoothing 0.1",
      "whole encoder-decoder, post-norm",
      "whole encoder-decoder, pre-norm, tied",
      "whole attention-only decoder, 2 layers",
      "grouped-query self-attention, RoPE, window 3",
  };
  ASSERT_EQ(reports.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(reports[i].layer, expected[i]);
}

// Nothing is skipped: each report perturbed every parameter of its layer (parameter_count, as
// PyTorch counts them) and every entry of its inputs, with the sizes check_all_layers documents
// (n = 5, d_model = 8, 2 heads, d_ff = 16, 4 queries over 6 keys or memory rows, vocabulary 7).
TEST(CheckAllLayers, PerturbsEveryParameterAndEveryInput) {
  attn::Rng rng(7);
  const Index n = 5, d = 8;
  const Index linear = attn::parameter_count(attn::linear_init(rng, d, 6));
  const Index norm = 2 * d;
  const Index ffn = attn::parameter_count(attn::ffn_init(rng, d, 16));
  const Index mha = attn::parameter_count(attn::multi_head_init(rng, d, 2));
  const Index encoder = attn::parameter_count(attn::encoder_layer_init(rng, d, 2, 16));
  const Index decoder = attn::parameter_count(attn::decoder_layer_init(rng, d, 2, 16));
  const Index gqa = attn::parameter_count(attn::grouped_query_init(rng, d, 4, 2, true));
  const std::vector<Index> expected = {
      linear + n * d,               // weight, bias, x
      norm + n * d,                 // gamma, beta, x
      ffn + n * d,                  // linear1, linear2, x
      7 * d,                        // the table
      3 * n * 4,                    // Q, K, V [5 x 4]
      4 * 4 + 6 * 4 + 6 * 3,        // Q [4 x 4], K [6 x 4], V [6 x 3]
      mha + n * d,                  // x
      mha + 4 * d + 6 * d + 6 * d,  // query, key, value
      encoder + n * d, encoder + n * d,
      decoder + n * d + 6 * d,  // x, memory
      decoder + n * d + 6 * d,
      6 * 7,  // logits
      // the whole model (vocabulary 7, one layer each): two tables, the layers and the
      // generator; pre-norm adds two final norms and, tied, drops the generator's weight
      2 * 7 * d + encoder + decoder + 7 * d + 7, 2 * 7 * d + encoder + decoder + 2 * norm + 7,
      // the attention-only decoder (vocabulary 7, context 6, two layers of a norm and an
      // attention, no FFN): pos_embed, tok_embed, the layers, the final norm, unembed
      6 * d + 7 * d + 2 * (norm + mha) + norm + 7 * d + 7,
      gqa + n * d,  // q, k, v, o projections with biases, x
  };
  const std::vector<attn::GradientReport> reports = attn::check_all_layers(1);
  ASSERT_EQ(reports.size(), expected.size());
  for (std::size_t i = 0; i < reports.size(); ++i) {
    Index entries = 0;
    for (const attn::TensorCheck& t : reports[i].tensors) entries += t.entries;
    EXPECT_EQ(entries, expected[i]) << reports[i].layer;
  }
  // The names are the state_dict keys, a stacked key by its block (W_K is in_proj_weight[8:16]).
  const attn::GradientReport& decoder_post = reports[10];
  EXPECT_NO_THROW(find(decoder_post, "multihead_attn.in_proj_weight[8:16]"));
  EXPECT_NO_THROW(find(decoder_post, "self_attn.in_proj_bias[16:24]"));
  EXPECT_NO_THROW(find(decoder_post, "norm3.weight"));
  EXPECT_NO_THROW(find(decoder_post, "memory"));
  EXPECT_NO_THROW(find(reports[0], "weight"));
}

// The same seed, the same numbers to the last bit: the case is drawn from attn::Rng alone, and a
// redraw for a ReLU kink is a further draw from the same generator.
TEST(CheckAllLayers, IsDeterministic) {
  const std::vector<attn::GradientReport> a = attn::check_all_layers(5);
  const std::vector<attn::GradientReport> b = attn::check_all_layers(5);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].tensors.size(), b[i].tensors.size());
    for (std::size_t j = 0; j < a[i].tensors.size(); ++j) {
      EXPECT_EQ(a[i].tensors[j].max_abs_error, b[i].tensors[j].max_abs_error);
      EXPECT_EQ(a[i].tensors[j].scale, b[i].tensors[j].scale);
    }
  }
}

// ---- The checker on functions known by hand -----------------------------------------------------

// L = sum(x^2) / 2 has gradient x, and central differences of a quadratic have no truncation
// error at all ((x+h)^2 - (x-h)^2 = 4 x h exactly), so what is left is rounding: eps |L| / h
// ~ 2.2e-16 * 5 / 1e-5 ~ 1e-10 of a gradient of size ~2. 1e-9 allows ten times that.
TEST(KnownFunction, HalfSumOfSquaresGivesItsArgument) {
  attn::Rng rng(11);
  MatrixD x = normal(rng, 4, 3);
  const MatrixD gradient = x;  // the exact answer
  const attn::LossFunction loss = [&] { return 0.5 * x.squaredNorm(); };
  const attn::TensorCheck t = attn::check_tensor("x", x, gradient, loss);
  EXPECT_EQ(t.entries, 12);
  EXPECT_LE(t.relative_error(), 1e-9);
  EXPECT_GT(t.scale, 0.5);  // a gradient of size ~1 was measured, not nothing
}

// L = sum(x^3) / 3 has gradient x^2, and its central difference is exactly x^2 + h^2 / 3 for
// |x| <= 1 (where h_e = h): the truncation error of central differences, h^2 |L'''| / 6 with
// L''' = 2, seen on its own. It falls as h^2: a hundred times less for h ten times smaller.
TEST(KnownFunction, TruncationErrorIsHSquaredOverThree) {
  MatrixD x(2, 3);
  x << 0.9, -0.5, 0.25, -1.0, 0.75, 0.1;
  const MatrixD gradient = x.array().square().matrix();
  const attn::LossFunction loss = [&] { return x.array().cube().sum() / 3.0; };
  for (const double h : {1e-2, 1e-3}) {
    const attn::TensorCheck t = attn::check_tensor("x", x, gradient, loss, h);
    // Rounding adds ~eps |L| / h <= 1e-13 to the h^2 / 3 = 3.3e-5 and 3.3e-7 expected: 1e-3
    // relative is far above it and far below the next term.
    EXPECT_NEAR(t.max_abs_error, h * h / 3.0, 1e-3 * h * h / 3.0) << "h = " << h;
  }
}

// Linear in every single entry (the layer's L = sum((x W^T + b) * R) is bilinear in W and x), so
// even a huge step has no truncation error: only rounding, here ~1e-14 at h = 1e-2.
TEST(KnownFunction, LinearLayerIsExactForAnyStep) {
  const std::vector<attn::GradientReport> reports = attn::check_all_layers(1, 1e-2);
  EXPECT_EQ(reports[0].layer, "linear");
  EXPECT_LE(reports[0].worst(), 1e-12);
  EXPECT_EQ(reports[3].layer, "embedding");  // a lookup: linear in the table too
  EXPECT_LE(reports[3].worst(), 1e-12);
}

// ---- The step h ---------------------------------------------------------------------------------

// Measured on seed 1 (the header's table): worst relative error over all layers
//   h = 1e-3: 8.0e-7   1e-4: 8.0e-9   1e-5: 2.1e-8   1e-6: 1.9e-7   1e-8: 8.2e-6   1e-10: 1.9e-3
// Above ~3e-5 the truncation error rules and falls as h^2; below it rounding rules and grows as
// 1/h. The bounds below test the two slopes, with margins of several times each.
TEST(StepSize, TruncationFallsAsHSquaredAndRoundingGrowsAsOneOverH) {
  const double at_1e3 = worst_of(attn::check_all_layers(1, 1e-3));
  const double at_1e4 = worst_of(attn::check_all_layers(1, 1e-4));
  const double at_default = worst_of(attn::check_all_layers(1));
  const double at_1e6 = worst_of(attn::check_all_layers(1, 1e-6));
  const double at_1e10 = worst_of(attn::check_all_layers(1, 1e-10));
  // h^2: 1e-3 -> 1e-4 is a factor 100 (measured 99.8). Truncation is deterministic arithmetic.
  EXPECT_GT(at_1e3 / at_1e4, 30.0);
  EXPECT_LT(at_1e3 / at_1e4, 300.0);
  // 1/h: 1e-6 -> 1e-10 is 1e4 (measured 1e4); rounding noise is random, so a wide margin.
  EXPECT_GT(at_1e10 / at_1e6, 100.0);
  EXPECT_GT(at_1e10, attn::kGradientCheckTolerance);  // a step that small cannot check anything
  // The default sits in the valley, far below the bar.
  EXPECT_LE(at_default, 1e-7);
  EXPECT_LT(at_default, at_1e3);
  EXPECT_LT(at_default, at_1e10);
}

// A step as large as the ReLU margin (1e-2) lets a perturbation cross a kink: the feed-forward
// network fails (measured 6.9e-2; the post-norm encoder and decoder layers 1.3e-1 and 9.4e-2),
// attention, smooth, has its truncation error only (measured 1.7e-5).
TEST(StepSize, AStepAsLargeAsTheReluMarginCrossesKinks) {
  const std::vector<attn::GradientReport> reports = attn::check_all_layers(1, attn::kReluMargin);
  EXPECT_GT(reports[2].worst(), 1e-3) << reports[2].layer;  // feed-forward
  EXPECT_LE(reports[4].worst(), 1e-4) << reports[4].layer;  // attention: smooth, only h^2
}

// ---- The checker can fail -----------------------------------------------------------------------

struct LinearCase {
  attn::LinearD layer;
  MatrixD x, R;
  attn::LinearD grads;
  MatrixD dx;
};

// A square linear layer (8 -> 8) so that its weight gradient can be transposed.
LinearCase linear_case() {
  attn::Rng rng(3);
  LinearCase c{attn::cast<double>(attn::linear_init(rng, 8, 8)),
               normal(rng, 5, 8),
               normal(rng, 5, 8),
               {},
               {}};
  c.grads = attn::zeros_like(c.layer);
  c.dx = attn::linear_backward(c.layer, c.x, c.R, c.grads);
  return c;
}

TEST(CheckerCanFail, OneEntryOffByAThousandthOfTheScale) {
  LinearCase c = linear_case();
  const attn::LossFunction loss = [&] {
    return sum_product(attn::linear_forward(c.layer, c.x), c.R);
  };
  const attn::TensorCheck right =
      attn::check_tensor("weight", c.layer.weight, c.grads.weight, loss);
  EXPECT_LE(right.relative_error(), 1e-9);  // the true gradient: rounding only (linear in W)
  MatrixD wrong = c.grads.weight;
  wrong(3, 5) += 1e-3 * right.scale;
  const attn::TensorCheck t = attn::check_tensor("weight", c.layer.weight, wrong, loss);
  // Exactly the planted 1e-3, give or take the ~1e-11 of rounding.
  EXPECT_NEAR(t.relative_error(), 1e-3, 1e-8);
  EXPECT_GT(t.relative_error(), attn::kGradientCheckTolerance);
}

TEST(CheckerCanFail, TransposedWeightGradient) {
  LinearCase c = linear_case();
  const attn::LossFunction loss = [&] {
    return sum_product(attn::linear_forward(c.layer, c.x), c.R);
  };
  const MatrixD transposed = c.grads.weight.transpose();  // dW = x^T dy instead of dy^T x
  const attn::TensorCheck t = attn::check_tensor("weight", c.layer.weight, transposed, loss);
  EXPECT_GT(t.relative_error(), 0.1);
}

TEST(CheckerCanFail, MissingBiasGradientAndNaN) {
  LinearCase c = linear_case();
  const attn::LossFunction loss = [&] {
    return sum_product(attn::linear_forward(c.layer, c.x), c.R);
  };
  // A backward pass that forgot db: all zeros, 100% off.
  const MatrixD zero = MatrixD::Zero(1, 8);
  EXPECT_NEAR(attn::check_tensor("bias", c.layer.bias, zero, loss).relative_error(), 1.0, 1e-9);
  // A NaN in the analytic gradient is a NaN error, and NaN <= 1e-6 is false: it cannot pass.
  MatrixD nan = c.grads.bias;
  nan(0, 2) = std::numeric_limits<double>::quiet_NaN();
  attn::GradientReport report{"linear", {}};
  report.add(attn::check_tensor("weight", c.layer.weight, c.grads.weight, loss));
  report.add(attn::check_tensor("bias", c.layer.bias, nan, loss));
  EXPECT_TRUE(std::isnan(report.worst()));
  EXPECT_FALSE(report.worst() <= attn::kGradientCheckTolerance);
  EXPECT_EQ(report.worst_tensor().name, "bias");
}

// The whole route check_parameters takes, with a gradient holder one entry of which is wrong:
// the report names the tensor.
TEST(CheckerCanFail, CheckParametersNamesTheWrongTensor) {
  attn::Rng rng(9);
  attn::MultiHeadAttentionD mha = attn::cast<double>(attn::multi_head_init(rng, 8, 2));
  MatrixD x = normal(rng, 4, 8);
  const MatrixD R = normal(rng, 4, 8);
  const attn::LossFunction loss = [&] {
    return sum_product(attn::multi_head_forward(mha, x, x, x).out, R);
  };
  const attn::MultiHeadResultD cache = attn::multi_head_forward(mha, x, x, x);
  attn::MultiHeadAttentionD grads = attn::zeros_like(mha);
  attn::multi_head_backward(mha, x, x, x, cache, R, grads);
  {
    attn::GradientReport report{"right", {}};
    attn::check_parameters(report, mha, grads, loss);
    EXPECT_LE(report.worst(), attn::kGradientCheckTolerance);
  }
  grads.v_proj.weight(1, 2) *= 1.5;  // W_V: rows 16 to 24 of in_proj_weight
  attn::GradientReport report{"wrong", {}};
  attn::check_parameters(report, mha, grads, loss, attn::kGradientCheckStep, "self_attn.");
  EXPECT_GT(report.worst(), 1e-3);
  EXPECT_EQ(report.worst_tensor().name, "self_attn.in_proj_weight[16:24]");
}

// Why check_all_layers keeps every ReLU input kReluMargin away from 0: at a kink, the central
// difference is the mean of the two one-sided slopes, which neither side of the analytic
// gradient (ReLU' = 1 or 0) is, and the checker reports it.
TEST(CheckerCanFail, AtAReluKinkTheNumericSlopeIsTheMeanOfBothSides) {
  attn::Rng rng(4);
  attn::FeedForwardD ff = attn::cast<double>(attn::ffn_init(rng, 8, 16));
  MatrixD x = normal(rng, 5, 8);
  const MatrixD R = normal(rng, 5, 8);
  ff.linear1.bias(0) = -ff.linear1.weight.row(0).dot(x.row(0));  // pre-activation (0, 0) ~ 0
  attn::FeedForwardCacheOf<double> cache;
  attn::ffn_forward(ff, x, &cache);
  ASSERT_LE(std::abs(cache.pre_activation(0, 0)), 1e-14);
  // The analytic gradient of b_1 with that ReLU on, and off.
  attn::FeedForwardCacheOf<double> on = cache, off = cache;
  on.pre_activation(0, 0) = 1.0;
  off.pre_activation(0, 0) = -1.0;
  attn::FeedForwardD grads_on = attn::zeros_like(ff), grads_off = attn::zeros_like(ff);
  attn::ffn_backward(ff, x, on, R, grads_on);
  attn::ffn_backward(ff, x, off, R, grads_off);
  const attn::LossFunction loss = [&] { return sum_product(attn::ffn_forward(ff, x), R); };
  const MatrixD numeric = attn::numeric_gradient(ff.linear1.bias, loss);
  const double mean = 0.5 * (grads_on.linear1.bias(0) + grads_off.linear1.bias(0));
  const double jump = std::abs(grads_on.linear1.bias(0) - grads_off.linear1.bias(0));
  ASSERT_GT(jump, 0.1);  // the kink is visible: d_hidden(0, 0) is not small for this draw
  EXPECT_NEAR(numeric(0, 0), mean, 1e-8);  // halfway, to the checker's rounding
  const double rel_on =
      attn::check_tensor("linear1.bias", ff.linear1.bias, grads_on.linear1.bias, loss)
          .relative_error();
  const double rel_off =
      attn::check_tensor("linear1.bias", ff.linear1.bias, grads_off.linear1.bias, loss)
          .relative_error();
  EXPECT_GT(std::min(rel_on, rel_off), 1e-2);  // either analytic answer "fails"
}

// ---- Masks: exact zeros both ways ---------------------------------------------------------------

// A blocked score is replaced by -inf whatever Q and K hold, so moving a blocked key changes L
// by exactly 0: the numeric gradient of its rows of K and V is exactly 0, as the analytic one.
// A query allowed no key has an output of zeros whatever its row of Q: exactly 0 both ways too.
TEST(Masks, BlockedKeysAndAnEmptyQueryHaveExactlyZeroGradients) {
  attn::Rng rng(21);
  MatrixD Q = normal(rng, 4, 4), K = normal(rng, 6, 4), V = normal(rng, 6, 3);
  const MatrixD R = normal(rng, 4, 3);
  attn::AllowedMask allowed = attn::full_mask(4, 6);
  allowed.rightCols(2).setConstant(false);  // keys 4 and 5: padding
  allowed.row(2).setConstant(false);        // query 2: no key at all
  const attn::AttentionOptions opts{.allowed = allowed};
  const attn::LossFunction loss = [&] {
    return sum_product(attn::attention(Q, K, V, opts).out, R);
  };
  const attn::AttentionResultD result = attn::attention(Q, K, V, opts);
  const attn::AttentionGradsD g = attn::attention_backward(Q, K, V, result.weights, R, opts);
  const MatrixD dQ = attn::numeric_gradient(Q, loss);
  const MatrixD dK = attn::numeric_gradient(K, loss);
  const MatrixD dV = attn::numeric_gradient(V, loss);
  EXPECT_TRUE((dK.bottomRows(2).array() == 0.0).all()) << dK;
  EXPECT_TRUE((g.dK.bottomRows(2).array() == 0.0).all()) << g.dK;
  EXPECT_TRUE((dV.bottomRows(2).array() == 0.0).all()) << dV;
  EXPECT_TRUE((g.dV.bottomRows(2).array() == 0.0).all()) << g.dV;
  EXPECT_TRUE((dQ.row(2).array() == 0.0).all()) << dQ;
  EXPECT_TRUE((g.dQ.row(2).array() == 0.0).all()) << g.dQ;
  // And the rest agrees to the bar.
  EXPECT_LE(attn::compare_gradients("Q", g.dQ, dQ).relative_error(), attn::kGradientCheckTolerance);
  EXPECT_LE(attn::compare_gradients("K", g.dK, dK).relative_error(), attn::kGradientCheckTolerance);
  EXPECT_LE(attn::compare_gradients("V", g.dV, dV).relative_error(), attn::kGradientCheckTolerance);
}

// ---- The error measure --------------------------------------------------------------------------

// The key bias of attention has a gradient of exactly 0 (softmax ignores a constant added to a
// row of scores), so its numeric gradient is rounding noise, ~eps |L| / h: measured against
// itself it is "100% wrong" (noise / noise = 1), against the report's floor (1e-3 of the largest
// gradient) it is ~1e-8, as noise of ~1e-11 should be.
TEST(ErrorMeasure, AZeroGradientIsMeasuredAgainstTheFloor) {
  const std::vector<attn::GradientReport> reports = attn::check_all_layers(1);
  const attn::GradientReport& mha = reports[6];
  ASSERT_EQ(mha.layer, "multi-head self-attention, causal");
  const attn::TensorCheck& key_bias = find(mha, "in_proj_bias[8:16]");
  const attn::TensorCheck& value_bias = find(mha, "in_proj_bias[16:24]");
  EXPECT_LE(key_bias.scale, 1e-9);   // the numeric gradient: noise only
  EXPECT_GT(value_bias.scale, 0.1);  // a real gradient beside it
  EXPECT_LE(key_bias.max_abs_error, 1e-9);
  double largest = 0.0;
  for (const attn::TensorCheck& t : mha.tensors) largest = std::max(largest, t.scale);
  EXPECT_EQ(key_bias.floor, attn::kScaleFloorFraction * largest);
  EXPECT_LE(key_bias.relative_error(), attn::kGradientCheckTolerance);
}

TEST(ErrorMeasure, RelativeErrorByHand) {
  attn::TensorCheck t{"t", 4, 2e-6, 4.0, 0.0};
  EXPECT_DOUBLE_EQ(t.relative_error(), 5e-7);
  t.floor = 8.0;  // a floor above the scale is what is divided by
  EXPECT_DOUBLE_EQ(t.relative_error(), 2.5e-7);
  const attn::TensorCheck zeros{"zeros", 4, 0.0, 0.0, 0.0};  // exact zeros both ways
  EXPECT_EQ(zeros.relative_error(), 0.0);
  const attn::TensorCheck only_analytic{"a", 4, 1e-3, 0.0, 0.0};  // numeric 0, analytic not
  EXPECT_EQ(only_analytic.relative_error(), std::numeric_limits<double>::infinity());

  attn::GradientReport report{"r", {}};
  EXPECT_EQ(report.worst(), 0.0);
  report.add({"big", 1, 1e-9, 10.0, 0.0});
  report.add({"small", 1, 1e-9, 1e-6, 0.0});
  EXPECT_EQ(report.tensors[0].floor, 10.0 * attn::kScaleFloorFraction);
  EXPECT_EQ(report.tensors[1].floor, 10.0 * attn::kScaleFloorFraction);
  EXPECT_DOUBLE_EQ(report.worst(), 1e-9 / (10.0 * attn::kScaleFloorFraction));
  EXPECT_EQ(report.worst_tensor().name, "small");
}

// ---- The checker leaves what it perturbs as it found it -----------------------------------------

TEST(Restores, EveryEntryBitForBit) {
  LinearCase c = linear_case();
  const attn::LinearD before = c.layer;
  const MatrixD x_before = c.x;
  const attn::LossFunction loss = [&] {
    return sum_product(attn::linear_forward(c.layer, c.x), c.R);
  };
  attn::GradientReport report{"linear", {}};
  report.add(attn::check_tensor("x", c.x, c.dx, loss));
  attn::check_parameters(report, c.layer, c.grads, loss);
  EXPECT_TRUE(attn_test::identical(c.x, x_before));
  EXPECT_TRUE(attn_test::identical(c.layer.weight, before.weight));
  EXPECT_TRUE(attn_test::identical(c.layer.bias, before.bias));
  EXPECT_LE(report.worst(), attn::kGradientCheckTolerance);
}

TEST(Restores, WhenTheLossThrows) {
  MatrixD x(2, 2);
  x << 1.5, -2.25, 0.125, 3.0;
  const MatrixD before = x;
  int calls = 0;
  const attn::LossFunction loss = [&] {
    if (++calls == 4) throw std::runtime_error("forward failed");  // during the second entry
    return x.sum();
  };
  EXPECT_THROW(attn::numeric_gradient(x, loss), std::runtime_error);
  EXPECT_TRUE(attn_test::identical(x, before));
}

// ---- Bad arguments ------------------------------------------------------------------------------

TEST(BadArguments, AreNamed) {
  MatrixD x = MatrixD::Ones(2, 3);
  const attn::LossFunction loss = [&] { return x.sum(); };
  for (const double step : {0.0, -1e-5, std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity()}) {
    EXPECT_NE(attn_test::message_of([&] {
                attn::numeric_gradient(x, loss, step);
              }).find("numeric_gradient: step"),
              std::string::npos)
        << step;
  }
  EXPECT_EQ(attn_test::message_of([&] { attn::check_tensor("x", x, MatrixD::Ones(3, 2), loss); }),
            "check_tensor: x is [2 x 3] but its analytic gradient is [3 x 2]: they must have one "
            "shape");
  EXPECT_NE(attn_test::message_of([&] {
              attn::compare_gradients("g", MatrixD::Ones(2, 3), MatrixD::Ones(2, 2));
            }).find("compare_gradients: g:"),
            std::string::npos);
  const attn::GradientReport empty{"empty", {}};
  EXPECT_EQ(attn_test::message_of([&] { empty.worst_tensor(); }),
            "GradientReport::worst_tensor: the report has no tensors");
}

// ---- A gradient compared with the very tensor it perturbs (issue 26) ----------------------------

TEST(CheckerRefuses, AnAnalyticGradientThatIsTheValueItself) {
  // check_tensor(w, w) perturbed the "analytic gradient" as it measured the numeric one, and
  // check_parameters(layer, layer) did so for every tensor: a report of nonsense, no error.
  LinearCase c = linear_case();
  const attn::LossFunction loss = [&] {
    return sum_product(attn::linear_forward(c.layer, c.x), c.R);
  };
  const MatrixD before = c.layer.weight;
  std::string m = attn_test::message_of(
      [&] { attn::check_tensor("weight", c.layer.weight, c.layer.weight, loss); });
  EXPECT_EQ(m.rfind("check_tensor: weight shares memory with its analytic gradient", 0), 0u) << m;
  attn::GradientReport report{"linear", {}};
  m = attn_test::message_of([&] { attn::check_parameters(report, c.layer, c.layer, loss); });
  EXPECT_EQ(m.rfind("check_parameters: the gradient of weight shares memory with the layer's "
                    "weight",
                    0),
            0u)
      << m;
  EXPECT_TRUE(report.tensors.empty());
  EXPECT_TRUE(attn_test::identical(c.layer.weight, before));
}

}  // namespace test_gradient_check
