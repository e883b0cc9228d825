// Exercise 09.2: the backward pass of a linear layer. Write the body of exercise_linear_backward
// below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_09
//   ctest --test-dir build/release -R Exercise09Linear --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "linear_backward.hpp"

ExerciseLinearGradients exercise_linear_backward(const attn::MatrixD& X, const attn::MatrixD& W,
                                                 const attn::MatrixD& dY) {
  // TODO: return {dX, dW, db}, the gradients of the loss L with respect to X, W and b.
  //
  // The forward pass was Y = X W^T + b: entry by entry, Y(r, c) = sum_a X(r, a) W(c, a) + b(c),
  // for token r (a row) and output feature c. dY(r, c) says how much L changes per unit of
  // Y(r, c). Each gradient is a sum over every place its entry was used:
  //
  //   X(r, a) is used in Y(r, c) for every c, with factor W(c, a)   ->  dX = dY W     [n x in]
  //   W(c, a) is used in Y(r, c) for every r, with factor X(r, a)   ->  dW = dY^T X   [out x in]
  //   b(c)    is used in Y(r, c) for every r, with factor 1         ->  db = sum over r of dY(r, c)
  //
  // Two classic mistakes. X^T dY has the right numbers in the wrong layout: it is [in x out],
  // while W, and so dW, is stored [out x in]. And the bias is added to every row, so its
  // gradient is the sum of dY over the rows (one number per output feature, [1 x out]), not dY
  // itself and not its mean: the loss already holds any 1/N, and dY carries it.
  //
  // Eigen, if you want it: A.transpose() * B is a product; dY.colwise().sum() adds the rows
  // together ([1 x out]). A plain loop is just as good.

  return {attn::MatrixD::Zero(X.rows(), X.cols()),  // [n x in]
          attn::MatrixD::Zero(W.rows(), W.cols()),  // [out x in]
          attn::MatrixD::Zero(1, dY.cols())};       // [1 x out]
}
