// Exercise 10.3: rebuild a tile of attention weights from the log-sum-exp L. The body is
// yours to write, in weights_from_lse.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 2 of 3, about 10 minutes.
///
/// The tile (i, j) of the softmax weights, rebuilt the way the tiled backward does (the
/// chapter's page, "The weights, recomputed"), from the queries Q_i [B_q x d_k], the keys K_j
/// [B_k x d_k], the scale s and the forward's log-sum-exp L_i [B_q] of each query's WHOLE row
/// of scores, L = m + log l:
///
///     S = s Q_i K_j^T        [B_q x B_k]
///     P(r, c) = e^(S(r, c) - L_i(r))
///
/// P is the tile's part of the full softmax row: a tile's rows need not sum to 1. A query with
/// no allowed key has L = -inf; it passes nothing back, so its row of P is all zeros (e^(S + inf)
/// would be +inf).
attn::MatrixD exercise_weights_from_lse(const attn::MatrixD& Q_i, const attn::MatrixD& K_j,
                                        const attn::VectorD& L_i, double scale);
