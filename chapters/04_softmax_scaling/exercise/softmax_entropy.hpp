// Exercise 04.2: the entropy of a softmax row, from its logits. The body is yours to write, in
// softmax_entropy.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 2 of 3, about 20 minutes.
///
/// The entropy in nats of the weights p = softmax(z) of finite logits z [n], n >= 1, the page's
/// measure of how sharp a row is (steps 2 and 6):
///
///     H(p) = -sum_j p_j ln p_j,   with 0 ln 0 taken as 0 (its limit)
///
/// It is ln n for equal logits and 0 for a one-hot row; e^H counts the keys in play. It must
/// come out finite for any finite z, however far apart the logits are. Two facts help:
///
///     ln p_j = z_j - lse(z)               (the log of the stable softmax, never -inf)
///     H = lse(z) - sum_j p_j z_j          (the page's  H = ln S - sum_j p_j b_j)
///
/// with lse(z) = m + ln sum_j exp(z_j - m), m = max_j z_j, as in exercise 04.1.
double exercise_softmax_entropy(const attn::VectorD& z);
