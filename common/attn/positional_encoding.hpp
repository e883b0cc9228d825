/// @file
/// The sinusoidal position vectors of "Attention Is All You Need" (chapter 07 explains them):
///
///   PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
///   PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model)),   i = 0 .. d_model/2 - 1
///
/// Each pair of columns (2i, 2i+1) is a point on a circle turning at its own frequency, from
/// one radian per position (i = 0) down to 1/10000 of that.
#pragma once

#include "attn/matrix.hpp"

namespace attn {

/// PE for positions 0 .. positions-1: [positions x d_model]. Angles are computed in double and
/// each value rounded once to float, so every entry is the float nearest the true value (to
/// the C library's sin/cos). An odd d_model ends with a lone sin column. Throws for
/// positions < 0 or d_model < 1.
Matrix sinusoidal_encoding(Index positions, Index d_model);

}  // namespace attn
