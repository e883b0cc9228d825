// Exercise 02.1: one query's scores against every key. Write the body of exercise_query_scores
// below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_02
//   ctest --test-dir build/release -R Exercise02Scores --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "query_scores.hpp"

attn::VectorD exercise_query_scores(const attn::MatrixD& Q, const attn::MatrixD& K, attn::Index i,
                                    bool scale) {
  // TODO: return query i's scores against every key: [n_k], one entry per key.
  //
  // Tokens are columns in this chapter: q^i is Q.col(i), k^j is K.col(j), and both have d_k
  // entries (Q.rows() == K.rows()). Entry j is the dot product alpha_{i,j} = q^i . k^j, for
  // every key j = 0 .. K.cols() - 1, the query's own key included. With scale true, divide each
  // score by sqrt(d_k), d_k = K.rows(), as the program's --scale does; with scale false, do not
  // (the notes' scores are unscaled).
  //
  // Two classic mistakes: the page's transpose, q^j . k^i (row i of A, query j against key i,
  // not column i), and a scale of 1 / d_k instead of 1 / sqrt(d_k).
  //
  // Eigen, if you want it: attn::VectorD scores(n) makes a vector of n entries; Q.col(i).dot(
  // K.col(j)) is a number; std::sqrt is in <cmath>.

  static_cast<void>(Q);  // delete these three lines with the last one: they only keep the
  static_cast<void>(i);  // stub warning-free
  static_cast<void>(scale);
  return attn::VectorD::Zero(K.cols());
}
