// How chapter 05 looks at its masks: printed as the notes draw them, and the weights that
// land on blocked keys, which the lesson requires to be exactly 0 where a key is left.
#pragma once

#include "attn/core/batch.hpp"
#include "attn/ops/masks.hpp"
#include "course/chapter.hpp"

#include <string>
#include <vector>

namespace masking {

// A mask as the notes draw it, 1 = may attend and . = blocked, a label per query (row) and per
// key (column), laid out like Chapter::show. Too many keys for the line width: the first and
// last few, "..." between, as Chapter::show elides a wide matrix.
void show_mask(course::Chapter& ch, const std::string& name, const attn::AllowedMask& m,
               const std::vector<std::string>& queries, const std::vector<std::string>& keys);

// The weights on blocked keys, split by whether the query has any key left: with one left, a
// blocked weight is exactly 0 under either fill; with none, -1e9 averages the blocked keys.
struct BlockedWeights {
  float with_keys = 0.0f;     // the largest blocked weight of a query that has a key left
  float without_keys = 0.0f;  // the largest weight of a query that has none
};
BlockedWeights blocked_weights(const attn::Batch& weights, const attn::AllowedBatch& allowed);

}  // namespace masking
