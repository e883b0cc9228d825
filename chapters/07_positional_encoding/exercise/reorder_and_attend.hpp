// Exercise 07.3: reorder a sentence, attend, and put each word's output back. The body is yours
// to write, in reorder_and_attend.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

#include <vector>

/// Difficulty 2 of 3, importance 2 of 3, about 25 minutes.
///
/// The chapter's experiment on one sentence. X [n x d_model] holds one word per row. `order`
/// [n], a permutation of 0 .. n-1, reorders it: row r of the new sentence S is word order[r],
/// S = X(order, :), as the page's X_b = X_a(swap, all).
///
/// When add_positions is true, the new sentence gets the position vectors of ITS slots:
/// S(r, :) += PE(r) for r = 0 .. n-1 (the table of exercise 07.1; positions belong to the slots,
/// not to the words). Then one self-attention layer, tokens as rows:
///
///     Q = S W_q,  K = S W_k,  V = S W_v,   out = softmax(Q K^T / sqrt(d_k)) V
///
/// with W_q, W_k [d_model x d_k], W_v [d_model x d_v], the softmax row by row. Returns the outputs
/// put back in X's order [n x d_v]: row w is the output of word w, wherever `order` put it. So
/// without positions, any order gives the same answer (attention is permutation-equivariant);
/// with them, it does not.
attn::MatrixD exercise_reorder_and_attend(const attn::MatrixD& X, const attn::MatrixD& W_q,
                                          const attn::MatrixD& W_k, const attn::MatrixD& W_v,
                                          const std::vector<attn::Index>& order,
                                          bool add_positions);
