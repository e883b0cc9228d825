// Exercise 01.2: the RNN over a whole sequence. The body is yours to write, in rnn_forward.cpp
// beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/layers/rnn.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// The hidden state after every step of a sequence, what attn::rnn_forward returns:
///
///     a_0 = h0,   a_t = tanh(W_ih x_t + b_ih + W_hh a_{t-1} + b_hh)   for t = 1 .. T.
///
/// Tokens are rows: X [T x I] holds x_t in row t - 1, h0 [1 x H] is the starting state a_0,
/// and the result A [T x H] holds a_t in row t - 1 (a_1 first, a_T last; a_0 is not a row).
/// The weights are the cell's, in PyTorch's [out x in] layout, as in exercise 01.1.
attn::MatrixD exercise_rnn_forward(const attn::RnnCellD& cell, const attn::MatrixD& X,
                                   const attn::MatrixD& h0);
