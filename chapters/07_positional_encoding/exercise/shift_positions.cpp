// Exercise 07.2: a shift by k positions. Write the body of exercise_shift_positions below, then
// build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_07
//   ctest --test-dir build/release -R Exercise07Shift --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "shift_positions.hpp"

attn::MatrixD exercise_shift_positions(const attn::MatrixD& rows, attn::Index k) {
  // TODO: return rows R(k)^T [n x d_model]: every row moved by k positions.
  //
  // With d_model = rows.cols(), pair i of each row is (a, b) = (row(2i), row(2i + 1)), the
  // (sin, cos) pair of frequency omega_i = 1 / 10000^(2i / d_model). From the addition formulas
  // sin(x + y) = sin x cos y + cos x sin y and cos(x + y) = cos x cos y - sin x sin y, with
  // x = omega_i pos and y = omega_i k:
  //
  //   a' =  a cos(omega_i k) + b sin(omega_i k)
  //   b' = -a sin(omega_i k) + b cos(omega_i k)
  //
  // Two classic mistakes: the textbook rotation a' = a cos - b sin, b' = a sin + b cos, which
  // treats the pair as (cos, sin) and so moves every row back by k instead of on (the pair is
  // stored as (sin, cos)); and taking cos(omega_i k) from column 2i of PE(k) and sin from column
  // 2i + 1 (the even column holds the sine). Check your formula on PE(0) = (0, 1, ...) by hand:
  // it must give PE(k) = (sin(omega_0 k), cos(omega_0 k), ...).

  static_cast<void>(k);  // delete this line with the last one: it only keeps the stub warning-free
  return attn::MatrixD::Zero(rows.rows(), rows.cols());  // [n x d_model]: the placeholder
}
