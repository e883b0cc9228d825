// Exercise 12.2: the loss in nats per character. The body is yours to write, in
// nats_per_character.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

#include <vector>

/// Difficulty 2 of 3, importance 3 of 3, about 20 minutes.
///
/// The loss chapter 12 reports: the cross-entropy of N predictions, in nats, per character of
/// the text they predict. Row r of logits [N x V] predicts the token targets[r] (an id in
/// [0, V)), which stands for characters[targets[r]] >= 1 characters (characters [V]: 1 for
/// every id without merges, the length of its piece with them). With z = logits.row(r),
///
///     loss_r = -ln softmax(z)_{t_r} = ln sum_j exp(z_j) - z_{t_r}      (nats, natural log)
///
///     nats per character = (sum_r loss_r) / (sum_r characters[t_r]).
///
/// Take the log-sum-exp after subtracting the row's largest logit: the tests pass logits of
/// 1000 and -800. Without merges this is the plain mean of the loss_r.
double exercise_nats_per_character(const attn::MatrixD& logits, const std::vector<int>& targets,
                                   const std::vector<int>& characters);
