// Exercise 10.2: merge two partial softmax states of the same queries. The body is yours to
// write, in merge_states.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"
#include "fold_key_tile.hpp"  // ExerciseSoftmaxState

/// Difficulty 2 of 3, importance 2 of 3, about 20 minutes.
///
/// The state of the same B_q queries over two disjoint sets of keys, a and b, merged into the
/// state over both (the chapter's page, "Merging two states", with O carried along). Per row:
///
///     m = max(m_a, m_b)
///     l = l_a e^(m_a - m) + l_b e^(m_b - m)
///     O = O_a e^(m_a - m) + O_b e^(m_b - m)     [1 x d_v]
///
/// a and b have the same shapes: m, l [B_q], O [B_q x d_v]. A state that has seen nothing
/// (or only blocked keys) is m = -inf, l = 0, O = 0 (exercise_empty_state); merging it changes
/// nothing, and two of them merge into one, with no NaN: where m_x = -inf its factor is 0, not
/// e^(-inf - (-inf)).
ExerciseSoftmaxState exercise_merge_states(const ExerciseSoftmaxState& a,
                                           const ExerciseSoftmaxState& b);
