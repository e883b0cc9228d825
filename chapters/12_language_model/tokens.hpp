// tokens.hpp: byte-pair merges on top of chapter 12's characters (--merges M).
//
// Byte-pair encoding (Sennrich et al. 2016; GPT-2's tokenizer works on the same rule) starts from
// one token per character and learns M merges on the training text, one at a time:
//
//   repeat M times:
//     count every pair of neighbouring tokens (a, b) in the text
//     the most frequent pair becomes a new token, id V + m, written as the two pieces joined
//     every occurrence of (a, b), left to right, is replaced by it
//
// A text is then encoded by applying the same merges in the order they were learned. Each
// merge shortens the sequence, so a window of n tokens holds more characters, and the model
// predicts whole pieces ("the ", "and ") at once; the vocabulary and the embedding grow by one
// row a merge. A loss per token is not comparable across vocabularies: the chapter reports it
// per character as well (the token's nats divided by the characters it stands for).
#pragma once

#include "attn/core/matrix.hpp"
#include "corpus.hpp"

#include <span>
#include <string>
#include <utility>
#include <vector>

namespace corpus {

/// The merges learned and what every id stands for.
struct Merges {
  std::vector<std::pair<int, int>> pairs;  ///< merge m joins pairs[m] into id V_chars + m
  std::vector<std::string> pieces;         ///< id -> the characters it stands for
  int size() const { return static_cast<int>(pieces.size()); }  ///< the vocabulary: V + M
};

/// Learns `merges` merges on `ids` (character ids of `vocab`), which it leaves encoded with
/// them. On a tie the pair with the smaller first id, then the smaller second, wins, so the
/// merges depend on the text alone. Throws std::invalid_argument for merges < 0, an id outside
/// the vocabulary, or a text where no pair occurs twice before the M-th merge (naming how many
/// were learned): a merge of a pair seen once teaches nothing.
Merges learn_merges(std::vector<int>& ids, const CharVocab& vocab, Index merges);

/// Character ids encoded with the merges, in the order they were learned.
std::vector<int> apply_merges(std::vector<int> ids, const Merges& merges);

/// The characters the ids stand for. Throws std::invalid_argument naming an id outside
/// [0, merges.size()) and its position.
std::string decode_pieces(const Merges& merges, std::span<const int> ids);

/// A piece as the terminal shows it: in double quotes, a newline as \n, and cut after 40
/// characters with "..." (a merge of merges can be long).
std::string shown_piece(const std::string& piece);

/// How many characters the targets of a batch stand for: their pieces' lengths summed.
Index target_characters(const Merges& merges, const attn::TokenIds& targets);

}  // namespace corpus
