/// @file
/// What memory a tensor occupies and what the machine has: the two checks every public function
/// makes before it writes or allocates (attn.hpp, "Aliasing" and "Sizes").
///
/// **Overlap.** memory_of(m) describes the elements a matrix, a block or a strided vector may
/// touch: its first element, its rows, the contiguous entries of a row and the stride between
/// rows. overlap(a, b) says whether two such descriptions share an element, exactly: two column
/// blocks of one matrix, [n x 4] side by side, span interleaved bytes but share nothing, and
/// are not refused. require_apart() is the check of an `_into` function: no two outputs share
/// memory (one would overwrite the other) and no output shares memory with an input (it would be
/// overwritten, or freed by a resize, while still being read).
///
/// **Sizes.** An element count is a product of sizes the caller chose (d_model^2, n_q n_k,
/// B n n). ElementCount adds such products with every step checked, so a size like 2^40 is
/// named in a std::invalid_argument instead of overflowing Index (undefined behaviour) or
/// reaching the allocator. require_fits_in_memory() then refuses, before anything is allocated,
/// what needs more bytes than the machine's physical memory: on Linux an allocation that large
/// may "succeed" (overcommit) and the process be killed when it touches the pages, so catching
/// std::bad_alloc would not be enough.
#pragma once

#include "attn/core/matrix.hpp"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace attn {

// ---- Overlap ---------------------------------------------------------------------------------

/// The elements a tensor may touch, row by row: `rows` runs of `cols` contiguous elements of
/// `scalar` bytes each, the runs `stride` elements apart. Empty (data == nullptr) for a tensor
/// with no element. A row-major matrix or block is its rows; a column-major one its columns; a
/// vector with an inner stride is `size` runs of one element.
struct MemoryRange {
  const std::byte* data = nullptr;  ///< the first element's first byte
  Index rows = 0;                   ///< runs of contiguous elements
  Index cols = 0;                   ///< elements per run
  Index stride = 0;                 ///< elements from the start of one run to the next
  Index scalar = 0;                 ///< bytes per element

  bool empty() const { return data == nullptr; }
  /// One past the last byte: [data, end()) holds every element (and the gaps between runs).
  const std::byte* end() const { return data + ((rows - 1) * stride + cols) * scalar; }
};

/// The memory of a matrix, a view (Eigen::Ref, Map), a block or a vector, any scalar type.
template <typename M>
MemoryRange memory_of(const M& m) {
  if (m.size() == 0) return {};
  const auto* data = reinterpret_cast<const std::byte*>(m.data());
  constexpr auto scalar = static_cast<Index>(sizeof(typename M::Scalar));
  if constexpr (M::IsVectorAtCompileTime) {
    // One row or one column: `size` elements, innerStride() apart.
    if (m.innerStride() == 1) return {data, 1, m.size(), m.size(), scalar};
    return {data, m.size(), 1, m.innerStride(), scalar};
  } else {
    // Runs along the inner dimension (a row when row-major), outerStride() apart.
    const Index runs = M::IsRowMajor ? m.rows() : m.cols();
    const Index run = M::IsRowMajor ? m.cols() : m.rows();
    if (m.innerStride() == 1) return {data, runs, run, m.outerStride(), scalar};
    // Strided in both directions (no tensor of the library is): the whole span, conservatively.
    const Index span = (runs - 1) * m.outerStride() + (run - 1) * m.innerStride() + 1;
    return {data, 1, span, span, scalar};
  }
}

namespace detail {
/// overlap() once the spans are known to overlap: the element-by-element part.
bool overlap_within_spans(const MemoryRange& a, const MemoryRange& b);
}  // namespace detail

/// Whether a and b share at least one byte of their elements. Exact for two tensors of one
/// scalar type and one stride (blocks of one matrix); otherwise whether their spans
/// [data, end()) overlap, which errs on the side of refusing. Inline up to the comparison of
/// the spans, which settles the usual case (separate allocations) in a few instructions: the
/// backward passes of a training step make this check tens of thousands of times.
inline bool overlap(const MemoryRange& a, const MemoryRange& b) {
  if (a.empty() || b.empty()) return false;
  // Compared as integers, which orders addresses in different allocations too.
  const auto a_first = reinterpret_cast<std::uintptr_t>(a.data);
  const auto b_first = reinterpret_cast<std::uintptr_t>(b.data);
  if (a_first >= reinterpret_cast<std::uintptr_t>(b.end()) ||
      b_first >= reinterpret_cast<std::uintptr_t>(a.end())) {
    return false;
  }
  return detail::overlap_within_spans(a, b);
}

/// A tensor's name as a message gives it ("dQ", "result.out") with its memory.
struct NamedMemory {
  std::string_view name;
  MemoryRange memory;
};

/// Throws std::invalid_argument("<where>: ...") when two of `outputs` overlap ("dQ and dK share
/// memory: ...") or an output overlaps one of `inputs` ("out shares memory with Q: ..."), naming
/// the first such pair. Every pair is compared once, at the call's entry: a few comparisons each.
void require_apart(std::string_view where, std::initializer_list<NamedMemory> outputs,
                   std::initializer_list<NamedMemory> inputs = {});

/// The first pair (i, j), in the order of `a`, where a[i] overlaps b[j]; nullopt when none
/// does. For lists of tensors (a model's and its gradients'): b is sorted once, so the cost is
/// O((|a| + |b|) log |b|) for tensors that do not overlap, not |a| |b| comparisons.
std::optional<std::pair<std::size_t, std::size_t>> first_overlap(std::span<const MemoryRange> a,
                                                                 std::span<const MemoryRange> b);

// ---- Sizes -----------------------------------------------------------------------------------

/// A count of elements, products and sums of caller-given sizes, each step checked against
/// Index's range (__builtin_mul_overflow / __builtin_add_overflow): once a step overflows the
/// count stays overflowed. A negative size overflows it too (it counts nothing real).
class ElementCount {
 public:
  ElementCount() = default;
  /// The elements of a [rows x cols] tensor, `copies` times.
  ElementCount(Index rows, Index cols, Index copies = 1) { add(rows, cols, copies); }
  /// `copies` times another count.
  ElementCount(const ElementCount& other, Index copies) { add(other, copies); }
  ElementCount(const ElementCount&) = default;
  ElementCount& operator=(const ElementCount&) = default;

  /// Adds `copies` tensors of [rows x cols].
  ElementCount& add(Index rows, Index cols, Index copies = 1);
  /// Adds another count (`copies` times).
  ElementCount& add(const ElementCount& other, Index copies = 1);

  /// Whether a product or a sum did not fit in Index.
  bool overflowed() const { return overflowed_; }
  /// The count; meaningful only when !overflowed().
  Index value() const { return value_; }
  /// The count in double, also when it overflowed: what a message says it would have needed.
  double estimate() const { return estimate_; }

 private:
  Index value_ = 0;
  double estimate_ = 0.0;
  bool overflowed_ = false;
};

/// The machine's physical memory in bytes (sysconf: pages times the page size), read once. The
/// largest std::uint64_t where the system does not say.
std::uint64_t physical_memory();

/// A number of bytes as the course writes it: "512 B", "23.4 GiB", "4.0 PiB" (binary units,
/// one decimal from KiB on).
std::string bytes_str(double bytes);

namespace detail {
/// Whether `count` elements of `scalar` bytes each fit in `available` bytes (false when count
/// overflowed), and the message's "needs ... ; this machine has ..." tail when they do not.
bool fits_in(const ElementCount& count, std::size_t scalar, std::uint64_t available);
std::string needs_str(const ElementCount& count, std::size_t scalar, std::uint64_t available,
                      std::string_view of_what);
}  // namespace detail

/// Throws std::invalid_argument("<where>: <sizes()> needs 4.4 PiB <of_what>; this machine has
/// 23.4 GiB") when `count` elements of `scalar` bytes each exceed the physical memory, or when
/// the count overflowed Index (the message adds "(more elements than an Index can count)").
/// `sizes` returns the sizes that asked for it ("d_model 1099511627776"), built only
/// on failure; `of_what` says what they are ("of parameters", "for the mask"). Call it before
/// allocating: a passing check is one comparison with a number read once.
template <typename F>
requires std::is_invocable_r_v<std::string, F&>
void require_fits_in_memory(std::string_view where, const ElementCount& count, std::size_t scalar,
                            const char* of_what, F&& sizes) {
  const std::uint64_t available = physical_memory();
  require(detail::fits_in(count, scalar, available), where,
          [&] { return sizes() + detail::needs_str(count, scalar, available, of_what); });
}

}  // namespace attn
