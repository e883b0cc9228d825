// Exercise 04.1: a log-sum-exp that survives any finite logits. The body is yours to write, in
// log_sum_exp.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// The log of the softmax's denominator, for finite logits z [n], n >= 1:
///
///     lse(z) = log sum_j exp(z_j) = m + log sum_j exp(z_j - m),   m = max_j z_j
///
/// The two forms are equal in exact arithmetic (take e^m out of the sum). Only the second
/// survives a computer: exp overflows double above 709.78 and underflows to 0 below -745, so
/// the first gives log(inf) = inf for z = (1000, 1000) and log(0) = -inf for (-1000, -1000).
/// In the second every exponent is at most 0 and one term is exactly 1, so the sum lies in
/// [1, n] and its log in [0, log n]. The answers there: 1000 + ln 2 and -1000 + ln 2.
///
/// It is what the page's stable softmax divides by, in log form: softmax(z)_j = exp(z_j - lse(z)).
double exercise_log_sum_exp(const attn::VectorD& z);
