// Exercise 11.2: the sliding window's rule. The body is yours to write, in sliding_window.cpp
// beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 2 of 3, about 10 minutes.
///
/// Whether the query at position i may read the key at position j under a sliding window of
/// W >= 1 keys (Mistral's): the last W keys, counting the query's own, and never a future one,
///
///     allowed  iff  i - W < j <= i.
///
/// So query i reads min(i + 1, W) keys. Positions are >= 0.
bool exercise_sliding_window_allowed(attn::Index i, attn::Index j, attn::Index W);
