// Exercise 12.3: the distribution a token is drawn from. The body is yours to write, in
// sampling_probabilities.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 25 minutes.
///
/// The probabilities attn::sample_token draws the next token from (attn/ops/sampling.hpp),
/// for a row of logits z [1 x V], a temperature T > 0 and top-k k >= 0:
///
///     K   = the ids whose logit is at least v_k, the k-th largest logit (every id when k = 0
///           or k >= V); an id tied with v_k is kept, so a tie can keep more than k ids
///     p_j = exp(z_j / T) / sum_{i in K} exp(z_i / T)   for j in K,   p_j = 0 otherwise.
///
/// Divide the logits by T, not the probabilities, and take the softmax over K only, so that
/// the kept probabilities sum to 1. Subtract the largest logit before exp (the tests pass
/// logits near 1000). Returns p [1 x V].
attn::MatrixD exercise_sampling_probabilities(const attn::MatrixD& logits, double temperature,
                                              attn::Index top_k);
