/// @file
/// --dump DIR, the chapter's intermediates as .npy files for inspection in NumPy:
///
///   >>> import numpy as np; W = np.load("dump/W_ax.npy")
#pragma once

#include "course/types.hpp"

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace course {

class Dumper {
 public:
  /// An empty `dir` disables the dumper: every call below then does nothing.
  explicit Dumper(std::filesystem::path dir = {});

  bool enabled() const { return !dir_.empty(); }

  /// Writes `DIR/NAME.npy` (float32, C order) and remembers the name for summary().
  void operator()(const std::string& name, const Matrix& m);
  void operator()(const std::string& name, const MatrixD& m);
  /// A batch as the 3-D array [B, rows, cols] (float32), as PyTorch would save the tensor.
  void operator()(const std::string& name, const Batch& x);
  /// A batch of masks as float32 [B, n_q, n_k]: 1 = may attend, 0 = blocked.
  void operator()(const std::string& name, const BatchOf<bool>& allowed);
  /// An N-d array, e.g. [B, n, d] written from B row-major [n x d] slices laid end to end.
  void operator()(const std::string& name, std::span<const std::size_t> shape,
                  std::span<const float> data);

  /// "wrote 12 arrays to dump/: W_ax, W_aa, ..." (empty when disabled or nothing written).
  std::string summary() const;

 private:
  std::filesystem::path dir_;
  std::vector<std::string> written_;
};

}  // namespace course
