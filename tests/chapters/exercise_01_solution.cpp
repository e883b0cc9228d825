// Right answers to exercises 01.1 to 01.3 (chapters/01_rnn/exercise/), written with plain loops,
// without the library's rnn_step, rnn_forward or input_jacobians, so that the course's suite can
// prove that tests/chapters/exercise_01.cpp passes right answers as well as failing the stubs.
// The page shows each marked region as its worked answer.
#include "jacobian_to_first_input.hpp"
#include "rnn_forward.hpp"
#include "rnn_step.hpp"

#include <cmath>

// 01.1: z = x W_ih^T + b_ih + a_prev W_hh^T + b_hh, entry by entry, then tanh.
// [answer_01_1]
attn::MatrixD exercise_rnn_step(const attn::RnnCellD& cell, const attn::MatrixD& x,
                                const attn::MatrixD& a_prev) {
  const attn::Index H = cell.hidden_size(), I = cell.input_size();
  attn::MatrixD a(1, H);  // [1 x H]
  for (attn::Index i = 0; i < H; ++i) {
    double z = cell.bias_ih(i) + cell.bias_hh(i);
    for (attn::Index j = 0; j < I; ++j) z += cell.weight_ih(i, j) * x(0, j);       // W_ih x_t
    for (attn::Index j = 0; j < H; ++j) z += cell.weight_hh(i, j) * a_prev(0, j);  // W_hh a_{t-1}
    a(0, i) = std::tanh(z);
  }
  return a;
}
// [answer_01_1]

// 01.2: the input half for every step at once, then the recurrence, one row after another.
// [answer_01_2]
attn::MatrixD exercise_rnn_forward(const attn::RnnCellD& cell, const attn::MatrixD& X,
                                   const attn::MatrixD& h0) {
  attn::MatrixD P = X * cell.weight_ih.transpose();  // [T x H]: row t - 1 = x_t W_ih^T
  P.rowwise() += cell.bias_ih;
  attn::MatrixD A(X.rows(), cell.hidden_size());  // [T x H]
  attn::MatrixD a = h0;                           // [1 x H], a_0
  for (attn::Index t = 0; t < X.rows(); ++t) {
    const attn::MatrixD z = P.row(t) + a * cell.weight_hh.transpose() + cell.bias_hh;  // [1 x H]
    a = z.array().tanh().matrix();  // a_{t+1}: the next step reads it
    A.row(t) = a;
  }
  return A;
}
// [answer_01_2]

// 01.3: J_1 = D_1 W_ih, then J_t = D_t W_hh J_{t-1}, the new factor on the left.
// [answer_01_3]
attn::MatrixD exercise_jacobian_to_first_input(const attn::RnnCellD& cell, const attn::MatrixD& A) {
  // D_t scales row i by 1 - a_t(i)^2, the slope of tanh where it produced a_t.
  auto times_slope = [&A](attn::Index row_of_a, attn::MatrixD M) {
    for (attn::Index i = 0; i < M.rows(); ++i) M.row(i) *= 1.0 - A(row_of_a, i) * A(row_of_a, i);
    return M;
  };
  attn::MatrixD J = times_slope(0, cell.weight_ih);  // [H x I], d a_1 / d x_1
  for (attn::Index t = 1; t < A.rows(); ++t) {
    J = times_slope(t, cell.weight_hh * J);  // [H x I], d a_{t+1} / d x_1
  }
  return J;
}
// [answer_01_3]
