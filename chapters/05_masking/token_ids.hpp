// Chapter 05's --ids: a batch of sentences of token ids, typed as the notes write it.
#pragma once

#include "attn/ops/masks.hpp"

#include <string>

namespace masking {

// "5,2,1,0,0/1,3,1,4,0" -> [[5,2,1,0,0],[1,3,1,4,0]]: sentences separated by '/', ids by ','.
// Returns the problem, or "" after filling `ids` (when given).
std::string parse_ids(const std::string& text, attn::TokenIds* ids = nullptr);

}  // namespace masking
