/// @file
/// The course's matrix types and shape checks.
///
/// Storage is row-major, like NumPy and PyTorch, so a [n x d] matrix of token vectors keeps
/// each token contiguous and an .npy file maps onto it without a transpose. (Eigen's default
/// is column-major; every type below overrides that on purpose.)
#pragma once

#include <Eigen/Core>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace attn {

using Index = Eigen::Index;

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;       // a column vector [n x 1]
using VectorD = Eigen::VectorXd;
using RowVector = Eigen::RowVectorXf;  // a row vector [1 x n]

/// Token ids of a batch of sentences, [B x n]: one sentence per row, padded to a common n.
using TokenIds = Eigen::Matrix<int, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// "[4 x 2]": the shape as the course prints it everywhere.
inline std::string shape_str(Index rows, Index cols) {
  return "[" + std::to_string(rows) + " x " + std::to_string(cols) + "]";
}

template <typename Derived>
std::string shape_str(const Eigen::EigenBase<Derived>& m) {
  return shape_str(m.rows(), m.cols());
}

/// Throws std::invalid_argument("<where>: <what>") unless `ok`. Eigen's own size asserts vanish
/// under NDEBUG, so every public function checks its shapes with this before touching data.
inline void require(bool ok, std::string_view where, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(where) + ": " + what);
}

}  // namespace attn
