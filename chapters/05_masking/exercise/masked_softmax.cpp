// Exercise 05.3: the masked softmax. Write the body of exercise_masked_softmax below, then build
// and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_05
//   ctest --test-dir build/release -R Exercise05Softmax --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "masked_softmax.hpp"

attn::MatrixD exercise_masked_softmax(const attn::MatrixD& scores,
                                      const attn::AllowedMask& allowed) {
  // TODO: return the weights [n_q x n_k], row by row: the softmax of row i of scores over the
  // keys that allowed lets query i read, and exactly 0 on every other key.
  //
  // For each row i:
  //   1. m = the largest scores(i, j) among the ALLOWED j. A blocked score is still a number,
  //      and it may be huge: it must not be the one subtracted.
  //   2. For allowed j, e_j = std::exp(scores(i, j) - m); for blocked j, 0. This is what the
  //      fill -infinity does, since exp(-inf) = 0 exactly.
  //   3. w_ij = e_j / sum of the e's.
  // A row where allowed blocks every key has no m and a sum of 0: the library defines its
  // weights as all zeros. Give it zeros, never NaN (0 / 0) and never 1/n_k each.
  //
  // Two classic mistakes: a finite fill such as -1e9 (it gives the empty row uniform weights,
  // the mean of values it was told to ignore), and the textbook formula with -infinity applied
  // to that row (exp(-inf - (-inf)) is NaN). Another: a softmax over every key, with the
  // blocked weights zeroed afterwards (the row no longer sums to 1).
  //
  // attn::MatrixD::Zero(r, c) makes an [r x c] matrix of zeros; allowed(i, j) is true when
  // query i may read key j.

  static_cast<void>(allowed);  // delete this line with the last one: it only keeps the stub
                               // warning-free
  return attn::MatrixD::Zero(scores.rows(), scores.cols());  // [n_q x n_k]
}
