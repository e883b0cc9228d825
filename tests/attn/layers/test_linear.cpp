// linear.hpp: y = x W^T + b (nn.Linear) forward by hand, and its backward against PyTorch's
// autograd, by hand, accumulating (+=) and refusing wrong shapes (backward_fixture.hpp says
// where each expected value comes from).
#include "attn/core/random.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/parameters.hpp"

#include "backward_fixture.hpp"
#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <string>

namespace test_linear {

using attn_test::Comparison;
using attn_test::Fixture;
using attn_test::mat;
using attn_test::message_of;
using attn_test::names;
using attn_test::untouched;

using attn::Index;
using attn::Matrix;
using attn::RowVector;

template <typename T>
class LinearBackwardByHand : public ::testing::Test {};
TYPED_TEST_SUITE(LinearBackwardByHand, attn_test::Reals);

TEST(Linear, HandComputed) {
  attn::Linear l{Matrix(2, 3), RowVector(2)};
  l.weight << 1, 0, -1,  //
      2, 1, 0;
  l.bias << 0.5f, -1;
  Matrix x(1, 3);
  x << 3, 4, 5;
  const Matrix y = attn::linear_forward(l, x);  // x W^T + b = (3 - 5 + 0.5, 6 + 4 - 1)
  EXPECT_EQ(y(0, 0), -1.5f);
  EXPECT_EQ(y(0, 1), 9.0f);
}

TEST(LinearBackward, MatchesTorch) {
  Comparison c("linear");
  const Fixture& fx = c.fixture();
  const attn::Linear layer{fx.matrix("weight"), fx.row("bias")};
  const Matrix x = fx.matrix("x"), dy = fx.matrix("dy");
  c.check("out", attn::linear_forward(layer, x));
  attn::Linear grads = attn::zeros_like(layer);
  c.check("d_x", attn::linear_backward(layer, x, dy, grads));
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

TYPED_TEST(LinearBackwardByHand, TwoByTwo) {
  using T = TypeParam;
  // y = x W^T + b with W = [[1, 2], [3, 4]], b = [0.5, -1], x = [[1, 2], [3, -1]],
  // dy = [[1, 2], [0, -1]]:
  //   dx = dy W      = [[1*1 + 2*3, 1*2 + 2*4], [0*1 - 1*3, 0*2 - 1*4]] = [[7, 10], [-3, -4]]
  //   dW = dy^T x    = [[1*1 + 0*3, 1*2 + 0*(-1)], [2*1 - 1*3, 2*2 - 1*(-1)]] = [[1, 2], [-1, 5]]
  //   db = colsum dy = [1 + 0, 2 - 1] = [1, 1]
  // Small integers: exact in float and double, so compared with ==.
  const attn::LinearOf<T> layer{mat<T>({{1, 2}, {3, 4}}), mat<T>({{0.5, -1}})};
  const attn::MatrixOf<T> x = mat<T>({{1, 2}, {3, -1}}), dy = mat<T>({{1, 2}, {0, -1}});
  attn::LinearOf<T> grads = attn::zeros_like(layer);
  const attn::MatrixOf<T> dx = attn::linear_backward(layer, x, dy, grads);
  EXPECT_EQ(dx, (mat<T>({{7, 10}, {-3, -4}})));
  EXPECT_EQ(grads.weight, (mat<T>({{1, 2}, {-1, 5}})));
  EXPECT_EQ(attn::MatrixOf<T>(grads.bias), (mat<T>({{1, 1}})));
}

TEST(LinearBackward, AccumulatingTwiceDoublesExactly) {
  attn::Rng rng(11);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 4);
  const attn::Linear lin = attn::linear_init(rng, 8, 4);
  attn_test::expect_accumulates_exactly(
      [&](attn::Linear& g) { attn::linear_backward(lin, x, dy, g); }, lin);
}

TEST(LinearBackward, RejectsWrongShapes) {
  attn::Rng rng(31);
  const attn::Linear layer = attn::linear_init(rng, 6, 4);
  const Matrix x = attn::random_normal(rng, 5, 6), dy = attn::random_normal(rng, 5, 4);
  attn::Linear grads = attn::zeros_like(layer);
  EXPECT_TRUE(names(message_of([&] { attn::linear_backward(layer, x, Matrix(5, 3), grads); }),
                    "linear_backward"));  // dy [n x out] with the wrong out
  EXPECT_TRUE(names(message_of([&] { attn::linear_backward(layer, x, Matrix(4, 4), grads); }),
                    "linear_backward"));  // dy of another n
  EXPECT_TRUE(names(message_of([&] { attn::linear_backward(layer, Matrix(5, 5), dy, grads); }),
                    "linear_backward"));  // x of the wrong width
  attn::Linear wrong = attn::zeros_like(attn::linear_init(rng, 6, 3));
  EXPECT_TRUE(names(message_of([&] { attn::linear_backward(layer, x, dy, wrong); }),
                    "linear_backward"));  // grads of another layer
  attn::Linear empty;
  EXPECT_TRUE(names(message_of([&] { attn::linear_backward(layer, x, dy, empty); }),
                    "linear_backward"));  // grads not from zeros_like at all
  EXPECT_TRUE(untouched(grads));
}

// ---- The layer as its own gradients, and sizes the machine cannot hold (issue 26) ---------------

TEST(LinearBackward, RejectsGradientsThatShareMemoryWithTheLayerOrTheInputs) {
  // linear_backward(layer, x, dy, layer) added dy^T x into the weight, then computed dx from
  // that weight: a wrong dx and a changed layer, returned normally.
  attn::Rng rng(32);
  attn::Linear layer = attn::linear_init(rng, 4, 4);
  const attn::Linear before = layer;
  const Matrix x = attn::random_normal(rng, 3, 4), dy = attn::random_normal(rng, 3, 4);
  EXPECT_EQ(message_of([&] { attn::linear_backward(layer, x, dy, layer); }),
            "linear_backward: grads.weight shares memory with the layer's weight: an output must "
            "not alias an input (it would be overwritten or reallocated while still being read); "
            "pass a separate result");
  attn::Linear grads = attn::zeros_like(layer);
  EXPECT_TRUE(
      names(message_of([&] { attn::linear_backward(layer, grads.weight.topRows(3), dy, grads); }),
            "linear_backward"));  // x inside the gradient it accumulates into
  EXPECT_TRUE(untouched(grads));
  EXPECT_EQ(layer.weight, before.weight);
  EXPECT_EQ(layer.bias, before.bias);
}

TEST(LinearInit, SizesTheMachineCannotHoldAreNamedBeforeAllocating) {
  attn::Rng rng(33);
  const std::string m = message_of([&] { attn::linear_init(rng, Index{1} << 20, Index{1} << 20); });
  EXPECT_EQ(m.rfind("linear_init: in_features 1048576 and out_features 1048576 needs 4.0 TiB of "
                    "parameters; this machine has ",
                    0),
            0u)
      << m;
}

}  // namespace test_linear
