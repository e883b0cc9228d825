// Exercise 02.2: the stable softmax of one query's scores. The body is yours to write, in
// stable_softmax.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 20 minutes.
///
/// The weights of one query from its scores [n] (a column of A), by the softmax the page uses:
///
///     m = max_j alpha_j,     alpha'_j = exp(alpha_j - m) / sum_j' exp(alpha_j' - m)
///
/// Subtracting m changes nothing in exact arithmetic (the factor exp(-m) cancels) and keeps every
/// exponent at or below 0, so no exp overflows, however large the scores: exp(710) is already
/// inf in double. Returns the weights [n]: positive, summing to 1, in the scores' order. The
/// scores are finite and n >= 1.
attn::VectorD exercise_stable_softmax(const attn::VectorD& scores);
