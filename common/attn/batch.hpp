/// @file
/// A batch of equally shaped matrices, laid out exactly like a C-contiguous PyTorch tensor.
///
///   Batch X(B, n, d)        PyTorch: x = torch.empty(B, n, d)
///   X[b]                    x[b]           a [n x d] view, no copy
///   X.data()                x.view(B * n, d)
///
/// The B matrices are stacked as one row-major [B*n x d] matrix, so element (b, i, c) sits at
/// offset (b*n + i)*d + c, the same as PyTorch's strides (n*d, d, 1). A .npy file of shape
/// [B, n, d] maps onto it without a copy, and X[b] is a block of whole rows: contiguous, and
/// usable wherever the library takes a MatrixView (attention, the column blocks of heads).
///
/// BatchOf<bool> holds masks: a [B, n_q, n_k] stack of AllowedMask matrices (masks.hpp).
#pragma once

#include "attn/matrix.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace attn {

template <typename T>
class BatchOf {
 public:
  using Storage = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  BatchOf() = default;
  /// B matrices of [rows x cols], every element zero (false for masks).
  BatchOf(Index batch, Index rows, Index cols) : batch_(batch), rows_(rows) {
    require(batch >= 0 && rows >= 0 && cols >= 0, "BatchOf",
            "negative shape [" + std::to_string(batch) + ", " + std::to_string(rows) + ", " +
                std::to_string(cols) + "]");
    data_ = Storage::Zero(batch * rows, cols);  // [B*rows x cols]
  }
  /// One matrix as a batch of one: [1, rows, cols].
  explicit BatchOf(const Storage& m) : batch_(1), rows_(m.rows()), data_(m) {}

  Index batch() const { return batch_; }
  Index rows() const { return rows_; }
  Index cols() const { return data_.cols(); }

  /// Matrix b of the batch, [rows x cols], as a view into the shared buffer.
  auto operator[](Index b) { return data_.middleRows(checked(b) * rows_, rows_); }
  auto operator[](Index b) const { return data_.middleRows(checked(b) * rows_, rows_); }

  /// All B matrices stacked: [B*rows x cols], the tensor's .view(B * rows, cols).
  Storage& data() { return data_; }
  const Storage& data() const { return data_; }

  /// {B, rows, cols}, for .npy files and for messages.
  std::vector<std::size_t> shape() const {
    return {static_cast<std::size_t>(batch_), static_cast<std::size_t>(rows_),
            static_cast<std::size_t>(cols())};
  }
  /// "[2, 5, 512]": PyTorch's way of writing a tensor's shape, used in every message.
  std::string shape_str() const {
    return "[" + std::to_string(batch_) + ", " + std::to_string(rows_) + ", " +
           std::to_string(cols()) + "]";
  }

 private:
  Index checked(Index b) const {
    require(b >= 0 && b < batch_, "BatchOf",
            "index " + std::to_string(b) + " is outside a batch of " + std::to_string(batch_));
    return b;
  }

  Index batch_ = 0, rows_ = 0;
  Storage data_;
};

/// Activations: B float32 matrices, a [B, n, d] tensor.
using Batch = BatchOf<float>;

}  // namespace attn
