// feed_forward.hpp: the position-wise FFN, relu(x W1^T + b1) W2^T + b2, forward by hand, and
// its backward against PyTorch's autograd, accumulating (+=) and refusing wrong shapes
// (backward_fixture.hpp says where each expected value comes from).
#include "attn/core/random.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/parameters.hpp"

#include "backward_fixture.hpp"
#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

namespace test_feed_forward {

using attn_test::Comparison;
using attn_test::Fixture;
using attn_test::identical;
using attn_test::message_of;
using attn_test::names;
using attn_test::untouched;

using attn::Matrix;
using attn::RowVector;

TEST(FeedForward, HandComputedAndPositionWise) {
  attn::FeedForward ff{{Matrix(3, 2), RowVector(3)}, {Matrix(2, 3), RowVector(2)}};
  ff.linear1.weight << 1, 0,  //
      0, 1,                   //
      1, 1;
  ff.linear1.bias << 0, -1, -10;
  ff.linear2.weight << 1, 1, 1,  //
      0, 2, 0;
  ff.linear2.bias << 0.5f, 0;
  Matrix x(2, 2);
  x << 2, 3,  //
      -1, 0.5f;
  // Row 0: hidden = relu(2, 2, -5) = (2, 2, 0): out = (4.5, 4). Row 1: relu(-1, -0.5, -10.5) = 0:
  // out = b_2 = (0.5, 0). Each row on its own: position-wise.
  const Matrix y = attn::ffn_forward(ff, x);
  EXPECT_EQ(y(0, 0), 4.5f);
  EXPECT_EQ(y(0, 1), 4.0f);
  EXPECT_EQ(y(1, 0), 0.5f);
  EXPECT_EQ(y(1, 1), 0.0f);
  EXPECT_TRUE(identical(attn::ffn_forward(ff, x.bottomRows(1)), y.bottomRows(1)));
  // The cache: the ReLU's input and output, what ffn_backward will need.
  attn::FeedForwardCache c;
  EXPECT_TRUE(identical(attn::ffn_forward(ff, x, &c), y));
  Matrix pre(2, 3), hidden(2, 3);
  pre << 2, 2, -5,  //
      -1, -0.5f, -10.5f;
  hidden << 2, 2, 0,  //
      0, 0, 0;
  EXPECT_TRUE(identical(c.pre_activation, pre));
  EXPECT_TRUE(identical(c.hidden, hidden));
}

TEST(FeedForwardBackward, MatchesTorch) {
  Comparison c("ffn");
  const Fixture& fx = c.fixture();
  const attn::FeedForward ff = fx.ff();
  const Matrix x = fx.matrix("x");
  attn::FeedForwardCache cache;
  c.check("out", attn::ffn_forward(ff, x, &cache));
  attn::FeedForward grads = attn::zeros_like(ff);
  c.check("d_x", attn::ffn_backward(ff, x, cache, fx.matrix("dy"), grads));
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

TEST(FeedForwardBackward, AccumulatingTwiceDoublesExactly) {
  attn::Rng rng(13);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 8);
  const attn::FeedForward ff = attn::ffn_init(rng, 8, 16);
  attn::FeedForwardCache cache;
  attn::ffn_forward(ff, x, &cache);
  attn_test::expect_accumulates_exactly(
      [&](attn::FeedForward& g) { attn::ffn_backward(ff, x, cache, dy, g); }, ff);
}

TEST(FeedForwardBackward, RejectsWrongShapes) {
  attn::Rng rng(33);
  const attn::FeedForward ff = attn::ffn_init(rng, 8, 16);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 8);
  attn::FeedForwardCache cache, other;
  attn::ffn_forward(ff, x, &cache);
  attn::ffn_forward(ff, Matrix(attn::random_normal(rng, 3, 8)), &other);
  attn::FeedForward grads = attn::zeros_like(ff);
  EXPECT_TRUE(names(message_of([&] { attn::ffn_backward(ff, x, cache, Matrix(5, 7), grads); }),
                    "ffn_backward"));  // dy of the wrong width
  EXPECT_TRUE(names(message_of([&] { attn::ffn_backward(ff, x, cache, Matrix(4, 8), grads); }),
                    "ffn_backward"));  // dy of another n
  EXPECT_TRUE(names(message_of([&] { attn::ffn_backward(ff, x, other, dy, grads); }),
                    "ffn_backward"));  // the cache of another input
  EXPECT_TRUE(untouched(grads));
  attn::FeedForward wrong = attn::zeros_like(ff);
  wrong.linear1.weight.resize(16, 7);  // linear1's gradient of the wrong shape, linear2's fine
  EXPECT_TRUE(
      names(message_of([&] { attn::ffn_backward(ff, x, cache, dy, wrong); }), "ffn_backward"));
  EXPECT_TRUE((wrong.linear2.weight.array() == 0).all() && (wrong.linear2.bias.array() == 0).all())
      << "ffn_backward accumulated into linear2's gradients before it threw";
}

}  // namespace test_feed_forward
