// transformer.cpp: encoder and decoder layers as residual sub-layers, post- or pre-norm.
#include "attn/transformer.hpp"

#include <string>
#include <utility>

namespace attn {

namespace {

// One residual step around `sublayer` (a function of the sub-layer's input, [n x d_model]):
//   post-norm: LayerNorm(x + sublayer(x))      pre-norm: x + sublayer(LayerNorm(x))
// The arithmetic is the same with and without a cache; the cache only keeps the pieces.
template <typename F>
Matrix residual(const Matrix& x, const LayerNorm& norm, NormPlacement placement, F&& sublayer,
                SublayerCache* cache) {
  LayerNormCache* norm_cache = cache ? &cache->norm : nullptr;
  if (placement == NormPlacement::post) {
    Matrix s = sublayer(x);  // [n x d_model]
    Matrix sum = x + s;      // [n x d_model]: the residual connection
    Matrix after = layer_norm_forward(norm, sum, norm_cache);  // [n x d_model]
    if (cache) {
      cache->input = x;
      cache->sublayer_in = x;
      cache->sublayer_out = std::move(s);
      cache->norm_in = std::move(sum);
      cache->output = after;
    }
    return after;
  }
  Matrix normed = layer_norm_forward(norm, x, norm_cache);  // [n x d_model]
  Matrix s = sublayer(normed);                              // [n x d_model]
  Matrix after = x + s;  // [n x d_model]: the residual path carries x untouched
  if (cache) {
    cache->input = x;
    cache->sublayer_in = std::move(normed);
    cache->sublayer_out = std::move(s);
    cache->norm_in = x;
    cache->output = after;
  }
  return after;
}

// Multi-head attention as a sub-layer: its output, and all it computed into `cache` if given.
Matrix attend(const MultiHeadAttention& mha, const Matrix& q, const MatrixView& kv,
              const std::optional<MaskView>& allowed, MultiHeadResult* cache) {
  MultiHeadResult r = multi_head_forward(mha, q, kv, kv, {.allowed = allowed});
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
void check_layer_sizes(Index d_model, Index heads, Index d_ff, const char* where) {
  check_head_sizes(d_model, heads, where);
  require_at_least_one(d_ff, where, "d_ff");
}

}  // namespace

EncoderLayer encoder_layer_init(Rng& rng, Index d_model, Index heads, Index d_ff,
                                NormPlacement norm) {
  check_layer_sizes(d_model, heads, d_ff, "encoder_layer_init");
  EncoderLayer layer;
  layer.self_attn = multi_head_init(rng, d_model, heads);
  layer.ff = ffn_init(rng, d_model, d_ff);
  layer.norm1 = layer.norm2 = layer_norm_init(d_model);
  layer.norm = norm;
  return layer;
}

DecoderLayer decoder_layer_init(Rng& rng, Index d_model, Index heads, Index d_ff,
                                NormPlacement norm) {
  check_layer_sizes(d_model, heads, d_ff, "decoder_layer_init");
  DecoderLayer layer;
  layer.self_attn = multi_head_init(rng, d_model, heads);
  layer.multihead_attn = multi_head_init(rng, d_model, heads);
  layer.ff = ffn_init(rng, d_model, d_ff);
  layer.norm1 = layer.norm2 = layer.norm3 = layer_norm_init(d_model);
  layer.norm = norm;
  return layer;
}

Matrix encoder_layer_forward(const EncoderLayer& layer, const MatrixView& x,
                             const EncoderLayerOptions& opts, EncoderLayerCache* cache) {
  const Matrix in = x;  // [n x d_model]
  // ---- self-attention, then Add & Norm ----------------------------------------------------------
  const Matrix h = residual(
      in, layer.norm1, layer.norm,
      [&](const Matrix& q) {
        return attend(layer.self_attn, q, q, opts.allowed, cache ? &cache->self_attn : nullptr);
      },
      cache ? &cache->sublayer1 : nullptr);
  // ---- feed-forward, then Add & Norm ------------------------------------------------------------
  return residual(
      h, layer.norm2, layer.norm,
      [&](const Matrix& v) { return ffn_forward(layer.ff, v, cache ? &cache->ff : nullptr); },
      cache ? &cache->sublayer2 : nullptr);
}

Matrix decoder_layer_forward(const DecoderLayer& layer, const MatrixView& x,
                             const MatrixView& memory, const DecoderLayerOptions& opts,
                             DecoderLayerCache* cache) {
  require(memory.cols() == x.cols(), "decoder_layer_forward", [&] {
    return "x is " + shape_str(x) + " but memory is " + shape_str(memory) +
           ": the encoder's output must have the decoder's d_model columns";
  });
  const Matrix in = x;  // [n_t x d_model]
  // ---- causal self-attention over the target ----------------------------------------------------
  const Matrix h1 = residual(
      in, layer.norm1, layer.norm,
      [&](const Matrix& q) {
        return attend(layer.self_attn, q, q, opts.self_allowed,
                      cache ? &cache->self_attn : nullptr);
      },
      cache ? &cache->sublayer1 : nullptr);
  // ---- cross-attention: queries from the target, keys and values from the encoder ---------------
  const Matrix h2 = residual(
      h1, layer.norm2, layer.norm,
      [&](const Matrix& q) {
        return attend(layer.multihead_attn, q, memory, opts.cross_allowed,
                      cache ? &cache->multihead_attn : nullptr);
      },
      cache ? &cache->sublayer2 : nullptr);
  // ---- feed-forward -----------------------------------------------------------------------------
  return residual(
      h2, layer.norm3, layer.norm,
      [&](const Matrix& v) { return ffn_forward(layer.ff, v, cache ? &cache->ff : nullptr); },
      cache ? &cache->sublayer3 : nullptr);
}

Batch encoder_forward(const std::vector<EncoderLayer>& layers, const Batch& x,
                      const EncoderOptions& opts, EncoderCache* cache) {
  check_batch(opts.allowed, x.batch(), "encoder_forward", "the mask");
  const auto L = static_cast<Index>(layers.size());
  Batch out(x.batch(), x.rows(), x.cols());  // [B, n, d_model]
  if (cache) *cache = EncoderCache(x.batch(), L);
  for (Index b = 0; b < x.batch(); ++b) {
    Matrix h = x[b];  // [n x d_model]
    const EncoderLayerOptions layer_opts{.allowed = element(opts.allowed, b)};
    for (Index l = 0; l < L; ++l) {
      h = encoder_layer_forward(layers[static_cast<std::size_t>(l)], h, layer_opts,
                                cache ? &cache->at(b, l) : nullptr);
    }
    out[b] = h;
  }
  return out;
}

Batch decoder_forward(const std::vector<DecoderLayer>& layers, const Batch& x,
                      const Batch& memory, const DecoderOptions& opts, DecoderCache* cache) {
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
                                         .cross_allowed = element(opts.cross_allowed, b)};
    for (Index l = 0; l < L; ++l) {
      h = decoder_layer_forward(layers[static_cast<std::size_t>(l)], h, memory[b], layer_opts,
                                cache ? &cache->at(b, l) : nullptr);
    }
    out[b] = h;
  }
  return out;
}

}  // namespace attn
