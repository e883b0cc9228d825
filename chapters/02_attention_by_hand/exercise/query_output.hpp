// Exercise 02.3: one query's output, the weighted sum of the values. The body is yours to
// write, in query_output.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// Difficulty 1 of 3, importance 3 of 3, about 10 minutes.
///
/// The output of one query from its weights [n_k] (a column of A') and the values. Tokens are
/// columns, as on the page: v^j is column j of V [d_v x n_k], and
///
///     y = sum_j alpha'_j v^j           [d_v]
///
/// Returns y [d_v]. Use the weights as given: note 000's illustrative weights do not sum to 1,
/// and the sum must not rescale them.
attn::VectorD exercise_query_output(const attn::MatrixD& V, const attn::VectorD& weights);
