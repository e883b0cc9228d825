/// @file
/// Rows kept one token at a time, for generation: the storage under every KV cache of the
/// course (decode_attention.hpp keeps K and V in two of them, latent attention its latent c and
/// its RoPE key).
///
/// A cache has room for `capacity` rows of `width` numbers, allocated once. Each generated
/// token appends its row; the row of the token at position p is read back by p:
///
///     plain:    slot(p) = p                  append past capacity throws (never a silent drop)
///     rolling:  slot(p) = p mod capacity     once full, each append overwrites the oldest row
///
/// A rolling cache is what a sliding window of W keys needs (Mistral): capacity W, and the
/// query at position p reads positions p - W + 1 .. p, exactly the W rows it holds, wherever
/// they sit in the ring. segments() gives the rows held in position order as at most two
/// contiguous blocks (the older part at the end of the ring, then the newer part at its start),
/// so a kernel reads them without a copy and in the same order as it would read a plain cache.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/memory.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

namespace attn {

template <Real T>
class RowCacheOf {
 public:
  RowCacheOf() = default;

  /// Room for `capacity` rows of `width`, allocated now. Throws std::invalid_argument unless
  /// both are >= 1, and, before allocating, for a cache the machine cannot hold.
  RowCacheOf(Index capacity, Index width, bool rolling = false) : rolling_(rolling) {
    require_at_least_one(capacity, "RowCache", "capacity");
    require_at_least_one(width, "RowCache", "width");
    require_fits_in_memory(
        "RowCache", ElementCount(capacity, width), sizeof(T), "for the cache", [&] {
          return "capacity " + std::to_string(capacity) + " and width " + std::to_string(width);
        });
    rows_.setZero(capacity, width);  // [capacity x width]
  }

  Index capacity() const { return rows_.rows(); }
  Index width() const { return rows_.cols(); }
  bool rolling() const { return rolling_; }
  /// Rows held now: min(tokens appended, capacity).
  Index size() const { return held_; }
  /// The position the next appended row will have: how many rows were ever appended.
  Index next_position() const { return seen_; }
  /// The position of the oldest row held (0 until a rolling cache wraps).
  Index first_position() const { return seen_ - held_; }
  /// The bytes allocated for the rows: capacity * width * sizeof(T), whatever is held.
  std::size_t bytes() const { return static_cast<std::size_t>(rows_.size()) * sizeof(T); }

  /// Appends rows [m x width] for positions next_position() .. next_position() + m - 1.
  /// Throws std::invalid_argument, before changing anything, for another width, or when a
  /// plain cache has no room left for them ("RowCache: 3 rows do not fit: 14 of 16 held").
  /// A rolling cache keeps the last `capacity` of everything appended.
  void append(const InView<T>& rows) {
    require(rows.cols() == width(), "RowCache::append", [&] {
      return "rows are " + shape_str(rows) + " but the cache holds rows of width " +
             std::to_string(width());
    });
    require(rolling_ || rows.rows() <= capacity() - held_, "RowCache::append", [&] {
      return std::to_string(rows.rows()) + " rows do not fit: " + std::to_string(held_) + " of " +
             std::to_string(capacity()) + " held (a plain cache never drops a row)";
    });
    for (Index r = 0; r < rows.rows(); ++r) {
      rows_.row(slot(seen_)) = rows.row(r);
      ++seen_;
      if (held_ < capacity()) ++held_;
    }
  }

  /// The row of the token at `position` [1 x width]. Throws std::invalid_argument unless
  /// first_position() <= position < next_position().
  auto row(Index position) const {
    require(position >= first_position() && position < seen_, "RowCache::row", [&] {
      return "position " + std::to_string(position) + " is not held: positions " +
             std::to_string(first_position()) + " .. " + std::to_string(seen_ - 1) + " are";
    });
    return rows_.row(slot(position));
  }

  /// The rows held, in position order, as two contiguous blocks: `older` then `newer`
  /// ([a x width] and [b x width], a + b = size()). For a plain cache, or a rolling one that
  /// has not wrapped, `older` is everything and `newer` is empty.
  struct Segments {
    ViewOf<T> older, newer;
  };
  Segments segments() const {
    const Index start = held_ == 0 ? 0 : slot(first_position());  // the oldest row's slot
    const Index older = std::min(held_, capacity() - start);      // from it to the ring's end
    return {rows_.middleRows(start, older), rows_.topRows(held_ - older)};
  }

  /// The storage itself [capacity x width], in slot order: what a figure of the ring draws.
  const MatrixOf<T>& storage() const { return rows_; }

  /// Empties the cache for a new sequence: positions start again at 0. The memory stays.
  void clear() {
    held_ = 0;
    seen_ = 0;
  }

 private:
  Index slot(Index position) const { return rolling_ ? position % capacity() : position; }

  MatrixOf<T> rows_;  // [capacity x width]
  Index held_ = 0;    // rows held
  Index seen_ = 0;    // rows ever appended: the next row's position
  bool rolling_ = false;
};
using RowCache = RowCacheOf<float>;
using RowCacheD = RowCacheOf<double>;

}  // namespace attn
