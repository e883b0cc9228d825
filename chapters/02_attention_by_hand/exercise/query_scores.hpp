// Exercise 02.1: one query's scores against every key. The body is yours to write, in
// query_scores.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// The scores of query i against every key, column i of the chapter's A. Tokens are columns,
/// as on the page: q^i is column i of Q [d_k x n_q], k^j is column j of K [d_k x n_k], and
///
///     alpha_{i,j} = q^i . k^j                    (scale false: the notes' unscaled score)
///     alpha_{i,j} = q^i . k^j / sqrt(d_k)        (scale true: the program's --scale)
///
/// for j = 0 .. n_k - 1. Returns the n_k scores [n_k], entry j = alpha_{i,j}: one per key, in
/// the keys' order. Indices count from 0 here, so the page's query 2 is i = 1.
attn::VectorD exercise_query_scores(const attn::MatrixD& Q, const attn::MatrixD& K, attn::Index i,
                                    bool scale);
