// Exercises 11.1 to 11.3: are your RoPE rotation, sliding-window rule and rolling-cache decode
// step right? The tasks are in chapters/11_decoding/exercise/ (README.md there lists them).
// Check them all with
//
//   cmake --build build/release --target exercise_11
//   ctest --test-dir build/release -R Exercise11 --output-on-failure
//
// or one at a time with -R Exercise11Rope, -R Exercise11Window or -R Exercise11Ring.
//
// Where the expected values come from: a few cases worked out by hand (written out below), and
// the library's own functions, which its suites check independently of this file: attn::rope
// (tests/attn/ops/test_rope.cpp: against PyTorch and Llama's complex form), sliding_window_mask
// (tests/attn/ops/test_masks.cpp), attn::attention and causal_attention_rows
// (tests/attn/ops/test_attention.cpp, tests/attn/kernels/test_decode_attention.cpp). Every
// comparison is in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_11_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercise", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "rolling_cache.hpp"
#include "rope_rotate_row.hpp"
#include "sliding_window.hpp"

#include "exercise_checks.hpp"

#include "attn/core/random.hpp"
#include "attn/kernels/decode_attention.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"
#include "attn/ops/rope.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include <unistd.h>

namespace exercise_11 {

using attn::AllowedMask;
using attn::Index;
using attn::MatrixD;
using attn::VectorD;

/// How close counts as the same. Everything here is double, on numbers of size about 1: a right
/// answer that multiplies or sums in another order than the library (or is compiled with fused
/// multiply-adds) differs by a few ulps, about 1e-16; the wrong answers these tests name are off
/// by 1e-3 or more (RoPE's slowest pair at position m + 1 instead of m: 1e-3 of |x|). 1e-12 is
/// far from both.
constexpr double kTolerance = 1e-12;

bool close(const MatrixD& a, const MatrixD& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         ((a - b).array().abs() <= kTolerance).all();
}

std::string row_str(const MatrixD& row) {
  std::string s = "(";
  for (Index c = 0; c < row.size(); ++c) s += fmt::format("{}{:.6g}", c ? ", " : "", row(c));
  return s + ")";
}

/// A usual wrong answer: what it gives on this case, and what to say when yours equals it.
struct WrongAnswer {
  MatrixD value;
  std::string says;
};

/// "" when yours equals expected to kTolerance everywhere; otherwise the worst entry and, when
/// yours is one of the wrong answers (checked in order), what it is.
std::string compare(const std::string& what, const MatrixD& yours, const MatrixD& expected,
                    const std::vector<WrongAnswer>& wrong, const std::string& which) {
  const bool plural = what.back() == 's';  // "weights"
  if (yours.rows() != expected.rows() || yours.cols() != expected.cols()) {
    return fmt::format("Your {} {} [{} x {}], but {} must be [{} x {}] ({}).", what,
                       plural ? "are" : "is", yours.rows(), yours.cols(), plural ? "they" : "it",
                       expected.rows(), expected.cols(), which);
  }
  if (close(yours, expected)) return "";
  const auto [worst_r, worst_c] = attn_test::worst_entry(yours, expected);
  std::string message = fmt::format("Your {} {} at ({}, {}): yours {:.6g}, expected {:.6g} ({}).",
                                    what, plural ? "differ" : "differs", worst_r, worst_c,
                                    yours(worst_r, worst_c), expected(worst_r, worst_c), which);
  for (const WrongAnswer& w : wrong) {
    if (close(yours, w.value)) return message + "\n" + w.says;
  }
  if (yours.array().isNaN().any()) message += "\nYours holds NaN.";
  return message;
}

// ---- Exercise 11.1: RoPE on one row ---------------------------------------------------------

/// The library's rotation of x [1 x d] at position m in `layout`, with theta_i = base^(-2i/d).
/// sign -1: the turn the other way (rope_backward, the transpose of the rotation).
MatrixD library_rope(const MatrixD& x, Index m, double base,
                     attn::RopeLayout layout = attn::RopeLayout::interleaved, int sign = 1) {
  const attn::RopeTable table = attn::rope_table(m + 1, x.cols(), base);  // [m + 1 x d/2] each
  const attn::RopeOptions opts{.layout = layout, .first_position = m};
  return sign > 0 ? attn::rope<double>(x, table, opts)
                  : attn::rope_backward<double>(x, table, opts);
}

const std::string kRopeStub =
    "Yours is x itself, not rotated at all. Is this still the stub? Write the body of "
    "exercise_rope_rotate_row in chapters/11_decoding/exercise/rope_rotate_row.cpp.";

// 1. By hand: d = 4, theta = (pi/4, pi/2), position m = 2. Pair 0 is (x0, x1) = (1, 0),
// turned by 2 pi/4 = 90 degrees counterclockwise: (0, 1). Pair 1 is (x2, x3) = (0, 1), turned by
// 2 pi/2 = 180 degrees: (0, -1). So x' = (0, 1, 0, -1), up to cos(pi/2) = 6e-17 in double (pi
// is rounded). Each wrong answer below is worked out the same way.
TEST(Exercise11Rope, QuarterAndHalfTurnsByHand) {
  const double pi = std::numbers::pi, half_sqrt2 = std::sqrt(0.5);
  MatrixD x(1, 4);  // [1 x d]
  x << 1, 0, 0, 1;
  VectorD theta(2);  // [d/2]
  theta << pi / 4, pi / 2;
  MatrixD expected(1, 4);  // [1 x d], the turns above
  expected << 0, 1, 0, -1;
  auto row = [](double a, double b, double c, double d) {
    MatrixD r(1, 4);  // [1 x 4]
    r << a, b, c, d;
    return r;
  };
  const std::vector<WrongAnswer> wrong = {
      {x, kRopeStub},
      {row(0, -1, 0, -1),
       "Yours turns clockwise: (1, 0) went to (0, -1). The sign of sin is the wrong way round: "
       "x' = x cos - y sin, y' = x sin + y cos."},
      {row(0, 0, 1, -1),
       "Yours pairs feature i with feature i + d/2 (the halves layout, Hugging Face's "
       "rotate_half): here (x0, x2) turned by 90 degrees. This exercise pairs neighbours "
       "(2i, 2i + 1), the interleaved layout."},
      {row(-half_sqrt2, half_sqrt2, 1, 0),
       "Yours turned by (m + 1) theta_i: 135 and 270 degrees, the rotation of position 3. The "
       "token at position m turns by m theta_i."},
      {row(half_sqrt2, half_sqrt2, -1, 0),
       "Yours turned by 45 and 90 degrees: theta_i alone, or (m - 1) theta_i, the rotation of "
       "position 1. The token at position m turns by m theta_i."},
      {row(std::cos(2.0), std::sin(2.0), -std::sin(0.02), std::cos(0.02)),
       "Yours turned pair 0 by 2 radians and pair 1 by 0.02: m times the frequencies "
       "10000^(-2i/d) of d = 4, not the theta you were given (pi/4, pi/2). Use theta(i)."},
  };
  const std::string problem =
      compare("row", exercise_rope_rotate_row(x, 2, theta), expected, wrong,
              "x = (1, 0, 0, 1), m = 2, theta = (pi/4, pi/2): expected (0, 1, 0, -1)");
  if (!problem.empty()) FAIL() << problem;
}

// 2. Against the library: d = 8 at positions 5, 300, 1 and 0 with the usual frequencies
// (base 10000), and at position 3 with base 100, on random rows. Position 5 comes first: there
// every wrong answer below differs from every other.
TEST(Exercise11Rope, MatchesTheLibraryAtSeveralPositions) {
  struct Case {
    Index m;
    double base;
  };
  const Index d = 8;
  attn::Rng rng(11);
  for (const Case& c : {Case{5, 1e4}, Case{300, 1e4}, Case{1, 1e4}, Case{0, 1e4}, Case{3, 100}}) {
    const MatrixD x = attn_test::normal_matrix(rng, 1, d);    // [1 x d]
    const VectorD theta = attn::rope_frequencies(d, c.base);  // [d/2]
    const MatrixD expected = library_rope(x, c.m, c.base);    // [1 x d]
    std::vector<WrongAnswer> wrong = {
        {x, kRopeStub},
        {library_rope(x, c.m, c.base, attn::RopeLayout::interleaved, -1),
         "Yours turns each pair the wrong way (by -m theta_i): the sign of sin is the wrong way "
         "round. x' = x cos - y sin, y' = x sin + y cos."},
        {library_rope(x, c.m, c.base, attn::RopeLayout::halves),
         "Yours pairs feature i with feature i + d/2 (the halves layout, Hugging Face's "
         "rotate_half). This exercise pairs neighbours (2i, 2i + 1), the interleaved layout."},
        {library_rope(x, c.m + 1, c.base),
         "Yours is the rotation of position m + 1: the token at position m turns by m theta_i "
         "(position 0 does not turn at all)."},
    };
    // Position m - 1; at m = 0 that is -1, a turn by -theta_i.
    wrong.push_back({c.m >= 1 ? library_rope(x, c.m - 1, c.base)
                              : library_rope(x, 1, c.base, attn::RopeLayout::interleaved, -1),
                     "Yours is the rotation of position m - 1: the token at position m turns "
                     "by m theta_i, not (m - 1) theta_i."});
    if (c.base != 1e4) {
      wrong.push_back({library_rope(x, c.m, 1e4),
                       "Yours uses the frequencies 10000^(-2i/d), not the theta you were given "
                       "(here 100^(-2i/d)). Use theta(i)."});
    }
    if (c.m != 1) {
      wrong.push_back({library_rope(x, 1, c.base),
                       "Yours turns pair i by theta_i whatever the position: the angle is "
                       "m theta_i."});
    }
    const std::string problem = compare(
        "row", exercise_rope_rotate_row(x, c.m, theta), expected, wrong,
        fmt::format("d = {}, m = {}, theta_i = {}^(-2i/d), x = {}", d, c.m, c.base, row_str(x)));
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. A rotation keeps lengths: each pair's length, and so the row's, is the same before and
// after, for any angle. Necessary only (x itself passes it, and so do most wrong answers);
// test 2 decides. It catches scaling mistakes, such as cos and sin mixed up in one row only.
TEST(Exercise11Rope, KeepsEveryPairsLength) {
  const Index d = 6;
  attn::Rng rng(7);
  const MatrixD x = attn_test::normal_matrix(rng, 1, d);  // [1 x d]
  const VectorD theta = attn::rope_frequencies(d);
  const MatrixD yours = exercise_rope_rotate_row(x, 41, theta);
  if (yours.rows() != 1 || yours.cols() != d) {
    FAIL() << fmt::format("Your row is [{} x {}], but it must be [1 x {}], as x is.", yours.rows(),
                          yours.cols(), d);
  }
  for (Index i = 0; i < d / 2; ++i) {
    const double before = std::hypot(x(0, 2 * i), x(0, 2 * i + 1));
    const double after = std::hypot(yours(0, 2 * i), yours(0, 2 * i + 1));
    if (std::abs(after - before) <= kTolerance) continue;
    FAIL() << fmt::format(
        "Pair {} (features {} and {}) has length {:.6g} in x but {:.6g} in yours (m = 41): a "
        "rotation keeps lengths. Check that each new feature is one cos term and one sin term, "
        "both of the same pair.",
        i, 2 * i, 2 * i + 1, before, after);
  }
}

// ---- Exercise 11.2: the sliding window's rule -----------------------------------------------

/// Your rule over every (i, j) of an n-token sequence: [n x n].
AllowedMask your_mask(Index n, Index W) {
  AllowedMask m(n, n);  // [n x n]
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < n; ++j) m(i, j) = exercise_sliding_window_allowed(i, j, W);
  }
  return m;
}

/// The rule `allowed(i, j)` over [n x n], for the wrong answers the library has no mask for.
template <typename Rule>
AllowedMask mask_of(Index n, Rule allowed) {
  AllowedMask m(n, n);  // [n x n]
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < n; ++j) m(i, j) = allowed(i, j);
  }
  return m;
}

/// "" when yours is `expected`; otherwise the first (i, j) they disagree on, each rule's count
/// of keys for that query, and which usual mistake yours is, if it is one.
std::string window_problem(const AllowedMask& yours, const AllowedMask& expected, Index W) {
  if (yours == expected) return "";
  const Index n = expected.rows();
  Index qi = 0, kj = 0;
  while (yours(qi, kj) == expected(qi, kj)) {
    if (++kj == n) {
      kj = 0;
      ++qi;
    }
  }
  std::string message = fmt::format(
      "With W = {} (n = {}), your rule says query {} {} key {}, but i - W < j <= i says it "
      "{}. Query {} reads {} keys on your rule; it must read min(i + 1, W) = {}.",
      W, n, qi, yours(qi, kj) ? "may read" : "may not read", kj,
      expected(qi, kj) ? "may" : "may not", qi, yours.row(qi).count(), std::min(qi + 1, W));
  const std::vector<std::pair<AllowedMask, std::string>> wrong = {
      {AllowedMask::Zero(n, n),
       "Yours blocks every key: is this still the stub? Write the body of "
       "exercise_sliding_window_allowed in chapters/11_decoding/exercise/sliding_window.cpp."},
      {attn::sliding_window_mask(n, W + 1),
       "Your window reads W + 1 keys: i - j <= W counts W earlier keys and the query's own. The "
       "window of W keys is i - W < j (strictly), with j <= i."},
      {attn::window_mask(n, W),
       "Yours is chapter 05's band |i - j| <= W: it reads W keys on each side, the future ones "
       "too, 2W + 1 in all. A decoder's window is causal (j <= i) and counts the query's own key."},
      {mask_of(n, [&](Index i, Index j) { return i - j <= W; }),
       "Yours is i - j <= W: W + 1 keys behind, and every future key (no j <= i)."},
      {mask_of(n, [&](Index i, Index j) { return i - W < j; }),
       "Yours forgets causality: i - W < j lets query i read every later key. Add j <= i."},
      {attn::window_mask(n, W - 1),
       "Yours is |i - j| < W: the right keys behind, but W - 1 future keys too. Add j <= i."},
      {attn::causal_mask(n),
       "Yours is plain causal attention, j <= i: it reads every earlier key, whatever W."},
      {AllowedMask::Constant(n, n, true), "Yours allows every key."},
  };
  for (const auto& [mask, says] : wrong) {
    if (yours == mask) return message + "\n" + says;
  }
  if (W >= 2 && yours == attn::sliding_window_mask(n, W - 1)) {
    message += "\nYour window reads W - 1 keys: j > i - W is right, j >= i - W + 1 is too; "
               "j > i - W + 1 drops one.";
  }
  return message;
}

// 1. By hand: n = 6, W = 3. Query 0 reads key 0; query 1 keys 0, 1; from query 2 on, the
// query's own key and the two before it.
TEST(Exercise11Window, ThreeKeysByHand) {
  AllowedMask expected(6, 6);    // [n x n], row i = the keys query i reads
  expected << 1, 0, 0, 0, 0, 0,  //
      1, 1, 0, 0, 0, 0,          //
      1, 1, 1, 0, 0, 0,          //
      0, 1, 1, 1, 0, 0,          //
      0, 0, 1, 1, 1, 0,          //
      0, 0, 0, 1, 1, 1;
  const std::string problem = window_problem(your_mask(6, 3), expected, 3);
  if (!problem.empty()) FAIL() << problem;
}

// 2. Against the library's mask, n = 9: W = 4, 2, 1 (the query alone), W = n and W > n (both
// plain causal attention). W = 4 first: there every wrong rule above differs from every other.
TEST(Exercise11Window, MatchesSlidingWindowMask) {
  const Index n = 9;
  for (Index W : {4, 2, 1, 9, 12}) {
    const std::string problem = window_problem(your_mask(n, W), attn::sliding_window_mask(n, W), W);
    if (!problem.empty()) FAIL() << problem;
  }
}

// ---- Exercise 11.3: a rolling cache and one decode step -------------------------------------

// The sequence every ring test decodes: n = 11 tokens of width d = 4 through a ring of W = 4
// rows, so the ring wraps twice. With d = 4 the scale 1/sqrt(d) is 0.5, exact in any precision.
constexpr Index kTokens = 11, kWidth = 4, kWindow = 4;

struct Sequence {
  MatrixD Q, K, V;  // [n x d] each: row p = the token at position p
};

Sequence sequence() {
  attn::Rng rng(2711);
  Sequence s;
  s.Q = attn_test::normal_matrix(rng, kTokens, kWidth);  // [n x d]
  s.K = attn_test::normal_matrix(rng, kTokens, kWidth);  // [n x d]
  s.V = attn_test::normal_matrix(rng, kTokens, kWidth);  // [n x d]
  return s;
}

/// Eigen's index checks are on in this program (tests/CMakeLists.txt), so a row past the ring's
/// last one stops the program inside your function, with Eigen's assertion. Before it goes, it
/// says what that most likely means.
extern "C" void explain_abort(int) {
  static const char text[] =
      "\n*** The program stopped inside exercise_append_and_attend, most likely on a row index "
      "out of range: ring.keys has W rows, 0 .. W - 1, and the token at position p belongs in "
      "row p % W (did you forget to wrap?).\n";
  const ssize_t written = write(2, text, sizeof text - 1);
  static_cast<void>(written);  // nothing to do if stderr is gone
}

/// Your step for position p, with explain_abort installed while it runs.
ExerciseDecodeStep your_step(ExerciseRing& ring, const Sequence& s, Index p) {
  const MatrixD q = s.Q.row(p), k = s.K.row(p), v = s.V.row(p);  // [1 x d] each
  const auto previous = std::signal(SIGABRT, explain_abort);
  ExerciseDecodeStep step = exercise_append_and_attend(ring, q, k, v);
  std::signal(SIGABRT, previous);
  return step;
}

const std::string kRingStub =
    "Is this still the stub? Write the body of exercise_append_and_attend in "
    "chapters/11_decoding/exercise/rolling_cache.cpp.";

/// Attention of q [1 x d] over the keys and values `rows` of the sequence, in that order:
/// [1 x d] out and [1 x rows.size()] weights, by the library's attention().
attn::AttentionResultD attend_rows(const Sequence& s, Index p, const std::vector<Index>& rows,
                                   float scale = 0.5f) {
  const Index m = static_cast<Index>(rows.size());
  MatrixD K(m, kWidth), V(m, kWidth);  // [m x d] each
  for (Index r = 0; r < m; ++r) {
    K.row(r) = s.K.row(rows[static_cast<std::size_t>(r)]);
    V.row(r) = s.V.row(rows[static_cast<std::size_t>(r)]);
  }
  const MatrixD q = s.Q.row(p);  // [1 x d]
  return attn::attention(q, K, V, {.scale = scale});
}

std::vector<Index> range(Index first, Index last) {  // first .. last
  std::vector<Index> r;
  for (Index t = first; t <= last; ++t) r.push_back(t);
  return r;
}

/// The usual wrong decode steps at position p, by what they read, for the out (`weights`
/// false) or the weights.
std::vector<WrongAnswer> wrong_steps(const Sequence& s, Index p, bool weights) {
  auto pick = [&](const attn::AttentionResultD& r) { return weights ? r.weights : r.out; };
  const Index held = std::min(p + 1, kWindow);
  std::vector<WrongAnswer> wrong;
  if (!weights) {
    wrong.push_back({MatrixD::Zero(1, kWidth),
                     "Yours is all zeros. " + kRingStub +
                         " (If not: the query reads its own key and value too, so append them "
                         "first.)"});
  }
  if (p >= kWindow) {
    // Reading positions p - W .. p: position p - W's row already holds position p.
    std::vector<Index> twice = range(p - kWindow + 1, p);
    twice.insert(twice.begin(), p);
    wrong.push_back({pick(attend_rows(s, p, twice)),
                     "Your window reads W + 1 keys: positions p - W .. p. Position p - W's row "
                     "now holds position p, which yours reads twice. The query at p reads "
                     "p - W + 1 .. p."});
    // Slot order: row 0 first, whatever position it holds.
    std::vector<Index> slots;
    for (Index r = 0; r < kWindow; ++r) slots.push_back(p - ((p - r) % kWindow));
    if (weights) {
      wrong.push_back({pick(attend_rows(s, p, slots)),
                       fmt::format("Yours are the right weights in the ring's row order, row 0 "
                                   "first: once the ring has wrapped, the oldest token (position "
                                   "{}) is in row {} = (p + 1) mod W, not row 0. Start there.",
                                   p - kWindow + 1, (p + 1) % kWindow)});
    }
    wrong.push_back({pick(attend_rows(s, p, range(0, kWindow - 1))),
                     "Yours reads positions 0 .. W - 1, the first W tokens, at every step: the "
                     "ring never wraps. The token at p goes into row p mod W, over the oldest."});
    wrong.push_back({pick(attend_rows(s, p, range(p - kWindow, p - 1))),
                     "Yours reads positions p - W .. p - 1: the window before this token. "
                     "Append its key first, then attend: the query reads its own key."});
  }
  wrong.push_back({pick(attend_rows(s, p, range(p - held + 1, p), 1.0f)),
                   "Yours forgets the scale: the scores are q . k / sqrt(d), here q . k / 2."});
  return wrong;
}

// 1. The ring itself after every step: position p's key and value in row p mod W (a copy, so
// bit for bit), the rows of the window's other positions untouched, and the count.
TEST(Exercise11Ring, StoresPositionPInRowPModW) {
  const Sequence s = sequence();
  ExerciseRing ring = exercise_make_ring(kWindow, kWidth);
  for (Index p = 0; p < kTokens; ++p) {
    const ExerciseRing before = ring;
    your_step(ring, s, p);
    if (ring.keys.rows() != kWindow || ring.keys.cols() != kWidth ||
        ring.values.rows() != kWindow || ring.values.cols() != kWidth) {
      FAIL() << fmt::format(
          "After the token at position {}, your ring's keys are [{} x {}] and values [{} x {}]: "
          "they must stay [W x d] = [{} x {}]. The ring's memory never grows; that is its point.",
          p, ring.keys.rows(), ring.keys.cols(), ring.values.rows(), ring.values.cols(), kWindow,
          kWidth);
    }
    if (ring.appended != p + 1) {
      FAIL() << fmt::format(
          "After the token at position {}, ring.appended is {}: it must be {}, every token "
          "appended so far (it is the next token's position).{}",
          p, ring.appended, p + 1, ring.appended == 0 ? " " + kRingStub : "");
    }
    const Index slot = p % kWindow;
    if (ring.keys.row(slot) != s.K.row(p) || ring.values.row(slot) != s.V.row(p)) {
      const bool key = ring.keys.row(slot) != s.K.row(p);
      std::string message = fmt::format(
          "After the token at position {}, row {} = {} mod {} of your ring does not hold its "
          "{}: it holds {}, the token's is {}.",
          p, slot, p, kWindow, key ? "key" : "value",
          row_str(key ? ring.keys.row(slot) : ring.values.row(slot)),
          row_str(key ? s.K.row(p) : s.V.row(p)));
      for (Index r = 0; r < kWindow; ++r) {
        if (r != slot && ring.keys.row(r) == s.K.row(p)) {
          message += fmt::format(" Yours put it in row {}{}.", r,
                                 r == kWindow - 1 && p >= kWindow
                                     ? ", the last, once the ring was full: it must wrap to row "
                                       "p mod W, over the oldest"
                                     : "");
        }
      }
      if (p >= kWindow && ring.keys == before.keys) {
        message += " Yours stops storing once the ring is full: it must wrap, overwriting the "
                   "oldest row (row p mod W).";
      }
      FAIL() << message;
    }
    for (Index t = std::max<Index>(0, p - kWindow + 1); t < p; ++t) {
      if (ring.keys.row(t % kWindow) == s.K.row(t) && ring.values.row(t % kWindow) == s.V.row(t))
        continue;
      FAIL() << fmt::format(
          "Storing position {} changed row {} of your ring, which holds position {}, still in "
          "the window (the last W = {} positions are {} .. {}).",
          p, t % kWindow, t, kWindow, std::max<Index>(0, p - kWindow + 1), p);
    }
  }
}

// 2. The weights of every step, oldest key first: row p of softmax(Q K^T / sqrt(d)) under
// sliding_window_mask(n, W), its columns p - held + 1 .. p (attn::attention, in double).
// Their order is what shows whether yours reads the ring oldest first.
TEST(Exercise11Ring, WeightsOverTheLastWPositionsOldestFirst) {
  const Sequence s = sequence();
  const AllowedMask window = attn::sliding_window_mask(kTokens, kWindow);               // [n x n]
  const MatrixD weights = attn::attention(s.Q, s.K, s.V, {.allowed = window}).weights;  // [n x n]
  ExerciseRing ring = exercise_make_ring(kWindow, kWidth);
  for (Index p = 0; p < kTokens; ++p) {
    const Index held = std::min(p + 1, kWindow);
    const MatrixD yours = your_step(ring, s, p).weights;
    if (yours.cols() == held + 1 && yours.rows() == 1) {
      FAIL() << fmt::format(
          "Your window reads W + 1 keys: {} weights at position {}, where the query reads "
          "min(p + 1, W) = {}, positions {} .. {}.",
          yours.cols(), p, held, p - held + 1, p);
    }
    if (yours.size() == 0 && p == 0) FAIL() << "Your weights are empty. " + kRingStub;
    const MatrixD expected = weights.block(p, p - held + 1, 1, held);  // [1 x held]
    const std::string problem =
        compare("weights", yours, expected, wrong_steps(s, p, true),
                fmt::format("position {}, W = {}: the weights of positions {} .. {}, oldest first",
                            p, kWindow, p - held + 1, p));
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. The output of every step: row p of causal attention with a window of W, computed without
// a cache by attn::causal_attention_rows.
TEST(Exercise11Ring, OutputIsRowPOfWindowedAttention) {
  const Sequence s = sequence();
  // [n x d]; the scale unset is 1/sqrt(4) = 0.5, as yours.
  const MatrixD expected = attn::causal_attention_rows(s.Q, s.K, s.V, {.window = kWindow});
  ExerciseRing ring = exercise_make_ring(kWindow, kWidth);
  for (Index p = 0; p < kTokens; ++p) {
    const std::string problem =
        compare("out", your_step(ring, s, p).out, expected.row(p), wrong_steps(s, p, false),
                fmt::format("position {}, W = {}", p, kWindow));
    if (!problem.empty()) FAIL() << problem;
  }
}

}  // namespace exercise_11
