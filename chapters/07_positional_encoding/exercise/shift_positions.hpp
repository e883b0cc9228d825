// Exercise 07.2: a shift by k positions as one rotation per column pair. The body is yours to
// write, in shift_positions.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 25 minutes.
///
/// Every row of `rows` [n x d_model] (d_model even, tokens as rows, in the table's layout)
/// moved by k positions: rows R(k)^T [n x d_model], with R(k) the chapter's block-diagonal
/// rotation. Pair i of a row, (a, b) = (row(2i), row(2i+1)), becomes
///
///     a' =  a cos(omega_i k) + b sin(omega_i k)
///     b' = -a sin(omega_i k) + b cos(omega_i k),      omega_i = 1 / 10000^(2i / d_model)
///
/// so that a row PE(pos) becomes PE(pos + k) for every pos, with the same coefficients:
/// cos(omega_i k) = PE(k, 2i+1), sin(omega_i k) = PE(k, 2i). Any integer k, negative too (it
/// moves back). Any row, not only a row of the table: the map is linear.
attn::MatrixD exercise_shift_positions(const attn::MatrixD& rows, attn::Index k);
