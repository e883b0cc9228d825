// Exercises 03.1 to 03.3: are your column form, row-form scores and row-form attention right?
// The tasks are in chapters/03_vectorized_qkv/exercise/ (README.md there lists them). Check
// them all with
//
//   cmake --build build/release --target exercise_03
//   ctest --test-dir build/release -R Exercise03 --output-on-failure
//
// or one at a time with -R Exercise03Column, -R Exercise03Scores or -R Exercise03Attention.
//
// Where the expected values come from: the chapter's worked example, whose Q, K, V and scores
// are worked out by hand below (integers and quarters; the chapter prints the same numbers),
// small cases built so that every weight is a simple fraction, and the library's own functions,
// which its suites check independently of this file: attn::attention (in double;
// tests/attn/ops/test_attention.cpp, against PyTorch and as the transpose of the column form)
// and attn::linear_forward (tests/attn/layers/test_linear.cpp). Every comparison is in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_03_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "attention_rows.hpp"
#include "column_attention.hpp"
#include "scaled_scores.hpp"

#include "exercise_checks.hpp"

#include "attn/core/random.hpp"
#include "attn/layers/linear.hpp"
#include "attn/ops/attention.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

namespace exercise_03 {

using attn::Index;
using attn::MatrixD;

/// How close counts as the same. Everything here is double, on numbers of size 15 at most (the
/// worked example's scores reach 10.5, the random ones 14): a right answer that multiplies, sums
/// or normalises in another order than the reference differs by a few ulps of 15, about 1e-14.
/// The wrong answers these tests name are off by 0.1 or more in their worst entry (the nearest:
/// 1/d_k in place of 1/sqrt(d_k) for a random query alone, 0.15 away). 1e-12 is far from both.
constexpr double kTolerance = 1e-12;

/// The chapter prints its worked example to 4 decimals: a printed number and the exact one
/// differ by half a unit in the last decimal at most. Used only to check the test's own hand
/// computation against the page, never your answer.
constexpr double kPrintedTolerance = 5e-5;

bool close(const MatrixD& a, const MatrixD& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         ((a - b).array().abs() <= kTolerance).all();
}

/// The softmax of every column of `scores`, the max subtracted: for the wrong answers.
MatrixD softmax_cols(const MatrixD& scores) {
  MatrixD w(scores.rows(), scores.cols());  // [rows x cols], every column sums to 1
  for (Index c = 0; c < scores.cols(); ++c) {
    const double max = scores.col(c).maxCoeff();
    for (Index r = 0; r < scores.rows(); ++r) w(r, c) = std::exp(scores(r, c) - max);
    w.col(c) /= w.col(c).sum();
  }
  return w;
}

/// The softmax of every row: the transpose of softmax_cols of the transpose.
MatrixD softmax_rows(const MatrixD& scores) { return softmax_cols(scores.transpose()).transpose(); }

/// A usual wrong answer: what it gives on this case, and what to say when yours equals it.
struct WrongAnswer {
  MatrixD value;
  std::string says;
};

/// A shape some mistake gives, and what to say when yours has it.
struct ShapeHint {
  Index rows, cols;
  std::string says;
};

/// "" when yours equals expected to kTolerance everywhere. Otherwise: a wrong shape first (and
/// which mistake gives that shape, if a hint knows), else the worst entry and, when yours is
/// one of the wrong answers (checked in order), what it is.
std::string compare(const std::string& what, const MatrixD& yours, const MatrixD& expected,
                    const std::vector<WrongAnswer>& wrong, const std::vector<ShapeHint>& shapes,
                    const std::string& which) {
  if (yours.rows() != expected.rows() || yours.cols() != expected.cols()) {
    std::string message =
        fmt::format("Your {} is [{} x {}], but it must be [{} x {}] ({}).", what, yours.rows(),
                    yours.cols(), expected.rows(), expected.cols(), which);
    for (const ShapeHint& s : shapes) {
      if (yours.rows() == s.rows && yours.cols() == s.cols) return message + "\n" + s.says;
    }
    return message;
  }
  if (close(yours, expected)) return "";
  const auto [worst_r, worst_c] = attn_test::worst_entry(yours, expected);
  std::string message =
      fmt::format("Your {} differs at ({}, {}): yours {:.6g}, expected {:.6g} ({}).", what, worst_r,
                  worst_c, yours(worst_r, worst_c), expected(worst_r, worst_c), which);
  for (const WrongAnswer& w : wrong) {
    if (close(yours, w.value)) return message + "\n" + w.says;
  }
  if (yours.array().isNaN().any()) message += "\nYours holds NaN.";
  return message;
}

/// The program is built with Eigen's checks on (tests/CMakeLists.txt): a product whose inner
/// sizes do not meet stops it inside your function, with Eigen's assertion. Before it goes, it
/// says what that most likely means for the exercise that was running.
const char* abort_text = "";
std::size_t abort_length = 0;

extern "C" void explain_abort(int) {
  const ssize_t written = write(2, abort_text, abort_length);
  static_cast<void>(written);  // nothing to do if stderr is gone
}

/// Calls `answer` with explain_abort installed, saying `text` if the program stops inside it.
template <typename Answer>
MatrixD guarded(const std::string& text, Answer answer) {
  abort_text = text.c_str();
  abort_length = text.size();
  const auto previous = std::signal(SIGABRT, explain_abort);
  MatrixD result = answer();
  std::signal(SIGABRT, previous);
  return result;
}

// The chapter's worked example (attn::worked_example, chapters 02 and 03), tokens as columns:
// note 000's W_q and x^1..x^4, the course's W_k and W_v.
struct Example {
  MatrixD W_q, W_k, W_v;  // [2 x 3] each
  MatrixD X;              // [3 x 4], column i = x^i
};

Example worked_example() {
  Example e{MatrixD(2, 3), MatrixD(2, 3), MatrixD(2, 3), MatrixD(3, 4)};
  e.W_q << 1, 0, 0,  //
      0, 0, 1;
  e.W_k << 0, -0.5, 0,  //
      0.5, 0.25, 0;
  e.W_v << 1, 0, 0,  //
      0, 1, 0;
  e.X << 1, 3, 3, 2,  //
      0, 2, 0, 9,     //
      2, 1, 0, 6;
  return e;
}

// Its projections and scores by hand. W_q picks features 1 and 3 of each x^i, W_k makes
// (-x_2 / 2, x_1 / 2 + x_2 / 4), W_v picks features 1 and 2:
//
//   Q = W_q X:  q^1 = (1, 2)   q^2 = (3, 1)   q^3 = (3, 0)     q^4 = (2, 6)
//   K = W_k X:  k^1 = (0, 0.5) k^2 = (-1, 2)  k^3 = (0, 1.5)   k^4 = (-4.5, 3.25)
//   V = W_v X:  v^1 = (1, 0)   v^2 = (3, 2)   v^3 = (3, 0)     v^4 = (2, 9)
//
// A(j, i) = k^j . q^i, e.g. A(4, 2) = -4.5 * 3 + 3.25 * 1 = -10.25 (row j = key, column i =
// query; 1-based here, 0-based in the code). All exact in double.
MatrixD hand_A() {
  MatrixD A(4, 4);    // [n x n]
  A << 1, 0.5, 0, 3,  //
      3, -1, -3, 10,  //
      3, 1.5, 0, 9,   //
      2, -10.25, -13.5, 10.5;
  return A;
}

MatrixD hand_V() {
  MatrixD V(2, 4);  // [d_v x n], column j = v^j
  V << 1, 3, 3, 2,  //
      0, 2, 0, 9;
  return V;
}

// ---- Exercise 03.1: the column form ---------------------------------------------------------

const std::string kColumnStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_column_attention "
    "in chapters/03_vectorized_qkv/exercise/column_attention.cpp.";

const std::string kColumnAbort =
    "\n*** The program stopped inside exercise_column_attention, most likely on a product whose "
    "inner sizes do not meet (Eigen's assertion above). In the column form Q = W_q X is "
    "[d_k x d_in] [d_in x n], A = K^T Q is [n x d_k] [d_k x n] and Y = V A' is [d_v x n] "
    "[n x n].\n";

/// The usual wrong Y for these scores A = K^T Q [n x n], V [d_v x n] and d_k.
std::vector<WrongAnswer> wrong_columns(const MatrixD& A, const MatrixD& V, Index d_k) {
  return {
      {MatrixD::Zero(V.rows(), A.cols()), kColumnStub},
      {V * softmax_rows(A),
       "Yours takes the softmax along the rows of A. In the column form a row of A is one key's "
       "scores over the queries; query i's scores are column i, and its weights A'(:, i) must "
       "sum to 1."},
      {V * softmax_cols(A.transpose()),
       "Yours computes the scores as Q^T K, the transpose of A = K^T Q: column i then holds key "
       "i's scores. Use A = K^T Q, whose entry (j, i) is k^j . q^i."},
      {V * softmax_cols(A / std::sqrt(static_cast<double>(d_k))),
       "Yours divides the scores by sqrt(d_k). The notes' column form is unscaled (the chapter's "
       "default; only --scale divides), and so is this exercise."},
      {V * softmax_cols(A).transpose(),
       "Yours multiplies V by A'^T: the weights are right, but Y = V A' needs query i's weights "
       "in column i, as A' has them."},
  };
}

std::vector<ShapeHint> column_shapes(Index n, Index d_v) {
  return {
      {n, d_v,
       "That is the row form's out, Y^T, one token per row. In the notes' form tokens are "
       "columns: Y = V A' is [d_v x n]."},
      {n, n, "That is the shape of A or A': multiply by V last, Y = V A'."},
  };
}

// 1. The worked example, by hand: A above, its softmax per column, Y = V A'. The chapter
// prints A' and Y to 4 decimals; the test checks its own numbers against those first.
TEST(Exercise03Column, WorkedExampleByHand) {
  const Example e = worked_example();
  const MatrixD A = hand_A(), V = hand_V();
  const MatrixD expected = V * softmax_cols(A);  // [d_v x n] = [2 x 4]
  MatrixD printed(2, 4);                         // the page's Y = V A', 4 decimals
  printed << 2.7449, 2.4926, 2.0243, 2.4530,     //
      2.1216, 0.1133, 0.0486, 5.5803;
  ASSERT_LT((expected - printed).cwiseAbs().maxCoeff(), kPrintedTolerance)
      << "The test's own hand computation disagrees with the chapter's page: a bug in the test.";

  const MatrixD yours =
      guarded(kColumnAbort, [&] { return exercise_column_attention(e.W_q, e.W_k, e.W_v, e.X); });
  const std::string problem =
      compare("Y", yours, expected, wrong_columns(A, V, 2), column_shapes(4, 2),
              "the chapter's worked example, unscaled: Y = V softmax_cols(K^T Q)");
  if (!problem.empty()) FAIL() << problem;
}

// 2. Random inputs with d_in = 5, d_k = 3, d_v = 4, n = 6 (every size different, so a
// transposed factor shows in the shapes), against the library's row form transposed: the
// chapter's identity Y = out^T, with X_r = X^T, Q_r = X_r W_q^T, ..., and no scale.
TEST(Exercise03Column, IsTheTransposeOfTheRowForm) {
  const Index d_in = 5, d_k = 3, d_v = 4, n = 6;
  attn::Rng rng(3);
  const MatrixD W_q = attn_test::normal_matrix(rng, d_k, d_in),
                W_k = attn_test::normal_matrix(rng, d_k, d_in);  // [d_k x d_in]
  const MatrixD W_v = attn_test::normal_matrix(rng, d_v, d_in);  // [d_v x d_in]
  const MatrixD X = attn_test::normal_matrix(rng, d_in, n);      // [d_in x n]
  const MatrixD X_rows = X.transpose();                          // [n x d_in]
  const MatrixD Q_rows = X_rows * W_q.transpose(), K_rows = X_rows * W_k.transpose();  // [n x d_k]
  const MatrixD V_rows = X_rows * W_v.transpose();                                     // [n x d_v]
  const MatrixD expected =
      attn::attention(Q_rows, K_rows, V_rows, {.scale = 1.0f}).out.transpose();  // [d_v x n]

  const MatrixD A = K_rows * Q_rows.transpose();  // [n x n] = K^T Q, for the wrong answers
  const MatrixD V = V_rows.transpose();           // [d_v x n]
  const MatrixD yours =
      guarded(kColumnAbort, [&] { return exercise_column_attention(W_q, W_k, W_v, X); });
  const std::string problem = compare(
      "Y", yours, expected, wrong_columns(A, V, d_k), column_shapes(n, d_v),
      "random, d_in = 5, d_k = 3, d_v = 4, n = 6: the transpose of attn::attention(X^T W_q^T, "
      "X^T W_k^T, X^T W_v^T) unscaled");
  if (!problem.empty()) FAIL() << problem;
}

// ---- Exercise 03.2: the row form's scaled scores --------------------------------------------

const std::string kScoresStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_scaled_scores in "
    "chapters/03_vectorized_qkv/exercise/scaled_scores.cpp.";

const std::string kScoresAbort =
    "\n*** The program stopped inside exercise_scaled_scores, most likely on a product whose "
    "inner sizes do not meet (Eigen's assertion above). X is [n x d_in] and W_q [d_k x d_in]: "
    "Q = X W_q^T is [n x d_in] [d_in x d_k]. X W_q meets only when d_in = d_k, and W_q X is the "
    "column form's product, for an X whose columns are the tokens.\n";

std::vector<ShapeHint> score_shapes(Index d_k) {
  return {{d_k, d_k,
           "That is Q^T K (or K^T Q), which sums over the tokens. The scores Q K^T sum over the "
           "d_k features of a query and a key: [n x d_k] [d_k x n] = [n x n]."}};
}

/// The usual wrong scores when the right ones are `right` = Q K^T / sqrt(d_k) [n x n].
std::vector<WrongAnswer> wrong_scores(const MatrixD& right, Index d_k, Index d_in) {
  const double sqrt_d_k = std::sqrt(static_cast<double>(d_k));
  std::vector<WrongAnswer> wrong = {
      {MatrixD::Zero(right.rows(), right.cols()), kScoresStub},
      {right.transpose(),
       "Yours is K Q^T, the transpose: row i holds key i's scores over the queries. Row i must "
       "be query i's: S = Q K^T, S(i, j) = q_i . k_j / sqrt(d_k)."},
      {right * sqrt_d_k,
       "Yours is unscaled, Q K^T alone: divide by sqrt(d_k), d_k the width of a query."},
      {right * sqrt_d_k / static_cast<double>(d_k),
       "Yours divides by d_k; the factor is 1/sqrt(d_k)."},
  };
  if (d_in != d_k) {
    wrong.push_back({right * sqrt_d_k / std::sqrt(static_cast<double>(d_in)),
                     "Yours divides by sqrt(d_in), the width of a token (d_model). The scale is "
                     "1/sqrt(d_k), d_k the width of a query and a key: W_q.rows()."});
  }
  return wrong;
}

// 1. By hand, with square weights (d_in = d_k = 2), so that X W_q without the transpose runs
// and gives other numbers. Tokens x_1 = (1, 0), x_2 = (0, 1), x_3 = (1, 1);
// W_q = [1 2; 0 1], W_k = [0 1; 2 0]. Row i of Q = X W_q^T is (x_i . (1, 2), x_i . (0, 1)):
// q_1 = (1, 0), q_2 = (2, 1), q_3 = (3, 1); of K = X W_k^T, (x_i . (0, 1), x_i . (2, 0)):
// k_1 = (0, 2), k_2 = (1, 0), k_3 = (1, 2). Q K^T = [0 1 1; 2 2 4; 2 3 5], then / sqrt(2).
// Without the transposes, X W_q rows are (1, 2), (0, 1), (1, 3) and X W_k rows (0, 1), (2, 0),
// (2, 1): (X W_q)(X W_k)^T = [2 2 4; 1 0 1; 3 2 5].
TEST(Exercise03Scores, SquareWeightsByHand) {
  MatrixD X(3, 2), W_q(2, 2), W_k(2, 2);  // [n x d_in], [d_k x d_in] twice
  X << 1, 0,                              //
      0, 1,                               //
      1, 1;
  W_q << 1, 2,  //
      0, 1;
  W_k << 0, 1,  //
      2, 0;
  MatrixD raw(3, 3), untransposed(3, 3);  // [n x n]: Q K^T and (X W_q)(X W_k)^T, above
  raw << 0, 1, 1,                         //
      2, 2, 4,                            //
      2, 3, 5;
  untransposed << 2, 2, 4,  //
      1, 0, 1,              //
      3, 2, 5;
  const double sqrt2 = std::sqrt(2.0);
  const MatrixD expected = raw / sqrt2;
  std::vector<WrongAnswer> wrong = wrong_scores(expected, 2, 2);
  wrong.push_back({untransposed / sqrt2,
                   "Yours multiplies X by W_q and W_k themselves. They are [d_k x d_in], one row "
                   "per output feature (torch.nn.Linear's layout): the row form is Q = X W_q^T, "
                   "K = X W_k^T. (Here d_in = d_k, so X W_q ran; otherwise it cannot.)"});
  const MatrixD yours = guarded(kScoresAbort, [&] { return exercise_scaled_scores(X, W_q, W_k); });
  const std::string problem =
      compare("S", yours, expected, wrong, score_shapes(2),
              "x_1 = (1, 0), x_2 = (0, 1), x_3 = (1, 1), W_q = [1 2; 0 1], W_k = [0 1; 2 0]: "
              "S = [0 1 1; 2 2 4; 2 3 5] / sqrt(2)");
  if (!problem.empty()) FAIL() << problem;
}

// 2. The chapter's worked example as rows (X_rows = X^T [4 x 3], d_in = 3, d_k = 2): the scores
// are Q_r K_r^T = Q^T K = A^T with A = K^T Q by hand above, divided by sqrt(2) (the chapter's
// --scale).
TEST(Exercise03Scores, WorkedExampleAsRows) {
  const Example e = worked_example();
  const MatrixD X_rows = e.X.transpose();                          // [n x d_in] = [4 x 3]
  const MatrixD expected = hand_A().transpose() / std::sqrt(2.0);  // [n x n]
  const MatrixD yours =
      guarded(kScoresAbort, [&] { return exercise_scaled_scores(X_rows, e.W_q, e.W_k); });
  const std::string problem =
      compare("S", yours, expected, wrong_scores(expected, 2, 3), score_shapes(2),
              "the chapter's worked example with tokens as rows: S = A^T / sqrt(2)");
  if (!problem.empty()) FAIL() << problem;
}

// 3. Random tokens, d_in = 5, d_k = 3, n = 4: the projections by the library's
// attn::linear_forward (x W^T, torch.nn.Linear's product), then every score by its definition,
// one dot product q_i . k_j / sqrt(d_k) at a time.
TEST(Exercise03Scores, MatchesQiDotKjOnRandomTokens) {
  const Index d_in = 5, d_k = 3, n = 4;
  attn::Rng rng(5);
  const MatrixD X = attn_test::normal_matrix(rng, n, d_in);  // [n x d_in]
  const MatrixD W_q = attn_test::normal_matrix(rng, d_k, d_in),
                W_k = attn_test::normal_matrix(rng, d_k, d_in);       // [d_k x d_in]
  const MatrixD Q = attn::linear_forward(attn::LinearD{W_q, {}}, X);  // [n x d_k]
  const MatrixD K = attn::linear_forward(attn::LinearD{W_k, {}}, X);  // [n x d_k]
  MatrixD expected(n, n);                                             // [n x n]
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < n; ++j) {
      expected(i, j) = Q.row(i).dot(K.row(j)) / std::sqrt(static_cast<double>(d_k));
    }
  }
  const MatrixD yours = guarded(kScoresAbort, [&] { return exercise_scaled_scores(X, W_q, W_k); });
  const std::string problem =
      compare("S", yours, expected, wrong_scores(expected, d_k, d_in), score_shapes(d_k),
              "random, d_in = 5, d_k = 3, n = 4: S(i, j) = q_i . k_j / sqrt(3)");
  if (!problem.empty()) FAIL() << problem;
}

// ---- Exercise 03.3: the row form, every query at once ---------------------------------------

const std::string kAttentionStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_attention_rows in "
    "chapters/03_vectorized_qkv/exercise/attention_rows.cpp.";

const std::string kAttentionAbort =
    "\n*** The program stopped inside exercise_attention_rows, most likely on a product whose "
    "inner sizes do not meet (Eigen's assertion above). S = Q K^T is [n_q x d_k] [d_k x n_k] and "
    "out = weights V is [n_q x n_k] [n_k x d_v]. K Q^T is [n_k x n_q]: times V, its inner sizes "
    "meet only when n_q = n_k.\n";

/// Attention by the formula with a given scale, the softmax along the rows or (a wrong answer)
/// down the columns: for the wrong answers.
MatrixD attend(const MatrixD& Q, const MatrixD& K, const MatrixD& V, double scale, bool by_rows) {
  const MatrixD S = Q * K.transpose() * scale;  // [n_q x n_k]
  return (by_rows ? softmax_rows(S) : softmax_cols(S)) * V;
}

std::vector<WrongAnswer> wrong_attention(const MatrixD& Q, const MatrixD& K, const MatrixD& V) {
  const double d_k = static_cast<double>(Q.cols()), right_scale = 1 / std::sqrt(d_k);
  std::vector<WrongAnswer> wrong = {
      {MatrixD::Zero(Q.rows(), V.cols()), kAttentionStub},
      {attend(Q, K, V, right_scale, false),
       "Yours takes the softmax down the columns of Q K^T, over the queries. Query i's weights "
       "are row i, its scores over the keys; each row must sum to 1 on its own."},
      {attend(Q, K, V, 1, true),
       "Yours forgets the scale: the scores are Q K^T / sqrt(d_k), d_k = the width of a query."},
      {attend(Q, K, V, 1 / d_k, true),
       "Yours divides the scores by d_k; the factor is 1/sqrt(d_k)."},
  };
  if (Q.rows() == K.rows()) {  // K Q^T times V: the inner sizes meet only then
    wrong.push_back({softmax_rows(K * Q.transpose() * right_scale) * V,
                     "Yours uses K Q^T, the scores transposed: row i holds key i's scores. The "
                     "weights are softmax(Q K^T / sqrt(d_k)), row i = query i over the keys."});
  }
  return wrong;
}

std::vector<ShapeHint> attention_shapes(Index n_q, Index n_k, Index d_v) {
  return {
      {n_q, n_k, "That is the shape of the weights: multiply them by V, out = weights V."},
      {d_v, n_q,
       "That is out^T, the column form's Y: in the row form each query's output is a row."},
  };
}

// 1. By hand: two queries, two keys, d_k = 4 so that 1/sqrt(d_k) = 0.5 exactly, d_v = 3.
// q_1 = (ln 3, ln 3, 0, 0), q_2 = (ln 2, ln 2, 2 ln 2, 2 ln 2); k_1 = (1, 1, 0, 0),
// k_2 = (0, 0, 1, 1); v_1 = (6, 0, 3), v_2 = (0, 12, 3).
//   Q K^T = [2 ln 3, 0; 2 ln 2, 4 ln 2], / 2: S = [ln 3, 0; ln 2, 2 ln 2]
//   row 1: e^S = (3, 1), weights (3/4, 1/4); row 2: e^S = (2, 4), weights (1/3, 2/3)
//   out_1 = 3/4 v_1 + 1/4 v_2 = (4.5, 3, 3), out_2 = 1/3 v_1 + 2/3 v_2 = (2, 8, 3)
// The wrong answers the same way: unscaled, weights (9/10, 1/10) and (1/5, 4/5); down the
// columns, column 1 (3, 2)/5 and column 2 (1, 4)/5; K Q^T, rows (3, 2)/5 and (1, 4)/5 (S is not
// symmetric, so that differs); / d_k, weights (sqrt 3, 1)/(sqrt 3 + 1) and (sqrt 2, 2)/(sqrt 2 +
// 2).
TEST(Exercise03Attention, TwoQueriesTwoKeysByHand) {
  const double ln2 = std::log(2.0), ln3 = std::log(3.0);
  MatrixD Q(2, 4), K(2, 4), V(2, 3);  // [n_q x d_k], [n_k x d_k], [n_k x d_v]
  Q << ln3, ln3, 0, 0,                //
      ln2, ln2, 2 * ln2, 2 * ln2;
  K << 1, 1, 0, 0,  //
      0, 0, 1, 1;
  V << 6, 0, 3,  //
      0, 12, 3;
  MatrixD expected(2, 3);  // [n_q x d_v], worked out above
  expected << 4.5, 3, 3,   //
      2, 8, 3;
  const MatrixD yours = guarded(kAttentionAbort, [&] { return exercise_attention_rows(Q, K, V); });
  const std::string problem = compare(
      "out", yours, expected, wrong_attention(Q, K, V), attention_shapes(2, 2, 3),
      "two queries, two keys, d_k = 4: weights (3/4, 1/4) and (1/3, 2/3), out (4.5, 3, 3) and "
      "(2, 8, 3)");
  if (!problem.empty()) FAIL() << problem;
}

// 2. Random, with n_q = 3 queries over n_k = 5 keys, d_k = 3, d_v = 2 (every size different,
// as in cross-attention): against attn::attention in double.
TEST(Exercise03Attention, MatchesTheLibrary) {
  const Index n_q = 3, n_k = 5, d_k = 3, d_v = 2;
  attn::Rng rng(7);
  const MatrixD Q = attn_test::normal_matrix(rng, n_q, d_k);  // [n_q x d_k]
  const MatrixD K = attn_test::normal_matrix(rng, n_k, d_k);  // [n_k x d_k]
  const MatrixD V = attn_test::normal_matrix(rng, n_k, d_v);  // [n_k x d_v]
  const MatrixD expected = attn::attention(Q, K, V).out;      // [n_q x d_v], scaled by 1/sqrt(3)
  const MatrixD yours = guarded(kAttentionAbort, [&] { return exercise_attention_rows(Q, K, V); });
  const std::string problem =
      compare("out", yours, expected, wrong_attention(Q, K, V), attention_shapes(n_q, n_k, d_v),
              "random, n_q = 3, n_k = 5, d_k = 3, d_v = 2: attn::attention(Q, K, V).out");
  if (!problem.empty()) FAIL() << problem;
}

// 3. A loop over the queries: row i of yours, all queries at once, must be what the library
// gives query i alone (attn::attention(Q.row(i), K, V)), and what yours gives it alone. A
// query's output depends on its own scores only; a softmax down the columns breaks exactly that.
TEST(Exercise03Attention, EachRowIsItsQueryAlone) {
  const Index n_q = 4, n_k = 6, d_k = 5, d_v = 3;
  attn::Rng rng(11);
  const MatrixD Q = attn_test::normal_matrix(rng, n_q, d_k);  // [n_q x d_k]
  const MatrixD K = attn_test::normal_matrix(rng, n_k, d_k);  // [n_k x d_k]
  const MatrixD V = attn_test::normal_matrix(rng, n_k, d_v);  // [n_k x d_v]
  const MatrixD all = guarded(kAttentionAbort, [&] { return exercise_attention_rows(Q, K, V); });
  if (all.rows() != n_q || all.cols() != d_v) {
    FAIL() << compare("out", all, MatrixD::Zero(n_q, d_v), {}, attention_shapes(n_q, n_k, d_v),
                      "n_q = 4, n_k = 6, d_k = 5, d_v = 3");
  }
  for (Index i = 0; i < n_q; ++i) {
    const MatrixD q = Q.row(i);                             // [1 x d_k]
    const MatrixD expected = attn::attention(q, K, V).out;  // [1 x d_v]
    const MatrixD alone =
        guarded(kAttentionAbort, [&] { return exercise_attention_rows(q, K, V); });
    std::vector<WrongAnswer> wrong = {
        {MatrixD::Zero(1, d_v), kAttentionStub},
        {V.colwise().sum(),
         "Yours, for one query alone, is the sum of all the value rows: every weight is 1. That "
         "is a softmax down each column of Q K^T, a column of one entry when there is one query. "
         "Take the softmax along each row: query i's scores over the keys."},
    };
    for (const WrongAnswer& w : wrong_attention(q, K, V)) wrong.push_back(w);  // the scales
    const std::string problem =
        compare("out for query " + std::to_string(i) + " alone", alone, expected, wrong,
                attention_shapes(1, n_k, d_v), "attn::attention(Q.row(i), K, V).out");
    if (!problem.empty()) FAIL() << problem;
    if (!close(all.row(i), alone)) {
      FAIL() << fmt::format(
          "Your row {} with all {} queries differs from your answer for query {} alone, by up to "
          "{:.3g}: yours lets the other queries change query {}'s output. Each row of the weights "
          "is the softmax of that query's own scores, over the keys.",
          i, n_q, i, (all.row(i) - alone).cwiseAbs().maxCoeff(), i);
    }
  }
}

}  // namespace exercise_03
