// Exercises 09.1 to 09.3: are your softmax backward, linear-layer backward and Adam step right?
// The tasks are in chapters/09_training/exercise/ (README.md there lists them). Check them all
// with
//
//   cmake --build build/release --target exercise_09
//   ctest --test-dir build/release -R Exercise09 --output-on-failure
//
// or one at a time with -R "Exercise09\." (the softmax), -R Exercise09Linear or -R Exercise09Adam.
//
// How these tests know the right answers without knowing your formulas:
//
// 09.1 and 09.2 differentiate the forward pass numerically. For random inputs and a random G,
// the loss L = sum_ij Y_ij G_ij (Y = softmax(S) row by row for 09.1, Y = X W^T + b for 09.2; so
// dL/dY = G exactly) is computed twice per input entry, with that entry moved by +h and by -h,
// and (L(+h) - L(-h)) / 2h is the gradient at that entry to 1e-10 or better (central differences in
// double, attn::numeric_gradient, as the chapter checks every layer). 09.2 is also compared with
// attn::linear_backward (tests/attn/layers/test_linear.cpp checks it against PyTorch's autograd
// and by hand) and with a case worked by hand below.
//
// 09.3 runs the library's attn::AdamD on the same parameters and gradients
// (tests/attn/training/test_optim.cpp checks it against torch.optim.Adam, bit for bit in float),
// and a first step worked by hand below.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: the tests compute those wrong answers too and compare yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_09_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "adam_step.hpp"
#include "linear_backward.hpp"
#include "softmax_backward.hpp"

#include "exercise_checks.hpp"

#include "attn/core/random.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/ops/softmax.hpp"
#include "attn/training/gradient_check.hpp"
#include "attn/training/optim.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using attn::Index;
using attn::MatrixD;

constexpr double kBlocked = -std::numeric_limits<double>::infinity();

/// How close counts as the same. On these cases a right answer in double agrees with the
/// numerical gradient to 2e-11 at worst, one computed in float inside to 4e-8 (measured); the
/// usual mistakes are off by 5e-3 or more. 1e-6, the chapter's own bar, is far from both.
constexpr double kTolerance = attn::kGradientCheckTolerance;
static_assert(kTolerance == 1e-6, "the messages below say 1e-6");

/// P = softmax(S), row by row, in double. A row of only -inf (a query with no allowed key) gives
/// zeros, as everywhere in the course.
MatrixD softmax_rows(MatrixD S) {
  for (Index i = 0; i < S.rows(); ++i) {
    attn::softmax_inplace(std::span<double>(S.row(i).data(), static_cast<std::size_t>(S.cols())));
  }
  return S;
}

/// dL/dS by central differences, for L = sum(softmax(S) * G). A blocked score stays -inf however
/// far it is moved (and -inf + h x inf is NaN), so it is not perturbed: its gradient is 0.
MatrixD numerical_dS(const MatrixD& S, const MatrixD& G) {
  std::vector<std::pair<Index, Index>> finite;  // the (i, j) of every score that is not -inf
  for (Index i = 0; i < S.rows(); ++i) {
    for (Index j = 0; j < S.cols(); ++j) {
      if (S(i, j) != kBlocked) finite.emplace_back(i, j);
    }
  }
  MatrixD free(1, static_cast<Index>(finite.size()));  // [1 x #finite]: what is perturbed
  for (std::size_t k = 0; k < finite.size(); ++k) {
    free(0, static_cast<Index>(k)) = S(finite[k].first, finite[k].second);
  }
  const MatrixD d_free = attn::numeric_gradient(free, [&] {
    MatrixD moved = S;  // [n_q x n_k]
    for (std::size_t k = 0; k < finite.size(); ++k) {
      moved(finite[k].first, finite[k].second) = free(0, static_cast<Index>(k));
    }
    return (softmax_rows(moved).array() * G.array()).sum();
  });
  MatrixD dS = MatrixD::Zero(S.rows(), S.cols());  // [n_q x n_k]
  for (std::size_t k = 0; k < finite.size(); ++k) {
    dS(finite[k].first, finite[k].second) = d_free(0, static_cast<Index>(k));
  }
  return dS;
}

/// "" when yours has P's shape, otherwise what is wrong with it.
std::string shape_problem(const MatrixD& yours, const MatrixD& P) {
  if (yours.rows() == P.rows() && yours.cols() == P.cols()) return "";
  return fmt::format(
      "Your dS is [{} x {}], but it must have the shape of P and dP, [{} x {}] (n_q x n_k): one "
      "gradient per score",
      yours.rows(), yours.cols(), P.rows(), P.cols());
}

bool close(const MatrixD& a, const MatrixD& b) {
  return ((a - b).array().abs() <= kTolerance).all();
}

/// "" when yours equals the numerical gradient to 1e-6 at every entry; otherwise the worst entry,
/// how many are off, and, when yours is one of the usual wrong answers, which one.
std::string gradient_problem(const MatrixD& yours, const MatrixD& expected, const MatrixD& P,
                             const MatrixD& dP, const std::string& which) {
  if (std::string shape = shape_problem(yours, P); !shape.empty()) return shape;
  Index off = 0, worst_i = 0, worst_j = 0;
  double worst = -1;
  for (Index i = 0; i < yours.rows(); ++i) {
    for (Index j = 0; j < yours.cols(); ++j) {
      const double error = std::abs(yours(i, j) - expected(i, j));
      const double rank = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
      if (!(error <= kTolerance)) ++off;
      if (rank > worst) {
        worst = rank;
        worst_i = i;
        worst_j = j;
      }
    }
  }
  if (off == 0) return "";
  std::string message = fmt::format(
      "Your dS differs from the numerical gradient at ({}, {}): yours {:.6g}, expected {:.6g}\n"
      "{} of {} entries are off by more than 1e-6 ({}).",
      worst_i, worst_j, yours(worst_i, worst_j), expected(worst_i, worst_j), off, yours.size(),
      which);
  const MatrixD p_times_dp = P.cwiseProduct(dP);  // [n_q x n_k]
  const MatrixD plain_sum =                       // [n_q x n_k]: P * (dP - rowsum(dP))
      (P.array() * (dP.array().colwise() - dP.array().rowwise().sum())).matrix();
  if (yours.isZero(0.0)) {
    message += "\nYour dS is all zeros: is this still the stub? Write the body of "
               "exercise_softmax_backward in chapters/09_training/exercise/softmax_backward.cpp.";
  } else if (close(yours, p_times_dp)) {
    message +=
        "\nYour dS is P * dP, entry by entry: that is the diag(p) part of the Jacobian alone. "
        "The - p p^T part is missing.";
  } else if (close(yours, -expected)) {
    message += "\nYour dS is the right one with the opposite sign.";
  } else if (close(yours, plain_sum)) {
    message +=
        "\nYour dS subtracts the plain sum of each row of dP. Work out p p^T dp again: the sum "
        "inside it is a weighted one.";
  } else if (yours.array().isNaN().any()) {
    message +=
        "\nYour dS holds NaN. P has exact zeros (blocked keys): never divide by P or take its "
        "log; the formula needs neither.";
  }
  return message;
}

// 1. One gradient per score: dS has the shape of S, which is the shape of P and dP.
TEST(Exercise09, ShapeIsThatOfP) {
  attn::Rng rng(9);
  const MatrixD P =
      softmax_rows(attn_test::normal_matrix(rng, 3, 5, 1.0));   // [n_q x n_k] = [3 x 5]
  const MatrixD dP = attn_test::normal_matrix(rng, 3, 5, 1.0);  // [3 x 5]
  const std::string problem = shape_problem(exercise_softmax_backward(P, dP), P);
  if (!problem.empty()) FAIL() << problem;
}

// 2. The test that decides: your dS against central differences of the forward, on random rows
// of three kinds (more keys than queries, more queries than keys, and sharp rows where one
// weight is near 1, as after training).
TEST(Exercise09, MatchesTheNumericalGradient) {
  struct Case {
    Index n_q, n_k;
    double stddev;  // of the scores: 4 makes most rows sharp
  };
  const std::vector<Case> cases = {{3, 5, 1.0}, {4, 2, 1.0}, {2, 6, 4.0}};
  attn::Rng rng(2026);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    const MatrixD S = attn_test::normal_matrix(rng, k.n_q, k.n_k, k.stddev);  // [n_q x n_k]
    const MatrixD G = attn_test::normal_matrix(rng, k.n_q, k.n_k, 1.0);       // [n_q x n_k]: dL/dP
    const std::string which = fmt::format("case {} of {}: n_q = {}, n_k = {}, scores ~ N(0, {}^2)",
                                          c + 1, cases.size(), k.n_q, k.n_k, k.stddev);
    const MatrixD P = softmax_rows(S);  // [n_q x n_k]
    const std::string problem =
        gradient_problem(exercise_softmax_backward(P, G), numerical_dS(S, G), P, G, which);
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. Masks: a blocked key's score is -inf and its weight exactly 0. Moving a -inf score leaves
// it -inf, so the loss does not change and the gradient is exactly 0, not merely small. Row 0
// blocks one key, row 1 two, and row 2 every key (a query with no allowed key: P's row is 0).
TEST(Exercise09, BlockedKeysGetExactlyZero) {
  attn::Rng rng(5);
  MatrixD S = attn_test::normal_matrix(rng, 3, 4, 1.0);  // [n_q x n_k] = [3 x 4]
  S(0, 2) = kBlocked;
  S(1, 0) = S(1, 3) = kBlocked;
  S.row(2).setConstant(kBlocked);
  const MatrixD G = attn_test::normal_matrix(rng, 3, 4, 1.0);  // [3 x 4]
  const MatrixD P = softmax_rows(S);  // [3 x 4], exact zeros where S is -inf
  const MatrixD yours = exercise_softmax_backward(P, G);
  if (std::string shape = shape_problem(yours, P); !shape.empty()) FAIL() << shape;
  for (Index i = 0; i < S.rows(); ++i) {
    for (Index j = 0; j < S.cols(); ++j) {
      if (S(i, j) != kBlocked || yours(i, j) == 0.0) continue;
      FAIL() << fmt::format(
          "Your dS at ({}, {}) is {:.6g}, but key {} is blocked for query {}{} (score -inf, "
          "weight P({}, {}) = 0 exactly): its gradient must be exactly 0.{}",
          i, j, yours(i, j), j, i, i == 2 ? ", as every key is for this query" : "", i, j,
          std::isnan(yours(i, j)) ? "\nNever divide by P or take its log: the formula needs "
                                    "neither, and P is 0 here."
                                  : "");
    }
  }
  const std::string problem = gradient_problem(
      yours, numerical_dS(S, G), P, G, "blocked keys at (0, 2), (1, 0), (1, 3) and all of row 2");
  if (!problem.empty()) FAIL() << problem;
}

// 4. Every row of dS sums to 0. Adding the same number c to every score of a row changes no
// weight (the factor e^c cancels), so the loss does not move in that direction, and the row sum
// of dS is exactly the loss's slope in that direction. In the formula: each row of
// diag(p) - p p^T sums to p_j - p_j sum(p) = 0, because a row of weights sums to 1. A necessary
// condition only: the stub's zeros meet it too. Test 2 is the one that decides.
TEST(Exercise09, EveryRowSumsToZero) {
  attn::Rng rng(17);
  const MatrixD P =
      softmax_rows(attn_test::normal_matrix(rng, 4, 6, 1.0));   // [n_q x n_k] = [4 x 6]
  const MatrixD dP = attn_test::normal_matrix(rng, 4, 6, 1.0);  // [4 x 6]
  const MatrixD yours = exercise_softmax_backward(P, dP);
  if (std::string shape = shape_problem(yours, P); !shape.empty()) FAIL() << shape;
  for (Index i = 0; i < yours.rows(); ++i) {
    const double sum = yours.row(i).sum();
    if (std::abs(sum) <= kTolerance) continue;
    FAIL() << fmt::format(
        "Row {} of your dS sums to {:.6g}, but every row must sum to 0: adding the same number to "
        "every score of a row does not change its softmax, so the loss cannot change either "
        "(each row of the Jacobian diag(p) - p p^T sums to 0 because sum(p) = 1).",
        i, sum);
  }
}

// ---- Exercise 09.2: the backward pass of a linear layer -------------------------------------

/// How close counts as the same, against the hand-worked case and against the library. Every
/// entry is a sum of at most 5 products of numbers below 4 in size: a right answer that sums in
/// another order differs by a few ulps of 10, about 1e-15 (measured: 9e-16 against the
/// library); the wrong answers named below are off by 0.4 or more at their worst entry. 1e-12 is
/// far from both. (Against central differences the bar is the chapter's 1e-6, kTolerance
/// above: L is linear in each of X, W and b, so only rounding is left, 4e-11 at worst here.)
constexpr double kLinearTolerance = 1e-12;
static_assert(kLinearTolerance == 1e-12, "the messages below say 1e-12");

const std::string kLinearStub =
    "Your dX, dW and db are all zeros: is this still the stub? Write the body of "
    "exercise_linear_backward in chapters/09_training/exercise/linear_backward.cpp.";

std::string shape_str(const MatrixD& m) { return fmt::format("[{} x {}]", m.rows(), m.cols()); }

/// "" when yours has the shapes of X, W and b; otherwise what is wrong, naming the usual
/// mistakes of layout.
std::string linear_shape_problem(const ExerciseLinearGradients& yours, const MatrixD& X,
                                 const MatrixD& W) {
  const Index n = X.rows(), in = X.cols(), out = W.rows();
  if (yours.dX.rows() != n || yours.dX.cols() != in) {
    return fmt::format(
        "Your dX is {}, but it must have X's shape, [{} x {}] (n x in): one gradient per entry "
        "of X. dX = dY W is [n x out] times [out x in].",
        shape_str(yours.dX), n, in);
  }
  if (yours.dW.rows() != out || yours.dW.cols() != in) {
    std::string message = fmt::format(
        "Your dW is {}, but it must have W's shape, [{} x {}] (out x in): one gradient per "
        "weight.",
        shape_str(yours.dW), out, in);
    if (yours.dW.rows() == in && yours.dW.cols() == out) {
      message +=
          " Yours is [in x out], the shape of X^T dY: the right numbers, transposed. W is stored "
          "[out x in], one row per output feature, as PyTorch stores it, so dW = dY^T X.";
    }
    return message;
  }
  if (yours.db.rows() != 1 || yours.db.cols() != out) {
    std::string message = fmt::format(
        "Your db is {}, but it must have the bias's shape, [1 x {}] (1 x out): one gradient per "
        "output feature.",
        shape_str(yours.db), out);
    if (yours.db.rows() == n && yours.db.cols() == out) {
      message +=
          " Yours has one row per token, like dY: the bias is added to every row of Y, so its "
          "gradient is the sum of dY over the rows (dY.colwise().sum()).";
    } else if (yours.db.rows() == n && yours.db.cols() == 1) {
      message += " Yours has one number per token: you summed each row of dY, over the output "
                 "features. Sum over the tokens instead, down each column (dY.colwise().sum()).";
    } else if (yours.db.rows() == out && yours.db.cols() == 1) {
      message += " Yours is a column: make it a row, as the bias is stored.";
    }
    return message;
  }
  return "";
}

/// A usual wrong value of one gradient: what it gives on this case, and what to say when yours
/// equals it.
struct WrongGradient {
  MatrixD value;
  std::string says;
};

bool close_to(const MatrixD& a, const MatrixD& b, double tolerance) {
  return a.rows() == b.rows() && a.cols() == b.cols() && ((a - b).array().abs() <= tolerance).all();
}

/// "" when yours equals expected to `tolerance`; otherwise its worst entry and, when yours is one
/// of the wrong values, which one. Shapes have been checked.
std::string value_problem(const std::string& what, const MatrixD& yours, const MatrixD& expected,
                          const std::vector<WrongGradient>& wrong, double tolerance,
                          const std::string& which) {
  Index off = 0, worst_r = 0, worst_c = 0;
  double worst = -1;
  for (Index r = 0; r < yours.rows(); ++r) {
    for (Index c = 0; c < yours.cols(); ++c) {
      const double error = std::abs(yours(r, c) - expected(r, c));
      const double rank = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
      if (!(error <= tolerance)) ++off;
      if (rank > worst) {
        worst = rank;
        worst_r = r;
        worst_c = c;
      }
    }
  }
  if (off == 0) return "";
  std::string message =
      fmt::format("Your {} differs at ({}, {}): yours {:.6g}, expected {:.6g}\n"
                  "{} of {} entries are off by more than {} ({}).",
                  what, worst_r, worst_c, yours(worst_r, worst_c), expected(worst_r, worst_c), off,
                  yours.size(), tolerance == kTolerance ? "1e-6" : "1e-12", which);
  for (const WrongGradient& w : wrong) {
    if (close_to(yours, w.value, tolerance)) return message + "\n" + w.says;
  }
  if (yours.array().isNaN().any()) message += "\nYours holds NaN.";
  return message;
}

/// "" when all three gradients equal the expected ones; otherwise what is wrong with the first
/// that does not, naming the usual wrong answers.
std::string linear_problem(const ExerciseLinearGradients& yours,
                           const ExerciseLinearGradients& expected, const MatrixD& X,
                           const MatrixD& W, const MatrixD& dY, double tolerance,
                           const std::string& which) {
  if (std::string shape = linear_shape_problem(yours, X, W); !shape.empty()) return shape;
  const bool all_zero = yours.dX.isZero(0.0) && yours.dW.isZero(0.0) && yours.db.isZero(0.0);
  if (all_zero && !(expected.dX.isZero(0.0) && expected.dW.isZero(0.0))) {
    return fmt::format("Your dX, dW and db differ from the expected ones ({}).\n{}", which,
                       kLinearStub);
  }
  const double n = static_cast<double>(X.rows());
  std::vector<WrongGradient> wrong_dX, wrong_dW, wrong_db;
  if (W.rows() == W.cols()) {  // square W: the transposes have the right shape
    wrong_dX.push_back({dY * W.transpose(),
                        "Yours is dY W^T. W is [out x in] and Y = X W^T, so X(r, a) meets W(c, a) "
                        "in Y(r, c): dX = dY W."});
    wrong_dW.push_back({X.transpose() * dY,
                        "Yours is X^T dY, the transpose of dW (here W is square, so the shape "
                        "did not tell). W is stored [out x in], so dW = dY^T X."});
  }
  if (X.rows() > 1) {
    wrong_dW.push_back({dY.transpose() * X / n,
                        "Yours is dY^T X divided by the number of tokens: the mean over the batch. "
                        "dW is a sum over the tokens; if the loss is a mean, its 1/N is already in "
                        "dY."});
    wrong_db.push_back({dY.colwise().sum() / n,
                        "Yours is the mean of dY's rows. The bias is added to every row, so its "
                        "gradient is their sum; if the loss is a mean, its 1/N is already in dY."});
    wrong_db.push_back({dY.topRows(1),
                        "Yours is the first row of dY alone. The bias is added to every row, so "
                        "its gradient is the sum of all of dY's rows."});
  }
  wrong_dX.push_back({-expected.dX, "Yours is the right dX with the opposite sign."});
  wrong_dW.push_back({-expected.dW, "Yours is the right dW with the opposite sign."});
  if (std::string p = value_problem("dX", yours.dX, expected.dX, wrong_dX, tolerance, which);
      !p.empty()) {
    return p;
  }
  if (std::string p = value_problem("dW", yours.dW, expected.dW, wrong_dW, tolerance, which);
      !p.empty()) {
    return p;
  }
  return value_problem("db", yours.db, expected.db, wrong_db, tolerance, which);
}

/// dL/dX, dL/dW and dL/db by central differences, for L = sum((X W^T + b) * G).
ExerciseLinearGradients numerical_linear(MatrixD X, MatrixD W, MatrixD b, const MatrixD& G) {
  const auto loss = [&] {
    const MatrixD Y = (X * W.transpose()).rowwise() + b.row(0);  // [n x out]
    return (Y.array() * G.array()).sum();
  };
  MatrixD dX = attn::numeric_gradient(X, loss);  // [n x in]
  MatrixD dW = attn::numeric_gradient(W, loss);  // [out x in]
  MatrixD db = attn::numeric_gradient(b, loss);  // [1 x out]
  return {dX, dW, db};
}

// 1. Shapes first: one gradient per entry of what it is the gradient of. n = 3 tokens, in = 4,
// out = 2, three different numbers, so a transposed or unsummed answer shows in its shape.
TEST(Exercise09Linear, GradientsHaveTheShapesOfXWAndB) {
  attn::Rng rng(92);
  const MatrixD X = attn_test::normal_matrix(rng, 3, 4, 1.0);   // [n x in]
  const MatrixD W = attn_test::normal_matrix(rng, 2, 4, 1.0);   // [out x in]
  const MatrixD dY = attn_test::normal_matrix(rng, 3, 2, 1.0);  // [n x out]
  const std::string problem = linear_shape_problem(exercise_linear_backward(X, W, dY), X, W);
  if (!problem.empty()) FAIL() << problem;
}

// 2. By hand: n = 2 tokens, in = 3, out = 2.
//
//   X = [[1, 2, 0], [0, 1, -1]]   W = [[1, 0, 2], [-1, 1, 0]]   dY = [[1, 0], [2, -1]]
//
//   dX = dY W:   row 0 = 1 (1, 0, 2) + 0 (-1, 1, 0)            = (1, 0, 2)
//                row 1 = 2 (1, 0, 2) - 1 (-1, 1, 0)            = (3, -1, 4)
//   dW = dY^T X: row 0 = 1 (1, 2, 0) + 2 (0, 1, -1)            = (1, 4, -2)
//                row 1 = 0 (1, 2, 0) - 1 (0, 1, -1)            = (0, -1, 1)
//   db = the sum of dY's rows = (1 + 2, 0 - 1)                 = (3, -1)
TEST(Exercise09Linear, TwoTokensByHand) {
  MatrixD X(2, 3), W(2, 3), dY(2, 2);  // [n x in], [out x in], [n x out]
  X << 1, 2, 0, 0, 1, -1;
  W << 1, 0, 2, -1, 1, 0;
  dY << 1, 0, 2, -1;
  ExerciseLinearGradients expected{MatrixD(2, 3), MatrixD(2, 3), MatrixD(1, 2)};
  expected.dX << 1, 0, 2, 3, -1, 4;
  expected.dW << 1, 4, -2, 0, -1, 1;
  expected.db << 3, -1;
  const std::string problem =
      linear_problem(exercise_linear_backward(X, W, dY), expected, X, W, dY, kLinearTolerance,
                     "X = [[1, 2, 0], [0, 1, -1]], W = [[1, 0, 2], [-1, 1, 0]], "
                     "dY = [[1, 0], [2, -1]]: dX = [[1, 0, 2], [3, -1, 4]], "
                     "dW = [[1, 4, -2], [0, -1, 1]], db = [3, -1]");
  if (!problem.empty()) FAIL() << problem;
}

// 3. The test that decides: against central differences of the forward, on three random cases
// (more inputs than outputs; a square W, where a transposed dW or dX has the right shape; one
// token alone).
TEST(Exercise09Linear, MatchesTheNumericalGradient) {
  struct Case {
    Index n, in, out;
  };
  const std::vector<Case> cases = {{3, 4, 2}, {4, 3, 3}, {1, 5, 3}};
  attn::Rng rng(2027);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    const MatrixD X = attn_test::normal_matrix(rng, k.n, k.in, 1.0);    // [n x in]
    const MatrixD W = attn_test::normal_matrix(rng, k.out, k.in, 1.0);  // [out x in]
    const MatrixD b = attn_test::normal_matrix(rng, 1, k.out, 1.0);     // [1 x out]
    const MatrixD G = attn_test::normal_matrix(rng, k.n, k.out, 1.0);   // [n x out]: dL/dY
    const std::string which = fmt::format("case {} of {}: n = {}, in = {}, out = {}", c + 1,
                                          cases.size(), k.n, k.in, k.out);
    const std::string problem =
        linear_problem(exercise_linear_backward(X, W, G), numerical_linear(X, W, b, G), X, W, G,
                       kTolerance, which);
    if (!problem.empty()) FAIL() << problem;
  }
}

// 4. Against the library's attn::linear_backward, which the chapter's models train with, on a
// larger random case with a bias (n = 5, in = 6, out = 4).
TEST(Exercise09Linear, MatchesLinearBackward) {
  attn::Rng rng(29);
  const MatrixD X = attn_test::normal_matrix(rng, 5, 6, 1.0);   // [n x in]
  const MatrixD dY = attn_test::normal_matrix(rng, 5, 4, 1.0);  // [n x out]
  const attn::LinearD layer{attn_test::normal_matrix(rng, 4, 6, 1.0),
                            attn::RowVectorD(attn_test::normal_matrix(rng, 1, 4, 1.0))};
  attn::LinearD grads = attn::zeros_like(layer);  // weight [out x in], bias [1 x out], zeros
  const MatrixD dX = attn::linear_backward<double>(layer, X, dY, grads);  // [n x in]
  const ExerciseLinearGradients expected{dX, grads.weight, MatrixD(grads.bias)};
  const std::string problem =
      linear_problem(exercise_linear_backward(X, layer.weight, dY), expected, X, layer.weight, dY,
                     kLinearTolerance, "n = 5, in = 6, out = 4, against attn::linear_backward");
  if (!problem.empty()) FAIL() << problem;
}

// ---- Exercise 09.3: one step of Adam --------------------------------------------------------

/// How close counts as the same, relative to the largest entry of the tensor compared (p, m or
/// v: |p| is about 1, but v is about 1e-12 when the gradients are about 1e-6, so an absolute
/// bar would not do). A right answer in double rounds a dozen operations per entry and step,
/// in another order than the library (which fuses two multiply-adds, optim.hpp), so the two
/// differ by a few ulps (measured: 9e-16 relative at worst over the five steps); the wrong answers
/// named below are off by 2e-4 relative or more at the step that catches them. 1e-10 is far
/// from both. (eps inside the root is within 2e-11 of the right answer on gradients of size 1,
/// where eps = 1e-9 is nothing next to them: the case of gradients of size 1e-6 catches it.)
constexpr double kAdamTolerance = 1e-10;

/// One parameter tensor and Adam's two moments for it.
struct AdamState {
  MatrixD p, m, v;  // each [rows x cols], the parameter's shape
};

/// The usual mistakes, each made on purpose to recognise yours.
enum class AdamSlip {
  no_bias_correction,  // p -= lr m / (sqrt(v) + eps)
  eps_inside_root,     // p -= lr / bc1 m / sqrt(v / bc2 + eps)
  betas_swapped,       // m = (1 - beta1) m + beta1 g, and the same for v
  old_moments,         // p moved with the moments of the step before
  wrong_sign,          // p += ... : along the gradient
};

/// One step of Adam with `slip` made. Not the right answer: every variant is wrong.
void slipped_adam_step(AdamSlip slip, AdamState& s, const MatrixD& g, Index t, double lr,
                       double beta1, double beta2, double eps) {
  const double bc1 = 1 - std::pow(beta1, static_cast<double>(t));
  const double bc2 = 1 - std::pow(beta2, static_cast<double>(t));
  const MatrixD m_old = s.m, v_old = s.v;  // [rows x cols] each
  const bool swapped = slip == AdamSlip::betas_swapped;
  const double keep1 = swapped ? 1 - beta1 : beta1, keep2 = swapped ? 1 - beta2 : beta2;
  s.m = (keep1 * s.m.array() + (1 - keep1) * g.array()).matrix();
  s.v = (keep2 * s.v.array() + (1 - keep2) * g.array().square()).matrix();
  const MatrixD& m = slip == AdamSlip::old_moments ? m_old : s.m;
  const MatrixD& v = slip == AdamSlip::old_moments ? v_old : s.v;
  MatrixD step;  // [rows x cols]: what is subtracted from p
  if (slip == AdamSlip::no_bias_correction) {
    step = (lr * m.array() / (v.array().sqrt() + eps)).matrix();
  } else if (slip == AdamSlip::eps_inside_root) {
    step = (lr / bc1 * m.array() / (v.array() / bc2 + eps).sqrt()).matrix();
  } else {
    step = (lr / bc1 * m.array() / (v.array().sqrt() / std::sqrt(bc2) + eps)).matrix();
  }
  s.p = slip == AdamSlip::wrong_sign ? MatrixD(s.p + step) : MatrixD(s.p - step);
}

std::string slip_message(AdamSlip slip) {
  switch (slip) {
    case AdamSlip::no_bias_correction:
      return "Yours leaves out the bias corrections. m and v start at 0, so in the first steps "
             "they are too small by the factors 1 - beta1^t and 1 - beta2^t: divide lr by "
             "1 - beta1^t and sqrt(v) by sqrt(1 - beta2^t).";
    case AdamSlip::eps_inside_root:
      return "Yours puts eps inside the square root, sqrt(v / (1 - beta2^t) + eps): another "
             "optimiser, which barely moves an entry whose gradient is small next to sqrt(eps). "
             "torch (and the page) add eps outside: sqrt(v) / sqrt(1 - beta2^t) + eps.";
    case AdamSlip::betas_swapped:
      return "Your m and v weight the new gradient by beta and the old mean by 1 - beta. It is "
             "the other way round: m = beta1 m + (1 - beta1) g keeps most of the old mean.";
    case AdamSlip::old_moments:
      return "Yours moves p with the moments of the step before: update m and v first, then p "
             "with the new ones (on step 1 yours left p where it was).";
    case AdamSlip::wrong_sign:
      return "Yours moves p along the gradient, uphill: Adam steps against it, p = p - ....";
  }
  return "";
}

constexpr AdamSlip kSlips[] = {AdamSlip::no_bias_correction, AdamSlip::eps_inside_root,
                               AdamSlip::betas_swapped, AdamSlip::old_moments,
                               AdamSlip::wrong_sign};

/// Whether a equals b to kAdamTolerance times the largest |entry| of b (exactly, when b is 0).
bool adam_close(const MatrixD& a, const MatrixD& b) {
  const double bar = kAdamTolerance * b.cwiseAbs().maxCoeff();
  return a.rows() == b.rows() && a.cols() == b.cols() && ((a - b).array().abs() <= bar).all();
}

bool adam_close(const AdamState& a, const AdamState& b) {
  return adam_close(a.p, b.p) && adam_close(a.m, b.m) && adam_close(a.v, b.v);
}

/// "" when yours equals expected after step t; otherwise what is wrong, and, when yours is one
/// of `slips` (each the state that mistake leads to), which one. `before` is yours before it.
std::string adam_problem(const AdamState& yours, const AdamState& before, const AdamState& expected,
                         const std::vector<std::pair<AdamSlip, AdamState>>& slips, Index t,
                         const std::string& which) {
  const std::pair<const char*, const MatrixD*> tensors[] = {
      {"m", &yours.m}, {"v", &yours.v}, {"p", &yours.p}};
  const MatrixD* wanted[] = {&expected.m, &expected.v, &expected.p};
  for (int k = 0; k < 3; ++k) {
    const MatrixD& y = *tensors[k].second;
    if (y.rows() == wanted[k]->rows() && y.cols() == wanted[k]->cols()) continue;
    return fmt::format(
        "After step {}, your {} is {}, but it must keep its shape, {}: Adam updates every entry "
        "in place, one by one ({}).",
        t, tensors[k].first, shape_str(y), shape_str(*wanted[k]), which);
  }
  if (adam_close(yours, expected)) return "";
  std::string message;
  for (int k = 0; k < 3; ++k) {  // m and v first: p's update is made of them
    const MatrixD& y = *tensors[k].second;
    const MatrixD& e = *wanted[k];
    if (adam_close(y, e)) continue;
    Index worst_r = 0, worst_c = 0;
    double worst = -1;
    for (Index r = 0; r < y.rows(); ++r) {
      for (Index c = 0; c < y.cols(); ++c) {
        const double error = std::abs(y(r, c) - e(r, c));
        const double rank = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
        if (rank > worst) {
          worst = rank;
          worst_r = r;
          worst_c = c;
        }
      }
    }
    message = fmt::format("After step {}, your {} differs at ({}, {}): yours {:.9g}, expected "
                          "{:.9g} ({}).",
                          t, tensors[k].first, worst_r, worst_c, y(worst_r, worst_c),
                          e(worst_r, worst_c), which);
    break;
  }
  if (yours.p == before.p && yours.m == before.m && yours.v == before.v) {
    return message +
           "\nYour p, m and v are exactly as they were passed in: is this still the stub? Write "
           "the body of exercise_adam_step in chapters/09_training/exercise/adam_step.cpp.";
  }
  for (const auto& [slip, state] : slips) {
    if (adam_close(yours, state)) return message + "\n" + slip_message(slip);
  }
  if ((yours.v.array() < 0).any() || yours.v.array().isNaN().any()) {
    message += "\nYour v has a negative entry (or NaN), and its square root is NaN. v is a running "
               "mean of g^2, never negative: square g before averaging it.";
  } else if (yours.p.array().isNaN().any() || yours.m.array().isNaN().any()) {
    message += "\nYours holds NaN.";
  }
  return message;
}

/// One run of Adam: the starting parameter, the gradient and the lr of every step.
struct AdamRun {
  MatrixD p0;                  // [rows x cols]
  std::vector<MatrixD> grads;  // one per step, [rows x cols] each
  std::vector<double> lrs;     // one per step: a schedule
  double beta1, beta2, eps;
  std::string which;
};

/// "" when your steps give the library's p, m and v after every step of `run`.
std::string adam_run_problem(const AdamRun& run) {
  // The library's Adam, on a linear layer without bias whose weight is the parameter.
  attn::LinearD model{run.p0, attn::RowVectorD()};
  attn::LinearD grads = attn::zeros_like(model);
  attn::AdamD opt({.lr = run.lrs[0], .betas = {run.beta1, run.beta2}, .eps = run.eps});

  const MatrixD zeros = MatrixD::Zero(run.p0.rows(), run.p0.cols());  // [rows x cols]
  AdamState yours{run.p0, zeros, zeros};
  std::vector<std::pair<AdamSlip, AdamState>> slips;
  for (AdamSlip slip : kSlips) slips.push_back({slip, {run.p0, zeros, zeros}});

  for (std::size_t s = 0; s < run.grads.size(); ++s) {
    const Index t = static_cast<Index>(s) + 1;
    const MatrixD& g = run.grads[s];
    grads.weight = g;
    opt.set_lr(run.lrs[s]);
    opt.step(attn::parameters(model), attn::parameters(grads));
    const AdamState expected{model.weight, opt.state()[0].exp_avg, opt.state()[0].exp_avg_sq};

    for (auto& [slip, state] : slips) {
      slipped_adam_step(slip, state, g, t, run.lrs[s], run.beta1, run.beta2, run.eps);
    }
    const AdamState before = yours;
    exercise_adam_step(yours.p, g, yours.m, yours.v, t, run.lrs[s], run.beta1, run.beta2, run.eps);
    if (std::string problem = adam_problem(yours, before, expected, slips, t, run.which);
        !problem.empty()) {
      return problem;
    }
  }
  return "";
}

// 1. Step 1 by hand. p = (1, -2, 0.5, 3), g = (0.25, -0.75, 1.75, 0), lr = 0.1,
// beta1 = 0.9, beta2 = 0.999, and eps = 0.25 (large, so that it shows in the numbers):
//
//   m = 0.9 * 0 + 0.1 g                = (0.025, -0.075, 0.175, 0)
//   v = 0.999 * 0 + 0.001 g^2          = (6.25e-5, 5.625e-4, 3.0625e-3, 0)
//   1 - beta1^1 = 0.1, so m / 0.1 = g;   1 - beta2^1 = 0.001, so sqrt(v) / sqrt(0.001) = |g|
//   step = 0.1 g / (|g| + 0.25)        = (0.025 / 0.5, -0.075 / 1, 0.175 / 2, 0 / 0.25)
//                                      = (0.05, -0.075, 0.0875, 0)
//   p - step                           = (0.95, -1.925, 0.4125, 3)
//
// The entry with no gradient stays where it is (0 / (0 + eps) = 0).
TEST(Exercise09Adam, StepOneByHand) {
  MatrixD p0(1, 4), g(1, 4);  // [1 x 4] each
  p0 << 1, -2, 0.5, 3;
  g << 0.25, -0.75, 1.75, 0;
  AdamState expected{MatrixD(1, 4), MatrixD(1, 4), MatrixD(1, 4)};
  expected.p << 0.95, -1.925, 0.4125, 3;
  expected.m << 0.025, -0.075, 0.175, 0;
  expected.v << 6.25e-5, 5.625e-4, 3.0625e-3, 0;
  const double lr = 0.1, beta1 = 0.9, beta2 = 0.999, eps = 0.25;

  const MatrixD zeros = MatrixD::Zero(1, 4);  // [1 x 4]
  std::vector<std::pair<AdamSlip, AdamState>> slips;
  for (AdamSlip slip : kSlips) {
    AdamState state{p0, zeros, zeros};
    slipped_adam_step(slip, state, g, 1, lr, beta1, beta2, eps);
    slips.push_back({slip, state});
  }
  AdamState yours{p0, zeros, zeros};
  const AdamState before = yours;
  exercise_adam_step(yours.p, g, yours.m, yours.v, 1, lr, beta1, beta2, eps);
  const std::string problem =
      adam_problem(yours, before, expected, slips, 1,
                   "p = (1, -2, 0.5, 3), g = (0.25, -0.75, 1.75, 0), lr = 0.1, betas (0.9, "
                   "0.999), eps = 0.25: expected p = (0.95, -1.925, 0.4125, 3)");
  if (!problem.empty()) FAIL() << problem;
}

// 2. The test that decides: five steps against the library's attn::AdamD, with the lr changing
// every step as a schedule makes it, on a [3 x 4] parameter. Two cases: the chapter's optimiser
// (betas (0.9, 0.98), eps 1e-9) on gradients of size 1, and torch's defaults (betas (0.9,
// 0.999), eps 1e-8) on gradients of size 1e-6, where eps inside the root would show.
TEST(Exercise09Adam, FiveStepsMatchTheLibrarysAdam) {
  attn::Rng rng(93);
  const std::vector<double> lrs = {1e-3, 2e-3, 3e-3, 2.5e-3, 1.5e-3};  // warm-up, then decay
  for (const auto& [gradient_size, beta2, eps, which] :
       {std::tuple{1.0, 0.98, 1e-9,
                   "case 1 of 2: the chapter's betas (0.9, 0.98), eps 1e-9, "
                   "gradients ~ N(0, 1)"},
        std::tuple{1e-6, 0.999, 1e-8,
                   "case 2 of 2: torch's betas (0.9, 0.999), eps 1e-8, "
                   "gradients ~ N(0, 1e-12)"}}) {
    AdamRun run{
        attn_test::normal_matrix(rng, 3, 4, 1.0), {}, lrs, 0.9, beta2, eps, which};  // p0 [3 x 4]
    for (std::size_t s = 0; s < lrs.size(); ++s) {
      run.grads.push_back(attn_test::normal_matrix(rng, 3, 4, gradient_size));  // [3 x 4]
    }
    if (std::string problem = adam_run_problem(run); !problem.empty()) FAIL() << problem;
  }
}

// 3. The page's promise: on step 1, m / (1 - beta1) = g and v / (1 - beta2) = g^2, so every
// entry moves by lr g / (|g| + eps), about lr against its gradient's sign, whatever its size:
// here gradients from 1e-6 to 1e4 (torch's defaults, lr = 0.01) move every entry of a zero
// parameter by between 0.0099 and 0.01. Computed by hand from that formula; the relative error of
// the formula itself, from rounding 1 - beta and back, is about 1e-16.
TEST(Exercise09Adam, StepOneMovesEveryEntryByAboutLr) {
  MatrixD g(2, 3);  // [2 x 3]
  g << 1e-6, -1e-3, 1.0, -30.0, 1e4, -2.5e-5;
  const double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  const MatrixD zeros = MatrixD::Zero(2, 3);  // [2 x 3]
  AdamState expected{
      (-lr * g.array() / (g.array().abs() + eps)).matrix(),  // p = 0 - lr g / (|g| + eps)
      ((1 - beta1) * g.array()).matrix(),                    // m = (1 - beta1) g
      ((1 - beta2) * g.array().square()).matrix()};          // v = (1 - beta2) g^2
  std::vector<std::pair<AdamSlip, AdamState>> slips;
  for (AdamSlip slip : kSlips) {
    AdamState state{zeros, zeros, zeros};
    slipped_adam_step(slip, state, g, 1, lr, beta1, beta2, eps);
    slips.push_back({slip, state});
  }
  AdamState yours{zeros, zeros, zeros};
  const AdamState before = yours;
  exercise_adam_step(yours.p, g, yours.m, yours.v, 1, lr, beta1, beta2, eps);
  const std::string problem = adam_problem(
      yours, before, expected, slips, 1,
      "p = 0, g from 1e-6 to 1e4, lr = 0.01, torch's betas and eps: every entry should move by "
      "about 0.01 against its gradient's sign");
  if (!problem.empty()) FAIL() << problem;
}

}  // namespace
