// Exercises 01.1 to 01.3: are your RNN step, forward pass over a sequence and Jacobian
// d a_T / d x_1 right? The tasks are in chapters/01_rnn/exercise/ (README.md there lists them).
// Check them all with
//
//   cmake --build build/release --target exercise_01
//   ctest --test-dir build/release -R Exercise01 --output-on-failure
//
// or one at a time with -R Exercise01Step, -R Exercise01Forward or -R Exercise01Jacobian.
//
// Where the expected values come from: small cases worked out by hand (the arithmetic is written
// out beside each), the page's own pen-and-paper exercise (a_1 = tanh 1, a_2 = tanh(-tanh 1)),
// and the library's functions, which its suite checks independently of this file, in
// tests/attn/layers/test_rnn.cpp: attn::rnn_forward (against torch.nn.RNN's fixtures, and in
// double against the float step, ForwardEqualsStepByStep), attn::input_jacobians (against
// torch.autograd, JacobiansMatchTorchAutograd) and attn::input_jacobian_central_difference
// (against input_jacobians, JacobianMatchesCentralDifferences). Every comparison is in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong answers,
// which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_01_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "jacobian_to_first_input.hpp"
#include "rnn_forward.hpp"
#include "rnn_step.hpp"

#include "exercise_checks.hpp"

#include "attn/core/random.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/layers/rnn.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

namespace exercise_01 {

using attn::Index;
using attn::MatrixD;
using attn::RnnCellD;

/// How close counts as the same. Everything here is double, on states in (-1, 1) and Jacobian
/// entries below 10: a right answer that adds in another order than the library, or calls another
/// tanh, differs by a few ulps per operation, and the longest chain here (6 steps of [5 x 5]
/// products) stays below 1e-14. The wrong answers these tests name are off by 4e-4 or more
/// (measured; the hand cases by 0.1 or more) wherever they differ from the right one at all (at
/// T = 1 some coincide with it, and the right answer is checked first). 1e-12 is far from both.
constexpr double kTolerance = 1e-12;

/// Central differences with eps = 1e-4 are off by eps^2/6 |a'''| (truncation) plus ~1e-16/eps
/// (the double rounding of O(1) states, divided by 2 eps): measured under 1e-9 of the largest
/// entry (the chapter prints 8.6e-10; tests/attn/layers/test_rnn.cpp checks 1e-7 over three
/// seeds). 1e-6 of the largest entry leaves a margin of 1000; a wrong factor anywhere in the chain
/// is off by tens of percent.
constexpr double kFiniteDifference = 1e-6;

bool close(const MatrixD& a, const MatrixD& b, double tolerance) {
  return a.rows() == b.rows() && a.cols() == b.cols() && ((a - b).array().abs() <= tolerance).all();
}

/// A usual wrong answer: what it gives on this case, and what to say when yours equals it.
struct WrongAnswer {
  MatrixD value;
  std::string says;
};

/// A usual wrong shape, and what it most likely means.
struct WrongShape {
  Index rows, cols;
  std::string says;
};

/// "" when yours equals expected to `tolerance` everywhere; otherwise its shape or its worst
/// entry, and, when yours is one of the wrong shapes or answers (checked in order), what it is.
std::string compare(const std::string& what, const MatrixD& yours, const MatrixD& expected,
                    const std::vector<WrongAnswer>& wrong, const std::string& which,
                    const std::vector<WrongShape>& wrong_shapes = {},
                    double tolerance = kTolerance) {
  if (yours.rows() != expected.rows() || yours.cols() != expected.cols()) {
    std::string message =
        fmt::format("Your {} is [{} x {}], but it must be [{} x {}] ({}).", what, yours.rows(),
                    yours.cols(), expected.rows(), expected.cols(), which);
    for (const WrongShape& s : wrong_shapes) {
      if (yours.rows() == s.rows && yours.cols() == s.cols) return message + "\n" + s.says;
    }
    return message;
  }
  if (close(yours, expected, tolerance)) return "";
  const auto [worst_r, worst_c] = attn_test::worst_entry(yours, expected);
  std::string message =
      fmt::format("Your {} differs at ({}, {}): yours {:.6g}, expected {:.6g} ({}).", what, worst_r,
                  worst_c, yours(worst_r, worst_c), expected(worst_r, worst_c), which);
  for (const WrongAnswer& w : wrong) {
    if (close(yours, w.value, tolerance)) return message + "\n" + w.says;
  }
  if (yours.array().isNaN().any()) message += "\nYours holds NaN.";
  return message;
}

/// Eigen's index and shape checks are on in this program (tests/CMakeLists.txt), so a product of
/// mismatched shapes or a row past the end stops the program inside your function, with Eigen's
/// assertion. Before it goes, it says what that most likely means for the function it was in.
const char* volatile g_abort_text = "";

extern "C" void explain_abort(int) {
  const char* text = g_abort_text;
  std::size_t length = 0;
  while (text[length] != '\0') ++length;
  const ssize_t written = write(2, text, length);
  static_cast<void>(written);  // nothing to do if stderr is gone
}

/// Runs `call` with explain_abort installed and saying `text`.
template <typename Call>
MatrixD guarded(const char* text, Call call) {
  g_abort_text = text;
  const auto previous = std::signal(SIGABRT, explain_abort);
  MatrixD result = call();
  std::signal(SIGABRT, previous);
  return result;
}

/// A random cell with PyTorch's initialisation, in float as rnn_init draws it. The learner gets
/// attn::cast<double> of it, an exact widening, so the library's float-cell functions
/// (input_jacobians, input_jacobian_central_difference) see the same model.
attn::RnnCell float_cell(attn::Rng& rng, Index I, Index H) { return attn::rnn_init(rng, I, H); }

MatrixD tanh_of(const MatrixD& z) { return z.array().tanh().matrix(); }

// ---- Exercise 01.1: one step --------------------------------------------------------------------

MatrixD your_step(const RnnCellD& cell, const MatrixD& x, const MatrixD& a_prev) {
  return guarded(
      "\n*** The program stopped inside exercise_rnn_step, most likely on a product of "
      "mismatched shapes: x is [1 x I] and W_ih is [H x I], so W_ih x_t is the row product "
      "x * W_ih^T, [1 x I] times [I x H]; likewise a_prev * W_hh^T.\n",
      [&] { return exercise_rnn_step(cell, x, a_prev); });
}

const std::string kStepStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_rnn_step in "
    "chapters/01_rnn/exercise/rnn_step.cpp.";

/// The usual wrong steps on this case, each computed with its one mistake.
std::vector<WrongAnswer> wrong_steps(const RnnCellD& c, const MatrixD& x, const MatrixD& a_prev) {
  const MatrixD from_x = x * c.weight_ih.transpose();         // [1 x H]
  const MatrixD from_a = a_prev * c.weight_hh.transpose();    // [1 x H]
  const MatrixD z = from_x + c.bias_ih + from_a + c.bias_hh;  // [1 x H]
  const MatrixD untransposed = a_prev * c.weight_hh;          // [1 x H], a_prev W_hh
  return {
      {MatrixD::Zero(1, c.hidden_size()), kStepStub},
      {tanh_of(from_x + c.bias_ih + untransposed + c.bias_hh),
       "Yours multiplies a_prev * W_hh, without the transpose: that is W_hh^T a_{t-1}. W_hh is "
       "square, so it runs, but row i of W_hh holds the weights INTO unit i: write "
       "a_prev * W_hh^T, as for W_ih."},
      {z, "Yours is the pre-activation z_t: take tanh of every entry, a_t = tanh(z_t)."},
      {tanh_of(from_x + c.bias_ih + from_a),
       "Yours leaves out b_hh: the step adds both biases, b_ih and b_hh (only their sum matters, "
       "but both are in it)."},
      {tanh_of(from_x + from_a + c.bias_hh),
       "Yours leaves out b_ih: the step adds both biases, b_ih and b_hh (only their sum matters, "
       "but both are in it)."},
      {tanh_of(from_x + from_a),
       "Yours leaves out both biases: add b_ih and b_hh before the tanh."},
      {tanh_of(from_x + c.bias_ih + c.bias_hh),
       "Yours ignores a_prev: the recurrent term W_hh a_{t-1} is what carries the past into a_t."},
  };
}

// 1. By hand, I = 3, H = 2, every number chosen so that z is exact:
//   x = (1, 0, -1), W_ih = [0.5 0 0.25; 0 1 -0.5]       x W_ih^T = (0.5 - 0.25, 0.5) = (0.25, 0.5)
//   a_prev = (0.5, -0.5), W_hh = [1 0.5; 0 -1]     a_prev W_hh^T = (0.5 - 0.25, 0.5) = (0.25, 0.5)
//   b_ih = (0.25, 0), b_hh = (0, -0.5)
//   z = (0.25 + 0.25 + 0.25 + 0, 0.5 + 0 + 0.5 - 0.5) = (0.75, 0.5)
//   a = (tanh 0.75, tanh 0.5) = (0.635149, 0.462117)
// W_hh is not symmetric: without its transpose, a_prev W_hh = (0.5, 0.75) and z = (1, 0.75).
TEST(Exercise01Step, TwoUnitsByHand) {
  RnnCellD cell;
  cell.weight_ih.resize(2, 3);  // [H x I]
  cell.weight_ih << 0.5, 0, 0.25, 0, 1, -0.5;
  cell.weight_hh.resize(2, 2);  // [H x H]
  cell.weight_hh << 1, 0.5, 0, -1;
  cell.bias_ih.resize(2);  // [1 x H]
  cell.bias_ih << 0.25, 0;
  cell.bias_hh.resize(2);  // [1 x H]
  cell.bias_hh << 0, -0.5;
  MatrixD x(1, 3), a_prev(1, 2);  // [1 x I], [1 x H]
  x << 1, 0, -1;
  a_prev << 0.5, -0.5;
  MatrixD expected(1, 2);  // [1 x H]
  expected << std::tanh(0.75), std::tanh(0.5);
  const std::string problem =
      compare("a_t", your_step(cell, x, a_prev), expected, wrong_steps(cell, x, a_prev),
              "I = 3, H = 2, worked by hand: z = (0.75, 0.5)",
              {{1, 3, "Yours has I entries: a_t has one per hidden unit, H (the rows of W_ih)."}});
  if (!problem.empty()) FAIL() << problem;
}

// 2. Against the library: one step is rnn_forward over a sequence of one input, from
// h0 = a_prev. PyTorch's initialisation, I = 3, H = 4, five inputs and states.
TEST(Exercise01Step, MatchesTheLibrary) {
  attn::Rng rng(101);
  const attn::RnnCell cell = float_cell(rng, 3, 4);
  const RnnCellD celld = attn::cast<double>(cell);
  for (int trial = 0; trial < 5; ++trial) {
    const MatrixD x = attn::random_normal(rng, 1, 3).cast<double>();               // [1 x I]
    const MatrixD a_prev = attn::random_normal(rng, 1, 4, 0, 0.5).cast<double>();  // [1 x H]
    const MatrixD expected = attn::rnn_forward(celld, x, a_prev);                  // [1 x H]
    const std::string problem =
        compare("a_t", your_step(celld, x, a_prev), expected, wrong_steps(celld, x, a_prev),
                fmt::format("I = 3, H = 4, trial {}: attn::rnn_forward of the one input", trial),
                {{1, 3, "Yours has I entries: a_t has one per hidden unit, H."}});
    if (!problem.empty()) FAIL() << problem;
  }
}

// ---- Exercise 01.2: the whole sequence ----------------------------------------------------------

MatrixD your_forward(const RnnCellD& cell, const MatrixD& X, const MatrixD& h0) {
  return guarded(
      "\n*** The program stopped inside exercise_rnn_forward, most likely on a row index out of "
      "range or mismatched shapes: A has T = X.rows() rows, 0 .. T - 1, and row t - 1 holds a_t; "
      "x_t is X.row(t - 1), [1 x I], and the state is [1 x H].\n",
      [&] { return exercise_rnn_forward(cell, X, h0); });
}

/// The usual wrong forward passes on this case, from the library's rnn_forward (which
/// tests/attn/layers/test_rnn.cpp checks) with one mistake each.
std::vector<WrongAnswer> wrong_forwards(const RnnCellD& c, const MatrixD& X, const MatrixD& h0) {
  const Index T = X.rows(), H = c.hidden_size();
  const MatrixD A = attn::rnn_forward(c, X, h0);  // [T x H]
  MatrixD shifted(T, H);                          // [T x H]: a_0 .. a_{T-1}
  shifted.row(0) = h0;
  shifted.bottomRows(T - 1) = A.topRows(T - 1);
  MatrixD from_h0(T, H);  // [T x H]: every step from h0
  for (Index t = 0; t < T; ++t) from_h0.row(t) = attn::rnn_forward(c, X.row(t), h0);
  return {
      {MatrixD::Zero(T, H),
       "Yours is all zeros. Is this still the stub? Write the body of exercise_rnn_forward in "
       "chapters/01_rnn/exercise/rnn_forward.cpp."},
      {shifted,
       "Yours is a_0 .. a_{T-1}, one step late: row 0 must be a_1, the state after the first "
       "input, and the last row a_T. Store the state after computing it, and leave h0 out."},
      {from_h0,
       "Yours computes every step from h0: the state is never carried along. Step t must read "
       "a_{t-1}, the state the step before produced."},
      {attn::rnn_forward(c, X, MatrixD::Zero(1, H)),
       "Yours starts from zeros: a_0 is h0, the state you are given (it is zeros only in "
       "PyTorch's default)."},
  };
}

std::vector<WrongShape> wrong_forward_shapes(Index T, Index H) {
  return {{1, H,
           "Yours is one state: rnn_forward returns every state, a_1 .. a_T, one row each (N->N "
           "reads them all)."},
          {T + 1, H, "Yours has T + 1 rows: is h0 = a_0 among them? Row 0 must be a_1."},
          {H, T, "Yours is the transpose: states are rows here, A is [T x H]."}};
}

// 1. The page's pen-and-paper exercise: I = H = 1, w_ih = 0.5, w_hh = -1, b_ih = 0.25,
// b_hh = -0.25 (they cancel), x = (2, 0).
//   From a_0 = 0:   a_1 = tanh(0.5 * 2 + 0.25 - 0.25) = tanh 1 = 0.76159,
//                   a_2 = tanh(0.5 * 0 - a_1) = tanh(-0.76159) = -0.64201.
//   From a_0 = 0.5: a_1 = tanh(1 - 0.5) = tanh 0.5 = 0.46212,
//                   a_2 = tanh(0 - a_1) = tanh(-0.46212) = -0.43183.
// The second start tells a_0 = h0 from a_0 = 0, and carrying the state from starting over
// (which gives a_2 = tanh(-0.5)).
TEST(Exercise01Forward, ThePagesTwoStepsByHand) {
  RnnCellD cell;
  cell.weight_ih = MatrixD::Constant(1, 1, 0.5);   // [H x I]
  cell.weight_hh = MatrixD::Constant(1, 1, -1.0);  // [H x H]
  cell.bias_ih = attn::RowVectorD::Constant(1, 0.25);
  cell.bias_hh = attn::RowVectorD::Constant(1, -0.25);
  MatrixD X(2, 1);  // [T x I]
  X << 2, 0;
  for (const double a0 : {0.0, 0.5}) {
    const double a1 = std::tanh(0.5 * 2 + 0.25 - a0 - 0.25);
    MatrixD expected(2, 1);  // [T x H]
    expected << a1, std::tanh(-a1);
    const MatrixD h0 = MatrixD::Constant(1, 1, a0);  // [1 x H]
    const std::string problem =
        compare("A", your_forward(cell, X, h0), expected, wrong_forwards(cell, X, h0),
                fmt::format("the page's scalar RNN, x = (2, 0), a_0 = {}: by hand", a0),
                wrong_forward_shapes(2, 1));
    if (!problem.empty()) FAIL() << problem;
  }
}

// 2. Against the library's rnn_forward in double: PyTorch's initialisation, I = 3, H = 4, a
// random h0, sequences of 7 inputs and of 1.
TEST(Exercise01Forward, MatchesTheLibrary) {
  attn::Rng rng(202);
  const RnnCellD cell = attn::cast<double>(float_cell(rng, 3, 4));
  for (const Index T : {7, 1}) {
    const MatrixD X = attn::random_normal(rng, T, 3).cast<double>();           // [T x I]
    const MatrixD h0 = attn::random_normal(rng, 1, 4, 0, 0.5).cast<double>();  // [1 x H]
    const MatrixD expected = attn::rnn_forward(cell, X, h0);                   // [T x H]
    const std::string problem = compare(
        "A", your_forward(cell, X, h0), expected, wrong_forwards(cell, X, h0),
        fmt::format("I = 3, H = 4, T = {}: attn::rnn_forward", T), wrong_forward_shapes(T, 4));
    if (!problem.empty()) FAIL() << problem;
  }
}

// ---- Exercise 01.3: d a_T / d x_1 ---------------------------------------------------------------

MatrixD your_jacobian(const RnnCellD& cell, const MatrixD& A) {
  return guarded(
      "\n*** The program stopped inside exercise_jacobian_to_first_input, most likely on "
      "mismatched shapes: W_ih is [H x I] and W_hh [H x H], so J_t = D_t W_hh J_{t-1} stays "
      "[H x I] at every step; a_t is A.row(t - 1) for t = 1 .. A.rows().\n",
      [&] { return exercise_jacobian_to_first_input(cell, A); });
}

/// diag(1 - a^2) for the row a [1 x H] of A: the slope of tanh where it produced a.
MatrixD slope(const MatrixD& a) {
  return (1.0 - a.array().square()).matrix().transpose().asDiagonal();  // [H x H]
}

/// The usual wrong chains, each with its one mistake: W_hh^T for W_hh, no slope on the first
/// factor, each slope after its W_hh instead of before, the factors in reverse order, and
/// 1 - tanh(a)^2 for 1 - a^2.
std::vector<WrongAnswer> wrong_jacobians(const RnnCellD& c, const MatrixD& A) {
  const Index T = A.rows();
  const MatrixD& W_ih = c.weight_ih;            // [H x I]
  const MatrixD& W_hh = c.weight_hh;            // [H x H]
  MatrixD transposed = slope(A.row(0)) * W_ih;  // [H x I], each one
  MatrixD no_first_slope = W_ih;
  MatrixD slope_after = slope(A.row(0)) * W_ih;
  MatrixD tanh_again = slope(tanh_of(A.row(0))) * W_ih;
  MatrixD reversed_chain = MatrixD::Identity(c.hidden_size(), c.hidden_size());  // [H x H]
  for (Index t = 1; t < T; ++t) {
    transposed = slope(A.row(t)) * W_hh.transpose() * transposed;
    no_first_slope = slope(A.row(t)) * W_hh * no_first_slope;
    slope_after = W_hh * slope(A.row(t)) * slope_after;
    tanh_again = slope(tanh_of(A.row(t))) * W_hh * tanh_again;
    reversed_chain = reversed_chain * slope(A.row(t - 1)) * W_hh;  // D_1 W_hh D_2 W_hh ...
  }
  const MatrixD reversed = reversed_chain * slope(A.row(T - 1)) * W_ih;  // ... D_T W_ih
  return {
      {MatrixD::Zero(c.hidden_size(), c.input_size()),
       "Yours is all zeros. Is this still the stub? Write the body of "
       "exercise_jacobian_to_first_input in chapters/01_rnn/exercise/jacobian_to_first_input.cpp."},
      {transposed,
       "Yours uses W_hh^T: the forward pass writes a W_hh^T only because its states are rows. "
       "The derivative of W_hh a with respect to a is W_hh itself: J_t = D_t W_hh J_{t-1}."},
      {no_first_slope,
       "Yours starts from J_1 = W_ih: a_1 = tanh(z_1) too, so d a_1 / d x_1 = D_1 W_ih, with "
       "D_1 = diag(1 - a_1^2)."},
      {slope_after,
       "Yours puts each slope after W_hh (W_hh D_t): tanh comes last in a step, so its slope is "
       "the leftmost factor, D_t W_hh."},
      {reversed,
       "Yours multiplies the steps in reverse order (D_1 W_hh D_2 W_hh ... D_T W_ih): each new "
       "factor goes on the LEFT, J_t = D_t W_hh J_{t-1}, since step t comes after the others."},
      {tanh_again,
       "Yours takes 1 - tanh(a_t)^2: a_t is already tanh(z_t), so the slope is 1 - a_t^2."},
  };
}

std::vector<WrongShape> wrong_jacobian_shapes(Index I, Index H) {
  return {{I, H,
           "Yours is [I x H], the transpose: row i of d a_T / d x_1 is unit i of a_T, column j "
           "feature j of x_1. Use W_ih and W_hh as stored, J_1 = D_1 W_ih [H x I]."},
          {H, H,
           "Yours is [H x H], the shape of d a_T / d a_0: the chain ends with W_ih [H x I] on "
           "the right, J_1 = D_1 W_ih."}};
}

// 1. By hand, I = 1, H = 2, T = 1 and 2. The states are chosen, not computed by a forward
// pass (the Jacobian reads them only through D_t), so that every slope is exact:
//   a_1 = (0.5, 0)  ->  D_1 = diag(0.75, 1);   a_2 = (0, 0.5)  ->  D_2 = diag(1, 0.75)
//   W_ih = (1, 2)^T, W_hh = [1 2; 3 4]
//   J_1 = D_1 W_ih = (0.75, 2)^T
//   W_hh J_1 = (0.75 + 4, 2.25 + 8) = (4.75, 10.25);   J_2 = D_2 W_hh J_1 = (4.75, 7.6875)^T
// With W_hh^T, J_2 would be D_2 (0.75 + 6, 1.5 + 8) = (6.75, 7.125); without D_1,
// D_2 W_hh W_ih = (5, 8.25); with the factors reversed, D_1 W_hh D_2 W_ih = (3, 9).
TEST(Exercise01Jacobian, TwoStepsByHand) {
  RnnCellD cell;
  cell.weight_ih.resize(2, 1);  // [H x I]
  cell.weight_ih << 1, 2;
  cell.weight_hh.resize(2, 2);  // [H x H]
  cell.weight_hh << 1, 2, 3, 4;
  cell.bias_ih = attn::RowVectorD::Zero(2);  // [1 x H], not used by the Jacobian
  cell.bias_hh = attn::RowVectorD::Zero(2);
  MatrixD A(2, 2);  // [T x H]
  A << 0.5, 0, 0, 0.5;
  MatrixD J1(2, 1), J2(2, 1);  // [H x I]
  J1 << 0.75, 2;
  J2 << 4.75, 7.6875;
  const MatrixD A1 = A.topRows(1);  // [1 x H], T = 1
  std::string problem =
      compare("d a_1 / d x_1", your_jacobian(cell, A1), J1, wrong_jacobians(cell, A1),
              "T = 1, by hand: D_1 W_ih", wrong_jacobian_shapes(1, 2));
  if (!problem.empty()) FAIL() << problem;
  problem = compare("d a_2 / d x_1", your_jacobian(cell, A), J2, wrong_jacobians(cell, A),
                    "T = 2, by hand: D_2 W_hh D_1 W_ih", wrong_jacobian_shapes(1, 2));
  if (!problem.empty()) FAIL() << problem;
}

// 2. Against the library's input_jacobians at every distance: PyTorch's initialisation, I = 3,
// H = 5, a random h0, x_1 .. x_6. The states come from the double rnn_forward, the same ones
// input_jacobians computes inside.
TEST(Exercise01Jacobian, MatchesTheLibraryAtEveryDistance) {
  attn::Rng rng(303);
  const attn::RnnCell cell = float_cell(rng, 3, 5);
  const attn::Matrix X = attn::random_normal(rng, 6, 3);              // [T x I], float
  const attn::RowVector h0 = attn::random_normal(rng, 1, 5, 0, 0.5);  // [1 x H], float
  const RnnCellD celld = attn::cast<double>(cell);
  const MatrixD A = attn::rnn_forward(celld, X.cast<double>(), h0.cast<double>());  // [T x H]
  const std::vector<MatrixD> J = attn::input_jacobians(cell, X, h0);                // T of [H x I]
  for (Index T = 1; T <= X.rows(); ++T) {
    const MatrixD states = A.topRows(T);  // [T x H]
    const std::string problem = compare(
        fmt::format("d a_{} / d x_1", T), your_jacobian(celld, states),
        J[static_cast<std::size_t>(T - 1)], wrong_jacobians(celld, states),
        fmt::format("I = 3, H = 5, T = {}: attn::input_jacobians", T), wrong_jacobian_shapes(3, 5));
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. Against nudging x_1 itself: central differences of the double rnn_forward
// (attn::input_jacobian_central_difference), which know nothing of the chain rule. I = 2,
// H = 4, T = 5, three random models.
TEST(Exercise01Jacobian, AgreesWithNudgingTheFirstInput) {
  attn::Rng rng(404);
  for (int model = 0; model < 3; ++model) {
    const attn::RnnCell cell = float_cell(rng, 2, 4);
    const attn::Matrix X = attn::random_normal(rng, 5, 2);              // [T x I], float
    const attn::RowVector h0 = attn::random_normal(rng, 1, 4, 0, 0.5);  // [1 x H], float
    const RnnCellD celld = attn::cast<double>(cell);
    const MatrixD A = attn::rnn_forward(celld, X.cast<double>(), h0.cast<double>());  // [T x H]
    const MatrixD numeric = attn::input_jacobian_central_difference(cell, X, h0, 1e-4);
    const double tolerance = kFiniteDifference * numeric.cwiseAbs().maxCoeff();
    const std::string problem = compare(
        "d a_5 / d x_1", your_jacobian(celld, A), numeric, wrong_jacobians(celld, A),
        fmt::format("I = 2, H = 4, T = 5, model {}: central differences, eps = 1e-4, to {:.1e}",
                    model, tolerance),
        wrong_jacobian_shapes(2, 4), tolerance);
    if (!problem.empty()) FAIL() << problem;
  }
}

}  // namespace exercise_01
