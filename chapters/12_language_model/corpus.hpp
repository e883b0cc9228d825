// corpus.hpp: chapter 12's text and what the training loop takes from it.
//
//   read_kjv()          the King James Bible, one verse per line, as Debian's bible-kjv prints
//                       it (`bible -f Gen1:1-Rev22:21`), its references removed, and checked
//                       against the size and FNV-1a checksum the course was measured on
//   read_text_file()    a learner's own text instead (--corpus FILE)
//   CharVocab           one token per distinct byte of the text: ids in byte order
//   split_tokens()      the last fraction of the ids held out for validation, as nanoGPT does
//   random_windows()    a batch of B windows of n tokens at random places, and their targets
//
// A character-level model needs no tokenizer to be trained first, and its 63 tokens keep the
// embedding and the head small; nanoGPT's shakespeare_char does the same.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"
#include "attn/models/language_model_training.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace corpus {

using attn::Index;

/// The verse text read_kjv() returns with bible-kjv 4.38 (Debian 12) and 4.39 (Debian 13, the
/// same text, checked 2026-11-28): 31,102 verses, one per
/// line, their references removed. Measured once, from the program's output stripped by the
/// same rule in Python and hashed with FNV-1a (attn::fnv1a64), and checked by the tests against
/// read_kjv() itself.
inline constexpr std::size_t kKjvBytes = 4'137'850;
inline constexpr std::uint64_t kKjvChecksum = 0xCA234ACE6589DC01ULL;
/// The lines `bible -f Gen1:1-Rev22:21` prints: one per verse.
inline constexpr std::size_t kKjvVerses = 31'102;

/// The whole King James Bible: runs `bible -f Gen1:1-Rev22:21` (Debian's package bible-kjv),
/// removes each line's reference ("Ge1:1 ", everything up to and including the first space)
/// and keeps one verse per line, each ended by '\n'. Throws std::runtime_error when `bible` is
/// not on PATH (saying how to install it), when it cannot be run or fails, when a line has no
/// reference, and when the text is not the one the course was measured on (kKjvBytes,
/// kKjvChecksum: another version of the package).
std::string read_kjv();

/// A learner's own corpus, every byte of the file as it is (binary: no newline translation).
/// Throws std::runtime_error naming the file when it is missing, unreadable, not a regular
/// file, larger than kMaxTextBytes, or empty.
std::string read_text_file(const std::string& path);
/// 256 MiB: the text, its ids (4 bytes a character) and their split take ~9 bytes a character,
/// 2.3 GiB at this size; 60 times the King James Bible.
inline constexpr std::size_t kMaxTextBytes = std::size_t{256} << 20;

/// A text and where it came from.
struct Source {
  std::string name;  ///< "the King James Bible (...)" or the file's path
  std::string text;
};

/// The chapter's corpus: read_kjv() when `file` is empty, else read_text_file(file). Throws as
/// they do.
Source load(const std::string& file);

/// A character vocabulary: one id per distinct byte of the text, in byte order.
struct CharVocab {
  std::string chars;                 ///< the distinct bytes, sorted as unsigned values: id -> byte
  std::array<int, 256> id_of{};      ///< byte (as unsigned char) -> id, or -1 when absent
  std::vector<std::int64_t> counts;  ///< id -> how often the byte occurs in the text
  int size() const { return static_cast<int>(chars.size()); }
};

/// The vocabulary of `text`. Throws std::invalid_argument for an empty text.
CharVocab make_char_vocab(std::string_view text);

/// A byte as messages and tables show it: 'c' when printable ASCII, \xNN otherwise ('\n' is
/// \x0A), so that a space or a control character is visible.
std::string shown(char c);

/// The ids of `text`'s bytes [text.size()]. Throws std::invalid_argument naming the first
/// byte that has no id (as 'c' when printable, as \xNN otherwise) and its offset.
std::vector<int> encode(const CharVocab& vocab, std::string_view text);

/// The bytes of `ids`. Throws std::invalid_argument naming an id outside [0, size()) and its
/// position.
std::string decode(const CharVocab& vocab, std::span<const int> ids);

/// The characters of `text` the vocabulary lacks, each once, as shown() writes them and
/// separated by spaces ("'#' '~'"), or "" when every one is in it.
std::string unknown_characters(const CharVocab& vocab, std::string_view text);

/// The ids split once, in order: train the first part, validation the last (nanoGPT's
/// `data[:int(n*0.9)]` and `data[int(n*0.9):]` for a fraction of 0.1).
struct Split {
  std::vector<int> train, validation;
};

/// train = ids[0, floor(n (1 - f))), validation = the rest, each at least one token. Throws
/// std::invalid_argument for a fraction f outside (0, 1) or fewer than 2 ids.
Split split_tokens(std::vector<int> ids, double validation_fraction);

/// Throws std::invalid_argument when a split of `tokens` ids cannot hold one training window:
/// `context` tokens and the one after the last (its target), so fewer than context + 1, or
/// when context < 1. `which` names the split as the message should say it ("the validation
/// split"), naming also its size and the context.
void check_long_enough(std::size_t tokens, Index context, const char* which);

/// B windows of n consecutive ids [B x n] and the ids one position later (the targets), each
/// window starting at a place drawn uniformly from [0, ids.size() - n - 1] with one
/// rng.uniform() per window. Throws std::invalid_argument for B < 1, n < 1, or fewer than
/// n + 1 ids.
attn::LanguageModelBatch random_windows(std::span<const int> ids, Index batch, Index length,
                                        attn::Rng& rng);

/// Rows [0, rows) of `batch` made into text that repeats itself: each keeps the first
/// R = ceil(n / 2) ids of its window and writes them again, so that inputs(b, i) = w_{i mod R}
/// and targets(b, i) = w_{(i + 1) mod R} (the window read as periodic, period R). From the
/// (R+1)-th position on every target can be read off the first copy: what an induction head
/// does. Throws std::invalid_argument for rows outside [0, B].
void repeat_halves(attn::LanguageModelBatch& batch, Index rows);

}  // namespace corpus
