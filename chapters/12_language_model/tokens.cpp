// Byte-pair merges (tokens.hpp).
#include "tokens.hpp"

#include <cstdint>

namespace corpus {

namespace {

// Replaces every occurrence of (a, b) in ids, left to right, by `merged`: "aaa" with (a, a)
// becomes "Xa", as each occurrence takes its two tokens out of play.
void replace_pair(std::vector<int>& ids, int a, int b, int merged) {
  std::size_t out = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i + 1 < ids.size() && ids[i] == a && ids[i + 1] == b) {
      ids[out++] = merged;
      ++i;
    } else {
      ids[out++] = ids[i];
    }
  }
  ids.resize(out);
}

}  // namespace

Merges learn_merges(std::vector<int>& ids, const CharVocab& vocab, Index merges) {
  attn::require(merges >= 0, "learn_merges",
                [&] { return "merges " + std::to_string(merges) + ": it must be >= 0"; });
  Merges m;
  for (const char c : vocab.chars) m.pieces.emplace_back(1, c);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    attn::require(ids[i] >= 0 && ids[i] < vocab.size(), "learn_merges", [&] {
      return "id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
             " is outside the vocabulary [0, " + std::to_string(vocab.size()) + ")";
    });
  }
  // count[a W + b]: how often the pair (a, b) occurs in the text now, W the final vocabulary's
  // size. Each merge counts the text once and then zeroes only the entries it touched, so a
  // merge costs one pass over the text, not over W^2 pairs.
  const auto W = static_cast<std::size_t>(vocab.size() + merges);
  std::vector<std::uint32_t> count(merges > 0 ? W * W : 0, 0);
  const auto pair_of = [&](std::size_t i) {
    return static_cast<std::size_t>(ids[i]) * W + static_cast<std::size_t>(ids[i + 1]);
  };
  for (Index step = 0; step < merges; ++step) {
    // The largest count, and on a tie the smaller a, then the smaller b: the smaller a W + b.
    std::size_t best = 0;
    std::uint32_t best_count = 0;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      const std::size_t p = pair_of(i);
      const std::uint32_t c = ++count[p];
      if (c > best_count || (c == best_count && p < best)) best = p, best_count = c;
    }
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) count[pair_of(i)] = 0;
    attn::require(best_count >= 2, "learn_merges", [&] {
      return "after " + std::to_string(step) +
             " merges no pair of tokens occurs twice: " + std::to_string(merges) +
             " merges need a longer text";
    });
    const int a = static_cast<int>(best / W), b = static_cast<int>(best % W);
    const int merged = m.size();
    m.pairs.emplace_back(a, b);
    m.pieces.push_back(m.pieces[static_cast<std::size_t>(a)] +
                       m.pieces[static_cast<std::size_t>(b)]);
    replace_pair(ids, a, b, merged);
  }
  return m;
}

std::vector<int> apply_merges(std::vector<int> ids, const Merges& merges) {
  const int first = merges.size() - static_cast<int>(merges.pairs.size());  // V, the characters
  for (std::size_t k = 0; k < merges.pairs.size(); ++k)
    replace_pair(ids, merges.pairs[k].first, merges.pairs[k].second, first + static_cast<int>(k));
  return ids;
}

std::string decode_pieces(const Merges& merges, std::span<const int> ids) {
  std::string text;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    attn::require(ids[i] >= 0 && ids[i] < merges.size(), "decode_pieces", [&] {
      return "id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
             " is outside the vocabulary [0, " + std::to_string(merges.size()) + ")";
    });
    text += merges.pieces[static_cast<std::size_t>(ids[i])];
  }
  return text;
}

std::string shown_piece(const std::string& piece) {
  std::string out = "\"";
  for (std::size_t i = 0; i < piece.size() && i < 40; ++i)
    out += piece[i] == '\n' ? std::string("\\n") : std::string(1, piece[i]);
  return out + (piece.size() > 40 ? "...\"" : "\"");
}

Index target_characters(const Merges& merges, const attn::TokenIds& targets) {
  Index chars = 0;
  for (Index r = 0; r < targets.rows(); ++r) {
    for (Index c = 0; c < targets.cols(); ++c)
      chars += std::ssize(merges.pieces[static_cast<std::size_t>(targets(r, c))]);
  }
  return chars;
}

}  // namespace corpus
