/// @file
/// Whether an output's memory overlaps an input's: the check behind every `_into` function's
/// "out shares memory with Q" error (attn.hpp, "Outputs never alias inputs"). Internal to the
/// library's .cpp files; nothing here is part of the course's API.
#pragma once

#include "attn/core/matrix.hpp"

#include <functional>
#include <string>

namespace attn::detail {

/// The bytes a matrix, a view or a block may touch, [first, last); both null when it is empty.
/// Row-major: row r starts r * outerStride() entries in, so a column block spans every row's
/// stride.
struct Memory {
  const void* first = nullptr;
  const void* last = nullptr;
};

/// A matrix (row-major, outer stride between rows) or a vector (inner stride between entries).
template <typename M>
Memory memory_of(const M& m) {
  if (m.size() == 0) return {};
  if constexpr (M::IsVectorAtCompileTime) {
    return {static_cast<const void*>(m.data()),
            static_cast<const void*>(m.data() + (m.size() - 1) * m.innerStride() + 1)};
  } else {
    return {static_cast<const void*>(m.data()),
            static_cast<const void*>(m.data() + (m.rows() - 1) * m.outerStride() + m.cols())};
  }
}

inline bool overlap(Memory a, Memory b) {
  // std::less, not <: a total order even on pointers into different allocations.
  const std::less<const void*> before;
  return a.first != nullptr && b.first != nullptr && before(a.first, b.last) &&
         before(b.first, a.last);
}

/// Throws "<where>: <output> shares memory with <input>: ..." when they overlap.
inline void reject_alias(const char* where, const char* output, Memory out, const char* input,
                         Memory in) {
  require(!overlap(out, in), where, [&] {
    return std::string(output) + " shares memory with " + input +
           ": an output must not alias an input (it would be overwritten or reallocated while "
           "still being read); pass a separate result";
  });
}

}  // namespace attn::detail
