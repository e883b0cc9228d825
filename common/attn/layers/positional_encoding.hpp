/// @file
/// The sinusoidal position vectors of "Attention Is All You Need" (chapter 07 explains them):
///
///     PE(pos, 2i)   = sin(omega_i pos)
///     PE(pos, 2i+1) = cos(omega_i pos),    omega_i = 10000^(-2i / d_model),  i = 0 .. d_model/2 -
///     1
///
/// Each pair of columns (2i, 2i+1) is a point on a circle turning at its own frequency, from
/// one radian per position (i = 0) down to almost 1/10000 of that.
///
/// Moving every position by k is one fixed linear map, whatever the position: from
/// sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b, with
/// a = omega_i pos and b = omega_i k,
///
///     [ PE(pos+k, 2i)   ]   [  cos(omega_i k)   sin(omega_i k) ] [ PE(pos, 2i)   ]
///     [ PE(pos+k, 2i+1) ] = [ -sin(omega_i k)   cos(omega_i k) ] [ PE(pos, 2i+1) ]
///
/// and the 2 x 2 matrix holds PE(k, 2i+1) on the diagonal and +-PE(k, 2i) off it.
/// relative_rotation() stacks these blocks into R(k) [d_model x d_model].
#pragma once

#include "attn/core/matrix.hpp"

#include <vector>

namespace attn {

/// PE for positions 0 .. positions-1: [positions x d_model]. Angles are computed in double and
/// each value rounded once to float, so every entry is the float nearest the true value (to
/// the C library's sin/cos). An odd d_model ends with a lone sin column. Throws for
/// positions < 0 or d_model < 1, and, before allocating, for a table the machine cannot hold
/// (as every function here: core/memory.hpp).
Matrix sinusoidal_encoding(Index positions, Index d_model);

/// The same table in double, before the rounding: sinusoidal_encoding() is exactly this cast
/// to float. For reference arithmetic (the rotation identity in double, chapter 07).
MatrixD sinusoidal_encoding_d(Index positions, Index d_model);

/// PE at any integer positions, negative ones too (the formula does not care), in double:
/// [positions.size() x d_model], row r = PE(positions[r]). Throws for d_model < 1.
MatrixD sinusoidal_encoding_at(const std::vector<Index>& positions, Index d_model);

/// The frequencies omega_i = 10000^(-2i / d_model), one per column pair (2i, 2i+1):
/// [d_model/2] entries, rounded up for an odd d_model (its lone sin column has a frequency too).
/// Column c of the table turns at omega_{c / 2}; its wavelength is 2 pi / omega in positions.
/// Throws for d_model < 1.
VectorD sinusoidal_frequencies(Index d_model);

/// R(k) [d_model x d_model], the rotation that moves every position by k:
///
///     PE(pos + k)^T = R(k) PE(pos)^T   for every pos    (PE(pos) as a column vector)
///
/// or, with tokens as rows, PE(pos + k) = PE(pos) R(k)^T. Block-diagonal, one 2 x 2 block per
/// pair i, read off the position vector of k itself (computed in double, as the table is):
///
///     rows/columns 2i, 2i+1:  [[ PE(k, 2i+1),  PE(k, 2i)   ],
///                              [ -PE(k, 2i),   PE(k, 2i+1) ]]
///
/// Any integer k, negative too (R(-k) = R(k)^T, the inverse). Orthogonal with determinant 1.
/// In the plane of a pair drawn as (x, y) = (sin, cos) it turns clockwise by omega_i k; with
/// the pair read as (cos, sin) it is the usual counter-clockwise rotation by omega_i k.
/// Throws for an odd d_model (the lone sin column has no cos partner to rotate with) or
/// d_model < 2.
MatrixD relative_rotation(Index k, Index d_model);

}  // namespace attn
