// Exercise 10.1: fold one key tile into a query tile's running state. The body is yours to
// write, in fold_key_tile.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

#include <limits>

/// The running state of a tile of B_q queries in tiled attention (the chapter's page, "The
/// loop"): per query row r, the largest score seen so far m_r, the sum l_r of e^(s - m_r) over
/// the scores seen, and the output O_r = sum of e^(s - m_r) v over the same keys, not yet
/// divided by l_r. Exercises 10.1 and 10.2 both use it.
struct ExerciseSoftmaxState {
  attn::VectorD m;  ///< [B_q]: running maxima; -inf while a row has seen no allowed key
  attn::VectorD l;  ///< [B_q]: running sums, measured against m
  attn::MatrixD O;  ///< [B_q x d_v]: unnormalised outputs, measured against m too
};

/// The state before any key tile (given, not part of the exercise): m = -inf, l = 0, O = 0.
inline ExerciseSoftmaxState exercise_empty_state(attn::Index rows, attn::Index d_v) {
  return {attn::VectorD::Constant(rows, -std::numeric_limits<double>::infinity()),
          attn::VectorD::Zero(rows), attn::MatrixD::Zero(rows, d_v)};  // [B_q], [B_q], [B_q x d_v]
}

/// Difficulty 2 of 3, importance 3 of 3, about 25 minutes.
///
/// One step of the tiled forward: folds the key tile j, given as its scores S = s Q_i K_j^T
/// [B_q x B_k] (already scaled; a blocked score is -inf) and its values V_j [B_k x d_v], into
/// `state`, and returns the new state. For each row r, with m, l, O the old state's:
///
///     m' = max(m, max_c S(r, c))
///     P  = e^(S(r, :) - m')                    [1 x B_k], a blocked score gives exactly 0
///     l  <- l e^(m - m') + sum_c P(c)
///     O  <- O e^(m - m') + P V_j               [1 x d_v]
///     m  <- m'
///
/// O stays unnormalised: out = O / l comes once, after the last tile (not in this function).
/// A row whose m' is still -inf (nothing allowed so far, none in this tile) keeps m = -inf,
/// l = 0 and O = 0: e^(-inf - (-inf)) is NaN, so that row must not go through the formulas.
ExerciseSoftmaxState exercise_fold_key_tile(const ExerciseSoftmaxState& state,
                                            const attn::MatrixD& S, const attn::MatrixD& V_j);
