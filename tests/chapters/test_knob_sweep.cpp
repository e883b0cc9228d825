// Every chapter over random combinations of the knobs it accepts: a learner who passes values
// CLI11 lets through must get the whole lesson, exit 0, nothing on stderr, no NaN printed and
// no line wider than 100 columns. The combinations come from one fixed seed, so the sweep is the
// same on every run; the edges of every range (minimum, maximum where affordable, 1-element sizes,
// --hidden 1, odd --d-model where accepted) are listed by hand next to the random draws.
//
// One test per chapter, so that ctest runs chapters side by side. The sanitize preset runs the
// edges only (ATTN_UNDER_SANITIZERS), the release preset the edges and every draw.
//
// The values are kept small enough for the whole sweep to take well under a minute in a
// Release build: the knobs whose cost multiplies (01's experiment, 07's rotation sweep, 08's
// layers x d_model x d_ff) are drawn so that their product stays bounded.
#include "chapter_run.hpp"
#include "chapters.hpp"  // kChapters, generated from ATTN_CHAPTERS

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace test_knob_sweep {

namespace fs = std::filesystem;
using attn_test::Output;

// Draws from std::mt19937 by hand (no std::uniform_int_distribution, whose algorithm differs
// between standard libraries), so the same seed gives the same commands everywhere.
class Draw {
 public:
  explicit Draw(std::uint32_t seed) : rng_(seed) {}
  // An integer in [lo, hi].
  long long in(long long lo, long long hi) {
    return lo + static_cast<long long>(rng_() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  // An integer in [lo, hi], every power of two equally likely to set its size: small values as
  // often as large ones.
  long long log_in(long long lo, long long hi) {
    long long top = 1;
    while (top * 2 <= hi) top *= 2;
    const long long scale = 1LL << in(0, std::countr_zero(static_cast<unsigned long long>(top)));
    return std::clamp(in(scale, 2 * scale - 1), lo, hi);
  }
  bool chance(int percent) { return in(1, 100) <= percent; }
  // One of `edges` with the given chance, else log_in(lo, hi).
  long long edge_or(int percent, const std::vector<long long>& edges, long long lo, long long hi) {
    return chance(percent) ? one_of(edges) : log_in(lo, hi);
  }
  template <typename T>
  const T& one_of(const std::vector<T>& values) {
    return values[static_cast<std::size_t>(in(0, std::ssize(values) - 1))];
  }

 private:
  std::mt19937 rng_;
};

// " --name value" with the given chance, "" otherwise (the knob keeps its default).
std::string maybe(Draw& d, int percent, const std::string& name, const std::string& value) {
  return d.chance(percent) ? " " + name + " " + value : "";
}

std::string num(long long v) { return std::to_string(v); }

// ---- One generator per chapter: a random accepted command line (without --no-plots) --------

std::string rnn(Draw& d) {
  // Worked example: cheap at any size. Experiment: seeds x scales x distance x H^2 x I, so H and
  // the distance are drawn from the lower part of their ranges.
  std::string a;
  a += maybe(d, 70, "--input-size", num(d.edge_or(20, {1, 64}, 1, 64)));
  a += maybe(d, 70, "--hidden", num(d.chance(25) ? 1 : d.log_in(1, 256)));
  a += maybe(d, 60, "--steps", num(d.edge_or(20, {1, 5, 6, 13}, 1, 1000)));
  a += maybe(d, 50, "--experiment-hidden", num(d.log_in(1, 32)));
  a += maybe(d, 50, "--distance", num(d.chance(20) ? 1 : d.log_in(1, 60)));
  a += maybe(d, 50, "--seeds", num(d.log_in(1, 8)));
  if (d.chance(40)) {
    std::vector<std::string> scales;
    const long long count = d.in(1, 6);
    for (long long s = 0; s < count; ++s) {
      scales.push_back(d.chance(30) ? d.one_of<std::string>({"0.1", "1", "10"})
                                    : fmt::format("{:g}", 0.1 + 0.01 * d.in(0, 990)));
    }
    a += " --scales " + fmt::format("{}", fmt::join(scales, ","));
  }
  return a;
}

std::string attention_by_hand(Draw& d) {
  std::string a;
  if (d.chance(50)) a += " --scale";
  if (d.chance(60)) a += " --random-weights";
  a += maybe(d, 80, "--seed", num(d.in(0, 100000)));
  return a;
}

std::string vectorized_qkv(Draw& d) {
  std::string a;
  a += maybe(d, 70, "--n", num(d.chance(20) ? d.one_of<long long>({4, 64}) : d.in(4, 64)));
  a += maybe(d, 70, "--d-model", num(d.edge_or(25, {4, 5, 7, 2048}, 4, 2048)));
  if (d.chance(50)) a += d.chance(50) ? " --scale" : " --no-scale";
  a += maybe(d, 50, "--seed", num(d.in(0, 100000)));
  return a;
}

std::string softmax_scaling(Draw& d) {
  std::string a;
  a += maybe(d, 70, "--samples", num(d.edge_or(25, {10, 11, 200000}, 10, 200000)));
  a += maybe(d, 70, "--std",
             d.chance(40) ? d.one_of<std::string>({"0.01", "0.5", "1", "22", "23", "88.7", "1000"})
                          : fmt::format("{:g}", 0.01 * static_cast<double>(d.log_in(1, 100000))));
  a += maybe(d, 60, "--d-k", num(d.edge_or(25, {1, 16384}, 1, 16384)));
  if (d.chance(50)) a += " --no-scale";
  a += maybe(d, 50, "--seed", num(d.in(0, 100000)));
  return a;
}

std::string masking(Draw& d) {
  // A batch of B sentences of n tokens; each sentence is words then padding (or padding only,
  // or padding first), the shapes a learner types.
  const long long B = d.chance(30) ? 1 : d.log_in(1, 16);
  const long long n = d.edge_or(20, {1, 64}, 1, 64);
  const long long vocab = d.edge_or(15, {2, 100000}, 2, 1000);
  std::vector<std::string> sentences;
  for (long long b = 0; b < B; ++b) {
    const long long shape = d.in(0, 9);  // 0: all padding, 1: padding first, else words first
    const long long words = shape == 0 ? 0 : d.in(1, n);
    std::vector<std::string> ids;
    for (long long i = 0; i < n; ++i) {
      const bool word = shape == 1 ? i >= n - words : i < words;
      ids.push_back(num(word ? d.in(vocab > 1 ? 1 : 0, vocab - 1) : 0));
    }
    sentences.push_back(fmt::format("{}", fmt::join(ids, ",")));
  }
  std::string a = " --ids " + fmt::format("{}", fmt::join(sentences, "/"));
  a += " --vocab " + num(vocab);
  a += maybe(d, 70, "--mask", d.one_of<std::string>({"none", "pad", "causal", "window"}));
  a += maybe(d, 50, "--window", num(d.chance(30) ? d.one_of<long long>({0, 64}) : d.in(0, 8)));
  a += maybe(d, 50, "--fill", d.one_of<std::string>({"neg-inf", "-1e9"}));
  // The embedding table is vocab x d_model floats: 100000 x 2048 would be 800 MB.
  const long long d_model = d.edge_or(25, {2, 3, 5}, 2, 2048);
  a += " --d-model " + num(vocab > 1000 ? std::min<long long>(d_model, 64) : d_model);
  a += maybe(d, 70, "--d-k", num(d.edge_or(20, {1, 2048}, 1, 2048)));
  a += maybe(d, 50, "--seed", num(d.in(0, 100000)));
  return a;
}

std::string multi_head(Draw& d) {
  const long long heads = d.edge_or(25, {1, 64}, 1, 64);
  // d_model a multiple of heads in [1, 1024]; odd ones where heads is odd or 1.
  const long long per_head = d.edge_or(25, {1, 3}, 1, 1024 / heads);
  std::string a = " --heads " + num(heads) + " --d-model " + num(heads * per_head);
  a += maybe(d, 60, "--seq-len", num(d.chance(25) ? d.one_of<long long>({3, 64}) : d.in(3, 64)));
  a += maybe(d, 60, "--mask", d.one_of<std::string>({"none", "pad", "causal"}));
  a += maybe(d, 50, "--seed", num(d.in(0, 100000)));
  return a;
}

std::string positional_encoding(Draw& d) {
  // The rotation check costs positions x max-offset x d_model / 2, twice: kept below ~2e7.
  const long long d_model = 2 * (d.edge_or(25, {1, 4, 256}, 1, 256));
  long long positions = d.edge_or(20, {1, 512}, 1, 512);
  long long offset = d.edge_or(20, {1, 4096}, 1, 4096);
  while (positions * (offset + 1) * d_model / 2 > 20'000'000) {
    (positions > offset ? positions : offset) /= 2;
  }
  std::string a = " --d-model " + num(d_model) + " --positions " + num(positions) +
                  " --max-offset " + num(offset);
  a += maybe(d, 50, "--seed", num(d.in(0, 100000)));
  return a;
}

std::string transformer_block(Draw& d) {
  // Parameters grow as layers x (d_model^2 + d_model d_ff): kept below ~2e7 floats (80 MB).
  const long long heads = d.edge_or(25, {1, 64}, 1, 64);
  long long per_head = d.chance(25) ? 1 : d.log_in(1, std::max<long long>(1, 1024 / heads));
  if (heads * per_head < 2) per_head = 2;  // --d-model starts at 2
  const long long d_model = heads * per_head;
  long long layers = d.chance(20) ? d.one_of<long long>({1, 12}) : d.in(1, 12);
  long long d_ff = d.edge_or(20, {1, 4096}, 1, 4096);
  while (layers * d_model * (4 * d_model + 2 * d_ff) > 20'000'000) {
    if (layers > 1) {
      layers /= 2;
    } else {
      d_ff = std::max<long long>(1, d_ff / 2);
    }
  }
  std::string a = " --heads " + num(heads) + " --d-model " + num(d_model) + " --layers " +
                  num(layers) + " --d-ff " + num(d_ff);
  a += maybe(d, 60, "--norm", d.one_of<std::string>({"post", "pre"}));
  a += maybe(d, 50, "--seed", num(d.in(0, 100000)));
  return a;
}

std::string training(Draw& d) {
  // Each run trains for real, and greedy decoding of the 1000 held-out reversals costs
  // length^2 x layers x d_model^2: steps, sizes and lengths are drawn small.
  const long long heads = d.edge_or(25, {1, 4}, 1, 4);
  const long long d_model = heads * d.edge_or(25, {1, 8}, 1, 8);
  std::string a = " --steps " + num(d.edge_or(20, {1, 20}, 1, 20)) + " --heads " + num(heads) +
                  " --d-model " + num(std::max<long long>(2, d_model));
  if (d_model < 2) a = " --steps 3 --heads 1 --d-model 2";
  a += maybe(d, 70, "--task", d.one_of<std::string>({"both", "reversal", "induction"}));
  a += maybe(d, 50, "--layers", num(d.in(1, 2)));
  a += maybe(d, 50, "--length", num(d.edge_or(25, {2, 12}, 2, 12)));
  a += maybe(d, 50, "--context", num(d.edge_or(25, {8, 40}, 8, 40)));
  a += maybe(d, 40, "--lr", d.one_of<std::string>({"1e-6", "0.0003", "0.01", "1"}));
  a += maybe(d, 40, "--label-smoothing", d.one_of<std::string>({"0", "0.1", "0.9"}));
  a += maybe(d, 50, "--norm", d.one_of<std::string>({"post", "pre"}));
  a += maybe(d, 50, "--seed", num(d.in(0, 100000)));
  return a;
}

std::string efficient_attention(Draw& d) {
  const long long n = d.edge_or(25, {1, 64}, 1, 64);
  std::string a = " --n " + num(n) + " --d " + num(d.edge_or(25, {1, 64}, 1, 64));
  a += " --query-tile " + num(d.edge_or(25, {1, 64}, 1, 64));
  a += " --key-tile " + num(d.edge_or(25, {1, 64}, 1, 64));
  const std::string mask = d.one_of<std::string>({"none", "causal", "pad"});
  a += " --mask " + mask;
  if (mask == "pad") a += " --padding " + num(d.in(0, n));
  if (d.chance(40)) {
    std::string row;
    const long long len = d.in(2, 16);
    for (long long i = 0; i < len; ++i) {
      row += (i ? "," : "") + num(d.in(-100, 100));
    }
    a += " --row " + row + " --split " + num(d.in(1, len - 1));
  }
  a += maybe(d, 50, "--seed", num(d.in(0, 100000)));
  return a;
}

std::string decoding(Draw& d) {
  // d_model = heads x d_k with d_k even and d_model in [4, 64]; kv heads a divisor of heads.
  // Each run is a tiny model: cheap at any size the ranges allow.
  const long long heads = d.edge_or(25, {1, 16}, 1, 16);
  const long long pairs = std::max<long long>(1, 64 / heads / 2);  // d_k / 2 at most
  long long d_k = 2 * d.edge_or(25, {1, pairs}, 1, pairs);
  if (heads * d_k < 4) d_k = 4;  // heads 1: --d-model starts at 4
  std::vector<long long> divisors;
  for (long long g = 1; g <= heads; ++g) {
    if (heads % g == 0) divisors.push_back(g);
  }
  std::string a = " --d-model " + num(heads * d_k) + " --heads " + num(heads) + " --kv-heads " +
                  num(d.one_of(divisors));
  a += maybe(d, 60, "--layers", num(d.edge_or(25, {1, 6}, 1, 6)));
  a += maybe(d, 70, "--window", num(d.edge_or(25, {0, 1, 16}, 0, 16)));
  a += maybe(d, 50, "--prompt", num(d.edge_or(25, {1, 32}, 1, 32)));
  a += maybe(d, 50, "--new", num(d.edge_or(25, {1, 32}, 1, 32)));
  a += maybe(d, 40, "--layout", d.one_of<std::string>({"interleaved", "halves"}));
  a += maybe(d, 50, "--seed", num(d.in(0, 100000)));
  return a;
}

std::string language_model(Draw& d) {
  // --quick sizes (seconds a run): d_model = heads x d_k with d_k even, kv heads a divisor.
  const long long heads = d.edge_or(25, {1, 4}, 1, 4);
  long long d_k = 2 * d.edge_or(25, {1, 8}, 1, 8);
  if (heads * d_k < 4) d_k = 4;  // --d-model starts at 4
  std::vector<long long> divisors;
  for (long long g = 1; g <= heads; ++g) {
    if (heads % g == 0) divisors.push_back(g);
  }
  std::string a = " --quick --d-model " + num(heads * d_k) + " --heads " + num(heads) +
                  " --kv-heads " + num(d.one_of(divisors));
  a += " --steps " + num(d.edge_or(25, {1, 40}, 1, 40));
  a += maybe(d, 50, "--layers", num(d.edge_or(25, {1, 3}, 1, 3)));
  a += maybe(d, 50, "--context", num(d.edge_or(25, {2, 48}, 2, 48)));
  a += maybe(d, 50, "--batch", num(d.edge_or(25, {1, 8}, 1, 8)));
  a += maybe(d, 40, "--window", num(d.edge_or(25, {0, 1, 8}, 0, 8)));
  a += maybe(d, 30, "--tied", "");
  a += maybe(d, 40, "--temperature", d.one_of<std::string>({"0", "0.5", "1", "10"}));
  a += maybe(d, 40, "--top-k", num(d.edge_or(25, {0, 1, 256}, 0, 256)));
  a += maybe(d, 40, "--sample-length", num(d.edge_or(25, {1, 100}, 1, 100)));
  a += maybe(d, 50, "--seed", num(d.in(0, 100000)));
  a += maybe(d, 30, "--repeated", "0");  // the default, a quarter of the batch, always fits
  a += maybe(d, 20, "--merges", num(d.edge_or(25, {1, 64}, 0, 64)));
  return a;
}

// The edges of every range, each run once, whatever the random draws.
const std::map<std::string, std::vector<std::string>> kEdges = {
    {"01_rnn",
     {"--input-size 1 --hidden 1 --steps 1 --experiment-hidden 1 --distance 1 --seeds 1 "
      "--scales 0.1",
      "--hidden 1 --input-size 64", "--hidden 1 --seed 7", "--steps 13",
      "--input-size 64 --hidden 256 --steps 1000 --experiment-hidden 8 --distance 10 --seeds 1 "
      "--scales 0.1,0.5,1,2,5,10"}},
    {"02_attention_by_hand",
     {"--scale", "--random-weights --seed 0", "--random-weights --seed 161"}},
    {"03_vectorized_qkv", {"--n 4 --d-model 4", "--n 64 --d-model 2048", "--d-model 5 --scale"}},
    {"04_softmax_scaling",
     {"--samples 10 --std 0.01 --d-k 1", "--samples 200000 --std 1000 --d-k 16384 --no-scale",
      "--std 0.5 --samples 10 --d-k 1"}},
    {"05_masking",
     {"--ids 1", "--ids 0", "--ids 0 --fill -1e9", "--ids 1 --vocab 2 --d-model 2 --d-k 1",
      "--d-model 16 --d-k 16", "--fill -1e9 --ids 0,0,0/1,2,3", "--mask causal --ids 0,1,2",
      "--mask window --window 0 --ids 3,0,0,0 --fill -1e9", "--window 64", "--mask none --ids 0",
      "--d-model 3 --d-k 2048"}},
    {"06_multi_head",
     {"--d-model 1 --heads 1 --seq-len 3", "--heads 64 --d-model 64", "--heads 3 --d-model 3",
      "--mask none --seq-len 64", "--mask causal --seq-len 3 --d-model 5 --heads 5"}},
    {"07_positional_encoding",
     {"--d-model 2 --positions 1 --max-offset 1", "--d-model 2", "--d-model 8",
      "--d-model 512 --positions 8 --max-offset 4096"}},
    {"08_transformer_block",
     {"--layers 1 --heads 1 --d-model 2 --d-ff 1", "--norm pre", "--heads 64 --d-model 64",
      "--layers 12 --d-model 8 --heads 2 --d-ff 4096 --norm pre", "--d-model 3 --heads 1"}},
    {"09_training",
     {"--steps 1 --task reversal --length 32 --layers 1 --d-model 8",
      "--steps 1 --task induction --context 40 --layers 8 --d-model 16 --heads 16",
      "--steps 2 --d-model 2 --heads 2 --lr 1 --label-smoothing 0.9 --norm post",
      "--steps 3 --length 2 --context 8"}},
    {"10_efficient_attention",
     {"--n 1 --d 1 --query-tile 1 --key-tile 1", "--n 64 --d 64 --query-tile 64 --key-tile 64",
      "--n 1 --mask pad --padding 1", "--mask pad --padding 0", "--mask pad --padding 10",
      "--mask causal --n 64 --query-tile 7 --key-tile 5", "--row -1000,0,1000 --split 2",
      "--row 0,0 --split 1", "--row 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 --split 15"}},
    {"11_decoding",
     {"--d-model 4 --heads 2 --kv-heads 1 --layers 1 --window 1 --prompt 1 --new 1",
      "--d-model 4 --heads 1 --kv-heads 1", "--d-model 32 --heads 16 --kv-heads 8",
      "--d-model 64 --heads 16 --kv-heads 16 --layers 6 --window 16 --prompt 32 --new 32 "
      "--layout halves",
      "--window 16 --prompt 1 --new 1", "--window 1 --new 32", "--kv-heads 4", "--kv-heads 1"}},
    {"12_language_model",
     {"--quick --steps 1 --batch 1 --context 2 --layers 1 --d-model 4 --heads 1 --kv-heads 1",
      "--quick --steps 2 --temperature 0 --top-k 1 --sample-length 1 --prompt A",
      "--quick --steps 2 --window 1 --tied --temperature 10 --top-k 256",
      "--quick --steps 3 --d-model 64 --heads 16 --kv-heads 16 --context 48 --batch 8",
      "--quick --steps 2 --batch 3 --repeated 3 --context 3",
      "--quick --steps 1 --merges 300 --context 4 --temperature 0"}},
};

const std::map<std::string, std::function<std::string(Draw&)>> kDraws = {
    {"01_rnn", rnn},
    {"02_attention_by_hand", attention_by_hand},
    {"03_vectorized_qkv", vectorized_qkv},
    {"04_softmax_scaling", softmax_scaling},
    {"05_masking", masking},
    {"06_multi_head", multi_head},
    {"07_positional_encoding", positional_encoding},
    {"08_transformer_block", transformer_block},
    {"09_training", training},
    {"10_efficient_attention", efficient_attention},
    {"11_decoding", decoding},
    {"12_language_model", language_model},
};

constexpr int kRandomRunsPerChapter = 36;
#ifdef ATTN_UNDER_SANITIZERS
constexpr bool kUnderSanitizers = true;
#else
constexpr bool kUnderSanitizers = false;
#endif
// Chapter 09 trains two models and decodes 1,000 held-out sequences on every run (~1 s each
// even with a few steps): fewer draws keep the sweep within a minute, and its edges still run.
constexpr int kRandomRunsOfTraining = 8;

// The longest line of `text`, in bytes (the output is ASCII).
std::size_t widest_line(const std::string& text) {
  std::size_t start = 0, widest = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    widest = std::max(widest, end - start);
    start = end + 1;
  }
  return widest;
}

// Every chapter's commands: its edges, then its random draws, all drawn from one seed in
// reading order, so each chapter's list is the same whichever chapters ctest runs.
struct Sweep {
  std::map<std::string, std::vector<std::string>> commands;
  std::string missing;  // a chapter without knobs in this file
};

const Sweep& sweep() {
  static const Sweep s = [] {
    Sweep r;
    Draw d(20260311);
    for (const char* chapter : attn_test::kChapters) {
      if (!kDraws.contains(chapter) || !kEdges.contains(chapter)) {
        r.missing += std::string(chapter) + " ";
        continue;
      }
      std::vector<std::string> commands = kEdges.at(chapter);
      const int draws =
          std::string(chapter) == "09_training" ? kRandomRunsOfTraining : kRandomRunsPerChapter;
      for (int i = 0; i < draws; ++i) commands.push_back(kDraws.at(chapter)(d));
      r.commands[chapter] = std::move(commands);
    }
    return r;
  }();
  return s;
}

TEST(KnobSweep, EveryChapterHasItsKnobsAndTheSweepIsWide) {
  EXPECT_EQ(sweep().missing, "") << "a new chapter needs its knobs in this sweep";
  std::size_t runs = 0;
  for (const auto& [chapter, commands] : sweep().commands) runs += commands.size();
  EXPECT_GE(runs, 300u);
}

// One test per chapter, so that ctest runs the chapters side by side.
class KnobSweepOf : public testing::TestWithParam<const char*> {};

TEST_P(KnobSweepOf, RunsCleanlyOnEveryAcceptedCombination) {
  const std::string chapter = GetParam();
  ASSERT_TRUE(sweep().commands.contains(chapter))
      << chapter << ": a new chapter needs its knobs in this sweep";
  const std::vector<std::string>& commands = sweep().commands.at(chapter);
  const std::size_t edges = kEdges.at(chapter).size();
  const fs::path dir = attn_test::scratch(chapter, "knob_sweep");
  std::size_t runs = 0;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    // Under the sanitizers (the sanitize preset), the edges only: each run costs three to ten
    // times as much there (chapter 09's ~11 s), the edges are where memory errors hide, and the
    // test command must stay under 20 minutes on two cores. The release run takes every edge
    // and every random draw.
    if (kUnderSanitizers && i >= edges) continue;
    ++runs;
    std::string args = "--no-plots " + commands[i];
    const fs::path dump = dir / ("dump" + std::to_string(i));
    if (i % 4 == 1) args += " --dump '" + dump.string() + "'";  // a quarter of them dump
    const Output r = attn_test::run_chapter(chapter, args, dir);
    const std::string command = std::string(ATTN_BIN_DIR) + "/" + chapter + " " + args;
    EXPECT_EQ(r.code, 0) << command << "\n" << r.err;
    // Chapters 09 and 10 report speeds on stderr, where measured (so varying) numbers go;
    // nothing else may be there.
    EXPECT_EQ(attn_test::without_lines_starting(r.err, {"training: ", "measured: "}), "")
        << command;
    EXPECT_TRUE(attn_test::contains(r.out, "== What to notice")) << command;
    EXPECT_LE(widest_line(r.out), 100u) << command;
    // fmt prints a NaN as "nan"; the chapters write the word as "NaN" where they mean it.
    // (Chapter 12 prints text its model wrote, where "covenant" may well appear.)
    if (chapter != "12_language_model") {
      EXPECT_FALSE(attn_test::contains(r.out, "nan")) << command;
    }
    if (i % 4 == 1 && r.code == 0) {
      EXPECT_TRUE(fs::is_directory(dump) && !fs::is_empty(dump)) << command;
    }
    fs::remove_all(dump);
  }
  fs::remove_all(dir);
  std::printf("knob sweep: %zu runs of %s\n", runs, chapter.c_str());
}

// Test names "01_rnn" ... : the chapter's own name.
INSTANTIATE_TEST_SUITE_P(EveryChapter, KnobSweepOf, testing::ValuesIn(attn_test::kChapters),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace test_knob_sweep
