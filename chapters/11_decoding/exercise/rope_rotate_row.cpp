// Exercise 11.1: RoPE on one row. Write the body of exercise_rope_rotate_row below, then build
// and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_11
//   ctest --test-dir build/release -R Exercise11Rope --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "rope_rotate_row.hpp"

attn::MatrixD exercise_rope_rotate_row(const attn::MatrixD& x, attn::Index m,
                                       const attn::VectorD& theta) {
  // TODO: return x [1 x d] rotated as the token at position m: [1 x d] again.
  //
  // The d features form d/2 pairs. In the interleaved layout (the RoPE paper, Meta's Llama
  // code) pair i is the two neighbours x(0, 2i) and x(0, 2i + 1); call them (a, b). Pair i
  // turns counterclockwise by the angle m * theta(i), as a point (a, b) of the plane:
  //
  //   [a']   [ cos  -sin ] [a]
  //   [b'] = [ sin   cos ] [b]       cos = cos(m theta_i), sin = sin(m theta_i)
  //
  // theta [d/2] holds one frequency per pair (theta_i = 10000^(-2i/d) in every model the
  // chapter runs, but use the theta you are given: the tests pass others too).
  //
  // Things to get right: which two features form a pair (neighbours, not i and i + d/2, which
  // is the other layout), the direction of the turn (which of a', b' gets the minus sign), and
  // the angle (m theta_i: the token at position 0 is not rotated at all).
  //
  // std::cos and std::sin take radians, in <cmath>. m is an integer: write
  // static_cast<double>(m) * theta(i) for the angle.

  static_cast<void>(m);      // delete these two lines with the last one: they only keep the
  static_cast<void>(theta);  // stub warning-free
  return x;
}
