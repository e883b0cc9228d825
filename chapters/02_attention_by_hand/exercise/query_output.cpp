// Exercise 02.3: one query's output, the weighted sum of the values. Write the body of
// exercise_query_output below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_02
//   ctest --test-dir build/release -R Exercise02Output --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "query_output.hpp"

attn::VectorD exercise_query_output(const attn::MatrixD& V, const attn::VectorD& weights) {
  // TODO: return y = sum_j weights(j) v^j: [d_v], one entry per feature of a value.
  //
  // Tokens are columns in this chapter: v^j is V.col(j), a vector of d_v = V.rows() entries,
  // and there is one weight per value (weights.size() == V.cols()). Start from a vector of
  // zeros and add weights(j) times v^j for every j.
  //
  // Two classic mistakes: taking v^j as row j of V (the row convention of chapter 04 on, not
  // this chapter's), and dividing by the sum of the weights (take them as given: note 000's
  // illustrative weights sum to 0.1, 0.3 or 0.4, and its y^1 is 0.1 v^1, not v^1).
  //
  // Eigen, if you want it: attn::VectorD::Zero(d) makes d zeros; y += w * V.col(j) adds a
  // scaled column.

  static_cast<void>(weights);  // delete this line with the next one: it only keeps the stub
  return attn::VectorD::Zero(V.rows());  // warning-free
}
