// Exercises 10.1 to 10.3: are your fold of a key tile, merge of two softmax states and weights
// rebuilt from the log-sum-exp right? The tasks are in chapters/10_efficient_attention/exercise/
// (README.md there lists them). Check them all with
//
//   cmake --build build/release --target exercise_10
//   ctest --test-dir build/release -R Exercise10 --output-on-failure
//
// or one at a time with -R Exercise10Fold, -R Exercise10Merge or -R Exercise10Weights.
//
// Where the expected values come from: small cases worked out by hand (written out below); the
// state's definition on the chapter's page, summed directly over the keys seen so far (m the
// largest score, l = sum of e^(s - m), O = sum of e^(s - m) v), with no recurrence and no merge;
// and the library's own functions, which its suites check independently of this file:
// attn::attention (tests/attn/ops/test_attention.cpp and test_masked_attention.cpp) for the
// outputs and the weights, attn::tiled_attention (tests/attn/kernels/test_tiled_attention.cpp)
// for the log-sum-exp L. Every comparison is in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_10_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "fold_key_tile.hpp"
#include "merge_states.hpp"
#include "weights_from_lse.hpp"

#include "exercise_checks.hpp"

#include "attn/core/random.hpp"
#include "attn/kernels/tiled_attention.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace exercise_10 {

using attn::AllowedMask;
using attn::Index;
using attn::MatrixD;
using attn::VectorD;
using State = ExerciseSoftmaxState;

constexpr double kInf = std::numeric_limits<double>::infinity();

/// How close counts as the same. Everything here is double, on numbers no larger than about 10
/// (l sums at most 9 terms of at most 1, O at most 9 value rows of size about 1): a right answer
/// that sums in another order than the expected value, or is compiled with fused multiply-adds,
/// differs by a few ulps of 10, about 1e-14. The wrong answers these tests name are off by
/// 1e-3 or more (the smallest: a rescaling factor e^-5 = 7e-3 missing on a term of size 1).
/// 1e-12 is far from both. Equal infinities (m = -inf in both) count as the same.
constexpr double kTolerance = 1e-12;

bool same(double a, double b) { return a == b || std::abs(a - b) <= kTolerance; }

bool same_row(const MatrixD& a, const MatrixD& b, Index r) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Index c = 0; c < a.cols(); ++c) {
    if (!same(a(r, c), b(r, c))) return false;
  }
  return true;
}

std::string row_str(const MatrixD& m, Index r) {
  std::string s = "(";
  for (Index c = 0; c < m.cols(); ++c) s += fmt::format("{}{:.6g}", c ? ", " : "", m(r, c));
  return s + ")";
}

/// A usual wrong answer: what it gives on this case, and what to say when yours equals it.
struct WrongAnswer {
  MatrixD value;
  std::string says;
};

/// What a comparison found: "" when yours equals expected; otherwise what differs, and the row
/// of the worst entry (-1 for a shape error).
struct Finding {
  std::string message;
  Index row = -1;
};

/// Yours against expected, entry by entry. The usual wrong answers are matched on the row of
/// the worst entry only, so that a wrong answer that is right on the other rows (an all-blocked
/// row handled well, say) is still named.
Finding compare(const std::string& what, const MatrixD& yours, const MatrixD& expected,
                const std::vector<WrongAnswer>& wrong, const std::string& which) {
  if (yours.rows() != expected.rows() || yours.cols() != expected.cols()) {
    return {fmt::format("Your {} is [{} x {}], but it must be [{} x {}] ({}).", what, yours.rows(),
                        yours.cols(), expected.rows(), expected.cols(), which)};
  }
  Index worst_r = -1, worst_c = -1;
  double worst = -1;
  for (Index r = 0; r < yours.rows(); ++r) {
    for (Index c = 0; c < yours.cols(); ++c) {
      if (same(yours(r, c), expected(r, c))) continue;
      const double error = std::abs(yours(r, c) - expected(r, c));
      const double rank = std::isnan(error) ? kInf : error;  // NaN ranks with the largest
      if (rank > worst) {
        worst = rank;
        worst_r = r;
        worst_c = c;
      }
    }
  }
  if (worst_r < 0) return {};
  std::string message =
      fmt::format("Your {} differs at ({}, {}): yours {:.6g}, expected {:.6g} ({}).", what, worst_r,
                  worst_c, yours(worst_r, worst_c), expected(worst_r, worst_c), which);
  for (const WrongAnswer& w : wrong) {
    if (same_row(yours, w.value, worst_r)) return {message + "\n" + w.says, worst_r};
  }
  return {message, worst_r};
}

MatrixD column(const VectorD& v) { return MatrixD(v); }  // [n x 1]

/// A usual wrong state, and what to say when yours equals it in the part that is wrong.
struct WrongState {
  State value;
  std::string says;
};

/// "" when yours is expected; otherwise the first part that differs (m, then l, then O), shapes
/// first, and the usual mistake it matches. `nan_note` is added when yours holds NaN on a row
/// whose expected m is -inf (a row that has seen nothing).
std::string state_problem(const State& yours, const State& expected,
                          const std::vector<WrongState>& wrong, const std::string& which,
                          const std::string& nan_note) {
  const Index rows = expected.m.size(), d_v = expected.O.cols();
  if (yours.m.size() != rows || yours.l.size() != rows || yours.O.rows() != rows ||
      yours.O.cols() != d_v) {
    return fmt::format(
        "Your state has m [{}], l [{}] and O [{} x {}], but it must have m [{}], l [{}] and O "
        "[{} x {}], the shapes of the state you were given ({}).",
        yours.m.size(), yours.l.size(), yours.O.rows(), yours.O.cols(), rows, rows, rows, d_v,
        which);
  }
  auto part = [](const State& s, const std::string& name) {
    return name == "m" ? column(s.m) : name == "l" ? column(s.l) : s.O;
  };
  // Which usual mistake yours is: the one it equals everywhere, else the one it equals in all
  // three parts on the row found wrong (several mistakes share a part: forgetting to rescale l
  // alone and forgetting both give the same l).
  auto matches = [&](const State& w, Index row) {
    for (const std::string name : {"m", "l", "O"}) {
      const MatrixD a = part(yours, name), b = part(w, name);
      for (Index r = 0; r < a.rows(); ++r) {
        if ((row < 0 || r == row) && !same_row(a, b, r)) return false;
      }
    }
    return true;
  };
  for (const std::string name : {"m", "l", "O"}) {
    const Finding found = compare(name, part(yours, name), part(expected, name), {}, which);
    if (found.message.empty()) continue;
    std::string message = found.message;
    const WrongState* mistake = nullptr;
    for (const WrongState& w : wrong) {
      if (!mistake && matches(w.value, -1)) mistake = &w;
    }
    for (const WrongState& w : wrong) {
      if (!mistake && matches(w.value, found.row)) mistake = &w;
    }
    if (mistake) message += "\n" + mistake->says;
    if (found.row >= 0 && expected.m(found.row) == -kInf &&
        (std::isnan(yours.m(found.row)) || std::isnan(yours.l(found.row)) ||
         yours.O.row(found.row).array().isNaN().any())) {
      message += "\n" + nan_note;
    }
    return message;
  }
  return "";
}

/// The state of the rows of S [n_q x n_k] (blocked scores -inf) over the keys `keys`, from its
/// definition: m = the largest score, l = sum of e^(s - m), O = sum of e^(s - m) v_j, and
/// (-inf, 0, 0) for a row with no allowed key among them.
State state_by_definition(const MatrixD& S, const MatrixD& V, const std::vector<Index>& keys) {
  State st = exercise_empty_state(S.rows(), V.cols());
  for (Index r = 0; r < S.rows(); ++r) {
    for (Index j : keys) st.m(r) = std::max(st.m(r), S(r, j));
    if (st.m(r) == -kInf) continue;
    for (Index j : keys) {
      const double w = std::exp(S(r, j) - st.m(r));
      st.l(r) += w;
      st.O.row(r) += w * V.row(j);
    }
  }
  return st;
}

std::vector<Index> range(Index first, Index end) {  // first .. end - 1
  std::vector<Index> r;
  for (Index t = first; t < end; ++t) r.push_back(t);
  return r;
}

// ---- Exercise 10.1: fold one key tile -------------------------------------------------------

/// The usual wrong ways to fold a key tile (there is no right one here: the expected states come
/// from the definition or from hand).
enum class FoldFlaw {
  l_not_rescaled,    // l + rowsum(P), O rescaled
  O_not_rescaled,    // O + P V, l rescaled
  nothing_rescaled,  // neither
  factor_inverted,   // e^(m' - m) instead of e^(m - m')
  O_divided,         // O returned already divided by the new l
  max_of_tile_only,  // m' = the tile's largest score, not the larger of it and the old m
};

State flawed_fold(const State& st, const MatrixD& S, const MatrixD& V_j, FoldFlaw flaw) {
  State next = st;
  for (Index r = 0; r < S.rows(); ++r) {
    const double tile_max = S.row(r).maxCoeff();
    const double m_new =
        flaw == FoldFlaw::max_of_tile_only ? tile_max : std::max(st.m(r), tile_max);
    if (m_new == -kInf) continue;  // the flaws below are not about this row
    double factor = st.m(r) == -kInf ? 0.0 : std::exp(st.m(r) - m_new);
    if (flaw == FoldFlaw::factor_inverted && st.m(r) != -kInf) factor = std::exp(m_new - st.m(r));
    const bool rescale_l = flaw != FoldFlaw::l_not_rescaled && flaw != FoldFlaw::nothing_rescaled;
    const bool rescale_O = flaw != FoldFlaw::O_not_rescaled && flaw != FoldFlaw::nothing_rescaled;
    const MatrixD P = (S.row(r).array() - m_new).exp().matrix();  // [1 x B_k]
    next.l(r) = st.l(r) * (rescale_l ? factor : 1.0) + P.sum();
    next.O.row(r) = st.O.row(r) * (rescale_O ? factor : 1.0) + P * V_j;
    if (flaw == FoldFlaw::O_divided) next.O.row(r) /= next.l(r);
    next.m(r) = m_new;
  }
  return next;
}

const std::string kFoldStub =
    "Yours is the state you were given, unchanged: the tile was not folded in. Is this still the "
    "stub? Write the body of exercise_fold_key_tile in "
    "chapters/10_efficient_attention/exercise/fold_key_tile.cpp.";

const std::string kFoldNan =
    "Yours holds NaN on a row that has seen no allowed key, in the old state or in this tile: "
    "there m' = -inf, and e^(m - m') = e^(-inf - (-inf)) and e^(S - m') are NaN. Leave such a "
    "row as it is (m = -inf, l = 0, O = 0), as the page's fold_key_tile does (`continue`).";

std::vector<WrongState> wrong_folds(const State& st, const MatrixD& S, const MatrixD& V_j) {
  return {
      {st, kFoldStub},
      {flawed_fold(st, S, V_j, FoldFlaw::nothing_rescaled),
       "Yours adds the tile's terms to l and O without rescaling either: both were summed "
       "against the old maximum m. When the maximum grows, multiply l and O by e^(m - m') "
       "before adding the tile's terms."},
      {flawed_fold(st, S, V_j, FoldFlaw::l_not_rescaled),
       "Yours does not rescale l: it was summed against the old maximum m, like O. Multiply it "
       "by e^(m - m') before adding the tile's sum."},
      {flawed_fold(st, S, V_j, FoldFlaw::O_not_rescaled),
       "Yours does not rescale O: its terms e^(s - m) v were measured against the old maximum, "
       "like l's. Multiply O by e^(m - m') before adding P V_j."},
      {flawed_fold(st, S, V_j, FoldFlaw::factor_inverted),
       "Yours rescales by e^(m' - m), the factor upside down: it is at least 1 and makes the old "
       "terms grow. The old sums move DOWN to the new maximum: e^(m - m'), at most 1."},
      {flawed_fold(st, S, V_j, FoldFlaw::O_divided),
       "Yours returns O already divided by the new l. Keep O unnormalised, measured against m "
       "like l: the division out = O / l comes once, after the last key tile."},
      {flawed_fold(st, S, V_j, FoldFlaw::max_of_tile_only),
       "Your new m is the tile's largest score alone: it must be max(m, that), the largest "
       "score of every key seen so far. Below the old maximum, the factor e^(m - m') is above 1 "
       "and the sums can overflow: the state's whole point is that no term exceeds e^0 = 1."},
  };
}

// 1. By hand: B_q = 4 rows, B_k = 2 keys, d_v = 2, V_j = [[1, 0], [0, 2]] (key 1's value, then
// key 2's).
//   row 0: old (m, l, O) = (1, 2, (4, -2)), scores (3, 1). m' = 3, factor e^(1-3) = e^-2,
//          P = (e^0, e^-2) = (1, e^-2). l = 2 e^-2 + 1 + e^-2 = 1 + 3 e^-2 = 1.406006;
//          O = (4, -2) e^-2 + 1 (1, 0) + e^-2 (0, 2) = (1 + 4 e^-2, 0) = (1.541341, 0).
//   row 1: old (2, 1.5, (1, 1)), scores (0, -inf: blocked). m' = 2, the maximum stays, factor 1,
//          P = (e^-2, 0). l = 1.5 + e^-2 = 1.635335; O = (1 + e^-2, 1) = (1.135335, 1).
//   row 2: nothing seen, scores (-inf, -inf): m' = -inf, the row stays (-inf, 0, (0, 0)).
//   row 3: nothing seen, scores (0.5, 0.5): m' = 0.5, P = (1, 1), l = 2, O = (1, 2).
TEST(Exercise10Fold, OneTileByHand) {
  State st = exercise_empty_state(4, 2);
  st.m << 1, 2, -kInf, -kInf;
  st.l << 2, 1.5, 0, 0;
  st.O << 4, -2, 1, 1, 0, 0, 0, 0;
  MatrixD S(4, 2);  // [B_q x B_k], already scaled, blocked = -inf
  S << 3, 1, 0, -kInf, -kInf, -kInf, 0.5, 0.5;
  MatrixD V_j(2, 2);  // [B_k x d_v]
  V_j << 1, 0, 0, 2;
  const double e2 = std::exp(-2.0);
  State expected = exercise_empty_state(4, 2);
  expected.m << 3, 2, -kInf, 0.5;
  expected.l << 1 + 3 * e2, 1.5 + e2, 0, 2;
  expected.O << 1 + 4 * e2, 0, 1 + e2, 1, 0, 0, 1, 2;
  const std::string problem =
      state_problem(exercise_fold_key_tile(st, S, V_j), expected, wrong_folds(st, S, V_j),
                    "the hand-worked tile: rows (1, 2, (4, -2)) with scores (3, 1), "
                    "(2, 1.5, (1, 1)) with (0, -inf), an empty row with (-inf, -inf), an empty "
                    "row with (0.5, 0.5)",
                    kFoldNan);
  if (!problem.empty()) FAIL() << problem;
}

// The case of tests 2 and 3: n_q = 5 queries, n_k = 7 keys of width d = 3, values of width 2,
// key tiles of B_k = 3 (keys 0-2, 3-5, 6), scale 1/sqrt(3) (attention()'s default). The mask:
//   query 0 every key;  query 1 keys 4..6 only (tile 1 is all blocked for it: it starts from
//   nothing in tile 2);  query 2 no key at all (it must stay (-inf, 0, 0) to the end);
//   query 3 keys 0..3;  query 4 every key.
// In this draw (seed 1009) the maxima of queries 0, 3 and 4 grow in key tile 2 and query 0's
// again in key tile 3, so a missing or inverted rescaling shows.
struct Case {
  MatrixD Q, K, V;  // [n_q x d], [n_k x d], [n_k x d_v]
  AllowedMask allowed;
  MatrixD S;  // [n_q x n_k]: Q K^T / sqrt(d), blocked = -inf
};

constexpr Index kKeyTile = 3;

Case fold_case() {
  attn::Rng rng(1009);
  Case c;
  c.Q = attn_test::normal_matrix(rng, 5, 3);      // [n_q x d]
  c.K = attn_test::normal_matrix(rng, 7, 3);      // [n_k x d]
  c.V = attn_test::normal_matrix(rng, 7, 2);      // [n_k x d_v]
  c.allowed = AllowedMask::Constant(5, 7, true);  // [n_q x n_k]
  c.allowed.row(1).head(4).setConstant(false);
  c.allowed.row(2).setConstant(false);
  c.allowed.row(3).tail(3).setConstant(false);
  c.S = c.Q * c.K.transpose() / std::sqrt(3.0);  // [n_q x n_k]
  for (Index i = 0; i < 5; ++i) {
    for (Index j = 0; j < 7; ++j) {
      if (!c.allowed(i, j)) c.S(i, j) = -kInf;
    }
  }
  return c;
}

/// Key tile t of the case: its scores [n_q x b] and values [b x d_v], b = 3 or 1 (the last).
MatrixD tile_scores(const Case& c, Index t) {
  return c.S.middleCols(t * kKeyTile, std::min(kKeyTile, c.S.cols() - t * kKeyTile));
}
MatrixD tile_values(const Case& c, Index t) {
  return c.V.middleRows(t * kKeyTile, std::min(kKeyTile, c.V.rows() - t * kKeyTile));
}

// 2. Every tile in turn, from the empty state: after tile t, yours must be the state of the
// keys seen so far by its definition (the page: O_r = sum_j e^(s_rj - m) v_j, l_r = sum_j
// e^(s_rj - m)), fed at each step with yours of the step before.
TEST(Exercise10Fold, EveryTileMatchesTheDefinition) {
  const Case c = fold_case();
  State yours = exercise_empty_state(5, 2);
  for (Index t = 0; t * kKeyTile < 7; ++t) {
    const MatrixD S_t = tile_scores(c, t), V_t = tile_values(c, t);
    const State before = yours;
    yours = exercise_fold_key_tile(before, S_t, V_t);
    const State expected = state_by_definition(c.S, c.V, range(0, std::min<Index>(7, (t + 1) * 3)));
    const std::string problem = state_problem(
        yours, expected, wrong_folds(before, S_t, V_t),
        fmt::format("after key tile {} of 3 (keys {}..{}), folded into your state of the tile "
                    "before",
                    t + 1, t * kKeyTile, std::min<Index>(7, (t + 1) * kKeyTile) - 1),
        kFoldNan);
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. The point of it all: after the last tile, out = O / l is attention's output
// (attn::attention with the same mask and its default scale 1/sqrt(d)), and m + log l is the
// log-sum-exp L that attn::tiled_attention keeps. Query 2 has no key: attention() gives it a zero
// row and tiled_attention L = -inf; yours must end at (-inf, 0, 0).
TEST(Exercise10Fold, OutIsAttentionAfterTheLastTile) {
  const Case c = fold_case();
  State st = exercise_empty_state(5, 2);
  for (Index t = 0; t * kKeyTile < 7; ++t) {
    st = exercise_fold_key_tile(st, tile_scores(c, t), tile_values(c, t));
    if (st.m.size() != 5 || st.l.size() != 5 || st.O.rows() != 5 || st.O.cols() != 2) {
      FAIL() << fmt::format(
          "After key tile {}, your state has m [{}], l [{}], O [{} x {}]: it must keep the "
          "shapes m [5], l [5], O [5 x 2] of the state you were given.",
          t + 1, st.m.size(), st.l.size(), st.O.rows(), st.O.cols());
    }
  }
  const attn::AttentionResultD plain = attn::attention(c.Q, c.K, c.V, {.allowed = c.allowed});
  const attn::TiledAttentionResultD tiled =
      attn::tiled_attention(c.Q, c.K, c.V, {.allowed = c.allowed});
  if (!(st.m(2) == -kInf && st.l(2) == 0 && (st.O.row(2).array() == 0).all())) {
    FAIL() << fmt::format(
        "Query 2 may read no key at all, so after every tile its state must still be (m, l, O) "
        "= (-inf, 0, (0, 0)); yours is ({}, {}, {}).{}",
        st.m(2), st.l(2), row_str(st.O, 2),
        std::isnan(st.m(2)) || std::isnan(st.l(2)) || st.O.row(2).array().isNaN().any()
            ? "\n" + kFoldNan
            : "");
  }
  for (Index r : {0, 1, 3, 4}) {
    if (st.m(r) == -kInf) {
      FAIL() << fmt::format(
          "After every tile, query {} still has m = -inf, as if it had seen no key, but it may "
          "read some. Is this still the stub? Write the body of exercise_fold_key_tile in "
          "chapters/10_efficient_attention/exercise/fold_key_tile.cpp.",
          r);
    }
    const MatrixD out = st.O.row(r) / st.l(r);  // [1 x d_v]
    const double L = st.m(r) + std::log(st.l(r));
    if (same_row(out, plain.out.row(r), 0) && same(L, tiled.lse(r))) continue;
    FAIL() << fmt::format(
        "After the last tile, query {}: your O / l = {} and m + log l = {:.9g}, but attention's "
        "output is {} and its log-sum-exp L = {:.9g}. The earlier tests say which step goes "
        "wrong; if they pass, check that O and l were measured against the same m.",
        r, row_str(out, 0), L, row_str(plain.out, r), tiled.lse(r));
  }
}

// ---- Exercise 10.2: merge two states --------------------------------------------------------

enum class MergeFlaw {
  nothing_rescaled,  // l_a + l_b, O_a + O_b
  O_not_rescaled,    // l right, O_a + O_b
  factor_inverted,   // e^(m - m_x) instead of e^(m_x - m)
  larger_only,       // the state with the larger maximum, the other dropped
};

State flawed_merge(const State& a, const State& b, MergeFlaw flaw) {
  State st = a;
  for (Index r = 0; r < a.m.size(); ++r) {
    const double m = std::max(a.m(r), b.m(r));
    auto factor = [&](double m_x) {
      if (m_x == -kInf) return 0.0;
      switch (flaw) {
        case MergeFlaw::nothing_rescaled:
          return 1.0;
        case MergeFlaw::factor_inverted:
          return std::exp(m - m_x);
        case MergeFlaw::larger_only:
          return m_x == m ? 1.0 : 0.0;
        case MergeFlaw::O_not_rescaled:
          break;
      }
      return std::exp(m_x - m);
    };
    st.m(r) = m;
    st.l(r) = a.l(r) * factor(a.m(r)) + b.l(r) * factor(b.m(r));
    st.O.row(r) = flaw == MergeFlaw::O_not_rescaled
                      ? MatrixD(a.O.row(r) + b.O.row(r))
                      : MatrixD(a.O.row(r) * factor(a.m(r)) + b.O.row(r) * factor(b.m(r)));
  }
  return st;
}

const std::string kMergeNan =
    "Yours holds NaN on a row where neither state has seen anything (m_a = m_b = -inf): there "
    "e^(m_a - m) = e^(-inf - (-inf)) is NaN. A state whose m is -inf has nothing to add: take its "
    "factor as 0 (OnlineSoftmax::rescale does), and the merged row stays (-inf, 0, 0).";

std::vector<WrongState> wrong_merges(const State& a, const State& b) {
  return {
      {a, "Yours is a itself: b was not merged in. Is this still the stub? Write the body of "
          "exercise_merge_states in chapters/10_efficient_attention/exercise/merge_states.cpp."},
      {b, "Yours is b itself: a was not merged in."},
      {flawed_merge(a, b, MergeFlaw::nothing_rescaled),
       "Yours adds l_a + l_b and O_a + O_b as they are: each was summed against its own maximum. "
       "Move both to m = max(m_a, m_b) first, multiplying a's by e^(m_a - m) and b's by "
       "e^(m_b - m)."},
      {flawed_merge(a, b, MergeFlaw::O_not_rescaled),
       "Your l is right but your O is O_a + O_b: O was summed against each state's maximum like "
       "l, so it takes the same factors e^(m_a - m) and e^(m_b - m)."},
      {flawed_merge(a, b, MergeFlaw::factor_inverted),
       "Yours multiplies by e^(m - m_x), the factor upside down (at least 1). The state with the "
       "smaller maximum moves DOWN to the common one: e^(m_x - m), at most 1."},
      {flawed_merge(a, b, MergeFlaw::larger_only),
       "Yours keeps only the state with the larger maximum and drops the other. The other's "
       "terms are small, not zero: add them, times e^(m_x - m)."},
  };
}

// 1. By hand: B_q = 5 rows, d_v = 2.
//   row 0: a = (4, 1.5, (3, 1)), b = (9, 1.25, (0.5, -1)) (the maxima of the page's split).
//          m = 9, a's factor e^(4 - 9) = e^-5, b's 1: l = 1.5 e^-5 + 1.25 = 1.260107,
//          O = (3 e^-5 + 0.5, e^-5 - 1) = (0.520214, -0.993262).
//   row 1: a = (2, 1, (1, 1)), b has seen nothing (-inf, 0, 0): the merge is a's row.
//   row 2: a has seen nothing, b = (-1, 2, (2, 0)): the merge is b's row.
//   row 3: neither has seen anything: (-inf, 0, (0, 0)), with no NaN.
//   row 4: equal maxima, a = (0, 1, (1, 0)), b = (0, 3, (0, 1)): both factors 1, (0, 4, (1, 1)).
TEST(Exercise10Merge, FiveRowsByHand) {
  State a = exercise_empty_state(5, 2), b = exercise_empty_state(5, 2);
  a.m << 4, 2, -kInf, -kInf, 0;
  a.l << 1.5, 1, 0, 0, 1;
  a.O << 3, 1, 1, 1, 0, 0, 0, 0, 1, 0;
  b.m << 9, -kInf, -1, -kInf, 0;
  b.l << 1.25, 0, 2, 0, 3;
  b.O << 0.5, -1, 0, 0, 2, 0, 0, 0, 0, 1;
  const double e5 = std::exp(-5.0);
  State expected = exercise_empty_state(5, 2);
  expected.m << 9, 2, -1, -kInf, 0;
  expected.l << 1.5 * e5 + 1.25, 1, 2, 0, 4;
  expected.O << 3 * e5 + 0.5, e5 - 1, 1, 1, 2, 0, 0, 0, 1, 1;
  const std::string problem =
      state_problem(exercise_merge_states(a, b), expected, wrong_merges(a, b),
                    "the hand-worked rows: maxima 4 and 9, one side empty, the other side "
                    "empty, both empty, equal maxima",
                    kMergeNan);
  if (!problem.empty()) FAIL() << problem;
}

// 2. One row of scores cut in two: for the case of the fold tests (5 queries, 7 keys, the same
// mask, so query 1 has nothing in part a and query 2 nothing anywhere), a is the state of keys
// 0..3 and b of keys 4..6, each by its definition. Their merge must be the state of all 7 keys
// by the definition, in either order (merge(b, a)), and out = O / l attention's output.
TEST(Exercise10Merge, TwoPartsOfEveryRowInEitherOrder) {
  const Case c = fold_case();
  const State a = state_by_definition(c.S, c.V, range(0, 4));
  const State b = state_by_definition(c.S, c.V, range(4, 7));
  const State whole = state_by_definition(c.S, c.V, range(0, 7));
  std::string problem = state_problem(exercise_merge_states(a, b), whole, wrong_merges(a, b),
                                      "merge(a, b), a = keys 0..3, b = keys 4..6", kMergeNan);
  if (!problem.empty()) FAIL() << problem;
  problem = state_problem(exercise_merge_states(b, a), whole, wrong_merges(b, a),
                          "merge(b, a), the same two parts the other way round: the merge does "
                          "not depend on their order",
                          kMergeNan);
  if (!problem.empty()) FAIL() << problem;
  const State merged = exercise_merge_states(a, b);
  const attn::AttentionResultD plain = attn::attention(c.Q, c.K, c.V, {.allowed = c.allowed});
  for (Index r : {0, 1, 3, 4}) {
    const MatrixD out = merged.O.row(r) / merged.l(r);  // [1 x d_v]
    if (same_row(out, plain.out.row(r), 0)) continue;
    FAIL() << fmt::format("Query {}: your merged O / l is {}, but attention's output is {}.", r,
                          row_str(out, 0), row_str(plain.out, r));
  }
}

// ---- Exercise 10.3: the weights from L ------------------------------------------------------

/// P = e^(S - L) with S = factor Q_i K_j^T and no guard for L = -inf: the unguarded formula
/// (with the right factor, a wrong answer only on rows where L = -inf) or a wrong scale.
MatrixD unguarded_weights(const MatrixD& Q_i, const MatrixD& K_j, const VectorD& L_i,
                          double factor) {
  MatrixD S = factor * Q_i * K_j.transpose();  // [B_q x B_k]
  return (S.array().colwise() - L_i.array()).exp().matrix();
}

/// The usual wrong tiles of weights, for the given scale.
std::vector<WrongAnswer> wrong_weights(const MatrixD& Q_i, const MatrixD& K_j, const VectorD& L_i,
                                       double scale) {
  const MatrixD S = scale * Q_i * K_j.transpose();  // [B_q x B_k]
  MatrixD tile_softmax = S;                         // [B_q x B_k]: each row over this tile alone
  for (Index r = 0; r < S.rows(); ++r) {
    tile_softmax.row(r) = (S.row(r).array() - S.row(r).maxCoeff()).exp().matrix();
    tile_softmax.row(r) /= tile_softmax.row(r).sum();
  }
  const MatrixD flipped = (-(S.array().colwise() - L_i.array())).exp().matrix();  // e^(L - S)
  std::vector<WrongAnswer> wrong = {
      {MatrixD::Zero(S.rows(), S.cols()),
       "Yours is all zeros on this row. Is this still the stub? Write the body of "
       "exercise_weights_from_lse in chapters/10_efficient_attention/exercise/"
       "weights_from_lse.cpp."},
      {tile_softmax,
       "Your row is a softmax over this tile's keys alone: it sums to 1. L holds the log-sum-exp "
       "of the query's WHOLE row of scores, so e^(S - L) is this tile's share of the full "
       "softmax; the other tiles hold the rest. Divide by nothing: P = e^(S - L)."},
      {unguarded_weights(Q_i, K_j, L_i, scale),
       "Yours is +inf on a row whose L is -inf (a query with no allowed key): e^(S - (-inf)) is "
       "e^(+inf). Such a query passes nothing back: its row of P must be zeros."},
      {flipped, "Yours is e^(L - S), the sign the wrong way round: P = e^(S - L)."},
  };
  if (scale != 1) {
    wrong.push_back({unguarded_weights(Q_i, K_j, L_i, 1.0),
                     fmt::format("Yours forgets the scale: S = s Q_i K_j^T with s = {} here, not "
                                 "Q_i K_j^T.",
                                 scale)});
  }
  const double default_scale = 1 / std::sqrt(static_cast<double>(Q_i.cols()));
  if (std::abs(scale - default_scale) > 1e-3) {
    wrong.push_back({unguarded_weights(Q_i, K_j, L_i, default_scale),
                     fmt::format("Yours scales by 1/sqrt(d_k) = {:.6g}, not by the scale given "
                                 "(s = {}): use the argument scale, as the forward did.",
                                 default_scale, scale)});
  }
  return wrong;
}

// 1. By hand, on the page's row of scores x = (3, 1, 4, 1, 5, 9, 2, 6) (d_k = 1, q = 1, keys
// k_j = x_j, scale 1, so s_j = x_j). Its log-sum-exp is L = 9 + log(sum_j e^(x_j - 9))
// = 9.075944 (the page prints 9.075944). The tile of keys 5..7 (x = 1, 5, 9) gets
// P = (e^(1 - L), e^(5 - L), e^(9 - L)) = (0.000311, 0.016976, 0.926868): it sums to 0.944,
// not 1; the other keys hold the rest. A softmax over the tile alone would give
// (0.000329, 0.017980, 0.981690). A second query (q = 2) had no allowed key: L = -inf, row 0.
TEST(Exercise10Weights, ThePagesRowByHand) {
  const std::vector<double> x = {3, 1, 4, 1, 5, 9, 2, 6};
  double sum = 0;
  for (double v : x) sum += std::exp(v - 9);
  const double L = 9 + std::log(sum);
  MatrixD Q_i(2, 1);  // [B_q x d_k]
  Q_i << 1, 2;
  MatrixD K_j(3, 1);  // [B_k x d_k]: keys 5..7 of the row
  K_j << 1, 5, 9;
  VectorD L_i(2);  // [B_q]
  L_i << L, -kInf;
  MatrixD expected(2, 3);  // [B_q x B_k]
  expected << std::exp(1 - L), std::exp(5 - L), std::exp(9 - L), 0, 0, 0;
  const Finding found =
      compare("P", exercise_weights_from_lse(Q_i, K_j, L_i, 1.0), expected,
              wrong_weights(Q_i, K_j, L_i, 1.0),
              "the page's row (3, 1, 4, 1, 5, 9, 2, 6), L = 9.075944, the tile of scores (1, 5, "
              "9); a second query with L = -inf");
  if (!found.message.empty()) FAIL() << found.message;
}

// 2. Against the library, every tile: Q [5 x 4], K [7 x 4], scale 0.75 (not 1/sqrt(4) = 0.5,
// exact in float and double), query 2 with no allowed key and the others with every key.
// L comes from attn::tiled_attention, and each tile of P must be the same tile of
// attn::attention's weights: query tiles of B_q = 2 (rows 0-1, 2-3, 4), key tiles of B_k = 3
// (keys 0-2, 3-5, 6).
TEST(Exercise10Weights, EveryTileIsAttentionsWeights) {
  attn::Rng rng(310);
  const MatrixD Q = attn_test::normal_matrix(rng, 5, 4), K = attn_test::normal_matrix(rng, 7, 4),
                V = attn_test::normal_matrix(rng, 7, 2);
  AllowedMask allowed = AllowedMask::Constant(5, 7, true);  // [n_q x n_k]
  allowed.row(2).setConstant(false);
  const double scale = 0.75;
  const MatrixD weights =
      attn::attention(Q, K, V, {.scale = 0.75f, .allowed = allowed}).weights;  // [5 x 7]
  const VectorD L = attn::tiled_attention(Q, K, V, {.scale = 0.75f, .allowed = allowed}).lse;
  for (Index q0 = 0; q0 < 5; q0 += 2) {
    for (Index k0 = 0; k0 < 7; k0 += 3) {
      const Index bq = std::min<Index>(2, 5 - q0), bk = std::min<Index>(3, 7 - k0);
      const MatrixD Q_i = Q.middleRows(q0, bq), K_j = K.middleRows(k0, bk);  // [b x 4] each
      const VectorD L_i = L.segment(q0, bq);                                 // [B_q]
      const Finding found =
          compare("P", exercise_weights_from_lse(Q_i, K_j, L_i, scale),
                  weights.block(q0, k0, bq, bk), wrong_weights(Q_i, K_j, L_i, scale),
                  fmt::format("queries {}..{}, keys {}..{}, scale {}; query 2 has L = -inf", q0,
                              q0 + bq - 1, k0, k0 + bk - 1, scale));
      if (!found.message.empty()) FAIL() << found.message;
    }
  }
}

}  // namespace exercise_10
