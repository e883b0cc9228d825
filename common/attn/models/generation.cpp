// generation.cpp: the generation loop, through the KV cache or recomputing every token.
#include "attn/models/generation.hpp"

#include <algorithm>
#include <string>

namespace attn {

template <Real T>
std::vector<int> language_model_generate(const LanguageModelOf<T>& model,
                                         std::span<const int> prompt, Index new_tokens,
                                         const SamplingOptions& sampling, Rng& rng,
                                         Generation how) {
  const char* where = "language_model_generate";
  require(!prompt.empty(), where, "the prompt is empty: it needs at least one token");
  require(new_tokens >= 0, where,
          [&] { return "new_tokens is " + std::to_string(new_tokens) + ": it must be >= 0"; });
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    require(prompt[i] >= 0 && prompt[i] < model.vocab(), where, [&] {
      return "id " + std::to_string(prompt[i]) + " at position " + std::to_string(i) +
             " of the prompt is outside the vocabulary [0, " + std::to_string(model.vocab()) + ")";
    });
  }
  check_sampling_options(sampling, where);  // before any work

  const Index C = model.config.context;
  const Index keep = std::max<Index>(1, C / 2);  // the tokens kept past the context
  std::vector<int> tokens(prompt.begin(), prompt.end());
  std::vector<int> fresh;
  Index start = 0;  // the model reads tokens[start ..]: at most C of them
  const auto visible = [&] {
    return std::span<const int>(tokens).subspan(static_cast<std::size_t>(start));
  };
  const auto outgrown = [&] { return static_cast<Index>(tokens.size()) - start > C; };
  if (outgrown()) start = static_cast<Index>(tokens.size()) - keep;

  DecodeStateOf<T> state;
  MatrixOf<T> last;  // [1 x V]: the logits the next token is drawn from
  if (how == Generation::cached) {
    state = make_decode_state(model);
    last = language_model_prefill(model, visible(), state, Arithmetic::rows).bottomRows(1);
  }
  for (Index s = 0; s < new_tokens; ++s) {
    if (how == Generation::recomputed) {
      last = language_model_forward(model, visible(), Arithmetic::rows).bottomRows(1);
    }
    const int next = sample_token<T>(last, sampling, rng);
    tokens.push_back(next);
    fresh.push_back(next);
    if (s + 1 == new_tokens) break;  // no logits needed after the last token
    if (outgrown()) {
      // Past the context: keep reading the last C / 2 tokens, from position 0 again.
      start = static_cast<Index>(tokens.size()) - keep;
      if (how == Generation::cached) {
        state.clear();
        last = language_model_prefill(model, visible(), state, Arithmetic::rows).bottomRows(1);
      }
    } else if (how == Generation::cached) {
      last = language_model_decode(model, next, state);
    }
  }
  return fresh;
}

#define ATTN_INSTANTIATE(T)                                                      \
  template std::vector<int> language_model_generate(const LanguageModelOf<T>&,   \
                                                    std::span<const int>, Index, \
                                                    const SamplingOptions&, Rng&, Generation);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
