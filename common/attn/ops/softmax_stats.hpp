/// @file
/// What a row of softmax weights looks like, and how much gradient it lets through.
///
///     entropy    H(p) = -sum_j p_j ln p_j        in nats: 0 for one-hot, ln n for uniform
///     Jacobian   J = d softmax(z) / dz = diag(p) - p p^T      [n x n], symmetric
///
/// The backward pass of a softmax multiplies the incoming gradient by J: dL/dz = J dL/dp.
/// When p is nearly one-hot, every entry of J is nearly 0 (J_jj = p_j (1 - p_j) and
/// J_ij = -p_i p_j), so almost nothing reaches the logits. Chapter 04 measures this with
/// softmax_jacobian_norm(), which is bounded by the largest weight p_max:
///
///     p_max (1 - p_max)  <=  ||J||_F  <=  2 (1 - p_max)
///
/// Below them, the summaries chapter 04 tabulates: one row's statistics (weight_stats), totals
/// over many rows (WeightRowsTally), and the plain statistics those tables need (two_largest,
/// median, mean_std_min_max).
///
/// The functions take the weights as float (what softmax_rows() returns) and compute in
/// double. Wherever the formula has 1 - p_i they use the sum of the other weights instead: the
/// two are equal for an exact distribution, but for a saturated row such as
/// p = (1.0f, 3e-12f, ...) the float 1 - p_max is exactly 0 while the other weights still
/// say how far from one-hot the row is.
#pragma once

#include "attn/core/matrix.hpp"

#include <span>
#include <utility>
#include <vector>

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

// ---- One row of weights, and many ---------------------------------------------------------------

/// What a table of attention rows reports about one row p of weights.
struct WeightStats {
  double largest = 0.0;        ///< p_max: how much the favourite key takes
  double runner_up = 0.0;      ///< the second largest weight (0 when p has one weight)
  double entropy = 0.0;        ///< entropy(p), in nats
  double jacobian_norm = 0.0;  ///< softmax_jacobian_norm(p): how much gradient gets through
  Index argmax = 0;            ///< where p_max is (the first such index on a tie)
  Index above = 0;             ///< weights above the threshold: the keys still in play
  Index zeros = 0;             ///< weights exactly 0: underflowed in float, not just small
};

/// The statistics of one row of weights; `threshold` decides which weights count as `above`
/// (1e-3: a key that gets less hardly moves the output). Same requirements on p as entropy(),
/// and p must not be empty (std::invalid_argument otherwise).
WeightStats weight_stats(std::span<const float> p, double threshold = 1e-3);

/// Totals over many rows of weights (say 512 attention rows drawn at one d_k, fed in batches),
/// for their mean largest weight, mean entropy and the mean and median of their Jacobian norms.
/// The median is there because the mean norm of saturated rows is carried by the few rows whose
/// two best logits nearly tie, while the median says what the typical row lets through.
class WeightRowsTally {
 public:
  WeightRowsTally() = default;
  /// The tally of the rows of P alone.
  explicit WeightRowsTally(MatrixView P) { add(P); }

  /// Adds every row of P [rows x n], each a distribution (same requirements as entropy()).
  void add(MatrixView P);

  Index rows() const { return static_cast<Index>(jacobian_norms_.size()); }
  /// The mean over the rows added so far of p_max, of entropy(p), of softmax_jacobian_norm(p),
  /// and the median of the latter. Each throws std::invalid_argument before any row is added.
  double mean_largest() const;
  double mean_entropy() const;
  double mean_jacobian_norm() const;
  double median_jacobian_norm() const;
  /// softmax_jacobian_norm of every row, in the order they were added.
  const std::vector<double>& jacobian_norms() const { return jacobian_norms_; }

 private:
  double largest_sum_ = 0.0, entropy_sum_ = 0.0;  // summed in double, in the order added
  std::vector<double> jacobian_norms_;            // one per row: the rows() count
};

// ---- Plain statistics of a row ------------------------------------------------------------------

/// The two largest entries of v, largest first (equal on a tie): the leader and the runner-up
/// of a row of logits or weights, whose gap is the leader's margin (exp(gap) times the
/// runner-up's weight). v needs two entries or more and no NaN (std::invalid_argument).
std::pair<float, float> two_largest(std::span<const float> v);

/// The middle value of v, the mean of the two middle ones for an even count (v is not
/// reordered). Throws std::invalid_argument for an empty v or one holding a NaN.
double median(std::span<const double> v);

/// Mean, standard deviation (dividing by the count: the spread of these very samples), smallest
/// and largest entry of m, computed in double, as one [1 x 4] row: the row of a summary table.
/// Throws std::invalid_argument for an empty m.
Eigen::RowVectorXd mean_std_min_max(const Matrix& m);

}  // namespace attn
