// Chapter 05's views of a mask and of the blocked weights (inspect.hpp).
#include "inspect.hpp"

#include <algorithm>

namespace masking {

using attn::AllowedMask;
using attn::Index;

// A mask as the notes draw it, 1 = may attend and . = blocked, a label per query (row) and per
// key (column), laid out like Chapter::show. Too many keys for the line width: the first and
// last few, "..." between, as Chapter::show elides a wide matrix.
void show_mask(course::Chapter& ch, const std::string& name, const AllowedMask& m,
               const std::vector<std::string>& queries, const std::vector<std::string>& keys) {
  std::size_t lw = 0, w = 1;  // the widest query label, the widest key label
  for (const std::string& q : queries) lw = std::max(lw, q.size());
  for (const std::string& key : keys) w = std::max(w, key.size());
  const Index n_k = std::ssize(keys);
  // Each cell takes w + 2 columns after the indent (2) and the label column (lw + 2).
  const Index fits =
      static_cast<Index>((course::Chapter::kWidth - 4 - lw) / (std::max<std::size_t>(w, 3) + 2));
  std::vector<Index> cols;  // the keys shown, -1 for "..."
  for (Index j = 0; j < n_k; ++j) {
    if (n_k <= fits || j < (fits - 1) / 2 || j >= n_k - (fits - 1) / 2) {
      cols.push_back(j);
    } else if (cols.empty() || cols.back() != -1) {
      cols.push_back(-1);
    }
  }
  if (n_k > fits) w = std::max<std::size_t>(w, 3);
  std::vector<std::string> header;
  for (const Index j : cols) header.push_back(j < 0 ? "..." : keys[j]);
  ch.out() << fmt::format("{} {}   (1 = may attend, . = blocked)\n", name, course::shape(m));
  ch.say("{:<{}}  {:>{}}", "", lw, fmt::join(header, "  "), w);
  for (Index i = 0; i < m.rows(); ++i) {
    std::vector<std::string> cells;  // "1" or "." per key shown
    for (const Index j : cols) cells.push_back(j < 0 ? "..." : m(i, j) ? "1" : ".");
    ch.say("{:<{}}  {:>{}}", queries[i], lw, fmt::join(cells, "  "), w);
  }
}

BlockedWeights blocked_weights(const attn::Batch& weights, const attn::AllowedBatch& allowed) {
  BlockedWeights r;
  for (Index b = 0; b < allowed.batch(); ++b) {
    for (Index i = 0; i < allowed.rows(); ++i) {
      const bool any = allowed[b].row(i).any();
      for (Index j = 0; j < allowed.cols(); ++j) {
        if (allowed[b](i, j)) continue;
        float& largest = any ? r.with_keys : r.without_keys;
        largest = std::max(largest, weights[b](i, j));
      }
    }
  }
  return r;
}

}  // namespace masking
