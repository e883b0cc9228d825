// tokens.hpp: chapter 11's small helpers: token ids, position labels, a ring's slots.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/row_cache.hpp"

#include <fmt/format.h>

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
