/// @file
/// Numerically stable softmax, along rows or along columns.
///
///     softmax(z)_j = exp(z_j - m) / sum_k exp(z_k - m),   m = max_k z_k
///
/// Subtracting the maximum changes nothing mathematically (the factor exp(-m) cancels) but
/// keeps every exponent <= 0, so nothing overflows: exp(400) is inf in float, exp(0) is 1.
///
/// Defined results for awkward input (the same as PyTorch's scaled_dot_product_attention):
///   - a row whose entries are all -inf (every key masked) gives all zeros, never NaN, and
///     softmax_inplace says so (attention() makes such a row NaN unless its mask emptied it);
///   - -inf entries among finite ones get weight exactly 0;
///   - a NaN anywhere in a row makes that whole row NaN (garbage in is made visible);
///   - a +inf entry makes the row NaN (inf - inf), as exp-normalisation does in PyTorch.
#pragma once

#include "attn/core/matrix.hpp"

#include <span>

namespace attn {

/// Softmax of one contiguous vector, in place. The building block of the two below. Returns
/// false in the one case it cannot normalise, every entry -inf (the row is then all zeros), and
/// true otherwise, NaN rows included: attention() needs to tell a row its mask emptied (zeros)
/// from one whose allowed scores all came out -inf (NaN), and this costs it no extra pass.
bool softmax_inplace(std::span<float> z);
/// The same in double (the gradient checks of the training chapter run every layer in double).
bool softmax_inplace(std::span<double> z);

/// Softmax of each row: the row convention (tokens are rows, weights sum to 1 along a row).
Matrix softmax_rows(const Matrix& scores);

/// Softmax of each column: the column convention of notes 000/002 (A' = softmax(K^T Q)).
Matrix softmax_cols(const Matrix& scores);

/// The naive formula exp(z_j) / sum_k exp(z_k), without subtracting the maximum. It exists
/// only so chapter 04 can show it overflowing; never use it for real work.
Matrix naive_softmax_rows(const Matrix& scores);

}  // namespace attn
