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
#pragma once

#include "attn/attention.hpp"
#include "attn/feed_forward.hpp"
#include "attn/layer_norm.hpp"
#include "attn/multi_head.hpp"
#include "attn/random.hpp"

#include <optional>
#include <vector>

namespace attn {

enum class NormPlacement {
  post,  ///< LayerNorm(x + sublayer(x)): the paper's; PyTorch's norm_first=False
  pre,   ///< x + sublayer(LayerNorm(x)): most models since; PyTorch's norm_first=True
};

struct EncoderLayer {
  MultiHeadAttention self_attn;
  FeedForward ff;
  LayerNorm norm1, norm2;
  NormPlacement norm = NormPlacement::post;
};

struct DecoderLayer {
  MultiHeadAttention self_attn;       ///< over the target, causal
  MultiHeadAttention multihead_attn;  ///< cross-attention: Q from the target, K and V from memory
  FeedForward ff;
  LayerNorm norm1, norm2, norm3;
  NormPlacement norm = NormPlacement::post;
};

/// Fresh layers, initialised as PyTorch initialises them (multi_head_init, feed_forward_init,
/// layer_norm_init). Throws unless heads divides d_model.
EncoderLayer encoder_layer_init(Rng& rng, Index d_model, Index heads, Index d_ff,
                                NormPlacement norm = NormPlacement::post);
DecoderLayer decoder_layer_init(Rng& rng, Index d_model, Index heads, Index d_ff,
                                NormPlacement norm = NormPlacement::post);

/// What one layer computed on the way, for printing and figures: each sub-layer's output
/// and the value after its residual step (the layer's output is the last `after`).
struct SublayerTrace {
  Matrix sublayer;              ///< [n x d_model] what the attention or FFN returned
  Matrix after;                 ///< [n x d_model] x after "Add & Norm" (or the pre-norm add)
  std::vector<Matrix> weights;  ///< per head [n_q x n_k]; empty for the FFN
};

/// One encoder layer on one sequence x [n x d_model]; allowed [n x n] (true = may attend),
/// unset = every key. Fills `trace` (self-attention, FFN) when given.
Matrix encoder_layer_forward(const EncoderLayer& layer, const MatrixView& x,
                             const std::optional<MaskView>& allowed = {},
                             std::vector<SublayerTrace>* trace = nullptr);

/// One decoder layer: x [n_t x d_model] (target), memory [n_s x d_model] (encoder output),
/// self_allowed [n_t x n_t] (causal, and target padding), cross_allowed [n_t x n_s] (source
/// padding). Fills `trace` (self-attention, cross-attention, FFN) when given.
Matrix decoder_layer_forward(const DecoderLayer& layer, const MatrixView& x,
                             const MatrixView& memory,
                             const std::optional<MaskView>& self_allowed = {},
                             const std::optional<MaskView>& cross_allowed = {},
                             std::vector<SublayerTrace>* trace = nullptr);

/// A stack of layers on a batch: x [B, n, d_model] -> [B, n, d_model]. Masks are [B, ...] or
/// [1, ...] (shared), or null. `traces`, when given, receives traces[b][layer] per sub-layer.
Batch encoder_forward(const std::vector<EncoderLayer>& layers, const Batch& x,
                      const AllowedBatch* allowed = nullptr,
                      std::vector<std::vector<std::vector<SublayerTrace>>>* traces = nullptr);
Batch decoder_forward(const std::vector<DecoderLayer>& layers, const Batch& x,
                      const Batch& memory, const AllowedBatch* self_allowed = nullptr,
                      const AllowedBatch* cross_allowed = nullptr,
                      std::vector<std::vector<std::vector<SublayerTrace>>>* traces = nullptr);

}  // namespace attn
