// attention.hpp (chapters 03 and 09): attn::attention in the row convention against PyTorch
// fixtures, identities, the reused buffer, views of column blocks, every shape error, outputs
// that alias inputs; and its backward against PyTorch's autograd, by hand, what the masks promise
// to the bit, and its errors (backward_fixture.hpp says where each expected value comes from).
#include "attn/core/random.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/column_attention.hpp"
#include "attn/ops/masks.hpp"
#include "attn/training/gradient_check.hpp"
#include "backward_fixture.hpp"
#include "course/npy.hpp"
#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace test_attention {

using attn::Index;
using attn::Matrix;
using attn_test::identical;
using attn_test::message_of;

Matrix fixture(const std::string& case_name, const std::string& what) {
  return course::read_npy(
             attn_test::fixture("attention", "attention_" + case_name + "_" + what + ".npy"))
      .to_matrix();
}

class AttentionFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(AttentionFixture, MatchesPyTorchScaledDotProductAttention) {
  const std::string c = GetParam();
  const Matrix Q = fixture(c, "Q"), K = fixture(c, "K"), V = fixture(c, "V");
  const Matrix out = fixture(c, "out"), weights = fixture(c, "weights");
  const attn::AttentionResult r = attn::attention(Q, K, V);
  ASSERT_EQ(r.out.rows(), out.rows());
  ASSERT_EQ(r.out.cols(), out.cols());
  ASSERT_EQ(r.weights.rows(), weights.rows());
  ASSERT_EQ(r.weights.cols(), weights.cols());
  // Both sides are float32 with different summation orders (Eigen's blocked GEMM with FMA vs
  // PyTorch's reference BLAS) and PyTorch scales q before the product, we scale the product.
  // The scores (up to ~50 in case "peaked", d_k = 64) differ by a few ulps, ~1e-5; a weight w
  // moves by w * (that), and out sums n_k such terms times |v| <= ~3. The fixture script found
  // float32 vs float64 differences up to 1.4e-6, so 1e-5 absolute leaves room for both sides.
  EXPECT_LT((r.weights - weights).cwiseAbs().maxCoeff(), 1e-5f) << c;
  EXPECT_LT((r.out - out).cwiseAbs().maxCoeff(), 1e-5f) << c;
  for (attn::Index i = 0; i < r.weights.rows(); ++i) {
    EXPECT_NEAR(r.weights.row(i).sum(), 1.0f, 1e-5f);  // n_k <= 16 weights, each to ~1 ulp
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionFixture, ::testing::Values("square", "cross", "peaked"));

TEST(Attention, HandComputedTwoKeys) {
  // One query, two keys, d_k = 4 so 1/sqrt(d_k) = 0.5 exactly. Scores q.k = (2 ln 3, 0) / 2
  // = (ln 3, 0): weights (3/4, 1/4), out = 3/4 * (4, 0) + 1/4 * (0, 8) = (3, 2).
  const float l = std::log(3.0f);
  Matrix Q(1, 4), K(2, 4), V(2, 2);
  Q << 1, 1, 0, 0;
  K << l, l, 0, 0,  //
      0, 0, 5, 5;
  V << 4, 0,  //
      0, 8;
  const auto r = attn::attention(Q, K, V);
  // ln 3 is rounded to float once, exp and the normalisation add a few ulps: 1e-6 on weights,
  // 1e-5 on out (values up to 8).
  EXPECT_NEAR(r.weights(0, 0), 0.75f, 1e-6f);
  EXPECT_NEAR(r.weights(0, 1), 0.25f, 1e-6f);
  EXPECT_NEAR(r.out(0, 0), 3.0f, 1e-5f);
  EXPECT_NEAR(r.out(0, 1), 2.0f, 1e-5f);
}

TEST(Attention, IsTheTransposeOfTheColumnForm) {
  attn::Rng rng(3);
  const Matrix Q = attn::random_normal(rng, 5, 8), K = attn::random_normal(rng, 7, 8);
  const Matrix V = attn::random_normal(rng, 7, 3);
  for (bool scale : {false, true}) {
    const auto row =
        attn::attention(Q, K, V, {.scale = scale ? std::nullopt : std::optional<float>(1.0f)});
    const Matrix Qc = Q.transpose(), Kc = K.transpose(), Vc = V.transpose();
    const auto col = attn::column_attend(Qc, Kc, Vc, {.scale = scale});
    // The two GEMMs may sum the 8 products in different orders (different kernels for
    // K^T Q and Q K^T): scores agree to a few ulps of ~10, so 1e-5 absolute on weights and out.
    EXPECT_LT((row.weights - col.A_prime.transpose()).cwiseAbs().maxCoeff(), 1e-5f);
    EXPECT_LT((row.out - col.Y.transpose()).cwiseAbs().maxCoeff(), 1e-5f);
  }
}

// Issue 11 (item 14): the column form is the same attention without a mask, so non-finite
// scores must come out as in the row form: a query whose scores are all -inf gets NaN (it used to
// get zeros in both forms), +inf gives NaN, and one -inf among finite scores gives weight 0.
TEST(Attention, ColumnFormTreatsNonFiniteScoresAsTheRowFormDoes) {
  const float inf = std::numeric_limits<float>::infinity();
  Matrix K(2, 2), V(2, 2), Q(4, 2);
  K << -inf, 0.5f,  //
      1, 0.25f;
  V << 1, 2,  //
      3, 4;
  Q << 1, 0,  // scores (-inf, 1): weights (0, 1), out = v_1
      -1, 0,  // (+inf, -1): NaN
      1, 1,   // (-inf, 1.25): weights (0, 1)
      0, 1;   // (0 * -inf + 0.5, 0.25): NaN
  Matrix K2(2, 2);
  K2 << -inf, 1,  //
      -inf, 2;    // with query (1, 0): (-inf, -inf), no key left: NaN, not zeros
  const auto nan_or_equal = [](const Matrix& a, const Matrix& b) {
    return a.rows() == b.rows() && a.cols() == b.cols() &&
           (a.array().isNaN() == b.array().isNaN()).all() &&
           (a.array().isNaN() || a.array() == b.array()).all();
  };
  Matrix expected_w(4, 2), expected_out(4, 2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expected_w << 0, 1, nan, nan, 0, 1, nan, nan;
  expected_out << 3, 4, nan, nan, 3, 4, nan, nan;
  const Matrix one_q = Q.topRows(1);
  for (const auto& [q, k, w, out] :
       {std::tuple<Matrix, Matrix, Matrix, Matrix>{Q, K, expected_w, expected_out},
        std::tuple<Matrix, Matrix, Matrix, Matrix>{one_q, K2, Matrix::Constant(1, 2, nan),
                                                   Matrix::Constant(1, 2, nan)}}) {
    const auto row = attn::attention(q, k, V, {.scale = 1.0f});
    const Matrix qc = q.transpose(), kc = k.transpose(), vc = V.transpose();
    const auto col = attn::column_attend(qc, kc, vc);
    const auto loops = attn::column_attend_loops(qc, kc, vc);
    EXPECT_TRUE(nan_or_equal(row.weights, w)) << row.weights;
    EXPECT_TRUE(nan_or_equal(row.out, out)) << row.out;
    EXPECT_TRUE(nan_or_equal(col.A_prime.transpose(), w)) << col.A_prime;
    EXPECT_TRUE(nan_or_equal(col.Y.transpose(), out)) << col.Y;
    EXPECT_TRUE(nan_or_equal(loops.A_prime.transpose(), w)) << loops.A_prime;
    EXPECT_TRUE(nan_or_equal(loops.Y.transpose(), out)) << loops.Y;
  }
}

TEST(Attention, UniformWhenAllScoresAreEqual) {
  // Q = 0: every score is 0, every weight 1/n_k exactly, out = the mean of V's rows.
  Matrix V(4, 2);
  V << 1, 2,  //
      3, 4,   //
      5, 6,   //
      7, 8;
  const auto r = attn::attention(Matrix::Zero(3, 5), Matrix::Ones(4, 5), V);
  for (attn::Index i = 0; i < 3; ++i) {
    for (attn::Index j = 0; j < 4; ++j) EXPECT_EQ(r.weights(i, j), 0.25f);
    EXPECT_EQ(r.out(i, 0), 4.0f);  // (1 + 3 + 5 + 7) / 4, exact in float
    EXPECT_EQ(r.out(i, 1), 5.0f);
  }
}

TEST(Attention, IntoReusesTheBuffersAndMatches) {
  attn::Rng rng(11);
  const Matrix Q = attn::random_normal(rng, 6, 4), K = attn::random_normal(rng, 9, 4);
  const Matrix V = attn::random_normal(rng, 9, 5);
  attn::AttentionResult r;
  attn::attention_into(Q, K, V, r);
  const float* weights_buffer = r.weights.data();
  const float* out_buffer = r.out.data();
  attn::attention_into(Q, K, V, r);  // same shapes: no reallocation
  EXPECT_EQ(r.weights.data(), weights_buffer);
  EXPECT_EQ(r.out.data(), out_buffer);
  const auto fresh = attn::attention(Q, K, V);
  EXPECT_EQ(r.weights, fresh.weights);  // the same code on the same data: bit for bit
  EXPECT_EQ(r.out, fresh.out);
  // A result with other shapes is resized.
  attn::attention_into(Q.topRows(2), K, V, r);
  EXPECT_EQ(r.out.rows(), 2);
  EXPECT_EQ(r.weights.rows(), 2);
}

// The weights and the output into places of the caller's (a head's columns of a concatenation),
// in one call: the numbers of attention() bit for bit, below the blocked size (6 x 9) and past
// it (300 x 280, a block of query rows at a time), with a mask that blocks keys at random and
// leaves query 3 none. Past it, the value too: within float's rounding of the double-precision
// attention (scores of 16 terms of N(0, 1) products, a softmax and a weighted sum of 280 values
// of O(1): a few hundred float roundings of O(1) numbers, under 1e-5; a wrong block of rows or
// keys would be off by O(0.1)).
TEST(Attention, WeightsAndOutputIntoPlacesOfTheirOwnMatchAttention) {
  attn::Rng rng(41);
  for (const auto& [n_q, n_k] :
       {std::pair<Index, Index>{6, 9}, std::pair<Index, Index>{300, 280}}) {
    const Matrix Q = attn::random_normal(rng, n_q, 16), K = attn::random_normal(rng, n_k, 16);
    const Matrix V = attn::random_normal(rng, n_k, 8);
    attn::AllowedMask mask(n_q, n_k);  // [n_q x n_k], about a third of the keys blocked
    for (Index i = 0; i < n_q; ++i) {
      for (Index j = 0; j < n_k; ++j) mask(i, j) = rng.next_u64() % 3 != 0;
    }
    mask.row(3).setConstant(false);
    const attn::AttentionOptions opts{.allowed = mask};
    Matrix W = Matrix::Constant(n_q, n_k, 7.0f);      // [n_q x n_k], overwritten
    Matrix concat = Matrix::Constant(n_q, 24, 7.0f);  // [n_q x 3 d_v]: the output in its middle
    const Index empty = attn::attention_into(Q, K, V, W, concat.middleCols(8, 8), opts);
    const auto want = attn::attention(Q, K, V, opts);
    SCOPED_TRACE(testing::Message() << n_q << " x " << n_k);
    EXPECT_EQ(empty, 1);
    EXPECT_TRUE(identical(W, want.weights));
    EXPECT_TRUE(identical(concat.middleCols(8, 8).eval(), want.out));
    EXPECT_TRUE((concat.leftCols(8).array() == 7.0f).all());  // the other columns untouched
    EXPECT_TRUE((concat.rightCols(8).array() == 7.0f).all());
    EXPECT_TRUE(concat.row(3).segment(8, 8).isZero(0.0f));
    const auto exact = attn::attention(Q.cast<double>().eval(), K.cast<double>().eval(),
                                       V.cast<double>().eval(), opts);
    EXPECT_LT((want.out.cast<double>() - exact.out).cwiseAbs().maxCoeff(), 1e-5);
    EXPECT_LT((want.weights.cast<double>() - exact.weights).cwiseAbs().maxCoeff(), 1e-5);
  }
  const Matrix Q = Matrix::Ones(4, 3), K = Matrix::Ones(5, 3), V = Matrix::Ones(5, 2);
  Matrix W, out(4, 3);
  const std::string shape = message_of([&] { attn::attention_into(Q, K, V, W, out); });
  EXPECT_NE(shape.find("attention: Q is [4 x 3], K [5 x 3], V [5 x 2] and out [4 x 3]"),
            std::string::npos)
      << shape;
  Matrix q = Matrix::Ones(4, 3);  // out over the first columns of Q
  const std::string overlap = message_of([&] { attn::attention_into(q, K, V, W, q.leftCols(2)); });
  EXPECT_NE(overlap.find("attention_into"), std::string::npos) << overlap;
}

TEST(Attention, AcceptsColumnBlocksWithoutCopies) {
  // Head h of a [n x d_model] projection is the column block [h*d_k, (h+1)*d_k) (chapter 06).
  attn::Rng rng(5);
  const Matrix Q = attn::random_normal(rng, 4, 8), K = attn::random_normal(rng, 6, 8);
  const Matrix V = attn::random_normal(rng, 6, 8);
  for (attn::Index h = 0; h < 2; ++h) {
    const auto from_block =
        attn::attention(Q.middleCols(h * 4, 4), K.middleCols(h * 4, 4), V.middleCols(h * 4, 4));
    const Matrix Qh = Q.middleCols(h * 4, 4), Kh = K.middleCols(h * 4, 4);
    const Matrix Vh = V.middleCols(h * 4, 4);
    const auto from_copy = attn::attention(Qh, Kh, Vh);
    EXPECT_EQ(from_block.weights, from_copy.weights);
    // The product's kernel may take another path for a strided view than for a packed
    // matrix; the sums are the same 6 terms, so agreement is to a few ulps.
    EXPECT_LT((from_block.out - from_copy.out).cwiseAbs().maxCoeff(), 1e-6f);
  }
}

template <typename F>
void expect_shape_error(F call, const std::string& part) {
  try {
    call();
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("attention: ", 0), 0u) << e.what();
  }
}

TEST(Attention, ShapeErrorsNameTheShapes) {
  expect_shape_error([] { attn::attention(Matrix(5, 64), Matrix(5, 32), Matrix(5, 8)); },
                     "Q is [5 x 64] but K is [5 x 32]");
  expect_shape_error([] { attn::attention(Matrix(5, 8), Matrix(6, 8), Matrix(5, 8)); },
                     "K is [6 x 8] but V is [5 x 8]");
  expect_shape_error([] { attn::attention(Matrix(5, 8), Matrix(0, 8), Matrix(0, 8)); },
                     "K is [0 x 8]");
  expect_shape_error([] { attn::attention(Matrix(5, 0), Matrix(3, 0), Matrix(3, 8)); },
                     "K is [3 x 0]");
}

// ---- Outputs that alias inputs ------------------------------------------------------------------

TEST(Attention, OutputsThatAliasInputsAreRejected) {
  // attention_into(r.out, r.out, r.out, r) wrote the weights, then the output over the Q, K
  // and V it was still reading: no error, and results off by up to 0.41. Now it throws
  // before writing anything.
  attn::Rng rng(12);
  const Matrix Q = attn::random_normal(rng, 4, 4), K = attn::random_normal(rng, 4, 4);
  const Matrix V = attn::random_normal(rng, 4, 4);
  attn::AttentionResult r = attn::attention(Q, K, V);  // out [4 x 4], weights [4 x 4]
  const attn::AttentionResult before = r;
  const std::string why =
      ": an output must not alias an input (it would be overwritten or reallocated while still "
      "being read); pass a separate result";
  EXPECT_EQ(message_of([&] { attn::attention_into(r.out, r.out, r.out, r); }),
            "attention_into: result.out shares memory with Q" + why);
  EXPECT_EQ(message_of([&] { attn::attention_into(Q, K, r.weights, r); }),
            "attention_into: result.weights shares memory with V" + why);
  // One row of the buffer is enough, and so is a column block (strided: every row's span).
  EXPECT_EQ(message_of([&] { attn::attention_into(r.out.bottomRows(1), K, V, r); }),
            "attention_into: result.out shares memory with Q" + why);
  EXPECT_EQ(message_of([&] { attn::attention_into(Q, r.out, V, r); }),
            "attention_into: result.out shares memory with K" + why);
  EXPECT_EQ(
      message_of([&] { attn::attention_into(r.weights.middleCols(1, 2), K.leftCols(2), V, r); }),
      "attention_into: result.weights shares memory with Q" + why);
  EXPECT_EQ(r.out, before.out);  // untouched, bit for bit
  EXPECT_EQ(r.weights, before.weights);

  Matrix W = r.weights;  // [4 x 4]
  EXPECT_EQ(message_of([&] { attn::attention_weights_into(W, W, W); }),
            "attention_weights_into: W shares memory with Q" + why);
  EXPECT_EQ(message_of([&] { attn::attention_weights_into(Q, W.topRows(1), W); }),
            "attention_weights_into: W shares memory with K" + why);
  EXPECT_EQ(W, before.weights);
  // A copy of the input is the way to do what the aliasing call meant.
  const Matrix W_in = W;
  attn::attention_weights_into(W_in, W_in, W);
  EXPECT_EQ(W, attn::attention(W_in, W_in, V).weights);
  // Inputs may alias each other: self-attention reads one matrix three times.
  attn::attention_into(Q, Q, Q, r);
  EXPECT_EQ(r.out, attn::attention(Matrix(Q), Matrix(Q), Matrix(Q)).out);
}

// ---- The backward pass (chapter 09) ------------------------------------------------------------

using attn::AllowedMask;
using attn::Index;
using attn::MatrixD;
using attn_test::all_zero;
using attn_test::Comparison;
using attn_test::Fixture;
using attn_test::identical;
using attn_test::mat;
using attn_test::names;

template <typename T>
class AttentionBackwardByHand : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionBackwardByHand, attn_test::Reals);

class BackwardSdpaFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(BackwardSdpaFixture, MatchesTorchAutograd) {
  Comparison c(std::string("sdpa_") + GetParam());
  const Fixture& fx = c.fixture();
  const Matrix Q = fx.matrix("Q"), K = fx.matrix("K"), V = fx.matrix("V"), dy = fx.matrix("dy");
  const AllowedMask allowed = fx.mask("allowed");
  const attn::AttentionOptions opts{.allowed = allowed};
  const attn::AttentionResult r = attn::attention(Q, K, V, opts);
  c.check("out", r.out);
  c.check("weights", r.weights);
  const attn::AttentionGrads g = attn::attention_backward(Q, K, V, r.weights, dy, opts);
  c.check("d_Q", g.dQ);
  c.check("d_K", g.dK);
  c.check("d_V", g.dV);
  c.expect_every_gradient_compared();
  // attention_backward_into writes into column blocks of wider matrices (how multi-head
  // attention calls it): the same numbers, within the same tolerance of PyTorch, and nothing
  // outside the blocks. (Not the same bits as attention_backward: the products into a strided
  // block take another Eigen path, which may round differently, e.g. with or without FMA.)
  Matrix dQ = Matrix::Constant(Q.rows(), Q.cols() + 3, 7.0f);
  Matrix dK = Matrix::Constant(K.rows(), K.cols() + 3, 7.0f);
  Matrix dV = Matrix::Constant(V.rows(), V.cols() + 3, 7.0f);
  attn::attention_backward_into(Q, K, V, r.weights, dy, dQ.middleCols(2, Q.cols()),
                                dK.middleCols(2, K.cols()), dV.middleCols(2, V.cols()), opts);
  Comparison into(std::string("sdpa_") + GetParam() + " (into)", fx);
  into.check("d_Q", dQ.middleCols(2, Q.cols()));
  into.check("d_K", dK.middleCols(2, K.cols()));
  into.check("d_V", dV.middleCols(2, V.cols()));
  for (const Matrix* m : {&dQ, &dK, &dV}) {
    EXPECT_TRUE((m->leftCols(2).array() == 7.0f).all() && (m->rightCols(1).array() == 7.0f).all());
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardSdpaFixture,
                         ::testing::Values("cross", "causal", "padding"));

TYPED_TEST(AttentionBackwardByHand, SoftmaxBackwardSubtractsTheWeightedRowMean) {
  using T = TypeParam;
  // One query, two keys, d_k = 1, scale 2: Q = [[1]], K = [[0], [ln 3 / 2]], so the scores are
  // 2 * [0, ln 3 / 2] = [0, ln 3] and P = [1, 3] / (1 + 3) = [1/4, 3/4]. V = I (v_0 = (1, 0),
  // v_1 = (0, 1)), d_out = [[2, -1]]:
  //   dP = d_out V^T = [2, -1]
  //   rowsum(P * dP) = 1/4 * 2 + 3/4 * (-1) = -1/4
  //   dS = P * (dP - rowsum) = [1/4 * (2 + 1/4), 3/4 * (-1 + 1/4)] = [9/16, -9/16]
  //     (without the row sum it would be P * dP = [1/2, -3/4]: the test tells them apart)
  //   dQ = scale dS K   = 2 * (9/16 * 0 - 9/16 * ln 3 / 2) = -9/16 ln 3
  //   dK = scale dS^T Q = 2 * [[9/16], [-9/16]] = [[9/8], [-9/8]]
  //   dV = P^T d_out    = [[1/4 * 2, 1/4 * (-1)], [3/4 * 2, 3/4 * (-1)]]
  //                     = [[1/2, -1/4], [3/2, -3/4]]
  // ln 3 / 2 is rounded to T (the scale 2 and the doubling are exact), so P is a few ulps of T
  // from [1/4, 3/4]; everything else is a handful of operations on O(1) numbers: 1e-6 (float)
  // and 1e-14 (double) are ample, and the no-row-sum mistake is off by 1/16 at least.
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  const T half_ln3 = static_cast<T>(std::log(3.0) / 2.0);
  const attn::MatrixOf<T> Q = mat<T>({{1}}), K = mat<T>({{0}, {half_ln3}});
  const attn::MatrixOf<T> V = mat<T>({{1, 0}, {0, 1}}), d_out = mat<T>({{2, -1}});
  const attn::AttentionOptions opts{.scale = 2.0f};
  const auto r = attn::attention(Q, K, V, opts);
  EXPECT_NEAR(r.weights(0, 0), 0.25, tol);
  EXPECT_NEAR(r.weights(0, 1), 0.75, tol);
  const auto g = attn::attention_backward(Q, K, V, r.weights, d_out, opts);
  EXPECT_NEAR(g.dQ(0, 0), -9.0 / 8.0 * static_cast<double>(half_ln3), tol);  // -9/16 ln 3
  EXPECT_NEAR(g.dK(0, 0), 9.0 / 8.0, tol);
  EXPECT_NEAR(g.dK(1, 0), -9.0 / 8.0, tol);
  EXPECT_NEAR(g.dV(0, 0), 0.5, tol);
  EXPECT_NEAR(g.dV(0, 1), -0.25, tol);
  EXPECT_NEAR(g.dV(1, 0), 1.5, tol);
  EXPECT_NEAR(g.dV(1, 1), -0.75, tol);
}

TEST(AttentionBackward, PaddedKeyChangesNoGradientAndGetsNone) {
  // Q [4 x 3], K [6 x 3], V [6 x 2]; keys 4 and 5 blocked for every query (padding).
  // Invariant to the bit when K and V rows 4, 5 change to anything finite: the forward's
  // out and weights, dQ (all rows), dK and dV rows 0..3. Exactly 0: dK and dV rows 4, 5.
  attn::Rng rng(21);
  const Matrix Q = attn::random_normal(rng, 4, 3), dy = attn::random_normal(rng, 4, 2);
  Matrix K = attn::random_normal(rng, 6, 3), V = attn::random_normal(rng, 6, 2);
  AllowedMask allowed = attn::full_mask(4, 6);
  allowed.rightCols(2).setConstant(false);
  const attn::AttentionOptions opts{.allowed = allowed};
  const auto run = [&] {
    const attn::AttentionResult r = attn::attention(Q, K, V, opts);
    return std::pair{r, attn::attention_backward(Q, K, V, r.weights, dy, opts)};
  };
  const auto [r0, g0] = run();
  EXPECT_TRUE(all_zero(g0.dK.bottomRows(2)) && all_zero(g0.dV.bottomRows(2)));
  // Huge (1e30: a score of ~1e30, a dP = d_out v of ~1e30, still finite), random, either sign.
  // The limit is a dP that overflows: V rows of 3e38 make d_out v = +-inf, and its weight 0
  // times inf is NaN, in dS and then in dQ and dK (PyTorch alike; attention.hpp's "garbage in
  // is loud" for the forward). The promise is for finite dP, which 1e30 is.
  for (const float size : {1e30f, -1e30f, 5.0f}) {
    K.bottomRows(2) = attn::random_normal(rng, 2, 3) * size;
    V.bottomRows(2) = attn::random_normal(rng, 2, 2) * size;
    const auto [r1, g1] = run();
    EXPECT_TRUE(identical(r1.out, r0.out)) << size;
    EXPECT_TRUE(identical(r1.weights, r0.weights)) << size;
    EXPECT_TRUE(identical(g1.dQ, g0.dQ)) << size;
    EXPECT_TRUE(identical(g1.dK.topRows(4), g0.dK.topRows(4))) << size;
    EXPECT_TRUE(identical(g1.dV.topRows(4), g0.dV.topRows(4))) << size;
    EXPECT_TRUE(all_zero(g1.dK.bottomRows(2))) << size;
    EXPECT_TRUE(all_zero(g1.dV.bottomRows(2))) << size;
  }
}

TEST(AttentionBackward, CausalFutureKeyValueChangesNoEarlierQueryGradient) {
  // n = 5, causal; token t = 3's key and value row changed.
  //  (a) any d_out: out rows 0..2 and dQ rows 0..2 are invariant (query i < t reads keys and
  //      values j <= i only, and its row of dS only those). dK and dV rows j < t are NOT: queries
  //      i >= t attend to key j too, with weights renormalised by the new key t.
  //  (b) d_out rows t.. zero: then every gradient is invariant: dS rows t.. are 0 (dP = 0 there),
  //      so dK and dV collect only from queries < t; dK and dV rows t.. are exactly 0 and dQ
  //      rows t.. are exactly 0.
  constexpr Index n = 5, t = 3;
  attn::Rng rng(22);
  const Matrix Q = attn::random_normal(rng, n, 4);
  Matrix K = attn::random_normal(rng, n, 4), V = attn::random_normal(rng, n, 4);
  const Matrix K0 = K, V0 = V;
  const AllowedMask causal = attn::causal_mask(n);
  const attn::AttentionOptions opts{.allowed = causal};
  Matrix dy = attn::random_normal(rng, n, 4);
  const auto run = [&] {
    const attn::AttentionResult r = attn::attention(Q, K, V, opts);
    return std::pair{r, attn::attention_backward(Q, K, V, r.weights, dy, opts)};
  };
  const auto change_token_t = [&] {
    K.row(t) = attn::random_normal(rng, 1, 4, 0.0, 5.0);
    V.row(t) = attn::random_normal(rng, 1, 4, 0.0, 5.0);
  };
  // (a)
  const auto [r0, g0] = run();
  change_token_t();
  const auto [r1, g1] = run();
  EXPECT_TRUE(identical(r1.out.topRows(t), r0.out.topRows(t)));
  EXPECT_TRUE(identical(g1.dQ.topRows(t), g0.dQ.topRows(t)));
  EXPECT_FALSE(identical(g1.dQ.bottomRows(n - t), g0.dQ.bottomRows(n - t)));  // query t sees it
  EXPECT_FALSE(identical(g1.dK.topRows(t), g0.dK.topRows(t)));  // not invariant without (b)
  EXPECT_FALSE(identical(g1.dV.topRows(t), g0.dV.topRows(t)));
  // (b)
  K = K0;
  V = V0;
  dy.bottomRows(n - t).setZero();
  const auto [r2, g2] = run();
  change_token_t();
  const auto [r3, g3] = run();
  EXPECT_TRUE(identical(g3.dQ.topRows(t), g2.dQ.topRows(t)));
  EXPECT_TRUE(identical(g3.dK.topRows(t), g2.dK.topRows(t)));
  EXPECT_TRUE(identical(g3.dV.topRows(t), g2.dV.topRows(t)));
  for (const auto* g : {&g2, &g3}) {
    EXPECT_TRUE(all_zero(g->dQ.bottomRows(n - t)));
    EXPECT_TRUE(all_zero(g->dK.bottomRows(n - t)));
    EXPECT_TRUE(all_zero(g->dV.bottomRows(n - t)));
  }
}

TEST(AttentionBackward, QueryWithNoAllowedKeyPassesNothingBack) {
  // Query 1 of 3 may attend to no key. Its row of the weights is 0, so: its dQ row is exactly
  // 0, and dK, dV do not depend on its d_out row or its Q row (changed to anything finite,
  // huge included): invariant to the bit. The other queries' dQ rows are invariant too.
  attn::Rng rng(23);
  Matrix Q = attn::random_normal(rng, 3, 4), dy = attn::random_normal(rng, 3, 2);
  const Matrix K = attn::random_normal(rng, 5, 4), V = attn::random_normal(rng, 5, 2);
  AllowedMask allowed = attn::full_mask(3, 5);
  allowed.row(1).setConstant(false);
  allowed(2, 4) = false;  // and an ordinary blocked key elsewhere
  const attn::AttentionOptions opts{.allowed = allowed};
  const auto run = [&] {
    const attn::AttentionResult r = attn::attention(Q, K, V, opts);
    return attn::attention_backward(Q, K, V, r.weights, dy, opts);
  };
  const attn::AttentionGrads g0 = run();
  EXPECT_TRUE(all_zero(g0.dQ.row(1)));
  for (const float size : {1e30f, 3.0f}) {
    Q.row(1) = attn::random_normal(rng, 1, 4) * size;
    dy.row(1) = attn::random_normal(rng, 1, 2) * size;
    const attn::AttentionGrads g1 = run();
    EXPECT_TRUE(all_zero(g1.dQ.row(1))) << size;
    EXPECT_TRUE(identical(g1.dQ.row(0), g0.dQ.row(0))) << size;
    EXPECT_TRUE(identical(g1.dQ.row(2), g0.dQ.row(2))) << size;
    EXPECT_TRUE(identical(g1.dK, g0.dK)) << size;
    EXPECT_TRUE(identical(g1.dV, g0.dV)) << size;
  }
}

TEST(AttentionBackward, RejectsWrongShapes) {
  attn::Rng rng(34);
  const Matrix Q = attn::random_normal(rng, 4, 3), K = attn::random_normal(rng, 6, 3),
               V = attn::random_normal(rng, 6, 2), dy = attn::random_normal(rng, 4, 2);
  const attn::AttentionResult r = attn::attention(Q, K, V);
  const attn::AttentionResult other = attn::attention(Q, K.topRows(5), V.topRows(5));
  EXPECT_TRUE(names(message_of([&] { attn::attention_backward(Q, K, V, r.weights, Matrix(4, 3)); }),
                    "attention_backward"));  // d_out of the wrong width
  EXPECT_TRUE(names(message_of([&] { attn::attention_backward(Q, K, V, r.weights, Matrix(3, 2)); }),
                    "attention_backward"));  // d_out of another n_q
  EXPECT_TRUE(names(message_of([&] { attn::attention_backward(Q, K, V, other.weights, dy); }),
                    "attention_backward"));  // the weights (cache) of another input
  // attention_backward_into's shape errors name "attention_backward", as attention_into's
  // name "attention": one check shared by both entry points.
  Matrix dQ(4, 3), dK(6, 3), dV(6, 3);
  EXPECT_TRUE(
      names(message_of([&] { attn::attention_backward_into(Q, K, V, r.weights, dy, dQ, dK, dV); }),
            "attention_backward"));  // dV [6 x 3] for V [6 x 2]
}

TEST(AttentionBackward, IntoRejectsOutputsOverlappingInputs) {
  // attn.hpp, "Aliasing": the _into functions throw when an output overlaps an input, rather
  // than return a silently wrong answer. attention_backward_into writes dV first and then
  // reads d_out, V, Q and K: dV over V, or dQ over Q (read again for dK), would be wrong.
  attn::Rng rng(38);
  const Matrix Q = attn::random_normal(rng, 4, 3), K = attn::random_normal(rng, 4, 3),
               V = attn::random_normal(rng, 4, 3), dy = attn::random_normal(rng, 4, 3);
  const attn::AttentionResult r = attn::attention(Q, K, V);
  Matrix dQ(4, 3), dK(4, 3), dV(4, 3);
  Matrix v = V;  // dV written over the values
  EXPECT_TRUE(
      names(message_of([&] { attn::attention_backward_into(Q, K, v, r.weights, dy, dQ, dK, v); }),
            "attention_backward"));
  Matrix q = Q;  // dQ written over the queries
  EXPECT_TRUE(
      names(message_of([&] { attn::attention_backward_into(q, K, V, r.weights, dy, q, dK, dV); }),
            "attention_backward"));
  Matrix d = dy;  // dV written over d_out (n_q = n_k, d_v = d_k here)
  EXPECT_TRUE(
      names(message_of([&] { attn::attention_backward_into(Q, K, V, r.weights, d, dQ, dK, d); }),
            "attention_backward"));
  EXPECT_TRUE(identical(v, V) && identical(q, Q) && identical(d, dy));  // nothing was written
}

TEST(AttentionBackward, IntoRejectsOutputsOverlappingEachOther) {
  // dQ and dK as one matrix returned normally: dK was written over dQ, and dQ was lost.
  // Refused now, naming the two, before anything is written.
  attn::Rng rng(39);
  const Matrix Q = attn::random_normal(rng, 4, 3), K = attn::random_normal(rng, 4, 3),
               V = attn::random_normal(rng, 4, 3), dy = attn::random_normal(rng, 4, 3);
  const attn::AttentionResult r = attn::attention(Q, K, V);
  Matrix shared = Matrix::Constant(4, 3, 7.0f), dV = Matrix::Constant(4, 3, 7.0f);
  EXPECT_EQ(message_of(
                [&] { attn::attention_backward_into(Q, K, V, r.weights, dy, shared, shared, dV); }),
            "attention_backward: dQ and dK share memory: each output needs memory of its own "
            "(one would overwrite the other); pass separate results");
  EXPECT_TRUE(names(message_of([&] {
                      attn::attention_backward_into(Q, K, V, r.weights, dy, dV, shared.row(1),
                                                    shared.bottomRows(3).leftCols(1));
                    }),
                    "attention_backward"));
  EXPECT_TRUE((shared.array() == 7.0f).all() && (dV.array() == 7.0f).all());
  // Side by side in one matrix, sharing no element, they are what separate matrices get.
  const attn::AttentionGrads g = attn::attention_backward(Q, K, V, r.weights, dy);
  Matrix all(4, 9);  // [dQ | dK | dV]
  attn::attention_backward_into(Q, K, V, r.weights, dy, all.leftCols(3), all.middleCols(3, 3),
                                all.rightCols(3));
  EXPECT_TRUE(identical(all.leftCols(3), g.dQ) && identical(all.middleCols(3, 3), g.dK) &&
              identical(all.rightCols(3), g.dV));
}

// ---- Sizes the machine cannot hold (issue 26) --------------------------------------------------

TEST(Attention, WeightsTheMachineCannotHoldAreRefusedBeforeAllocating) {
  // Q, K and V of 2^22 tokens, one feature each, take 16 MiB apiece; their [n x n] weights take
  // 64 TiB, which attention() asked the allocator for. Refused now, naming the sizes.
  const Index n = Index{1} << 22;
  const Matrix Q = Matrix::Zero(n, 1), V = Matrix::Zero(n, 1);
  const std::string need = "4194304 queries over 4194304 keys needs 64.0 TiB for the weights";
  std::string m = message_of([&] { attn::attention(Q, Q, V); });
  EXPECT_EQ(m.rfind("attention: " + need, 0), 0u) << m;
  Matrix W;
  m = message_of([&] { attn::attention_weights_into(Q, Q, W); });
  EXPECT_EQ(m.rfind("attention: " + need, 0), 0u) << m;
  EXPECT_EQ(W.size(), 0);
  // Q [n x 1] and V [1 x n]: one key, and an output of n x n values.
  const Matrix V_wide = Matrix::Zero(1, n);
  m = message_of([&] { attn::attention(Q, Q.topRows(1), V_wide); });
  EXPECT_EQ(
      m.rfind("attention: Q [4194304 x 1] and V [1 x 4194304] needs 64.0 TiB for the output", 0),
      0u)
      << m;
}

// With a finite blocked_score (-1e9), a query whose every key is blocked has uniform weights,
// but its scores are constants: central differences give it no gradient, and neither may the
// backward pass (it zeroes dS where the mask blocks).
TEST(BackwardMasks, AFiniteBlockedScoreGivesAFullyBlockedRowNoGradient) {
  attn::MatrixD Q(2, 2), K(2, 2), V(2, 2), dO(2, 2);
  Q << 1, 2, 0, 1;
  K << 1, 0, 1, 1;
  V << 1, 0, 0, 2;
  dO << 1, 0.5, -1, 1;
  attn::AllowedMask allowed(2, 2);
  allowed << false, false, true, true;  // query 1 may see nothing
  const attn::AttentionOptions opts{.allowed = allowed, .blocked_score = -1e9f};
  const attn::AttentionResultD fwd = attn::attention(Q, K, V, opts);
  const attn::AttentionGradsD g = attn::attention_backward(Q, K, V, fwd.weights, dO, opts);
  const auto loss = [&] { return (attn::attention(Q, K, V, opts).out.array() * dO.array()).sum(); };
  // Expected from central differences in double (gradient_check.hpp): agreement to ~1e-10.
  EXPECT_LT(attn::check_tensor("Q", Q, g.dQ, loss).max_abs_error, 1e-9);
  EXPECT_LT(attn::check_tensor("K", K, g.dK, loss).max_abs_error, 1e-9);
  EXPECT_LT(attn::check_tensor("V", V, g.dV, loss).max_abs_error, 1e-9);
  EXPECT_EQ(g.dQ.row(0).cwiseAbs().maxCoeff(), 0.0);
}

}  // namespace test_attention
