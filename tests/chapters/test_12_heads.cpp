// Chapter 12's head scores (chapters/12_language_model/heads.hpp): what a head's weight lands
// on, measured on held-out text and on random strings written twice.
//
// Where the expected values come from (never from this program's output):
//   A. Hand calculation: a head that spreads its weight evenly gives query i the weight
//      1 / (keys it sees) on each, so every score of a four-character text is a small fraction
//      worked out below, causal and with a sliding window of two.
//   B. An identity: a head whose queries are all zero scores every key 0, so its softmax is the
//      even spread; score_heads on such a head must equal uniform_scores, and a head left
//      alone must not (so that the identity cannot hold by accident, and the head's index is
//      the one zeroed).
//   C. The steps scored and the sentence chosen for the maps, by hand from their rules.
#include "attn/core/random.hpp"
#include "attn/models/language_model.hpp"
#include "corpus.hpp"
#include "heads.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

namespace test_12_heads {

using attn::Index;
using lm::HeadProbes;
using lm::HeadScore;

// The probes of one text row and one repeated row, written as characters.
HeadProbes probes_of(const std::string& text, const std::string& repeated, Index period) {
  const corpus::CharVocab vocab = corpus::make_char_vocab(text + repeated);
  HeadProbes p;
  p.chars = vocab.chars;
  p.period = period;
  p.text = attn::TokenIds(1, std::ssize(text));          // [1 x n]
  p.repeated = attn::TokenIds(1, std::ssize(repeated));  // [1 x n]
  const std::vector<int> a = corpus::encode(vocab, text), b = corpus::encode(vocab, repeated);
  for (Index i = 0; i < std::ssize(a); ++i) p.text(0, i) = a[static_cast<std::size_t>(i)];
  for (Index i = 0; i < std::ssize(b); ++i) p.repeated(0, i) = b[static_cast<std::size_t>(i)];
  return p;
}

// The even weights are floats, 1 / (i + 1) rounded to 24 bits (off by at most 2^-25 of it),
// summed in double: each score is off from its fraction by under 1e-7.
constexpr double kFloatWeights = 1e-7;

TEST(UniformScores, ByHandOnFourCharactersCausal) {
  // "ab c": query 0 sees a; 1 sees a b; 2 sees a b _; 3 sees a b _ c, each key 1/(i+1).
  const HeadScore s = lm::uniform_scores(probes_of("ab c", "abab", 2), 0);
  EXPECT_NEAR(s.previous, (1.0 / 2 + 1.0 / 3 + 1.0 / 4) / 3, kFloatWeights);  // queries 1..3
  EXPECT_NEAR(s.space, (0 + 0 + 1.0 / 3 + 1.0 / 4) / 4, kFloatWeights);       // every query
  EXPECT_NEAR(s.punctuation, 0.0, kFloatWeights);
  // Only b is a letter inside a word (c starts its own): its weight on a, 1/2.
  EXPECT_NEAR(s.word_start, 1.0 / 2, kFloatWeights);
  // "abab", period 2: query 2 (a) reads key 1 (the b after the first a), query 3 reads key 2.
  EXPECT_NEAR(s.induction, (1.0 / 3 + 1.0 / 4) / 2, kFloatWeights);
}

TEST(UniformScores, ByHandWithASlidingWindowOfTwo) {
  // Each query sees itself and the key before: 1/2 each from query 1 on.
  const HeadScore s = lm::uniform_scores(probes_of("ab c", "abab", 2), 2);
  EXPECT_NEAR(s.previous, 0.5, kFloatWeights);
  EXPECT_NEAR(s.space, (0 + 0 + 0.5 + 0.5) / 4, kFloatWeights);
  EXPECT_NEAR(s.word_start, 0.5, kFloatWeights);
  EXPECT_NEAR(s.induction, 0.5, kFloatWeights);
}

TEST(UniformScores, PunctuationAndWordsThatStartAfterIt) {
  // "a,b.": the punctuation weight of queries 0..3 is 0, 1/2, 1/3, 2/4; b starts a word (after
  // the comma), so no query is inside a word and the word-start score is 0, not NaN.
  const HeadScore s = lm::uniform_scores(probes_of("a,b.", "a,a,", 2), 0);
  EXPECT_NEAR(s.punctuation, (0 + 1.0 / 2 + 1.0 / 3 + 2.0 / 4) / 4, kFloatWeights);
  EXPECT_EQ(s.word_start, 0.0);
  EXPECT_NEAR(s.space, 0.0, kFloatWeights);
}

attn::LanguageModel small_model(Index vocab) {
  attn::Rng rng(12);
  return attn::language_model_init(rng, {.vocab = vocab,
                                         .d_model = 16,
                                         .heads = 4,
                                         .kv_heads = 2,
                                         .d_ff = 32,
                                         .layers = 2,
                                         .context = 24});
}

HeadProbes sample_probes(Index context) {
  const std::string text =
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep.\n";
  std::string held;
  for (int i = 0; i < 8; ++i) held += text;
  const corpus::CharVocab vocab = corpus::make_char_vocab(held);
  attn::Rng rng(5);
  return lm::make_head_probes(corpus::encode(vocab, held), vocab, 6, context, rng);
}

TEST(ScoreHeads, AHeadWithZeroQueriesSpreadsItsWeightEvenly) {
  const HeadProbes probes = sample_probes(24);
  attn::LanguageModel model = small_model(std::ssize(probes.chars));
  // Sharper queries everywhere (initial weights are small, their heads nearly even), then
  // layer 2's query head 3 zeroed: rows [3 d_k, 4 d_k) of W_Q and of its bias.
  for (auto& block : model.blocks) block.attn.q_proj.weight *= 20.0f;
  const Index d_k = 16 / 4;
  auto& q_proj = model.blocks[1].attn.q_proj;
  q_proj.weight.middleRows(3 * d_k, d_k).setZero();
  if (q_proj.bias.size() > 0) q_proj.bias.segment(3 * d_k, d_k).setZero();
  const std::vector<HeadScore> scores = lm::score_heads(model, probes);
  ASSERT_EQ(scores.size(), 8u);
  const HeadScore even = lm::uniform_scores(probes, 0);
  const HeadScore& zeroed = scores[1 * 4 + 3];
  EXPECT_EQ(zeroed.layer, 1);
  EXPECT_EQ(zeroed.head, 3);
  // The model's softmax rounds exp(0) / (i + 1) in float: the same kFloatWeights.
  for (const auto score : {&HeadScore::previous, &HeadScore::induction, &HeadScore::space,
                           &HeadScore::punctuation, &HeadScore::word_start}) {
    EXPECT_NEAR(zeroed.*score, even.*score, kFloatWeights);
  }
  // Every other head reads its random queries: at least one of its scores is off the even
  // spread by far more than rounding.
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (i == 7) continue;
    EXPECT_GT(std::abs(scores[i].previous - even.previous) +
                  std::abs(scores[i].space - even.space) +
                  std::abs(scores[i].induction - even.induction),
              1e-4)
        << "layer " << scores[i].layer << " head " << scores[i].head;
  }
}

// A head of zeros makes every logit 0: each prediction is 1 / V, its loss ln V exactly (to
// the rounding of the sums in double); a trained-like model's loss differs.
TEST(ScoreHeads, TheSecondCopysLossOfAModelThatKnowsNothingIsLnV) {
  const HeadProbes probes = sample_probes(24);
  attn::LanguageModel model = small_model(std::ssize(probes.chars));
  double before = 0;
  (void)lm::score_heads(model, probes, &before);
  model.lm_head.weight.setZero();
  double blank = 0;
  (void)lm::score_heads(model, probes, &blank);
  const double ln_v = std::log(static_cast<double>(probes.chars.size()));
  EXPECT_NEAR(blank, ln_v, 1e-12);
  EXPECT_GT(std::abs(before - ln_v), 1e-4);
}

TEST(HeadProbes, RepeatedStringsAreLowercaseLettersWrittenTwice) {
  const HeadProbes p = sample_probes(24);
  ASSERT_EQ(p.repeated.rows(), 6);
  ASSERT_EQ(p.repeated.cols(), 24);
  EXPECT_EQ(p.period, 12);
  for (Index b = 0; b < 6; ++b) {
    for (Index i = 0; i < 24; ++i) {
      const char c = p.chars[static_cast<std::size_t>(p.repeated(b, i))];
      EXPECT_TRUE(std::islower(static_cast<unsigned char>(c))) << c;
      if (i >= 12) {
        EXPECT_EQ(p.repeated(b, i), p.repeated(b, i - 12));
      }
    }
  }
  EXPECT_EQ(p.text.rows(), 6);
  EXPECT_EQ(p.text.cols(), 24);
}

TEST(HeadScoreSteps, DenseForTheFirstFiveEvaluationsThenOneEach) {
  std::vector<Index> expected;
  for (Index s = 0; s < 500; s += 25) expected.push_back(s);
  for (Index s = 500; s <= 3000; s += 100) expected.push_back(s);
  EXPECT_EQ(lm::head_score_steps(0, 3000, 100), expected);
  // A resumed run starts where it stopped, and the last step is always scored.
  EXPECT_EQ(lm::head_score_steps(40, 130, 20),
            (std::vector<Index>{40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90, 95, 100, 120, 130}));
  EXPECT_EQ(lm::head_score_steps(7, 7, 100), (std::vector<Index>{7}));
}

TEST(MapSentence, TheFirstWholeLineOfTheRightLengthWithAWordTwice) {
  // Context 64: lines of 28 to 56 characters. The first line is skipped (the split may have
  // cut it), though it fits and repeats "the".
  const std::string text = "the one and the two and the three here\n"
                           "short\n"
                           "a line of the right length without repeats\n"
                           "the cat and the dog ran far away\n";
  EXPECT_EQ(lm::map_sentence(text, 64), "the cat and the dog ran far away");
  // No line repeats a word: the first whole line that fits.
  EXPECT_EQ(lm::map_sentence("x\nshort\na line of the right length without repeats\n", 64),
            "a line of the right length without repeats");
  // No line fits: the first min(n, 56) characters of the first whole line on.
  EXPECT_EQ(lm::map_sentence("cut\nabcdefghijklmn", 8), "abcdefgh");
  EXPECT_EQ(lm::map_sentence("abcdefghij", 8), "abcdefgh");  // no newline at all
  // A long context still takes a line of at most 56 characters (and at least 28).
  EXPECT_EQ(lm::map_sentence("x\nthe cat and the dog ran far away\n", 256),
            "the cat and the dog ran far away");
}

}  // namespace test_12_heads
