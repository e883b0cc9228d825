// Chapter 12's rule over its knobs together (knobs.hpp).
#include "knobs.hpp"

#include "checkpoints.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <tuple>

namespace lm {

std::string knobs_problem(const course::Chapter& ch, Knobs& k, corpus::Source& source) {
  if (k.quick) {
    Knobs quick = k;
    lm::make_quick(quick);
    for (const auto& [flag, value, fast] :
         {std::tuple{"--d-model", &k.d_model, quick.d_model},
          {"--layers", &k.layers, quick.layers},
          {"--context", &k.context, quick.context},
          {"--steps", &k.steps, quick.steps},
          {"--batch", &k.batch, quick.batch},
          {"--eval-every", &k.eval_every, quick.eval_every},
          {"--sample-length", &k.sample_length, quick.sample_length}}) {
      if (!ch.given(flag)) *value = fast;
    }
  }
  k.steps_given = ch.given("--steps");
  if (k.d_model % k.heads != 0 || (k.d_model / k.heads) % 2 != 0)
    return fmt::format("--heads {} must divide --d-model {} into an even d_k", k.heads, k.d_model);
  if (k.heads % k.kv_heads != 0)
    return fmt::format("--kv-heads {} must divide --heads {}", k.kv_heads, k.heads);
  if (!ch.given("--repeated")) k.repeated = k.batch / 4;  // a quarter of the windows
  if (k.repeated > k.batch)
    return fmt::format("--repeated {} is more than the {} windows of a batch", k.repeated, k.batch);
  if (k.prompt.empty())
    return "--prompt is empty: the model needs at least one character to continue from";
  // The text is read here, once: the prompt and a --load need its vocabulary. A text that
  // cannot be read is not a usage error: the lesson reads it again and says what failed.
  try {
    source = corpus::load(k.corpus);
  } catch (const std::runtime_error&) {
    return std::string();
  }
  const corpus::CharVocab vocab = corpus::make_char_vocab(source.text);
  if (const std::string bad = corpus::unknown_characters(vocab, k.prompt); !bad.empty())
    return fmt::format("--prompt: {} never occurs in {}", bad, source.name);
  // A window and the character after it must fit in the held-out tenth.
  if (const auto held = source.text.size() / 10; held < static_cast<std::size_t>(k.context) + 1)
    return fmt::format("--context {}: the held-out tenth of {} has {} characters, fewer than a "
                       "window and the character after it",
                       k.context, source.name, held);
  return lm::checkpoint_problem(ch, k, vocab.size() + k.merges);
}

}  // namespace lm
