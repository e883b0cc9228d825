// Exercise 09: is your exercise_softmax_backward right? The task is in
// chapters/09_training/exercise/softmax_backward.cpp (and README.md beside it). Check it with
//
//   cmake --build build/release --target exercise_09
//   ctest --test-dir build/release -R Exercise09 --output-on-failure
//
// How these tests know the right dS without knowing your formula: they differentiate the forward
// pass numerically. For random scores S and a random G, the loss
//
//   L(S) = sum_ij softmax(S)_ij G_ij        (so dL/dP = G, exactly)
//
// is computed twice per score, with that score moved by +h and by -h, and
// (L(+h) - L(-h)) / 2h is dL/dS at that entry to about 1e-11 (central differences in double,
// attn::numeric_gradient, as the chapter checks every layer). Handed P = softmax(S) and dP = G,
// your function must return that dS.
//
// The course's own suite builds these same tests twice more: against a reference answer
// (tests/chapters/exercise_09_solution.cpp), which must pass them, and against the untouched stub,
// which must fail them. Your copy carries the label "exercise", which `ctest --preset release`
// leaves out: the stub fails by design.
#include "softmax_backward.hpp"

#include "attn/core/random.hpp"
#include "attn/ops/softmax.hpp"
#include "attn/training/gradient_check.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
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

MatrixD normal(attn::Rng& rng, Index rows, Index cols, double stddev) {
  MatrixD m(rows, cols);  // [rows x cols]
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < cols; ++c) m(r, c) = rng.normal(0.0, stddev);
  }
  return m;
}

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
  const MatrixD P = softmax_rows(normal(rng, 3, 5, 1.0));  // [n_q x n_k] = [3 x 5]
  const MatrixD dP = normal(rng, 3, 5, 1.0);               // [3 x 5]
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
    const MatrixD S = normal(rng, k.n_q, k.n_k, k.stddev);  // [n_q x n_k]
    const MatrixD G = normal(rng, k.n_q, k.n_k, 1.0);       // [n_q x n_k]: dL/dP
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
  MatrixD S = normal(rng, 3, 4, 1.0);  // [n_q x n_k] = [3 x 4]
  S(0, 2) = kBlocked;
  S(1, 0) = S(1, 3) = kBlocked;
  S.row(2).setConstant(kBlocked);
  const MatrixD G = normal(rng, 3, 4, 1.0);  // [3 x 4]
  const MatrixD P = softmax_rows(S);         // [3 x 4], exact zeros where S is -inf
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
  const MatrixD P = softmax_rows(normal(rng, 4, 6, 1.0));  // [n_q x n_k] = [4 x 6]
  const MatrixD dP = normal(rng, 4, 6, 1.0);               // [4 x 6]
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

}  // namespace
