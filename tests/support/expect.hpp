// expect.hpp: the small checks several suites make, written once.
#pragma once

#include "attn/core/matrix.hpp"  // Eigen, through the course's one include of it

#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace attn_test {

/// What `f()` throws as std::invalid_argument, or "(no exception)": a test then asserts on the
/// message, which must name the function and the shapes.
template <typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no exception)";
}

/// Bit-for-bit equality of two matrices, NaN included (NaN != NaN under ==): the promises the
/// masks make ("a blocked key changes nothing") are exact, not approximate.
template <typename A, typename B>
bool identical(const Eigen::DenseBase<A>& a, const Eigen::DenseBase<B>& b) {
  using Scalar = typename A::Scalar;
  static_assert(std::is_same_v<Scalar, typename B::Scalar>, "compare like with like");
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  if (a.size() == 0) return true;      // an empty block's data() may be null: nothing to compare
  const auto ea = a.derived().eval();  // contiguous copies, so memcmp sees every element
  const auto eb = b.derived().eval();
  return std::memcmp(ea.data(), eb.data(), sizeof(Scalar) * static_cast<std::size_t>(ea.size())) ==
         0;
}

/// A mask written out as the notes draw it, 1 = may attend: allowed_from_rows({{1, 0}, {1, 1}}).
/// Its type is attn::AllowedMask (masks.hpp).
inline Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> allowed_from_rows(
    std::initializer_list<std::initializer_list<int>> rows) {
  Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> m(
      static_cast<attn::Index>(rows.size()), static_cast<attn::Index>(rows.begin()->size()));
  attn::Index i = 0;
  for (const auto& r : rows) {
    attn::Index j = 0;
    for (int v : r) m(i, j++) = v != 0;
    ++i;
  }
  return m;
}

}  // namespace attn_test
