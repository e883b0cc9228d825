// tokens.hpp: chapter 11's small helpers: token ids and their lines, position labels, a ring's
// slots.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/row_cache.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace decoding {

/// n token ids drawn uniformly from 0 .. vocab - 1.
inline std::vector<int> random_tokens(attn::Rng& rng, attn::Index n, attn::Index vocab) {
  std::vector<int> ids(static_cast<std::size_t>(n));
  for (int& id : ids) id = static_cast<int>(rng.next_u64() % static_cast<std::uint64_t>(vocab));
  return ids;
}

/// "m=0", "m=1", ...: positions count from 0, as RoPE's m does.
inline std::vector<std::string> from_zero(std::string_view prefix, attn::Index n) {
  std::vector<std::string> out;
  for (attn::Index i = 0; i < n; ++i) out.push_back(fmt::format("{}{}", prefix, i));
  return out;
}

/// Lines of "label  id id id ...", 20 ids a line at most: 64 of them (--prompt 32 --new 32)
/// stay within 100 columns, the label on the first line only.
inline std::vector<std::string> token_lines(std::string_view label, const std::vector<int>& ids) {
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < ids.size(); at += 20) {
    const std::size_t end = std::min(ids.size(), at + 20);
    std::string line = fmt::format("{:<29}", at == 0 ? label : "");
    for (std::size_t i = at; i < end; ++i) line += fmt::format("{}{}", i == at ? "" : " ", ids[i]);
    lines.push_back(line);
  }
  return lines;
}

/// The position each slot of a rolling cache holds, slot by slot: slot s holds the held
/// position p with p mod capacity = s; -1 where nothing was written yet.
inline std::vector<attn::Index> slot_positions(const attn::RowCache& ring) {
  std::vector<attn::Index> slots(static_cast<std::size_t>(ring.capacity()), -1);
  for (attn::Index p = ring.first_position(); p < ring.next_position(); ++p) {
    slots[static_cast<std::size_t>(p % ring.capacity())] = p;
  }
  return slots;
}

}  // namespace decoding
