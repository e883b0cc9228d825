// attention_only.cpp: the attention-only decoder, one sequence at a time, forward and backward.
#include "attn/models/attention_only.hpp"

#include "attn/core/memory.hpp"
#include "attn/layers/embedding.hpp"
#include "attn/models/detail/batched_loss.hpp"
#include "attn/ops/masks.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace attn {

namespace {

template <Real T>
T embedding_scale(const AttentionOnlyOf<T>& model) {
  return static_cast<T>(std::sqrt(static_cast<double>(model.d_model())));
}

}  // namespace

AttentionOnly attention_only_init(Rng& rng, const AttentionOnlyConfig& c) {
  require_at_least_one(c.vocab, "attention_only_init", "vocab");
  check_head_sizes(c.d_model, c.heads, "attention_only_init");
  require_at_least_one(c.layers, "attention_only_init", "layers");
  require_at_least_one(c.context, "attention_only_init", "context");
  const double std_dev = c.embedding_std.value_or(1.0 / std::sqrt(static_cast<double>(c.d_model)));
  require(std::isfinite(std_dev) && std_dev > 0.0, "attention_only_init", [&] {
    return "embedding_std is " + std::to_string(std_dev) + ": it must be finite and > 0";
  });
  // Every tensor the loop below draws, counted before the first is: tok_embed and unembed
  // [V x E], pos_embed [T x E], per layer four [E x E] projections, four biases and a norm
  // ([E] each, six), the final norm [E] twice and unembed's bias [V].
  ElementCount count(c.vocab, c.d_model, 2);
  count.add(c.context, c.d_model)
      .add(ElementCount(c.d_model, c.d_model, 4).add(1, c.d_model, 6), c.layers)
      .add(1, c.d_model, 2)
      .add(1, c.vocab);
  require_fits_in_memory("attention_only_init", count, sizeof(float), "of parameters", [&] {
    return "d_model " + std::to_string(c.d_model) + " (vocab " + std::to_string(c.vocab) +
           ", layers " + std::to_string(c.layers) + ", context " + std::to_string(c.context) + ")";
  });
  AttentionOnly m;
  m.tok_embed = random_normal(rng, c.vocab, c.d_model, 0.0, std_dev);  // [V x E]
  m.pos_embed = random_normal(rng, c.context, c.d_model);              // [T x E], N(0, 1)
  for (Index l = 0; l < c.layers; ++l) {
    m.layers.push_back({layer_norm_init(c.d_model), multi_head_init(rng, c.d_model, c.heads)});
  }
  m.norm = layer_norm_init(c.d_model);
  m.unembed = linear_init(rng, c.d_model, c.vocab);  // weight [V x E], bias [1 x V]
  return m;
}

template <Real T>
MatrixOf<T> attention_only_forward(const AttentionOnlyOf<T>& model, std::span<const int> ids,
                                   AttentionOnlyCacheOf<T>* cache, NeedWeights need) {
  const auto n = static_cast<Index>(ids.size());
  require(n >= 1 && n <= model.context(), "attention_only_forward", [&] {
    return "the sequence has " + std::to_string(n) + " tokens: it must have 1 to " +
           std::to_string(model.context()) + " (the context T, pos_embed's rows)";
  });
  require(model.pos_embed.cols() == model.d_model(), "attention_only_forward", [&] {
    return "pos_embed is " + shape_str(model.pos_embed) + " but tok_embed is " +
           shape_str(model.tok_embed) + ": both must have d_model columns";
  });
  // Checked here rather than left to embedding_forward, so that the message names this function.
  for (Index i = 0; i < n; ++i) {
    const int id = ids[static_cast<std::size_t>(i)];
    require(id >= 0 && id < model.vocab(), "attention_only_forward", [&] {
      return "ids[" + std::to_string(i) + "] = " + std::to_string(id) +
             " is outside the vocabulary [0, " + std::to_string(model.vocab()) + ")";
    });
  }
  AttentionOnlyCacheOf<T> local;
  AttentionOnlyCacheOf<T>& c = cache ? *cache : local;
  // Query i may read keys 0..i only: the prediction at i never sees the token it predicts.
  const AllowedMask causal = causal_mask(n);  // [n x n]
  // ---- embeddings -------------------------------------------------------------------------------
  MatrixOf<T> x = embedding_forward(model.tok_embed, ids);  // [n x E]
  x *= embedding_scale(model);
  x += model.pos_embed.topRows(n);
  // ---- attention layers, pre-norm: the stream itself is never normalised, only what is read ----
  c.layers.resize(model.layers.size());
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const AttentionOnlyLayerOf<T>& layer = model.layers[l];
    AttentionOnlyLayerCacheOf<T>& lc = c.layers[l];
    lc.x = x;                                                    // [n x E]
    lc.normed = layer_norm_forward(layer.norm, lc.x, &lc.norm);  // [n x E]
    lc.attn = multi_head_forward(layer.attn, lc.normed, lc.normed, lc.normed,
                                 {.allowed = causal, .need_weights = need == NeedWeights::yes});
    x += lc.attn.out;  // the residual: x + MHA(LN(x))
  }
  // ---- the final norm and the unembedding -------------------------------------------------------
  c.norm_in = std::move(x);                                       // [n x E]
  c.normed = layer_norm_forward(model.norm, c.norm_in, &c.norm);  // [n x E]
  c.logits = linear_forward(model.unembed, c.normed);             // [n x V]
  return c.logits;
}

template <Real T>
void attention_only_backward(const AttentionOnlyOf<T>& model, std::span<const int> ids,
                             const AttentionOnlyCacheOf<T>& c, const InView<T>& d_logits,
                             AttentionOnlyOf<T>& grads) {
  const auto n = static_cast<Index>(ids.size());
  require(
      d_logits.rows() == n && d_logits.cols() == model.vocab() && c.normed.rows() == n &&
          c.layers.size() == model.layers.size() && grads.layers.size() == model.layers.size() &&
          grads.pos_embed.rows() == model.context() && grads.pos_embed.cols() == model.d_model(),
      "attention_only_backward", [&] {
        return "d_logits is " + shape_str(d_logits) + " for " + std::to_string(n) +
               " tokens and a cache of " + std::to_string(c.normed.rows()) + " tokens and " +
               std::to_string(c.layers.size()) +
               " layers: pass the cache of this "
               "sequence's forward, d_logits [n x V] and grads = zeros_like(model)";
      });
  check_grads_like(model, grads, "attention_only_backward", {{"d_logits", memory_of(d_logits)}});
  // ---- logits = LN_final(x) W^T + b -------------------------------------------------------------
  MatrixOf<T> d_x = linear_backward(model.unembed, c.normed, d_logits, grads.unembed);  // [n x E]
  d_x = layer_norm_backward(model.norm, c.norm_in, c.norm, d_x, grads.norm);
  // ---- layers, last first -----------------------------------------------------------------------
  // x_out = x + MHA(LN(x)): d_x passes straight through the sum, and once more through the
  // attention and the norm.
  for (std::size_t l = model.layers.size(); l-- > 0;) {
    const AttentionOnlyLayerOf<T>& layer = model.layers[l];
    const AttentionOnlyLayerCacheOf<T>& lc = c.layers[l];
    MultiHeadInputGradsOf<T> g = multi_head_backward(layer.attn, lc.normed, lc.normed, lc.normed,
                                                     lc.attn, d_x, grads.layers[l].attn);
    // LN(x) was query, key and value at once: its gradient is the sum of the three.
    g.d_query += g.d_key;
    g.d_query += g.d_value;  // [n x E]
    d_x += layer_norm_backward(layer.norm, lc.x, lc.norm, g.d_query, grads.layers[l].norm);
  }
  // ---- x = tok_embed[ids] sqrt(E) + pos_embed[:n] -----------------------------------------------
  grads.pos_embed.topRows(n) += d_x;  // row i of the table was added to row i of x
  d_x *= embedding_scale(model);
  embedding_backward(ids, d_x, grads.tok_embed);
}

template <Real T>
AttentionOnlyStepOf<T> attention_only_loss(const AttentionOnlyOf<T>& model,
                                           const AttentionOnlyBatch& batch,
                                           std::type_identity_t<AttentionOnlyOf<T>>* grads,
                                           bool keep_logits, int threads) {
  const Index B = batch.inputs.rows(), n = batch.inputs.cols();
  require(batch.targets.rows() == B && batch.targets.cols() == n, "attention_only_loss", [&] {
    return "inputs are " + shape_str(batch.inputs) + " and targets " + shape_str(batch.targets) +
           ": one target per input token, [B x n] both";
  });
  if (grads) check_grads_like(model, *grads, "attention_only_loss");
  detail::check_threads(threads, "attention_only_loss");
  AttentionOnlyStepOf<T> step;
  step.count = (batch.targets.array() != batch.ignore_id).count();
  const CrossEntropyOptions loss_opts{.ignore_index = batch.ignore_id, .reduction = Reduction::sum};
  const auto row = [n](const TokenIds& ids, Index b) {
    return std::span<const int>(ids.row(b).data(), static_cast<std::size_t>(n));
  };
  detail::batched_loss<AttentionOnlyCacheOf<T>>(
      model, grads, B, B * n, loss_opts, keep_logits, threads, step,
      [&](Index b, AttentionOnlyCacheOf<T>& cache) {
        return std::pair(attention_only_forward(model, row(batch.inputs, b), &cache),  // [n x V]
                         row(batch.targets, b));                                       // [n]
      },
      [&](Index b, const AttentionOnlyCacheOf<T>& cache, const MatrixOf<T>& d_logits,
          AttentionOnlyOf<T>& shard_grads) {
        attention_only_backward(model, row(batch.inputs, b), cache, d_logits, shard_grads);
      });
  return step;
}

#define ATTN_INSTANTIATE(T)                                                                    \
  template MatrixOf<T> attention_only_forward(const AttentionOnlyOf<T>&, std::span<const int>, \
                                              AttentionOnlyCacheOf<T>*, NeedWeights);          \
  template void attention_only_backward(const AttentionOnlyOf<T>&, std::span<const int>,       \
                                        const AttentionOnlyCacheOf<T>&, const InView<T>&,      \
                                        AttentionOnlyOf<T>&);                                  \
  template AttentionOnlyStepOf<T> attention_only_loss(                                         \
      const AttentionOnlyOf<T>&, const AttentionOnlyBatch&,                                    \
      std::type_identity_t<AttentionOnlyOf<T>>*, bool, int);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
