// loss.hpp: cross_entropy (F.cross_entropy with ignore_index and label_smoothing) and its
// gradient, against PyTorch's autograd, by hand, with an ignored row that changes nothing, and
// its errors (backward_fixture.hpp says where each expected value comes from).
#include "attn/core/random.hpp"
#include "attn/ops/loss.hpp"

#include "backward_fixture.hpp"
#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace test_loss {

using attn_test::all_zero;
using attn_test::Comparison;
using attn_test::Fixture;
using attn_test::identical;
using attn_test::mat;
using attn_test::message_of;
using attn_test::names;

using attn::Matrix;

template <typename T>
class CrossEntropyBackwardByHand : public ::testing::Test {};
TYPED_TEST_SUITE(CrossEntropyBackwardByHand, attn_test::Reals);

// A fixture case: its file prefix and its label smoothing. Printed by name, so that a test's
// name and ctest's listing of it are the same in every build (not a pointer's address).
struct XentCase {
  const char* name;
  double smoothing;
};
void PrintTo(const XentCase& c, std::ostream* os) { *os << c.name; }

class BackwardCrossEntropyFixture : public ::testing::TestWithParam<XentCase> {};

TEST_P(BackwardCrossEntropyFixture, MatchesTorchCrossEntropy) {
  // F.cross_entropy(logits [7 x 11], targets, ignore_index=0, label_smoothing), mean
  // reduction; targets hold the ignore id 0 twice.
  const auto [name, smoothing] = GetParam();
  Comparison c(name);
  const Fixture& fx = c.fixture();
  const std::vector<int> targets = fx.ints("targets");
  const attn::CrossEntropy r = attn::cross_entropy(
      fx.matrix("logits"), targets, {.ignore_index = 0, .label_smoothing = smoothing});
  EXPECT_EQ(r.count, 5);  // 7 rows, 2 ignored
  c.check("loss", Matrix::Constant(1, 1, r.loss));
  c.check("d_logits", r.d_logits);
  c.expect_every_gradient_compared();
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardCrossEntropyFixture,
                         ::testing::Values(XentCase{"xent_plain", 0.0},
                                           XentCase{"xent_smooth", 0.1}),
                         [](const auto& info) { return std::string(info.param.name); });

TYPED_TEST(CrossEntropyBackwardByHand, OneRow) {
  using T = TypeParam;
  // V = 3 classes, logits z = [0, 0, ln 2], target 2: softmax = [1, 1, 2] / 4 = [1/4, 1/4, 1/2].
  //   no smoothing:  loss = -log p_2 = ln 2;   d = p - onehot(2) = [1/4, 1/4, -1/2]
  //   smoothing 0.3 (eps / V = 0.1):
  //     loss = 0.7 (-log 1/2) + 0.1 (-log 1/4 - log 1/4 - log 1/2)
  //          = 0.7 ln 2 + 0.1 (2 + 2 + 1) ln 2 = 1.2 ln 2
  //     d = p - 0.7 onehot(2) - 0.1 = [0.15, 0.15, 0.5 - 0.7 - 0.1] = [0.15, 0.15, -0.3]
  // One counted row: the mean divides by 1. ln 2 rounded to T is the only inexact input, and
  // the sums run in double: 1e-6 (float) / 1e-14 (double).
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  const double ln2 = std::log(2.0);
  const attn::MatrixOf<T> z = mat<T>({{0, 0, static_cast<T>(ln2)}});
  const std::vector<int> target{2};
  const auto plain = attn::cross_entropy(z, target);
  EXPECT_EQ(plain.count, 1);
  EXPECT_NEAR(plain.loss, ln2, tol);
  EXPECT_NEAR(plain.d_logits(0, 0), 0.25, tol);
  EXPECT_NEAR(plain.d_logits(0, 1), 0.25, tol);
  EXPECT_NEAR(plain.d_logits(0, 2), -0.5, tol);
  const auto smooth = attn::cross_entropy(z, target, {.label_smoothing = 0.3});
  EXPECT_NEAR(smooth.loss, 1.2 * ln2, tol);
  EXPECT_NEAR(smooth.d_logits(0, 0), 0.15, tol);
  EXPECT_NEAR(smooth.d_logits(0, 1), 0.15, tol);
  EXPECT_NEAR(smooth.d_logits(0, 2), -0.3, tol);
  // The prediction is the argmax: class 2 here, the target, so the row is correct. On a tie the
  // first largest logit is the prediction: z = [1, 1, 0] predicts class 0, so target 1 is wrong.
  EXPECT_EQ(plain.correct, 1);
  const attn::MatrixOf<T> tie = mat<T>({{1, 1, 0}});
  EXPECT_EQ(attn::cross_entropy(tie, std::vector<int>{1}).correct, 0);
  EXPECT_EQ(attn::cross_entropy(tie, std::vector<int>{0}).correct, 1);
}

TEST(CrossEntropyBackward, IgnoredRowChangesNothing) {
  // targets with the ignore id 0 at row 2: that row's logits (changed to anything, even huge,
  // infinite or NaN: the row is never read) change neither the loss, nor the count, nor any
  // entry of d_logits, and its d_logits row is exactly 0. Both smoothing settings.
  attn::Rng rng(24);
  Matrix logits = attn::random_normal(rng, 5, 7, 0.0, 2.0);
  const std::vector<int> targets{3, 6, 0, 1, 5};
  for (const double eps : {0.0, 0.1}) {
    const attn::CrossEntropyOptions opts{.ignore_index = 0, .label_smoothing = eps};
    const attn::CrossEntropy r0 = attn::cross_entropy(logits, targets, opts);
    EXPECT_EQ(r0.count, 4);
    EXPECT_TRUE(all_zero(r0.d_logits.row(2)));
    for (const float v : {1e30f, -1e30f, std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
      logits.row(2) = attn::random_normal(rng, 1, 7) * v;
      logits(2, 0) = v;  // and the ignored class's own logit
      const attn::CrossEntropy r1 = attn::cross_entropy(logits, targets, opts);
      EXPECT_TRUE(identical(Matrix::Constant(1, 1, r1.loss), Matrix::Constant(1, 1, r0.loss)))
          << eps << " " << v;
      EXPECT_EQ(r1.count, r0.count);
      EXPECT_TRUE(identical(r1.d_logits, r0.d_logits)) << eps << " " << v;
    }
  }
}

TEST(CrossEntropyBackward, RejectsBadArguments) {
  const Matrix logits = Matrix::Zero(3, 4);
  const std::vector<int> two{1, 2}, outside{1, 4, 0}, fine{1, 2, 3};
  EXPECT_TRUE(names(message_of([&] { attn::cross_entropy(logits, two); }), "cross_entropy"));
  EXPECT_TRUE(names(message_of([&] { attn::cross_entropy(logits, outside); }), "cross_entropy"));
  EXPECT_TRUE(
      names(message_of([&] { attn::cross_entropy(logits, fine, {.label_smoothing = 1.5}); }),
            "cross_entropy"));
  // ignore_index may lie outside the vocabulary (PyTorch's -100): that target is fine.
  const std::vector<int> padded{1, -100, 3};
  EXPECT_EQ(message_of([&] { attn::cross_entropy(logits, padded); }), "(no exception)");
}

}  // namespace test_loss
