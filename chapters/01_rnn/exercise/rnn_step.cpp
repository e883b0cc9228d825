// Exercise 01.1: one step of the RNN. Write the body of exercise_rnn_step below, then build and
// run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_01
//   ctest --test-dir build/release -R Exercise01Step --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "rnn_step.hpp"

attn::MatrixD exercise_rnn_step(const attn::RnnCellD& cell, const attn::MatrixD& x,
                                const attn::MatrixD& a_prev) {
  // TODO: return a_t = tanh(W_ih x_t + b_ih + W_hh a_{t-1} + b_hh): a row [1 x H].
  //
  // Tokens are rows here, as on the page: x is [1 x I] and a_prev is [1 x H]. The weights keep
  // PyTorch's [out x in] layout, cell.weight_ih [H x I] and cell.weight_hh [H x H], so the
  // column-vector product W_ih x_t is the row product x W_ih^T (Eigen: x * M.transpose()),
  // [1 x I] times [I x H]. Add both biases, cell.bias_ih and cell.bias_hh (rows [1 x H]), then
  // take tanh of every entry (z.array().tanh(), or std::tanh from <cmath> entry by entry).
  //
  // Two classic mistakes: a_prev * W_hh without the transpose (W_hh is square, so it compiles
  // and runs, and silently uses W_hh^T), and leaving out one of the two biases (PyTorch keeps
  // both; the model adds them).

  static_cast<void>(x);       // delete these two lines with the last one: they only keep the stub
  static_cast<void>(a_prev);  // warning-free
  return attn::MatrixD::Zero(1, cell.hidden_size());
}
