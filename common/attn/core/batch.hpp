/// @file
/// A batch of equally shaped matrices, laid out exactly like a C-contiguous PyTorch tensor.
///
///     Batch X(B, n, d)        PyTorch: x = torch.empty(B, n, d)
///     X[b]                    x[b]           a [n x d] view, no copy
///     X.data()                x.view(B * n, d)
///
/// The B matrices are stacked as one row-major [B*n x d] matrix, so element (b, i, c) sits at
/// offset (b*n + i)*d + c, the same as PyTorch's strides (n*d, d, 1). A .npy file of shape
/// [B, n, d] maps onto it without a copy, and X[b] is a block of whole rows: contiguous, and
/// usable wherever the library takes a MatrixView (attention, the column blocks of heads).
///
/// Invariants: data() has exactly batch() * rows() rows and cols() columns, which every function
/// taking a batch relies on when it reads X[b]. So the shape is set once, by the constructor
/// (which rejects a product that overflows Index), and data() hands out a fixed-shape view:
/// its values can be written, its shape cannot be changed (an Eigen::Map has no resize; Eigen
/// checks the sizes of an assignment to it in debug builds, as for any block).
///
/// X[b] on a temporary batch does not compile: the view would outlive the batch
/// (`padding_masks(ids)[0]` read freed memory as soon as the statement ended).
///
/// BatchOf<bool> holds masks: a [B, n_q, n_k] stack of AllowedMask matrices (masks.hpp).
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/memory.hpp"

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace attn {

template <typename T>
class BatchOf {
 public:
  using Storage = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  BatchOf() = default;
  /// B matrices of [rows x cols], every element zero (false for masks). Throws
  /// std::invalid_argument for a negative dimension, a size that overflows Index, or one that
  /// needs more bytes than the machine's physical memory (memory.hpp), before allocating.
  BatchOf(Index batch, Index rows, Index cols) : batch_(batch), rows_(rows) {
    require(batch >= 0 && rows >= 0 && cols >= 0, "BatchOf",
            [&] { return "negative shape " + dims_str(batch, rows, cols); });
    // B * rows and then * cols in Index (signed: an overflow is undefined behaviour), checked
    // by division before they are multiplied.
    constexpr Index kMax = std::numeric_limits<Index>::max();
    require((rows == 0 || batch <= kMax / rows) && (cols == 0 || batch * rows <= kMax / cols),
            "BatchOf", [&] {
              return "the shape " + dims_str(batch, rows, cols) +
                     " has more elements than an Index can count (B * rows * cols overflows)";
            });
    require_fits_in_memory("BatchOf", ElementCount(batch * rows, cols), sizeof(T), "for the batch",
                           [&] { return "the shape " + dims_str(batch, rows, cols); });
    data_ = Storage::Zero(batch * rows, cols);  // [B*rows x cols]
  }
  /// One matrix as a batch of one: [1, rows, cols].
  explicit BatchOf(const Storage& m) : batch_(1), rows_(m.rows()), data_(m) {}

  Index batch() const { return batch_; }
  Index rows() const { return rows_; }
  Index cols() const { return data_.cols(); }

  /// Matrix b of the batch, [rows x cols], as a view into the shared buffer.
  auto operator[](Index b) & { return data_.middleRows(checked(b) * rows_, rows_); }
  auto operator[](Index b) const& { return data_.middleRows(checked(b) * rows_, rows_); }
  /// A view of a temporary batch would dangle at the end of the statement: copy the batch to a
  /// variable first (`const AllowedBatch m = padding_masks(ids); m[0]`).
  void operator[](Index b) const&& = delete;

  /// All B matrices stacked: [B*rows x cols], the tensor's .view(B * rows, cols). The writable
  /// form is a fixed-shape view (see the file comment): `X.data() = ...` and
  /// `X.data().setZero()` write the values, and nothing can resize the storage under X[b].
  Eigen::Map<Storage> data() { return {data_.data(), data_.rows(), data_.cols()}; }
  const Storage& data() const { return data_; }

  /// {B, rows, cols}, for .npy files and for messages.
  std::vector<std::size_t> shape() const {
    return {static_cast<std::size_t>(batch_), static_cast<std::size_t>(rows_),
            static_cast<std::size_t>(cols())};
  }
  /// "[2, 5, 512]": PyTorch's way of writing a tensor's shape, used in every message.
  std::string shape_str() const { return dims_str(batch_, rows_, cols()); }

 private:
  static std::string dims_str(Index batch, Index rows, Index cols) {
    return "[" + std::to_string(batch) + ", " + std::to_string(rows) + ", " + std::to_string(cols) +
           "]";
  }

  Index checked(Index b) const {
    require(b >= 0 && b < batch_, "BatchOf", [&] {
      return "index " + std::to_string(b) + " is outside a batch of " + std::to_string(batch_);
    });
    return b;
  }

  Index batch_ = 0, rows_ = 0;
  Storage data_;
};

/// Activations: B float32 matrices, a [B, n, d] tensor.
using Batch = BatchOf<float>;

}  // namespace attn
