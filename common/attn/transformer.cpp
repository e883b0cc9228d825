// transformer.cpp: encoder and decoder layers as residual sub-layers, post- or pre-norm.
#include "attn/transformer.hpp"

#include <string>
#include <utility>

namespace attn {

namespace {

// What one sub-layer returns: its output and, for attention, every head's weights.
struct Sublayer {
  Matrix out;                   // [n x d_model]
  std::vector<Matrix> weights;  // per head, or empty
};

// One residual step around `sublayer`:
//   post-norm: LayerNorm(x + sublayer(x))      pre-norm: x + sublayer(LayerNorm(x))
template <typename F>
Matrix residual(const Matrix& x, const LayerNorm& norm, NormPlacement placement, F&& sublayer,
                std::vector<SublayerTrace>* trace) {
  Sublayer s = placement == NormPlacement::post ? sublayer(x)
                                                : sublayer(layer_norm_forward(norm, x));
  Matrix sum = x + s.out;  // [n x d_model]: the residual connection
  Matrix after = placement == NormPlacement::post ? layer_norm_forward(norm, sum) : std::move(sum);
  if (trace) trace->push_back({std::move(s.out), after, std::move(s.weights)});
  return after;
}

Sublayer attend(const MultiHeadAttention& mha, const Matrix& q, const MatrixView& kv,
                const std::optional<MaskView>& allowed) {
  MultiHeadResult r = multi_head_forward(mha, q, kv, kv, allowed);
  return {std::move(r.out), std::move(r.weights)};
}

std::optional<MaskView> element(const AllowedBatch* masks, Index b) {
  if (!masks) return std::nullopt;
  return MaskView(masks->batch() == 1 ? (*masks)[0] : (*masks)[b]);
}

void check_batch(const AllowedBatch* masks, Index B, const char* where, const char* name) {
  require(!masks || masks->batch() == B || masks->batch() == 1, where,
          std::string(name) + " is " + (masks ? masks->shape_str() : std::string()) +
              ": its batch must be " + std::to_string(B) + " or 1 (shared)");
}

}  // namespace

EncoderLayer encoder_layer_init(Rng& rng, Index d_model, Index heads, Index d_ff,
                                NormPlacement norm) {
  EncoderLayer layer;
  layer.self_attn = multi_head_init(rng, d_model, heads);
  layer.ff = feed_forward_init(rng, d_model, d_ff);
  layer.norm1 = layer.norm2 = layer_norm_init(d_model);
  layer.norm = norm;
  return layer;
}

DecoderLayer decoder_layer_init(Rng& rng, Index d_model, Index heads, Index d_ff,
                                NormPlacement norm) {
  DecoderLayer layer;
  layer.self_attn = multi_head_init(rng, d_model, heads);
  layer.multihead_attn = multi_head_init(rng, d_model, heads);
  layer.ff = feed_forward_init(rng, d_model, d_ff);
  layer.norm1 = layer.norm2 = layer.norm3 = layer_norm_init(d_model);
  layer.norm = norm;
  return layer;
}

Matrix encoder_layer_forward(const EncoderLayer& layer, const MatrixView& x,
                             const std::optional<MaskView>& allowed,
                             std::vector<SublayerTrace>* trace) {
  const Matrix in = x;  // [n x d_model]
  // ---- self-attention, then Add & Norm ----------------------------------------------------------
  const Matrix h = residual(in, layer.norm1, layer.norm,
                            [&](const Matrix& q) { return attend(layer.self_attn, q, q, allowed); },
                            trace);
  // ---- feed-forward, then Add & Norm ------------------------------------------------------------
  return residual(h, layer.norm2, layer.norm,
                  [&](const Matrix& v) { return Sublayer{feed_forward(layer.ff, v), {}}; }, trace);
}

Matrix decoder_layer_forward(const DecoderLayer& layer, const MatrixView& x,
                             const MatrixView& memory, const std::optional<MaskView>& self_allowed,
                             const std::optional<MaskView>& cross_allowed,
                             std::vector<SublayerTrace>* trace) {
  require(memory.cols() == x.cols(), "decoder_layer_forward",
          "x is " + shape_str(x) + " but memory is " + shape_str(memory) +
              ": the encoder's output must have the decoder's d_model columns");
  const Matrix in = x;  // [n_t x d_model]
  // ---- causal self-attention over the target ----------------------------------------------------
  const Matrix h1 = residual(
      in, layer.norm1, layer.norm,
      [&](const Matrix& q) { return attend(layer.self_attn, q, q, self_allowed); }, trace);
  // ---- cross-attention: queries from the target, keys and values from the encoder ---------------
  const Matrix h2 = residual(
      h1, layer.norm2, layer.norm,
      [&](const Matrix& q) { return attend(layer.multihead_attn, q, memory, cross_allowed); },
      trace);
  // ---- feed-forward -----------------------------------------------------------------------------
  return residual(h2, layer.norm3, layer.norm,
                  [&](const Matrix& v) { return Sublayer{feed_forward(layer.ff, v), {}}; }, trace);
}

Batch encoder_forward(const std::vector<EncoderLayer>& layers, const Batch& x,
                      const AllowedBatch* allowed,
                      std::vector<std::vector<std::vector<SublayerTrace>>>* traces) {
  check_batch(allowed, x.batch(), "encoder_forward", "the mask");
  Batch out(x.batch(), x.rows(), x.cols());  // [B, n, d_model]
  if (traces) traces->assign(static_cast<std::size_t>(x.batch()), {});
  for (Index b = 0; b < x.batch(); ++b) {
    Matrix h = x[b];  // [n x d_model]
    for (const EncoderLayer& layer : layers) {
      std::vector<SublayerTrace>* t = nullptr;
      if (traces) t = &(*traces)[static_cast<std::size_t>(b)].emplace_back();
      h = encoder_layer_forward(layer, h, element(allowed, b), t);
    }
    out[b] = h;
  }
  return out;
}

Batch decoder_forward(const std::vector<DecoderLayer>& layers, const Batch& x,
                      const Batch& memory, const AllowedBatch* self_allowed,
                      const AllowedBatch* cross_allowed,
                      std::vector<std::vector<std::vector<SublayerTrace>>>* traces) {
  require(memory.batch() == x.batch(), "decoder_forward",
          "x is " + x.shape_str() + " but memory is " + memory.shape_str() +
              ": the batch sizes (first dimension) must agree");
  check_batch(self_allowed, x.batch(), "decoder_forward", "the self-attention mask");
  check_batch(cross_allowed, x.batch(), "decoder_forward", "the cross-attention mask");
  Batch out(x.batch(), x.rows(), x.cols());  // [B, n_t, d_model]
  if (traces) traces->assign(static_cast<std::size_t>(x.batch()), {});
  for (Index b = 0; b < x.batch(); ++b) {
    Matrix h = x[b];  // [n_t x d_model]
    for (const DecoderLayer& layer : layers) {
      std::vector<SublayerTrace>* t = nullptr;
      if (traces) t = &(*traces)[static_cast<std::size_t>(b)].emplace_back();
      h = decoder_layer_forward(layer, h, memory[b], element(self_allowed, b),
                                element(cross_allowed, b), t);
    }
    out[b] = h;
  }
  return out;
}

}  // namespace attn
