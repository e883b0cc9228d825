/// @file
/// Softmax cross-entropy over a vocabulary, as torch.nn.functional.cross_entropy defines it,
/// with an ignored (padding) id and label smoothing, and its gradient with respect to the logits.
///
/// For a row of logits z [V] with target y, p = softmax(z) and log p_c = z_c - logsumexp(z):
///
///     loss_row = (1 - eps) (-log p_y) + (eps / V) sum_c (-log p_c)
///     d loss_row / d z = p - (1 - eps) onehot(y) - eps / V
///
/// eps is the label smoothing (the paper trains with 0.1): the target is the mixture
/// (1 - eps) onehot(y) + eps / V, every class (the target and the padding id included) getting
/// eps / V, exactly as PyTorch 1.13 spreads it. The gradient is "what the model predicted minus
/// what it should have": p - target, which is why softmax and cross-entropy are always fused.
///
/// Rows whose target is `ignore_index` (padding) count for nothing: no loss, a zero gradient row,
/// and they are not in the mean's denominator, which is the number of counted rows (PyTorch's
/// reduction="mean" with ignore_index). When every row is ignored the loss is 0 with a zero
/// gradient (PyTorch returns NaN, 0 / 0; a batch of padding is not a reason to stop training).
///
/// log-sum-exp is taken after subtracting the row's maximum, and the sums are kept in double, so
/// logits of any finite size are safe; a NaN or an infinity in a counted row makes the loss
/// non-finite, which the training loop reports (garbage in is loud).
#pragma once

#include "attn/core/matrix.hpp"

#include <span>

namespace attn {

enum class Reduction {
  mean,  ///< divided by the number of counted rows (PyTorch's default)
  sum,   ///< summed: a caller splitting a batch into sequences divides once by the total count
};

struct CrossEntropyOptions {
  int ignore_index = -100;       ///< a target equal to this counts for nothing (PyTorch's default)
  double label_smoothing = 0.0;  ///< eps in [0, 1]
  Reduction reduction = Reduction::mean;
};

/// The loss and its gradient, computed together (the gradient needs p, which the loss computes).
template <Real T>
struct CrossEntropyOf {
  T loss = 0;            ///< the mean (or the sum) over the counted rows
  MatrixOf<T> d_logits;  ///< [N x V], d loss / d logits; zero rows where the target is ignored
  Index count = 0;       ///< the counted rows (targets other than ignore_index)
  Index correct = 0;     ///< of those, the rows whose largest logit (the first, on a tie) is y
};
using CrossEntropy = CrossEntropyOf<float>;
using CrossEntropyD = CrossEntropyOf<double>;

/// logits [N x V], one row per position, targets [N] in [0, V) or ignore_index. Throws
/// std::invalid_argument naming the shapes, a target outside the vocabulary (its position), or
/// a label smoothing outside [0, 1].
CrossEntropy cross_entropy(const MatrixView& logits, std::span<const int> targets,
                           const CrossEntropyOptions& opts = {});
CrossEntropyD cross_entropy(const MatrixViewD& logits, std::span<const int> targets,
                            const CrossEntropyOptions& opts = {});

}  // namespace attn
