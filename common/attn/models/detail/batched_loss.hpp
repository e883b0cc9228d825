/// @file
/// The mean cross-entropy of a batch of sequences, and its gradient: the skeleton both models'
/// losses share (seq2seq_loss, attention_only_loss), which differ only in how one sequence is
/// run forward and backward. Include it only from the library's .cpp files (OpenMP).
///
/// Every sequence's loss is a sum over its counted targets (Reduction::sum); the batch's loss is
/// the sum of those over the batch's count, added in batch order in double. Each sequence's
/// d_logits is scaled by 1/count before its backward, so the gradients add up to the gradient of
/// the batch mean, sequence by sequence (sequence_shards.hpp fixes the order they are added in).
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/models/detail/sequence_shards.hpp"
#include "attn/ops/loss.hpp"

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace attn::detail {

/// Fills `step` (a Seq2SeqStepOf or AttentionOnlyStepOf: loss, count, correct, logits) for a
/// batch of B sequences; the caller has set step.count, the batch's counted targets:
///
///     forward(b, cache)                      -> std::pair{logits [n x V], targets [n]}
///     backward(b, cache, d_logits, grads)    accumulates sequence b's gradient into grads
///
/// `tokens` is what the model reads in all (for the thread decision, sequence_shards.hpp);
/// `grads` null means no backward; `keep_logits` copies every sequence's logits into the step.
template <typename Cache, typename Model, typename Step, typename Forward, typename Backward>
void batched_loss(const Model& model, Model* grads, Index B, Index tokens,
                  const CrossEntropyOptions& opts, bool keep_logits, int threads, Step& step,
                  Forward&& forward, Backward&& backward) {
  using T = typename Model::Scalar;
  std::vector<double> losses(static_cast<std::size_t>(B));  // each sequence's summed loss
  std::vector<Index> correct(static_cast<std::size_t>(B));
  if (keep_logits) step.logits.resize(static_cast<std::size_t>(B));
  // The sequences side by side; their gradients summed in an order fixed by the batch.
  for_each_sequence<Cache>(B, tokens, model, grads, threads,
                           [&](Index b, Cache& cache, Model* shard_grads) {
                             const auto at = static_cast<std::size_t>(b);
                             const auto [logits, targets] = forward(b, cache);  // [n x V], [n]
                             CrossEntropyOf<T> ce = cross_entropy(logits, targets, opts);
                             losses[at] = static_cast<double>(ce.loss);
                             correct[at] = ce.correct;
                             if (keep_logits) step.logits[at] = logits;
                             if (shard_grads && step.count > 0) {
                               // Each sequence's sum, over the batch's count: the batch mean,
                               // sequence by sequence.
                               ce.d_logits *= static_cast<T>(1.0 / static_cast<double>(step.count));
                               backward(b, cache, ce.d_logits, *shard_grads);
                             }
                           });
  double total = 0.0;
  for (Index b = 0; b < B; ++b) {
    total += losses[static_cast<std::size_t>(b)];
    step.correct += correct[static_cast<std::size_t>(b)];
  }
  step.loss = step.count > 0 ? static_cast<T>(total / static_cast<double>(step.count)) : T(0);
}

}  // namespace attn::detail
