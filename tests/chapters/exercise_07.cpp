// Exercises 07.1 to 07.3: are your sinusoidal table, your shift by k positions and your
// reordered-sentence experiment right? The tasks are in chapters/07_positional_encoding/exercise/
// (README.md there lists them). Check them all with
//
//   cmake --build build/release --target exercise_07
//   ctest --test-dir build/release -R Exercise07 --output-on-failure
//
// or one at a time with -R Exercise07Table, -R Exercise07Shift or -R Exercise07Order.
//
// Where the expected values come from: small cases worked out by hand (written out below), the
// table printed on chapter 07's page (note 004's sentence, d_model 8), and the library's own
// functions, which their suites check independently of this file: sinusoidal_encoding_d,
// sinusoidal_encoding_at and relative_rotation (tests/attn/layers/test_positional_encoding.cpp:
// against a 40-digit reference table and the rotation identity), and attn::attention
// (tests/attn/ops/test_attention.cpp). For exercise 07.3 the page's argument (attention is
// permutation-equivariant) says what the answer must be without positions. Every comparison is
// in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_07_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "reorder_and_attend.hpp"
#include "shift_positions.hpp"
#include "sinusoidal_table.hpp"

#include "exercise_checks.hpp"

#include "attn/core/random.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/ops/attention.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace exercise_07 {

using attn::Index;
using attn::MatrixD;

/// How close counts as the same. Everything is double, on entries of size about 1 and angles of
/// at most a few hundred radians: a right answer that computes omega_i as pow(10000, -2i/d) or
/// as exp(-2i/d ln 10000), multiplies or sums in another order than the library, moves each
/// angle by a few ulps of 200 (about 1e-13) and each entry by a few ulps of 1. The wrong answers
/// these tests name are off by 1e-3 or more (the slowest frequency of the hand cases wrong by a
/// factor 10). 1e-12 is far from both.
constexpr double kTolerance = 1e-12;

/// For the page's table only: the page prints float values to 5 decimals, so each printed number
/// is within half a unit of the 5th decimal (5e-6) of the true value, plus float's own rounding
/// of the table (under 6e-8). 6e-6 covers both; the wrong answers differ there by 1e-3 or more.
constexpr double kPageTolerance = 6e-6;

bool within(const MatrixD& a, const MatrixD& b, double tolerance) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         ((a - b).array().abs() <= tolerance).all();  // false where either holds NaN
}

/// A usual wrong answer: what it gives on this case, and what to say when yours equals it.
struct WrongAnswer {
  MatrixD value;
  std::string means;
};

/// "" when yours equals expected to `tolerance` everywhere. Otherwise the shape, when it is
/// wrong (before any value), or the worst entry and, when yours is one of `usual` (tried in
/// order), which mistake that is.
std::string problem(const std::string& what, const MatrixD& yours, const MatrixD& expected,
                    double tolerance, const std::vector<WrongAnswer>& usual,
                    const std::string& context) {
  const bool plural = what.back() == 's';  // "outputs", "moved rows"
  if (yours.rows() != expected.rows() || yours.cols() != expected.cols()) {
    std::string message =
        fmt::format("Your {} {} [{} x {}], but {} must be [{} x {}] ({}).", what,
                    plural ? "are" : "is", yours.rows(), yours.cols(), plural ? "they" : "it",
                    expected.rows(), expected.cols(), context);
    if (yours.rows() == expected.cols() && yours.cols() == expected.rows()) {
      message += " Yours is the transpose: one row per position (token), one column per feature.";
    }
    return message;
  }
  if (within(yours, expected, tolerance)) return "";
  Index worst_r = 0, worst_c = 0;
  double worst = -1.0;
  for (Index r = 0; r < yours.rows(); ++r) {
    for (Index c = 0; c < yours.cols(); ++c) {
      const double error = std::abs(yours(r, c) - expected(r, c));
      if (std::isnan(error) || error > worst) {
        worst = std::isnan(error) ? HUGE_VAL : error;
        worst_r = r;
        worst_c = c;
      }
    }
  }
  std::string message = fmt::format("Your {} {} at ({}, {}): yours {:.6g}, expected {:.6g} ({}).",
                                    what, plural ? "differ" : "differs", worst_r, worst_c,
                                    yours(worst_r, worst_c), expected(worst_r, worst_c), context);
  for (const WrongAnswer& w : usual) {
    if (within(yours, w.value, tolerance)) return message + "\n" + w.means;
  }
  if (yours.array().isNaN().any()) message += "\nYours holds NaN.";
  return message;
}

// ---- Exercise 07.1: the sinusoidal table ----------------------------------------------------

/// The usual wrong tables, each computed here from its own (wrong) formula.
enum class TableSlip {
  exponent_without_two,  // omega_i = 10000^(-i/d), i the pair
  exponent_per_column,   // column c turns at 10000^(-c/d): the cos column has its own frequency
  exponent_positive,     // pos * 10000^(2i/d): multiplied where it divides
  sin_cos_swapped,       // cos on the even columns, sin on the odd
  starts_at_one,         // rows are positions 1 .. n
  sines_first,           // all the sines, then all the cosines (tensor2tensor's layout)
};

MatrixD slipped_table(Index n, Index d, TableSlip slip) {
  MatrixD pe(n, d);  // [n x d]
  const Index pairs = d / 2;
  for (Index pos = 0; pos < n; ++pos) {
    const double p = slip == TableSlip::starts_at_one ? pos + 1.0 : static_cast<double>(pos);
    for (Index i = 0; i < pairs; ++i) {
      const double two_i_over_d = 2.0 * static_cast<double>(i) / static_cast<double>(d);
      double omega_sin = std::pow(10000.0, -two_i_over_d), omega_cos = omega_sin;
      if (slip == TableSlip::exponent_without_two)
        omega_sin = omega_cos = std::pow(10000.0, -two_i_over_d / 2);
      if (slip == TableSlip::exponent_positive)
        omega_sin = omega_cos = std::pow(10000.0, two_i_over_d);
      if (slip == TableSlip::exponent_per_column) {
        omega_cos = std::pow(10000.0, -static_cast<double>(2 * i + 1) / static_cast<double>(d));
      }
      const double s = std::sin(omega_sin * p), c = std::cos(omega_cos * p);
      if (slip == TableSlip::sines_first) {
        pe(pos, i) = s;
        pe(pos, pairs + i) = c;
      } else if (slip == TableSlip::sin_cos_swapped) {
        pe(pos, 2 * i) = c;
        pe(pos, 2 * i + 1) = s;
      } else {
        pe(pos, 2 * i) = s;
        pe(pos, 2 * i + 1) = c;
      }
    }
  }
  return pe;
}

std::vector<WrongAnswer> table_slips(Index n, Index d) {
  return {
      {MatrixD::Zero(n, d),
       "Yours is all zeros. Is this still the stub? Write the body of exercise_sinusoidal_table "
       "in chapters/07_positional_encoding/exercise/sinusoidal_table.cpp."},
      {slipped_table(n, d, TableSlip::exponent_without_two),
       "Yours uses omega_i = 1 / 10000^(i / d_model), with i the pair: the exponent is "
       "2i / d_model (the even column's index over d_model). Without the 2 the last pair turns "
       "about 1/100 radian per position instead of about 1/10000."},
      {slipped_table(n, d, TableSlip::exponent_per_column),
       "Yours gives every column c its own frequency 1 / 10000^(c / d_model): the cos column "
       "2i + 1 must share the sin column's omega_i = 1 / 10000^(2i / d_model), or the pair is no "
       "longer one point on one circle."},
      {slipped_table(n, d, TableSlip::exponent_positive),
       "Yours multiplies the position by 10000^(2i / d_model): omega_i = 1 / 10000^(2i / d_model) "
       "divides, so the frequencies fall from 1 as i grows."},
      {slipped_table(n, d, TableSlip::sin_cos_swapped),
       "Yours has sin and cos swapped: PE(pos, 2i) = sin(omega_i pos) on the even columns, "
       "PE(pos, 2i + 1) = cos(omega_i pos) on the odd ones. Row 0 is (0, 1, 0, 1, ...)."},
      {slipped_table(n, d, TableSlip::starts_at_one),
       "Yours starts at position 1: row 0 is position 0, whose vector is (0, 1, 0, 1, ...)."},
      {slipped_table(n, d, TableSlip::sines_first),
       "Yours puts all the sines first and all the cosines after them (tensor2tensor's layout): "
       "this course interleaves, column 2i the sin and column 2i + 1 the cos of pair i."},
  };
}

// 1. By hand: d_model = 4, positions 0, 1, 2. omega_0 = 10000^(-0/4) = 1 and
// omega_1 = 10000^(-2/4) = 1/100, so
//   pos 0: (sin 0, cos 0, sin 0,    cos 0)    = (0,        1,         0,          1)
//   pos 1: (sin 1, cos 1, sin 0.01, cos 0.01) = (0.841471, 0.540302,  0.00999983, 0.99995)
//   pos 2: (sin 2, cos 2, sin 0.02, cos 0.02) = (0.909297, -0.416147, 0.0199987,  0.9998)
TEST(Exercise07Table, FourColumnsByHand) {
  MatrixD expected(3, 4);  // [positions x d_model], the rows above
  expected << 0, 1, 0, 1,  //
      std::sin(1.0), std::cos(1.0), std::sin(0.01), std::cos(0.01),  //
      std::sin(2.0), std::cos(2.0), std::sin(0.02), std::cos(0.02);
  const std::string message =
      problem("table", exercise_sinusoidal_table(3, 4), expected, kTolerance, table_slips(3, 4),
              "positions 0, 1, 2 with d_model 4: omega = (1, 0.01), row 1 = (sin 1, cos 1, "
              "sin 0.01, cos 0.01)");
  if (!message.empty()) FAIL() << message;
}

// 2. The page's table: note 004's "<begin> I am dog <end>" at positions 0 to 4 with d_model 8,
// where omega_i = 10^-i, as chapter 07's README.md prints it (5 decimals).
TEST(Exercise07Table, MatchesThePagesTable) {
  MatrixD page(5, 8);  // [5 x 8], copied from the page
  page << 0.00000, 1.00000, 0.00000, 1.00000, 0.00000, 1.00000, 0.00000, 1.00000,  //
      0.84147, 0.54030, 0.09983, 0.99500, 0.01000, 0.99995, 0.00100, 1.00000,      //
      0.90930, -0.41615, 0.19867, 0.98007, 0.02000, 0.99980, 0.00200, 1.00000,     //
      0.14112, -0.98999, 0.29552, 0.95534, 0.03000, 0.99955, 0.00300, 1.00000,     //
      -0.75680, -0.65364, 0.38942, 0.92106, 0.03999, 0.99920, 0.00400, 0.99999;
  const std::string message =
      problem("table", exercise_sinusoidal_table(5, 8), page, kPageTolerance, table_slips(5, 8),
              "positions 0 .. 4 with d_model 8, the page's table, to its 5 decimals");
  if (!message.empty()) FAIL() << message;
}

// 3. Against the library, at the chapter's sizes and at the edges: 50 positions of width 16
// first (there every wrong table above differs from every other), then one pair only (d 2), the
// paper's width 512, and 200 positions of width 6.
TEST(Exercise07Table, MatchesTheLibrary) {
  struct Case {
    Index positions, d_model;
  };
  for (const Case c : {Case{50, 16}, Case{4, 2}, Case{3, 512}, Case{200, 6}}) {
    const MatrixD expected = attn::sinusoidal_encoding_d(c.positions, c.d_model);  // [P x d]
    const std::string message =
        problem("table", exercise_sinusoidal_table(c.positions, c.d_model), expected, kTolerance,
                table_slips(c.positions, c.d_model),
                fmt::format("{} positions, d_model {}", c.positions, c.d_model));
    if (!message.empty()) FAIL() << message;
  }
}

// ---- Exercise 07.2: a shift by k positions --------------------------------------------------

/// The usual wrong shifts, each computed here from its own (wrong) formula.
enum class ShiftSlip {
  backwards,             // a' = a cos - b sin, b' = a sin + b cos: moves by -k
  coefficients_swapped,  // cos(omega k) taken from PE(k, 2i), sin from PE(k, 2i+1)
  exponent_without_two,  // omega_i = 10000^(-i/d)
};

MatrixD slipped_shift(const MatrixD& rows, Index k, ShiftSlip slip) {
  const Index d = rows.cols();
  MatrixD moved(rows.rows(), d);  // [n x d]
  for (Index i = 0; i < d / 2; ++i) {
    const double exponent = (slip == ShiftSlip::exponent_without_two ? 1.0 : 2.0) *
                            static_cast<double>(i) / static_cast<double>(d);
    const double angle = std::pow(10000.0, -exponent) * static_cast<double>(k);
    double c = std::cos(angle), s = std::sin(angle);
    if (slip == ShiftSlip::coefficients_swapped) std::swap(c, s);
    if (slip == ShiftSlip::backwards) s = -s;
    for (Index r = 0; r < rows.rows(); ++r) {
      const double a = rows(r, 2 * i), b = rows(r, 2 * i + 1);
      moved(r, 2 * i) = a * c + b * s;
      moved(r, 2 * i + 1) = -a * s + b * c;
    }
  }
  return moved;
}

std::vector<WrongAnswer> shift_slips(const MatrixD& rows, Index k) {
  const MatrixD pe_k = attn::sinusoidal_encoding_at({k}, rows.cols());  // [1 x d]
  return {
      {MatrixD::Zero(rows.rows(), rows.cols()),
       "Yours is all zeros. Is this still the stub? Write the body of exercise_shift_positions in "
       "chapters/07_positional_encoding/exercise/shift_positions.cpp."},
      {slipped_shift(rows, k, ShiftSlip::backwards),
       "Yours moves every row back by k (it is rows R(-k)^T): that is the textbook rotation "
       "a' = a cos - b sin, b' = a sin + b cos, which reads the pair as (cos, sin). The pair is "
       "(sin, cos): a' = a cos + b sin, b' = -a sin + b cos. Check it on PE(0) = (0, 1, ...)."},
      {slipped_shift(rows, k, ShiftSlip::coefficients_swapped),
       "Yours swaps the coefficients: cos(omega_i k) is PE(k, 2i + 1), the odd column, and "
       "sin(omega_i k) is PE(k, 2i), the even one."},
      {slipped_shift(rows, k, ShiftSlip::exponent_without_two),
       "Yours uses omega_i = 1 / 10000^(i / d_model), with i the pair: the exponent is "
       "2i / d_model, as in the table."},
      {rows, "Yours returns the rows unchanged: each pair must turn by omega_i k."},
      {rows.rowwise() + pe_k.row(0),
       "Yours adds PE(k) to every row: moving a position vector by k is a rotation of each pair, "
       "not an addition (PE(pos) + PE(k) is not PE(pos + k))."},
  };
}

// 1. By hand: d_model = 4, so omega = (1, 0.01), and k = 1. Pair (a, b) -> (a cos + b sin,
// -a sin + b cos) with cos = cos(omega_i), sin = sin(omega_i):
//   PE(0) = (0, 1, 0, 1) -> (sin 1, cos 1, sin 0.01, cos 0.01) = PE(1)
//   (1, 0, 0, 0)         -> (cos 1, -sin 1, 0, 0)                = (0.540302, -0.841471, 0, 0)
//   (0, 0, 0, 2)         -> (0, 0, 2 sin 0.01, 2 cos 0.01)       = (0, 0, 0.0199997, 1.9999)
TEST(Exercise07Shift, ThreeRowsByHand) {
  MatrixD rows(3, 4);  // [n x d_model]
  rows << 0, 1, 0, 1,  //
      1, 0, 0, 0,      //
      0, 0, 0, 2;
  MatrixD expected(3, 4);  // [n x d_model], the rows above
  expected << std::sin(1.0), std::cos(1.0), std::sin(0.01), std::cos(0.01),  //
      std::cos(1.0), -std::sin(1.0), 0, 0,                                   //
      0, 0, 2 * std::sin(0.01), 2 * std::cos(0.01);
  const std::string message = problem(
      "moved rows", exercise_shift_positions(rows, 1), expected, kTolerance, shift_slips(rows, 1),
      "k = 1, d_model 4, rows (0, 1, 0, 1), (1, 0, 0, 0), (0, 0, 0, 2): PE(0) must become "
      "PE(1) = (sin 1, cos 1, sin 0.01, cos 0.01)");
  if (!message.empty()) FAIL() << message;
}

// 2. The point of the rotation: the table PE(0 .. 5) of width 8, moved by k, is PE(k .. k + 5),
// for k = 3, 1, 0 (nothing moves), -2 (back) and 40 (farther than the table).
TEST(Exercise07Shift, MovesTheTableByK) {
  const Index d = 8;
  const MatrixD table = attn::sinusoidal_encoding_d(6, d);  // [6 x 8]: PE(0 .. 5)
  for (const Index k : {3, 1, 0, -2, 40}) {
    std::vector<Index> moved_positions;
    for (Index pos = 0; pos < 6; ++pos) moved_positions.push_back(pos + k);
    const MatrixD expected = attn::sinusoidal_encoding_at(moved_positions, d);  // [6 x 8]
    const std::string message = problem(
        "moved rows", exercise_shift_positions(table, k), expected, kTolerance,
        shift_slips(table, k),
        fmt::format("rows PE(0 .. 5), d_model {}, k = {}: expected PE({} .. {})", d, k, k, k + 5));
    if (!message.empty()) FAIL() << message;
  }
}

// 3. The map is linear and the same for any row: random rows [5 x 16] times R(k)^T, with the
// library's relative_rotation, for k = 13 and k = -6.
TEST(Exercise07Shift, IsTheRotationRkOnAnyRows) {
  const Index d = 16;
  attn::Rng rng(7);
  const MatrixD rows = attn_test::normal_matrix(rng, 5, d, 1.0);  // [5 x 16]
  for (const Index k : {13, -6}) {
    const MatrixD expected = rows * attn::relative_rotation(k, d).transpose();  // [5 x 16]
    const std::string message = problem(
        "moved rows", exercise_shift_positions(rows, k), expected, kTolerance, shift_slips(rows, k),
        fmt::format("random rows [5 x {}], k = {}: expected rows R(k)^T", d, k));
    if (!message.empty()) FAIL() << message;
  }
}

// ---- Exercise 07.3: reorder, attend, put back ------------------------------------------------

// A sentence of n = 4 words of width d = 4 and one layer's projections [4 x 4]. With d_k = 4 the
// scale 1/sqrt(d_k) is 0.5, exact in any precision.
constexpr Index kWords = 4, kWidth = 4;

struct Layer {
  MatrixD X, W_q, W_k, W_v;  // X [n x d]: one word per row; W_* [d x d]
};

Layer layer() {
  attn::Rng rng(2026);
  Layer l;
  l.X = attn_test::normal_matrix(rng, kWords, kWidth,
                                 1.0);  // [n x d]: N(0, 1) embeddings, as the chapter's
  l.W_q =
      attn_test::normal_matrix(rng, kWidth, kWidth, 0.5);  // [d x d]: N(0, 1/d), as the chapter's
  l.W_k = attn_test::normal_matrix(rng, kWidth, kWidth, 0.5);  // [d x d]
  l.W_v = attn_test::normal_matrix(rng, kWidth, kWidth, 0.5);  // [d x d]
  return l;
}

/// One self-attention layer on S [n x d] by the library: [n x d], row r = token r's output.
MatrixD library_out(const MatrixD& S, const Layer& l, double scale = 0.5) {
  return attn::attention(S * l.W_q, S * l.W_k, S * l.W_v, {.scale = static_cast<float>(scale)}).out;
}

/// Row r of the result is row order[r] of M: the sentence reordered (a gather).
MatrixD gather(const MatrixD& M, const std::vector<Index>& order) {
  return M(order, Eigen::all);  // [n x cols]
}

/// Row order[r] of the result is row r of M: each output back at its word's row (a scatter).
MatrixD scatter(const MatrixD& M, const std::vector<Index>& order) {
  MatrixD back(M.rows(), M.cols());  // [n x cols]
  for (Index r = 0; r < M.rows(); ++r) back.row(order[static_cast<std::size_t>(r)]) = M.row(r);
  return back;
}

/// The positions first .. first + n - 1, in double: [n x d].
MatrixD positions_from(Index first, Index n, Index d) {
  std::vector<Index> positions;
  for (Index p = first; p < first + n; ++p) positions.push_back(p);
  return attn::sinusoidal_encoding_at(positions, d);
}

std::string order_str(const std::vector<Index>& order) {
  return fmt::format("{{{}}}", fmt::join(order, ", "));
}

bool is_identity(const std::vector<Index>& order) {
  for (std::size_t r = 0; r < order.size(); ++r) {
    if (order[r] != static_cast<Index>(r)) return false;
  }
  return true;
}

const std::string kOrderStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_reorder_and_attend in "
    "chapters/07_positional_encoding/exercise/reorder_and_attend.cpp.";

/// The wrong answers both tests name, given the right outputs in the new sentence's order
/// (out_new [n x d], row r = word order[r]).
void add_order_slips(std::vector<WrongAnswer>& slips, const MatrixD& out_new,
                     const std::vector<Index>& order) {
  if (is_identity(order)) return;  // then both equal the right answer
  slips.push_back({out_new, "Yours is in the new sentence's order: its row r is the output of word "
                            "order[r]. Put it back: that row goes to row order[r] of the answer."});
  std::vector<Index> twice(order.size());  // order applied twice: order[order[r]]
  for (std::size_t r = 0; r < order.size(); ++r) {
    twice[r] = order[static_cast<std::size_t>(order[r])];
  }
  if (is_identity(twice)) return;  // order is its own inverse: a gather puts back right too
  slips.push_back({gather(out_new, order),
                   "Yours puts back with out(order, :), a second reordering (a gather). That "
                   "undoes the first only when order is its own inverse, as the page's swap "
                   "{2, 1, 0} is; here it is not. Scatter instead: row r of out goes to row "
                   "order[r]."});
}

// 1. No positions: by the page's argument (out' = P out), every word gets the output it has in
// the sentence as written, whatever the order. Expected: attention on X itself. {1, 2, 3, 0}
// first: it is not its own inverse, so putting back the wrong way shows.
TEST(Exercise07Order, WithoutPositionsEachWordKeepsItsOutput) {
  const Layer l = layer();
  const MatrixD expected = library_out(l.X, l);  // [n x d]: word w's output in X as written
  for (const std::vector<Index>& order :
       {std::vector<Index>{1, 2, 3, 0}, std::vector<Index>{3, 2, 1, 0},
        std::vector<Index>{0, 1, 2, 3}}) {
    const MatrixD S = gather(l.X, order);  // [n x d]
    std::vector<WrongAnswer> slips = {{MatrixD::Zero(kWords, kWidth), kOrderStub}};
    add_order_slips(slips, library_out(S, l), order);
    slips.push_back({scatter(library_out(S + positions_from(0, kWords, kWidth), l), order),
                     "Yours adds position vectors although add_positions is false."});
    slips.push_back({scatter(library_out(S, l, 1.0), order),
                     "Yours forgets the scale: the scores are Q K^T / sqrt(d_k), here / 2."});
    const std::string message = problem(
        "outputs", exercise_reorder_and_attend(l.X, l.W_q, l.W_k, l.W_v, order, false), expected,
        kTolerance, slips,
        fmt::format("order {}, no positions: expected each word's output in X as written, for "
                    "attention does not see order",
                    order_str(order)));
    if (!message.empty()) FAIL() << message;
  }
}

// 2. With positions, slot r of the new sentence gets PE(r): expected, the library's attention on
// X(order, :) + PE(0 .. n-1), each output row r then put at row order[r]. {1, 2, 3, 0} first,
// then the identity (the sentence as written, + PE) and {2, 0, 3, 1}.
TEST(Exercise07Order, WithPositionsTheOrderMatters) {
  const Layer l = layer();
  const MatrixD pe = positions_from(0, kWords, kWidth);  // [n x d]: PE(0 .. n-1)
  for (const std::vector<Index>& order :
       {std::vector<Index>{1, 2, 3, 0}, std::vector<Index>{0, 1, 2, 3},
        std::vector<Index>{2, 0, 3, 1}}) {
    const MatrixD S = gather(l.X, order);              // [n x d]: the reordered words
    const MatrixD out_new = library_out(S + pe, l);    // [n x d], in S's order
    const MatrixD expected = scatter(out_new, order);  // [n x d], in X's order
    std::vector<WrongAnswer> slips = {{MatrixD::Zero(kWords, kWidth), kOrderStub}};
    add_order_slips(slips, out_new, order);
    if (!is_identity(order)) {
      slips.push_back({library_out(l.X + pe, l),
                       "Yours adds PE(w) to word w before reordering, so each word takes its old "
                       "position along and the order changes nothing. The positions belong to the "
                       "slots: add PE(r) to row r of the new sentence."});
    }
    slips.push_back({library_out(l.X, l),
                     "Yours adds no positions: with add_positions true, row r of the new "
                     "sentence gets PE(r)."});
    slips.push_back({scatter(library_out(S + positions_from(1, kWords, kWidth), l), order),
                     "Yours numbers the slots from 1: the first slot is position 0, PE(0) = "
                     "(0, 1, 0, 1)."});
    slips.push_back({scatter(library_out(S + pe, l, 1.0), order),
                     "Yours forgets the scale: the scores are Q K^T / sqrt(d_k), here / 2."});
    const std::string message = problem(
        "outputs", exercise_reorder_and_attend(l.X, l.W_q, l.W_k, l.W_v, order, true), expected,
        kTolerance, slips,
        fmt::format("order {}, with positions: expected attention on X(order, :) + PE(0 .. {}), "
                    "each output put back at its word's row",
                    order_str(order), kWords - 1));
    if (!message.empty()) FAIL() << message;
  }
}

}  // namespace exercise_07
