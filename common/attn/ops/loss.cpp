// loss.cpp: softmax cross-entropy with ignore_index and label smoothing, loss and gradient.
#include "attn/ops/loss.hpp"

#include <cmath>
#include <string>

namespace attn {

namespace {

template <Real T>
CrossEntropyOf<T> softmax_cross_entropy(const ViewOf<T>& logits, std::span<const int> targets,
                                        const CrossEntropyOptions& opts) {
  const Index N = logits.rows(), V = logits.cols();
  require(static_cast<Index>(targets.size()) == N && V >= 1, "cross_entropy", [&] {
    return "logits are " + shape_str(logits) + " for " + std::to_string(targets.size()) +
           " targets: they must be [N x V], one row per target, V >= 1";
  });
  const double eps = opts.label_smoothing;
  require(eps >= 0.0 && eps <= 1.0, "cross_entropy", "label_smoothing must be in [0, 1]");
  for (Index i = 0; i < N; ++i) {
    const int y = targets[static_cast<std::size_t>(i)];
    require(y == opts.ignore_index || (y >= 0 && y < V), "cross_entropy", [&] {
      return "targets[" + std::to_string(i) + "] = " + std::to_string(y) + " is neither in [0, " +
             std::to_string(V) + ") nor the ignore_index " + std::to_string(opts.ignore_index);
    });
  }
  CrossEntropyOf<T> r;
  r.d_logits = MatrixOf<T>::Zero(N, V);  // [N x V]
  double total = 0.0;
  Eigen::RowVectorXd p(V);
  for (Index i = 0; i < N; ++i) {
    const int y = targets[static_cast<std::size_t>(i)];
    if (y == opts.ignore_index) continue;
    ++r.count;
    // log p_c = z_c - logsumexp(z), with the maximum taken out first.
    const auto z = logits.row(i).template cast<double>();  // [1 x V]
    Index best = 0;
    const double max = z.maxCoeff(&best);
    r.correct += best == y;  // the prediction, argmax z, is right
    p = (z.array() - max).exp();
    const double log_sum = max + std::log(p.sum());
    p /= p.sum();                              // softmax
    const double nll = log_sum - z(y);         // -log p_y
    const double smooth = log_sum - z.mean();  // (1/V) sum_c -log p_c
    total += (1.0 - eps) * nll + eps * smooth;
    p.array() -= eps / static_cast<double>(V);  // p - eps / V
    p(y) -= 1.0 - eps;                          //   - (1 - eps) onehot(y)
    r.d_logits.row(i) = p.template cast<T>();
  }
  if (r.count == 0) return r;
  const double scale = opts.reduction == Reduction::mean ? 1.0 / static_cast<double>(r.count) : 1.0;
  r.loss = static_cast<T>(total * scale);
  if (scale != 1.0) r.d_logits *= static_cast<T>(scale);
  return r;
}

}  // namespace

CrossEntropy cross_entropy(const MatrixView& logits, std::span<const int> targets,
                           const CrossEntropyOptions& opts) {
  return softmax_cross_entropy<float>(logits, targets, opts);
}

CrossEntropyD cross_entropy(const MatrixViewD& logits, std::span<const int> targets,
                            const CrossEntropyOptions& opts) {
  return softmax_cross_entropy<double>(logits, targets, opts);
}

}  // namespace attn
