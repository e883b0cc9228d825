// Chapter 12's head scores (heads.hpp).
#include "heads.hpp"

#include "attn/models/language_model_training.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <string_view>

namespace lm {

namespace {

bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_space(char c) { return c == ' '; }
bool is_punctuation(char c) { return std::ispunct(static_cast<unsigned char>(c)) != 0; }

// The running sums of one head's five scores and how many queries each averaged over.
struct Sums {
  double previous = 0, induction = 0, space = 0, punctuation = 0, word_start = 0;
  double n_previous = 0, n_induction = 0, n_all = 0, n_word = 0;
};

// The position where the word holding position i starts, or -1 when i is not a letter or is
// the word's first letter (its word-start weight would be its weight on itself).
Index word_start_of(std::span<const char> chars, Index i) {
  if (!is_letter(chars[static_cast<std::size_t>(i)])) return -1;
  Index s = i;
  while (s > 0 && is_letter(chars[static_cast<std::size_t>(s - 1)])) --s;
  return s == i ? -1 : s;
}

// Adds the weights w [n x n] of one window (its characters `chars`) to the real-text sums.
template <typename Weight>
void add_text(Sums& s, std::span<const char> chars, const Weight& w) {
  const auto n = static_cast<Index>(chars.size());
  for (Index i = 0; i < n; ++i) {
    double space = 0, punctuation = 0;
    for (Index j = 0; j <= i; ++j) {
      const char c = chars[static_cast<std::size_t>(j)];
      if (is_space(c)) space += w(i, j);
      if (is_punctuation(c)) punctuation += w(i, j);
    }
    s.space += space;
    s.punctuation += punctuation;
    s.n_all += 1;
    if (i >= 1) s.previous += w(i, i - 1), s.n_previous += 1;
    if (const Index start = word_start_of(chars, i); start >= 0)
      s.word_start += w(i, start), s.n_word += 1;
  }
}

// Adds one repeated string's weights to the induction sum: the queries of the second copy.
template <typename Weight>
void add_repeated(Sums& s, Index n, Index period, const Weight& w) {
  for (Index i = period; i < n; ++i) s.induction += w(i, i - period + 1), s.n_induction += 1;
}

HeadScore mean_of(const Sums& s, Index layer, Index head) {
  const auto mean = [](double sum, double count) { return count > 0 ? sum / count : 0.0; };
  return {.layer = layer,
          .head = head,
          .previous = mean(s.previous, s.n_previous),
          .induction = mean(s.induction, s.n_induction),
          .space = mean(s.space, s.n_all),
          .punctuation = mean(s.punctuation, s.n_all),
          .word_start = mean(s.word_start, s.n_word)};
}

std::vector<char> chars_of(const HeadProbes& p, const attn::TokenIds& ids, Index row) {
  std::vector<char> chars(static_cast<std::size_t>(ids.cols()));
  for (Index i = 0; i < ids.cols(); ++i)
    chars[static_cast<std::size_t>(i)] = p.chars[static_cast<std::size_t>(ids(row, i))];
  return chars;
}

// The mean cross-entropy of logits [B n x V] at positions R - 1 .. n - 2 of each row of ids
// [B x n], each predicting the id after it, in double with the largest logit subtracted.
double copy_loss(const attn::Matrix& logits, const attn::TokenIds& ids, Index period) {
  double total = 0, count = 0;
  for (Index b = 0; b < ids.rows(); ++b) {
    for (Index i = period - 1; i + 1 < ids.cols(); ++i) {
      const auto row = logits.row(b * ids.cols() + i);
      const double m = row.maxCoeff();
      double sum = 0;
      for (Index v = 0; v < row.size(); ++v) sum += std::exp(static_cast<double>(row(v)) - m);
      total += m + std::log(sum) - static_cast<double>(row(ids(b, i + 1)));
      count += 1;
    }
  }
  return count > 0 ? total / count : 0.0;
}

}  // namespace

HeadProbes make_head_probes(std::span<const int> held_out, const corpus::CharVocab& vocab,
                            Index batch, Index context, attn::Rng& rng) {
  attn::require_at_least_one(batch, "make_head_probes", "the batch size");
  attn::require(context >= 2, "make_head_probes", [&] {
    return "context " + std::to_string(context) + ": a repeated string needs at least 2 tokens";
  });
  HeadProbes p;
  p.chars = vocab.chars;
  p.period = context / 2;
  p.text = corpus::random_windows(held_out, batch, context, rng).inputs;  // [B x n]
  std::vector<int> letters;
  for (int id = 0; id < vocab.size(); ++id) {
    if (std::islower(static_cast<unsigned char>(vocab.chars[static_cast<std::size_t>(id)])))
      letters.push_back(id);
  }
  if (letters.size() < 2) {
    letters.clear();
    for (int id = 0; id < vocab.size(); ++id) letters.push_back(id);
  }
  p.repeated = attn::TokenIds(batch, context);  // [B x n]: columns i and i + R hold one id
  for (Index b = 0; b < batch; ++b) {
    for (Index i = 0; i < context; ++i) {
      if (i >= p.period) {
        p.repeated(b, i) = p.repeated(b, i - p.period);
        continue;
      }
      const auto pick =
          static_cast<std::size_t>(rng.uniform() * static_cast<double>(letters.size()));
      p.repeated(b, i) = letters[std::min(pick, letters.size() - 1)];
    }
  }
  return p;
}

std::vector<HeadScore> score_heads(const attn::LanguageModel& model, const HeadProbes& probes,
                                   double* second_copy_loss) {
  const Index L = model.config.layers, H = model.config.heads;
  std::vector<Sums> sums(static_cast<std::size_t>(L * H));
  attn::LanguageModelCache cache;
  for (const bool repeated : {false, true}) {
    const attn::TokenIds& ids = repeated ? probes.repeated : probes.text;  // [B x n]
    attn::language_model_forward_batch(model, ids, cache, /*need_weights=*/true);
    if (repeated && second_copy_loss)
      *second_copy_loss = copy_loss(cache.logits, ids, probes.period);
    for (Index l = 0; l < L; ++l) {
      const auto& weights =
          cache.blocks[static_cast<std::size_t>(l)].attn.weights;  // B H of [n x n]
      for (Index b = 0; b < ids.rows(); ++b) {
        const std::vector<char> chars = chars_of(probes, ids, b);
        for (Index q = 0; q < H; ++q) {
          const attn::Matrix& w = weights[static_cast<std::size_t>(b * H + q)];
          Sums& s = sums[static_cast<std::size_t>(l * H + q)];
          if (repeated) {
            add_repeated(s, ids.cols(), probes.period, w);
          } else {
            add_text(s, chars, w);
          }
        }
      }
    }
  }
  std::vector<HeadScore> scores;
  for (Index l = 0; l < L; ++l) {
    for (Index q = 0; q < H; ++q)
      scores.push_back(mean_of(sums[static_cast<std::size_t>(l * H + q)], l, q));
  }
  return scores;
}

attn::AllowedMask head_mask(Index n, Index window) {
  return window > 0 ? attn::sliding_window_mask(n, window) : attn::causal_mask(n);
}

HeadScore uniform_scores(const HeadProbes& probes, Index window) {
  const Index n = probes.text.cols();
  const attn::AllowedMask allowed = head_mask(n, window);  // [n x n]
  attn::Matrix even = attn::Matrix::Zero(n, n);            // [n x n]: 1 / (keys allowed) on each
  for (Index i = 0; i < n; ++i) {
    const double keys = static_cast<double>(allowed.row(i).count());
    for (Index j = 0; j < n; ++j) {
      if (allowed(i, j)) even(i, j) = static_cast<float>(1.0 / keys);
    }
  }
  Sums s;
  for (Index b = 0; b < probes.text.rows(); ++b) {
    add_text(s, chars_of(probes, probes.text, b), even);
    add_repeated(s, n, probes.period, even);
  }
  return mean_of(s, 0, 0);
}

const HeadScore& best_head(const std::vector<HeadScore>& scores, double HeadScore::*score) {
  attn::require(!scores.empty(), "best_head", "no heads to choose from");
  return *std::max_element(
      scores.begin(), scores.end(),
      [&](const HeadScore& a, const HeadScore& b) { return a.*score < b.*score; });
}

std::vector<Index> head_score_steps(Index first, Index last, Index eval_every) {
  const Index fine = std::max<Index>(1, eval_every / 4);
  std::vector<Index> steps;
  for (Index s = first; s <= last;) {
    steps.push_back(s);
    s += s < 5 * eval_every ? fine : eval_every;
    if (s > last && steps.back() != last) steps.push_back(last);
  }
  return steps;
}

std::string map_sentence(const std::string& text, Index context) {
  const auto longest = static_cast<std::size_t>(std::min<Index>(context, 56));
  const std::size_t shortest = longest / 2;
  std::string first_fit;
  // The text may start inside a line (where the split cut it): whole lines begin after the first
  // newline.
  const std::size_t first_newline = text.find('\n');
  for (std::size_t at = first_newline == std::string::npos ? 0 : first_newline + 1;
       at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + at, end - at);
    if (line.size() >= shortest && line.size() <= longest) {
      if (first_fit.empty()) first_fit = line;
      std::map<std::string, int> words;
      for (std::size_t i = 0; i < line.size();) {
        std::size_t j = i;
        while (j < line.size() && is_letter(line[j])) ++j;
        if (j - i >= 3 && ++words[std::string(line.substr(i, j - i))] == 2)
          return std::string(line);
        i = j + 1;
      }
    }
    at = end + 1;
  }
  if (!first_fit.empty()) return first_fit;
  const std::size_t start = first_newline == std::string::npos ? 0 : first_newline + 1;
  return text.substr(start < text.size() ? start : 0, longest);
}

HeadMap head_map(const attn::LanguageModel& model, std::span<const int> ids, Index layer,
                 Index head) {
  const auto m = static_cast<Index>(ids.size());
  attn::TokenIds row(1, m);  // [1 x m]
  for (std::size_t i = 0; i < ids.size(); ++i) row(0, static_cast<Index>(i)) = ids[i];
  attn::LanguageModelCache cache;
  attn::language_model_forward_batch(model, row, cache, /*need_weights=*/true);
  const attn::GroupedQueryResult& a = cache.blocks[static_cast<std::size_t>(layer)].attn;
  // The scores: query head `head`'s columns of Q and its kv head's of K, both as RoPE rotated
  // them, under the mask the forward used (the window, else causal).
  const attn::GroupedQueryAttention& gqa = model.blocks[static_cast<std::size_t>(layer)].attn;
  const Index d_k = gqa.d_k(), kv = head / gqa.group_size();
  attn::AllowedMask mask = head_mask(m, model.config.window);  // [m x m]
  attn::Matrix scores = attn::attention_scores(                // [m x m]
      a.Q.middleCols(head * d_k, d_k), a.K.middleCols(kv * d_k, d_k), {.allowed = mask});
  return {a.weights[static_cast<std::size_t>(head)], std::move(scores), std::move(mask)};
}

}  // namespace lm
