// Exercises 05.1 to 05.3: are your padding masks, causal mask and masked softmax right? The tasks
// are in chapters/05_masking/exercise/ (README.md there lists them). Check them all with
//
//   cmake --build build/release --target exercise_05
//   ctest --test-dir build/release -R Exercise05 --output-on-failure
//
// or one at a time with -R Exercise05Padding, -R Exercise05Causal or -R Exercise05Softmax.
//
// Where the expected values come from: a few cases worked out by hand (written out below: note
// 001's padded batch, the causal triangle of 4 tokens, a 3 x 3 masked softmax), identities that
// any right answer keeps (a blocked weight is exactly 0, a row with an allowed key sums to 1, a
// row with none is all zeros), and the library's own functions, which its suites check
// independently of this file: attn::padding_masks and attn::causal_mask
// (tests/attn/ops/test_masks.cpp), and attn::attention's masked weights
// (tests/attn/ops/test_masked_attention.cpp, its softmax in tests/attn/ops/test_softmax.cpp).
// Every comparison of weights is in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_05_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "causal_mask.hpp"
#include "masked_softmax.hpp"
#include "padding_masks.hpp"

#include "exercise_checks.hpp"

#include "attn/core/random.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

namespace exercise_05 {

using attn::AllowedBatch;
using attn::AllowedMask;
using attn::Index;
using attn::MatrixD;
using attn::TokenIds;

/// How close two weights must be to count as the same. They are double, between 0 and 1: a
/// right answer that sums or divides in another order than the library (or is compiled with
/// fused multiply-adds) differs by a few ulps, about 1e-16; the wrong answers named below are
/// off by 0.1 or more somewhere on every case here (a NaN, a uniform 1/n_k where 0 is due, a
/// row that lost a blocked key's share). 1e-12 is far from both. Blocked weights are not
/// compared with it: they must be exactly 0.
constexpr double kTolerance = 1e-12;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A mask from rows of 0/1, for masks written out by hand.
AllowedMask mask_from(Index rows, Index cols, const std::vector<int>& entries) {
  AllowedMask m(rows, cols);  // [rows x cols]
  for (Index i = 0; i < rows; ++i) {
    for (Index j = 0; j < cols; ++j) m(i, j) = entries[static_cast<std::size_t>(i * cols + j)];
  }
  return m;
}

/// The rule allowed(i, j) over an [rows x cols] grid.
AllowedMask mask_of(Index rows, Index cols, const std::function<bool(Index, Index)>& allowed) {
  AllowedMask m(rows, cols);  // [rows x cols]
  for (Index i = 0; i < rows; ++i) {
    for (Index j = 0; j < cols; ++j) m(i, j) = allowed(i, j);
  }
  return m;
}

/// "1 1 0 / 0 1 1": a small mask, row by row (1 = may attend).
template <typename Mask>
std::string mask_str(const Mask& m) {
  std::string s;
  for (Index i = 0; i < m.rows(); ++i) {
    s += i ? " / " : "";
    for (Index j = 0; j < m.cols(); ++j) s += fmt::format("{}{}", j ? " " : "", m(i, j) ? 1 : 0);
  }
  return s;
}

// ---- Exercise 05.1: the padding masks of a batch ---------------------------------------------

const std::string kPaddingStub =
    "Yours blocks every key of every sentence. Is this still the stub? Write the body of "
    "exercise_padding_masks in chapters/05_masking/exercise/padding_masks.cpp.";

/// The masks [B, n, n] that give sentence b the entries allowed(b, i, j).
AllowedBatch masks_of(const TokenIds& ids,
                      const std::function<bool(Index, Index, Index)>& allowed) {
  const Index B = ids.rows(), n = ids.cols();
  AllowedBatch masks(B, n, n);  // [B, n, n]
  for (Index b = 0; b < B; ++b) {
    for (Index i = 0; i < n; ++i) {
      for (Index j = 0; j < n; ++j) masks[b](i, j) = allowed(b, i, j);
    }
  }
  return masks;
}

std::string ids_str(const TokenIds& ids, Index b) {
  std::string s;
  for (Index j = 0; j < ids.cols(); ++j) s += fmt::format("{}{}", j ? " " : "", ids(b, j));
  return s;
}

/// "" when yours is `expected`; otherwise the shape, or the first (b, i, j) they disagree on,
/// and which usual mistake yours is, if it is one.
std::string padding_problem(const AllowedBatch& yours, const AllowedBatch& expected,
                            const TokenIds& ids, int pad_id) {
  const Index B = ids.rows(), n = ids.cols();
  if (yours.batch() != B || yours.rows() != n || yours.cols() != n) {
    return fmt::format(
        "Your masks are {}, but they must be [B, n, n] = [{}, {}, {}]: one [n x n] mask per "
        "sentence of ids [{} x {}], rows = queries, columns = keys.",
        yours.shape_str(), B, n, n, B, n);
  }
  if (yours.data() == expected.data()) return "";
  Index b = 0, i = 0, j = 0;
  for (Index r = 0; r < B * n; ++r) {
    for (Index c = 0; c < n; ++c) {
      if (yours.data()(r, c) != expected.data()(r, c)) {
        b = r / n;
        i = r % n;
        j = c;
        r = B * n;  // the first one is enough
        break;
      }
    }
  }
  const bool is_pad = ids(b, j) == pad_id;
  std::string message = fmt::format(
      "Sentence {} is ids {} (pad_id = {}). Your mask says query {} {} attend to key {}, but "
      "key {} is {} (id {}), so it {}. Your mask of sentence {}: {}; expected: {}.",
      b, ids_str(ids, b), pad_id, i, yours[b](i, j) ? "may" : "may not", j, j,
      is_pad ? "padding" : "a real token", ids(b, j), is_pad ? "may not" : "may", b,
      mask_str(yours[b]), mask_str(expected[b]));

  std::vector<Index> lengths;  // real tokens per sentence, for the length-based mistake
  for (Index s = 0; s < B; ++s) {
    Index real = 0;
    for (Index c = 0; c < n; ++c) real += ids(s, c) != pad_id;
    lengths.push_back(real);
  }
  struct Wrong {
    AllowedBatch masks;
    std::string says;
  };
  std::vector<Wrong> wrong = {
      {AllowedBatch(B, n, n), kPaddingStub},
      {masks_of(ids, [&](Index s, Index q, Index) { return ids(s, q) != pad_id; }),
       "Yours blocks the padded QUERIES (rows) and lets every query read the padded keys. "
       "Padding masks keys: entry (i, j) depends on the id of key j, the column, for every "
       "query i."},
      {masks_of(ids, [&](Index s, Index q,
                         Index k) { return ids(s, q) != pad_id && ids(s, k) != pad_id; }),
       "Yours blocks the padded keys, and the padded queries' whole rows too. A padded query "
       "still reads the real words (its output is ignored later); blocking its row leaves it "
       "no key at all. Entry (i, j) depends on key j only."},
      {masks_of(ids, [&](Index s, Index, Index k) { return ids(s, k) == pad_id; }),
       "Yours is true where the key IS padding: that is PyTorch's key_padding_mask convention "
       "(true = blocked). In this course true = may attend: negate yours."},
      {masks_of(ids, [&](Index, Index, Index k) { return ids(0, k) != pad_id; }),
       "Yours gives every sentence the mask of sentence 0. Sentence b's mask comes from row b "
       "of ids."},
      {masks_of(ids,
                [&](Index s, Index, Index k) { return k < lengths[static_cast<std::size_t>(s)]; }),
       "Yours allows the first L keys of each sentence, L its count of real tokens: right when "
       "the padding comes last, wrong when it comes first (as decoders pad a batch for "
       "generation). Test each key's id against pad_id."},
      {masks_of(ids, [](Index, Index, Index) { return true; }),
       "Yours allows every key: the padded keys are not blocked."},
  };
  if (pad_id != 0) {
    wrong.push_back({masks_of(ids, [&](Index s, Index, Index k) { return ids(s, k) != 0; }),
                     fmt::format("Yours blocks the keys of id 0, but the pad id here is {}: "
                                 "compare with pad_id, not 0.",
                                 pad_id)});
  }
  for (const Wrong& w : wrong) {
    if (yours.data() == w.masks.data()) return message + "\n" + w.says;
  }
  return message;
}

// 1. By hand, note 001's batch (the page): sentence 1 is "5 2 1 <pad> <pad>", sentence 2 is
// "1 3 1 4 <pad>", pad id 0. Every query of sentence 1 may read keys 0, 1, 2; every query of
// sentence 2 keys 0 .. 3. The padded queries' rows are like the others: columns are blocked,
// not rows.
TEST(Exercise05Padding, NoteOnesBatchByHand) {
  TokenIds ids(2, 5);    // [B x n]
  ids << 5, 2, 1, 0, 0,  //
      1, 3, 1, 4, 0;
  AllowedBatch expected(2, 5, 5);                // [B, n, n]
  expected[0] = mask_from(5, 5, {1, 1, 1, 0, 0,  //
                                 1, 1, 1, 0, 0,  //
                                 1, 1, 1, 0, 0,  //
                                 1, 1, 1, 0, 0,  //
                                 1, 1, 1, 0, 0});
  expected[1] = mask_from(5, 5, {1, 1, 1, 1, 0,  //
                                 1, 1, 1, 1, 0,  //
                                 1, 1, 1, 1, 0,  //
                                 1, 1, 1, 1, 0,  //
                                 1, 1, 1, 1, 0});
  const std::string problem = padding_problem(exercise_padding_masks(ids, 0), expected, ids, 0);
  if (!problem.empty()) FAIL() << problem;
}

// 2. Against the library's attn::padding_masks, on a batch that note 001's does not cover: pad
// id 3 (and 0 a real word), padding first (sentence 0), last (1), everywhere (2: a sentence of
// padding only, whose every key is blocked) and nowhere (3). Every wrong answer named above
// differs from every other here.
TEST(Exercise05Padding, MatchesPaddingMasksWithAnotherPadId) {
  const int pad_id = 3;
  TokenIds ids(4, 5);    // [B x n]
  ids << 3, 3, 7, 1, 0,  //
      5, 0, 2, 3, 3,     //
      3, 3, 3, 3, 3,     //
      1, 2, 4, 6, 0;
  const AllowedBatch expected = attn::padding_masks(ids, pad_id);  // [B, n, n]
  const std::string problem =
      padding_problem(exercise_padding_masks(ids, pad_id), expected, ids, pad_id);
  if (!problem.empty()) FAIL() << problem;
}

// ---- Exercise 05.2: the causal mask ----------------------------------------------------------

const std::string kCausalStub =
    "Yours blocks every key. Is this still the stub? Write the body of exercise_causal_mask in "
    "chapters/05_masking/exercise/causal_mask.cpp.";

/// "" when yours is `expected`; otherwise the shape, or the first (i, j) they disagree on, and
/// which usual mistake yours is, if it is one.
std::string causal_problem(const AllowedMask& yours, const AllowedMask& expected) {
  const Index n = expected.rows();
  if (yours.rows() != n || yours.cols() != n) {
    return fmt::format("Your mask is [{} x {}], but it must be [n x n] = [{} x {}]: rows = "
                       "queries, columns = keys.",
                       yours.rows(), yours.cols(), n, n);
  }
  if (yours == expected) return "";
  Index qi = 0, kj = 0;
  while (yours(qi, kj) == expected(qi, kj)) {
    if (++kj == n) {
      kj = 0;
      ++qi;
    }
  }
  std::string message = fmt::format(
      "With n = {}, your mask says query {} {} attend to key {}, but j <= i says it {}.", n, qi,
      yours(qi, kj) ? "may" : "may not", kj, expected(qi, kj) ? "may" : "may not");
  if (n <= 8)
    message += fmt::format(" Yours: {}; expected: {}.", mask_str(yours), mask_str(expected));
  const std::vector<std::pair<AllowedMask, std::string>> wrong = {
      {AllowedMask::Constant(n, n, false), kCausalStub},
      {mask_of(n, n, [](Index i, Index j) { return j >= i; }),
       "Yours is the mask transposed, j >= i: the upper triangle, so every query reads its "
       "future and none its past. Rows are queries and columns keys: query i reads keys j <= i."},
      {mask_of(n, n, [](Index i, Index j) { return j < i; }),
       "Yours blocks the diagonal, j < i: no query reads its own key, and query 0 is left with "
       "no key at all. The token itself is not the future: j <= i."},
      {mask_of(n, n, [](Index i, Index j) { return j > i; }),
       "Yours is true where the future is, j > i: that is the blocked set (PyTorch's boolean "
       "attn_mask for nn.Transformer, true = blocked; the -inf places of note 003's additive "
       "mask). In this course true = may attend: negate yours."},
      {mask_of(n, n, [](Index i, Index j) { return j <= i + 1; }),
       "Yours lets query i read key i + 1, one token of its future: the answer it must predict. "
       "Query i reads j <= i."},
      {AllowedMask::Constant(n, n, true), "Yours allows every key: nothing is blocked."},
  };
  for (const auto& [mask, says] : wrong) {
    if (yours == mask) return message + "\n" + says;
  }
  return message;
}

// 1. By hand, n = 4: query 0 reads key 0; query 1 keys 0, 1; query 2 keys 0 .. 2; query 3 all
// four. Every wrong answer named above differs from every other here.
TEST(Exercise05Causal, FourTokensByHand) {
  const AllowedMask expected = mask_from(4, 4,
                                         {1, 0, 0, 0,    //
                                          1, 1, 0, 0,    //
                                          1, 1, 1, 0,    //
                                          1, 1, 1, 1});  // [n x n]
  const std::string problem = causal_problem(exercise_causal_mask(4), expected);
  if (!problem.empty()) FAIL() << problem;
}

// 2. Against the library's attn::causal_mask for n = 7 (every wrong answer distinct again),
// n = 1 (one token: it reads itself) and n = 2.
TEST(Exercise05Causal, MatchesCausalMask) {
  for (Index n : {7, 1, 2}) {
    const std::string problem = causal_problem(exercise_causal_mask(n), attn::causal_mask(n));
    if (!problem.empty()) FAIL() << problem;
  }
}

// ---- Exercise 05.3: the masked softmax -------------------------------------------------------

const std::string kSoftmaxStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_masked_softmax in "
    "chapters/05_masking/exercise/masked_softmax.cpp.";

/// The same weights: the same shape, and every entry within kTolerance, or NaN in both (so
/// that a wrong answer with NaN can be recognised).
bool same(const MatrixD& a, const MatrixD& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Index i = 0; i < a.rows(); ++i) {
    for (Index j = 0; j < a.cols(); ++j) {
      const bool both_nan = std::isnan(a(i, j)) && std::isnan(b(i, j));
      if (!both_nan && !(std::abs(a(i, j) - b(i, j)) <= kTolerance)) return false;
    }
  }
  return true;
}

std::string row_str(const MatrixD& m, Index i) {
  std::string s = "(";
  for (Index j = 0; j < m.cols(); ++j) s += fmt::format("{}{:.6g}", j ? ", " : "", m(i, j));
  return s + ")";
}

/// A usual wrong answer: what it gives on this case, and what to say when yours equals it.
struct WrongAnswer {
  MatrixD value;
  std::string says;
};

/// The library's weights for these scores: attention with the identity as its keys, so that
/// q_i . k_j = s_ij exactly (each is one product by 1 plus products by 0), and scale 1.
MatrixD library_weights(const MatrixD& scores, const AllowedMask& allowed,
                        float fill = attn::kBlockedScore) {
  const Index n_k = scores.cols();
  const MatrixD keys = MatrixD::Identity(n_k, n_k);  // [n_k x n_k]
  const MatrixD values = MatrixD::Zero(n_k, 1);      // [n_k x 1], only the weights matter
  return attn::attention(scores, keys, values,
                         {.scale = 1.0f, .allowed = allowed, .blocked_score = fill})
      .weights;  // [n_q x n_k]
}

/// How a mistaken softmax handles a row with nothing left to normalise.
enum class EmptyRow { nan, zeros_when_no_key, zeros_when_sum_is_zero };

/// The max-over-every-score mistake: e_j = exp(s_ij - max over ALL j) on allowed keys. A
/// blocked score far above the allowed ones makes every allowed e_j underflow to 0.
MatrixD max_over_every_score(const MatrixD& scores, const AllowedMask& allowed, EmptyRow rule) {
  MatrixD w = MatrixD::Zero(scores.rows(), scores.cols());  // [n_q x n_k]
  for (Index i = 0; i < scores.rows(); ++i) {
    if (rule == EmptyRow::zeros_when_no_key && !allowed.row(i).any()) continue;
    const double m = scores.row(i).maxCoeff();
    double sum = 0;
    for (Index j = 0; j < scores.cols(); ++j) {
      w(i, j) = allowed(i, j) ? std::exp(scores(i, j) - m) : 0.0;
      sum += w(i, j);
    }
    if (rule == EmptyRow::zeros_when_sum_is_zero && sum == 0) continue;
    w.row(i) /= sum;
  }
  return w;
}

/// The usual wrong answers on these scores and this mask, computed with the library where the
/// library can (another fill, another mask) and by their formula otherwise.
std::vector<WrongAnswer> wrong_softmaxes(const MatrixD& scores, const AllowedMask& allowed) {
  const Index n_q = scores.rows(), n_k = scores.cols();
  const AllowedMask every = attn::full_mask(n_q, n_k);  // [n_q x n_k]
  MatrixD textbook = library_weights(scores, allowed);  // [n_q x n_k]
  for (Index i = 0; i < n_q; ++i) {
    if (!allowed.row(i).any()) textbook.row(i).setConstant(kNaN);
  }
  const MatrixD plain = library_weights(scores, every);  // [n_q x n_k]
  const MatrixD zeroed_after = allowed.array().select(plain.array(), 0.0).matrix();
  const AllowedMask inverted = (!allowed.array()).matrix();  // [n_q x n_k]
  const std::string max_says =
      "Yours subtracts the largest score of the whole row, a blocked one included: here a "
      "blocked key scores about 1000 above the allowed ones, so every allowed exp underflows to "
      "0 and the row is 0 / 0. Subtract the largest ALLOWED score.";
  std::vector<WrongAnswer> wrong = {
      {MatrixD::Zero(n_q, n_k), kSoftmaxStub},
      {library_weights(scores, allowed, -1e9f),
       "Yours gives a row with no allowed key uniform weights 1/n_k: a finite fill such as "
       "-1e9. Every key of that row then scores the same fill, so its output would be the mean "
       "of values it was told to ignore. Give such a row zeros."},
      {textbook,
       "Yours is right except on the rows with no allowed key, where it gives NaN: the textbook "
       "softmax computes exp(-inf - (-inf)) there. The library's rule is a row of zeros: test "
       "for a row with no allowed key (or a sum of 0) and leave it zero."},
      {max_over_every_score(scores, allowed, EmptyRow::zeros_when_no_key), max_says},
      {max_over_every_score(scores, allowed, EmptyRow::zeros_when_sum_is_zero), max_says},
      {max_over_every_score(scores, allowed, EmptyRow::nan), max_says},
      {zeroed_after,
       "Yours is the softmax over every key with the blocked weights set to 0 afterwards: the "
       "blocked keys still took their share, so a row no longer sums to 1. Block before the "
       "softmax (leave them out of the sum), as the fill -inf does."},
      {plain, "Yours ignores the mask: it is the softmax over every key."},
      {library_weights(scores, inverted),
       "Yours reads the mask the wrong way round: true means query i MAY attend to key j (the "
       "course's convention), not that key j is blocked."},
  };
  if (n_q == n_k) {
    const AllowedMask transposed = allowed.transpose();  // [n x n]
    wrong.push_back({library_weights(scores, transposed),
                     "Yours reads the mask transposed, allowed(j, i): entry (i, j) is query i "
                     "(the row) and key j (the column), as in the scores."});
  }
  return wrong;
}

/// "" when yours equals expected; otherwise the shape or the worst entry and, when yours is one
/// of the wrong answers (checked in order), what it is.
std::string softmax_problem(const MatrixD& yours, const MatrixD& expected,
                            const std::vector<WrongAnswer>& wrong, const std::string& which) {
  if (yours.rows() != expected.rows() || yours.cols() != expected.cols()) {
    return fmt::format("Your weights are [{} x {}], but they must be [{} x {}], the shape of the "
                       "scores ({}).",
                       yours.rows(), yours.cols(), expected.rows(), expected.cols(), which);
  }
  if (same(yours, expected)) return "";
  const auto [worst_i, worst_j] = attn_test::worst_entry(yours, expected);
  std::string message = fmt::format(
      "Your weights differ at ({}, {}): yours {:.6g}, expected {:.6g} ({}). Row {}: yours {}, "
      "expected {}.",
      worst_i, worst_j, yours(worst_i, worst_j), expected(worst_i, worst_j), which, worst_i,
      row_str(yours, worst_i), row_str(expected, worst_i));
  for (const WrongAnswer& w : wrong) {
    if (same(yours, w.value)) return message + "\n" + w.says;
  }
  if (yours.array().isNaN().any()) message += "\nYours holds NaN.";
  return message;
}

// 1. By hand, 3 queries and 3 keys:
//   row 0: scores (0, ln 3, 7), keys 0 and 1 allowed: exp(0 - ln 3) = 1/3 and exp(0) = 1, so
//          the weights are (1/3, 1) / (4/3) = (1/4, 3/4, 0). The blocked 7 is the row's largest
//          score and changes nothing.
//   row 1: scores (1000, 2, 2), keys 1 and 2 allowed: two equal scores, (0, 1/2, 1/2). The
//          blocked 1000 must not be the maximum subtracted: exp(2 - 1000) is 0 in double.
//   row 2: scores (3, -1, 0.5), no key allowed: (0, 0, 0) by the library's rule.
// The mask is not symmetric, so reading it transposed gives other weights.
TEST(Exercise05Softmax, ThreeRowsByHand) {
  const double ln3 = std::log(3.0);
  MatrixD scores(3, 3);  // [n_q x n_k]
  scores << 0, ln3, 7,   //
      1000, 2, 2,        //
      3, -1, 0.5;
  const AllowedMask allowed = mask_from(3, 3,
                                        {1, 1, 0,    //
                                         0, 1, 1,    //
                                         0, 0, 0});  // [n_q x n_k]
  MatrixD expected(3, 3);                            // [n_q x n_k], the weights above
  expected << 0.25, 0.75, 0,                         //
      0, 0.5, 0.5,                                   //
      0, 0, 0;
  const std::string problem = softmax_problem(
      exercise_masked_softmax(scores, allowed), expected, wrong_softmaxes(scores, allowed),
      "scores (0, ln 3, 7 / 1000, 2, 2 / 3, -1, 0.5), allowed (1 1 0 / 0 1 1 / "
      "0 0 0): expected (1/4, 3/4, 0 / 0, 1/2, 1/2 / 0, 0, 0)");
  if (!problem.empty()) FAIL() << problem;
}

/// Eigen's index checks are on in this program (tests/CMakeLists.txt), so reading past the
/// mask's last row or column stops the program inside your function, with Eigen's assertion.
/// Before it goes, it says what that most likely means.
extern "C" void explain_abort(int) {
  static const char text[] =
      "\n*** The program stopped inside exercise_masked_softmax, most likely on an index out of "
      "range: scores and allowed are [n_q x n_k], rows = queries, columns = keys. With n_q != "
      "n_k, reading allowed(j, i), or a loop bound from the other dimension (scores.rows() for "
      "the keys, scores.cols() for the queries), goes past the edge.\n";
  const ssize_t written = write(2, text, sizeof text - 1);
  static_cast<void>(written);  // nothing to do if stderr is gone
}

MatrixD your_softmax(const MatrixD& scores, const AllowedMask& allowed) {
  const auto previous = std::signal(SIGABRT, explain_abort);
  MatrixD yours = exercise_masked_softmax(scores, allowed);
  std::signal(SIGABRT, previous);
  return yours;
}

/// Scores of size about 2, drawn in double, [rows x cols].
MatrixD random_scores(attn::Rng& rng, Index rows, Index cols) {
  MatrixD s(rows, cols);  // [rows x cols]
  for (Index i = 0; i < rows; ++i) {
    for (Index j = 0; j < cols; ++j) s(i, j) = rng.normal(0.0, 2.0);
  }
  return s;
}

// 2. Against the library's masked attention weights (attn::attention with identity keys, so its
// scores are these scores). A [6 x 6] case: a row with every key allowed, one with a single key,
// one with none, causal-like and padding-like rows, and a blocked key scoring 1000 above the
// allowed ones in row 4 (every wrong answer named above differs from every other here). Then a
// [3 x 5] case (3 queries reading 5 keys, as cross-attention does), which shows whether your
// loops take the rows and the columns from the right places.
TEST(Exercise05Softmax, MatchesMaskedAttentionWeights) {
  attn::Rng rng(5);
  MatrixD square = random_scores(rng, 6, 6);  // [n_q x n_k]
  square(4, 0) = 1000.0;
  const AllowedMask square_mask = mask_from(6, 6, {1, 1, 1, 1, 1, 1,    //
                                                   0, 0, 1, 0, 0, 0,    //
                                                   0, 0, 0, 0, 0, 0,    //
                                                   1, 1, 1, 1, 0, 0,    //
                                                   0, 1, 1, 0, 1, 0,    //
                                                   1, 0, 1, 0, 1, 1});  // [n_q x n_k]
  const MatrixD wide = random_scores(rng, 3, 5);                        // [n_q x n_k]
  const AllowedMask wide_mask = mask_from(3, 5,
                                          {1, 1, 1, 0, 0,    //
                                           0, 0, 0, 0, 0,    //
                                           0, 1, 0, 1, 1});  // [n_q x n_k]
  struct Case {
    const MatrixD& scores;
    const AllowedMask& allowed;
  };
  for (const Case& c : {Case{square, square_mask}, Case{wide, wide_mask}}) {
    const std::string problem =
        softmax_problem(your_softmax(c.scores, c.allowed), library_weights(c.scores, c.allowed),
                        wrong_softmaxes(c.scores, c.allowed),
                        fmt::format("[{} x {}] scores, allowed {}", c.scores.rows(),
                                    c.scores.cols(), mask_str(c.allowed)));
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. What the mask promises, on random scores under a [8 x 8] mask (rows: causal-like, padding-
// like, one key, none): a blocked key's weight is exactly 0, not merely small (this is what
// makes a blocked token unable to change an output by a single bit, the page's sidebar); a
// row with an allowed key sums to 1 (to kTolerance: 8 additions of numbers below 1 round off a
// few 1e-16); a row with a single allowed key gives it exactly 1 (exp(0) / exp(0)); a row with
// none is exactly 0; nothing is NaN.
TEST(Exercise05Softmax, BlockedWeightsAreExactlyZeroAndRowsSumToOne) {
  attn::Rng rng(55);
  const MatrixD scores = random_scores(rng, 8, 8);                        // [n_q x n_k]
  const AllowedMask allowed = mask_from(8, 8, {1, 0, 0, 0, 0, 0, 0, 0,    //
                                               1, 1, 0, 0, 0, 0, 0, 0,    //
                                               1, 1, 1, 1, 1, 0, 0, 0,    //
                                               0, 0, 0, 0, 0, 0, 0, 0,    //
                                               1, 1, 1, 1, 1, 1, 1, 1,    //
                                               0, 0, 0, 0, 0, 0, 1, 0,    //
                                               1, 0, 1, 0, 1, 0, 1, 0,    //
                                               0, 1, 1, 1, 1, 1, 1, 0});  // [n_q x n_k]
  const MatrixD yours = your_softmax(scores, allowed);
  if (yours.rows() != 8 || yours.cols() != 8) {
    FAIL() << fmt::format("Your weights are [{} x {}], but they must be [8 x 8], as the scores.",
                          yours.rows(), yours.cols());
  }
  if ((yours.array() == 0.0).all()) FAIL() << kSoftmaxStub;
  for (Index i = 0; i < 8; ++i) {
    const Index keys = allowed.row(i).count();
    if (keys == 0 && (yours.row(i).array() > 0.0).all()) {
      FAIL() << fmt::format(
          "Row {} has no allowed key, and yours gives it {}: a finite fill such as -1e9 makes "
          "every key of that row score the same, hence uniform weights. Such a row must be all "
          "zeros.",
          i, row_str(yours, i));
    }
    for (Index j = 0; j < 8; ++j) {
      if (std::isnan(yours(i, j))) {
        FAIL() << fmt::format(
            "Your weight ({}, {}) is NaN (row {} has {} allowed keys). {}", i, j, i, keys,
            keys == 0 ? "A row with no allowed key must be all zeros: exp(-inf - (-inf)) is NaN, "
                        "so test for it before you divide."
                      : "Is a blocked score (-inf) subtracted from another -inf somewhere?");
      }
      if (!allowed(i, j) && yours(i, j) != 0.0) {
        // Below kTolerance the earlier tests cannot see it: only a finite fill gives that.
        FAIL() << fmt::format(
            "Your weight on the blocked key ({}, {}) is {:.6g}: it must be exactly 0, not merely "
            "small. {}",
            i, j, yours(i, j),
            std::abs(yours(i, j)) < kTolerance
                ? "A finite fill (-100, say) leaves exp(fill - max) > 0 in double, and the "
                  "blocked token then reaches the output. Use -infinity, or leave blocked keys "
                  "out of the sum and give them 0."
                : "The mask is not applied where it says: entry (i, j) of allowed is query i "
                  "(the row) and key j (the column), true = may attend.");
      }
    }
    const double sum = yours.row(i).sum();
    if (keys == 1 && yours.row(i).maxCoeff() != 1.0) {
      FAIL() << fmt::format(
          "Row {} has one allowed key, so its weight must be exactly 1 (exp(s - s) / exp(s - s)): "
          "yours {}.",
          i, row_str(yours, i));
    }
    if (keys >= 1 && !(std::abs(sum - 1.0) <= kTolerance)) {
      FAIL() << fmt::format(
          "Row {} ({} allowed keys) sums to {:.15g}: the weights of a row with an allowed key "
          "sum to 1. Divide by the sum of the allowed exponentials only. Yours {}.",
          i, keys, sum, row_str(yours, i));
    }
  }
}

}  // namespace exercise_05
