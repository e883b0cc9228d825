// memory.cpp: whether two tensors share memory, and whether a size fits in the machine.
#include "attn/core/memory.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace attn {

namespace {

std::uintptr_t address(const std::byte* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

namespace detail {

bool overlap_within_spans(const MemoryRange& a_in, const MemoryRange& b_in) {
  MemoryRange a = a_in, b = b_in;
  // A single run may take any stride at least its length: take the other's, so that a row of
  // a matrix and a block of the same matrix are compared exactly.
  if (a.rows == 1 && a.cols <= b.stride) a.stride = b.stride;
  if (b.rows == 1 && b.cols <= a.stride) b.stride = a.stride;
  const Index s = a.stride;
  const bool comparable =
      a.scalar == b.scalar && b.stride == s && a.cols <= s && b.cols <= s && s >= 1;
  if (!comparable) return true;  // spans overlap: refuse rather than guess
  // b's first element, in elements from a's: a whole number of elements, or the two are
  // misaligned views of one buffer (refused, as above).
  auto offset = static_cast<std::intptr_t>(address(b.data) - address(a.data));
  if (address(b.data) < address(a.data)) {
    std::swap(a, b);
    offset = static_cast<std::intptr_t>(address(b.data) - address(a.data));
  }
  if (offset % a.scalar != 0) return true;
  const Index e = static_cast<Index>(offset) / a.scalar;  // >= 0
  const Index q = e / s, r = e % s;  // b's run k starts at column r of a's run q + k
  // b's run k covers columns [r, r + cols) of a's row q + k, continued on row q + k + 1 from
  // column 0 when r + cols passes the stride. a covers columns [0, a.cols) of rows [0, a.rows).
  const bool first_part = r < a.cols && q < a.rows;  // rows [q, q + b.rows) meet [0, a.rows)
  const bool wraps = r + b.cols > s;
  const bool second_part = wraps && q + 1 < a.rows;  // rows [q + 1, q + b.rows + 1)
  return first_part || second_part;
}

}  // namespace detail

void require_apart(std::string_view where, std::initializer_list<NamedMemory> outputs,
                   std::initializer_list<NamedMemory> inputs) {
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    for (auto other = outputs.begin(); other != out; ++other) {
      require(!overlap(out->memory, other->memory), where, [&] {
        return std::string(other->name) + " and " + std::string(out->name) +
               " share memory: each output needs memory of its own (one would overwrite the "
               "other); pass separate results";
      });
    }
    for (const NamedMemory& in : inputs) {
      require(!overlap(out->memory, in.memory), where, [&] {
        return std::string(out->name) + " shares memory with " + std::string(in.name) +
               ": an output must not alias an input (it would be overwritten or reallocated "
               "while still being read); pass a separate result";
      });
    }
  }
}

std::optional<std::pair<std::size_t, std::size_t>> first_overlap(std::span<const MemoryRange> a,
                                                                 std::span<const MemoryRange> b) {
  // A few tensors against a few: every pair (overlap() compares the spans inline), nothing
  // allocated; sorting a few dozen tensors costs more than the pairs.
  if (a.size() * b.size() <= 1024) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      for (std::size_t j = 0; j < b.size(); ++j) {
        if (overlap(a[i], b[j])) return std::pair{i, j};
      }
    }
    return std::nullopt;
  }
  // b's non-empty ranges by their first byte, with the furthest end among each one and those
  // before it: the ranges that may meet x are those that start before x ends, walked back from
  // the last of them while one of the remaining could still reach past x's start.
  std::vector<std::size_t> order;
  order.reserve(b.size());
  for (std::size_t j = 0; j < b.size(); ++j) {
    if (!b[j].empty()) order.push_back(j);
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t x, std::size_t y) { return address(b[x].data) < address(b[y].data); });
  std::vector<std::uintptr_t> reach(order.size());
  std::uintptr_t furthest = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    furthest = std::max(furthest, address(b[order[k]].end()));
    reach[k] = furthest;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].empty()) continue;
    const std::uintptr_t start = address(a[i].data), end = address(a[i].end());
    auto k = static_cast<std::size_t>(
        std::partition_point(order.begin(), order.end(),
                             [&](std::size_t j) { return address(b[j].data) < end; }) -
        order.begin());
    while (k > 0 && reach[k - 1] > start) {
      --k;
      if (overlap(a[i], b[order[k]])) return std::pair{i, order[k]};
    }
  }
  return std::nullopt;
}

ElementCount& ElementCount::add(Index rows, Index cols, Index copies) {
  estimate_ += static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(copies);
  Index product = 0;
  overflowed_ = overflowed_ || rows < 0 || cols < 0 || copies < 0 ||
                __builtin_mul_overflow(rows, cols, &product) ||
                __builtin_mul_overflow(product, copies, &product) ||
                __builtin_add_overflow(value_, product, &value_);
  return *this;
}

ElementCount& ElementCount::add(const ElementCount& other, Index copies) {
  estimate_ += other.estimate_ * static_cast<double>(copies);
  Index product = 0;
  overflowed_ = overflowed_ || other.overflowed_ || copies < 0 ||
                __builtin_mul_overflow(other.value_, copies, &product) ||
                __builtin_add_overflow(value_, product, &value_);
  return *this;
}

std::uint64_t physical_memory() {
  static const std::uint64_t bytes = [] {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
      const auto p = static_cast<std::uint64_t>(pages), size = static_cast<std::uint64_t>(page);
      if (p <= std::numeric_limits<std::uint64_t>::max() / size) return p * size;
    }
#endif
    return std::numeric_limits<std::uint64_t>::max();
  }();
  return bytes;
}

std::string bytes_str(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  constexpr int kLast = static_cast<int>(std::size(kUnits)) - 1;
  int unit = 0;
  while (unit < kLast && bytes >= 1024.0) {
    bytes /= 1024.0;
    ++unit;
  }
  char buffer[48];
  if (unit == 0) {
    std::snprintf(buffer, sizeof buffer, "%.0f B", bytes);
  } else if (bytes < 10000.0) {
    std::snprintf(buffer, sizeof buffer, "%.1f %s", bytes, kUnits[unit]);
  } else {  // beyond 10000 EiB
    std::snprintf(buffer, sizeof buffer, "%.3g %s", bytes, kUnits[unit]);
  }
  return buffer;
}

namespace detail {

bool fits_in(const ElementCount& count, std::size_t scalar, std::uint64_t available) {
  return !count.overflowed() && scalar >= 1 &&
         static_cast<std::uint64_t>(count.value()) <= available / scalar;
}

std::string needs_str(const ElementCount& count, std::size_t scalar, std::uint64_t available,
                      std::string_view of_what) {
  std::string s = " needs " + bytes_str(count.estimate() * static_cast<double>(scalar)) + " ";
  s.append(of_what);
  if (count.overflowed()) s += " (more elements than an Index can count)";
  return s + "; this machine has " + bytes_str(static_cast<double>(available));
}

}  // namespace detail

}  // namespace attn
