// The published configurations (real_sizes.hpp). Each number is the model's own: its paper,
// and the config.json its authors released on Hugging Face (the page cites both).
#include "real_sizes.hpp"

#include "attn/core/memory.hpp"
#include "course/print.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace decoding {

const std::vector<PublishedModel>& published_models() {
  static const std::vector<PublishedModel> models{
      {.name = "GPT-2 small",
       .attention = "MHA 12/12",
       .layers = 12,
       .kv_heads = 12,
       .d_k = 64,
       .context = 1024,
       .source = "Radford et al. 2019; openai-community/gpt2 config.json (n_layer 12, n_head 12, "
                 "n_embd 768)"},
      {.name = "Llama 2 7B",
       .attention = "MHA 32/32",
       .layers = 32,
       .kv_heads = 32,
       .d_k = 128,
       .context = 4096,
       .source = "Touvron et al. 2023; meta-llama/Llama-2-7b-hf config.json (32 layers, 32 "
                 "heads, hidden 4096)"},
      {.name = "Llama 3 8B",
       .attention = "GQA 32/8",
       .layers = 32,
       .kv_heads = 8,
       .d_k = 128,
       .context = 8192,
       .source = "Meta 2024; meta-llama/Meta-Llama-3-8B config.json (32 layers, 32 heads, "
                 "num_key_value_heads 8, hidden 4096)"},
      {.name = "Mistral 7B",
       .attention = "GQA 32/8, W 4096",
       .layers = 32,
       .kv_heads = 8,
       .d_k = 128,
       .window = 4096,
       .context = 8192,
       .source = "Jiang et al. 2023 (arXiv 2310.06825); mistralai/Mistral-7B-v0.1 config.json "
                 "(sliding_window 4096)"},
      {.name = "DeepSeek-V2",
       .attention = "MLA, 128 heads",
       .layers = 60,
       .latent = 512 + 64,
       .context = 131072,
       .source = "DeepSeek-AI 2024 (arXiv 2405.04434); deepseek-ai/DeepSeek-V2 config.json "
                 "(60 layers, kv_lora_rank 512, qk_rope_head_dim 64)"},
  };
  return models;
}

const PublishedModel& published_model(std::string_view name) {
  for (const PublishedModel& m : published_models()) {
    if (m.name == name) return m;
  }
  throw std::invalid_argument("published_model: no model named " + std::string(name));
}

double numbers_per_token(const PublishedModel& m) {
  const double per_layer =
      m.latent > 0 ? static_cast<double>(m.latent) : 2.0 * static_cast<double>(m.kv_heads * m.d_k);
  return per_layer * static_cast<double>(m.layers);
}

double cache_bytes(const PublishedModel& m, double tokens, double bytes_per_number) {
  const double held = m.window > 0 ? std::min(tokens, static_cast<double>(m.window)) : tokens;
  return held * numbers_per_token(m) * bytes_per_number;
}

std::vector<std::string> cache_table() {
  const auto row = [](auto&&... cells) {
    std::string line = fmt::format("{:<13} {:<17} {:>8} {:>10} {:>10} {:>10} {:>10}", cells...);
    line.erase(line.find_last_not_of(' ') + 1);  // no trailing blank after the last cell
    return line;
  };
  std::vector<std::string> lines{
      row("model", "attention", "context", "per token", "4k", "32k", "128k")};
  for (const PublishedModel& m : published_models()) {
    const auto at = [&](double n) {  // starred past the released context
      return attn::bytes_str(cache_bytes(m, n)) + (n > static_cast<double>(m.context) ? "*" : " ");
    };
    lines.push_back(row(m.name, m.attention, course::with_commas(m.context),
                        attn::bytes_str(cache_bytes(m, 1)) + " ", at(4096), at(32768), at(131072)));
  }
  return lines;
}

}  // namespace decoding
