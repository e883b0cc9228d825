// Exercise 06.3: multi-head attention from the projections. Write the body of
// exercise_multi_head_out below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_06
//   ctest --test-dir build/release -R Exercise06Forward --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "multi_head_out.hpp"

attn::MatrixD exercise_multi_head_out(const attn::MatrixD& Q, const attn::MatrixD& K,
                                      const attn::MatrixD& V, attn::Index heads,
                                      const attn::MatrixD& W_O, const attn::VectorD& b_O) {
  // TODO: return out = Concat(head_0 .. head_{heads-1}) W_O^T + b_O: [n_q x d_model].
  //
  // 1. Every head attends on its own columns: head_h = exercise_head_attention(Q, K, V, heads,
  //    h), [n_q x d_k] (exercise 06.2; get that one right first).
  // 2. Concatenate: head h's output goes into the same columns it came from,
  //    [h d_k, (h + 1) d_k) of concat [n_q x d_model].
  // 3. Mix the heads: W_O is stored [out x in], as nn.Linear stores it, so
  //    out(t, o) = sum_c concat(t, c) W_O(o, c) + b_O(o), i.e. concat W_O^T plus b_O on each row.
  //
  // Two classic mistakes: returning concat itself (no output projection: then no output feature
  // reads more than one head), and concat W_O without the transpose (W_O is [out x in]).

  static_cast<void>(K);  // delete these four lines with the last one: they only keep the
  static_cast<void>(V);  // stub warning-free
  static_cast<void>(heads);
  static_cast<void>(b_O);
  return attn::MatrixD::Zero(Q.rows(), W_O.rows());
}
