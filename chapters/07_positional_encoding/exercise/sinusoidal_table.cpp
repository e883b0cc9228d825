// Exercise 07.1: the sinusoidal table. Write the body of exercise_sinusoidal_table below, then
// build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_07
//   ctest --test-dir build/release -R Exercise07Table --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "sinusoidal_table.hpp"

attn::MatrixD exercise_sinusoidal_table(attn::Index positions, attn::Index d_model) {
  // TODO: return PE [positions x d_model]: row pos is the position vector of position pos.
  //
  // Column pair i is the columns 2i and 2i + 1, and it turns at omega_i radians per position:
  //
  //   omega_i = 1 / 10000^(2i / d_model)            i = 0 .. d_model/2 - 1
  //   PE(pos, 2i) = sin(omega_i pos),   PE(pos, 2i + 1) = cos(omega_i pos)
  //
  // Two classic mistakes: the exponent i / d_model instead of 2i / d_model (i counts pairs, and
  // the 2 turns it into the even column's index, so the last pair turns about 1/10000 radian
  // per position, not 1/100), and sin and cos swapped (sin on the even columns: row 0 must be
  // 0, 1, 0, 1, ...). Positions start at 0, not 1.
  //
  // std::pow, std::sin and std::cos are in <cmath>. Write static_cast<double>(pos) for a
  // position in a double expression.

  return attn::MatrixD::Zero(positions, d_model);  // [positions x d_model]: the placeholder
}
