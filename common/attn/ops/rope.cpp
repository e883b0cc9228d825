// rope.cpp: the RoPE table (double angles, rounded once) and the rotation of q and k in both
// layouts, forward and backward, through one pair kernel.
#include "attn/ops/rope.hpp"

#include "attn/core/memory.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

namespace attn {

namespace {

void require_rope_dim(Index dim, const char* where) {
  require(dim >= 2 && dim % 2 == 0, where, [&] {
    return "dim is " + std::to_string(dim) + ": it must be even and >= 2 (RoPE turns pairs)";
  });
}

void require_base(double base, const char* where) {
  require(std::isfinite(base) && base > 1.0, where,
          [&] { return "base is " + std::to_string(base) + ": it must be finite and > 1"; });
}

// Checks x [n x heads * dim] against the table and the options, before anything is touched.
template <Real T>
void check_rope(const Eigen::Ref<MatrixOf<T>>& x, const RopeTable& table, const RopeOptions& opts,
                const char* where) {
  // All four matrices: the fields are public, and rotate() reads cos_of<T>() and sin_of<T>().
  const auto fits = [&](const auto& m) {
    return m.rows() == table.positions && m.cols() == table.dim / 2;
  };
  require(table.dim >= 2 && table.dim % 2 == 0 && fits(table.cos_d) && fits(table.sin_d) &&
              fits(table.cos) && fits(table.sin),
          where, "the RoPE table is empty or inconsistent: make it with rope_table()");
  require_at_least_one(opts.heads, where, "heads");
  // Divided rather than heads * dim, which overflows (undefined) for an absurd heads.
  constexpr Index kMaxIndex = std::numeric_limits<Index>::max();
  require(x.cols() % table.dim == 0 && x.cols() / table.dim == opts.heads, where, [&] {
    return "x is " + shape_str(x) + " but " + std::to_string(opts.heads) +
           " heads of the table's " + std::to_string(table.dim) + " features make " +
           (opts.heads <= kMaxIndex / table.dim
                ? std::to_string(opts.heads * table.dim)
                : std::string("more than ") + std::to_string(kMaxIndex)) +
           " columns";
  });
  require(opts.first_position >= 0, where, [&] {
    return "first_position is " + std::to_string(opts.first_position) + ": it must be >= 0";
  });
  require(opts.first_position <= table.positions - x.rows(), where, [&] {
    // The rows' positions, without adding to a first_position so large that it would overflow.
    const std::string rows = opts.first_position <= kMaxIndex - x.rows()
                                 ? std::to_string(opts.first_position) + " .. " +
                                       std::to_string(opts.first_position + x.rows() - 1)
                                 : "from " + std::to_string(opts.first_position) + " on";
    return "positions " + rows + " are beyond the RoPE table of " +
           std::to_string(table.positions) + " positions (0 .. " +
           std::to_string(table.positions - 1) + ")";
  });
}

// Turns every pair of every head of x by +angle (sign = 1) or -angle (sign = -1):
// x' = x cos - y sin, y' = x sin + y cos, with sin negated for the backward. Both layouts run
// this same arithmetic on each pair; they differ only in which two columns form pair i.
template <Real T>
void rotate(Eigen::Ref<MatrixOf<T>> x, const RopeTable& table, const RopeOptions& opts, T sign) {
  const Index half = table.dim / 2;
  const MatrixOf<T>& cos_m = table.cos_of<T>();  // [positions x dim/2]
  const MatrixOf<T>& sin_m = table.sin_of<T>();  // [positions x dim/2]
  const bool interleaved = opts.layout == RopeLayout::interleaved;
  for (Index r = 0; r < x.rows(); ++r) {
    const Index m = opts.first_position + r;  // this row's position
    for (Index h = 0; h < opts.heads; ++h) {
      const Index head = h * table.dim;  // the head's first column
      for (Index i = 0; i < half; ++i) {
        const Index a = head + (interleaved ? 2 * i : i);             // x of pair i
        const Index b = head + (interleaved ? 2 * i + 1 : i + half);  // y of pair i
        const T c = cos_m(m, i), s = sign * sin_m(m, i);
        const T xa = x(r, a), yb = x(r, b);
        x(r, a) = xa * c - yb * s;
        x(r, b) = xa * s + yb * c;
      }
    }
  }
}

}  // namespace

const char* rope_layout_name(RopeLayout layout) {
  return layout == RopeLayout::interleaved ? "interleaved" : "halves";
}

VectorD rope_frequencies(Index dim, double base) {
  require_rope_dim(dim, "rope_frequencies");
  require_base(base, "rope_frequencies");
  VectorD theta(dim / 2);  // [dim/2]
  for (Index i = 0; i < theta.size(); ++i) {
    // The expression of positional_encoding.cpp's column_frequency, so that base 10000 gives
    // chapter 07's omega_i to the last bit.
    theta(i) = std::pow(base, -static_cast<double>(2 * i) / static_cast<double>(dim));
  }
  return theta;
}

RopeTable rope_table(Index positions, Index dim, double base) {
  require_at_least_one(positions, "rope_table", "positions");
  require_rope_dim(dim, "rope_table");
  require_base(base, "rope_table");
  // cos and sin in double (8 bytes each) and in float (4 each): 24 bytes per entry.
  require_fits_in_memory("rope_table", ElementCount(positions, dim / 2), 24, "for the table", [&] {
    return "positions " + std::to_string(positions) + " and dim " + std::to_string(dim);
  });
  const VectorD theta = rope_frequencies(dim, base);  // [dim/2]
  RopeTable t{positions, dim, base, MatrixD(positions, dim / 2), MatrixD(positions, dim / 2),
              {},        {}};
  for (Index m = 0; m < positions; ++m) {
    for (Index i = 0; i < dim / 2; ++i) {
      const double angle = static_cast<double>(m) * theta(i);  // one rounded product
      t.cos_d(m, i) = std::cos(angle);
      t.sin_d(m, i) = std::sin(angle);
    }
  }
  t.cos = t.cos_d.cast<float>();  // one rounding per entry
  t.sin = t.sin_d.cast<float>();
  return t;
}

template <Real T>
void rope_inplace(Eigen::Ref<MatrixOf<T>> x, const RopeTable& table, const RopeOptions& opts) {
  check_rope<T>(x, table, opts, "rope");
  rotate<T>(x, table, opts, T{1});
}

template <Real T>
MatrixOf<T> rope(const InView<T>& x, const RopeTable& table, const RopeOptions& opts) {
  MatrixOf<T> y = x;  // [n x heads * dim]
  rope_inplace<T>(y, table, opts);
  return y;
}

template <Real T>
void rope_backward_inplace(Eigen::Ref<MatrixOf<T>> dy, const RopeTable& table,
                           const RopeOptions& opts) {
  check_rope<T>(dy, table, opts, "rope_backward");
  rotate<T>(dy, table, opts, T{-1});  // R^T = R(-angle)
}

template <Real T>
MatrixOf<T> rope_backward(const InView<T>& dy, const RopeTable& table, const RopeOptions& opts) {
  MatrixOf<T> dx = dy;  // [n x heads * dim]
  rope_backward_inplace<T>(dx, table, opts);
  return dx;
}

std::vector<Index> rope_layout_permutation(Index dim) {
  require_rope_dim(dim, "rope_layout_permutation");
  std::vector<Index> perm(static_cast<std::size_t>(dim));
  for (Index i = 0; i < dim / 2; ++i) {
    perm[static_cast<std::size_t>(2 * i)] = i;                // x of pair i
    perm[static_cast<std::size_t>(2 * i + 1)] = i + dim / 2;  // y of pair i
  }
  return perm;
}

#define ATTN_INSTANTIATE_ROPE(T)                                                                \
  template void rope_inplace<T>(Eigen::Ref<MatrixOf<T>>, const RopeTable&, const RopeOptions&); \
  template MatrixOf<T> rope<T>(const InView<T>&, const RopeTable&, const RopeOptions&);         \
  template void rope_backward_inplace<T>(Eigen::Ref<MatrixOf<T>>, const RopeTable&,             \
                                         const RopeOptions&);                                   \
  template MatrixOf<T> rope_backward<T>(const InView<T>&, const RopeTable&, const RopeOptions&);
ATTN_INSTANTIATE_ROPE(float)
ATTN_INSTANTIATE_ROPE(double)
#undef ATTN_INSTANTIATE_ROPE

}  // namespace attn
