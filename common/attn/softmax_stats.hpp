/// @file
/// What a row of softmax weights looks like, and how much gradient it lets through.
///
///   entropy    H(p) = -sum_j p_j ln p_j        in nats: 0 for one-hot, ln n for uniform
///   Jacobian   J = d softmax(z) / dz = diag(p) - p p^T      [n x n], symmetric
///
/// The backward pass of a softmax multiplies the incoming gradient by J: dL/dz = J dL/dp.
/// When p is nearly one-hot, every entry of J is nearly 0 (J_jj = p_j (1 - p_j) and
/// J_ij = -p_i p_j), so almost nothing reaches the logits. Chapter 04 measures this with
/// softmax_jacobian_norm(), which is bounded by the largest weight p_max:
///
///   p_max (1 - p_max)  <=  ||J||_F  <=  2 (1 - p_max)
///
/// All three functions take the weights as float (what softmax_rows() returns) and compute in
/// double. Wherever the formula has 1 - p_i they use the sum of the other weights instead: the
/// two are equal for an exact distribution, but for a saturated row such as
/// p = (1.0f, 3e-12f, ...) the float 1 - p_max is exactly 0 while the other weights still
/// say how far from one-hot the row is.
#pragma once

#include "attn/matrix.hpp"

#include <span>

namespace attn {

/// The entropy -sum_j p_j ln p_j of the weights p, in nats, with 0 ln 0 taken as 0 (its limit).
/// It is ln n for n equal weights and 0 for a one-hot row; exp(entropy) is the number of equal
/// weights with the same entropy, a useful "effective number of keys attended to".
/// The weights must be finite and non-negative (std::invalid_argument otherwise); they are
/// not renormalised, so pass a distribution that sums to 1 up to rounding.
double entropy(std::span<const float> p);

/// The Jacobian of the softmax at the point whose output is p: the [n x n] matrix with entries
/// d p_i / d z_j = p_i (delta_ij - p_j), that is diag(p) - p p^T. The diagonal is computed as
/// p_i times the sum of the other weights (see the file comment). Same requirements on p as
/// entropy(); an empty p gives a [0 x 0] matrix.
MatrixD softmax_jacobian(std::span<const float> p);

/// The Frobenius norm of softmax_jacobian(p) in O(n) time, without forming the matrix:
/// row i of J has squared length p_i^2 ((sum of the others)^2 + sum of the others' squares).
/// The sums of the others come from running prefix and suffix sums of positive terms, so
/// nothing cancels. Same requirements on p as entropy(); an empty p gives 0.
double softmax_jacobian_norm(std::span<const float> p);

}  // namespace attn
