// Exercise 06.1: one head's columns of a projection. Write the body of exercise_split_head
// below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_06
//   ctest --test-dir build/release -R Exercise06Split --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "split_head.hpp"

attn::MatrixD exercise_split_head(const attn::MatrixD& Q, attn::Index heads, attn::Index h) {
  // TODO: return head h's block of Q: [n x d_k], with d_k = d_model / heads.
  //
  // One [d_model x d_model] projection made every head's queries at once, side by side: head 0
  // in the first d_k columns, head 1 in the next d_k, and so on. So row t of head h is
  // Q(t, h * d_k + c) for c = 0 .. d_k - 1. h counts from 0 here, as column offsets do (the
  // page's head 1 is h = 0).
  //
  // Two classic mistakes: taking every heads-th column (h, h + heads, h + 2 heads, ...), the
  // interleaved split that a reshape to [n, d_k, heads] instead of [n, heads, d_k] gives; and
  // counting heads from 1, which reads the block of head h - 1.

  static_cast<void>(h);  // delete this line with the last one: it only keeps the stub
                         // warning-free
  return attn::MatrixD::Zero(Q.rows(), Q.cols() / heads);
}
