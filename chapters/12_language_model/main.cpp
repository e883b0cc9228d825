// 12_language_model: attention learns English. Chapter 11's decoder, trained on a real book
// with chapter 09's loop, writes text through its KV cache.
//
//   the corpus     the King James Bible (Debian's bible-kjv), 4.1 MB of public-domain English
//   tokens         one per character: a vocabulary of 63
//   the model      pre-norm decoder, causal GQA with RoPE, windows of 64 characters
//   training       batches of random windows, every position predicting the next character;
//                  the loss in nats per character, on held-out text too
//   the heads      what each attends to: the character before, the start of the word, and
//                  (an induction head) what followed the same character last time
//   writing        one character at a time through the KV cache, at a temperature, top-k
//
//   12_language_model [--steps N] [--batch B] [--context N] [--d-model E] [--heads H]
//                     [--kv-heads G] [--layers L] [--lr X] [--tied] [--repeated R]
//                     [--temperature T]
//                     [--top-k K] [--prompt TEXT] [--corpus FILE] [--quick]
//                     [--save DIR] [--load DIR] [--stop-at K] [--seed N] [--out DIR]
#include "attn/core/random.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/models/generation.hpp"
#include "attn/models/language_model.hpp"
#include "attn/models/language_model_training.hpp"
#include "checkpoints.hpp"
#include "corpus.hpp"
#include "course/chapter.hpp"
#include "course/training_loop.hpp"
#include "figures.hpp"
#include "heads.hpp"
#include "knobs.hpp"
#include "tokens.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using attn::Index;
using lm::Knobs;
using training::History;
using training::StepResult;

// ---- 1. The corpus and its tokens ---------------------------------------------------------------

struct Text {
  std::string name;         // where it came from
  corpus::CharVocab vocab;  // its characters
  corpus::Merges tokens;    // what each token id stands for: a character, or merged pieces
  corpus::Split split;      // its ids: the first 90% to train on, the last 10% held out
};

Text corpus_and_tokens(course::Chapter& ch, const Knobs& k, corpus::Source source) {
  ch.step("The corpus: a real book, one character at a time");
  if (source.text.empty()) source = corpus::load(k.corpus);  // says what failed, if it did
  const std::string& text = source.text;
  Text t;
  t.name = source.name;
  if (k.corpus.empty()) {
    ch.prose("{}: {} bytes of English, one verse per line, checksum {:016x} verified. nanoGPT "
             "trains on Shakespeare (1.1 MB); this text is almost four times as long, ships in "
             "Debian's archive and needs no download.",
             t.name, course::with_commas(static_cast<Index>(text.size())), corpus::kKjvChecksum);
  } else {
    ch.prose("{}: {} bytes (--corpus)", t.name,
             course::with_commas(static_cast<Index>(text.size())));
  }
  ch.say("its first lines:");
  std::size_t end = 0;
  for (int line = 0; line < 3 && end != std::string::npos; ++line) {
    const std::size_t next = text.find('\n', end);
    ch.say("  | {}", text.substr(end, std::min<std::size_t>(next - end, 90)));
    end = next == std::string::npos ? next : next + 1;
  }

  // [tokens]
  // One token per character: the vocabulary is every distinct byte of the text, sorted.
  t.vocab = corpus::make_char_vocab(text);
  std::vector<int> ids = corpus::encode(t.vocab, text);  // [N]
  t.split = corpus::split_tokens(std::move(ids), 0.1);   // the last tenth is held out
  // [tokens]
  ch.say("vocabulary: {} characters, id 0 to {}, sorted by byte; the most frequent:",
         t.vocab.size(), t.vocab.size() - 1);
  std::vector<int> order(static_cast<std::size_t>(t.vocab.size()));
  for (int i = 0; i < t.vocab.size(); ++i) order[static_cast<std::size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return t.vocab.counts[static_cast<std::size_t>(a)] >
           t.vocab.counts[static_cast<std::size_t>(b)];
  });
  for (std::size_t r = 0; r < 8; ++r) {
    const int id = order[r];
    ch.say("  id {:>2} {:<6} {:>9} times", id, corpus::shown(t.vocab.chars[id]),
           course::with_commas(t.vocab.counts[static_cast<std::size_t>(id)]));
  }
  ch.say("split: {} characters to train on, the last {} held out for validation",
         course::with_commas(std::ssize(t.split.train)),
         course::with_commas(std::ssize(t.split.validation)));
  const auto characters = static_cast<double>(t.split.train.size());
  // [merges]
  // --merges M: byte-pair merges learned on the training text, then applied to the held-out.
  t.tokens = corpus::learn_merges(t.split.train, t.vocab, k.merges);  // encodes train too
  t.split.validation = corpus::apply_merges(std::move(t.split.validation), t.tokens);
  // [merges]
  if (k.merges > 0) {
    ch.prose("{} merges learned: {} tokens; the training text is {} tokens, {:.2f} characters "
             "each. The first merges and the longest piece:",
             k.merges, t.tokens.size(), course::with_commas(std::ssize(t.split.train)),
             characters / static_cast<double>(t.split.train.size()));
    std::string first;
    for (int m = t.vocab.size(); m < std::min(t.tokens.size(), t.vocab.size() + 8); ++m)
      first += " " + corpus::shown_piece(t.tokens.pieces[static_cast<std::size_t>(m)]);
    const auto longest = std::ranges::max(t.tokens.pieces, {}, &std::string::size);
    ch.prose("{}   ...   {}", first, corpus::shown_piece(longest));
  }
  corpus::check_long_enough(t.split.validation.size(), k.context, "the validation split");
  corpus::check_long_enough(t.split.train.size(), k.context, "the training split");
  return t;
}

// What the loss means before any training: ln V if every character were equally likely, and
// the entropy of the characters' frequencies, what a model that ignores the context can reach.
std::pair<double, double> reference_losses(const corpus::CharVocab& vocab) {
  double total = 0, entropy = 0;
  for (const auto c : vocab.counts) total += static_cast<double>(c);
  for (const auto c : vocab.counts) {
    if (c > 0)
      entropy -= (static_cast<double>(c) / total) * std::log(static_cast<double>(c) / total);
  }
  return {std::log(static_cast<double>(vocab.size())), entropy};
}

// ---- 2. Writing
// -----------------------------------------------------------------------------------

// A sample of the model's writing after `prompt`, at the knobs' temperature and top-k, drawn
// from its own named stream: the same text for the same seed, whatever trained before.
std::string sample_text(course::Chapter& ch, const Knobs& k, const attn::LanguageModel& model,
                        const Text& text, Index step) {
  // [write]
  const std::vector<int> prompt =
      corpus::apply_merges(corpus::encode(text.vocab, k.prompt), text.tokens);
  attn::Rng rng = ch.rng(fmt::format("sample after step {}", step));
  const std::vector<int> fresh = attn::language_model_generate(
      model, prompt, k.sample_length, {.temperature = k.temperature, .top_k = k.top_k}, rng,
      attn::Generation::cached);  // prefill the prompt, then one decode step per character
  // [write]
  return k.prompt + corpus::decode_pieces(text.tokens, fresh);
}

// The sample line by line, a long line cut every 90 characters to fit the terminal.
void show_sample(course::Chapter& ch, const std::string& label, const std::string& text) {
  ch.say("{}", label);
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t line = text.find('\n', at);
    const std::size_t stop = std::min({line, text.size(), at + 90});
    ch.say("  | {}", text.substr(at, stop - at));
    at = stop == line ? stop + 1 : stop;
  }
}

// ---- 3. What the heads learned ------------------------------------------------------------

// The step where a score first reached half of the way from its first value to its last: where
// a head "forms" (0 when it never moved).
Index formed_at(const lm::HeadHistory& heads, std::size_t which, double lm::HeadScore::*score) {
  const double from = heads.scores.front()[which].*score, to = heads.scores.back()[which].*score;
  for (std::size_t t = 0; t < heads.step.size(); ++t) {
    if (heads.scores[t][which].*score - from >= 0.5 * (to - from))
      return static_cast<Index>(heads.step[t]);
  }
  return 0;
}

void what_the_heads_learned(course::Chapter& ch, const Knobs& k, const attn::LanguageModel& model,
                            const Text& text, const lm::HeadProbes& probes,
                            const lm::HeadHistory& heads, const History& h) {
  ch.step("What the heads learned: attention on real text");
  const lm::HeadScore even = lm::uniform_scores(probes, k.window);
  ch.prose("Each head is scored by where its weight goes, on {} held-out windows and {} strings "
           "of {} random letters written twice (a mean weight, 0 to 1). A head that spreads its "
           "weight evenly over the keys it sees scores the last line: a score means something "
           "only well above it.",
           probes.text.rows(), probes.repeated.rows(), probes.period);
  const std::vector<lm::HeadScore>& last = heads.scores.back();
  ch.say("layer head  previous  induction  spaces  punctuation  word start");
  for (const lm::HeadScore& s : last) {
    ch.say("{:>5} {:>4}  {:>8.3f}  {:>9.3f}  {:>6.3f}  {:>11.3f}  {:>10.3f}", s.layer + 1,
           s.head + 1, s.previous, s.induction, s.space, s.punctuation, s.word_start);
  }
  ch.say("    evenly  {:>8.3f}  {:>9.3f}  {:>6.3f}  {:>11.3f}  {:>10.3f}", even.previous,
         even.induction, even.space, even.punctuation, even.word_start);

  const lm::HeadScore& induction = lm::best_head(last, &lm::HeadScore::induction);
  const lm::HeadScore& previous = lm::best_head(last, &lm::HeadScore::previous);
  const lm::HeadScore& word = lm::best_head(last, &lm::HeadScore::word_start);
  const auto index_of = [&](const lm::HeadScore& s) {
    return static_cast<std::size_t>(s.layer * model.config.heads + s.head);
  };
  ch.notice("the strongest previous-token head: layer {} head {} ({:.2f} of its weight on the "
            "character just before)",
            previous.layer + 1, previous.head + 1, previous.previous);
  ch.notice("the strongest induction head: layer {} head {} ({:.2f} on the character that "
            "followed this one last time; evenly: {:.2f})",
            induction.layer + 1, induction.head + 1, induction.induction, even.induction);
  // A head "is" an induction head when it reads back far more than an even spread would.
  if (induction.induction < 5 * even.induction) {
    ch.notice("no head reads back yet: the best induction score is under 5 times an even "
              "spread's (--repeated gives the model text that repeats itself)");
  } else if (heads.step.size() > 2) {
    ch.notice("it formed around step {} (half of its rise, scored at {} steps from {} to {})",
              formed_at(heads, index_of(induction), &lm::HeadScore::induction), heads.step.size(),
              heads.step.front(), heads.step.back());
  }
  if (heads.step.size() > 2) lm::draw_heads_training(ch.plot(), heads, h, even);
  lm::draw_head_scores(ch.plot(), last, model.config.layers, model.config.heads);

  // Three heads' weights on one sentence of the held-out text, its characters on the axes.
  const std::string sentence =
      lm::map_sentence(corpus::decode(text.vocab, text.split.validation), k.context);
  const std::vector<int> ids = corpus::encode(text.vocab, sentence);  // [m]
  ch.prose("their weights on \"{}\" ({} characters): figures 12_head_previous, "
           "12_head_induction, 12_head_word_start",
           sentence, sentence.size());
  for (const auto& [name, s, job] :
       {std::tuple{"12_head_previous", previous, "the character before"},
        std::tuple{"12_head_induction", induction, "what followed this character last time"},
        std::tuple{"12_head_word_start", word, "the start of the word"}}) {
    lm::draw_head_map(ch.plot(), name,
                      fmt::format("Layer {} head {}: {}", s.layer + 1, s.head + 1, job),
                      lm::head_map(model, ids, s.layer, s.head), sentence);
  }
}

// ---- 4. Training
// ------------------------------------------------------------------------------------

void lesson(course::Chapter& ch, Knobs& k, const corpus::Source& source) {
  const Text text = corpus_and_tokens(ch, k, source);
  const auto [uniform, unigram] = reference_losses(text.vocab);
  attn::Matrix vocab_bytes(1, text.vocab.size());  // [1 x V]: the byte of each id
  for (int i = 0; i < text.vocab.size(); ++i)
    vocab_bytes(0, i) = static_cast<float>(static_cast<unsigned char>(text.vocab.chars[i]));
  ch.dump("vocab_bytes", vocab_bytes);

  ch.step("The model: chapter 11's decoder");
  attn::Rng init_rng(ch.seed());
  attn::LanguageModel model =
      attn::language_model_init(init_rng, lm::config_of(k, text.tokens.size()));
  attn::Rng batches = ch.rng("batches");  // the training windows' stream, saved with --save
  course::TrainingState run = lm::start_training(ch, k, model, batches);
  ch.prose("{} layers of pre-norm attention and feed-forward (E = {}, {} query heads over {} "
           "key/value heads, d_ff = {}, RoPE, {}), {} embeddings: {} parameters.",
           k.layers, k.d_model, k.heads, k.kv_heads, k.ff(),
           k.window ? fmt::format("a window of {}", k.window) : "causal",
           k.tied ? "tied" : "untied", course::with_commas(attn::parameter_count(model)));

  // Held-out windows, drawn once: every evaluation reads the same characters.
  attn::Rng held_rng = ch.rng("validation windows");
  std::vector<attn::LanguageModelBatch> held_out;
  for (int b = 0; b < 8; ++b)
    held_out.push_back(corpus::random_windows(text.split.validation, k.batch, k.context, held_rng));
  // Losses per character: a token's nats over the characters it stands for (1 without merges).
  const auto per_character = [&](const attn::LanguageModelBatch& batch) {
    return static_cast<double>(batch.targets.size()) /
           static_cast<double>(corpus::target_characters(text.tokens, batch.targets));
  };
  const auto evaluate = [&] {
    double loss = 0, correct = 0, count = 0;
    for (const attn::LanguageModelBatch& batch : held_out) {
      const attn::LanguageModelStep s = attn::language_model_loss(model, batch, nullptr);
      loss += static_cast<double>(s.loss) * per_character(batch);
      correct += static_cast<double>(s.correct);
      count += static_cast<double>(s.count);
    }
    return std::pair{loss / static_cast<double>(held_out.size()), correct / count};
  };
  const auto [start_loss, start_accuracy] = evaluate();
  ch.prose("before training, on held-out text: {:.3f} nats per character (ln V = {:.3f}: every "
           "character equally likely; {:.3f}: the characters' frequencies alone)",
           start_loss, uniform, unigram);

  const Index last = lm::last_step(k, run);
  // What the heads attend to, scored on the same held-out windows and repeated random strings
  // at every step of head_steps: dense early, where induction heads form. The scores read
  // characters: with --merges they are left out.
  const bool by_character = k.merges == 0;
  attn::Rng probe_rng = ch.rng("head probes");
  const lm::HeadProbes probes =
      by_character
          ? lm::make_head_probes(text.split.validation, text.vocab, 16, k.context, probe_rng)
          : lm::HeadProbes{};
  const std::vector<Index> head_steps =
      by_character ? lm::head_score_steps(run.step, last, k.eval_every) : std::vector<Index>{};
  const std::vector<Index> sample_steps = {100, 1000, last};
  std::vector<Index> snapshot_steps = head_steps;
  snapshot_steps.insert(snapshot_steps.end(), sample_steps.begin(), sample_steps.end());
  lm::HeadHistory heads;
  std::vector<std::pair<Index, std::string>> samples;
  const auto snapshot = [&](Index step) {
    if (std::ranges::count(head_steps, step) && (heads.step.empty() || heads.step.back() != step)) {
      heads.step.push_back(static_cast<double>(step));
      heads.scores.push_back(
          lm::score_heads(model, probes, &heads.second_copy_loss.emplace_back()));
    }
    if ((step == run.step || std::ranges::count(sample_steps, step)) &&
        (samples.empty() || samples.back().first != step))
      samples.emplace_back(step, sample_text(ch, k, model, text, step));
  };
  History h;
  const Index first = run.step;
  if (last > first) {
    ch.step("Training: every position predicts the next character");
    ch.prose("{} steps of {} random windows of {} characters from the first 90%: {} predictions "
             "a step. Adam (betas 0.9, 0.98), peak lr {} after {} warm-up steps, then cosine to "
             "0; gradients clipped to norm 1.",
             last - run.step, k.batch, k.context, k.batch * k.context, k.lr,
             std::min<Index>(100, run.steps));
    // [train]
    const training::Schedule schedule = {.steps = run.steps,
                                         .stop = last,
                                         .peak_lr = k.lr,
                                         .warmup = std::min<Index>(100, run.steps),
                                         .eval_every = k.eval_every};
    h = training::train<attn::LanguageModel>(
        "12_language_model", model, schedule, run,
        [&](attn::LanguageModel& grads) {
          attn::LanguageModelBatch batch =
              corpus::random_windows(text.split.train, k.batch, k.context, batches);  // [B x n]
          corpus::repeat_halves(batch, k.repeated);  // rows [0, --repeated): a piece twice
          const attn::LanguageModelStep s = attn::language_model_loss(model, batch, &grads);
          return StepResult{s.loss * per_character(batch), s.count, s.correct};
        },
        evaluate, snapshot_steps, snapshot);
    // [train]
    // The held-out loss before the first step starts the curves.
    h.eval_step.insert(h.eval_step.begin(), static_cast<double>(first));
    h.eval_loss.insert(h.eval_loss.begin(), start_loss);
    h.eval_accuracy.insert(h.eval_accuracy.begin(), start_accuracy);
    ch.prose("after step {}: held-out loss {:.3f} nats per character, next {} right {:.1f}% of "
             "the time",
             last, h.eval_loss.back(), k.merges > 0 ? "token" : "character",
             100.0 * h.eval_accuracy.back());
    lm::draw_loss(ch.plot(), h, uniform, unigram);
    attn::MatrixD curve(std::ssize(h.eval_step), 2);  // [evaluations x 2]: step, loss
    for (Index e = 0; e < curve.rows(); ++e) {
      curve(e, 0) = h.eval_step[static_cast<std::size_t>(e)];
      curve(e, 1) = h.eval_loss[static_cast<std::size_t>(e)];
    }
    ch.dump("validation_loss", curve);
  } else {
    snapshot(run.step);
  }

  ch.step("Writing: one character at a time, through the KV cache");
  ch.prose("Prompt \"{}\", then {} characters, each drawn at temperature {} from the {} most "
           "likely (chapter 11's prefill, then one decode step per character).",
           k.prompt, k.sample_length, k.temperature, k.top_k);
  for (const auto& [step, sample] : samples)
    show_sample(ch, fmt::format("after {} steps:", step), sample);

  // The cache changes how the logits are computed, never which: greedy decoding, with the
  // cache and recomputing every character, must agree character for character.
  const std::vector<int> prompt =
      corpus::apply_merges(corpus::encode(text.vocab, k.prompt), text.tokens);
  attn::Rng r1(1), r2(1);
  const std::vector<int> cached = attn::language_model_generate(
      model, prompt, 80, {.temperature = k.temperature, .top_k = k.top_k}, r1);
  const std::vector<int> recomputed = attn::language_model_generate(
      model, prompt, 80, {.temperature = k.temperature, .top_k = k.top_k}, r2,
      attn::Generation::recomputed);
  ch.say("80 characters with the cache and recomputing every one: {}",
         cached == recomputed ? "the same characters" : "DIFFERENT characters");

  if (by_character) what_the_heads_learned(ch, k, model, text, probes, heads, h);

  if (!k.save.empty()) lm::save_model(ch, k.save, model, run, batches, text.vocab.chars);
  ch.finish(
      {"A character-level model starts at ln V nats per character and learns, step by step, "
       "what follows what: the frequencies first, then words, then phrases.",
       "Every position of every window is a prediction: B n of them per step.",
       "Writing is chapter 11's loop: prefill the prompt, then one decode step per character.",
       "Heads take jobs: the previous character, the start of the word, and, once a previous-"
       "token head exists, an induction head that reads what followed the same character "
       "last time."},
      {{"--temperature 0.2", "the likeliest characters only: safe, repetitive text"},
       {"--temperature 1.5", "flatter choices: invented words"},
       {"--steps 200", "stop early and read what the model knows by then"},
       {"--repeated 0", "the book alone: previous-token heads form, no induction head"},
       {"--save run --stop-at 500, then --load run", "resume exactly where it stopped"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("12_language_model", "A language model: attention learns English", 2026);
  Knobs k;
  corpus::Source source;  // the text, once the knobs are read
  ch.option("--steps", k.steps, "training steps (the schedule's length)").range(1, lm::kMaxSteps);
  ch.option("--batch", k.batch, "windows per step").range(1, 256);
  ch.option("--context", k.context, "characters per window, the model's context").range(2, 1024);
  ch.option("--d-model", k.d_model, "E, the model's width").range(4, 1024);
  ch.option("--heads", k.heads, "h, the query heads (d_k = E / h must be even)").range(1, 64);
  ch.option("--kv-heads", k.kv_heads, "g, the key/value heads, dividing h").range(1, 64);
  ch.option("--layers", k.layers, "L, the decoder's layers").range(1, 24);
  ch.option("--d-ff", k.d_ff, "the feed-forward width (0: 4 E)").range(0, 8192);
  ch.option("--window", k.window, "W, each query's last keys (0: all)").range(0, 1024);
  ch.option("--merges", k.merges, "byte-pair merges on top of the characters (0: none)")
      .range(0, lm::kMaxMerges);
  ch.option("--repeated", k.repeated, "windows a step written as a piece twice (B / 4)")
      .range(0, 256);
  ch.flag("--tied", k.tied, "the output layer is the embedding (GPT-2's weight tying)");
  ch.option("--lr", k.lr, "Adam's peak learning rate").range(1e-6, 1.0);
  ch.option("--eval-every", k.eval_every, "steps between validation losses").range(1, 100000);
  ch.option("--temperature", k.temperature, "sampling temperature (0: greedy)").range(0.0, 10.0);
  ch.option("--top-k", k.top_k, "sample among the k likeliest characters (0: all)").range(0, 256);
  ch.option("--sample-length", k.sample_length, "characters written per sample").range(1, 10000);
  ch.option("--prompt", k.prompt, "the text the samples start from");
  ch.option("--corpus", k.corpus, "train on this text file instead of the Bible");
  ch.flag("--quick", k.quick, "a small model and 60 steps: seconds, for the tests");
  ch.option("--stop-at", k.stop_at, "stop after this step of the schedule").range(0, lm::kMaxSteps);
  ch.output_folder("--save", k.save, "save the model, with its training state, to DIR");
  ch.input_folder("--load", k.load, "start from the model in DIR (alone: sample from it)");
  ch.require_knobs([&] { return lm::knobs_problem(ch, k, source); });
  return ch.run(argc, argv, [&] { lesson(ch, k, source); });
}
