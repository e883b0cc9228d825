// Chapter 11 as a program: what it prints about decoding checked against arithmetic done here,
// never against its own output. Cached generation equals recomputation to the bit; the cache's
// rows and bytes are counted by hand; RoPE's scores sit on diagonals (and do not when the two
// layouts are mixed); the rolling cache's slots and the receptive field after L layers follow
// the window's rule; the published models' bytes per token are their configs' products;
// identical bytes on every run and with any thread count; the knobs' refusals.
#include "chapter_run.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace test_11_decoding {

namespace fs = std::filesystem;
using attn_test::contains;
using attn_test::Output;

const attn_test::ChapterRun chapter("11_decoding");

// The rest of the first line of `text` that contains `prefix`, after the prefix ("" and a
// failure when there is none).
std::string after(const std::string& text, const std::string& prefix) {
  const auto at = text.find(prefix);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no line with \"" << prefix << "\"";
    return "";
  }
  const auto from = at + prefix.size();
  return text.substr(from, text.find('\n', from) - from);
}

// The ids printed after `label`, 20 a line, the lines after the first indented under it: one
// line of ids separated by spaces.
std::string ids_after(const std::string& text, const std::string& label) {
  std::string ids = after(text, label);
  const std::string indent = "\n" + std::string(2 + label.size(), ' ');
  for (auto at = text.find(label); at != std::string::npos;) {
    at = text.find('\n', at);
    if (at == std::string::npos || text.compare(at, indent.size(), indent) != 0) break;
    const auto from = at + indent.size();
    ids += " " + text.substr(from, text.find('\n', from) - from);
    at = from;
  }
  return ids;
}

// Every line of `text` that contains `piece`.
std::vector<std::string> lines_with(const std::string& text, const std::string& piece) {
  std::vector<std::string> found;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (contains(line, piece)) found.push_back(line);
  }
  return found;
}

// The numbers of a matrix the chapter shows under the line `title`: its `rows` lines after the
// column labels (if any), each "  <label> n n n ...", the label skipped.
std::vector<std::vector<double>> shown_matrix(const std::string& text, const std::string& title,
                                              int rows, bool labelled_rows) {
  std::vector<std::vector<double>> m;
  const auto at = text.find(title);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no matrix \"" << title << "\"";
    return m;
  }
  std::istringstream in(text.substr(text.find('\n', at) + 1));
  for (std::string line; static_cast<int>(m.size()) < rows && std::getline(in, line);) {
    std::istringstream words(line);
    std::string word;
    std::vector<double> row;
    if (labelled_rows) words >> word;                         // "m=0"
    if (labelled_rows && word.rfind("m=", 0) != 0) continue;  // the column labels' line
    while (words >> word) row.push_back(std::strtod(word.c_str(), nullptr));
    if (!row.empty()) m.push_back(row);
  }
  return m;
}

// The largest spread of any diagonal of `m` (entries (i, j) with one j - i): 0 for a Toeplitz
// matrix, as a score that depends on m - n alone gives.
double diagonal_spread(const std::vector<std::vector<double>>& m) {
  double spread = 0;
  const int n = static_cast<int>(m.size());
  for (int offset = -(n - 1); offset < n; ++offset) {
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; ++i) {
      const int j = i + offset;
      if (j < 0 || j >= n) continue;
      lo = std::min(lo, m[i][j]);
      hi = std::max(hi, m[i][j]);
    }
    spread = std::max(spread, hi - lo);
  }
  return spread;
}

// "1.2e-07" -> 1.2e-07; the first number in `s` after `prefix`.
double number_after(const std::string& s, const std::string& prefix) {
  return std::strtod(after(s, prefix).c_str(), nullptr);
}

struct Config {
  long E = 16, h = 4, g = 2, L = 2, W = 0, P = 5, fresh = 8;
  std::string args() const {
    return fmt::format("--d-model {} --heads {} --kv-heads {} --layers {} --window {} --prompt {} "
                       "--new {}",
                       E, h, g, L, W, P, fresh);
  }
};

// The default, and knobs that move each part: a window smaller than the prompt (the rolling
// cache wraps during prefill and decode), multi-query, longer generation, a width of 8 per head.
const Config kConfigs[] = {
    {},
    {.W = 4},
    {.g = 1, .W = 2, .P = 2, .fresh = 30},
    {.E = 32, .h = 4, .g = 4, .L = 3, .W = 7, .P = 1, .fresh = 3},
    {.E = 12, .h = 3, .g = 1, .L = 1, .W = 1},
};

// ---- Determinism ---------------------------------------------------------------------------

// The same bytes on every run with other knobs too (ctest's deterministic.11_decoding runs the
// defaults, with 1 and with 2 OpenMP threads).
TEST(Chapter11, TwoRunsPrintIdenticalBytes) {
  chapter.expect_two_identical_runs("--no-plots --window 4 --kv-heads 1 --layout halves", 4000u);
  chapter.expect_two_identical_runs("--no-plots --new 30 --prompt 2 --seed 9", 4000u);
}

// stdout does not depend on the thread count either: 1 thread against 3 with a window (the
// tiled path's query tiles are split among threads); without --measure nothing is on stderr.
TEST(Chapter11, ThreadsChangeNoByte) {
  const fs::path dir = chapter.scratch("threads");
  const std::string args = "--no-plots --window 5 --layers 3";
  const char* before = std::getenv("OMP_NUM_THREADS");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("OMP_NUM_THREADS", "1", 1);
  const Output one = chapter.run(args, dir);
  ::setenv("OMP_NUM_THREADS", "3", 1);
  const Output three = chapter.run(args, dir);
  if (before != nullptr) {
    ::setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  } else {
    ::unsetenv("OMP_NUM_THREADS");
  }
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(three.code, 0) << three.err;
  EXPECT_EQ(one.out, three.out);
  EXPECT_EQ(one.err, "");
  fs::remove_all(dir);
}

// A live measurement keeps stdout the same bytes on every run: its table goes to stderr, each
// line starting "measured: " (its progress "measuring: "), and stdout says so. --measure-n 128
// keeps each run to a fraction of a second.
TEST(Chapter11, MeasuredTimingsGoToStderr) {
  const fs::path dir = chapter.scratch("measure");
  const std::string args = "--no-plots --measure --measure-n 128";
  const Output a = chapter.run(args, dir), b = chapter.run(args, dir);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_TRUE(contains(attn_test::unwrapped(a.out), "the table is on stderr")) << a.out;
  EXPECT_FALSE(contains(a.out, "tokens/s"));
  EXPECT_TRUE(contains(a.err, "measured:      128 ")) << a.err;  // the one row: n = 128
  EXPECT_EQ(attn_test::without_lines_starting(a.err, {"measured: ", "measuring: "}), "") << a.err;
  fs::remove_all(dir);
}

// ---- 1. Generation -----------------------------------------------------------------------

// Cached and uncached generation print the same tokens and logits that differ by exactly 0,
// for every configuration. The cache's rows and bytes by hand: when token s (from 1) is
// chosen, the cache holds the prompt and the s - 1 tokens fed since, P + s - 1 rows per layer
// (the last W with a window), each row K and V of g heads of d_k = E / h floats in L layers.
TEST(Chapter11, CachedGenerationIsTheSameBitsAndTheCacheIsCountedByHand) {
  const fs::path dir = chapter.scratch("generation");
  for (const Config& c : kConfigs) {
    const Output r = chapter.run("--no-plots " + c.args(), dir);
    ASSERT_EQ(r.code, 0) << c.args() << "\n" << r.err;
    EXPECT_EQ(after(r.out, "logits, cached against uncached: max |diff| = "),
              "0.0e+00 (the same bits)")
        << c.args();
    const std::string with = ids_after(r.out, "generated with the cache:    ");
    EXPECT_EQ(with, ids_after(r.out, "generated without a cache:   ")) << c.args();
    std::istringstream words(with);
    std::vector<int> tokens;
    for (int t; words >> t;) tokens.push_back(t);
    ASSERT_EQ(std::ssize(tokens), c.P + c.fresh) << c.args() << ": " << with;
    for (const int t : tokens) EXPECT_TRUE(t >= 0 && t < 12) << t;  // a vocabulary of 12
    // The prompt the prose names is the start of what was generated.
    std::string prompt = after(attn_test::unwrapped(r.out), "The prompt: ");
    prompt = prompt.substr(0, prompt.find('.'));  // "5 6 7 7 11."
    EXPECT_EQ(std::ranges::count(prompt, ' ') + 1, c.P) << prompt;
    EXPECT_EQ(with.rfind(prompt + " ", 0), 0u) << prompt << " / " << with;

    const long d_k = c.E / c.h;
    const std::vector<std::string> steps = lines_with(r.out, " rows per layer, ");
    ASSERT_EQ(std::ssize(steps), c.fresh) << c.args();
    for (long s = 1; s <= c.fresh; ++s) {
      const long rows = c.W > 0 ? std::min(c.P + s - 1, c.W) : c.P + s - 1;
      const long bytes = rows * 2 * c.g * d_k * c.L * 4;
      std::string with_commas = std::to_string(bytes);  // 1,280: thousands separated
      for (int at = static_cast<int>(with_commas.size()) - 3; at > 0; at -= 3) {
        with_commas.insert(static_cast<std::size_t>(at), ",");
      }
      EXPECT_EQ(steps[static_cast<std::size_t>(s - 1)],
                fmt::format("  token {:>2} at position {:>2}: {:>2}   cache: {:>2} rows per layer, "
                            "{} bytes",
                            s, c.P + s - 1, tokens[static_cast<std::size_t>(c.P + s - 1)], rows,
                            with_commas))
          << c.args();
    }
    // Without a cache token s (from 0) ran all P + s tokens; with one the prompt ran once, then
    // one row for each token fed (every new token but the last).
    EXPECT_EQ(after(r.out, "rows computed per layer: "),
              fmt::format("{} without a cache, {} with one",
                          c.fresh * c.P + c.fresh * (c.fresh - 1) / 2, c.P + c.fresh - 1))
        << c.args();
    // The GEMM path sums in another order: within rounding of the logits. 1e-5 of their size
    // is ~100 float ulps, room for sums over E and d_ff in L layers; a wrong row is O(1).
    const std::string fast = after(r.out, "the fast path (GEMMs, tiled attention) against rows: "
                                          "max |diff| = ");
    const double diff = std::strtod(fast.c_str(), nullptr);
    const double logits = number_after(fast, " of logits up to ");
    EXPECT_GT(logits, 0.1) << fast;
    EXPECT_LE(diff, 1e-5 * logits) << c.args() << ": " << fast;
  }
  fs::remove_all(dir);
}

// ---- 2. RoPE -------------------------------------------------------------------------------

// theta_i = 10000^(-2i/8) for d = 8: 1, 0.1, 0.01, 0.001. S(m, n) is Toeplitz (one number per
// diagonal) in either layout, moving both positions by 40 changes it by rounding only, and the
// mixed layouts break the diagonals. The decay line against the mean of cos(m theta_i) computed
// here for d = 64.
TEST(Chapter11, RopeScoresDependOnTheDistanceAlone) {
  const fs::path dir = chapter.scratch("rope");
  for (const std::string layout : {"interleaved", "halves"}) {
    const Output r = chapter.run("--no-plots --layout " + layout, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto theta = shown_matrix(r.out, "theta [1 x 4]", 1, false);
    ASSERT_EQ(theta.size(), 1u);
    ASSERT_EQ(theta[0].size(), 4u);
    for (int i = 0; i < 4; ++i)
      EXPECT_DOUBLE_EQ(theta[0][static_cast<std::size_t>(i)], std::pow(10.0, -i));

    const auto S = shown_matrix(r.out, "S(m, n) = R(m)q . R(n)k", 6, true);
    ASSERT_EQ(S.size(), 6u);
    ASSERT_EQ(S[0].size(), 6u);
    // Printed to 4 decimals: two roundings of one value differ by at most 1e-4 (float's
    // rounding of the rotation, ~1e-6, is far below).
    EXPECT_LE(diagonal_spread(S), 1.0001e-4) << layout;
    // Not a constant matrix either: the scores change with the distance.
    EXPECT_GT(std::abs(S[0][0] - S[0][1]), 1e-3);
    // Angles m theta_i rounded at m + 40 instead of m: a few float ulps of scores near 1.
    EXPECT_LT(number_after(r.out, "moved by 40 positions (m + 40, n + 40): max |diff| = "), 1e-5);
    // In double, RoPE and q R(5) differ by double rounding; the layouts are one permutation.
    EXPECT_LT(number_after(r.out, "against chapter 07's q R(5), in double: max |diff| = "), 1e-12);
    EXPECT_EQ(after(r.out, "halves layout on permuted features against interleaved: max |diff| = "),
              "0.0e+00");

    const auto mixed = shown_matrix(r.out, "S with q interleaved, k halves", 6, true);
    ASSERT_EQ(mixed.size(), 6u);
    EXPECT_GT(diagonal_spread(mixed), 0.05) << "mixing the layouts must break the diagonals";
  }
  const Output r = chapter.run("--no-plots", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> means;
  for (const double m : {1.0, 16.0, 256.0, 4096.0}) {
    double sum = 0;
    for (int i = 0; i < 32; ++i) sum += std::cos(m * std::pow(10000.0, -2.0 * i / 64));
    means.push_back(fmt::format("{:.3f}", sum / 32));
  }
  EXPECT_EQ(
      after(r.out, "mean of cos(m theta_i), d = 64: "),
      fmt::format("m = 1: {}, 16: {}, 256: {}, 4096: {}", means[0], means[1], means[2], means[3]));
  fs::remove_all(dir);
}

// ---- 3. Grouped queries --------------------------------------------------------------------

// For g = h, the knob's g and 1: K and V are [6 x g d_k], the cache 2 g d_k numbers per token
// and layer, and the layer equals multi-head attention on repeated K/V weights to rounding
// (1e-5: a narrower product sums in another order, a few ulps of outputs of size ~1).
TEST(Chapter11, GroupedQueriesAreMultiHeadWithTiedHeads) {
  const fs::path dir = chapter.scratch("gqa");
  for (const Config& k :
       {Config{}, Config{.E = 32, .h = 8, .g = 4}, Config{.E = 12, .h = 3, .g = 1}}) {
    const Output r = chapter.run("--no-plots " + k.args(), dir);
    ASSERT_EQ(r.code, 0) << k.args() << "\n" << r.err;
    const long d_k = k.E / k.h;
    for (const long g : {k.h, k.g, 1L}) {
      const std::string head = fmt::format("g = {}: K and V [6 x {}], cache {:>2} numbers/token/"
                                           "layer; against MHA: max |diff| ",
                                           g, g * d_k, 2 * g * d_k);
      EXPECT_LT(number_after(r.out, head), 1e-5) << k.args();
    }
  }
  fs::remove_all(dir);
}

// ---- 4. Sliding windows ---------------------------------------------------------------------

// The mask shown: query i reads keys j with i - W < j <= i. The ring's slots after position t:
// slot s holds the position p in (t - W, t] with p mod W = s, -1 before it is filled. The
// rolling cache gives the uncached forward's logits to the bit. The receptive field: changing
// input p moves the last output exactly for p within L (W - 1) of it, so
// min(L (W - 1) + 1, n) inputs, n = max(16, 3 (W - 1) + 2).
TEST(Chapter11, WindowsFollowTheirRule) {
  const fs::path dir = chapter.scratch("windows");
  for (const long window : {0L, 1L, 2L, 4L, 7L, 16L}) {
    for (const long layers : {1L, 3L}) {
      const long W = window > 0 ? window : 3;  // the chapter shows W = 3 without a window
      const Output r = chapter.run(
          fmt::format("--no-plots --window {} --layers {} --new 3", window, layers), dir);
      ASSERT_EQ(r.code, 0) << window << "\n" << r.err;
      const auto mask = shown_matrix(r.out, fmt::format("sliding_window_mask(8, {})", W), 8, false);
      ASSERT_EQ(mask.size(), 8u) << W;
      for (long i = 0; i < 8; ++i) {
        ASSERT_EQ(mask[static_cast<std::size_t>(i)].size(), 8u);
        for (long j = 0; j < 8; ++j) {
          EXPECT_EQ(mask[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)],
                    (j <= i && j > i - W) ? 1.0 : 0.0)
              << "W " << W << " (" << i << ", " << j << ")";
        }
      }
      const long n_text = 3 * W + 2;
      for (long t = 1; t < n_text; ++t) {
        if (!(t + 1 == n_text || t < W + 2)) continue;
        std::vector<long> slots(static_cast<std::size_t>(W), -1);
        for (long p = std::max(0L, t - W + 1); p <= t; ++p)
          slots[static_cast<std::size_t>(p % W)] = p;
        EXPECT_TRUE(contains(r.out, fmt::format("after position {:>2}: slots hold [{}]\n", t,
                                                fmt::join(slots, ", "))))
            << "W " << W << " t " << t;
      }
      EXPECT_EQ(
          after(r.out, fmt::format("{} tokens through a rolling cache of {} rows: ", n_text, W)),
          "max |diff| against the uncached forward = 0.0e+00")
          << W;

      const long n = std::max(16L, 3 * (W - 1) + 2), last = n - 1;
      for (long L = 1; L <= 3; ++L) {
        const long reach = std::min(L * (W - 1) + 1, n);
        EXPECT_TRUE(contains(
            r.out,
            fmt::format("{} layer{}: output {} is moved by inputs {}..{} ({} of them; "
                        "L (W - 1) + 1 = {})\n",
                        L, L > 1 ? "s" : "", last, last - reach + 1, last, reach, L * (W - 1) + 1)))
            << "W " << W << " L " << L;
      }
    }
  }
  fs::remove_all(dir);
}

// ---- 5. Latent attention --------------------------------------------------------------------

// The chapter's layer: d_model 16, 2 heads, d_nope 4, d_rope 4, d_v 4, d_c 6. Its cache keeps
// d_c + d_rope = 10 numbers per token; the naive form's K keeps h (d_nope + d_rope) = 16 and V
// h d_v = 8. Absorbed and naive agree to rounding (1e-5: another order of sums over d_c and
// d_k, outputs of size ~1); token-by-token decoding is the absorbed form's arithmetic.
TEST(Chapter11, LatentAttentionCachesTheLatent) {
  const fs::path dir = chapter.scratch("latent");
  const Output r = chapter.run("--no-plots", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(after(r.out, "cache per token and layer: "),
            "MLA 10 numbers (d_c + d_rope), naive K and V 24 (h d_qk + h d_v)");
  EXPECT_LT(number_after(r.out, "absorbed (scores against c) against naive (K and V formed): "
                                "max |diff| = "),
            1e-5);
  EXPECT_LT(number_after(r.out, "decoded token by token against the absorbed forward: max |diff| "
                                "= "),
            1e-5);
  // DeepSeek-V2's numbers in the notice: d_c + d_R = 512 + 64, and 2 n_h d_h = 2 * 128 * 128.
  const std::string flat = attn_test::unwrapped(r.out);
  EXPECT_TRUE(contains(flat, fmt::format("caches 512 + 64 = {} numbers", 512 + 64)));
  EXPECT_TRUE(contains(
      flat, fmt::format("would cache {},{:03}", 2 * 128 * 128 / 1000, 2 * 128 * 128 % 1000)));
  fs::remove_all(dir);
}

// ---- 6. Real sizes -------------------------------------------------------------------------

// Bytes per token at 2 bytes a number, from the configs (/work/briefs/facts.md's sources: the
// papers and the released config.json files):
//   GPT-2 small   2 (K, V) * 12 layers * 768 (12 heads * 64) * 2 B   =  36,864 B =  36.0 KiB
//   Llama 2 7B    2 * 32 layers * 4096 (32 heads * 128) * 2 B         = 524,288 B = 512.0 KiB
//   Llama 3 8B    2 * 32 layers * 8 kv heads * 128 * 2 B              = 131,072 B = 128.0 KiB
//   Mistral 7B    as Llama 3 8B, 128.0 KiB, the window caps it at 4096 tokens: 512.0 MiB
//   DeepSeek-V2   60 layers * (512 + 64) * 2 B                        =  69,120 B =  67.5 KiB
// and at 4096, 32768 and 131072 tokens, tokens * bytes per token (Mistral: min(tokens, 4096)).
TEST(Chapter11, PublishedCacheSizesAreTheirConfigsArithmetic) {
  const fs::path dir = chapter.scratch("sizes");
  const Output r = chapter.run("--no-plots", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto size = [](double bytes) {  // as attn::bytes_str: B, then 1 decimal of KiB, MiB, GiB
    const char* units[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    for (; u < 3 && bytes >= 1024; ++u) bytes /= 1024;
    return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
  };
  struct Row {
    const char* name;
    const char* attention;
    double per_token;
    double window;
    const char* context;  // the context each was released with (config.json)
    double context_tokens;
  };
  const Row rows[] = {
      {"GPT-2 small", "MHA 12/12", 2.0 * 12 * 768 * 2, 0, "1,024", 1024},
      {"Llama 2 7B", "MHA 32/32", 2.0 * 32 * 4096 * 2, 0, "4,096", 4096},
      {"Llama 3 8B", "GQA 32/8", 2.0 * 32 * 8 * 128 * 2, 0, "8,192", 8192},
      {"Mistral 7B", "GQA 32/8, W 4096", 2.0 * 32 * 8 * 128 * 2, 4096, "8,192", 8192},
      {"DeepSeek-V2", "MLA, 128 heads", 60.0 * (512 + 64) * 2, 0, "131,072", 131072},
  };
  EXPECT_EQ(size(rows[0].per_token), "36.0 KiB");
  EXPECT_EQ(size(rows[1].per_token), "512.0 KiB");
  EXPECT_EQ(size(rows[2].per_token), "128.0 KiB");
  EXPECT_EQ(size(rows[3].per_token * 4096), "512.0 MiB");
  EXPECT_EQ(size(rows[4].per_token), "67.5 KiB");
  for (const Row& m : rows) {
    // Each size starred past the model's context, a blank otherwise; the line ends at its text.
    const auto at = [&](double tokens) {
      return size(m.per_token * (m.window > 0 ? std::min(tokens, m.window) : tokens)) +
             (tokens > m.context_tokens ? "*" : " ");
    };
    std::string line =
        fmt::format("{:<13} {:<17} {:>8} {:>10} {:>10} {:>10} {:>10}", m.name, m.attention,
                    m.context, size(m.per_token) + " ", at(4096), at(32768), at(131072));
    line.erase(line.find_last_not_of(' ') + 1);
    line += "\n";
    EXPECT_TRUE(contains(r.out, line)) << line;
  }
  // The notice's ratios: Llama 2's 2 * 32 * 4096 numbers against Llama 3's 2 * 32 * 8 * 128
  // (4 times) and DeepSeek-V2's 60 * 576 (262144 / 34560 = 7.585...).
  const std::string flat = attn_test::unwrapped(r.out);
  EXPECT_TRUE(contains(flat, fmt::format("hold {:.0f} times fewer", 262144.0 / 65536.0))) << flat;
  EXPECT_TRUE(contains(flat, fmt::format("holds {:.1f} times fewer", 262144.0 / 34560.0)));
  fs::remove_all(dir);
}

// ---- Knobs ---------------------------------------------------------------------------------

// Heads that do not divide d_model, an odd d_k, kv heads that do not divide the heads, and
// values out of range: exit 2, the problem and the usage on stderr, nothing on stdout.
TEST(Chapter11, BadKnobsAreUsageErrors) {
  const fs::path dir = chapter.scratch("bad");
  const std::pair<const char*, const char*> cases[] = {
      {"--heads 3", "--heads 3 must divide --d-model 16 into an even d_k"},
      {"--heads 16", "--heads 16 must divide --d-model 16 into an even d_k"},   // d_k = 1
      {"--d-model 12", "--heads 4 must divide --d-model 12 into an even d_k"},  // d_k = 3
      {"--kv-heads 3", "--kv-heads 3 must divide --heads 4"},
      {"--heads 8 --kv-heads 3", "--kv-heads 3 must divide --heads 8"},
      {"--kv-heads 8", "--kv-heads 8 must divide --heads 4"},
      {"--d-model 3", "d-model"},
      {"--layers 0", "layers"},
      {"--layers 7", "layers"},
      {"--window -1", "window"},
      {"--window 17", "window"},
      {"--prompt 0", "prompt"},
      {"--new 33", "new"},
      {"--layout rotate_half", "layout"},
      {"--measure-n 256", "--measure-n needs --measure"},
      {"--measure --measure-n 127", "measure-n"},
      {"--measure --measure-n 4097", "measure-n"},
  };
  for (const auto& [args, message] : cases) {
    const Output r = chapter.run(std::string("--no-plots ") + args, dir);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(contains(r.err, message)) << args << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "Usage:")) << args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << args << ": nothing runs before the knobs are checked";
  }
  fs::remove_all(dir);
}

// Its three figures, drawn where --out says. The receptive field's heat maps cell by cell: in
// panel L - 1 (L layers), changing input p moves output i exactly when 0 <= i - p <= L (W - 1):
// causal, and W - 1 positions further back per layer. Checked for W = 4 (n = 16) and W = 7
// (n = 3 * 6 + 2 = 20, where 3 layers reach 19 of 20 inputs).
TEST(Chapter11, DrawsItsFiguresAndTheReceptiveFieldCellByCell) {
  const fs::path dir = chapter.scratch("figures");
  for (const long W : {4L, 7L}) {
    const fs::path plots = dir / ("plots" + std::to_string(W));
    const Output r = chapter.run(fmt::format("--window {} --out '{}'", W, plots.string()), dir);
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* figure : {"11_rope_decay", "11_receptive_field", "11_cache_sizes"}) {
      EXPECT_TRUE(fs::exists(plots / (std::string(figure) + ".dat"))) << figure;
    }
    const long n = std::max(16L, 3 * (W - 1) + 2);
    std::istringstream dat(attn_test::read_file(plots / "11_receptive_field.dat"));
    long panel = -1, cells = 0;
    for (std::string line; std::getline(dat, line);) {
      if (line.rfind("# panel ", 0) == 0) {
        ++panel;
        EXPECT_TRUE(
            contains(line, fmt::format("[{} x {}] {} layer{}: the last output, {} inputs", n, n,
                                       panel + 1, panel ? "s" : "", (panel + 1) * (W - 1) + 1)))
            << line;
        continue;
      }
      if (line.empty() || line[0] == '#') continue;
      long p = 0, i = 0;
      double moved = 0;
      ASSERT_EQ(std::sscanf(line.c_str(), "%ld %ld %lf", &p, &i, &moved), 3) << line;
      ASSERT_GE(panel, 0);
      const bool reaches = i - p >= 0 && i - p <= (panel + 1) * (W - 1);
      EXPECT_EQ(moved, reaches ? 1.0 : 0.0)
          << "W " << W << " L " << panel + 1 << ": input " << p << ", output " << i;
      ++cells;
    }
    EXPECT_EQ(panel, 2);
    EXPECT_EQ(cells, 3 * n * n);
  }
  fs::remove_all(dir);
}

}  // namespace test_11_decoding
