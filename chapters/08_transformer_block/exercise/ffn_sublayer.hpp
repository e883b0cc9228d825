// Exercise 08.3: the feed-forward sub-layer with its residual and LayerNorm, post- or pre-norm.
// The body is yours to write, in ffn_sublayer.cpp beside this file; README.md says how to check
// it.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/transformer.hpp"

/// Difficulty 2 of 3, importance 3 of 3, about 15 minutes.
///
/// The second sub-layer of an encoder layer on x [n x d_model]: the feed-forward network ff
/// wrapped in its residual connection and its LayerNorm `norm`, placed as `placement` says:
///
///     post-norm (the paper's; --norm post):             out = LayerNorm(x + FFN(x))
///     pre-norm  (--norm pre; PyTorch's norm_first):     out = x + FFN(LayerNorm(x))
///
/// FFN(x) is attn::ffn_forward(ff, x) and LayerNorm(x) is attn::layer_norm_forward(norm, x):
/// use them (or your answers to 08.1 and 08.2). Returns out [n x d_model]; nothing given is
/// changed.
attn::MatrixD exercise_ffn_sublayer(const attn::MatrixD& x, const attn::FeedForwardD& ff,
                                    const attn::LayerNormD& norm, attn::NormPlacement placement);
