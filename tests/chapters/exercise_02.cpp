// Exercises 02.1 to 02.3: are your scores of one query, stable softmax and weighted sum of the
// values right? The tasks are in chapters/02_attention_by_hand/exercise/ (README.md there lists
// them). Check them all with
//
//   cmake --build build/release --target exercise_02
//   ctest --test-dir build/release -R Exercise02 --output-on-failure
//
// or one at a time with -R Exercise02Scores, -R Exercise02Softmax or -R Exercise02Output.
//
// Where the expected values come from: the chapter's worked example (note 000's queries and
// values, the course's keys; chapters/02_attention_by_hand/README.md prints them, and
// tests/attn/ops/test_column_attention.cpp checks the library holds the same numbers), worked
// out by hand in the comments below; two identities of chapter 03, A = K^T Q and Y = V A', as
// Eigen's matrix products in double; and the library's double softmax, attn::softmax_inplace,
// which tests/attn/ops/test_softmax.cpp checks by hand and on overflowing inputs. Every
// comparison is in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_02_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "query_output.hpp"
#include "query_scores.hpp"
#include "stable_softmax.hpp"

#include "exercise_checks.hpp"

#include "attn/core/random.hpp"
#include "attn/ops/softmax.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace exercise_02 {

using attn::Index;
using attn::MatrixD;
using attn::VectorD;

/// How close counts as the same. Everything here is double, on numbers of size at most about
/// 1000: a right answer that sums in another order than the expected value, or divides where
/// it multiplies by a reciprocal, differs by a few ulps, under 1e-13 even at 1000. The wrong
/// answers these tests name are off by 1e-3 or more (the smallest: a weight of 0.0003 left
/// unnormalised, 0.0006). 1e-12 is far from both.
constexpr double kTolerance = 1e-12;

VectorD vector_of(std::initializer_list<double> entries) {
  VectorD v(static_cast<Index>(entries.size()));  // [n]
  Index j = 0;
  for (double e : entries) v(j++) = e;
  return v;
}

bool close(const VectorD& a, const VectorD& b) {
  return a.size() == b.size() && ((a - b).array().abs() <= kTolerance).all();
}

std::string vec_str(const VectorD& v) {
  std::string s = "(";
  for (Index j = 0; j < v.size(); ++j) s += fmt::format("{}{:.6g}", j ? ", " : "", v(j));
  return s + ")";
}

/// A usual wrong answer: what it gives on this case, and what to say when yours equals it.
struct WrongAnswer {
  VectorD value;
  std::string says;
};

/// "" when yours equals expected to kTolerance everywhere; otherwise, the size first, then the
/// worst entry and, when yours is one of the wrong answers (checked in order), what it is.
/// `size_says`: what a size of yours means, when it has a usual meaning. `non_finite_says`:
/// what NaN or inf in yours most likely means on this case.
std::string compare(const std::string& what, const VectorD& yours, const VectorD& expected,
                    const std::vector<WrongAnswer>& wrong, const std::string& which,
                    const std::string& size_says = "", const std::string& non_finite_says = "") {
  const bool plural = what.back() == 's';  // "scores", "weights"; not "output"
  if (yours.size() != expected.size()) {
    return fmt::format("Your {} {} {} entries, but {} must have {} ({}).{}", what,
                       plural ? "have" : "has", yours.size(), plural ? "they" : "it",
                       expected.size(), which, size_says.empty() ? "" : "\n" + size_says);
  }
  if (close(yours, expected)) return "";
  Index worst_j = 0;
  double worst = -1;
  for (Index j = 0; j < yours.size(); ++j) {
    const double error = std::abs(yours(j) - expected(j));
    if (!(error <= worst)) {  // NaN ranks first
      worst = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
      worst_j = j;
    }
  }
  std::string message =
      fmt::format("Your {} {} at entry {}: yours {:.6g}, expected {:.6g} ({}).\nYours:    "
                  "{}\nExpected: {}",
                  what, plural ? "differ" : "differs", worst_j, yours(worst_j), expected(worst_j),
                  which, vec_str(yours), vec_str(expected));
  for (const WrongAnswer& w : wrong) {
    if (close(yours, w.value)) return message + "\n" + w.says;
  }
  if (!yours.allFinite()) {
    message += "\nYours holds NaN or inf." + (non_finite_says.empty() ? "" : " " + non_finite_says);
  }
  return message;
}

/// Eigen checks every index in these programs (tests/CMakeLists.txt builds them without
/// NDEBUG), so a column or row past the end stops the program inside your function, with
/// Eigen's assertion. Before it goes, it says what that most likely means for the exercise
/// being called.
const char* volatile abort_text = "";

extern "C" void explain_abort(int) {
  const char* text = abort_text;
  std::size_t length = 0;
  while (text[length] != '\0') ++length;
  const ssize_t written = write(2, text, length);
  static_cast<void>(written);  // nothing to do if stderr is gone
}

/// Calls `answer` with explain_abort installed, saying `text` if it stops the program.
template <typename Answer>
VectorD guarded(const char* text, Answer answer) {
  abort_text = text;
  const auto previous = std::signal(SIGABRT, explain_abort);
  VectorD yours = answer();
  std::signal(SIGABRT, previous);
  return yours;
}

// ---- The chapter's worked example (chapters/02_attention_by_hand/README.md) -------------------

/// Q [d_k x n] = [2 x 4]: note 000's queries q^1 = (1, 2), q^2 = (3, 1), q^3 = (3, 0),
/// q^4 = (2, 6) as columns.
MatrixD page_Q() {
  MatrixD Q(2, 4);  // [d_k x n], column i = q^i
  Q << 1, 3, 3, 2,  //
      2, 1, 0, 6;
  return Q;
}

/// K [d_k x n] = [2 x 4]: the course's keys k^1 = (0, 0.5), k^2 = (-1, 2), k^3 = (0, 1.5),
/// k^4 = (-4.5, 3.25) as columns.
MatrixD page_K() {
  MatrixD K(2, 4);      // [d_k x n], column j = k^j
  K << 0, -1, 0, -4.5,  //
      0.5, 2, 1.5, 3.25;
  return K;
}

/// A [n x n] = [4 x 4], the page's scores: A(j, i) = alpha_{i,j} = q^i . k^j, column i = query i.
/// Column 2 (i = 1), for instance: 3*0 + 1*0.5 = 0.5, 3*(-1) + 1*2 = -1, 3*0 + 1*1.5 = 1.5,
/// 3*(-4.5) + 1*3.25 = -10.25. Every entry is a multiple of 1/4, exact in double.
MatrixD page_A() {
  MatrixD A(4, 4);    // [n_k x n_q]
  A << 1, 0.5, 0, 3,  //
      3, -1, -3, 10,  //
      3, 1.5, 0, 9,   //
      2, -10.25, -13.5, 10.5;
  return A;
}

/// V [d_v x n] = [2 x 4]: the chapter's values v^1 = (1, 0), v^2 = (3, 2), v^3 = (3, 0),
/// v^4 = (2, 9) as columns (W_v keeps the first two features of each x^i).
MatrixD page_V() {
  MatrixD V(2, 4);  // [d_v x n], column j = v^j
  V << 1, 3, 3, 2,  //
      0, 2, 0, 9;
  return V;
}

/// Query 2's weights, by hand as on the page: m = 1.5, the exponents are -1, -2.5, 0, -11.75,
/// their sum is 1.4500, and the weights are (0.2537, 0.0566, 0.6897, 0.0000).
VectorD page_query2_weights() {
  const double sum = std::exp(-1.0) + std::exp(-2.5) + 1.0 + std::exp(-11.75);
  return vector_of({std::exp(-1.0) / sum, std::exp(-2.5) / sum, 1.0 / sum, std::exp(-11.75) / sum});
}

// ---- Exercise 02.1: one query's scores --------------------------------------------------------

const std::string kScoresStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_query_scores in "
    "chapters/02_attention_by_hand/exercise/query_scores.cpp.";

constexpr const char* kScoresAbort =
    "\n*** The program stopped inside exercise_query_scores, most likely on an index out of "
    "range: tokens are columns here, so q^i is Q.col(i) and k^j is K.col(j), with "
    "j = 0 .. K.cols() - 1 (did you take rows?).\n";

VectorD your_scores(const MatrixD& Q, const MatrixD& K, Index i, bool scale) {
  return guarded(kScoresAbort, [&] { return exercise_query_scores(Q, K, i, scale); });
}

/// The usual wrong answers for query i with keys of width d_k, given A = K^T Q [n_k x n_q],
/// unscaled.
std::vector<WrongAnswer> wrong_scores(const MatrixD& A, Index i, bool scale, Index d_k) {
  const double root = std::sqrt(static_cast<double>(d_k));
  const VectorD column = A.col(i);  // [n_k], unscaled
  std::vector<WrongAnswer> wrong = {{VectorD::Zero(A.rows()), kScoresStub}};
  if (A.rows() == A.cols()) {
    const VectorD row = A.row(i).transpose();  // [n_q]: q^j . k^i, query j against key i
    wrong.push_back({scale ? VectorD(row / root) : row,
                     "Yours is row i of A, q^j . k^i for every j: query j against key i. The "
                     "scores of query i are column i, alpha_{i,j} = q^i . k^j: q^i is Q.col(i), "
                     "and j runs over the keys, K.col(j)."});
  }
  if (scale) {
    wrong.push_back(
        {column, fmt::format("Yours are not scaled: with scale true, divide every score by "
                             "sqrt(d_k) = sqrt({}).",
                             d_k)});
    wrong.push_back({column / static_cast<double>(d_k),
                     fmt::format("Yours divides by d_k = {}: the scale is 1 / sqrt(d_k), "
                                 "1 / sqrt({}).",
                                 d_k, d_k)});
  } else {
    wrong.push_back({column / root,
                     "Yours divides by sqrt(d_k) with scale false: the notes' scores, and this "
                     "chapter's by default, are the plain dot products. Scale only when asked."});
  }
  if (i + 1 < A.cols()) {
    const VectorD next = A.col(i + 1);  // [n_k]
    wrong.push_back({scale ? VectorD(next / root) : next,
                     "Yours are the scores of query i + 1: indices count from 0 in the code, so "
                     "the page's query 2 is i = 1, Q.col(1)."});
  }
  return wrong;
}

// 1. By hand: every column of the page's A, query 2 (i = 1) first, as the page writes it out:
// (0.5, -1, 1.5, -10.25). Then queries 1, 3 and 4: (1, 3, 3, 2), (0, -3, 0, -13.5) and
// (3, 10, 9, 10.5). Unscaled, as the notes and the chapter's default.
TEST(Exercise02Scores, EveryColumnOfThePagesA) {
  const MatrixD Q = page_Q(), K = page_K(), A = page_A();
  for (Index i : {1, 0, 2, 3}) {
    const std::string problem =
        compare("scores", your_scores(Q, K, i, false), A.col(i), wrong_scores(A, i, false, 2),
                fmt::format("the page's query {} (i = {}), scale false: column {} of its A", i + 1,
                            i, i + 1),
                "There is one score per key: K.cols() entries.");
    if (!problem.empty()) FAIL() << problem;
  }
}

// 2. Scaled: the page's query 2 with scale true, d_k = 2: (0.5, -1, 1.5, -10.25) / sqrt(2) =
// (0.353553, -0.707107, 1.06066, -7.24784). Then random queries and keys of width d_k = 3, with
// 5 queries and 7 keys (so the count of keys, not of queries, sets the length), scaled and
// not: the expected column is column i of K^T Q (chapter 03's A = K^T Q, a matrix product in
// double), divided by sqrt(3) when scaled.
TEST(Exercise02Scores, ScaledByRootDkAndOnePerKey) {
  {
    const MatrixD Q = page_Q(), K = page_K(), A = page_A();
    const VectorD expected = A.col(1) / std::sqrt(2.0);  // [4]
    const std::string problem =
        compare("scores", your_scores(Q, K, 1, true), expected, wrong_scores(A, 1, true, 2),
                "the page's query 2 (i = 1), scale true: its column of A / sqrt(2)");
    if (!problem.empty()) FAIL() << problem;
  }
  const Index d_k = 3, n_q = 5, n_k = 7;
  attn::Rng rng(2);
  const MatrixD Q = attn_test::normal_matrix(rng, d_k, n_q, 1.0);  // [d_k x n_q], column i = q^i
  const MatrixD K = attn_test::normal_matrix(rng, d_k, n_k, 1.0);  // [d_k x n_k], column j = k^j
  const MatrixD A = K.transpose() * Q;  // [n_k x n_q], A(j, i) = q^i . k^j
  for (bool scale : {true, false}) {
    for (Index i : {0, 3, 4}) {
      const VectorD expected = scale ? VectorD(A.col(i) / std::sqrt(3.0)) : VectorD(A.col(i));
      const std::string problem = compare(
          "scores", your_scores(Q, K, i, scale), expected, wrong_scores(A, i, scale, d_k),
          fmt::format("random Q [3 x 5] and K [3 x 7], query i = {}, scale {}", i, scale),
          "There is one score per key, K.cols() = 7 of them, not one per query (Q.cols() = 5).");
      if (!problem.empty()) FAIL() << problem;
    }
  }
}

// ---- Exercise 02.2: the stable softmax --------------------------------------------------------

const std::string kSoftmaxStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_stable_softmax in "
    "chapters/02_attention_by_hand/exercise/stable_softmax.cpp.";

constexpr const char* kSoftmaxAbort =
    "\n*** The program stopped inside exercise_stable_softmax, most likely on an index out of "
    "range: the scores and the weights have scores.size() entries, 0 .. size() - 1.\n";

VectorD your_softmax(const VectorD& scores) {
  return guarded(kSoftmaxAbort, [&] { return exercise_stable_softmax(scores); });
}

/// The usual wrong answers for `scores`.
std::vector<WrongAnswer> wrong_softmaxes(const VectorD& scores) {
  const double m = scores.maxCoeff();
  const VectorD shifted = (scores.array() - m).exp().matrix();  // [n], e_j = exp(z_j - m)
  const VectorD unshifted = scores.array().exp().matrix();      // [n], exp(z_j): may be inf
  // When the sum of the unshifted exp(z_j) is inf, shifted / that sum is all zeros, as the stub.
  const std::string zeros_say =
      std::isfinite(unshifted.sum())
          ? kSoftmaxStub
          : kSoftmaxStub + " If not: exp(z_j - m) divided by the sum of the unshifted exp(z_j), "
                           "which is inf here, gives 0. Divide by the sum of the shifted ones.";
  return {
      {VectorD::Zero(scores.size()), zeros_say},
      {shifted,
       "Yours is exp(z_j - m) without dividing by their sum: the largest weight is 1 and they "
       "sum to more than 1. Divide each by the sum of all of them."},
      {shifted / unshifted.sum(),
       "Yours subtracts m in the numerator but divides by the sum of the unshifted exp(z_j): "
       "both need the same shift, or the factor exp(-m) does not cancel."},
      {unshifted / shifted.sum(),
       "Yours divides the unshifted exp(z_j) by the sum of the shifted exp(z_j - m): both need "
       "the same shift, or the factor exp(-m) does not cancel."},
      {scores / scores.sum(),
       "Yours divides the scores by their sum, without exp: the weights must be exp of each "
       "score, normalised, and so always positive."},
  };
}

// 1. By hand, the page's two worked columns. Query 2: scores (0.5, -1, 1.5, -10.25), m = 1.5,
// exponents -1, -2.5, 0, -11.75, sum 1.4500, weights (0.2537, 0.0566, 0.6897, 0.0000).
// Query 4 (pen-and-paper exercise 4 below the checked ones): scores (3, 10, 9, 10.5),
// m = 10.5, exponents -7.5, -0.5, -1.5, 0, sum 1.830214, weights (0.000302, 0.331399, 0.121915,
// 0.546384). The expected values are those exps divided by their sum, in double.
TEST(Exercise02Softmax, ThePagesColumnsByHand) {
  const double sum4 = std::exp(-7.5) + std::exp(-0.5) + std::exp(-1.5) + 1.0;
  const VectorD query4 =
      vector_of({std::exp(-7.5) / sum4, std::exp(-0.5) / sum4, std::exp(-1.5) / sum4, 1 / sum4});
  struct Case {
    VectorD scores, expected;
    std::string which;
  };
  for (const Case& c :
       {Case{vector_of({0.5, -1, 1.5, -10.25}), page_query2_weights(),
             "the page's query 2, scores (0.5, -1, 1.5, -10.25)"},
        Case{vector_of({3, 10, 9, 10.5}), query4, "the page's query 4, scores (3, 10, 9, 10.5)"}}) {
    const std::string problem =
        compare("weights", your_softmax(c.scores), c.expected, wrong_softmaxes(c.scores), c.which,
                "There is one weight per score.");
    if (!problem.empty()) FAIL() << problem;
  }
}

// 2. Scores too large or too small for the naive formula. In double, exp(x) is inf above
// x = 709.78 and 0 below about -745.13 (subnormals included). By hand:
//   (1003, 1010, 1009, 1010.5): query 4's scores + 1000. m = 1010.5, the exponents are those of
//     query 4 (-7.5, -0.5, -1.5, 0), so the weights are query 4's. Naive: exp(1003) = inf,
//     inf / inf = NaN.
//   (-1003, -1010, -1009, -1010.5): m = -1003, exponents 0, -7, -6, -7.5. Naive: every
//     exp(z_j) underflows to 0, and 0 / 0 = NaN.
//   (-320, 400, 399): m = 400, exponents -720, 0, -1, weights (e^-720 / s, 1 / s, e^-1 / s),
//     s = 1 + e^-1 + e^-720, with e^-720 = 1.9e-313 (a subnormal; any value below 1e-12 is
//     within the tolerance). Naive works here (exp(400) = 5e173 is finite); subtracting the
//     smallest score instead of the largest gives exp(720) = inf.
TEST(Exercise02Softmax, LargeScoresDoNotOverflow) {
  auto weights_of = [](std::initializer_list<double> exponents) {
    VectorD e = vector_of(exponents).array().exp().matrix();  // [n]
    return VectorD(e / e.sum());
  };
  struct Case {
    VectorD scores, expected;
    std::string which, non_finite_says;
  };
  const std::vector<Case> cases = {
      {vector_of({1003, 1010, 1009, 1010.5}), weights_of({-7.5, -0.5, -1.5, 0}),
       "query 4's scores + 1000: the same weights as query 4's",
       "exp(1003) overflows double (it is inf above exp(709.78)), and inf / inf is NaN: that is "
       "the naive exp(z_j) / sum exp(z_k). Subtract the largest score m first: then every "
       "exponent is at most 0 and the largest is exactly 0."},
      {vector_of({-1003, -1010, -1009, -1010.5}), weights_of({0, -7, -6, -7.5}),
       "scores near -1000",
       "exp(-1003) underflows to 0 in double, so every term and their sum are 0, and 0 / 0 is "
       "NaN: that is the naive exp(z_j) / sum exp(z_k). Subtract the largest score m first: "
       "then the largest exponent is exactly 0, and the sum is at least 1."},
      {vector_of({-320, 400, 399}), weights_of({-720, 0, -1}), "scores (-320, 400, 399)",
       "Did you subtract the smallest score instead of the largest? exp(400 - (-320)) = "
       "exp(720) overflows double. Subtract the largest, m = 400: every exponent is then at "
       "most 0."},
  };
  for (const Case& c : cases) {
    const std::string problem =
        compare("weights", your_softmax(c.scores), c.expected, wrong_softmaxes(c.scores), c.which,
                "There is one weight per score.", c.non_finite_says);
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. Random scores against the library's softmax in double (attn::softmax_inplace, checked by
// tests/attn/ops/test_softmax.cpp), at three lengths and shifted by 0, +800 and -800: the
// weights may not move with the shift, and the naive formula breaks on both shifts.
TEST(Exercise02Softmax, MatchesTheLibraryOnRandomRows) {
  attn::Rng rng(22);
  for (Index n : {5, 1, 9}) {
    const MatrixD draw =
        attn_test::normal_matrix(rng, n, 1, 4.0);  // [n x 1], scores of spread about 4
    for (double shift : {0.0, 800.0, -800.0}) {
      const VectorD scores = draw.col(0).array() + shift;  // [n]
      VectorD expected = scores;                           // [n], softmax'd in place below
      attn::softmax_inplace(std::span<double>(expected.data(), static_cast<std::size_t>(n)));
      const std::string problem = compare(
          "weights", your_softmax(scores), expected, wrong_softmaxes(scores),
          fmt::format("{} random scores of spread about 4, shifted by {:+g}: scores {}", n, shift,
                      vec_str(scores)),
          "There is one weight per score.",
          shift == 0.0 ? ""
                       : "exp of scores near +-800 overflows (above 709.78) or underflows to 0: "
                         "subtract the largest score before exp.");
      if (!problem.empty()) FAIL() << problem;
    }
  }
}

// ---- Exercise 02.3: one query's output --------------------------------------------------------

const std::string kOutputStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_query_output in "
    "chapters/02_attention_by_hand/exercise/query_output.cpp.";

constexpr const char* kOutputAbort =
    "\n*** The program stopped inside exercise_query_output, most likely on an index out of "
    "range: tokens are columns here, so v^j is V.col(j), with j = 0 .. V.cols() - 1, and y has "
    "V.rows() entries (did you take v^j as a row of V?).\n";

VectorD your_output(const MatrixD& V, const VectorD& weights) {
  return guarded(kOutputAbort, [&] { return exercise_query_output(V, weights); });
}

/// The usual wrong answers for these values and weights.
std::vector<WrongAnswer> wrong_outputs(const MatrixD& V, const VectorD& weights) {
  const VectorD all = V.rowwise().sum();  // [d_v], sum_j v^j, no weights
  std::vector<WrongAnswer> wrong = {
      {VectorD::Zero(V.rows()), kOutputStub},
      {all, "Yours is the plain sum of the values, sum_j v^j: multiply each v^j by its weight "
            "alpha'_j first."},
      {all / static_cast<double>(V.cols()),
       "Yours is the mean of the values: each v^j must count with its own weight alpha'_j."},
  };
  if (std::abs(weights.sum() - 1.0) > kTolerance) {
    wrong.push_back({V * weights / weights.sum(),
                     fmt::format("Yours divides by the sum of the weights ({:.6g} here): take "
                                 "them as given. The weighted sum does not rescale them; a "
                                 "softmax's weights already sum to 1, and note 000's do not.",
                                 weights.sum())});
  }
  if (V.rows() == V.cols()) {
    wrong.push_back({V.transpose() * weights,
                     "Yours takes v^j as row j of V: the row convention of chapter 04 on. In "
                     "this chapter tokens are columns, so v^j is V.col(j)."});
  }
  return wrong;
}

// 1. By hand, with square V [3 x 3], so that rows of V would give an answer of the right size:
// v^1 = (1, 0, 4), v^2 = (2, 1, 0), v^3 = (0, 3, 1) (the columns), w = (0.5, 0.25, 0.125):
// y = 0.5 (1, 0, 4) + 0.25 (2, 1, 0) + 0.125 (0, 3, 1) = (1, 0.625, 2.125), exact in double.
// (Rows would give 0.5 (1, 2, 0) + 0.25 (0, 1, 3) + 0.125 (4, 0, 1) = (1, 1.25, 0.875).) First
// in its suite: in a non-square V, rows stop the program on an index out of range.
TEST(Exercise02Output, ValuesAreColumnsByHand) {
  MatrixD V(3, 3);  // [d_v x n_k], column j = v^j
  V << 1, 2, 0,     //
      0, 1, 3,      //
      4, 0, 1;
  const VectorD w = vector_of({0.5, 0.25, 0.125});  // [n_k]
  const std::string problem =
      compare("output", your_output(V, w), vector_of({1, 0.625, 2.125}), wrong_outputs(V, w),
              "V [3 x 3] with columns v^1 = (1, 0, 4), v^2 = (2, 1, 0), v^3 = (0, 3, 1), weights "
              "(0.5, 0.25, 0.125)",
              "y has one entry per feature of a value: V.rows() = 3.");
  if (!problem.empty()) FAIL() << problem;
}

// 2. By hand, note 000's own example: v^1 = (1, 0), v^2 = (0, 2), v^3 = (3, 0), v^4 = (0, 4),
// and its four illustrative weight columns. Query 2's, (0.1, 0.2, 0.3, 0.4):
// y^2 = (0.1 + 0.9, 0.4 + 1.6) = (1, 2). Then (0.1, 0, 0, 0) -> (0.1, 0), (0, 0, 0.3, 0) ->
// (0.9, 0), (0, 0, 0, 0.4) -> (0, 1.6): columns that do not sum to 1, as the note's do not.
TEST(Exercise02Output, NoteExampleByHand) {
  MatrixD V_note(2, 4);  // [d_v x n], column j = v^j
  V_note << 1, 0, 3, 0,  //
      0, 2, 0, 4;
  struct Case {
    VectorD weights, expected;
    std::string which;
  };
  const std::vector<Case> cases = {
      {vector_of({0.1, 0.2, 0.3, 0.4}), vector_of({1, 2}),
       "note 000's values, weights (0.1, 0.2, 0.3, 0.4): y^2 = (1, 2)"},
      {vector_of({0.1, 0, 0, 0}), vector_of({0.1, 0}),
       "note 000's values, weights (0.1, 0, 0, 0): y^1 = 0.1 v^1 = (0.1, 0)"},
      {vector_of({0, 0, 0.3, 0}), vector_of({0.9, 0}),
       "note 000's values, weights (0, 0, 0.3, 0): y^3 = 0.3 v^3 = (0.9, 0)"},
      {vector_of({0, 0, 0, 0.4}), vector_of({0, 1.6}),
       "note 000's values, weights (0, 0, 0, 0.4): y^4 = 0.4 v^4 = (0, 1.6)"},
  };
  for (const Case& c : cases) {
    const std::string problem = compare(
        "output", your_output(V_note, c.weights), c.expected, wrong_outputs(V_note, c.weights),
        c.which, "y has one entry per feature of a value: V.rows() = 2, not one per token.");
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. By hand, the page's y^2 with the chapter's values v^1 = (1, 0), v^2 = (3, 2), v^3 = (3, 0),
// v^4 = (2, 9) and query 2's softmax weights w (page_query2_weights):
// y^2 = (w1 + 3 w2 + 3 w3 + 2 w4, 2 w2 + 9 w4) = (2.4926, 0.1133).
TEST(Exercise02Output, ThePagesQuery2) {
  const MatrixD V = page_V();
  const VectorD w = page_query2_weights();  // [4]
  const VectorD expected = vector_of({w(0) + 3 * w(1) + 3 * w(2) + 2 * w(3), 2 * w(1) + 9 * w(3)});
  const std::string problem =
      compare("output", your_output(V, w), expected, wrong_outputs(V, w),
              "the page's y^2: query 2's weights (0.2537, 0.0566, 0.6897, 0.0000) on the "
              "chapter's values",
              "y has one entry per feature of a value: V.rows() = 2, not one per token.");
  if (!problem.empty()) FAIL() << problem;
}

// 4. Random values and weights, expected y = V w (chapter 03's Y = V A', one column of it, a
// matrix product in double). First V [3 x 3], square, where taking rows of V for the values
// gives an answer of the right size but the wrong value (V^T w); then V [2 x 5], d_v != n_k.
// The weights are drawn in (0, 1) and do not sum to 1.
TEST(Exercise02Output, MatchesTheMatrixProduct) {
  attn::Rng rng(23);
  for (const auto& [d_v, n_k] : std::vector<std::pair<Index, Index>>{{3, 3}, {2, 5}}) {
    const MatrixD V = attn_test::normal_matrix(rng, d_v, n_k, 1.0);  // [d_v x n_k], column j = v^j
    VectorD w(n_k);                                                  // [n_k], one weight per value
    for (Index j = 0; j < n_k; ++j) w(j) = rng.uniform(0.05, 0.95);
    const VectorD expected = V * w;  // [d_v]
    const std::string problem = compare(
        "output", your_output(V, w), expected, wrong_outputs(V, w),
        fmt::format("random V [{} x {}], weights {}", d_v, n_k, vec_str(w)),
        fmt::format("y has one entry per feature of a value: V.rows() = {}, not one per token "
                    "(V.cols() = {}).",
                    d_v, n_k));
    if (!problem.empty()) FAIL() << problem;
  }
}

}  // namespace exercise_02
