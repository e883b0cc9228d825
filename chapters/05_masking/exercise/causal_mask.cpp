// Exercise 05.2: the causal mask. Write the body of exercise_causal_mask below, then build and
// run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_05
//   ctest --test-dir build/release -R Exercise05Causal --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "causal_mask.hpp"

attn::AllowedMask exercise_causal_mask(attn::Index n) {
  // TODO: return the causal mask of n tokens, [n x n]: entry (i, j) is true when query i may
  // attend to key j, that is when key j is not in query i's future.
  //
  // Rows are queries and columns are keys, as in the scores it masks. A decoder predicts
  // token i + 1 from tokens 0 .. i, so query i reads keys 0 .. i, its own included.
  //
  // attn::AllowedMask m(n, n) makes an [n x n] mask (its entries are not set yet); m(i, j) is
  // entry (i, j).
  //
  // Two classic mistakes: the mask transposed (j >= i: every query reads the future and not
  // the past), and the diagonal blocked (j < i: query 0 is left with no key at all). Write out
  // row 0 and row n - 1 of yours before you run the tests.

  return attn::AllowedMask::Constant(n, n, false);  // [n x n], all blocked
}
