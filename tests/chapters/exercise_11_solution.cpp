// Right answers to exercises 11.1 to 11.3 (chapters/11_decoding/exercise/), written without
// the library's rope, masks or decode kernel, so that the course's suite can prove that
// tests/chapters/exercise_11.cpp passes right answers as well as failing the stubs.
#include "rolling_cache.hpp"
#include "rope_rotate_row.hpp"
#include "sliding_window.hpp"

#include <algorithm>
#include <cmath>

// 11.1: pair i = (x_{2i}, x_{2i+1}) turns counterclockwise by m theta_i.
// [answer_11_1]
attn::MatrixD exercise_rope_rotate_row(const attn::MatrixD& x, attn::Index m,
                                       const attn::VectorD& theta) {
  attn::MatrixD out(1, x.cols());  // [1 x d]
  for (attn::Index i = 0; i < x.cols() / 2; ++i) {
    const double angle = static_cast<double>(m) * theta(i);
    const double c = std::cos(angle), s = std::sin(angle);
    const double a = x(0, 2 * i), b = x(0, 2 * i + 1);
    out(0, 2 * i) = a * c - b * s;
    out(0, 2 * i + 1) = a * s + b * c;
  }
  return out;
}
// [answer_11_1]

// 11.2: the last W keys counting the query's own, none in the future.
// [answer_11_2]
bool exercise_sliding_window_allowed(attn::Index i, attn::Index j, attn::Index W) {
  return i - W < j && j <= i;
}
// [answer_11_2]

// 11.3: store in row p mod W, then read the held positions oldest first.
// [answer_11_3]
ExerciseDecodeStep exercise_append_and_attend(ExerciseRing& ring, const attn::MatrixD& q,
                                              const attn::MatrixD& k, const attn::MatrixD& v) {
  const attn::Index W = ring.capacity(), d = ring.keys.cols();
  const attn::Index p = ring.appended;  // this token's position
  ring.keys.row(p % W) = k.row(0);
  ring.values.row(p % W) = v.row(0);
  ring.appended = p + 1;

  const attn::Index held = std::min(p + 1, W);
  const attn::Index first = p - held + 1;  // the oldest position the query reads
  attn::MatrixD weights(1, held);          // [1 x held], the scores first
  for (attn::Index t = first; t <= p; ++t) {
    weights(0, t - first) = q.row(0).dot(ring.keys.row(t % W)) / std::sqrt(static_cast<double>(d));
  }
  const double max = weights.maxCoeff();  // subtracted so that no exp overflows
  weights = (weights.array() - max).exp().matrix();
  weights /= weights.sum();
  attn::MatrixD out = attn::MatrixD::Zero(1, d);  // [1 x d]
  for (attn::Index t = first; t <= p; ++t) out += weights(0, t - first) * ring.values.row(t % W);
  return {out, weights};
}
// [answer_11_3]
