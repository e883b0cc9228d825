// layer_norm.hpp: nn.LayerNorm forward by hand and against PyTorch (tests/data/multi_head/ln_*),
// its cache, its eps, and its backward against PyTorch's autograd, accumulating (+=) and
// refusing wrong shapes (backward_fixture.hpp says where each expected value comes from).
#include "attn/core/random.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/parameters.hpp"
#include "course/npy.hpp"

#include "backward_fixture.hpp"
#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace test_layer_norm {

using attn_test::Comparison;
using attn_test::Fixture;
using attn_test::identical;
using attn_test::message_of;
using attn_test::names;
using attn_test::untouched;

using attn::Index;
using attn::Matrix;
using attn::RowVector;

TEST(LayerNorm, HandComputed) {
  // x = (1, 2, 3, 4): mean 2.5, biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
  attn::LayerNorm ln = attn::layer_norm_init(4);
  Matrix x(2, 4);
  x << 1, 2, 3, 4,  //
      7, 7, 7, 7;   // a constant row: variance 0, eps keeps it finite, y = beta
  ln.beta << 0.5f, 0, 0, -0.5f;
  const Matrix y = attn::layer_norm_forward(ln, x);
  const double s = std::sqrt(1.25 + 1e-5);
  EXPECT_FLOAT_EQ(y(0, 0), static_cast<float>(-1.5 / s + 0.5));
  EXPECT_FLOAT_EQ(y(0, 1), static_cast<float>(-0.5 / s));
  EXPECT_FLOAT_EQ(y(0, 3), static_cast<float>(1.5 / s - 0.5));
  for (Index c = 0; c < 4; ++c) EXPECT_EQ(y(1, c), ln.beta(c));
  // With the unbiased variance (1/(d-1)) y(0, 0) would be -1.5 / sqrt(5/3): a 13% difference.
  EXPECT_GT(std::abs(y(0, 0) - static_cast<float>(-1.5 / std::sqrt(5.0 / 3.0) + 0.5)), 0.1f);
}

TEST(LayerNorm, CacheKeepsEachRowsMeanAndRstd) {
  // The same two rows as above: mean 2.5 and biased variance 1.25; a constant row, variance 0.
  // eps is the float 1e-5f, widened exactly to double inside the root.
  const attn::LayerNorm ln = attn::layer_norm_init(4);
  Matrix x(2, 4);
  x << 1, 2, 3, 4,  //
      7, 7, 7, 7;
  attn::LayerNormCache cache;
  const Matrix y = attn::layer_norm_forward(ln, x, &cache);
  const double eps = static_cast<double>(1e-5f);
  ASSERT_EQ(cache.mean.size(), 2);
  ASSERT_EQ(cache.rstd.size(), 2);
  EXPECT_EQ(cache.mean(0), 2.5);  // 10 / 4: exact
  EXPECT_EQ(cache.mean(1), 7.0);
  // 1 / sqrt(v + eps) in double: the same operations, so equal to the last bit.
  EXPECT_EQ(cache.rstd(0), 1.0 / std::sqrt(1.25 + eps));
  EXPECT_EQ(cache.rstd(1), 1.0 / std::sqrt(0.0 + eps));
  EXPECT_TRUE(identical(y, attn::layer_norm_forward(ln, x)));  // the cache changes nothing
}

// Issue 11: eps = 0 was accepted (PyTorch accepts it too), and a constant row then computed
// (x - mean) / sqrt(0 + 0) = 0 / 0 = NaN. The course requires eps > 0 and finite.
TEST(LayerNorm, EpsMustBeFiniteAndPositive) {
  Matrix x(1, 4);
  x << 7, 7, 7, 7;
  attn::LayerNorm ln = attn::layer_norm_init(4);
  for (float eps : {0.0f, -0.0f, -1e-5f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    ln.eps = eps;
    EXPECT_EQ(message_of([&] { attn::layer_norm_forward(ln, x); }),
              "layer_norm_forward: eps must be finite and > 0 (with eps = 0 a constant row "
              "would divide 0 by 0)")
        << eps;
  }
  // The smallest positive eps is enough: x - mean is exactly 0 here (28 / 4 = 7 exactly), and
  // 0 times 1 / sqrt(1.4e-45) (~2.7e22, finite) is 0, so y is beta exactly.
  ln.eps = std::numeric_limits<float>::denorm_min();
  ln.beta << 1, 2, 3, 4;
  EXPECT_TRUE(identical(attn::layer_norm_forward(ln, x), Matrix(ln.beta)));
}

TEST(LayerNorm, MatchesTorchLayerNorm) {
  for (const std::string c : {"small", "shifted"}) {
    const auto load = [&](const std::string& what) {
      return course::read_npy(attn_test::fixture("multi_head", "ln_" + c + "_" + what + ".npy"))
          .to_matrix();
    };
    attn::LayerNorm ln{RowVector(load("weight")), RowVector(load("bias")), 1e-5f};
    const Matrix y = attn::layer_norm_forward(ln, load("x"));
    // Outputs are O(1); PyTorch's float32 statistics were within 3e-7 of float64 (fixture
    // script), ours are double: 1e-5 is generous for both, and far below any formula error
    // (an unbiased variance or eps outside the root moves outputs by > 1e-3 here).
    EXPECT_LT((y - load("y")).cwiseAbs().maxCoeff(), 1e-5f) << c;
  }
}

TEST(LayerNormBackward, MatchesTorch) {
  Comparison c("layer_norm");
  const Fixture& fx = c.fixture();
  const attn::LayerNorm norm = fx.norm("");
  const Matrix x = fx.matrix("x");
  attn::LayerNormCache cache;
  c.check("out", attn::layer_norm_forward(norm, x, &cache));
  attn::LayerNorm grads = attn::zeros_like(norm);
  c.check("d_x", attn::layer_norm_backward(norm, x, cache, fx.matrix("dy"), grads));
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

TEST(LayerNormBackward, AccumulatingTwiceDoublesToRoundOff) {
  attn::Rng rng(12);
  const Matrix x = attn::random_normal(rng, 6, 16, 1.0, 2.0), dy = attn::random_normal(rng, 6, 16);
  attn::LayerNorm norm = attn::layer_norm_init(16);
  norm.gamma = attn::random_normal(rng, 1, 16, 1.0, 0.3);
  attn::LayerNormCache cache;
  attn::layer_norm_forward(norm, x, &cache);
  attn::LayerNorm once = attn::zeros_like(norm), again = attn::zeros_like(norm);
  attn::layer_norm_backward(norm, x, cache, dy, once);
  attn::layer_norm_backward(norm, x, cache, dy, again);
  attn::layer_norm_backward(norm, x, cache, dy, again);
  attn_test::expect_doubled_to_round_off(once, again);
}

TEST(LayerNormBackward, RejectsWrongShapes) {
  attn::Rng rng(32);
  const attn::LayerNorm norm = attn::layer_norm_init(8);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 8);
  attn::LayerNormCache cache, other;
  attn::layer_norm_forward(norm, x, &cache);
  attn::layer_norm_forward(norm, Matrix(attn::random_normal(rng, 3, 8)), &other);
  attn::LayerNorm grads = attn::zeros_like(norm);
  EXPECT_TRUE(
      names(message_of([&] { attn::layer_norm_backward(norm, x, cache, Matrix(5, 7), grads); }),
            "layer_norm_backward"));
  EXPECT_TRUE(names(message_of([&] { attn::layer_norm_backward(norm, x, other, dy, grads); }),
                    "layer_norm_backward"));  // the cache of another input
  attn::LayerNorm wrong = attn::zeros_like(attn::layer_norm_init(7));
  EXPECT_TRUE(names(message_of([&] { attn::layer_norm_backward(norm, x, cache, dy, wrong); }),
                    "layer_norm_backward"));
  EXPECT_TRUE(untouched(grads));
}

TEST(LayerNormBackward, RejectsTheNormAsItsOwnGradients) {
  // layer_norm_backward(norm, x, cache, dy, norm) accumulated into gamma while later rows still
  // read it: a wrong dx and a changed norm. Refused now, before any row.
  attn::Rng rng(34);
  attn::LayerNorm norm = attn::layer_norm_init(4);
  const Matrix x = attn::random_normal(rng, 3, 4), dy = attn::random_normal(rng, 3, 4);
  attn::LayerNormCache cache;
  attn::layer_norm_forward(norm, x, &cache);
  const std::string m = message_of([&] { attn::layer_norm_backward(norm, x, cache, dy, norm); });
  EXPECT_EQ(m.rfind("layer_norm_backward: grads.gamma shares memory with the layer's gamma", 0), 0u)
      << m;
  EXPECT_TRUE((norm.gamma.array() == 1.0f).all() && (norm.beta.array() == 0.0f).all());
  EXPECT_EQ(message_of([] { attn::layer_norm_init(Index{1} << 62); })
                .rfind("layer_norm_init: d 4611686018427387904 needs 32.0 EiB of parameters (more "
                       "elements than an Index can count)",
                       0),
            0u);
}

}  // namespace test_layer_norm
