/// @file
/// The course's matrix types, shape checks and the one comparison every chapter makes.
///
/// Storage is row-major, like NumPy and PyTorch, so a [n x d] matrix of token vectors keeps
/// each token contiguous and an .npy file maps onto it without a transpose. (Eigen's default
/// is column-major; every type below overrides that on purpose.)
#pragma once

// GCC 12 compiling for AVX-512 reports '__Y' as used uninitialised inside its own intrinsics
// header, wherever Eigen's 16-lane exp, min, max or reductions are inlined (GCC bug 105593, a
// false positive fixed in GCC 13): the header's _mm512_undefined_* idiom, not our code. The
// diagnostic pragma covers the lines of <immintrin.h> only, so it must be the first to include
// it (matrix.hpp comes before Eigen in every file of the course); a real uninitialised read in
// the course is still reported, and the developers' AVX-512 build makes it an error.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13 && defined(__AVX512F__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include <Eigen/Core>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace attn {

using Index = Eigen::Index;

/// The two scalar types the layers run in: float, as PyTorch trains, and double, for the
/// training chapter's gradient checks by central differences (attn.hpp, "Two precisions").
template <typename T>
concept Real = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// A row-major matrix, a row vector [1 x n] and a read-only view of either scalar type.
template <typename T>
using MatrixOf = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using RowVectorOf = Eigen::Matrix<T, 1, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ViewOf = Eigen::Ref<const MatrixOf<T>>;

/// A view parameter of a function template whose scalar type is deduced from another argument
/// (the layer), so that a Matrix, a block or an expression converts to it as to MatrixView:
/// `template <Real T> MatrixOf<T> linear_forward(const LinearOf<T>&, const InView<T>& x)`.
template <typename T>
using InView = std::type_identity_t<ViewOf<T>>;

using Matrix = MatrixOf<float>;
using MatrixD = MatrixOf<double>;
using Vector = Eigen::VectorXf;  // a column vector [n x 1]
using VectorD = Eigen::VectorXd;
using RowVector = RowVectorOf<float>;  // a row vector [1 x n]
using RowVectorD = RowVectorOf<double>;

/// A read-only view of a row-major float matrix or of a block of one (rows contiguous), so a
/// head's column block Q.middleCols(h * d_k, d_k) or a batch element X[b] is read in place.
using MatrixView = ViewOf<float>;
using MatrixViewD = ViewOf<double>;

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

// ---- require: every public function checks its arguments with it --------------------------------
//
// Eigen's own size asserts vanish under NDEBUG, so every public function checks its shapes with
// require() before touching data, and throws std::invalid_argument("<where>: <what>").
//
// The message is built only when the check fails. A fixed message is a string literal (the
// const char* overload: nothing allocated); a message with numbers in it is a lambda that
// returns it, called on failure only:
//
//   require(Q.cols() == K.cols(), "attention", [&] {
//     return "Q is " + shape_str(Q) + " but K is " + shape_str(K) + ": ...";
//   });
//
// Building "Q is [4 x 16] ..." eagerly cost more than the attention itself at n = 4, d = 16
// (issue 10: 837 ns per attention_into, 300 ns without the strings).

/// Throws std::invalid_argument("<where>: <what>"). Out of the way of the checks that pass.
[[noreturn]] inline void require_failed(std::string_view where, std::string_view what) {
  std::string message;
  message.reserve(where.size() + 2 + what.size());
  message.append(where).append(": ").append(what);
  throw std::invalid_argument(message);
}

/// A fixed message, e.g. require(ok, "attention", "the scale is not finite").
inline void require(bool ok, std::string_view where, const char* what) {
  if (!ok) [[unlikely]]
    require_failed(where, what);
}

/// A message already built (kept for callers that have one; prefer the two forms around it).
inline void require(bool ok, std::string_view where, const std::string& what) {
  if (!ok) [[unlikely]]
    require_failed(where, what);
}

/// A message built on failure only: `what` is called (and allocates) only when !ok.
template <typename F>
requires std::is_invocable_r_v<std::string, F&>
void require(bool ok, std::string_view where, F&& what) {
  if (!ok) [[unlikely]]
    require_failed(where, what());
}

/// A size that must be at least 1 (d_model, heads, d_ff, ...), named as such when it is not:
/// "<where>: <name> is 0: it must be at least 1", rather than an error about what the zero
/// breaks further on ("1 heads do not divide d_model = 0").
inline void require_at_least_one(Index n, std::string_view where, const char* name) {
  require(n >= 1, where, [&] {
    return std::string(name) + " is " + std::to_string(n) + ": it must be at least 1";
  });
}

// ---- Comparing results ------------------------------------------------------------------------

/// max |a - b| over all entries, as a double: how far apart two results are (0 means equal to
/// the last bit, NaN if either holds a NaN; 0 for two empty matrices). Any two Eigen matrices or
/// arrays of the same shape, views and blocks too; throws std::invalid_argument naming both
/// shapes otherwise. Two float matrices are subtracted in float, as `(a - b).cwiseAbs().maxCoeff()`
/// in the chapters does, so a printed difference stays the same digits; other scalar types, or
/// two different ones, are compared in double.
template <typename A, typename B>
double max_abs_diff(const Eigen::DenseBase<A>& a, const Eigen::DenseBase<B>& b) {
  require(a.rows() == b.rows() && a.cols() == b.cols(), "max_abs_diff", [&] {
    return "a is " + shape_str(a.rows(), a.cols()) + " but b is " + shape_str(b.rows(), b.cols()) +
           ": they must have the same shape";
  });
  if (a.size() == 0) return 0.0;
  using SA = typename A::Scalar;
  using SB = typename B::Scalar;
  if constexpr (std::is_same_v<SA, SB> && std::is_floating_point_v<SA>) {
    const SA worst =
        (a.derived().array() - b.derived().array()).abs().template maxCoeff<Eigen::PropagateNaN>();
    return static_cast<double>(worst);
  } else {
    return (a.derived().template cast<double>().array() -
            b.derived().template cast<double>().array())
        .abs()
        .template maxCoeff<Eigen::PropagateNaN>();
  }
}

}  // namespace attn
