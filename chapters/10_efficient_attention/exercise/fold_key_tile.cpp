// Exercise 10.1: fold one key tile into a query tile's running state. Write the body of
// exercise_fold_key_tile below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_10
//   ctest --test-dir build/release -R Exercise10Fold --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "fold_key_tile.hpp"

ExerciseSoftmaxState exercise_fold_key_tile(const ExerciseSoftmaxState& state,
                                            const attn::MatrixD& S, const attn::MatrixD& V_j) {
  // TODO: return the state after this key tile, row by row (the header has the formulas).
  //
  // For each query row r: the new maximum m' is the larger of the old m(r) and the row's
  // largest score. Everything the state summed so far was measured against the old m(r), so
  // both l(r) and the row O.row(r) are multiplied by the factor e^(m(r) - m'), at most 1; then
  // the tile's terms P = e^(S(r, c) - m') are added: their sum to l(r), P V_j to O.row(r).
  //
  // Two classic mistakes: rescaling only one of l and O (both were measured against the old
  // maximum), and the factor upside down, e^(m' - m), which is at least 1. Also keep O
  // unnormalised (no division by l here), and leave a row alone while its m' is -inf.
  //
  // Eigen, if you want it: S.row(r).maxCoeff() is a row's largest entry; std::max and std::exp
  // come from <algorithm> and <cmath>; P.row(r) * V_j is a [1 x d_v] row.

  static_cast<void>(S);    // delete these two lines with the last one: they only keep the
  static_cast<void>(V_j);  // stub warning-free
  return state;
}
