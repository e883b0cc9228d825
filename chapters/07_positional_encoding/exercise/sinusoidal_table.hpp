// Exercise 07.1: the sinusoidal table, written from its formula. The body is yours to write, in
// sinusoidal_table.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// The position vectors of positions 0 .. positions-1 as the rows of PE [positions x d_model],
/// d_model even and >= 2, positions >= 1. Column pair i = (2i, 2i+1), i = 0 .. d_model/2 - 1,
/// holds one frequency:
///
///     PE(pos, 2i)   = sin(omega_i pos)
///     PE(pos, 2i+1) = cos(omega_i pos),      omega_i = 1 / 10000^(2i / d_model)
///
/// Sines on the even columns, cosines on the odd ones, interleaved (not all sines first). Row 0
/// is position 0, so it is (0, 1, 0, 1, ...). What attn::sinusoidal_encoding_d computes.
attn::MatrixD exercise_sinusoidal_table(attn::Index positions, attn::Index d_model);
