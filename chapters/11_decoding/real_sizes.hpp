// What a KV cache costs at published sizes: the configurations, with where each number comes
// from, and the arithmetic of bytes per token.
#pragma once

#include "attn/core/matrix.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace decoding {

/// One published model's attention, as its paper and its config.json give it.
struct PublishedModel {
  std::string name;
  std::string attention;  ///< "MHA", "GQA 32/8", "MLA", ...
  attn::Index layers = 0;
  attn::Index kv_heads = 0;  ///< g (= h for MHA); 0 for MLA
  attn::Index d_k = 0;       ///< the width of one head
  attn::Index latent = 0;    ///< MLA only: d_c + d_rope numbers per token and layer
  attn::Index window = 0;    ///< a sliding window's W: the cache stops growing there; 0: none
  attn::Index context = 0;   ///< the longest sequence it was released for
  std::string source;        ///< where the numbers are from
};

/// GPT-2 small, Llama 2 7B, Llama 3 8B, Mistral 7B and DeepSeek-V2, in that order.
const std::vector<PublishedModel>& published_models();

/// The published model of that name. Throws std::invalid_argument for a name not in the list.
const PublishedModel& published_model(std::string_view name);

/// Numbers one token adds to the cache, over all layers: 2 g d_k L (keys and values), or
/// (d_c + d_rope) L for MLA.
double numbers_per_token(const PublishedModel& m);

/// The table chapter 11 prints, without indent: a header and a row per model, each with its
/// context, bytes per token and the cache at 4k, 32k and 128k tokens (starred past the context
/// the model was released for).
std::vector<std::string> cache_table();

/// Bytes of the cache after `tokens` tokens at `bytes_per_number` (2 for float16/bfloat16):
/// a window caps the tokens held at W.
double cache_bytes(const PublishedModel& m, double tokens, double bytes_per_number = 2.0);

}  // namespace decoding
