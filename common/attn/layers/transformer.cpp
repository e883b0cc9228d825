// transformer.cpp: encoder and decoder layers as residual sub-layers, post- or pre-norm.
#include "attn/layers/transformer.hpp"

#include "attn/core/memory.hpp"
#include "attn/layers/parameters.hpp"

#include <string>
#include <utility>

namespace attn {

namespace {

// One residual step around `sublayer` (a function of the sub-layer's input, [n x d_model]):
//   post-norm: LayerNorm(x + sublayer(x))      pre-norm: x + sublayer(LayerNorm(x))
// The arithmetic is the same with and without a cache; the cache only keeps the pieces.
template <Real T, typename F>
MatrixOf<T> residual(const MatrixOf<T>& x, const LayerNormOf<T>& norm, NormPlacement placement,
                     F&& sublayer, SublayerCacheOf<T>* cache) {
  LayerNormCache* norm_cache = cache ? &cache->norm : nullptr;
  if (placement == NormPlacement::post) {
    MatrixOf<T> s = sublayer(x);  // [n x d_model]
    MatrixOf<T> sum = x + s;      // [n x d_model]: the residual connection
    MatrixOf<T> after = layer_norm_forward(norm, sum, norm_cache);  // [n x d_model]
    if (cache) {
      cache->input = x;
      cache->sublayer_in = x;
      cache->sublayer_out = std::move(s);
      cache->norm_in = std::move(sum);
      cache->output = after;
    }
    return after;
  }
  MatrixOf<T> normed = layer_norm_forward(norm, x, norm_cache);  // [n x d_model]
  MatrixOf<T> s = sublayer(normed);                              // [n x d_model]
  MatrixOf<T> after = x + s;  // [n x d_model]: the residual path carries x untouched
  if (cache) {
    cache->input = x;
    cache->sublayer_in = std::move(normed);
    cache->sublayer_out = std::move(s);
    cache->norm_in = x;
    cache->output = after;
  }
  return after;
}

// The backward of one residual step, given d_out and `sublayer_backward`, which maps dL/d(f's
// output) to dL/d(f's input) and accumulates f's own parameter gradients:
//   post-norm, out = LN(x + f(x)):  d_sum = LN'(d_out), dx = d_sum + f'(d_sum)
//   pre-norm,  out = x + f(LN(x)):  dx = d_out + LN'(f'(d_out))
template <Real T, typename F>
MatrixOf<T> residual_backward(const LayerNormOf<T>& norm, NormPlacement placement,
                              const SublayerCacheOf<T>& cache, const MatrixOf<T>& d_out,
                              F&& sublayer_backward, LayerNormOf<T>& norm_grads) {
  if (placement == NormPlacement::post) {
    MatrixOf<T> d_sum =
        layer_norm_backward(norm, cache.norm_in, cache.norm, d_out, norm_grads);  // [n x d]
    MatrixOf<T> d_x = sublayer_backward(d_sum);  // [n x d] through f
    d_x += d_sum;                                // and straight through the "+ x"
    return d_x;
  }
  const MatrixOf<T> d_normed = sublayer_backward(d_out);  // [n x d] through f
  MatrixOf<T> d_x =
      layer_norm_backward(norm, cache.norm_in, cache.norm, d_normed, norm_grads);  // [n x d]
  d_x += d_out;  // the residual path
  return d_x;
}

// The backward of self-attention, where x was the query, the key and the value: its gradient is
// the sum of the three.
template <Real T>
MatrixOf<T> self_attention_backward(const MultiHeadAttentionOf<T>& mha, const MatrixOf<T>& x,
                                    const MultiHeadResultOf<T>& cache, const MatrixOf<T>& d_out,
                                    MultiHeadAttentionOf<T>& grads) {
  MultiHeadInputGradsOf<T> g = multi_head_backward(mha, x, x, x, cache, d_out, grads);
  g.d_query += g.d_key;
  g.d_query += g.d_value;
  return std::move(g.d_query);  // [n x d_model]
}

// Multi-head attention as a sub-layer: its output, and all it computed into `cache` if given.
template <Real T>
MatrixOf<T> attend(const MultiHeadAttentionOf<T>& mha, const MatrixOf<T>& q, const ViewOf<T>& kv,
                   const std::optional<MaskView>& allowed, bool need_weights,
                   MultiHeadResultOf<T>* cache) {
  MultiHeadResultOf<T> r =
      multi_head_forward(mha, q, kv, kv, {.allowed = allowed, .need_weights = need_weights});
  if (!cache) return std::move(r.out);
  *cache = std::move(r);
  return cache->out;  // [n_q x d_model]
}

// Batch element b's mask of a stack, or none.
std::optional<MaskView> element(const std::optional<BatchMaskView>& masks, Index b) {
  if (!masks) return std::nullopt;
  return masks->element(b);
}

void check_batch(const std::optional<BatchMaskView>& masks, Index B, const char* where,
                 const char* name) {
  require(!masks || masks->fits(B), where, [&] {
    return std::string(name) + " is " + masks->shape_str() + ": its batch must be " +
           std::to_string(B) + " or 1 (shared)";
  });
}

// The sizes of a fresh layer, checked before the sub-layers' inits would check them under
// their own names.
// `attentions` multi-head attentions (four [E x E] projections and four biases [E] each), the
// FFN ([d_ff x E], [E x d_ff] and their biases) and `norms` LayerNorms (2E each), refused
// before the first is drawn when the machine cannot hold them.
void check_layer_sizes(Index d_model, Index heads, Index d_ff, Index attentions, Index norms,
                       const char* where) {
  check_head_sizes(d_model, heads, where);
  require_at_least_one(d_ff, where, "d_ff");
  ElementCount count(d_model, d_model, 4 * attentions);
  count.add(1, d_model, 4 * attentions + 2 * norms + 1).add(d_ff, d_model, 2).add(1, d_ff);
  require_fits_in_memory(where, count, sizeof(float), "of parameters", [&] {
    return "d_model " + std::to_string(d_model) + " and d_ff " + std::to_string(d_ff);
  });
}

}  // namespace

EncoderLayer encoder_layer_init(Rng& rng, Index d_model, Index heads, Index d_ff,
                                NormPlacement norm) {
  check_layer_sizes(d_model, heads, d_ff, 1, 2, "encoder_layer_init");
  EncoderLayer layer;
  layer.self_attn = multi_head_init(rng, d_model, heads);
  layer.ff = ffn_init(rng, d_model, d_ff);
  layer.norm1 = layer.norm2 = layer_norm_init(d_model);
  layer.norm = norm;
  return layer;
}

DecoderLayer decoder_layer_init(Rng& rng, Index d_model, Index heads, Index d_ff,
                                NormPlacement norm) {
  check_layer_sizes(d_model, heads, d_ff, 2, 3, "decoder_layer_init");
  DecoderLayer layer;
  layer.self_attn = multi_head_init(rng, d_model, heads);
  layer.multihead_attn = multi_head_init(rng, d_model, heads);
  layer.ff = ffn_init(rng, d_model, d_ff);
  layer.norm1 = layer.norm2 = layer.norm3 = layer_norm_init(d_model);
  layer.norm = norm;
  return layer;
}

template <Real T>
MatrixOf<T> encoder_layer_forward(const EncoderLayerOf<T>& layer, const InView<T>& x,
                                  const EncoderLayerOptions& opts, EncoderLayerCacheOf<T>* cache) {
  const MatrixOf<T> in = x;  // [n x d_model]
  // ---- self-attention, then Add & Norm ----------------------------------------------------------
  const MatrixOf<T> h = residual(
      in, layer.norm1, layer.norm,
      [&](const MatrixOf<T>& q) {
        return attend<T>(layer.self_attn, q, q, opts.allowed, opts.need_weights,
                         cache ? &cache->self_attn : nullptr);
      },
      cache ? &cache->sublayer1 : nullptr);
  // ---- feed-forward, then Add & Norm ------------------------------------------------------------
  return residual(
      h, layer.norm2, layer.norm,
      [&](const MatrixOf<T>& v) { return ffn_forward(layer.ff, v, cache ? &cache->ff : nullptr); },
      cache ? &cache->sublayer2 : nullptr);
}

template <Real T>
MatrixOf<T> decoder_layer_forward(const DecoderLayerOf<T>& layer, const InView<T>& x,
                                  const InView<T>& memory, const DecoderLayerOptions& opts,
                                  DecoderLayerCacheOf<T>* cache) {
  require(memory.cols() == x.cols(), "decoder_layer_forward", [&] {
    return "x is " + shape_str(x) + " but memory is " + shape_str(memory) +
           ": the encoder's output must have the decoder's d_model columns";
  });
  const MatrixOf<T> in = x;  // [n_t x d_model]
  // ---- causal self-attention over the target ----------------------------------------------------
  const MatrixOf<T> h1 = residual(
      in, layer.norm1, layer.norm,
      [&](const MatrixOf<T>& q) {
        return attend<T>(layer.self_attn, q, q, opts.self_allowed, opts.need_weights,
                         cache ? &cache->self_attn : nullptr);
      },
      cache ? &cache->sublayer1 : nullptr);
  // ---- cross-attention: queries from the target, keys and values from the encoder ---------------
  const MatrixOf<T> h2 = residual(
      h1, layer.norm2, layer.norm,
      [&](const MatrixOf<T>& q) {
        return attend<T>(layer.multihead_attn, q, memory, opts.cross_allowed, opts.need_weights,
                         cache ? &cache->multihead_attn : nullptr);
      },
      cache ? &cache->sublayer2 : nullptr);
  // ---- feed-forward -----------------------------------------------------------------------------
  return residual(
      h2, layer.norm3, layer.norm,
      [&](const MatrixOf<T>& v) { return ffn_forward(layer.ff, v, cache ? &cache->ff : nullptr); },
      cache ? &cache->sublayer3 : nullptr);
}

template <Real T>
MatrixOf<T> encoder_layer_backward(const EncoderLayerOf<T>& layer,
                                   const EncoderLayerCacheOf<T>& cache, const InView<T>& d_out,
                                   EncoderLayerOf<T>& grads) {
  require(d_out.rows() == cache.sublayer2.output.rows() &&
              d_out.cols() == cache.sublayer2.output.cols(),
          "encoder_layer_backward", [&] {
            return "d_out is " + shape_str(d_out) + " but the layer's output was " +
                   shape_str(cache.sublayer2.output) + ": they must have one shape";
          });
  check_grads_like(layer, grads, "encoder_layer_backward", {{"d_out", memory_of(d_out)}});
  const MatrixOf<T> d_y = d_out;  // [n x d_model]
  // ---- feed-forward, then Add & Norm, in reverse ------------------------------------------------
  const MatrixOf<T> d_h = residual_backward(
      layer.norm2, layer.norm, cache.sublayer2, d_y,
      [&](const MatrixOf<T>& d) {
        return ffn_backward(layer.ff, cache.sublayer2.sublayer_in, cache.ff, d, grads.ff);
      },
      grads.norm2);
  // ---- self-attention, then Add & Norm, in reverse: x was query, key and value ------------------
  return residual_backward(
      layer.norm1, layer.norm, cache.sublayer1, d_h,
      [&](const MatrixOf<T>& d) {
        return self_attention_backward(layer.self_attn, cache.sublayer1.sublayer_in,
                                       cache.self_attn, d, grads.self_attn);
      },
      grads.norm1);
}

template <Real T>
DecoderLayerInputGradsOf<T> decoder_layer_backward(const DecoderLayerOf<T>& layer,
                                                   const InView<T>& memory,
                                                   const DecoderLayerCacheOf<T>& cache,
                                                   const InView<T>& d_out,
                                                   DecoderLayerOf<T>& grads) {
  require(d_out.rows() == cache.sublayer3.output.rows() &&
              d_out.cols() == cache.sublayer3.output.cols() &&
              memory.rows() == cache.multihead_attn.K.rows(),
          "decoder_layer_backward", [&] {
            return "d_out is " + shape_str(d_out) + " and memory " + shape_str(memory) +
                   " but the forward made " + shape_str(cache.sublayer3.output) + " from " +
                   std::to_string(cache.multihead_attn.K.rows()) + " memory rows";
          });
  check_grads_like(layer, grads, "decoder_layer_backward",
                   {{"memory", memory_of(memory)}, {"d_out", memory_of(d_out)}});
  const MatrixOf<T> d_y = d_out;  // [n_t x d_model]
  DecoderLayerInputGradsOf<T> result;
  // ---- feed-forward -----------------------------------------------------------------------------
  const MatrixOf<T> d_h2 = residual_backward(
      layer.norm3, layer.norm, cache.sublayer3, d_y,
      [&](const MatrixOf<T>& d) {
        return ffn_backward(layer.ff, cache.sublayer3.sublayer_in, cache.ff, d, grads.ff);
      },
      grads.norm3);
  // ---- cross-attention: the target's queries, the memory's keys and values ----------------------
  const MatrixOf<T> d_h1 = residual_backward(
      layer.norm2, layer.norm, cache.sublayer2, d_h2,
      [&](const MatrixOf<T>& d) {
        MultiHeadInputGradsOf<T> g =
            multi_head_backward(layer.multihead_attn, cache.sublayer2.sublayer_in, memory, memory,
                                cache.multihead_attn, d, grads.multihead_attn);
        result.d_memory = std::move(g.d_key);
        result.d_memory += g.d_value;  // [n_s x d_model]
        return std::move(g.d_query);
      },
      grads.norm2);
  // ---- causal self-attention --------------------------------------------------------------------
  result.d_x = residual_backward(
      layer.norm1, layer.norm, cache.sublayer1, d_h1,
      [&](const MatrixOf<T>& d) {
        return self_attention_backward(layer.self_attn, cache.sublayer1.sublayer_in,
                                       cache.self_attn, d, grads.self_attn);
      },
      grads.norm1);
  return result;
}

#define ATTN_INSTANTIATE(T)                                                                        \
  template MatrixOf<T> encoder_layer_forward(const EncoderLayerOf<T>&, const InView<T>&,           \
                                             const EncoderLayerOptions&, EncoderLayerCacheOf<T>*); \
  template MatrixOf<T> decoder_layer_forward(const DecoderLayerOf<T>&, const InView<T>&,           \
                                             const InView<T>&, const DecoderLayerOptions&,         \
                                             DecoderLayerCacheOf<T>*);                             \
  template MatrixOf<T> encoder_layer_backward(const EncoderLayerOf<T>&,                            \
                                              const EncoderLayerCacheOf<T>&, const InView<T>&,     \
                                              EncoderLayerOf<T>&);                                 \
  template DecoderLayerInputGradsOf<T> decoder_layer_backward(                                     \
      const DecoderLayerOf<T>&, const InView<T>&, const DecoderLayerCacheOf<T>&, const InView<T>&, \
      DecoderLayerOf<T>&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

Batch encoder_forward(const std::vector<EncoderLayer>& layers, const Batch& x,
                      const EncoderOptions& opts, EncoderCache* cache) {
  check_batch(opts.allowed, x.batch(), "encoder_forward", "the mask");
  const auto L = static_cast<Index>(layers.size());
  Batch out(x.batch(), x.rows(), x.cols());  // [B, n, d_model]
  if (cache) *cache = EncoderCache(x.batch(), L);
  for (Index b = 0; b < x.batch(); ++b) {
    Matrix h = x[b];  // [n x d_model]
    const EncoderLayerOptions layer_opts{.allowed = element(opts.allowed, b),
                                         .need_weights = opts.need_weights};
    for (Index l = 0; l < L; ++l) {
      h = encoder_layer_forward(layers[static_cast<std::size_t>(l)], h, layer_opts,
                                cache ? &cache->at(b, l) : nullptr);
    }
    out[b] = h;
  }
  return out;
}

Batch decoder_forward(const std::vector<DecoderLayer>& layers, const Batch& x, const Batch& memory,
                      const DecoderOptions& opts, DecoderCache* cache) {
  require(memory.batch() == x.batch(), "decoder_forward", [&] {
    return "x is " + x.shape_str() + " but memory is " + memory.shape_str() +
           ": the batch sizes (first dimension) must agree";
  });
  check_batch(opts.self_allowed, x.batch(), "decoder_forward", "the self-attention mask");
  check_batch(opts.cross_allowed, x.batch(), "decoder_forward", "the cross-attention mask");
  const auto L = static_cast<Index>(layers.size());
  Batch out(x.batch(), x.rows(), x.cols());  // [B, n_t, d_model]
  if (cache) *cache = DecoderCache(x.batch(), L);
  for (Index b = 0; b < x.batch(); ++b) {
    Matrix h = x[b];  // [n_t x d_model]
    const DecoderLayerOptions layer_opts{.self_allowed = element(opts.self_allowed, b),
                                         .cross_allowed = element(opts.cross_allowed, b),
                                         .need_weights = opts.need_weights};
    for (Index l = 0; l < L; ++l) {
      h = decoder_layer_forward(layers[static_cast<std::size_t>(l)], h, memory[b], layer_opts,
                                cache ? &cache->at(b, l) : nullptr);
    }
    out[b] = h;
  }
  return out;
}

}  // namespace attn
