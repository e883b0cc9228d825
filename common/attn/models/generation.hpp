/// @file
/// Writing text with the language model: the loop every decoder runs, one token at a time, each
/// drawn from the model's prediction after the tokens before it (ops/sampling.hpp), either
/// through the KV cache (language_model.hpp: prefill, then one decode step per token) or by
/// running the whole sequence again for every token, as nanoGPT's generate() does.
///
///     tokens = prompt
///     repeat new_tokens times:
///       z    = the model's last row of logits after tokens      [1 x V]
///       next = sample_token(z, temperature, top_k, rng)
///       tokens.append(next)
///
/// **Past the context.** The model was trained on windows of C tokens (config.context: its RoPE
/// table and its cache end there). When the sequence would outgrow it, the model goes on reading
/// its last C / 2 tokens only, from position 0 again: the cached path clears its cache and
/// prefills them, the recomputing path runs on them. nanoGPT crops to the last C tokens before
/// every token instead; with a cache that would mean a prefill per token, since every kept
/// token's position moves. Both paths here restart at the same tokens, so they still compute
/// the same function.
///
/// **The same tokens.** With Arithmetic::rows (language_model.hpp) both paths compute every
/// logit with the same arithmetic, so they give the same bits, the same draws and the same
/// tokens, at any temperature, for a seed.
#pragma once

#include "attn/core/random.hpp"
#include "attn/models/language_model.hpp"
#include "attn/ops/sampling.hpp"

#include <span>
#include <vector>

namespace attn {

/// How each token's logits are computed.
enum class Generation : char {
  cached,      ///< prefill the prompt, then one decode step per token (KV cache)
  recomputed,  ///< the whole visible sequence again for every token (no cache)
};

/// The `new_tokens` tokens that follow `prompt`, each drawn with `sampling` from rng (one draw
/// per token when the temperature is above 0, none at 0). Throws std::invalid_argument for an
/// empty prompt, an id outside the vocabulary, new_tokens < 0, or sampling options that
/// sample_token refuses (checked before the first token).
template <Real T>
std::vector<int> language_model_generate(const LanguageModelOf<T>& model,
                                         std::span<const int> prompt, Index new_tokens,
                                         const SamplingOptions& sampling, Rng& rng,
                                         Generation how = Generation::cached);

}  // namespace attn
