// Exercises 12.1 to 12.3: are your byte-pair merge, loss in nats per character and sampling
// distribution right? The tasks are in chapters/12_language_model/exercise/ (README.md there
// lists them). Check them all with
//
//   cmake --build build/release --target exercise_12
//   ctest --test-dir build/release -R Exercise12 --output-on-failure
//
// or one at a time with -R Exercise12Merge, -R Exercise12Loss or -R Exercise12Sampling.
//
// Where the expected values come from: cases worked out by hand (written out below; the merges
// of "aaabdaaabac" are also those of tests/chapters/test_12_tokens.cpp, which checks
// corpus::learn_merges on them), and the library's own functions, which its suites check
// independently of this file: attn::cross_entropy (tests/attn/ops/test_loss.cpp: against
// PyTorch's F.cross_entropy) and attn::sample_token (tests/attn/ops/test_sampling.cpp: its
// draws are the inverse CDF of one uniform, its frequencies those of softmax(z / T) over the
// top k). Every comparison of numbers is in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_12_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "merge_pair.hpp"
#include "nats_per_character.hpp"
#include "sampling_probabilities.hpp"

#include "attn/core/random.hpp"
#include "attn/ops/loss.hpp"
#include "attn/ops/sampling.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace exercise_12 {

using attn::Index;
using attn::MatrixD;

/// How close counts as the same, for the loss and the probabilities. Both are double, of size
/// about 1 (a loss of a few nats, probabilities in [0, 1]): a right answer that sums in another
/// order than the library or these hand formulas, or skips the subtracted maximum where it is
/// harmless, differs by a few ulps, about 1e-15. The wrong answers these tests name are off by
/// 5e-3 or more (the closest: the mean of each token's nats per character against the page's
/// ratio of sums, 0.4338 against 0.4394 in the first loss test). 1e-12 is far from both.
constexpr double kTolerance = 1e-12;

std::string ids_str(const std::vector<int>& ids) {
  std::string s = "(";
  for (std::size_t i = 0; i < ids.size(); ++i) s += fmt::format("{}{}", i ? " " : "", ids[i]);
  return s + ")";
}

std::string row_str(const MatrixD& row) {
  std::string s = "(";
  for (Index c = 0; c < row.size(); ++c) s += fmt::format("{}{:.6g}", c ? ", " : "", row(c));
  return s + ")";
}

// ---- Exercise 12.1: one byte-pair merge ----------------------------------------------------

using Pair = std::pair<int, int>;

/// How often each neighbouring pair occurs. every_position: at every i, as the library counts
/// (so "aaa" holds (a, a) twice); otherwise the occurrences a left-to-right replacement would
/// take, which never overlap (so "aaa" holds it once): the usual mistake.
std::map<Pair, int> pair_counts(const std::vector<int>& ids, bool every_position) {
  std::map<Pair, int> count;
  for (std::size_t i = 0; i + 1 < ids.size(); ++i) count[{ids[i], ids[i + 1]}] = 0;
  for (auto& [pair, n] : count) {
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      if (ids[i] != pair.first || ids[i + 1] != pair.second) continue;
      ++n;
      if (!every_position) ++i;  // the occurrence takes its second token out of play
    }
  }
  return count;
}

/// How a usual wrong answer breaks a tie between pairs of the largest count.
enum class Tie { smaller_pair, first_seen, larger_pair };

/// The pair of the largest count, a tie broken by `tie` (the exercise's rule: smaller_pair).
Pair winner(const std::vector<int>& ids, const std::map<Pair, int>& count, Tie tie) {
  int best_count = 0;
  for (const auto& entry : count) best_count = std::max(best_count, entry.second);
  std::vector<Pair> tied;  // in the map's order: smaller pairs first
  for (const auto& [pair, n] : count) {
    if (n == best_count) tied.push_back(pair);
  }
  if (tie == Tie::smaller_pair) return tied.front();
  if (tie == Tie::larger_pair) return tied.back();
  for (std::size_t i = 0; i + 1 < ids.size(); ++i) {  // first_seen
    const Pair here{ids[i], ids[i + 1]};
    if (std::find(tied.begin(), tied.end(), here) != tied.end()) return here;
  }
  return tied.front();
}

/// How a usual wrong answer replaces the pair's occurrences.
enum class Replace { left_to_right, right_to_left, without_skipping };

std::vector<int> replaced(std::vector<int> ids, Pair pair, int new_id, Replace how) {
  const auto matches = [&](std::size_t i) {
    return i + 1 < ids.size() && ids[i] == pair.first && ids[i + 1] == pair.second;
  };
  std::vector<int> out;
  if (how == Replace::right_to_left) {
    std::reverse(ids.begin(), ids.end());
    pair = {pair.second, pair.first};
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!matches(i)) {
      out.push_back(ids[i]);
    } else {
      out.push_back(new_id);
      if (how != Replace::without_skipping) ++i;  // without: "aaa" gives X X a
    }
  }
  if (how == Replace::right_to_left) std::reverse(out.begin(), out.end());
  return out;
}

const std::string kMergeStub =
    "Yours left the text as it was and chose no pair. Is this still the stub? Write the body of "
    "exercise_merge_pair in chapters/12_language_model/exercise/merge_pair.cpp.";

/// A usual wrong merge: what it gives on this case, and what to say when yours equals it.
struct WrongMerge {
  ExerciseMerge value;
  std::string says;
};

/// The usual wrong merges of `ids` whose right pair is `right`.
std::vector<WrongMerge> wrong_merges(const std::vector<int>& ids, int new_id, Pair right) {
  const auto merge = [&](Pair p, Replace how) {
    return ExerciseMerge{p.first, p.second, replaced(ids, p, new_id, how)};
  };
  const std::map<Pair, int> every = pair_counts(ids, true);
  const std::map<Pair, int> apart = pair_counts(ids, false);
  return {
      {merge(winner(ids, apart, Tie::smaller_pair), Replace::left_to_right),
       "Yours counts a pair's overlapping occurrences once: \"a a a\" holds (a, a) twice here, "
       "at positions 0 and 1, although one merge can take only one of them. Count at every "
       "position."},
      {merge(winner(ids, every, Tie::first_seen), Replace::left_to_right),
       fmt::format("Yours breaks the tie by the pair seen first in the text{}. The rule is the "
                   "smaller first id, then the smaller second: so the merges depend on the "
                   "counts alone.",
                   winner(ids, every, Tie::first_seen) == winner(ids, every, Tie::larger_pair)
                       ? " (or towards the larger ids: here both choose the same pair)"
                       : "")},
      {merge(winner(ids, every, Tie::larger_pair), Replace::left_to_right),
       "Yours breaks the tie towards the larger ids (a > where it should be <, or the last of "
       "the tied pairs kept). The rule is the smaller first id, then the smaller second."},
      {merge(right, Replace::right_to_left),
       "Yours replaces from the right: \"a a a\" became \"a X\". Replace left to right, so it "
       "becomes \"X a\", as corpus::apply_merges does."},
      {merge(right, Replace::without_skipping),
       "Yours does not skip the second token of an occurrence it replaced: \"a a a\" became "
       "\"X X a\", one token too many and an a merged twice. After writing new_id, move on by "
       "two."},
  };
}

/// "" when yours is the expected merge; otherwise what differs, and which usual mistake yours
/// is, if it is one.
std::string merge_problem(const std::vector<int>& ids, int new_id, const ExerciseMerge& yours,
                          Pair right, const std::vector<int>& expected, const std::string& which) {
  const Pair chosen{yours.first, yours.second};
  if (chosen == right && yours.ids == expected) return "";
  if (chosen == Pair{-1, -1} && yours.ids == ids) return kMergeStub;
  const std::map<Pair, int> count = pair_counts(ids, true);
  const auto count_of = [&](Pair p) {
    const auto found = count.find(p);
    return found == count.end() ? 0 : found->second;
  };
  std::string message;
  if (chosen != right) {
    message = fmt::format(
        "In {} = {}, yours merged ({}, {}), which occurs {} times; the pair to merge is ({}, {}), "
        "which occurs {} times (every position counts; on a tie the smaller first id wins, then "
        "the smaller second).",
        which, ids_str(ids), chosen.first, chosen.second, count_of(chosen), right.first,
        right.second, count_of(right));
  } else if (yours.ids.size() != expected.size()) {
    message = fmt::format(
        "In {} = {}, yours merged the right pair ({}, {}), but your text has {} tokens: "
        "replacing its occurrences left to right leaves {}, {}.",
        which, ids_str(ids), right.first, right.second, yours.ids.size(), expected.size(),
        ids_str(expected));
  } else {
    std::size_t at = 0;
    while (yours.ids[at] == expected[at]) ++at;
    message = fmt::format(
        "In {} = {}, yours merged the right pair ({}, {}), but your text differs at position "
        "{}: yours {}, expected {}.\n  yours    {}\n  expected {}",
        which, ids_str(ids), right.first, right.second, at, yours.ids[at], expected[at],
        ids_str(yours.ids), ids_str(expected));
  }
  for (const WrongMerge& w : wrong_merges(ids, new_id, right)) {
    if (Pair{w.value.first, w.value.second} == chosen && w.value.ids == yours.ids)
      return message + "\n" + w.says;
  }
  if (yours.ids == ids) message += "\nYour text is unchanged: replace the pair by new_id.";
  return message;
}

void expect_merge(const std::vector<int>& ids, int new_id, Pair right,
                  const std::vector<int>& expected, const std::string& which) {
  const std::string problem =
      merge_problem(ids, new_id, exercise_merge_pair(ids, new_id), right, expected, which);
  if (!problem.empty()) FAIL() << problem;
}

// 1. By hand, the classic example "aaabdaaabac" with a = 0, b = 1, c = 2, d = 3 (the three
// merges corpus::learn_merges learns on it in tests/chapters/test_12_tokens.cpp), each step
// given the text the step before leaves:
//   a a a b d a a a b a c   pairs: aa 4 times (positions 0, 1, 5, 6), ab 2, every other once
//                           -> (0, 0) becomes 4:  4 a b d 4 a b a c
//   4 a b d 4 a b a c       pairs: 4a 2, ab 2: a tie, and 0 < 4, so (0, 1) becomes 5:
//                                                 4 5 d 4 5 a c
//   4 5 d 4 5 a c           pairs: 45 2, every other once -> (4, 5) becomes 6:  6 d 6 a c
TEST(Exercise12Merge, TheClassicExampleByHand) {
  expect_merge({0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2}, 4, {0, 0}, {4, 0, 1, 3, 4, 0, 1, 0, 2},
               "merge 1 of \"aaabdaaabac\"");
  if (HasFailure()) return;
  expect_merge({4, 0, 1, 3, 4, 0, 1, 0, 2}, 5, {0, 1}, {4, 5, 3, 4, 5, 0, 2},
               "merge 2 of \"aaabdaaabac\"");
  if (HasFailure()) return;
  expect_merge({4, 5, 3, 4, 5, 0, 2}, 6, {4, 5}, {6, 3, 6, 0, 2}, "merge 3 of \"aaabdaaabac\"");
}

// 2. Overlaps, by hand: "aaaaacababab", a = 0, b = 1, c = 2, new id 3. At every position: aa 4
// times (positions 0 to 3), ab 3, ba 2, ac and ca once, so (0, 0) wins; replaced left to right,
// "a a a a a" becomes "X X a": 3 3 0 2 0 1 0 1 0 1. Counted without overlaps, aa would occur
// twice and ab would win; replaced from the right, "a X X"; without skipping, "X X X X a".
TEST(Exercise12Merge, EveryPositionCountsAndReplacingGoesLeftToRight) {
  expect_merge({0, 0, 0, 0, 0, 2, 0, 1, 0, 1, 0, 1}, 3, {0, 0}, {3, 3, 0, 2, 0, 1, 0, 1, 0, 1},
               "\"aaaaacababab\"");
}

// 3. Ties, by hand: "acacabab", a = 0, b = 1, c = 2, new id 3. ac (0, 2), ca (2, 0) and ab
// (0, 1) occur twice each, ba once. The smallest first id is 0, shared by (0, 2) and (0, 1);
// then the smaller second: (0, 1). So: 0 2 0 2 3 3. The pair seen first would be (0, 2), the
// largest (2, 0).
TEST(Exercise12Merge, ATieGoesToTheSmallerFirstIdThenTheSmallerSecond) {
  expect_merge({0, 2, 0, 2, 0, 1, 0, 1}, 3, {0, 1}, {0, 2, 0, 2, 3, 3}, "\"acacabab\"");
}

// ---- Exercise 12.2: the loss in nats per character -----------------------------------------

/// A usual wrong loss: its value on this case, and what to say when yours equals it.
struct WrongLoss {
  double value;
  std::string says;
};

const std::string kLossStub =
    "Yours is 0, a model that is always sure and always right. Is this still the stub? Write the "
    "body of exercise_nats_per_character in chapters/12_language_model/exercise/"
    "nats_per_character.cpp.";

/// The usual wrong answers, from the rows' losses (nats) and their targets' characters.
std::vector<WrongLoss> wrong_losses(const std::vector<double>& nats,
                                    const std::vector<double>& chars) {
  const double total = std::accumulate(nats.begin(), nats.end(), 0.0);
  const double total_chars = std::accumulate(chars.begin(), chars.end(), 0.0);
  const auto rows = static_cast<double>(nats.size());
  double mean_of_ratios = 0.0;
  for (std::size_t r = 0; r < nats.size(); ++r) mean_of_ratios += nats[r] / chars[r] / rows;
  return {
      {0.0, kLossStub},
      {total / total_chars / std::log(2.0),
       "Yours is in bits (std::log2), not nats: the chapter's loss uses the natural log, std::log. "
       "(Bits are nats / ln 2: the page's 1.399 nats are 2.02 bits.)"},
      {total / rows,
       "Yours is nats per token: the sum divided by the number of rows. Divide by the "
       "characters the targets stand for, the sum of characters[targets[r]]."},
      {mean_of_ratios,
       "Yours is the mean of each token's nats per character. The chapter divides the summed "
       "nats by the summed characters: a long token counts for its characters, not as one row."},
      {-total / total_chars,
       "Yours has the wrong sign: the loss is -ln p of the target, a positive number."},
  };
}

std::string loss_problem(double yours, double expected, const std::vector<WrongLoss>& wrong,
                         const std::string& which) {
  if (std::abs(yours - expected) <= kTolerance) return "";
  std::string message = fmt::format(
      "Your loss is {:.10g} nats per character, expected {:.10g} ({}).", yours, expected, which);
  for (const WrongLoss& w : wrong) {
    if (std::abs(yours - w.value) <= kTolerance) return message + "\n" + w.says;
  }
  if (!std::isfinite(yours)) {
    message += "\nYours is not finite: std::exp(1000) is inf and std::exp(-800) is 0 in double. "
               "Subtract each row's largest logit before std::exp, and add it back after the log.";
  }
  return message;
}

// 1. By hand: V = 4, the ids' pieces 1, 1, 2 and 3 characters long (ids 2 and 3 as merges).
//   row 0: z = (0, 0, 0, 0), target 3 (3 characters): p = 1/4, loss ln 4 = 2 ln 2.
//   row 1: z = (0, ln 3, ln 4, 0): exp z = (1, 3, 4, 1), sum 9; target 2 (2 characters):
//          p = 4/9, loss ln 9 - ln 4 = 2 ln 3 - 2 ln 2.
// Summed: 2 ln 3 nats over 3 + 2 = 5 characters: 0.4 ln 3 = 0.43944 nats per character. The
// wrong answers: ln 3 = 1.0986 per token, 0.4 log2 3 = 0.63399 bits, and the mean of the two
// ratios, ((2/3) ln 2 + ln 3 - ln 2) / 2 = 0.43378.
TEST(Exercise12Loss, TwoTokensOfMergesByHand) {
  const double ln2 = std::log(2.0), ln3 = std::log(3.0);
  MatrixD logits(2, 4);  // [N x V]
  logits << 0, 0, 0, 0,  //
      0, ln3, std::log(4.0), 0;
  const double yours = exercise_nats_per_character(logits, {3, 2}, {1, 1, 2, 3});
  const std::string problem =
      loss_problem(yours, 0.4 * ln3, wrong_losses({2 * ln2, 2 * ln3 - 2 * ln2}, {3, 2}),
                   "two rows by hand, targets of 3 and 2 characters");
  if (!problem.empty()) FAIL() << problem;
}

// 2. By hand, logits far from 0, one character a token:
//   row 0: z = (1000, 1001, 1002), target 0: ln(e^1000 + e^1001 + e^1002) - 1000
//          = 2 + ln(1 + e^-1 + e^-2) = 2.40761 (the log-sum-exp of (0, 1, 2)).
//   row 1: z = (-800, -800, -800), target 1: p = 1/3, loss ln 3 = 1.09861.
// Mean: 1.75311 nats per character. Without the maximum subtracted, exp(1000) is inf and
// exp(-800) is 0, and the answer is inf, -inf or NaN.
TEST(Exercise12Loss, LogitsFarFromZeroDoNotOverflow) {
  MatrixD logits(2, 3);        // [N x V]
  logits << 1000, 1001, 1002,  //
      -800, -800, -800;
  const double row0 = 2.0 + std::log(1.0 + std::exp(-1.0) + std::exp(-2.0));
  const double row1 = std::log(3.0);
  const double yours = exercise_nats_per_character(logits, {0, 1}, {1, 1, 1});
  const std::string problem =
      loss_problem(yours, (row0 + row1) / 2.0, wrong_losses({row0, row1}, {1, 1}),
                   "rows (1000, 1001, 1002) and (-800, -800, -800)");
  if (!problem.empty()) FAIL() << problem;
}

// 3. Against the library: random logits [16 x 9] (standard deviation 3), random targets, and
// the pieces' lengths 1 for every id (the chapter's default, where nats per character is the
// mean cross-entropy) and then 1 to 5 at random (a run with --merges). Expected: the summed
// cross-entropy of attn::cross_entropy (reduction sum) over the summed characters.
TEST(Exercise12Loss, MatchesTheLibrarysCrossEntropyPerCharacter) {
  const Index N = 16, V = 9;
  attn::Rng rng(1212);
  MatrixD logits(N, V);  // [N x V]
  for (Index r = 0; r < N; ++r) {
    for (Index j = 0; j < V; ++j) logits(r, j) = rng.normal(0.0, 3.0);
  }
  std::vector<int> targets(static_cast<std::size_t>(N));
  for (int& t : targets) t = static_cast<int>(rng.uniform() * static_cast<double>(V));
  std::vector<int> random_lengths(static_cast<std::size_t>(V));
  for (int& c : random_lengths) c = 1 + static_cast<int>(rng.uniform() * 5.0);

  const attn::CrossEntropyOptions sum{.reduction = attn::Reduction::sum};
  std::vector<double> nats;  // each row's loss, for the wrong answers
  for (Index r = 0; r < N; ++r) {
    const MatrixD logits_row = logits.row(r);  // [1 x V]
    const std::span<const int> target(&targets[static_cast<std::size_t>(r)], 1);
    nats.push_back(attn::cross_entropy(logits_row, target, sum).loss);
  }
  const double total = attn::cross_entropy(logits, targets, sum).loss;
  for (const bool merges : {false, true}) {
    const std::vector<int> lengths =
        merges ? random_lengths : std::vector<int>(static_cast<std::size_t>(V), 1);
    std::vector<double> chars;  // each target's characters
    for (int t : targets) chars.push_back(lengths[static_cast<std::size_t>(t)]);
    const double total_chars = std::accumulate(chars.begin(), chars.end(), 0.0);
    const double yours = exercise_nats_per_character(logits, targets, lengths);
    const std::string problem = loss_problem(
        yours, total / total_chars, wrong_losses(nats, chars),
        merges ? "16 random rows, pieces of 1 to 5 characters: attn::cross_entropy per character"
               : "16 random rows, one character a token: attn::cross_entropy's mean");
    if (!problem.empty()) FAIL() << problem;
  }
}

// ---- Exercise 12.3: the distribution a token is drawn from ---------------------------------

/// The ids top-k keeps: at or above the k-th largest logit (every id for k = 0 or k >= V).
/// exactly_k: the usual mistake, k ids exactly, a tie broken by the lowest id.
std::vector<bool> kept(const MatrixD& z, Index k, bool exactly_k = false) {
  const Index V = z.cols();
  std::vector<bool> keep(static_cast<std::size_t>(V), true);
  if (k == 0 || k >= V) return keep;
  std::vector<Index> order(static_cast<std::size_t>(V));
  std::iota(order.begin(), order.end(), Index{0});
  std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) { return z(a) > z(b); });
  const double v_k = z(order[static_cast<std::size_t>(k - 1)]);
  for (Index j = 0; j < V; ++j) keep[static_cast<std::size_t>(j)] = z(j) >= v_k;
  if (exactly_k) {
    for (std::size_t r = static_cast<std::size_t>(k); r < order.size(); ++r)
      keep[static_cast<std::size_t>(order[r])] = false;
  }
  return keep;
}

/// softmax(z / T) over the ids `keep`, 0 elsewhere: [1 x V]. For the wrong answers.
MatrixD softmax_over(const MatrixD& z, double T, const std::vector<bool>& keep) {
  const double m = z.maxCoeff();
  MatrixD p = MatrixD::Zero(1, z.cols());  // [1 x V]
  for (Index j = 0; j < z.cols(); ++j) {
    if (keep[static_cast<std::size_t>(j)]) p(j) = std::exp((z(j) - m) / T);
  }
  return p / p.sum();
}

struct WrongRow {
  MatrixD value;
  std::string says;
};

const std::string kSamplingStub =
    "Yours is all zeros. Is this still the stub? Write the body of "
    "exercise_sampling_probabilities in chapters/12_language_model/exercise/"
    "sampling_probabilities.cpp.";

std::vector<WrongRow> wrong_rows(const MatrixD& z, double T, Index k) {
  const std::vector<bool> keep = kept(z, k), every(static_cast<std::size_t>(z.cols()), true);
  MatrixD after_softmax = softmax_over(z, T, every);  // [1 x V]: top-k applied after it
  for (Index j = 0; j < z.cols(); ++j) {
    if (!keep[static_cast<std::size_t>(j)]) after_softmax(j) = 0.0;
  }
  std::vector<WrongRow> wrong = {{MatrixD::Zero(1, z.cols()), kSamplingStub}};
  if (T != 1.0) {
    wrong.push_back(
        {softmax_over(z, 1.0, keep),
         "Yours ignores the temperature: it is the softmax at T = 1. (Dividing the probabilities "
         "by T and normalising them again gives exactly that: the factor cancels.) Divide the "
         "logits by T, before the exponential."});
    wrong.push_back(
        {softmax_over(z, 1.0, keep) / T,
         "Yours divides the probabilities by T, so they sum to 1/T. Divide the logits by T, "
         "before the exponential."});
    wrong.push_back({softmax_over(z, 1.0 / T, keep),
                     "Yours multiplies the logits by T: exp(z T). Divide them: exp(z / T)."});
  }
  if (k > 0 && k < z.cols()) {
    wrong.push_back(
        {after_softmax,
         "Yours applies top-k after a softmax over every id and stops there: the kept "
         "probabilities sum to less than 1. Take the softmax over the kept ids only (or "
         "normalise again)."});
    wrong.push_back({softmax_over(z, T, kept(z, k, true)),
                     fmt::format("Yours keeps exactly k = {} ids, breaking the tie at the k-th "
                                 "largest logit. The library keeps every id tied with it: "
                                 "every logit >= v_k.",
                                 k)});
    wrong.push_back({softmax_over(z, T, every),
                     fmt::format("Yours keeps every id: top-k = {} must keep only the logits at "
                                 "or above the k-th largest.",
                                 k)});
  }
  return wrong;
}

/// "" when yours is `expected` to kTolerance; otherwise the shape, or the worst id and which
/// usual mistake yours is, if it is one.
std::string row_problem(const MatrixD& yours, const MatrixD& expected,
                        const std::vector<WrongRow>& wrong, const std::string& which) {
  if (yours.rows() != 1 || yours.cols() != expected.cols()) {
    return fmt::format("Your probabilities are [{} x {}], but they must be [1 x {}], one per id "
                       "({}).",
                       yours.rows(), yours.cols(), expected.cols(), which);
  }
  if (((yours - expected).array().abs() <= kTolerance).all()) return "";
  Index worst = 0;
  double worst_error = -1;
  for (Index j = 0; j < yours.cols(); ++j) {
    const double error = std::abs(yours(j) - expected(j));
    if (!(error <= worst_error)) {  // NaN ranks first
      worst_error = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
      worst = j;
    }
  }
  std::string message = fmt::format(
      "Your probabilities differ at id {} ({}): yours {:.6g}, expected {:.6g}.\n  yours    "
      "{}\n  expected {}",
      worst, which, yours(worst), expected(worst), row_str(yours), row_str(expected));
  for (const WrongRow& w : wrong) {
    if (((yours - w.value).array().abs() <= kTolerance).all()) return message + "\n" + w.says;
  }
  if (yours.array().isNaN().any()) {
    message += "\nYours holds NaN: an exponential overflowed (subtract the largest logit first), "
               "or nothing was kept (0 / 0: k = 0 keeps every id).";
  } else if (std::abs(yours.sum() - 1.0) > kTolerance) {
    message += fmt::format("\nYours sum to {:.6g}: probabilities sum to 1.", yours.sum());
  }
  return message;
}

MatrixD row(std::initializer_list<double> values) {
  MatrixD m(1, static_cast<Index>(values.size()));  // [1 x V]
  Index j = 0;
  for (double v : values) m(0, j++) = v;
  return m;
}

void expect_probabilities(const MatrixD& z, double T, Index k, const MatrixD& expected) {
  const std::string which = fmt::format("logits {}, T = {}, top-k = {}", row_str(z), T, k);
  const std::string problem =
      row_problem(exercise_sampling_probabilities(z, T, k), expected, wrong_rows(z, T, k), which);
  if (!problem.empty()) FAIL() << problem;
}

// 1. By hand, every id kept (k = 0): z = (0, ln 2, ln 4, ln 4), so exp(z / T) = (1, 2, 4, 4)^(1/T):
//   T = 1:    (1, 2, 4, 4) / 11
//   T = 0.5:  (1, 4, 16, 16) / 37       (sharper)
//   T = 2:    (1, sqrt 2, 2, 2) / (5 + sqrt 2)   (flatter)
// and z + 1000 at T = 0.5 is the same as z: adding a constant to every logit changes no
// probability, but exp(2000) overflows unless the largest logit is subtracted first.
TEST(Exercise12Sampling, TemperatureByHand) {
  const double ln2 = std::log(2.0), ln4 = std::log(4.0), sqrt2 = std::sqrt(2.0);
  const MatrixD z = row({0, ln2, ln4, ln4});
  expect_probabilities(z, 0.5, 0, row({1, 4, 16, 16}) / 37.0);
  if (HasFailure()) return;
  expect_probabilities(z, 1.0, 0, row({1, 2, 4, 4}) / 11.0);
  if (HasFailure()) return;
  expect_probabilities(z, 2.0, 0, row({1, sqrt2, 2, 2}) / (5.0 + sqrt2));
  if (HasFailure()) return;
  const MatrixD shifted = (z.array() + 1000.0).matrix();  // [1 x V]
  expect_probabilities(shifted, 0.5, 0, row({1, 4, 16, 16}) / 37.0);
}

// 2. By hand, top-k on z = (ln 4, ln 2, 0, ln 2), exp z = (4, 2, 1, 2), T = 1 unless said:
//   k = 1: the largest alone, (1, 0, 0, 0).
//   k = 2: v_2 = ln 2, tied by ids 1 and 3: both kept, (4, 2, 0, 2) / 8. Exactly two ids
//          would be (4, 2, 0, 0) / 6; top-k after the softmax, unnormalised, (4, 2, 0, 2) / 9.
//   k = 2, T = 0.5: (16, 4, 0, 4) / 24.
//   k = 3: v_3 = ln 2 again, the same three ids, (4, 2, 0, 2) / 8.
//   k = 4, k = 7 (above V) and k = 0: every id, (4, 2, 1, 2) / 9.
TEST(Exercise12Sampling, TopKKeepsTiesByHand) {
  const MatrixD z = row({std::log(4.0), std::log(2.0), 0, std::log(2.0)});
  expect_probabilities(z, 1.0, 2, row({4, 2, 0, 2}) / 8.0);
  if (HasFailure()) return;
  expect_probabilities(z, 1.0, 1, row({1, 0, 0, 0}));
  if (HasFailure()) return;
  expect_probabilities(z, 0.5, 2, row({16, 4, 0, 4}) / 24.0);
  if (HasFailure()) return;
  expect_probabilities(z, 1.0, 3, row({4, 2, 0, 2}) / 8.0);
  if (HasFailure()) return;
  for (Index k : {4, 0, 7}) {
    expect_probabilities(z, 1.0, k, row({4, 2, 1, 2}) / 9.0);
    if (HasFailure()) return;
  }
}

// 3. Against the library's sampler. attn::sample_token draws one uniform u from the generator
// and returns the first id whose cumulative probability exceeds u (the inverse CDF in id order;
// test_sampling.cpp checks both). A copy of the generator shows each u, so every draw says where
// your cumulative sums must put their boundaries: the drawn id j must have
// P_{j-1} <= u < P_j, with P_j = p_0 + ... + p_j yours. 4,000 draws a case: a boundary of yours
// off by 1e-3 is missed by all of them with probability (1 - 1e-3)^4000 = 2e-4, and the seeds
// are fixed, so a pass does not change between runs.
TEST(Exercise12Sampling, MatchesTheDrawsOfSampleToken) {
  struct Case {
    MatrixD z;
    double T;
    Index k;
  };
  attn::Rng logits_rng(3012);
  const auto random_row = [&] {
    MatrixD z(1, 10);  // [1 x V]
    for (Index j = 0; j < 10; ++j) z(j) = logits_rng.normal(0.0, 2.0);
    return z;
  };
  const std::vector<Case> cases = {
      {random_row(), 0.8, 20},  // the chapter's own options, --temperature 0.8 --top-k 20
      {random_row(), 0.7, 3},
      {random_row(), 1.6, 5},
      {random_row(), 1.0, 0},
      {random_row(), 0.3, 0},
      {row({1, 0.5, 0.5, 2, 0.5, -1}), 0.8, 3},  // v_3 = 0.5, tied three times: 5 ids kept
  };
  constexpr int kDraws = 4000;
  // How far outside your interval a draw may fall: a right answer's cumulative sums differ from
  // the library's by a few ulps (it adds unnormalised weights and compares u times their sum).
  constexpr double kBoundary = kTolerance;
  std::uint64_t seed = 40;
  for (const Case& c : cases) {
    const std::string which = fmt::format("logits {}, T = {}, top-k = {}", row_str(c.z), c.T, c.k);
    const MatrixD yours = exercise_sampling_probabilities(c.z, c.T, c.k);
    if (yours.rows() != 1 || yours.cols() != c.z.cols()) {
      FAIL() << fmt::format("Your probabilities are [{} x {}], but they must be [1 x {}] ({}).",
                            yours.rows(), yours.cols(), c.z.cols(), which);
    }
    if (!(std::abs(yours.sum() - 1.0) <= kTolerance) || (yours.array() < 0.0).any()) {
      std::string message =
          fmt::format("Your probabilities {} sum to {:.6g} ({}): they must be >= 0 and sum to 1.",
                      row_str(yours), yours.sum(), which);
      for (const WrongRow& w : wrong_rows(c.z, c.T, c.k)) {
        if (((yours - w.value).array().abs() <= kTolerance).all()) {
          message += "\n" + w.says;
          break;
        }
      }
      FAIL() << message;
    }
    std::vector<double> cumulative(static_cast<std::size_t>(yours.cols()) + 1, 0.0);  // P_{j-1}
    for (Index j = 0; j < yours.cols(); ++j)
      cumulative[static_cast<std::size_t>(j) + 1] =
          cumulative[static_cast<std::size_t>(j)] + yours(j);
    attn::Rng rng(seed++);
    for (int draw = 0; draw < kDraws; ++draw) {
      attn::Rng copy = rng;
      const double u = copy.uniform();
      const auto j = static_cast<std::size_t>(
          attn::sample_token<double>(c.z, {.temperature = c.T, .top_k = c.k}, rng));
      if (cumulative[j] - kBoundary <= u && u < cumulative[j + 1] + kBoundary) continue;
      std::size_t yours_id = 0;
      while (yours_id + 1 < cumulative.size() - 1 && !(u < cumulative[yours_id + 1])) ++yours_id;
      std::string message = fmt::format(
          "{}: for the uniform u = {:.6f}, attn::sample_token drew id {}, but your cumulative "
          "probabilities put u in id {}'s interval [{:.6f}, {:.6f}), not id {}'s [{:.6f}, "
          "{:.6f}).\n"
          "  yours {}",
          which, u, j, yours_id, cumulative[yours_id], cumulative[yours_id + 1], j, cumulative[j],
          cumulative[j + 1], row_str(yours));
      for (const WrongRow& w : wrong_rows(c.z, c.T, c.k)) {
        if (((yours - w.value).array().abs() <= kTolerance).all()) {
          message += "\n" + w.says;
          break;
        }
      }
      if (yours.array().isNaN().any()) message += "\nYours holds NaN.";
      FAIL() << message;
    }
  }
}

}  // namespace exercise_12
