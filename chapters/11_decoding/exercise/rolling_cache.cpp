// Exercise 11.3: a rolling KV cache and one decode step. Write the body of
// exercise_append_and_attend below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_11
//   ctest --test-dir build/release -R Exercise11Ring --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "rolling_cache.hpp"

ExerciseDecodeStep exercise_append_and_attend(ExerciseRing& ring, const attn::MatrixD& q,
                                              const attn::MatrixD& k, const attn::MatrixD& v) {
  // TODO: one decode step: append the token's key and value, then attend with its query.
  //
  // 1. Append. The token's position is p = ring.appended. Its key k [1 x d] goes into row
  //    p mod W of ring.keys (W = ring.capacity()), its value v into the same row of
  //    ring.values; then ring.appended becomes p + 1. Once p >= W that row held the token at
  //    p - W, which the window no longer reads: overwriting it is the point of the ring.
  //
  // 2. Which tokens. The query at p reads the last W positions, counting its own (exercise
  //    11.2's rule): held = min(p + 1, W) tokens, at positions p - held + 1 .. p. Token t of
  //    them sits in row t mod W. Oldest first: once the ring has wrapped, the oldest is not in
  //    row 0.
  //
  // 3. Attend. For each held position t, oldest first: the score s = q . k_t / sqrt(d) (d the
  //    width of a row); the weights are the softmax of the held scores (subtract their max
  //    before std::exp, as every softmax of the course does); out = sum of weight * v_t.
  //
  // Return {out [1 x d], weights [1 x held]}, weights in that same oldest-first order.
  //
  // Eigen, if you want it: ring.keys.row(r) is row r; q.row(0).dot(ring.keys.row(r)) is a
  // number; attn::MatrixD::Zero(1, d) makes a row of zeros; out += w * ring.values.row(r).
  // Eigen does not check indices in a release build: a row past W - 1 is memory that is not
  // the ring's (this exercise's program turns Eigen's checks on, and stops there).

  static_cast<void>(ring);  // delete these three lines with the last one: they only keep the
  static_cast<void>(k);     // stub warning-free
  static_cast<void>(v);
  return {attn::MatrixD::Zero(1, q.cols()), attn::MatrixD::Zero(1, 0)};
}
