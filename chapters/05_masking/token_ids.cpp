// Chapter 05's --ids (token_ids.hpp).
#include "token_ids.hpp"

#include <fmt/format.h>

#include <sstream>
#include <vector>

namespace masking {

using attn::Index;

// "5,2,1,0,0/1,3,1,4,0" -> [[5,2,1,0,0],[1,3,1,4,0]]: sentences separated by '/', ids by ','.
// Returns the problem, or "" after filling `ids` (when given).
std::string parse_ids(const std::string& text, attn::TokenIds* ids) {
  std::vector<std::vector<int>> rows;
  std::stringstream sentences(text);
  for (std::string sentence; std::getline(sentences, sentence, '/');) {
    std::vector<int>& row = rows.emplace_back();
    std::stringstream tokens(sentence);
    for (std::string token; std::getline(tokens, token, ',');) {
      std::size_t used = 0;
      try {
        row.push_back(std::stoi(token, &used));
      } catch (const std::exception&) {  // not a number, or beyond int: `used` stays 0
      }
      if (used == 0 || used != token.size() || row.back() < 0) {
        return fmt::format("'{}' is not a token id (a whole number >= 0)", token);
      }
    }
    if (row.empty()) return fmt::format("an empty sentence in '{}'", text);
    if (row.size() != rows[0].size()) {
      return fmt::format("every sentence must be padded to the same length ({} and {})",
                         rows[0].size(), row.size());
    }
  }
  if (rows.empty()) return fmt::format("no sentences in '{}'", text);
  if (rows.size() > 16) return "at most 16 sentences";
  if (rows[0].size() > 64) return "at most 64 tokens per sentence";
  if (ids) ids->resize(std::ssize(rows), std::ssize(rows[0]));  // [B x n]
  for (Index b = 0; ids && b < ids->rows(); ++b) {
    ids->row(b) = Eigen::Map<const Eigen::RowVectorXi>(rows[b].data(), ids->cols());
  }
  return "";
}

}  // namespace masking
