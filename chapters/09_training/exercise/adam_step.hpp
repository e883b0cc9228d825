// Exercise 09.3: one step of Adam, written by hand. The body is yours to write, in
// adam_step.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 20 minutes.
///
/// Step t (1, 2, ...) of Adam on one parameter tensor p with gradient g, as torch.optim.Adam
/// defines it (no weight decay) and the chapter's page writes it. Entry by entry, in this order:
///
///     m = beta1 m + (1 - beta1) g
///     v = beta2 v + (1 - beta2) g^2
///     p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
///
/// p, m and v are updated in place and keep their shape; g has it too. m and v start at 0
/// before step 1 (they are torch's exp_avg and exp_avg_sq). lr may change from step to step (a
/// schedule); beta1, beta2 and eps do not.
void exercise_adam_step(attn::MatrixD& p, const attn::MatrixD& g, attn::MatrixD& m,
                        attn::MatrixD& v, attn::Index t, double lr, double beta1, double beta2,
                        double eps);
