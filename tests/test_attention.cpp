// attn::attention (row convention): PyTorch fixtures, identities, the reused buffer, views of
// column blocks, every shape error, outputs that alias inputs; and the two helpers every
// function and chapter leans on, attn::require and attn::max_abs_diff.
#include "attn/ops/attention.hpp"
#include "attn/ops/column_attention.hpp"
#include "course/npy.hpp"
#include "attn/core/random.hpp"
#include "expect.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>

namespace {

using attn::Matrix;

Matrix fixture(const std::string& case_name, const std::string& what) {
  return course::read_npy(std::string(ATTN_TEST_DATA_DIR) + "/attention_" + case_name + "_" + what +
                        ".npy")
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
    const auto row = attn::attention(Q, K, V, {.scale = scale ? std::nullopt
                                                              : std::optional<float>(1.0f)});
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
  Q << 1, 0,    // scores (-inf, 1): weights (0, 1), out = v_1
      -1, 0,    // (+inf, -1): NaN
      1, 1,     // (-inf, 1.25): weights (0, 1)
      0, 1;     // (0 * -inf + 0.5, 0.25): NaN
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

TEST(Attention, AcceptsColumnBlocksWithoutCopies) {
  // Head h of a [n x d_model] projection is the column block [h*d_k, (h+1)*d_k) (chapter 06).
  attn::Rng rng(5);
  const Matrix Q = attn::random_normal(rng, 4, 8), K = attn::random_normal(rng, 6, 8);
  const Matrix V = attn::random_normal(rng, 6, 8);
  for (attn::Index h = 0; h < 2; ++h) {
    const auto from_block = attn::attention(Q.middleCols(h * 4, 4), K.middleCols(h * 4, 4),
                                            V.middleCols(h * 4, 4));
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

using attn_test::message_of;

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
  EXPECT_EQ(message_of([&] { attn::attention_into(r.weights.middleCols(1, 2), K.leftCols(2),
                                                  V, r); }),
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

// ---- attn::require ------------------------------------------------------------------------------

TEST(Require, BuildsTheMessageOnlyOnFailure) {
  int built = 0;
  const auto what = [&] {
    ++built;
    return "Q is " + attn::shape_str(4, 16);
  };
  attn::require(true, "f", what);
  EXPECT_EQ(built, 0);  // a check that passes builds nothing
  EXPECT_EQ(message_of([&] { attn::require(false, "f", what); }), "f: Q is [4 x 16]");
  EXPECT_EQ(built, 1);
  EXPECT_EQ(message_of([] { attn::require(false, "g", "a fixed message"); }), "g: a fixed message");
  EXPECT_EQ(message_of([] { attn::require(false, "h", std::string("built") + " before"); }),
            "h: built before");
}

// ---- attn::max_abs_diff -------------------------------------------------------------------------

TEST(MaxAbsDiff, LargestDifferenceOfTwoSameShapedMatrices) {
  Matrix a(2, 3), b(2, 3);
  a << 1, 2, 3,  //
      4, 5, 6;
  b << 1, 2, 3.25f,  //
      3.5f, 5, 6;
  EXPECT_EQ(attn::max_abs_diff(a, b), 0.5);  // |4 - 3.5|, exact in float and double
  EXPECT_EQ(attn::max_abs_diff(a, a), 0.0);
  EXPECT_EQ(attn::max_abs_diff(a.topRows(1), b.topRows(1)), 0.25);  // blocks and views too
  EXPECT_EQ(attn::max_abs_diff(a.array(), b.array()), 0.5);
  // Float against double: compared in double, so 1 + 2^-30 is not rounded back to 1.
  attn::MatrixD d = a.cast<double>();
  d(0, 0) += std::ldexp(1.0, -30);
  EXPECT_EQ(attn::max_abs_diff(a, d), std::ldexp(1.0, -30));
  // A NaN anywhere is reported, not skipped by the maximum.
  b(0, 0) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(attn::max_abs_diff(a, b)));
  EXPECT_EQ(attn::max_abs_diff(Matrix(0, 3), Matrix(0, 3)), 0.0);
  EXPECT_EQ(message_of([&] { attn::max_abs_diff(a, b.topRows(1)); }),
            "max_abs_diff: a is [2 x 3] but b is [1 x 3]: they must have the same shape");
}

}  // namespace
