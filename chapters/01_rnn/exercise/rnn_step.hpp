// Exercise 01.1: one step of the RNN. The body is yours to write, in rnn_step.cpp beside this
// file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/layers/rnn.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// One step of the Elman recurrence, as the chapter's page writes it,
///
///     a_t = tanh(W_ih x_t + b_ih + W_hh a_{t-1} + b_hh),
///
/// with the page's conventions: tokens are rows, so x_t is a row x [1 x I], a_{t-1} a row
/// a_prev [1 x H], and the weights keep PyTorch's [out x in] layout, cell.weight_ih = W_ih
/// [H x I] and cell.weight_hh = W_hh [H x H]; W_ih x_t is computed as x W_ih^T. The biases
/// cell.bias_ih and cell.bias_hh are rows [1 x H]. Returns a_t [1 x H]; nothing is changed.
attn::MatrixD exercise_rnn_step(const attn::RnnCellD& cell, const attn::MatrixD& x,
                                const attn::MatrixD& a_prev);
