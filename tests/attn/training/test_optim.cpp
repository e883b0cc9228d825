// The optimiser, gradient clipping and the learning-rate schedules (training chapter): Adam and
// AdamW, clip_grad_norm_ and the two schedules against PyTorch 1.13 (scripts/fixtures/optim.py),
// cases worked by hand, the behaviour the header promises, and argument errors.
#include "attn/core/random.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/training/optim.hpp"
#include "course/npy.hpp"

#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace test_optim {

using attn_test::identical;
using attn_test::message_of;

using attn::Adam;
using attn::AdamD;
using attn::AdamOptions;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::Parameter;
using attn::RowVector;
using attn::WeightDecay;

// ---- A parameter pair like the fixtures': weight [3 x 4] and a 1-D bias [4] ---------------------
// Not a Linear (whose bias has `out` = 3 entries): any struct with a for_each_parameter is a
// model to attn::parameters(), found by argument-dependent lookup like the library's own.

template <attn::Real T>
struct PairOf {
  using Scalar = T;
  attn::MatrixOf<T> weight;   // [3 x 4]
  attn::RowVectorOf<T> bias;  // [1 x 4], 1-D in PyTorch
};
using Pair = PairOf<float>;
using PairD = PairOf<double>;

template <typename L, typename F>
requires attn::IsA<L, PairOf>
void for_each_parameter(L& pair, const std::string& prefix, F&& f) {
  f(prefix + "weight", pair.weight, Index{0});
  f(prefix + "bias", pair.bias, Index{0});
}

course::NpyArray load(const std::string& name) {
  return course::read_npy(attn_test::fixture("optim", "optim_" + name + ".npy"));
}

/// The distance between two finite floats in units in the last place (0: the same float).
std::int64_t ulps(float a, float b) {
  auto ordered = [](float x) {
    std::int32_t i = 0;
    std::memcpy(&i, &x, sizeof i);
    const std::int64_t magnitude = i & 0x7fffffff;
    return i < 0 ? -magnitude : magnitude;
  };
  const std::int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

constexpr double kFloatUlp = 1.0 / (1 << 23);  // 2^-23: one ulp of a float in [1, 2)

// ---- Against PyTorch: torch.optim.Adam / AdamW -------------------------------------------------

// Tolerance. Every step ends with p + u rounded to float, where |u| <= lr (7e-3 here), so an
// implementation that rounds somewhere differently from torch drifts by a few ulps of the
// largest magnitude the entry has had. We allow 4 ulps of that scale, 4 * 2^-23 * max_t |p_t|
// (1e-6 for the largest entries, |p| ~ 2). A wrong formula is far outside: L2 and decoupled
// decay swapped moves the parameters by ~1e-4, a missing bias correction by ~1e-2.
// (The same bound, with the tensor's largest entry as the scale, holds for m and v.)
// On an x86-64 machine with AVX2, where the fixtures were written, the results are in fact
// torch's to the bit: MatchesTorchBitForBit below.
constexpr double kUlpsAllowed = 4.0;

struct Deviation {
  double max_abs = 0.0;
  std::int64_t max_ulps = 0;
  bool within = true;  // every entry within kUlpsAllowed ulps of its scale
};

/// Runs the fixture's five steps with `options` and compares every step with PyTorch's.
Deviation run_fixture(const std::string& name, const AdamOptions& options) {
  Pair model{load("w0").to_matrix(), RowVector(load("b0").to_matrix())};
  Pair grads = attn::zeros_like(model);
  const course::NpyArray grad_w = load("grad_w"), expected_w = load(name + "_w");
  const Matrix grad_b = load("grad_b").to_matrix(), expected_b = load(name + "_b").to_matrix();
  const std::vector<double> lrs = load("lr").data;  // float64: torch's own lr of each step
  EXPECT_EQ(lrs.size(), 5u);

  Matrix scale_w = model.weight.cwiseAbs();  // the largest |p| each entry has had so far
  RowVector scale_b = model.bias.cwiseAbs();
  Deviation dev;
  auto compare = [&](const auto& got, const auto& expected, const auto& scale) {
    for (Index i = 0; i < got.size(); ++i) {
      const float g = got.data()[i], e = expected.data()[i];
      const double diff = std::abs(double(g) - double(e));
      dev.max_abs = std::max(dev.max_abs, diff);
      dev.max_ulps = std::max(dev.max_ulps, ulps(g, e));
      if (!(diff <= kUlpsAllowed * kFloatUlp * double(scale.data()[i]))) dev.within = false;
    }
  };

  Adam opt(options);
  for (std::size_t t = 0; t < lrs.size(); ++t) {
    grads.weight = grad_w.slice(t);
    grads.bias = grad_b.row(Index(t));
    opt.set_lr(lrs[t]);
    opt.step(attn::parameters(model), attn::parameters(grads));
    const Matrix w = expected_w.slice(t);
    const RowVector b = expected_b.row(Index(t));
    scale_w = scale_w.cwiseMax(w.cwiseAbs());
    scale_b = scale_b.cwiseMax(b.cwiseAbs());
    compare(model.weight, w, scale_w);
    compare(model.bias, b, scale_b);
  }
  EXPECT_EQ(opt.steps(), 5);
  // The state after the last step: exp_avg and exp_avg_sq, scaled by each tensor's largest entry.
  const auto& state = opt.state();
  EXPECT_EQ(state.size(), 2u);
  const Matrix m_w = load(name + "_m_w").to_matrix(), v_w = load(name + "_v_w").to_matrix();
  const Matrix m_b = load(name + "_m_b").to_matrix(), v_b = load(name + "_v_b").to_matrix();
  const std::pair<const Matrix*, const Matrix*> moments[] = {{&state[0].exp_avg, &m_w},
                                                             {&state[0].exp_avg_sq, &v_w},
                                                             {&state[1].exp_avg, &m_b},
                                                             {&state[1].exp_avg_sq, &v_b}};
  for (const auto& [got, expected] : moments) {
    const Matrix scale =
        Matrix::Constant(expected->rows(), expected->cols(), expected->cwiseAbs().maxCoeff());
    compare(*got, *expected, scale);
  }
  EXPECT_EQ(state[0].step, 5);
  EXPECT_EQ(state[1].step, 5);
  std::cout << "[ optim    ] " << name << ": max |C++ - torch| = " << dev.max_abs << " ("
            << dev.max_ulps << " ulps)\n";
  return dev;
}

// The fixture's options: torch.optim.Adam(lr=1e-2, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.1)
// and torch.optim.AdamW(same, weight_decay=0.01); the lr of each step comes from optim_lr.npy.
const AdamOptions kAdam{.lr = 1e-2, .betas = {0.9, 0.98}, .eps = 1e-9, .weight_decay = 0.1};
const AdamOptions kAdamW{.lr = 1e-2,
                         .betas = {0.9, 0.98},
                         .eps = 1e-9,
                         .weight_decay = 0.01,
                         .decay = WeightDecay::decoupled};

TEST(OptimFixture, AdamMatchesTorchOptimAdam) {
  const Deviation dev = run_fixture("adam", kAdam);
  EXPECT_TRUE(dev.within) << "max deviation " << dev.max_abs << " (" << dev.max_ulps << " ulps)";
}

TEST(OptimFixture, AdamWMatchesTorchOptimAdamW) {
  const Deviation dev = run_fixture("adamw", kAdamW);
  EXPECT_TRUE(dev.within) << "max deviation " << dev.max_abs << " (" << dev.max_ulps << " ulps)";
}

// The order of operations of optim.hpp, fused multiply-adds included, is torch's CPU kernels'
// on x86-64 with AVX2, where the fixtures were written: every parameter and moment is the same
// float. (Fixtures regenerated by a torch whose kernels do not fuse would fail this test, and
// only this one, by an ulp.)
TEST(OptimFixture, MatchesTorchBitForBit) {
  EXPECT_EQ(run_fixture("adam", kAdam).max_ulps, 0);
  EXPECT_EQ(run_fixture("adamw", kAdamW).max_ulps, 0);
}

TEST(OptimFixture, TheFixtureLearningRatesAreTheWarmUpSchedule) {
  // LambdaLR(Adam(lr=1e-2), lambda e: rate(e + 1, d_model=1, warmup=2)): factor 1e-2, to the bit.
  const std::vector<double> lrs = load("lr").data;
  for (std::size_t t = 0; t < lrs.size(); ++t) {
    const std::int64_t step = std::int64_t(t) + 1;
    EXPECT_EQ(attn::warmup_inverse_sqrt_lr(step, 1, 2, 1e-2), lrs[t]) << "step " << step;
  }
  EXPECT_NE(lrs[0], lrs[1]);  // the lr really changes between steps
}

// ---- Against PyTorch: clip_grad_norm_ --------------------------------------------------------

// The norm is summed in double and rounded once (the correctly rounded norm); torch sums in
// float32 and was measured up to 3 ulps away on random gradients (here: the same float). 4 ulps
// of each value allow for that; the clipped gradients are g * coef, one rounding after coef's.
TEST(OptimFixture, ClipMatchesTorchClipGradNorm) {
  const Matrix g_w = load("clip_grad_w").to_matrix();
  const RowVector g_b(load("clip_grad_b").to_matrix());
  const std::vector<double> max_norms = load("clip_max_norm").data, norms = load("clip_norm").data;
  const course::NpyArray out_w = load("clip_out_w");
  const Matrix out_b = load("clip_out_b").to_matrix();
  ASSERT_EQ(max_norms.size(), 2u);
  for (std::size_t c = 0; c < 2; ++c) {
    Pair grads{g_w, g_b};
    const float total = attn::clip_grad_norm(attn::parameters(grads), max_norms[c]);
    EXPECT_LE(ulps(total, float(norms[c])), 4)
        << "case " << c << ": " << total << " vs " << norms[c];
    const Matrix w = out_w.slice(c);
    const RowVector b = out_b.row(Index(c));
    for (Index i = 0; i < w.size(); ++i) EXPECT_LE(ulps(grads.weight.data()[i], w.data()[i]), 4);
    for (Index i = 0; i < b.size(); ++i) EXPECT_LE(ulps(grads.bias.data()[i], b.data()[i]), 4);
    std::cout << "[ optim    ] clip max_norm " << max_norms[c] << ": norm " << total << " (torch "
              << norms[c] << "), max |C++ - torch| = "
              << std::max(attn::max_abs_diff(grads.weight, w), attn::max_abs_diff(grads.bias, b))
              << "\n";
  }
  // Case 0 clips (max_norm 1 < 4.68), case 1 does not (10 > 4.68): the gradients are the input.
  EXPECT_TRUE(identical(out_w.slice(1), g_w));
}

// ---- Against PyTorch: the schedules ------------------------------------------------------------

TEST(OptimFixture, InverseSqrtMatchesLambdaLR) {
  // LambdaLR(Adam(lr=1.0), lambda e: rate(e + 1, 512, 8, factor=2)): the same pow() calls in the
  // same order, so the same double.
  const std::vector<double> lrs = load("sched_inverse_sqrt").data;
  ASSERT_EQ(lrs.size(), 20u);
  for (std::size_t t = 0; t < lrs.size(); ++t) {
    const std::int64_t step = std::int64_t(t) + 1;
    EXPECT_EQ(attn::warmup_inverse_sqrt_lr(step, 512, 8, 2.0), lrs[t]) << "step " << step;
  }
}

TEST(OptimFixture, WarmupCosineMatchesSequentialLR) {
  // SequentialLR(LinearLR(1/5, total_iters=4), CosineAnnealingLR(T_max=15, eta_min=1e-5),
  // milestones=[4]) on lr 1e-3. torch updates the lr recursively (lr_e from lr_{e-1}), this is
  // the closed form: the script measured 2.6e-16 relative; 1e-14 is a few dozen roundings, and
  // any off-by-one in the step moves an lr by more than 1e-2 relative.
  const std::vector<double> lrs = load("sched_cosine").data;
  ASSERT_EQ(lrs.size(), 20u);
  double worst = 0.0;
  for (std::size_t t = 0; t < lrs.size(); ++t) {
    const double lr = attn::warmup_cosine_lr(std::int64_t(t) + 1, 1e-3, 5, 20, 1e-5);
    worst = std::max(worst, std::abs(lr - lrs[t]) / lrs[t]);
    EXPECT_NEAR(lr, lrs[t], 1e-14 * lrs[t]) << "step " << t + 1;
  }
  std::cout << "[ optim    ] warm-up + cosine: max relative |C++ - torch| = " << worst << "\n";
  EXPECT_EQ(attn::warmup_cosine_lr(1, 1e-3, 5, 20, 1e-5), lrs[0]);    // base_lr / warmup
  EXPECT_EQ(attn::warmup_cosine_lr(5, 1e-3, 5, 20, 1e-5), lrs[4]);    // the peak, base_lr
  EXPECT_EQ(attn::warmup_cosine_lr(20, 1e-3, 5, 20, 1e-5), lrs[19]);  // min_lr
}

// ---- Adam by hand ------------------------------------------------------------------------------

// On step 1, m / bc1 = g and v / bc2 = g^2, so p moves by lr g / (|g| + eps): lr sign(g),
// whatever g's size, as long as |g| >> eps. Here |g| >= 1e-3 = 1e6 eps, so the update is
// lr (1 - 1e-6) at worst. With eps inside the root, sqrt(g^2 + eps), the 1e-3 entry would move
// by lr / sqrt(1.001), 5e-4 relative short.
TEST(OptimAdamByHand, FirstStepIsLrTimesSignOfGradient) {
  PairD model{MatrixD::Zero(3, 4), attn::RowVectorD::Zero(4)};
  PairD grads{MatrixD(3, 4), attn::RowVectorD(4)};
  grads.weight << 1e-3, -1e-3, 0.5, -0.5, 7.0, -7.0, 123.0, -1e4, 2e-2, -3e-2, 1.0, -1.0;
  grads.bias << 4e3, -4e-3, 0.25, -0.25;
  const double lr = 0.01;
  AdamD opt({.lr = lr, .betas = {0.9, 0.98}, .eps = 1e-9});
  opt.step(attn::parameters(model), attn::parameters(grads));
  const MatrixD expected_w = -lr * grads.weight.array().sign().matrix();
  const attn::RowVectorD expected_b = -lr * grads.bias.array().sign().matrix();
  EXPECT_LT(attn::max_abs_diff(model.weight, expected_w), lr * 1.1e-6);
  EXPECT_LT(attn::max_abs_diff(model.bias, expected_b), lr * 1.1e-6);
  // The same in float, from p = 1: each entry 1 -/+ lr to within an ulp of 1 (and lr 1e-6).
  Pair fmodel{Matrix::Ones(3, 4), RowVector::Ones(4)};
  Pair fgrads{grads.weight.cast<float>(), grads.bias.cast<float>()};
  Adam fopt({.lr = lr, .betas = {0.9, 0.98}, .eps = 1e-9});
  fopt.step(attn::parameters(fmodel), attn::parameters(fgrads));
  const Matrix fexpected = (1.0f - float(lr) * fgrads.weight.array().sign()).matrix();
  EXPECT_LT(attn::max_abs_diff(fmodel.weight, fexpected), 2e-7);
}

// The bias corrections, step by step, on one entry: g = 2 then g = -1, betas (0.9, 0.98).
//   step 1: m = 0.2, v = 0.08; bc1 = 0.1, bc2 = 0.02: update lr (0.2/0.1) / (sqrt(0.08/0.02) + eps)
//           = lr 2 / (2 + eps)
//   step 2: m = 0.9 0.2 - 0.1 = 0.08, v = 0.98 0.08 + 0.02 = 0.0984; bc1 = 0.19, bc2 = 0.0396:
//           update lr (0.08 / 0.19) / (sqrt(0.0984) / sqrt(0.0396) + eps) = lr 0.2671077...
TEST(OptimAdamByHand, BiasCorrection) {
  const double lr = 0.1, eps = 1e-9;
  PairD model{MatrixD::Constant(3, 4, 1.0), attn::RowVectorD::Constant(4, 1.0)};
  PairD grads{MatrixD::Constant(3, 4, 2.0), attn::RowVectorD::Constant(4, 2.0)};
  AdamD opt({.lr = lr, .betas = {0.9, 0.98}, .eps = eps});
  opt.step(attn::parameters(model), attn::parameters(grads));
  EXPECT_NEAR(opt.state()[0].exp_avg(0, 0), 0.2, 1e-15);
  EXPECT_NEAR(opt.state()[0].exp_avg_sq(0, 0), 0.08, 1e-15);
  const double p1 = 1.0 - lr * 2.0 / (2.0 + eps);
  EXPECT_NEAR(model.weight(1, 2), p1, 1e-15);
  EXPECT_NEAR(model.weight(1, 2), 1.0 - lr, 1e-9);  // without correction: 1 - lr 0.2 / 0.28

  grads.weight.setConstant(-1.0);
  grads.bias.setConstant(-1.0);
  opt.step(attn::parameters(model), attn::parameters(grads));
  EXPECT_NEAR(opt.state()[0].exp_avg(0, 0), 0.08, 1e-15);
  EXPECT_NEAR(opt.state()[0].exp_avg_sq(0, 0), 0.0984, 1e-15);
  const double update = lr * (0.08 / 0.19) / (std::sqrt(0.0984) / std::sqrt(0.0396) + eps);
  EXPECT_NEAR(update, lr * 0.2671077, lr * 1e-6);
  EXPECT_NEAR(model.weight(2, 3), p1 - update, 1e-15);
  EXPECT_NEAR(model.bias(0), p1 - update, 1e-15);
  EXPECT_EQ(opt.steps(), 2);
  EXPECT_EQ(opt.state()[0].step, 2);
  EXPECT_EQ(opt.state()[1].step, 2);
}

// AdamW's decay is decoupled: with a zero gradient m and v stay 0, the Adam update is 0 / eps =
// 0, and p only shrinks by (1 - lr wd), with this step's lr: exactly p * float(1 - lr wd).
TEST(OptimAdamByHand, AdamWWithZeroGradientOnlyDecays) {
  Pair model{Matrix(3, 4), RowVector(4)};
  model.weight << 1, -2, 3, -4, 0.5f, -0.25f, 10, -10, 1e-3f, 0, 7, -7;
  model.bias << 1, 2, -3, 4;
  const Pair zero = attn::zeros_like(model);
  Matrix expected_w = model.weight;
  RowVector expected_b = model.bias;
  Adam opt({.lr = 0.1, .eps = 1e-8, .weight_decay = 0.5, .decay = WeightDecay::decoupled});
  for (const double lr : {0.1, 0.2, 0.05}) {  // the lr of the step is the one used
    opt.set_lr(lr);
    opt.step(attn::parameters(model), attn::parameters(zero));
    expected_w *= float(1.0 - lr * 0.5);
    expected_b *= float(1.0 - lr * 0.5);
    EXPECT_TRUE(identical(model.weight, expected_w));
    EXPECT_TRUE(identical(model.bias, expected_b));
  }
  EXPECT_TRUE(identical(opt.state()[0].exp_avg, Matrix::Zero(3, 4).eval()));
}

// Adam's L2 decay goes through the moments instead: a zero gradient becomes g = wd p, and the
// first step moves every entry by lr sign(p), however small wd is, not by lr wd p.
TEST(OptimAdamByHand, L2DecayGoesThroughTheMoments) {
  Pair model{Matrix(1, 4), RowVector(4)};
  model.weight << 1, -2, 30, -0.5f;
  model.bias << 4, -4, 0.125f, -8;
  const Pair zero = attn::zeros_like(model);
  Adam opt({.lr = 0.01, .eps = 1e-9, .weight_decay = 1e-3});
  const Pair before = model;
  opt.step(attn::parameters(model), attn::parameters(zero));
  const Matrix expected = (before.weight.array() - 0.01f * before.weight.array().sign()).matrix();
  EXPECT_LT(attn::max_abs_diff(model.weight, expected), 4e-6);  // an ulp of 30 and lr eps / |g|
  EXPECT_GT((before.weight - model.weight).cwiseAbs().minCoeff(), 0.009f);
}

// ---- Adam's behaviour --------------------------------------------------------------------------

// With weight_decay 0 an entry whose gradient is always 0 has m = v = 0, so its update is
// (lr / bc1) 0 / (0 + eps) = 0: it does not move by a single bit, however many steps, under
// Adam and AdamW alike, while its neighbours move.
TEST(OptimAdamBehaviour, ZeroGradientEntryDoesNotMove) {
  for (const WeightDecay decay : {WeightDecay::l2, WeightDecay::decoupled}) {
    attn::Rng rng(7);
    Pair model{attn::random_normal(rng, 3, 4), RowVector(attn::random_normal(rng, 1, 4))};
    const Pair start = model;
    Pair grads = attn::zeros_like(model);
    Adam opt({.lr = 0.05, .betas = {0.9, 0.98}, .eps = 1e-9, .decay = decay});
    for (int t = 0; t < 6; ++t) {
      grads.weight = attn::random_normal(rng, 3, 4);
      grads.bias = RowVector(attn::random_normal(rng, 1, 4));
      grads.weight(1, 2) = 0.0f;
      grads.bias(3) = 0.0f;
      opt.step(attn::parameters(model), attn::parameters(grads));
    }
    EXPECT_EQ(model.weight(1, 2), start.weight(1, 2));
    EXPECT_EQ(model.bias(3), start.bias(3));
    EXPECT_NE(model.weight(1, 1), start.weight(1, 1));
    EXPECT_NE(model.bias(2), start.bias(2));
  }
}

// The state is per parameter: one Adam over a whole model takes exactly the steps that one Adam
// per tensor would, and each state entry has its tensor's key and shape.
TEST(OptimAdamBehaviour, StateIsPerParameter) {
  attn::Rng rng(11);
  attn::FeedForward model = attn::ffn_init(rng, 4, 6);
  attn::FeedForward alone = model;  // the same start, stepped one tensor at a time
  attn::FeedForward grads = attn::zeros_like(model);
  const AdamOptions options{.lr = 0.01,
                            .betas = {0.9, 0.98},
                            .eps = 1e-9,
                            .weight_decay = 0.01,
                            .decay = WeightDecay::decoupled};
  Adam all(options);
  std::vector<Adam> each(4, Adam(options));
  for (int t = 0; t < 4; ++t) {
    attn::for_each_parameter(grads, "", [&](const std::string&, auto& g, Index) {
      g = attn::random_normal(rng, g.rows(), g.cols());
    });
    grads.linear2.bias.setZero();  // one tensor with no gradient at all: its own state stays 0
    all.step(attn::parameters(model), attn::parameters(grads));
    const auto p = attn::parameters(alone);
    const auto g = attn::parameters(std::as_const(grads));  // a const holder works too
    for (std::size_t i = 0; i < 4; ++i) each[i].step({p[i]}, {g[i]});
  }
  EXPECT_TRUE(identical(model.linear1.weight, alone.linear1.weight));
  EXPECT_TRUE(identical(model.linear1.bias, alone.linear1.bias));
  EXPECT_TRUE(identical(model.linear2.weight, alone.linear2.weight));
  EXPECT_TRUE(identical(model.linear2.bias, alone.linear2.bias));
  const auto& state = all.state();
  ASSERT_EQ(state.size(), 4u);
  const char* keys[] = {"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"};
  const Index rows[] = {6, 1, 4, 1}, cols[] = {4, 6, 6, 4};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(state[i].key, keys[i]);
    EXPECT_EQ(state[i].exp_avg.rows(), rows[i]);
    EXPECT_EQ(state[i].exp_avg.cols(), cols[i]);
    EXPECT_EQ(state[i].step, 4);
    EXPECT_TRUE(identical(state[i].exp_avg, each[i].state()[0].exp_avg)) << keys[i];
    EXPECT_TRUE(identical(state[i].exp_avg_sq, each[i].state()[0].exp_avg_sq)) << keys[i];
  }
  EXPECT_EQ(state[3].exp_avg.cwiseAbs().maxCoeff(), 0.0f);
  EXPECT_GT(state[2].exp_avg.cwiseAbs().maxCoeff(), 0.0f);
}

// Adam's update and clipping's scaling are cut into chunks of entries that run on the threads.
// Against the same numbers stepped as one-row tensors (each row a single chunk, whatever the
// chunk size): a chunk that skipped, repeated or overran entries would change some row. And the
// thread count changes no bit. The weight holds 300 x 257 = 77,100 entries, several chunks with a
// ragged last one; the two small tensors run with it in one list.
TEST(OptimAdamBehaviour, ChunkedAcrossThreadsEqualsEntryByEntry) {
  constexpr Index R = 300, C = 257;
  attn::Rng rng(29);
  const Matrix start = attn::random_normal(rng, R, C);  // [R x C]
  const RowVector small_start = attn::random_normal(rng, 1, 5);
  std::vector<Matrix> grads_at;  // one gradient per step, large enough that clipping scales them
  for (int t = 0; t < 3; ++t) grads_at.push_back(attn::random_normal(rng, R, C) * 3.0f);
  const AdamOptions options{.lr = 0.01, .betas = {0.9, 0.98}, .eps = 1e-9, .weight_decay = 0.02};
  const auto run = [&](int threads, bool by_rows) {
    Matrix w = start, g(R, C);
    RowVector b = small_start, gb(5);
    std::vector<Parameter<float>> params, grads;
    if (by_rows) {
      for (Index r = 0; r < R; ++r) {
        params.emplace_back("w", Parameter<float>::View(w.row(r).data(), 1, C), r, false);
        grads.emplace_back("w", Parameter<float>::View(g.row(r).data(), 1, C), r, false);
      }
    } else {
      params.emplace_back("w", Parameter<float>::View(w.data(), R, C), 0, false);
      grads.emplace_back("w", Parameter<float>::View(g.data(), R, C), 0, false);
    }
    params.emplace_back("b", Parameter<float>::View(b.data(), 1, 5), 0, true);
    grads.emplace_back("b", Parameter<float>::View(gb.data(), 1, 5), 0, true);
    Adam adam(options);
    for (const Matrix& step_grad : grads_at) {
      g = step_grad;
      gb.setConstant(0.5f);
      attn::clip_grad_norm(grads, 1.0, by_rows ? 1 : threads);
      adam.step(params, grads, by_rows ? 1 : threads);
    }
    return std::pair{w, b};
  };
  const auto [w_rows, b_rows] = run(1, true);
  for (const int threads : {1, 2, 3}) {
    const auto [w, b] = run(threads, false);
    EXPECT_TRUE(identical(w, w_rows)) << threads << " threads";
    EXPECT_TRUE(identical(b, b_rows)) << threads << " threads";
  }
  EXPECT_FALSE(identical(w_rows, start));  // the steps moved the weight
  Pair model{Matrix::Ones(3, 4), RowVector::Ones(4)}, grads{Matrix::Ones(3, 4), RowVector::Ones(4)};
  const std::string m =
      message_of([&] { Adam().step(attn::parameters(model), attn::parameters(grads), -1); });
  EXPECT_NE(m.find("Adam::step: threads is -1"), std::string::npos) << m;
  const std::string c = message_of([&] { attn::clip_grad_norm(attn::parameters(grads), 1.0, -2); });
  EXPECT_NE(c.find("clip_grad_norm: threads is -2"), std::string::npos) << c;
}

TEST(OptimAdamBehaviour, MismatchedListsThrowNamingTheKey) {
  attn::Rng rng(3);
  attn::FeedForward model = attn::ffn_init(rng, 4, 6);
  attn::FeedForward grads = attn::zeros_like(model);
  grads.linear1.weight.setOnes();
  const attn::FeedForward start = model;
  Adam opt;

  // Out of order: the message names both keys and shapes. (Lists are reordered by copying the
  // views: assigning a Parameter would assign through its Map, copying one tensor into another.)
  const auto g = attn::parameters(grads);
  const std::vector<Parameter<float>> swapped{g[1], g[0], g[2], g[3]};
  std::string m = message_of([&] { opt.step(attn::parameters(model), swapped); });
  EXPECT_NE(m.find("Adam::step"), std::string::npos) << m;
  EXPECT_NE(m.find("\"linear1.bias\" [1 x 6]"), std::string::npos) << m;
  EXPECT_NE(m.find("\"linear1.weight\" [6 x 4]"), std::string::npos) << m;

  // The same shapes under other keys: a gradient holder walked with another prefix.
  m = message_of([&] { opt.step(attn::parameters(model), attn::parameters(grads, "ff.")); });
  EXPECT_NE(m.find("gradient 0 is \"ff.linear1.weight\" [6 x 4] but parameter 0 is "
                   "\"linear1.weight\" [6 x 4]"),
            std::string::npos)
      << m;

  // Too few gradients.
  const std::vector<Parameter<float>> fewer{g[0], g[1], g[2]};
  m = message_of([&] { opt.step(attn::parameters(model), fewer); });
  EXPECT_NE(m.find("4 parameters but 3 gradients"), std::string::npos) << m;

  // The same keys with other shapes: the gradients of another model.
  attn::FeedForward wider = attn::zeros_like(attn::ffn_init(rng, 4, 8));
  m = message_of([&] { opt.step(attn::parameters(model), attn::parameters(wider)); });
  EXPECT_NE(m.find("\"linear1.weight\" [8 x 4]"), std::string::npos) << m;

  // The model passed twice: the "gradients" would be the parameters themselves.
  m = message_of([&] { opt.step(attn::parameters(model), attn::parameters(model)); });
  EXPECT_NE(m.find("own memory"), std::string::npos) << m;

  // A refused step changes nothing: no parameter, no state, no step count.
  EXPECT_TRUE(identical(model.linear1.weight, start.linear1.weight));
  EXPECT_TRUE(opt.state().empty());
  EXPECT_EQ(opt.steps(), 0);

  // After a first step the list is fixed: another model's list is refused, naming the key.
  opt.step(attn::parameters(model), attn::parameters(grads));
  attn::Linear other = attn::linear_init(rng, 4, 6);
  attn::Linear other_grads = attn::zeros_like(other);
  m = message_of(
      [&] { opt.step(attn::parameters(other, "proj."), attn::parameters(other_grads, "proj.")); });
  EXPECT_NE(m.find("2 parameters, but the first step had 4"), std::string::npos) << m;
  attn::FeedForward renamed = model, renamed_grads = grads;
  m = message_of(
      [&] { opt.step(attn::parameters(renamed, "ff."), attn::parameters(renamed_grads, "ff.")); });
  EXPECT_NE(m.find("\"ff.linear1.weight\" [6 x 4] but it was \"linear1.weight\" [6 x 4]"),
            std::string::npos)
      << m;
  EXPECT_EQ(opt.steps(), 1);

  // A stacked in_proj_weight block is named with its first row.
  attn::MultiHeadAttention mha = attn::multi_head_init(rng, 4, 2);
  attn::MultiHeadAttention mha_grads = attn::zeros_like(mha);
  const auto b = attn::parameters(mha_grads);
  ASSERT_EQ(b.size(), 8u);
  const std::vector<Parameter<float>> blocks{b[0], b[2], b[1], b[3], b[4], b[5], b[6], b[7]};
  Adam opt2;
  m = message_of([&] { opt2.step(attn::parameters(mha), blocks); });
  EXPECT_NE(m.find("\"in_proj_weight\" (block from 8) [4 x 4] but parameter 1 is "
                   "\"in_proj_weight\" (block from 4) [4 x 4]"),
            std::string::npos)
      << m;
}

TEST(OptimAdamBehaviour, BadOptionsThrow) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    AdamOptions options;
    const char* named;
  };
  const Case cases[] = {
      {{.lr = -1e-3}, "lr is -0.001"},
      {{.lr = inf}, "lr is inf"},
      {{.lr = nan}, "lr is nan"},
      {{.betas = {1.0, 0.999}}, "beta1 is 1: it must be in [0, 1)"},
      {{.betas = {-0.1, 0.999}}, "beta1 is -0.1"},
      {{.betas = {0.9, 1.5}}, "beta2 is 1.5"},
      {{.betas = {0.9, nan}}, "beta2 is nan"},
      {{.eps = -1e-8}, "eps is -1e-08"},
      {{.eps = inf}, "eps is inf"},
      {{.weight_decay = -0.01}, "weight_decay is -0.01"},
      {{.weight_decay = nan}, "weight_decay is nan"},
  };
  for (const Case& c : cases) {
    const std::string m = message_of([&] { Adam opt(c.options); });
    EXPECT_NE(m.find("Adam: "), std::string::npos) << m;
    EXPECT_NE(m.find(c.named), std::string::npos) << m;
    EXPECT_NE(message_of([&] { AdamD opt(c.options); }), "(no exception)");
  }
  // The edges are allowed, as torch allows them.
  EXPECT_EQ(message_of([] {
              Adam opt({.lr = 0, .betas = {0, 0}, .eps = 0, .weight_decay = 0});
            }),
            "(no exception)");
  Adam opt;
  EXPECT_NE(message_of([&] { opt.set_lr(-1.0); }).find("Adam::set_lr: lr is -1"),
            std::string::npos);
  EXPECT_NE(message_of([&] { opt.set_lr(nan); }), "(no exception)");
  EXPECT_EQ(opt.lr(), 1e-3);  // refused: unchanged
  opt.set_lr(0.5);
  EXPECT_EQ(opt.lr(), 0.5);
  EXPECT_EQ(opt.options().betas.beta2, 0.999);  // torch's defaults
  EXPECT_EQ(opt.options().eps, 1e-8);
}

// ---- clip_grad_norm ----------------------------------------------------------------------------

// 3-4-5 across two tensors: the norm is over all gradients as one vector, and clipping to 1
// scales both by 1 / (5 + 1e-6), computed as torch does: reciprocal(5 + 1e-6) * 1 in float.
TEST(OptimClipGradNorm, TotalNormByHand) {
  Pair grads{Matrix::Zero(3, 4), RowVector::Zero(4)};
  grads.weight(2, 1) = 3.0f;
  grads.bias(0) = -4.0f;
  const float total = attn::clip_grad_norm(attn::parameters(grads), 1.0);
  EXPECT_EQ(total, 5.0f);
  const float coef = (1.0f / (5.0f + 1e-6f)) * 1.0f;
  EXPECT_EQ(grads.weight(2, 1), 3.0f * coef);
  EXPECT_EQ(grads.bias(0), -4.0f * coef);
  EXPECT_NEAR(grads.weight(2, 1), 0.6f, 1e-6f);
  EXPECT_EQ(grads.weight.cwiseAbs().sum(), grads.weight(2, 1));  // zeros stay zero
  // The clipped norm lands just below max_norm (the 1e-6), and clipping again is a no-op scale.
  const float again = attn::clip_grad_norm(attn::parameters(grads), 1.0);
  EXPECT_LE(again, 1.0f);
  EXPECT_GT(again, 1.0f - 1e-6f);

  // torch's coef is reciprocal(total + 1e-6) * max_norm, a tensor op: at max_norm 2.5 that is
  // 0.49999988f, one ulp below max_norm / (total + 1e-6) = 0.4999999f.
  Pair g25{Matrix::Zero(3, 4), RowVector::Zero(4)};
  g25.weight(0, 3) = 3.0f;
  g25.bias(2) = 4.0f;
  EXPECT_EQ(attn::clip_grad_norm(attn::parameters(g25), 2.5), 5.0f);
  const float reciprocal = (1.0f / (5.0f + 1e-6f)) * 2.5f, quotient = 2.5f / (5.0f + 1e-6f);
  ASSERT_NE(reciprocal, quotient);
  EXPECT_EQ(g25.weight(0, 3), 3.0f * reciprocal);
  EXPECT_EQ(g25.bias(2), 4.0f * reciprocal);
}

TEST(OptimClipGradNorm, NoChangeBelowMaxNorm) {
  attn::Rng rng(5);
  Pair grads{attn::random_normal(rng, 3, 4), RowVector(attn::random_normal(rng, 1, 4))};
  const Pair before = grads;
  const float total = attn::clip_grad_norm(attn::parameters(grads), 100.0);
  const double exact = std::sqrt(before.weight.cast<double>().squaredNorm() +
                                 before.bias.cast<double>().squaredNorm());
  EXPECT_EQ(total, float(exact));                       // rounded once from double
  EXPECT_TRUE(identical(grads.weight, before.weight));  // multiplied by exactly 1
  EXPECT_TRUE(identical(grads.bias, before.bias));
  // Equal to max_norm within the 1e-6: still (slightly) scaled, as in torch.
  Pair at = before;
  attn::clip_grad_norm(attn::parameters(at), double(total));
  EXPECT_FALSE(identical(at.weight, before.weight));
  EXPECT_LT(attn::max_abs_diff(at.weight, before.weight), 1e-6);
}

TEST(OptimClipGradNorm, NonFiniteNormIsReturnedAsIs) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Pair grads{Matrix::Ones(3, 4), RowVector::Ones(4)};
  grads.bias(1) = nan;
  EXPECT_TRUE(std::isnan(attn::clip_grad_norm(attn::parameters(grads), 1.0)));
  EXPECT_TRUE(grads.weight.array().isNaN().all());  // multiplied by a NaN coef, as torch does

  grads = {Matrix::Ones(3, 4), RowVector::Ones(4)};
  grads.weight(0, 0) = -inf;
  EXPECT_EQ(attn::clip_grad_norm(attn::parameters(grads), 1.0), inf);
  EXPECT_TRUE(std::isnan(grads.weight(0, 0)));  // inf * 0
  EXPECT_EQ(grads.weight(1, 1), 0.0f);          // coef = 1 / inf = 0
  EXPECT_EQ(grads.bias.cwiseAbs().maxCoeff(), 0.0f);
}

// Where this differs from torch on purpose: float gradients of 1e20 overflow torch's float32
// sum of squares (it returns inf and zeroes them); summed in double, the norm is finite.
TEST(OptimClipGradNorm, LargeGradientsDoNotOverflow) {
  Pair grads{Matrix::Constant(3, 4, 1e20f), RowVector::Constant(4, 1e20f)};
  const float total = attn::clip_grad_norm(attn::parameters(grads), 2.0);
  EXPECT_NEAR(total / 4e20f, 1.0f, 1e-6f);  // sqrt(16) 1e20
  EXPECT_NEAR(grads.weight(0, 0), 0.5f, 1e-6f);
}

TEST(OptimClipGradNorm, EdgesAndErrors) {
  EXPECT_EQ(attn::clip_grad_norm(std::vector<Parameter<float>>{}, 1.0), 0.0f);
  Pair grads{Matrix::Ones(3, 4), RowVector::Ones(4)};
  for (const double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()}) {
    const std::string m = message_of([&] { attn::clip_grad_norm(attn::parameters(grads), bad); });
    EXPECT_NE(m.find("clip_grad_norm: max_norm is"), std::string::npos) << m;
  }
  EXPECT_TRUE(identical(grads.weight, Matrix::Ones(3, 4).eval()));
  // double gradients: 3-4-5 again.
  PairD d{MatrixD::Zero(3, 4), attn::RowVectorD::Zero(4)};
  d.weight(0, 0) = 3.0;
  d.bias(3) = 4.0;
  EXPECT_EQ(attn::clip_grad_norm(attn::parameters(d), 0.5), 5.0);
  EXPECT_NEAR(d.bias(3), 0.4, 1e-6);  // 4 * 0.5 / (5 + 1e-6)
}

// ---- The schedules by hand ---------------------------------------------------------------------

TEST(OptimSchedules, InverseSqrtByHand) {
  // The paper's setting: d_model 512, warmup 4000. Peak at step 4000: 1 / sqrt(512 * 4000).
  const double peak = 1.0 / std::sqrt(512.0 * 4000.0);
  EXPECT_NEAR(attn::warmup_inverse_sqrt_lr(4000, 512, 4000), peak, 1e-18);
  EXPECT_NEAR(peak, 6.9877e-4, 1e-8);
  // Linear before the peak, 1 / sqrt(step) after it; factor scales it all.
  EXPECT_NEAR(attn::warmup_inverse_sqrt_lr(2, 512, 4000),
              2 * attn::warmup_inverse_sqrt_lr(1, 512, 4000), 1e-20);
  EXPECT_NEAR(attn::warmup_inverse_sqrt_lr(1000, 512, 4000), peak / 4, 1e-18);
  EXPECT_NEAR(attn::warmup_inverse_sqrt_lr(16000, 512, 4000), peak / 2, 1e-18);
  EXPECT_NEAR(attn::warmup_inverse_sqrt_lr(16000, 512, 4000, 2.0), peak, 1e-18);
  EXPECT_LT(attn::warmup_inverse_sqrt_lr(4001, 512, 4000), peak);
  EXPECT_LT(attn::warmup_inverse_sqrt_lr(3999, 512, 4000), peak);
}

TEST(OptimSchedules, WarmupCosineByHand) {
  // base 1e-3, warmup 4, total 12 (K = 8), min 1e-4.
  auto lr = [](std::int64_t s) { return attn::warmup_cosine_lr(s, 1e-3, 4, 12, 1e-4); };
  EXPECT_DOUBLE_EQ(lr(1), 2.5e-4);  // base_lr / warmup, not 0: the first step moves
  EXPECT_DOUBLE_EQ(lr(2), 5e-4);
  EXPECT_DOUBLE_EQ(lr(4), 1e-3);                 // the peak, at step = warmup
  EXPECT_LT(lr(5), 1e-3);                        // decaying from the next step on
  EXPECT_DOUBLE_EQ(lr(8), 0.5 * (1e-3 + 1e-4));  // k = K / 2: halfway
  EXPECT_DOUBLE_EQ(lr(6), 1e-4 + 0.9e-3 * (1 + std::sqrt(0.5)) / 2);  // cos(pi / 4)
  EXPECT_EQ(lr(12), 1e-4);                                            // min_lr at total_steps
  EXPECT_EQ(lr(13), 1e-4);  // and held (torch's cosine climbs)
  EXPECT_EQ(lr(1000), 1e-4);
  // warmup = 1: the first step at base_lr; warmup = total: no decay, then min_lr.
  EXPECT_EQ(attn::warmup_cosine_lr(1, 1e-3, 1, 10), 1e-3);
  EXPECT_EQ(attn::warmup_cosine_lr(10, 1e-3, 1, 10), 0.0);
  EXPECT_EQ(attn::warmup_cosine_lr(5, 1e-3, 5, 5, 1e-5), 1e-3);
  EXPECT_EQ(attn::warmup_cosine_lr(6, 1e-3, 5, 5, 1e-5), 1e-5);
}

TEST(OptimSchedules, BadArgumentsThrow) {
  auto named = [](auto&& f, const char* what) {
    const std::string m = message_of(f);
    EXPECT_NE(m.find(what), std::string::npos) << m;
  };
  named([] { attn::warmup_inverse_sqrt_lr(0, 512, 4000); }, "warmup_inverse_sqrt_lr: step is 0");
  named([] { attn::warmup_inverse_sqrt_lr(1, 0, 4000); }, "d_model is 0");
  named([] { attn::warmup_inverse_sqrt_lr(1, 512, 0); }, "warmup is 0");
  named([] { attn::warmup_inverse_sqrt_lr(1, 512, 10, 0.0); }, "factor is 0");
  named([] { attn::warmup_inverse_sqrt_lr(1, 512, 10, -1.0); }, "factor is -1");
  named([] { attn::warmup_cosine_lr(0, 1e-3, 5, 20); }, "warmup_cosine_lr: step is 0");
  named([] { attn::warmup_cosine_lr(1, 1e-3, 0, 20); }, "warmup is 0 and total_steps 20");
  named([] { attn::warmup_cosine_lr(1, 1e-3, 21, 20); }, "warmup is 21 and total_steps 20");
  named([] { attn::warmup_cosine_lr(1, 1e-3, 5, 20, 2e-3); }, "0 <= min_lr <= base_lr");
  named([] { attn::warmup_cosine_lr(1, -1e-3, 5, 20, -2e-3); }, "0 <= min_lr <= base_lr");
  named([] { attn::warmup_cosine_lr(1, std::numeric_limits<double>::infinity(), 5, 20); },
        "base_lr is inf");
}

// ---- Saving and restoring the state (a checkpoint between two steps) ----------------------------

// The gradient of step `t`: different every step, with entries of both signs and sizes.
Pair gradient_of_step(int t) {
  Pair g{Matrix(3, 4), RowVector(4)};
  for (Index i = 0; i < 12; ++i) {
    g.weight(i / 4, i % 4) = static_cast<float>(std::sin(0.7 * t + 1.3 * static_cast<double>(i)));
  }
  for (Index i = 0; i < 4; ++i) g.bias(i) = static_cast<float>(std::cos(0.3 * t * (i + 1)));
  return g;
}

TEST(AdamRestore, SavingAndRestoringBetweenStepsChangesNoBit) {
  const AdamOptions options{.lr = 0.01,
                            .betas = {0.9, 0.98},
                            .eps = 1e-9,
                            .weight_decay = 0.1,
                            .decay = WeightDecay::decoupled};
  const Pair start{Matrix::Constant(3, 4, 0.5f), RowVector::Constant(4, -0.25f)};
  Pair straight = start;  // 10 steps in one optimiser
  Adam one(options);
  for (int t = 1; t <= 10; ++t) {
    const Pair g = gradient_of_step(t);
    one.step(attn::parameters(straight), attn::parameters(g));
  }
  Pair resumed = start;  // 5 steps, the state copied out, 5 steps in a new optimiser
  std::vector<attn::AdamStateOf<float>> saved;
  {
    Adam first(options);
    for (int t = 1; t <= 5; ++t) {
      const Pair g = gradient_of_step(t);
      first.step(attn::parameters(resumed), attn::parameters(g));
    }
    saved = first.state();
  }
  Adam second(options);
  second.restore(saved);
  EXPECT_EQ(second.steps(), 5);
  for (int t = 6; t <= 10; ++t) {
    const Pair g = gradient_of_step(t);
    second.step(attn::parameters(resumed), attn::parameters(g));
  }
  EXPECT_TRUE(identical(resumed.weight, straight.weight));
  EXPECT_TRUE(identical(resumed.bias, straight.bias));
  // Without the state the second half is another run: the check above can fail.
  Pair restarted = start;
  {
    Adam first(options), fresh(options);
    for (int t = 1; t <= 10; ++t) {
      const Pair g = gradient_of_step(t);
      (t <= 5 ? first : fresh).step(attn::parameters(restarted), attn::parameters(g));
    }
  }
  EXPECT_FALSE(identical(restarted.weight, straight.weight));
}

TEST(AdamRestore, AStateNoRunOfAdamMakesIsRefusedAndChangesNothing) {
  Pair model{Matrix::Zero(3, 4), RowVector::Zero(4)};
  Adam opt({.lr = 0.01});
  const Pair g = gradient_of_step(1);
  opt.step(attn::parameters(model), attn::parameters(g));
  const std::vector<attn::AdamStateOf<float>> good = opt.state();
  const auto refused = [&](std::vector<attn::AdamStateOf<float>> bad, const std::string& says) {
    Adam fresh({.lr = 0.01});
    const std::string m = message_of([&] { fresh.restore(std::move(bad)); });
    EXPECT_NE(m.find("Adam::restore"), std::string::npos) << m;
    EXPECT_NE(m.find(says), std::string::npos) << m;
    EXPECT_EQ(fresh.steps(), 0);
    EXPECT_TRUE(fresh.state().empty());
  };
  auto counts = good;
  counts[1].step = 2;
  refused(counts, "the same count");
  auto zero = good;
  for (auto& s : zero) s.step = 0;
  refused(zero, "at least 1");
  auto negative = good;
  negative[0].exp_avg_sq(0, 0) = -1.0f;
  refused(negative, "negative");
  auto nan = good;
  nan[1].exp_avg(0, 2) = std::numeric_limits<float>::quiet_NaN();
  refused(nan, "not finite");
  auto shape = good;
  shape[0].exp_avg_sq = Matrix::Zero(4, 3);
  refused(shape, "both moments have the parameter's shape");
}

TEST(AdamRestore, TheNextStepChecksItsListAgainstTheRestoredState) {
  Pair model{Matrix::Zero(3, 4), RowVector::Zero(4)};
  Adam opt({.lr = 0.01});
  const Pair g = gradient_of_step(1);
  opt.step(attn::parameters(model), attn::parameters(g));
  std::vector<attn::AdamStateOf<float>> saved = opt.state();
  saved[0].key = "other.weight";
  Adam resumed({.lr = 0.01});
  resumed.restore(saved);
  const std::string m =
      message_of([&] { resumed.step(attn::parameters(model), attn::parameters(g)); });
  EXPECT_NE(m.find("an optimiser's state belongs to one model"), std::string::npos) << m;
}

TEST(OptimAdamBehaviour, AGradientInAnotherParametersMemoryIsRefused) {
  // Only gradient i against parameter i was compared: a gradient list that viewed another
  // parameter's memory (same shapes, keys in order) stepped, moving the gradient it still had
  // to read. Every gradient is compared with every parameter now.
  attn::Rng rng(41);
  attn::FeedForward model = attn::ffn_init(rng, 4, 6);  // linear1.weight [6 x 4], linear2 [4 x 6]
  const attn::FeedForward start = model;
  attn::FeedForward grads = attn::zeros_like(model);
  const std::vector<Parameter<float>> g = attn::parameters(grads);
  const std::vector<Parameter<float>> crossed{
      g[0], g[1], Parameter<float>(g[2].key, {model.linear1.weight.data(), 4, 6}, 0, false), g[3]};
  Adam opt;
  const std::string m = message_of([&] { opt.step(attn::parameters(model), crossed); });
  EXPECT_EQ(m, "Adam::step: gradient 2 \"linear2.weight\" [4 x 6] is memory of parameter 0 "
               "\"linear1.weight\" [6 x 4]: pass attn::parameters(grads), not the model twice");
  EXPECT_TRUE(identical(model.linear1.weight, start.linear1.weight));
  EXPECT_TRUE(identical(model.linear2.weight, start.linear2.weight));
  EXPECT_EQ(opt.steps(), 0);
}

}  // namespace test_optim
