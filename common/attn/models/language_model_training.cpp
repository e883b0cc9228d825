// language_model_training.cpp: the language model's loss on a batch of stacked windows, forward
// and backward, layer by layer in reverse.
#include "attn/models/language_model_training.hpp"

#include "attn/core/gemm.hpp"
#include "attn/layers/embedding.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/models/detail/sequence_shards.hpp"
#include "attn/ops/loss.hpp"

#include <span>
#include <string>
#include <vector>

namespace attn {

namespace {

template <Real T>
void check_batch_ids(const LanguageModelOf<T>& model, const TokenIds& ids, const char* what,
                     const char* where) {
  for (Index b = 0; b < ids.rows(); ++b) {
    for (Index i = 0; i < ids.cols(); ++i) {
      require(ids(b, i) >= 0 && ids(b, i) < model.vocab(), where, [&] {
        return std::string(what) + " id " + std::to_string(ids(b, i)) + " in row " +
               std::to_string(b) + " at position " + std::to_string(i) +
               " is outside the vocabulary [0, " + std::to_string(model.vocab()) + ")";
      });
    }
  }
}

template <Real T>
void check_inputs(const LanguageModelOf<T>& model, const TokenIds& inputs, const char* where) {
  require(inputs.rows() >= 1 && inputs.cols() >= 1, where, [&] {
    return "the inputs are " + shape_str(inputs.rows(), inputs.cols()) +
           ": a batch needs at least one window of at least one token";
  });
  require(inputs.cols() <= model.config.context, where, [&] {
    return "windows of " + std::to_string(inputs.cols()) +
           " tokens are longer than the context of " + std::to_string(model.config.context) +
           " positions";
  });
  check_batch_ids(model, inputs, "input", where);
}

template <Real T>
std::span<const int> flat(const TokenIds& ids) {
  return {ids.data(), static_cast<std::size_t>(ids.size())};
}

}  // namespace

template <Real T>
const MatrixOf<T>& language_model_forward_batch(const LanguageModelOf<T>& model,
                                                const TokenIds& inputs,
                                                LanguageModelCacheOf<T>& cache, bool need_weights,
                                                int threads) {
  check_inputs(model, inputs, "language_model_forward_batch");
  const Index B = inputs.rows();
  const GroupedQueryOptions attn_opts{.causal = true,
                                      .window = model.config.window,
                                      .rope = &model.rope,
                                      .rope_layout = model.config.rope_layout,
                                      .need_weights = need_weights,
                                      .sequences = B,
                                      .threads = threads};
  cache.blocks.resize(model.blocks.size());
  MatrixOf<T> x = embedding_forward(model.tok_embed, flat<T>(inputs));  // [B n x E]
  for (std::size_t l = 0; l < model.blocks.size(); ++l) {
    const LanguageModelBlockOf<T>& block = model.blocks[l];
    LanguageModelBlockCacheOf<T>& c = cache.blocks[l];
    c.x = std::move(x);
    c.normed1 = layer_norm_forward(block.norm1, c.x, &c.norm1);        // [B n x E]
    c.attn = grouped_query_forward(block.attn, c.normed1, attn_opts);  // out [B n x E]
    c.mid = c.x + c.attn.out;                                          // [B n x E]
    c.normed2 = layer_norm_forward(block.norm2, c.mid, &c.norm2);      // [B n x E]
    x = c.mid + ffn_forward(block.ffn, c.normed2, &c.ffn);             // [B n x E]
  }
  cache.final_in = std::move(x);
  cache.normed = layer_norm_forward(model.norm, cache.final_in, &cache.norm);  // [B n x E]
  cache.logits.resize(cache.normed.rows(), model.vocab());                     // [B n x V]
  gemm<T>(cache.normed, Op::plain, model.head_weight(), Op::transposed, cache.logits);
  return cache.logits;
}

namespace {

// The backward pass of one forward (`c`, on ids `inputs`), given d_logits [rows x V]: every
// layer's backward from the top down, the gradients accumulated into g.
template <Real T>
void backward_batch(const LanguageModelOf<T>& model, const TokenIds& inputs,
                    const LanguageModelCacheOf<T>& c, const MatrixOf<T>& d_logits,
                    LanguageModelOf<T>& g) {
  // logits = normed W_head^T: the head's weight gets d_logits^T normed; tied, that is tok_embed.
  MatrixOf<T>& d_head = model.config.tied_embeddings ? g.tok_embed : g.lm_head.weight;
  gemm<T>(d_logits, Op::transposed, c.normed, Op::plain, d_head, Accumulate::yes);  // [V x E]
  MatrixOf<T> d_normed(c.normed.rows(), c.normed.cols());                           // [B n x E]
  gemm<T>(d_logits, Op::plain, model.head_weight(), Op::plain, d_normed);
  MatrixOf<T> dx = layer_norm_backward(model.norm, c.final_in, c.norm, d_normed, g.norm);
  for (std::size_t l = model.blocks.size(); l-- > 0;) {
    const LanguageModelBlockOf<T>& block = model.blocks[l];
    LanguageModelBlockOf<T>& gb = g.blocks[l];
    const LanguageModelBlockCacheOf<T>& bc = c.blocks[l];
    // x_out = mid + FFN(LN2(mid)): the gradient reaches mid directly and through the FFN.
    const MatrixOf<T> d_normed2 = ffn_backward(block.ffn, bc.normed2, bc.ffn, dx, gb.ffn);
    dx += layer_norm_backward(block.norm2, bc.mid, bc.norm2, d_normed2, gb.norm2);  // d mid
    // mid = x + GQA(LN1(x)): the same two ways.
    const MatrixOf<T> d_normed1 =
        grouped_query_backward(block.attn, bc.normed1, bc.attn, dx, gb.attn);
    dx += layer_norm_backward(block.norm1, bc.x, bc.norm1, d_normed1, gb.norm1);  // d x
  }
  embedding_backward(flat<T>(inputs), dx, g.tok_embed);  // rows of a repeated id add up
}

// Rows a shard of the batch should hold at least: a product over fewer rows reuses each weight
// fewer times and runs slower, more rows per shard leave cores idle.
constexpr Index kShardRows = 192;

// The shards a batch of B windows of n tokens is cut into: a power of two (so that 2, 4 or 8
// cores share them evenly), at most B and kGradientShards, at least one. A function of the
// batch alone: the threads decide who computes a shard, never what a shard sums.
Index shard_count(Index B, Index n) {
  Index shards = 1;
  while (2 * shards <= detail::kGradientShards && 2 * shards <= B &&
         2 * shards * kShardRows <= B * n) {
    shards *= 2;
  }
  return shards;
}

// What a shard keeps between steps: its forward's cache and its windows.
template <Real T>
struct ShardCache {
  LanguageModelCacheOf<T> forward;
  TokenIds inputs;
};

}  // namespace

template <Real T>
LanguageModelStepOf<T> language_model_loss(const LanguageModelOf<T>& model,
                                           const LanguageModelBatch& batch,
                                           std::type_identity_t<LanguageModelOf<T>>* grads,
                                           std::type_identity_t<LanguageModelCacheOf<T>>* cache,
                                           bool need_weights, int threads) {
  const char* where = "language_model_loss";
  check_inputs(model, batch.inputs, where);
  require(
      batch.targets.rows() == batch.inputs.rows() && batch.targets.cols() == batch.inputs.cols(),
      where, [&] {
        return "the targets are " + shape_str(batch.targets.rows(), batch.targets.cols()) +
               " but the inputs " + shape_str(batch.inputs.rows(), batch.inputs.cols()) +
               ": one target per input position";
      });
  check_batch_ids(model, batch.targets, "target", where);
  detail::check_threads(threads, where);
  if (grads != nullptr) check_grads_like(model, *grads, where);
  const Index B = batch.inputs.rows(), n = batch.inputs.cols();
  LanguageModelStepOf<T> step;
  step.count = B * n;
  // A caller's cache holds the whole batch: one shard. Otherwise the windows are cut into
  // shards that run side by side, each into a gradient of its own, added in shard order
  // (detail/sequence_shards.hpp): the same bytes for any number of threads.
  const Index shards = cache != nullptr ? 1 : shard_count(B, n);
  // Each shard's sum, at its first window's index (the others stay 0), added in batch order.
  std::vector<double> losses(static_cast<std::size_t>(B));
  std::vector<Index> correct(static_cast<std::size_t>(B));
  const auto one = [&](Index first, Index last, ShardCache<T>& shard, LanguageModelOf<T>* g) {
    const auto s = static_cast<std::size_t>(first);
    LanguageModelCacheOf<T>& c = cache != nullptr ? *cache : shard.forward;
    shard.inputs = batch.inputs.middleRows(first, last - first);  // [b x n]
    const TokenIds targets = batch.targets.middleRows(first, last - first);
    // ---- forward ------------------------------------------------------------------------------
    const MatrixOf<T>& logits = language_model_forward_batch(model, shard.inputs, c, need_weights,
                                                             shards == 1 ? threads : 1);
    // Summed here, divided by the batch's B n once: the batch mean, shard by shard.
    CrossEntropyOf<T> ce = cross_entropy(logits, flat<T>(targets), {.reduction = Reduction::sum});
    losses[s] = static_cast<double>(ce.loss);
    correct[s] = ce.correct;
    if (g == nullptr) return;
    // ---- backward, the forward read from the bottom up ----------------------------------------
    ce.d_logits *= static_cast<T>(1.0 / static_cast<double>(step.count));
    backward_batch(model, shard.inputs, c, ce.d_logits, *g);
  };
  detail::for_each_shard<ShardCache<T>>(B, shards, B * n, model, grads, threads, one);
  double total = 0;
  for (std::size_t s = 0; s < losses.size(); ++s) {
    total += losses[s];
    step.correct += correct[s];
  }
  step.loss = static_cast<T>(total / static_cast<double>(step.count));
  return step;
}

#define ATTN_INSTANTIATE(T)                                                             \
  template const MatrixOf<T>& language_model_forward_batch(                             \
      const LanguageModelOf<T>&, const TokenIds&, LanguageModelCacheOf<T>&, bool, int); \
  template LanguageModelStepOf<T> language_model_loss(                                  \
      const LanguageModelOf<T>&, const LanguageModelBatch&, LanguageModelOf<T>*,        \
      LanguageModelCacheOf<T>*, bool, int);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
