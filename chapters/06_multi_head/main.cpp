// 06_multi_head: h heads, each attending in its own d_k = d_model / h columns, mixed by W_O,
// then Add & Norm. Note 001 sections 3.5-3.6, with the shape printed at every step.
//
//   Q = X W_Q^T + b_Q, K = X W_K^T + b_K, V = X W_V^T + b_V        [B, n, d_model]
//   head_h = softmax(mask(Q_h K_h^T / sqrt(d_k))) V_h               [B, n, d_k], h = 1..H
//   out    = Concat(head_1..head_H) W_O^T + b_O                     [B, n, d_model]
//   y      = LayerNorm(out + X)                                     [B, n, d_model]
//
//   06_multi_head [--heads H] [--d-model D] [--seq-len N] [--mask none|pad|causal]
//                 [--seed N] [--out DIR] [--no-plots] [--dump DIR]
#include "attn/attention.hpp"
#include "course/cli.hpp"
#include "attn/embedding.hpp"
#include "attn/layer_norm.hpp"
#include "attn/masks.hpp"
#include "attn/multi_head.hpp"
#include "attn/positional_encoding.hpp"
#include "course/print.hpp"
#include "attn/random.hpp"

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

using attn::AllowedBatch;
using attn::Batch;
using course::fmt;
using attn::Index;
using attn::Matrix;

namespace {

// Note 001's batch, [[5,2,1,0,0],[1,3,1,4,0]], stretched to length n: sentence 1 has n-2 real
// tokens and sentence 2 has n-1, taken in turn from the note's own words; 0 pads the rest.
attn::TokenIds note_ids(Index n) {
  const int words1[] = {5, 2, 1}, words2[] = {1, 3, 1, 4};
  attn::TokenIds ids = attn::TokenIds::Zero(2, n);  // [2 x n]
  for (Index i = 0; i + 2 < n; ++i) ids(0, i) = words1[i % 3];
  for (Index i = 0; i + 1 < n; ++i) ids(1, i) = words2[i % 4];
  return ids;
}

// 1050624 -> "1,050,624"
std::string with_commas(long long v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "[2, 8, 5, 64]"
std::string shape4(Index a, Index b, Index c, Index d) {
  return fmt("[%ld, %ld, %ld, %ld]", static_cast<long>(a), static_cast<long>(b),
             static_cast<long>(c), static_cast<long>(d));
}

}  // namespace

int main(int argc, char** argv) {
  course::ChapterCli cli("06_multi_head", "Chapter 06: multi-head attention and Add & Norm", 2026);
  Index H = 8, E = 512, n = 5;
  std::string mask_kind = "pad";
  cli.app().add_option("--heads", H, "number of heads H (must divide d_model)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cli.app().add_option("--d-model", E, "features per token d_model")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cli.app().add_option("--seq-len", n, "tokens per sentence (sentence 1 has n-2 real ones)")
      ->capture_default_str()->check(CLI::Range(3, 64));
  cli.app().add_option("--mask", mask_kind, "none, pad, or causal (padding and causal)")
      ->capture_default_str()->check(CLI::IsMember({"none", "pad", "causal"}));
  if (auto code = cli.parse(argc, argv)) return *code;
  if (E % H != 0) {
    std::cerr << "06_multi_head: --heads " << H << " does not divide --d-model " << E
              << ": each head needs d_k = d_model / heads columns\n\n" << cli.app().help();
    return 2;
  }
  const std::uint64_t seed = cli.options().seed;
  course::Dumper dump = cli.dumper();
  course::Plotter plot = cli.plotter();
  const Index d_k = E / H, B = 2, vocab = 10;
  const std::string sE = std::to_string(E), sH = std::to_string(H), sdk = std::to_string(d_k),
                    sn = std::to_string(n);

  std::cout << "06 . Multi-head attention (heads " << H << ", d_model " << E << ", d_k " << d_k
            << ", seq-len " << n << ", mask " << mask_kind << ", seed " << seed << ")\n";

  // ---- 1. The input: note 001's batch -----------------------------------------------------------
  course::banner(std::cout, "1. The input: note 001's batch, X = table[ids] + PE   [2, " + sn + ", " +
                              sE + "]");
  attn::Rng rng(seed);
  const attn::TokenIds ids = note_ids(n);                        // [B x n]
  const Matrix table = attn::embedding_init(rng, vocab, E);       // [vocab x E]
  Batch X = attn::embed(table, ids);                              // [B, n, E]
  const Matrix pe = attn::sinusoidal_encoding(n, E);              // [n x E]
  for (Index b = 0; b < B; ++b) X[b] += pe;
  course::print_matrix(std::cout, "ids", ids.cast<float>(), {.precision = 0});
  std::cout << "  X " << X.shape_str() << ": batch, position, feature (chapter 05 built it the "
               "same way)\n";

  // ---- 2. Three projections, every head at once -------------------------------------------------
  course::banner(std::cout, "2. Three projections, all " + sH + " heads at once: Q = X W_Q^T + b_Q");
  const attn::MultiHeadAttention mha = attn::multi_head_init(rng, E, H);  // W_* [E x E]
  std::cout << "  W_Q, W_K, W_V, W_O are each " << attn::shape_str(mha.q_proj.weight)
            << ", initialised as nn.MultiheadAttention does.\n"
            << "  Rows [" << d_k << "h, " << d_k << "(h+1)) of W_Q are head h's own "
            << attn::shape_str(d_k, E) << " projection: " << H << " of them stacked.\n";
  const attn::MultiHeadResult s1 = attn::multi_head_forward(mha, X[0], X[0], X[0]);  // sentence 1
  course::print_matrix(std::cout, "Q for sentence 1 (head h = columns " + sdk + "h.." + sdk +
                                    "h+" + std::to_string(d_k - 1) + ")",
                     s1.Q, {.max_cols = 6});
  // [head_view]
  const auto Q_h1 = s1.Q.middleCols(1 * d_k, d_k);  // head 1's queries [n x d_k]: a view, no copy
  // [head_view]
  std::cout << fmt("  head 1's Q_h is Q.middleCols(%ld, %ld): it starts %ld floats into Q's "
                   "buffer and steps %ld per row,\n",
                   static_cast<long>(d_k), static_cast<long>(d_k),
                   static_cast<long>(Q_h1.data() - s1.Q.data()), static_cast<long>(Q_h1.outerStride()))
            << "  the same memory PyTorch reshapes: [2, " << n << ", " << E << "] -> .view"
            << shape4(B, n, H, d_k) << " -> .transpose(1, 2) -> " << shape4(B, H, n, d_k) << "\n";
  course::notice(std::cout, "one [" + sE + " x " + sE + "] product makes every head's queries; "
                          "splitting them copies nothing.");

  // ---- 3. The mask, shared by every head --------------------------------------------------------
  course::banner(std::cout, "3. The mask [2, " + sn + ", " + sn + "], the same for every head: " +
                              shape4(B, H, n, n));
  AllowedBatch allowed = attn::padding_masks(ids);  // [B, n, n], true = may attend
  if (mask_kind == "causal") {
    for (Index b = 0; b < B; ++b) allowed[b] = allowed[b].array() && attn::causal_mask(n).array();
  } else if (mask_kind == "none") {
    allowed.data().setConstant(true);
  }
  course::print_matrix(std::cout, "allowed[0] (1 = may attend)", allowed[0].cast<float>(),
                     {.precision = 0});
  course::notice(std::cout, "PyTorch broadcasts [B, n, n] to [B, H, n, n]; the library hands "
                          "the same mask to each head.");

  // ---- 4. One attention per head ----------------------------------------------------------------
  course::banner(std::cout, "4. One attention per head: softmax(mask(Q_h K_h^T / sqrt(" + sdk +
                              "))) V_h");
  // [forward]
  attn::MultiHeadBatchOptions opts;  // --mask none: no mask at all
  if (mask_kind != "none") opts.allowed.emplace(allowed);
  const attn::MultiHeadBatchResult r =  // out [B, n, E], weights [B*H, n, n]
      attn::multi_head_forward(mha, X, X, X, opts);
  // [forward]
  for (Index h = 0; h < std::min<Index>(H, 2); ++h) {
    course::print_matrix(std::cout, "sentence 1, head " + std::to_string(h) + " weights",
                       r.head_weights(0, h));
  }
  {
    double spread = 0.0;  // how different the heads are: largest weight gap between two heads
    for (Index h = 1; h < H; ++h) {
      spread = std::max(spread, static_cast<double>((r.head_weights(0, h) - r.head_weights(0, 0))
                                                        .cwiseAbs().maxCoeff()));
    }
    std::cout << "  weights " << shape4(B, H, n, n)
              << fmt("; the largest gap between a head's weights and head 0's: %.3f\n", spread);
  }
  course::notice(std::cout, "each head scores every token against every token, from its own " +
                              sdk + " dimensions only.");
  if (mask_kind != "none") {
    course::notice(std::cout, "padded key columns are exactly 0 in every head.");
  }
  for (Index b = 0; b < B; ++b) {
    std::vector<course::HeatmapPanel> panels;
    for (Index h = 0; h < H && h < 16; ++h) {
      panels.push_back({Matrix(r.head_weights(b, h)), "head " + std::to_string(h)});
    }
    plot.heatmap_grid("06_heads_sentence" + std::to_string(b + 1), panels,
                      {.title = "Sentence " + std::to_string(b + 1) + ": each head's weights (" +
                                mask_kind + " mask, d_k = " + sdk + ")",
                       .xlabel = "key j",
                       .ylabel = "query i",
                       .columns = 4,
                       .cmin = 0.0,
                       .cmax = 1.0,
                       .show_values = n <= 6,
                       .panel_px = 220});
  }

  // ---- 5. Concatenate and mix: W_O --------------------------------------------------------------
  course::banner(std::cout, "5. Concatenate and mix: out = Concat(head_1..head_" + sH +
                              ") W_O^T + b_O");
  std::cout << "  each head's output [" << n << " x " << d_k << "] was written straight into its "
            << "columns of concat [" << n << " x " << E << "]\n"
            << "  (PyTorch: .transpose(1, 2).reshape(2, " << n << ", " << E << ")), then W_O mixes "
            << "the heads: out " << r.out.shape_str() << "\n";
  course::print_matrix(std::cout, "concat for sentence 1", s1.concat, {.max_cols = 6});
  course::print_matrix(std::cout, "out[0]", r.out[0], {.max_cols = 6});
  course::notice(std::cout, "before W_O, column c of concat holds one head's view; W_O lets "
                          "every output feature read all heads.");

  // ---- 6. Add & Norm ----------------------------------------------------------------------------
  course::banner(std::cout, "6. Add & Norm: y = LayerNorm(out + X)");
  const attn::LayerNorm norm = attn::layer_norm_init(E);  // gamma = 1, beta = 0, eps = 1e-5
  Batch y(B, n, E);                                        // [B, n, E]
  // [add_norm]
  for (Index b = 0; b < B; ++b) y[b] = attn::layer_norm_forward(norm, r.out[b] + X[b]);
  // [add_norm]
  std::cout << "  per token (sentence 1):   mean of out+X   std of out+X    mean of y   std of y\n";
  for (Index i = 0; i < n; ++i) {
    const auto stats = [](const auto& row) {
      const double m = row.template cast<double>().mean();
      const double v = (row.template cast<double>().array() - m).square().mean();
      return std::pair{m, std::sqrt(v)};
    };
    const Matrix sum = r.out[0].row(i) + X[0].row(i);
    const auto [m1, s1v] = stats(sum);
    const auto [m2, s2v] = stats(y[0].row(i));
    const double mean_y = std::abs(m2) < 5e-7 ? 0.0 : m2;  // print rounding noise as 0
    std::cout << fmt("    token %ld %26.4f %15.4f %12.6f %10.6f\n", static_cast<long>(i), m1, s1v,
                     mean_y, s2v);
  }
  course::notice(std::cout, "the residual keeps X's information; LayerNorm puts every token "
                          "back at mean 0, std 1.");
  course::notice(std::cout, "std is sqrt(var / (var + eps)), a hair under 1: eps = 1e-5 sits "
                          "inside the root (PyTorch's definition).");

  // ---- 7. Why more heads cost nothing -----------------------------------------------------------
  course::banner(std::cout, "7. Why more heads cost nothing: the same parameters and FLOPs");
  {
    // Eight separate [d_k x E] projections against the rows of the one [E x E] W_Q.
    double worst = 0.0;
    for (Index h = 0; h < H; ++h) {
      const attn::Linear small{mha.q_proj.weight.middleRows(h * d_k, d_k),  // W_Q^h [d_k x E]
                               mha.q_proj.bias.segment(h * d_k, d_k)};
      const Matrix Qh = attn::linear_forward(small, X[0]);  // [n x d_k]
      worst = std::max(worst, static_cast<double>((Qh - s1.Q.middleCols(h * d_k, d_k))
                                                      .cwiseAbs().maxCoeff()));
    }
    std::cout << fmt("  %ld separate W_i^Q [%ld x %ld] (the notes' layout) vs one W^Q [%ld x %ld]: "
                     "max difference %.1e\n",
                     static_cast<long>(H), static_cast<long>(E), static_cast<long>(d_k),
                     static_cast<long>(E), static_cast<long>(E), worst);
    // One head is chapter 05's attention with projections.
    attn::Rng rng1(seed + 1);
    const attn::MultiHeadAttention one = attn::multi_head_init(rng1, E, 1);
    const attn::MultiHeadResult a = attn::multi_head_forward(one, X[0], X[0], X[0]);
    const attn::AttentionResult b = attn::attention(a.Q, a.K, a.V);  // chapter 05, no mask
    std::cout << fmt("  H = 1 against attn::attention on the same projections: max difference "
                     "%g\n", static_cast<double>((a.concat - b.out).cwiseAbs().maxCoeff()));
  }
  std::cout << "\n      H   d_k    parameters   multiply-adds per sentence (n = " << n << ")\n"
               "                                projections   scores + weighted sums\n";
  for (Index h : {1, 2, 4, 8, 16, 32}) {
    if (E % h != 0) continue;
    attn::Rng r_h(seed);
    const long long params = attn::multi_head_init(r_h, E, h).parameter_count();
    const long long proj = 4LL * n * E * E;           // Q, K, V, W_O: n x E times E x E each
    const long long attn_mads = 2LL * h * n * n * (E / h);  // per head: n^2 d_k twice
    std::cout << fmt("  %5ld %5ld %13s %13s %13s%s\n", static_cast<long>(h),
                     static_cast<long>(E / h), with_commas(params).c_str(),
                     with_commas(proj).c_str(), with_commas(attn_mads).c_str(),
                     h == H ? "   <- this run" : "");
  }
  course::notice(std::cout, "H heads of width d_model/H cost what one head of width d_model "
                          "costs: 4 d^2 + 4 d parameters,");
  std::cout << "     4 n d^2 + 2 n^2 d multiply-adds. What changes is what they can express: "
               "H separate softmaxes.\n";

  // ---- dump: everything PyTorch needs to replay this run ----------------------------------------
  if (dump.enabled()) {
    dump("in_proj_weight", attn::in_proj_weight(mha));  // [3E x E], PyTorch's stacked layout
    dump("in_proj_bias", Matrix(attn::in_proj_bias(mha)));
    dump("out_proj_weight", mha.out_proj.weight);
    dump("out_proj_bias", Matrix(mha.out_proj.bias));
    dump("X", X);
    dump("allowed", allowed);
    dump("out", r.out);
    dump("weights_avg", r.average_weights());
    const std::vector<std::size_t> shape = {static_cast<std::size_t>(B), static_cast<std::size_t>(H),
                                            static_cast<std::size_t>(n), static_cast<std::size_t>(n)};
    dump("weights_heads", shape,
         {r.weights.data().data(), static_cast<std::size_t>(r.weights.data().size())});
    dump("ln_weight", Matrix(norm.gamma));
    dump("ln_bias", Matrix(norm.beta));
    dump("y", y);
  }

  // ---- What to notice ---------------------------------------------------------------------------
  course::banner(std::cout, "What to notice");
  course::notice(std::cout, "Heads are column blocks of one projection: [B, n, d_model] viewed as "
                          "[B, H, n, d_k], no copy.");
  course::notice(std::cout, "Every head sees every token, through its own d_k dimensions and its "
                          "own softmax.");
  course::notice(std::cout, "The mask is shared by all heads; padded keys are 0 in each.");
  course::notice(std::cout, "More heads, same cost: 4 d^2 + 4 d parameters, 4 n d^2 + 2 n^2 d "
                          "multiply-adds.");
  course::notice(std::cout, "Add & Norm keeps the input (residual) and re-centres every token "
                          "(LayerNorm).");
  course::try_this(std::cout, "06_multi_head",
                 {{"--heads 1", "one wide head: one softmax per query"},
                  {"--heads 64", "64 heads of 8 dimensions each"},
                  {"--mask causal --seq-len 8", "a decoder's self-attention"}});
  if (const std::string f = plot.summary(); !f.empty()) std::cout << "\n" << f;
  if (const std::string d = dump.summary(); !d.empty()) std::cout << "\n" << d << "\n";
  return 0;
}
