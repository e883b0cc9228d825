// Exercise 08.2: the position-wise feed-forward network. Write the body of
// exercise_position_wise_ffn below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_08
//   ctest --test-dir build/release -R Exercise08FeedForward --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "position_wise_ffn.hpp"

attn::MatrixD exercise_position_wise_ffn(const attn::MatrixD& x, const attn::MatrixD& W1,
                                         const attn::RowVectorD& b1, const attn::MatrixD& W2,
                                         const attn::RowVectorD& b2) {
  // TODO: return FFN(x) = ReLU(x W1^T + b1) W2^T + b2, [n x d_model].
  //
  // Tokens are rows, so a layer multiplies from the right: hidden = x W1^T + b1 is
  // [n x d_model] [d_model x d_ff] = [n x d_ff], the bias added to every row. Then ReLU on every
  // entry of hidden, then the same again with W2 and b2, back to [n x d_model].
  //
  // Two classic mistakes: W instead of W^T (W1 is stored [d_ff x d_model], one row per output
  // feature, as nn.Linear stores it; x * W1 does not even fit unless d_ff = d_model, and then
  // it is silently wrong), and the ReLU in the wrong place: after adding b1, not before, and
  // not on the output (FFN(x) may be negative).
  //
  // Eigen, if you want it: W1.transpose() is W1^T; (A.rowwise() + b1) adds b1 to every row of
  // A; A.cwiseMax(0.0) is ReLU on every entry. This exercise's program checks Eigen's sizes: a
  // product whose sizes do not fit stops it, with a line saying what that most likely means.

  static_cast<void>(W1);  // delete these four lines with the last one: they only keep the
  static_cast<void>(b1);  // stub warning-free
  static_cast<void>(W2);
  static_cast<void>(b2);
  return attn::MatrixD::Zero(x.rows(), x.cols());
}
