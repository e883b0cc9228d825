// Chapter 05's --ids (token_ids.hpp).
#include "token_ids.hpp"

#include "course/numbers.hpp"

#include <fmt/format.h>

#include <climits>
#include <vector>

namespace masking {

using attn::Index;

// "5,2,1,0,0/1,3,1,4,0" -> [[5,2,1,0,0],[1,3,1,4,0]]: sentences separated by '/', ids by ','.
// Returns the problem, or "" after filling `ids` (when given). Every id is a whole number in
// decimal digits, as every integer option is read (course/numbers.hpp); an empty sentence or id
// ("1,2,", "1,2/", "1,,2") is named, not skipped.
std::string parse_ids(const std::string& text, attn::TokenIds* ids) {
  std::vector<std::vector<int>> rows;
  const std::vector<std::string_view> sentences = course::split_keeping_empty(text, '/');
  for (std::size_t s = 0; s < sentences.size(); ++s) {
    if (sentences[s].empty()) return fmt::format("sentence {} of '{}' is empty", s + 1, text);
    std::vector<int>& row = rows.emplace_back();
    const std::vector<std::string_view> tokens = course::split_keeping_empty(sentences[s], ',');
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      if (tokens[t].empty()) {
        return fmt::format("id {} of sentence {} of '{}' is empty", t + 1, s + 1, text);
      }
      long long id = 0;
      if (!course::read_whole_number(tokens[t], 0, INT_MAX, id).empty()) {
        return fmt::format("'{}' is not a token id (a whole number >= 0 in decimal digits)",
                           tokens[t]);
      }
      row.push_back(static_cast<int>(id));
    }
    if (row.size() != rows[0].size()) {
      return fmt::format("every sentence must be padded to the same length ({} and {})",
                         rows[0].size(), row.size());
    }
  }
  if (rows.size() > 16) return "at most 16 sentences";
  if (rows[0].size() > 64) return "at most 64 tokens per sentence";
  if (ids) ids->resize(std::ssize(rows), std::ssize(rows[0]));  // [B x n]
  for (Index b = 0; ids && b < ids->rows(); ++b) {
    ids->row(b) = Eigen::Map<const Eigen::RowVectorXi>(rows[b].data(), ids->cols());
  }
  return "";
}

}  // namespace masking
