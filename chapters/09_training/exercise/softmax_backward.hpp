// Exercise 09.1: the backward pass of softmax, written by hand. The body is yours to write, in
// softmax_backward.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 20 minutes.
///
/// dS = dL/dS [n_q x n_k], given P = softmax(S) row by row [n_q x n_k] and dP = dL/dP (P's
/// shape). Row i of S moves only row i of P, so each row is its own small problem.
attn::MatrixD exercise_softmax_backward(const attn::MatrixD& P, const attn::MatrixD& dP);
