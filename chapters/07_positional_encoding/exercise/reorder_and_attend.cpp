// Exercise 07.3: reorder, attend, put back. Write the body of exercise_reorder_and_attend below,
// then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_07
//   ctest --test-dir build/release -R Exercise07Order --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "reorder_and_attend.hpp"

attn::MatrixD exercise_reorder_and_attend(const attn::MatrixD& X, const attn::MatrixD& W_q,
                                          const attn::MatrixD& W_k, const attn::MatrixD& W_v,
                                          const std::vector<attn::Index>& order,
                                          bool add_positions) {
  // TODO: return the outputs of the reordered sentence, put back in X's order [n x d_v].
  //
  // 1. The new sentence S [n x d_model]: row r is X.row(order[r]).
  // 2. If add_positions: S.row(r) += PE(r), the position vector of slot r (your table of
  //    exercise 07.1, or attn::sinusoidal_encoding_d from "attn/layers/positional_encoding.hpp").
  // 3. One attention layer on S: Q = S W_q, K = S W_k, V = S W_v, scores Q K^T / sqrt(d_k)
  //    with d_k = W_q.cols(), a softmax on each row, out = weights V [n x d_v]. You may write it,
  //    or call attn::attention (in "attn/ops/attention.hpp"; it takes MatrixD too).
  // 4. Put back: out.row(r) is the output of word order[r], so it goes to row order[r].
  //
  // Two classic mistakes: putting back with out(order, :), a second reordering, which undoes
  // the first only when order is its own inverse (the page's swap {2, 1, 0} is; {1, 2, 0} is
  // not); and adding the positions to X before reordering, so that each word takes its old
  // position along and the order changes nothing.

  static_cast<void>(W_q);  // delete these lines with the last one: they only keep the stub
  static_cast<void>(W_k);  // warning-free
  static_cast<void>(order);
  static_cast<void>(add_positions);
  return attn::MatrixD::Zero(X.rows(), W_v.cols());  // [n x d_v]: the placeholder
}
