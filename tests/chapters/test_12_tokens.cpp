// Chapter 12's byte-pair merges (chapters/12_language_model/tokens.hpp), worked by hand on the
// classic example "aaabdaaabac", and the identities every tokenizer must keep: encoding a
// text with the merges gives what learning left, decoding gives the text back.
#include "corpus.hpp"
#include "tokens.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace test_12_tokens {

using attn::Index;
using attn_test::message_of;

// "aaabdaaabac": ids a 0, b 1, c 2, d 3. By hand:
//   pairs: aa 4 times, ab 2, every other once    -> merge (a, a) = 4:  Z a b d Z a b a c
//   pairs: Za 2, ab 2 (a tie: a < Z, so ab wins) -> merge (a, b) = 5:  Z Y d Z Y a c
//   pairs: ZY 2                                  -> merge (4, 5) = 6:  X d X a c
//   every pair now occurs once: a fourth merge has nothing to learn.
TEST(LearnMerges, TheClassicExampleByHand) {
  const corpus::CharVocab vocab = corpus::make_char_vocab("aaabdaaabac");
  std::vector<int> ids = corpus::encode(vocab, "aaabdaaabac");
  const corpus::Merges m = corpus::learn_merges(ids, vocab, 3);
  EXPECT_EQ(m.pairs, (std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {4, 5}}));
  EXPECT_EQ(m.pieces, (std::vector<std::string>{"a", "b", "c", "d", "aa", "ab", "aaab"}));
  EXPECT_EQ(m.size(), 7);
  EXPECT_EQ(ids, (std::vector<int>{6, 3, 6, 0, 2}));

  std::vector<int> again = corpus::encode(vocab, "aaabdaaabac");
  EXPECT_EQ(message_of([&] { corpus::learn_merges(again, vocab, 4); }),
            "learn_merges: after 3 merges no pair of tokens occurs twice: 4 merges need a longer "
            "text");
  EXPECT_EQ(message_of([&] { corpus::learn_merges(again, vocab, -1); }),
            "learn_merges: merges -1: it must be >= 0");
}

TEST(LearnMerges, NoMergesLeaveTheCharacters) {
  const corpus::CharVocab vocab = corpus::make_char_vocab("abc");
  std::vector<int> ids = {2, 1, 0};
  const corpus::Merges m = corpus::learn_merges(ids, vocab, 0);
  EXPECT_EQ(m.pieces, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(m.pairs.empty());
  EXPECT_EQ(ids, (std::vector<int>{2, 1, 0}));
}

TEST(ApplyMerges, EncodesInTheOrderTheMergesWereLearned) {
  const corpus::CharVocab vocab = corpus::make_char_vocab("aaabdaaabac");
  std::vector<int> ids = corpus::encode(vocab, "aaabdaaabac");
  const corpus::Merges m = corpus::learn_merges(ids, vocab, 3);
  // The learned text again: what learning left.
  EXPECT_EQ(corpus::apply_merges(corpus::encode(vocab, "aaabdaaabac"), m), ids);
  // "aaaa": (a, a) twice, then nothing else applies. "aaab": aa, then a b -> ab, then aa ab.
  EXPECT_EQ(corpus::apply_merges(corpus::encode(vocab, "aaaa"), m), (std::vector<int>{4, 4}));
  EXPECT_EQ(corpus::apply_merges(corpus::encode(vocab, "aaab"), m), (std::vector<int>{6}));
  // "abaa": ab is learned after aa, but they do not overlap here: ab aa -> 5 4.
  EXPECT_EQ(corpus::apply_merges(corpus::encode(vocab, "abaa"), m), (std::vector<int>{5, 4}));
}

TEST(DecodePieces, GivesTheTextBackAndCountsTheCharactersOfTargets) {
  const std::string text =
      "And God said, Let there be light: and there was light. And God saw the light, that it "
      "was good: and God divided the light from the darkness.\n";
  const corpus::CharVocab vocab = corpus::make_char_vocab(text);
  std::vector<int> ids = corpus::encode(vocab, text);
  const corpus::Merges m = corpus::learn_merges(ids, vocab, 20);
  EXPECT_LT(ids.size(), text.size());  // 20 merges shorten it
  EXPECT_EQ(corpus::decode_pieces(m, ids), text);
  EXPECT_EQ(corpus::decode_pieces(m, corpus::apply_merges(corpus::encode(vocab, text), m)), text);

  const corpus::CharVocab abc = corpus::make_char_vocab("aaabdaaabac");
  std::vector<int> classic = corpus::encode(abc, "aaabdaaabac");
  const corpus::Merges three = corpus::learn_merges(classic, abc, 3);
  attn::TokenIds targets(2, 2);  // [2 x 2]: aaab d / a aa
  targets << 6, 3, 0, 4;
  EXPECT_EQ(corpus::target_characters(three, targets), 4 + 1 + 1 + 2);
  EXPECT_EQ(message_of([&] {
              corpus::decode_pieces(three, std::vector<int>{1, 7});
            }),
            "decode_pieces: id 7 at position 1 is outside the vocabulary [0, 7)");
}

TEST(ShownPiece, QuotesShowsNewlinesAndCutsLongPieces) {
  EXPECT_EQ(corpus::shown_piece(" the"), "\" the\"");
  EXPECT_EQ(corpus::shown_piece("end.\n"), "\"end.\\n\"");
  EXPECT_EQ(corpus::shown_piece(std::string(41, 'a')), "\"" + std::string(40, 'a') + "...\"");
}

}  // namespace test_12_tokens
