/// @file
/// A batch's forward and backward, its sequences side by side on every core, with the same bytes
/// for any number of threads. Used by the training losses (seq2seq.cpp, attention_only.cpp);
/// include it only from the library's .cpp files, which compile with OpenMP.
///
/// A batch's gradient is a sum over its sequences, and a float sum's rounding depends on its
/// order. So the order is fixed by the batch, never by the threads:
///
///     the B sequences are cut into S = min(B, kGradientShards) runs of consecutive sequences;
///     shard s is computed by one thread, its sequences in order, into its own zeroed gradient;
///     the shards' gradients are then added into the caller's, shard 0 first.
///
/// The threads decide only who computes a shard, never what is summed in which order: one
/// thread or sixteen, the caller gets the same bits. (They differ, by rounding, from one serial
/// sum over all B sequences: that sum groups the terms differently.)
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/threads.hpp"
#include "attn/layers/parameters.hpp"

#include <algorithm>
#include <exception>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace attn::detail {

/// At most this many shards (and gradient copies) per batch: enough to keep 8 cores busy,
/// few enough that the copies cost little next to the sequences' forward and backward passes.
inline constexpr Index kGradientShards = 8;

/// Every tensor of a model as a flat span of its numbers, in for_each_parameter's order.
template <typename Model>
std::vector<std::span<typename Model::Scalar>> tensor_spans(Model& model) {
  std::vector<std::span<typename Model::Scalar>> spans;
  for_each_parameter(model, "", [&](const std::string&, auto& t, Index) {
    spans.emplace_back(t.data(), static_cast<std::size_t>(t.size()));
  });
  return spans;
}

/// The shards' gradients and caches, kept between calls by the calling thread: a training step
/// then allocates nothing for them, and the threads fault no fresh pages (a copy of the model per
/// shard and call cost the two-core run a third of its speed-up). Rebuilt when the model's
/// tensor shapes change.
template <typename Model, typename Cache>
struct ShardWorkspace {
  std::vector<std::pair<Index, Index>> shapes;  // the model's tensors', as the buffers were made
  Index numbers = 0;                            // the model's parameters, counted
  std::vector<Model> grads;                     // [shards], each shaped like the model
  std::vector<std::vector<std::span<typename Model::Scalar>>> grad_tensors;  // their numbers
  std::vector<Cache> caches;                                                 // [shards]

  /// Room for `shards` caches and, `with_grads`, as many gradients. `grads` is reserved for
  /// kGradientShards once, so it never reallocates and the spans into it stay valid; a gradient
  /// whose spans could not be made is taken back, so the two lists always have one length.
  void fit(const Model& model, Index shards, bool with_grads) {
    std::vector<std::pair<Index, Index>> now;
    for_each_parameter(model, "", [&](const std::string&, const auto& t, Index) {
      now.emplace_back(t.rows(), t.cols());
    });
    if (now != shapes) {
      grads.clear();
      grad_tensors.clear();
      shapes = std::move(now);
      numbers = 0;
      for (const auto& [rows, cols] : shapes) numbers += rows * cols;
    }
    const auto S = static_cast<std::size_t>(shards);
    if (caches.size() < S) caches.resize(S);
    if (!with_grads) return;
    grads.reserve(static_cast<std::size_t>(kGradientShards));
    while (grad_tensors.size() < S) {
      grads.push_back(zeros_like(model));
      try {
        grad_tensors.push_back(tensor_spans(grads.back()));
      } catch (...) {
        grads.pop_back();
        throw;
      }
    }
  }
};

/// Throws std::invalid_argument from `where` for a negative thread count (0 means the default).
inline void check_threads(int threads, const char* where) {
  require(threads >= 0, where, [&] {
    return "threads is " + std::to_string(threads) + ": it must be >= 0 (0: default_threads())";
  });
}

/// Calls `one(first, last, cache, shard_grads)` for each of `shards` runs of consecutive
/// sequences [first, last) that cut [0, B) (shard s: [s B / shards, (s + 1) B / shards)), the
/// shards on OpenMP threads (`threads`; 0: default_threads(), or one thread when the batch is
/// too small to be worth a parallel region: `tokens`, the tokens the model reads in all, times
/// 2 flops per parameter, three times that with gradients, under kThreadedFlops). `cache` is a
/// Cache kept for the shard; `shard_grads` is the shard's zeroed gradient, or nullptr when
/// `grads` is. The shards' gradients are added into *grads in shard order. If any call throws,
/// the first shard's exception (in shard order) is rethrown after every thread has finished,
/// and *grads is left untouched.
template <typename Cache, typename Model, typename One>
void for_each_shard(Index B, Index shards, Index tokens, const Model& model, Model* grads,
                    int threads, One&& one) {
  if (B <= 0) return;
  shards = std::clamp<Index>(shards, 1, std::min(B, kGradientShards));
  thread_local ShardWorkspace<Model, Cache> kept;
  // The calling thread's workspace, by reference: inside the parallel region the name `kept`
  // would mean each worker's own (empty) one.
  ShardWorkspace<Model, Cache>& work = kept;
  work.fit(model, shards, grads != nullptr);
  std::vector<std::exception_ptr> failed(static_cast<std::size_t>(shards));
  // A forward costs about 2 flops per parameter and token, a backward twice that again.
  const double flops =
      (grads ? 6.0 : 2.0) * static_cast<double>(tokens) * static_cast<double>(work.numbers);
  const int team = team_for(threads, shards, flops);
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
  for (Index s = 0; s < shards; ++s) {
    const auto at = static_cast<std::size_t>(s);
    // An exception must not leave an OpenMP region: it is kept and rethrown below.
    try {
      // A shard's gradient is zeros here: made so, and zeroed again as it is added below.
      Model* g = grads ? &work.grads[at] : nullptr;
      one(s * B / shards, (s + 1) * B / shards, work.caches[at], g);
    } catch (...) {
      failed[at] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : failed) {
    if (!e) continue;
    // The shards' gradients hold parts of a sum that will not be made: zeros again for the
    // next call.
    if (grads) {
      for (Index s = 0; s < shards; ++s) {
        for (std::span<typename Model::Scalar> t : work.grad_tensors[static_cast<std::size_t>(s)]) {
          std::fill(t.begin(), t.end(), typename Model::Scalar(0));
        }
      }
    }
    std::rethrow_exception(e);
  }
  if (!grads) return;
  // Each entry adds the shards' parts in shard order, a tensor at a time (a tensor's sum stays in
  // cache while its parts are added); the tensors are shared out among the threads, which
  // changes who adds, never the order of the additions. A part is zeroed as it is read, while
  // it is in cache: the next call finds its shard's gradient zeros without a pass of its own.
  const auto total = tensor_spans(*grads);
  const auto tensors = static_cast<Index>(total.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
  for (Index i = 0; i < tensors; ++i) {
    const auto at = static_cast<std::size_t>(i);
    typename Model::Scalar* __restrict sum = total[at].data();
    for (Index s = 0; s < shards; ++s) {
      typename Model::Scalar* __restrict part =
          work.grad_tensors[static_cast<std::size_t>(s)][at].data();
      for (std::size_t k = 0; k < total[at].size(); ++k) {
        sum[k] += part[k];
        part[k] = typename Model::Scalar(0);
      }
    }
  }
}

/// Calls `one(b, cache, shard_grads)` for every sequence b in [0, B): for_each_shard with
/// min(B, kGradientShards) shards, the sequences of a shard in order.
template <typename Cache, typename Model, typename One>
void for_each_sequence(Index B, Index tokens, const Model& model, Model* grads, int threads,
                       One&& one) {
  for_each_shard<Cache>(B, std::min(B, kGradientShards), tokens, model, grads, threads,
                        [&](Index first, Index last, Cache& cache, Model* g) {
                          for (Index b = first; b < last; ++b) one(b, cache, g);
                        });
}

}  // namespace attn::detail
