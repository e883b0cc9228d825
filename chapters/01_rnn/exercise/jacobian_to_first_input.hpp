// Exercise 01.3: how much the last state depends on the first input, by the chain rule. The body
// is yours to write, in jacobian_to_first_input.cpp beside this file; README.md says how to
// check it.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/layers/rnn.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 30 minutes.
///
/// The Jacobian d a_T / d x_1 [H x I] of the chapter's "Long paths", entry (i, j) = how much
/// unit i of the last state moves per unit change of feature j of the first input:
///
///     d a_T / d x_1 = D_T W_hh D_{T-1} W_hh ... D_2 W_hh D_1 W_ih,   D_t = diag(1 - a_t^2),
///
/// or step by step, J_1 = D_1 W_ih and J_t = D_t W_hh J_{t-1}; the answer is J_T. Each factor
/// D_t W_hh is d a_t / d a_{t-1} [H x H]. W_ih = cell.weight_ih [H x I] and W_hh =
/// cell.weight_hh [H x H] are used as they are stored (the derivative of W_ih x is W_ih).
/// A [T x H] holds the states of a forward pass (T >= 1), a_t in row t - 1, as rnn_forward
/// returns them: the derivative of tanh is 1 - tanh(z)^2 = 1 - a_t^2, so the states are all the
/// forward pass this needs.
attn::MatrixD exercise_jacobian_to_first_input(const attn::RnnCellD& cell, const attn::MatrixD& A);
