/// @file
/// The transformer block: encoder and decoder layers, and stacks of them, as
/// torch.nn.TransformerEncoderLayer / TransformerDecoderLayer compute them (batch_first,
/// activation relu, no dropout: this is inference).
///
/// Encoder layer, post-norm (the paper's, `norm_first=False`):
///   x = LayerNorm_1(x + SelfAttention(x))
///   x = LayerNorm_2(x + FFN(x))
/// Decoder layer, post-norm:
///   x = LayerNorm_1(x + SelfAttention(x, causal))              queries, keys, values: target
///   x = LayerNorm_2(x + CrossAttention(x, memory))             Q: target, K and V: encoder output
///   x = LayerNorm_3(x + FFN(x))
/// Pre-norm (`norm_first=True`) normalises the input of each sub-layer instead of the sum:
///   x = x + SelfAttention(LayerNorm_1(x)), and so on. The residual path then carries x from
///   the first layer to the last untouched, which is why deep stacks train more easily with it.
///
/// Member names follow PyTorch's state_dict (self_attn, multihead_attn, linear1/linear2 inside
/// ff, norm1..norm3), so loading its weights is one assignment per tensor.
///
/// Caches (attn.hpp): a layer's forward fills an EncoderLayerCache or DecoderLayerCache when
/// given one: for each sub-layer k (normalised by norm k) its input, what the sub-layer read and
/// returned, the norm's input and statistics, and the value after Add & Norm (SublayerCache),
/// plus the attention's MultiHeadResult or the FFN's FeedForwardCache. A stack fills one cache
/// per batch element and layer (StackCache, `cache.at(b, layer)`). Chapter 08 prints from them;
/// encoder_layer_backward and decoder_layer_backward read them.
#pragma once

#include "attn/core/batch.hpp"
#include "attn/core/matrix.hpp"
#include "attn/core/memory.hpp"
#include "attn/core/random.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/ops/attention.hpp"

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace attn {

enum class NormPlacement {
  post,  ///< LayerNorm(x + sublayer(x)): the paper's; PyTorch's norm_first=False
  pre,   ///< x + sublayer(LayerNorm(x)): most models since; PyTorch's norm_first=True
};

template <Real T>
struct EncoderLayerOf {
  using Scalar = T;
  MultiHeadAttentionOf<T> self_attn;
  FeedForwardOf<T> ff;
  LayerNormOf<T> norm1, norm2;
  NormPlacement norm = NormPlacement::post;
};
using EncoderLayer = EncoderLayerOf<float>;
using EncoderLayerD = EncoderLayerOf<double>;

template <Real T>
struct DecoderLayerOf {
  using Scalar = T;
  MultiHeadAttentionOf<T> self_attn;  ///< over the target, causal
  MultiHeadAttentionOf<T>
      multihead_attn;  ///< cross-attention: Q from the target, K and V from memory
  FeedForwardOf<T> ff;
  LayerNormOf<T> norm1, norm2, norm3;
  NormPlacement norm = NormPlacement::post;
};
using DecoderLayer = DecoderLayerOf<float>;
using DecoderLayerD = DecoderLayerOf<double>;

/// Fresh layers, initialised as PyTorch initialises them (multi_head_init, ffn_init,
/// layer_norm_init). Throws std::invalid_argument, naming the function and the size, unless
/// d_model, heads and d_ff are at least 1 and heads divides d_model, and, before drawing
/// anything, when the machine cannot hold the layer's parameters (core/memory.hpp).
EncoderLayer encoder_layer_init(Rng& rng, Index d_model, Index heads, Index d_ff,
                                NormPlacement norm = NormPlacement::post);
DecoderLayer decoder_layer_init(Rng& rng, Index d_model, Index heads, Index d_ff,
                                NormPlacement norm = NormPlacement::post);

// ---- Caches -------------------------------------------------------------------------------------

/// One sub-layer f (attention or FFN) inside its residual connection and LayerNorm:
///   post-norm: output = LayerNorm(input + f(input))
///   pre-norm:  output = input + f(LayerNorm(input))
/// Every matrix the backward of that step needs, [n x d_model] each, whichever the placement.
template <Real T>
struct SublayerCacheOf {
  MatrixOf<T> input;         ///< x, the step's input
  MatrixOf<T> sublayer_in;   ///< what f read: x (post-norm) or LayerNorm(x) (pre-norm)
  MatrixOf<T> sublayer_out;  ///< what f returned
  MatrixOf<T> norm_in;       ///< what the LayerNorm read: x + f(x) (post-norm) or x (pre-norm)
  LayerNormCache norm;       ///< that LayerNorm's per-row mean and rstd
  MatrixOf<T> output;        ///< the value after "Add & Norm" (post-norm) or the add (pre-norm)
};
using SublayerCache = SublayerCacheOf<float>;

/// What encoder_layer_forward computed: sub-layer 1 is the self-attention (norm1), sub-layer 2
/// the FFN (norm2). The layer's output is sublayer2.output.
template <Real T>
struct EncoderLayerCacheOf {
  SublayerCacheOf<T> sublayer1;
  MultiHeadResultOf<T> self_attn;  ///< inside sublayer1: Q, K, V, per-head weights, concat, out
  SublayerCacheOf<T> sublayer2;
  FeedForwardCacheOf<T> ff;  ///< inside sublayer2
};
using EncoderLayerCache = EncoderLayerCacheOf<float>;

/// What decoder_layer_forward computed: sub-layer 1 the causal self-attention (norm1),
/// 2 the cross-attention (norm2), 3 the FFN (norm3). The layer's output is sublayer3.output.
template <Real T>
struct DecoderLayerCacheOf {
  SublayerCacheOf<T> sublayer1;
  MultiHeadResultOf<T> self_attn;  ///< inside sublayer1
  SublayerCacheOf<T> sublayer2;
  MultiHeadResultOf<T>
      multihead_attn;  ///< inside sublayer2: Q from the target, K and V from memory
  SublayerCacheOf<T> sublayer3;
  FeedForwardCacheOf<T> ff;  ///< inside sublayer3
};
using DecoderLayerCache = DecoderLayerCacheOf<float>;

/// The one trace type of a stack: a layer cache per batch element and per layer,
/// `at(b, layer)`. encoder_forward and decoder_forward size it and fill every entry.
template <typename LayerCache>
class StackCache {
 public:
  StackCache() = default;
  /// batch x layers empty caches. Throws std::invalid_argument for a negative count, or one
  /// whose product overflows or whose caches the machine cannot hold.
  StackCache(Index batch, Index layers)
      : batch_(batch), layers_(layers), caches_(count(batch, layers)) {}

  Index batch() const { return batch_; }
  Index layers() const { return layers_; }
  /// Batch element b's cache of layer `layer` (0-based). Throws std::invalid_argument outside.
  LayerCache& at(Index b, Index layer) { return caches_[slot(b, layer)]; }
  const LayerCache& at(Index b, Index layer) const { return caches_[slot(b, layer)]; }

  /// One matrix of layer `layer`, gathered over the batch: each layer cache keeps its own
  /// sentence's [n x d], and stacked they are the [B, n, d] tensor the batch held at that point,
  /// e.g. `enc_cache.stacked(0, &EncoderLayerCache::ff, &FeedForwardCache::hidden)` is
  /// [B, n, d_ff]. Element b is a copy of `at(b, layer).*part.*member`, bit for bit. Throws
  /// std::invalid_argument for a layer outside [0, layers()) or an empty batch.
  template <typename Part>
  Batch stacked(Index layer, Part LayerCache::*part, Matrix Part::*member) const {
    require(batch_ > 0 && layer >= 0 && layer < layers_, "StackCache::stacked", [&] {
      return "layer " + std::to_string(layer) + " of " + std::to_string(batch_) +
             " batch elements x " + std::to_string(layers_) + " layers: there is no such layer";
    });
    const Matrix& first = at(0, layer).*part.*member;
    Batch x(batch_, first.rows(), first.cols());  // [B, n, d]
    for (Index b = 0; b < batch_; ++b) {
      const Matrix& m = at(b, layer).*part.*member;  // [n x d]
      // The batch shares one n, so a different shape means the cache was filled by hand.
      require(m.rows() == first.rows() && m.cols() == first.cols(), "StackCache::stacked", [&] {
        return "element " + std::to_string(b) + " is " + shape_str(m) + " but element 0 is " +
               shape_str(first) + ": a batch holds one shape";
      });
      x[b] = m;
    }
    return x;
  }

 private:
  static std::size_t count(Index batch, Index layers) {
    constexpr Index kMax = std::numeric_limits<Index>::max();
    require(batch >= 0 && layers >= 0 && (layers == 0 || batch <= kMax / layers), "StackCache",
            [&] {
              return "batch " + std::to_string(batch) + " x layers " + std::to_string(layers) +
                     " is not a number of caches";
            });
    require_fits_in_memory(
        "StackCache", ElementCount(batch, layers), sizeof(LayerCache), "for the caches",
        [&] { return "batch " + std::to_string(batch) + " x layers " + std::to_string(layers); });
    return static_cast<std::size_t>(batch * layers);
  }
  std::size_t slot(Index b, Index layer) const {
    require(b >= 0 && b < batch_ && layer >= 0 && layer < layers_, "StackCache::at", [&] {
      return "(" + std::to_string(b) + ", " + std::to_string(layer) + ") is outside " +
             std::to_string(batch_) + " batch elements x " + std::to_string(layers_) + " layers";
    });
    return static_cast<std::size_t>(b * layers_ + layer);
  }

  Index batch_ = 0, layers_ = 0;
  std::vector<LayerCache> caches_;  // element b, layer l at b * layers + l
};

using EncoderCache = StackCache<EncoderLayerCache>;
using DecoderCache = StackCache<DecoderLayerCache>;

// ---- One layer, one sequence --------------------------------------------------------------------

struct EncoderLayerOptions {
  /// [n x n], true = query i may attend to key j. Unset: every key.
  std::optional<MaskView> allowed{};
  /// Keep every head's [n_q x n_k] weights in the cache, for a caller that draws them. Unset,
  /// as nn.TransformerEncoderLayer calls its attention (need_weights=False): the tiled path,
  /// memory linear in n (multi_head.hpp).
  bool need_weights = false;
};

struct DecoderLayerOptions {
  std::optional<MaskView> self_allowed{};   ///< [n_t x n_t]: causal, and target padding
  std::optional<MaskView> cross_allowed{};  ///< [n_t x n_s]: source padding
  /// Keep every head's [n_q x n_k] weights in the cache, for a caller that draws them. Unset,
  /// as nn.TransformerEncoderLayer calls its attention (need_weights=False): the tiled path,
  /// memory linear in n (multi_head.hpp).
  bool need_weights = false;
};

/// One encoder layer on one sequence x [n x d_model] -> [n x d_model]. Fills `cache` when given.
template <Real T>
MatrixOf<T> encoder_layer_forward(const EncoderLayerOf<T>& layer, const InView<T>& x,
                                  const EncoderLayerOptions& opts = {},
                                  EncoderLayerCacheOf<T>* cache = nullptr);

/// One decoder layer: x [n_t x d_model] (target), memory [n_s x d_model] (encoder output)
/// -> [n_t x d_model]. Fills `cache` when given.
template <Real T>
MatrixOf<T> decoder_layer_forward(const DecoderLayerOf<T>& layer, const InView<T>& x,
                                  const InView<T>& memory, const DecoderLayerOptions& opts = {},
                                  DecoderLayerCacheOf<T>* cache = nullptr);

/// The backward pass of one encoder layer, from its forward's cache and d_out = dL/d(output)
/// [n x d_model]: returns dL/dx and accumulates every parameter's gradient into grads. Each
/// residual step is undone in reverse order (attn.hpp's SublayerCache):
///
///     post-norm, out = LN(x + f(x)):   d_sum = LN'(d_out);   dx = d_sum + f'(d_sum)
///     pre-norm,  out = x + f(LN(x)):   dx = d_out + LN'(f'(d_out))
///
/// the residual's "+ x" passing d_out (or d_sum) straight through. In self-attention x is the
/// query, the key and the value, so f' is the sum of multi_head_backward's three gradients.
/// Throws std::invalid_argument (check_grads_like), before accumulating anything, unless grads
/// is shaped like the layer and shares no memory with it or d_out (decoder: or memory).
template <Real T>
MatrixOf<T> encoder_layer_backward(const EncoderLayerOf<T>& layer,
                                   const EncoderLayerCacheOf<T>& cache, const InView<T>& d_out,
                                   EncoderLayerOf<T>& grads);

/// dL/dx and dL/d(memory) of one decoder layer.
template <Real T>
struct DecoderLayerInputGradsOf {
  MatrixOf<T> d_x;       ///< [n_t x d_model]
  MatrixOf<T> d_memory;  ///< [n_s x d_model]: the cross-attention's keys plus its values
};

/// The backward pass of one decoder layer (as encoder_layer_backward, three residual steps).
/// The memory reached the output through the cross-attention's keys and values only, so its
/// gradient is their sum; a stack of layers adds every layer's d_memory.
template <Real T>
DecoderLayerInputGradsOf<T> decoder_layer_backward(const DecoderLayerOf<T>& layer,
                                                   const InView<T>& memory,
                                                   const DecoderLayerCacheOf<T>& cache,
                                                   const InView<T>& d_out,
                                                   DecoderLayerOf<T>& grads);

// ---- A stack of layers on a batch ---------------------------------------------------------------

struct EncoderOptions {
  /// [B, n, n] or [1, n, n] (shared). Unset: every key.
  std::optional<BatchMaskView> allowed{};
  bool need_weights = false;  ///< as EncoderLayerOptions::need_weights
};

struct DecoderOptions {
  std::optional<BatchMaskView> self_allowed{};   ///< [B or 1, n_t, n_t]
  std::optional<BatchMaskView> cross_allowed{};  ///< [B or 1, n_t, n_s]
  bool need_weights = false;                     ///< as EncoderLayerOptions::need_weights
};

/// x [B, n, d_model] through every layer -> [B, n, d_model]. `cache`, when given, is resized
/// to [B x layers] and filled.
Batch encoder_forward(const std::vector<EncoderLayer>& layers, const Batch& x,
                      const EncoderOptions& opts = {}, EncoderCache* cache = nullptr);
/// x [B, n_t, d_model] (target), memory [B, n_s, d_model] -> [B, n_t, d_model].
Batch decoder_forward(const std::vector<DecoderLayer>& layers, const Batch& x, const Batch& memory,
                      const DecoderOptions& opts = {}, DecoderCache* cache = nullptr);

}  // namespace attn
