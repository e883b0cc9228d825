// Exercise 01.3: d a_T / d x_1 by the chain rule. Write the body of
// exercise_jacobian_to_first_input below, then build and run its tests (README.md, beside this
// file):
//
//   cmake --build build/release --target exercise_01
//   ctest --test-dir build/release -R Exercise01Jacobian --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "jacobian_to_first_input.hpp"

attn::MatrixD exercise_jacobian_to_first_input(const attn::RnnCellD& cell, const attn::MatrixD& A) {
  // TODO: return d a_T / d x_1 [H x I], T = A.rows(), by the chain rule through the steps:
  //
  //   J_1 = D_1 W_ih,   J_t = D_t W_hh J_{t-1}  (t = 2 .. T),   D_t = diag(1 - a_t^2),
  //
  // where a_t = A.row(t - 1) and W_ih = cell.weight_ih [H x I], W_hh = cell.weight_hh [H x H],
  // as stored (the Jacobian of z = W x with respect to x is W itself; the page's rows and their
  // transposes are only how the forward pass is computed). Each new factor goes on the LEFT:
  // it is the later step. Multiplying by diag(v) on the left scales row i by v(i): in Eigen,
  // v.asDiagonal() * M with v a column vector [H x 1], or a loop over rows.
  //
  // Two classic mistakes: W_hh^T instead of W_hh (copied from the forward pass's row product
  // a W_hh^T), and the wrong slope: D_t uses a_t, the step's own output, which is already
  // tanh(z_t); so 1 - a_t^2, not 1 - tanh(a_t)^2, and not the slope of a_{t-1}.

  static_cast<void>(A);  // delete this line with the last one: it only keeps the stub warning-free
  return attn::MatrixD::Zero(cell.hidden_size(), cell.input_size());
}
