// Exercise 01.2: the RNN over a whole sequence. Write the body of exercise_rnn_forward below,
// then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_01
//   ctest --test-dir build/release -R Exercise01Forward --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "rnn_forward.hpp"

attn::MatrixD exercise_rnn_forward(const attn::RnnCellD& cell, const attn::MatrixD& X,
                                   const attn::MatrixD& h0) {
  // TODO: return every hidden state A [T x H], row t - 1 holding a_t, for T = X.rows().
  //
  // Start from a_0 = h0 [1 x H] and apply the step of exercise 01.1 once per row of X, in
  // order: step t reads x_t = X.row(t - 1) and a_{t-1}, the state the step before produced.
  // (You may call exercise_rnn_step, after #include "rnn_step.hpp", or write the step again.) The
  // input half X W_ih^T + b_ih can be one matrix product for all T rows, as rnn_forward does;
  // the recurrent half cannot, since each step waits for the one before.
  //
  // Two classic mistakes: an off-by-one in the rows (row 0 is a_1, the state after the first
  // input; h0 = a_0 is not returned), and computing every step from h0 instead of from the
  // previous step's state (then nothing is carried along the sequence).

  static_cast<void>(cell);  // delete these two lines with the last one: they only keep the
  static_cast<void>(h0);    // stub warning-free
  return attn::MatrixD::Zero(X.rows(), h0.cols());
}
