// Exercise 05.3: the masked softmax, with an empty row. The body is yours to write, in
// masked_softmax.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/ops/masks.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 25 minutes.
///
/// The weights of masked attention from its scores: for each row i (query i) of scores
/// [n_q x n_k] and allowed [n_q x n_k] (true = query i may attend to key j),
///
///     s'_ij = s_ij if allowed(i, j), else -infinity;     w_ij = exp(s'_ij) / sum_j' exp(s'_ij'),
///
/// computed stably (subtract the row's largest ALLOWED score before exp). Returns the weights
/// [n_q x n_k]: a blocked key gets exactly 0, every row with an allowed key sums to 1, and a
/// row with no allowed key at all is all zeros, never NaN (the library's rule). The weights
/// of attn::attention with that mask.
attn::MatrixD exercise_masked_softmax(const attn::MatrixD& scores,
                                      const attn::AllowedMask& allowed);
