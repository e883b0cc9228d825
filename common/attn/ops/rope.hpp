/// @file
/// Rotary position embedding, RoPE (Su et al. 2021, "RoFormer"), as Llama, Mistral and most
/// decoders since use it. Nothing is added to the tokens: the queries and the keys of every head
/// are rotated, just before their dot product, by an angle proportional to their position.
///
/// A head's d features form d/2 pairs. Pair i of the token at position m turns by m theta_i,
///
///     [x']   [ cos(m theta_i)  -sin(m theta_i) ] [x]
///     [y'] = [ sin(m theta_i)   cos(m theta_i) ] [y],     theta_i = base^(-2i / d),
///
/// with chapter 07's frequencies (base 10000: theta_i is omega_i of the sinusoidal table for
/// d_model = d, bit for bit). A rotation by a and one by b multiply to one by b - a when the
/// first is transposed, so a query at position m and a key at position n score
///
///     (R(m) q) . (R(n) k) = q^T R(m)^T R(n) k = q^T R(n - m) k
///
/// which depends on m - n alone: moving both positions by the same amount leaves every score
/// as it was (to rounding). It is chapter 07's identity PE(pos + k) = R(k) PE(pos), used on q
/// and k instead of added to x.
///
/// **Two layouts pair the features differently**, and both are everywhere:
///   - interleaved: pairs (0, 1), (2, 3), ..., (2i, 2i + 1): the paper, Meta's original Llama
///     code, llama2.c, and chapter 07's sin/cos columns;
///   - halves: pairs (i, i + d/2): Hugging Face's `rotate_half` (GPT-NeoX, Llama in
///     transformers).
/// Pair i turns at theta_i in both, so each is the other with its features permuted
/// (rope_layout_permutation); weights trained in one layout need their q and k rows permuted
/// to run in the other. Rotating q in one layout and k in the other is a classic bug: the
/// scores then depend on m and n separately (chapter 11 shows what it does to them).
///
/// **Precision.** The table holds cos(m theta_i) and sin(m theta_i) computed in double and
/// rounded once to float, so every float entry is the float nearest the true value (to the C
/// library's cos and sin). Hugging Face computes m theta_i in float32, which at m = 4096 moves
/// the angle by up to about 1e-4 radians; scripts/fixtures/rope.py measures that recipe too
/// (d = 16: pairs off by 6.5e-5 of their length at m = 4095 and up to 1.3e-4 at 8190, against
/// at most 1.0e-7 with this table).
#pragma once

#include "attn/core/matrix.hpp"

#include <vector>

namespace attn {

/// Which features of a head are paired (above).
enum class RopeLayout : char {
  interleaved,  ///< (2i, 2i + 1): the paper, llama2.c
  halves,       ///< (i, i + d/2): Hugging Face's rotate_half
};

/// "interleaved" or "halves".
const char* rope_layout_name(RopeLayout layout);

/// cos(m theta_i) and sin(m theta_i) for positions m = 0 .. positions - 1 and pairs
/// i = 0 .. dim/2 - 1.
struct RopeTable {
  Index positions = 0;    ///< the positions covered: 0 .. positions - 1
  Index dim = 0;          ///< d, the features rotated per head (even)
  double base = 10000.0;  ///< theta_i = base^(-2i / d)
  MatrixD cos_d, sin_d;   ///< [positions x dim/2], in double
  Matrix cos, sin;        ///< [positions x dim/2], the same rounded once to float

  /// The table in the precision of T: cos/sin for float, cos_d/sin_d for double.
  template <Real T>
  const MatrixOf<T>& cos_of() const {
    if constexpr (std::is_same_v<T, float>)
      return cos;
    else
      return cos_d;
  }
  template <Real T>
  const MatrixOf<T>& sin_of() const {
    if constexpr (std::is_same_v<T, float>)
      return sin;
    else
      return sin_d;
  }
};

/// theta_i = base^(-2i / d) for i = 0 .. dim/2 - 1: [dim/2], in double. With base 10000 these
/// are sinusoidal_frequencies(dim) (chapter 07) to the last bit. Throws std::invalid_argument
/// unless dim is even and >= 2 and base > 1 is finite.
VectorD rope_frequencies(Index dim, double base = 10000.0);

/// The table for positions 0 .. positions - 1 (angles m theta_i in double, cos and sin in
/// double, then rounded once to float). Throws std::invalid_argument for positions < 1, as
/// rope_frequencies() for dim and base, and, before allocating, for a table the machine
/// cannot hold (core/memory.hpp).
RopeTable rope_table(Index positions, Index dim, double base = 10000.0);

struct RopeOptions {
  RopeLayout layout = RopeLayout::interleaved;
  /// The position of row 0; row r is the token at first_position + r. Decoding one token
  /// rotates its single row at the token's own position.
  Index first_position = 0;
  /// x holds this many heads side by side, each `dim` wide: [n x heads * dim], head h in
  /// columns [h dim, (h + 1) dim), as multi-head attention keeps them (multi_head.hpp).
  Index heads = 1;
};

/// Rotates x [n x heads * dim] in place: pair i of row r by (first_position + r) theta_i, in
/// every head. x may be a column block of a bigger matrix. Throws std::invalid_argument naming
/// the shapes unless x has heads * table.dim columns, for heads < 1, for first_position < 0,
/// and for rows whose positions reach past the table ("positions 4094 .. 4096 are beyond the
/// RoPE table of 4096 positions (0 .. 4095)"), before changing anything.
template <Real T>
void rope_inplace(Eigen::Ref<MatrixOf<T>> x, const RopeTable& table, const RopeOptions& opts = {});

/// The same on a copy: returns the rotated [n x heads * dim].
template <Real T>
MatrixOf<T> rope(const InView<T>& x, const RopeTable& table, const RopeOptions& opts = {});

/// The backward pass of rope(): each pair is turned back, dx = R(m theta_i)^T dy, a rotation
/// by -m theta_i (a rotation's transpose is its inverse, so RoPE passes the gradient's length
/// through unchanged). In place on dy [n x heads * dim], with the forward's table and options;
/// it checks as rope_inplace().
template <Real T>
void rope_backward_inplace(Eigen::Ref<MatrixOf<T>> dy, const RopeTable& table,
                           const RopeOptions& opts = {});

/// The same on a copy: returns dx [n x heads * dim].
template <Real T>
MatrixOf<T> rope_backward(const InView<T>& dy, const RopeTable& table,
                          const RopeOptions& opts = {});

/// Where the interleaved layout's feature c sits in the halves layout: [dim] entries, 2i -> i
/// and 2i + 1 -> i + dim/2. For x in the interleaved layout and y with y(:, perm[c]) = x(:, c),
///
///     rope(y, halves)(:, perm[c]) == rope(x, interleaved)(:, c)      bit for bit
///
/// since each pair meets the same two numbers and the same angle. Throws std::invalid_argument
/// unless dim is even and >= 2.
std::vector<Index> rope_layout_permutation(Index dim);

}  // namespace attn
