// Right answers to exercises 10.1 to 10.3 (chapters/10_efficient_attention/exercise/), written
// with plain loops and without the library's online softmax, attention or tiled kernel, so that
// the course's suite can prove that tests/chapters/exercise_10.cpp passes right answers as well
// as failing the stubs.
#include "fold_key_tile.hpp"
#include "merge_states.hpp"
#include "weights_from_lse.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

// 10.1: per row, move l and O to the new maximum, then add the tile's terms.
// [answer_10_1]
ExerciseSoftmaxState exercise_fold_key_tile(const ExerciseSoftmaxState& state,
                                            const attn::MatrixD& S, const attn::MatrixD& V_j) {
  const double inf = std::numeric_limits<double>::infinity();
  ExerciseSoftmaxState next = state;
  for (attn::Index r = 0; r < S.rows(); ++r) {
    const double m_new = std::max(state.m(r), S.row(r).maxCoeff());
    if (m_new == -inf) continue;  // nothing allowed so far: the row stays (-inf, 0, 0)
    // e^(m - m_new), 0 when the row had seen nothing (its l and O are 0 anyway)
    const double rescale = state.m(r) == -inf ? 0.0 : std::exp(state.m(r) - m_new);
    next.l(r) = state.l(r) * rescale;
    next.O.row(r) = state.O.row(r) * rescale;
    for (attn::Index c = 0; c < S.cols(); ++c) {
      const double p = std::exp(S(r, c) - m_new);  // exactly 0 for a blocked score
      next.l(r) += p;
      next.O.row(r) += p * V_j.row(c);
    }
    next.m(r) = m_new;
  }
  return next;
}
// [answer_10_1]

// 10.2: both states moved to the common maximum, then added.
// [answer_10_2]
ExerciseSoftmaxState exercise_merge_states(const ExerciseSoftmaxState& a,
                                           const ExerciseSoftmaxState& b) {
  const double inf = std::numeric_limits<double>::infinity();
  ExerciseSoftmaxState merged = a;
  for (attn::Index r = 0; r < a.m.size(); ++r) {
    const double m = std::max(a.m(r), b.m(r));
    // e^(m_x - m), 0 for a state that has seen nothing: no e^(-inf - (-inf)) = NaN
    const double factor_a = a.m(r) == -inf ? 0.0 : std::exp(a.m(r) - m);
    const double factor_b = b.m(r) == -inf ? 0.0 : std::exp(b.m(r) - m);
    merged.m(r) = m;
    merged.l(r) = a.l(r) * factor_a + b.l(r) * factor_b;
    merged.O.row(r) = a.O.row(r) * factor_a + b.O.row(r) * factor_b;
  }
  return merged;
}
// [answer_10_2]

// 10.3: one exp per entry, against the whole row's log-sum-exp.
// [answer_10_3]
attn::MatrixD exercise_weights_from_lse(const attn::MatrixD& Q_i, const attn::MatrixD& K_j,
                                        const attn::VectorD& L_i, double scale) {
  attn::MatrixD P = attn::MatrixD::Zero(Q_i.rows(), K_j.rows());  // [B_q x B_k]
  for (attn::Index r = 0; r < Q_i.rows(); ++r) {
    if (L_i(r) == -std::numeric_limits<double>::infinity()) continue;  // no allowed key: zeros
    for (attn::Index c = 0; c < K_j.rows(); ++c) {
      P(r, c) = std::exp(scale * Q_i.row(r).dot(K_j.row(c)) - L_i(r));
    }
  }
  return P;
}
// [answer_10_3]
