// Exercise 02.2: the stable softmax of one query's scores. Write the body of
// exercise_stable_softmax below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_02
//   ctest --test-dir build/release -R Exercise02Softmax --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "stable_softmax.hpp"

attn::VectorD exercise_stable_softmax(const attn::VectorD& scores) {
  // TODO: return the softmax of scores [n]: [n] weights, positive, summing to 1.
  //
  // Three passes over the scores, as on the page for query 2 (m = 1.5 there):
  //   1. m = the largest score;
  //   2. e_j = exp(scores(j) - m) for every j, and their sum s;
  //   3. weight j = e_j / s.
  //
  // Two classic mistakes: the naive exp(scores(j)) without subtracting m (exp(1003) is inf in
  // double, and inf / inf is NaN: the tests give it such a row), and subtracting m in the
  // numerator but dividing by the sum of the unshifted exp(scores(j)).
  //
  // Eigen, if you want it: scores.maxCoeff() is m. std::exp is in <cmath>, std::max in
  // <algorithm>.

  return attn::VectorD::Zero(scores.size());
}
