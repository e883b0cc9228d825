// attn::column_attention*: note 000's worked example exactly, loops == matrix form, softmax
// columns summing to 1, the optional 1/sqrt(d_k), and every shape error.
#include "attn/core/random.hpp"
#include "attn/ops/column_attention.hpp"
#include "attn/ops/softmax.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace test_column_attention {

using attn::Matrix;
using attn::MatrixD;

// Note 000: W_q [2 x 3] and the four inputs x^1..x^4 as the columns of X [3 x 4].
Matrix note_Wq() {
  Matrix W(2, 3);
  W << 1, 0, 0,  //
      0, 0, 1;
  return W;
}

Matrix note_X() {
  Matrix X(3, 4);
  X << 1, 3, 3, 2,  //
      0, 2, 0, 9,   //
      2, 1, 0, 6;
  return X;
}

// Note 000's values v^1..v^4 as the columns of V [2 x 4].
Matrix note_V() {
  Matrix V(2, 4);
  V << 1, 0, 3, 0,  //
      0, 2, 0, 4;
  return V;
}

// Chapter 02's W_k and W_v (multiples of 1/4: every product and sum below is exact in float).
Matrix chapter_Wk() {
  Matrix W(2, 3);
  W << 0, -0.5f, 0,  //
      0.5f, 0.25f, 0;
  return W;
}

Matrix chapter_Wv() {
  Matrix W(2, 3);
  W << 1, 0, 0,  //
      0, 1, 0;
  return W;
}

// Expects `call` to throw std::invalid_argument whose message contains every piece of `parts`.
template <typename F>
void expect_shape_error(F call, std::initializer_list<std::string> parts) {
  try {
    call();
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
  }
}

TEST(ColumnAttention, WorkedExampleHoldsTheNotesNumbers) {
  const attn::ColumnExample e = attn::worked_example();
  EXPECT_EQ(e.W_q, note_Wq());
  EXPECT_EQ(e.X, note_X());
  EXPECT_EQ(e.W_k, chapter_Wk());
  EXPECT_EQ(e.W_v, chapter_Wv());
}

TEST(ColumnAttention, NoteQueriesExactly) {
  // q^1 = (1, 2), q^2 = (3, 1), q^3 = (3, 0), q^4 = (2, 6): W_q picks features 1 and 3.
  Matrix expected(2, 4);
  expected << 1, 3, 3, 2,  //
      2, 1, 0, 6;
  EXPECT_EQ(attn::project_loops(note_Wq(), note_X()), expected);
  const Matrix product = note_Wq() * note_X();  // [2 x 4]
  EXPECT_EQ(product, expected);
}

TEST(ColumnAttention, NoteWeightedSumExactly) {
  // y^2 = 0.1 v^1 + 0.2 v^2 + 0.3 v^3 + 0.4 v^4 = (0.1 + 0.9, 0.4 + 1.6) = (1, 2).
  Matrix w(4, 1);
  w << 0.1f, 0.2f, 0.3f, 0.4f;
  const Matrix y = attn::weighted_sum_loops(note_V(), w);  // [2 x 1]
  // Each coordinate is a sum of float products like 0.3f * 3 (each rounded once), so "1"
  // and "2" come out within a couple of ulps of 1 and 2, not bit-exact: 1e-6 absolute.
  EXPECT_NEAR(y(0, 0), 1.0f, 1e-6f);
  EXPECT_NEAR(y(1, 0), 2.0f, 1e-6f);

  // The note's four illustrative weight columns (not softmax outputs: column 1 sums to 0.1).
  Matrix W(4, 4);
  W << 0.1f, 0.1f, 0, 0,  //
      0, 0.2f, 0, 0,      //
      0, 0.3f, 0.3f, 0,   //
      0, 0.4f, 0, 0.4f;
  MatrixD expected(2, 4);
  expected << 0.1, 1, 0.9, 0,  //
      0, 2, 0, 1.6;
  const Matrix Y = attn::weighted_sum_loops(note_V(), W);  // [2 x 4]
  EXPECT_LT((Y.cast<double>() - expected).cwiseAbs().maxCoeff(), 1e-6);
  const Matrix Y_product = note_V() * W;  // Y = V A' [2 x 4]
  EXPECT_LT((Y_product.cast<double>() - expected).cwiseAbs().maxCoeff(), 1e-6);
}

TEST(ColumnAttention, ScoresByHand) {
  // A(j, i) = q^i . k^j. Q = note's queries; K = chapter 02's keys
  // k^1 = (0, 0.5), k^2 = (-1, 2), k^3 = (0, 1.5), k^4 = (-4.5, 3.25).
  const Matrix K = attn::project_loops(chapter_Wk(), note_X());
  Matrix K_expected(2, 4);
  K_expected << 0, -1, 0, -4.5f,  //
      0.5f, 2, 1.5f, 3.25f;
  EXPECT_EQ(K, K_expected);
  const Matrix A = attn::scores_loops(attn::project_loops(note_Wq(), note_X()), K);
  // e.g. alpha_{4,4} = q^4 . k^4 = 2 * -4.5 + 6 * 3.25 = 10.5; alpha_{1,2} = 1*-1 + 2*2 = 3.
  Matrix A_expected(4, 4);
  A_expected << 1, 0.5f, 0, 3,  //
      3, -1, -3, 10,            //
      3, 1.5f, 0, 9,            //
      2, -10.25f, -13.5f, 10.5f;
  EXPECT_EQ(A, A_expected);
}

TEST(ColumnAttention, LoopsEqualMatrixFormOnTheWorkedExample) {
  // Integers and quarters: every product and partial sum is exact in float, in any order,
  // and both forms run the same softmax on the same scores. So the results are identical.
  for (bool scale : {false, true}) {
    const auto loops = attn::column_attention_loops(note_Wq(), chapter_Wk(), chapter_Wv(), note_X(),
                                                    {.scale = scale});
    const auto matrix =
        attn::column_attention(note_Wq(), chapter_Wk(), chapter_Wv(), note_X(), {.scale = scale});
    EXPECT_EQ(loops.Q, matrix.Q);
    EXPECT_EQ(loops.K, matrix.K);
    EXPECT_EQ(loops.V, matrix.V);
    EXPECT_EQ(loops.A, matrix.A);
    EXPECT_EQ(loops.A_prime, matrix.A_prime);
    // Y sums products of weights (not exact numbers) in a different order: float rounding of
    // a 4-term sum of values <= 9, ~4 * 2^-24 * 9, so 1e-5.
    EXPECT_LT((loops.Y - matrix.Y).cwiseAbs().maxCoeff(), 1e-5f) << "scale " << scale;
  }
}

TEST(ColumnAttention, LoopsEqualMatrixFormOnRandomData) {
  attn::Rng rng(7);
  const Matrix W_q = attn::random_normal(rng, 5, 6), W_k = attn::random_normal(rng, 5, 6);
  const Matrix W_v = attn::random_normal(rng, 3, 6), X = attn::random_normal(rng, 6, 9);
  const auto loops = attn::column_attention_loops(W_q, W_k, W_v, X, {.scale = true});
  const auto matrix = attn::column_attention(W_q, W_k, W_v, X, {.scale = true});
  // Sums of 6 (projections) or 5 (scores) products of O(1)..O(10) values, in another order
  // and with fused multiply-adds: a few float ulps of ~30, so 1e-4 absolute on the scores
  // and relative 1e-4 on what follows.
  EXPECT_LT((loops.Q - matrix.Q).cwiseAbs().maxCoeff(), 1e-5f);
  EXPECT_LT((loops.A - matrix.A).cwiseAbs().maxCoeff(), 1e-4f);
  EXPECT_LT((loops.A_prime - matrix.A_prime).cwiseAbs().maxCoeff(), 1e-4f);
  EXPECT_LT((loops.Y - matrix.Y).cwiseAbs().maxCoeff(), 1e-4f);
}

TEST(ColumnAttention, SoftmaxColumnsSumToOne) {
  const auto r = attn::column_attention(note_Wq(), chapter_Wk(), chapter_Wv(), note_X());
  ASSERT_EQ(r.A_prime.rows(), 4);
  ASSERT_EQ(r.A_prime.cols(), 4);
  for (int i = 0; i < 4; ++i) {
    // Four weights, each within an ulp or two of its true value: 1e-6.
    EXPECT_NEAR(r.A_prime.col(i).sum(), 1.0f, 1e-6f);
    EXPECT_GE(r.A_prime.col(i).minCoeff(), 0.0f);
  }
  // Column i is softmax of column i of A, by the formula in double.
  for (int i = 0; i < 4; ++i) {
    double denom = 0;
    for (int j = 0; j < 4; ++j) denom += std::exp(static_cast<double>(r.A(j, i)));
    for (int j = 0; j < 4; ++j) {
      // float exp and one float reciprocal: relative error ~3 ulp; weights <= 1, so 1e-6.
      EXPECT_NEAR(r.A_prime(j, i), std::exp(static_cast<double>(r.A(j, i))) / denom, 1e-6);
    }
  }
}

TEST(ColumnAttention, ScalingDividesTheScoresBySqrtDk) {
  const auto plain = attn::column_attention(note_Wq(), chapter_Wk(), chapter_Wv(), note_X());
  const auto scaled =
      attn::column_attention(note_Wq(), chapter_Wk(), chapter_Wv(), note_X(), {.scale = true});
  // d_k = 2: every score times float(1/sqrt(2)), one rounding.
  const float f = 1.0f / std::sqrt(2.0f);
  EXPECT_EQ(scaled.A, (plain.A * f).eval());
  // Smaller scores, flatter weights: the largest weight of every column can only shrink.
  for (int i = 0; i < 4; ++i) {
    EXPECT_LE(scaled.A_prime.col(i).maxCoeff(), plain.A_prime.col(i).maxCoeff());
  }
}

TEST(ColumnAttention, ShapeErrorsNameTheShapes) {
  const Matrix X44 = Matrix::Zero(4, 4), W23 = Matrix::Zero(2, 3), W33 = Matrix::Zero(3, 3);
  expect_shape_error([&] { attn::column_attention(W23, W23, W23, X44); },
                     {"column_attention:", "W_q is [2 x 3] but X is [4 x 4]"});
  expect_shape_error([&] { attn::column_attention_loops(W23, W23, W23, X44); },
                     {"column_attention_loops:", "W_q is [2 x 3] but X is [4 x 4]"});
  expect_shape_error([&] { attn::column_attention(W23, Matrix::Zero(2, 4), W23, note_X()); },
                     {"W_k is [2 x 4] but X is [3 x 4]"});
  expect_shape_error([&] { attn::column_attention(W23, W23, Matrix::Zero(2, 2), note_X()); },
                     {"W_v is [2 x 2] but X is [3 x 4]"});
  expect_shape_error([&] { attn::column_attention(W23, W33, W23, note_X()); },
                     {"W_q is [2 x 3] but W_k is [3 x 3]"});
  expect_shape_error([&] { attn::column_attention(W23, W23, W23, Matrix::Zero(3, 0)); },
                     {"X is [3 x 0]"});
  expect_shape_error([&] { attn::project_loops(W23, X44); },
                     {"project_loops:", "W is [2 x 3] but X is [4 x 4]"});
  expect_shape_error([&] { attn::scores_loops(Matrix::Zero(2, 4), Matrix::Zero(3, 4)); },
                     {"scores_loops:", "Q is [2 x 4] but K is [3 x 4]"});
  expect_shape_error([&] { attn::weighted_sum_loops(Matrix::Zero(2, 4), Matrix::Zero(3, 4)); },
                     {"weighted_sum_loops:", "V is [2 x 4] but weights is [3 x 4]"});
  for (bool loops : {false, true}) {
    const auto attend = [loops](const Matrix& Q, const Matrix& K, const Matrix& V) {
      return loops ? attn::column_attend_loops(Q, K, V) : attn::column_attend(Q, K, V);
    };
    expect_shape_error([&] { attend(Matrix::Zero(2, 4), Matrix::Zero(3, 4), Matrix::Zero(2, 4)); },
                       {"Q is [2 x 4] but K is [3 x 4]"});
    expect_shape_error([&] { attend(Matrix::Zero(2, 4), Matrix::Zero(2, 5), Matrix::Zero(2, 4)); },
                       {"K is [2 x 5] but V is [2 x 4]"});
    expect_shape_error([&] { attend(Matrix::Zero(2, 4), Matrix::Zero(2, 0), Matrix::Zero(2, 0)); },
                       {"K is [2 x 0]"});
  }
}

TEST(ColumnAttention, QueriesAndKeysMayDiffer) {
  // Column form with n_q = 2 queries, n_k = 3 keys, d_k = 2, d_v = 1: A [3 x 2], Y [1 x 2].
  Matrix Q(2, 2), K(2, 3), V(1, 3);
  Q << 1, 0,  //
      0, 0;
  K << 0, 0, 0,  //
      0, 0, 0;
  V << 3, 6, 9;
  const auto r = attn::column_attend(Q, K, V);
  ASSERT_EQ(r.A.rows(), 3);
  ASSERT_EQ(r.A.cols(), 2);
  // All scores 0: uniform weights 1/3, so y = (3 + 6 + 9) / 3 = 6 for both queries.
  EXPECT_NEAR(r.Y(0, 0), 6.0f, 1e-5f);
  EXPECT_NEAR(r.Y(0, 1), 6.0f, 1e-5f);
  EXPECT_EQ(attn::column_attend_loops(Q, K, V).A_prime, r.A_prime);
}

}  // namespace test_column_attention
