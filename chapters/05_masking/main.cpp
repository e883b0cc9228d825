// 05_masking: which keys a query may see. Padding, causal and window masks, -inf versus -1e9,
// and the masked_fill that did nothing.
//
//   scores  = Q K^T / sqrt(d_k)                              [n_q x n_k]
//   scores' = scores where allowed, -inf where blocked       (the mask)
//   weights = softmax(scores') per row, out = weights V       blocked weights are exactly 0
//
// Convention (masks.hpp): allowed(i, j) == true means query i MAY attend to key j. PyTorch's
// scaled_dot_product_attention means the same; nn.MultiheadAttention's masks mean the opposite.
//
//   05_masking [--mask none|pad|causal|window] [--window W] [--fill neg-inf|-1e9]
//              [--ids 5,2,1,0,0/1,3,1,4,0] [--vocab V] [--d-model D] [--d-k K]
//              [--seed N] [--out DIR] [--no-plots] [--dump DIR]
#include "attn/attention.hpp"
#include "course/cli.hpp"
#include "attn/embedding.hpp"
#include "attn/masks.hpp"
#include "attn/positional_encoding.hpp"
#include "course/print.hpp"
#include "attn/random.hpp"
#include "attn/softmax.hpp"

#include <cmath>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

using attn::AllowedBatch;
using attn::AllowedMask;
using attn::Batch;
using course::fmt;
using attn::Index;
using attn::Matrix;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// "5,2,1,0,0/1,3,1,4,0" -> [[5,2,1,0,0],[1,3,1,4,0]]: sentences separated by '/', ids by ','.
// Returns an error message, or "" and fills `ids`.
std::string parse_ids(const std::string& text, attn::TokenIds* ids) {
  std::vector<std::vector<int>> rows;
  std::stringstream sentences(text);
  std::string sentence;
  while (std::getline(sentences, sentence, '/')) {
    std::vector<int>& row = rows.emplace_back();
    std::stringstream tokens(sentence);
    std::string token;
    while (std::getline(tokens, token, ',')) {
      std::size_t used = 0;
      int id = -1;
      try {
        id = std::stoi(token, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != token.size() || id < 0) {
        return "'" + token + "' is not a token id (a whole number >= 0)";
      }
      row.push_back(id);
    }
    if (row.empty()) return "an empty sentence in '" + text + "'";
  }
  if (rows.empty()) return "no sentences in '" + text + "'";
  if (rows.size() > 16) return "at most 16 sentences";
  for (const auto& row : rows) {
    if (row.size() != rows[0].size()) {
      return "every sentence must be padded to the same length (" +
             std::to_string(rows[0].size()) + " and " + std::to_string(row.size()) + ")";
    }
  }
  if (rows[0].size() > 64) return "at most 64 tokens per sentence";
  if (ids) {
    ids->resize(static_cast<Index>(rows.size()), static_cast<Index>(rows[0].size()));
    for (Index b = 0; b < ids->rows(); ++b)
      for (Index i = 0; i < ids->cols(); ++i)
        (*ids)(b, i) = rows[static_cast<std::size_t>(b)][static_cast<std::size_t>(i)];
  }
  return "";
}

// A mask as the notes draw it: 1 = may attend, . = blocked.
void print_mask(const std::string& name, const AllowedMask& m) {
  std::cout << name << " " << attn::shape_str(m) << "   (1 = may attend, . = blocked)\n";
  for (Index i = 0; i < m.rows(); ++i) {
    std::cout << "   ";
    for (Index j = 0; j < m.cols(); ++j) std::cout << (m(i, j) ? " 1" : " .");
    std::cout << "\n";
  }
}

// "[5 2 1 <pad> <pad>]"
std::string sentence_str(const attn::TokenIds& ids, Index b, int pad_id) {
  std::string s = "[";
  for (Index i = 0; i < ids.cols(); ++i) {
    s += (i ? " " : "") + (ids(b, i) == pad_id ? std::string("<pad>") : std::to_string(ids(b, i)));
  }
  return s + "]";
}

// The largest weight that lands where the mask says it must not.
float largest_blocked_weight(const Matrix& weights, const AllowedMask& allowed) {
  float worst = 0.0f;
  for (Index i = 0; i < weights.rows(); ++i)
    for (Index j = 0; j < weights.cols(); ++j)
      if (!allowed(i, j)) worst = std::max(worst, weights(i, j));
  return worst;
}

// A row as "(0.1234, -1.0000)".
std::string row_str(const Matrix& row) {
  std::string s = "(";
  for (Index c = 0; c < row.cols(); ++c) {
    s += fmt("%s%.4f", c ? ", " : "", static_cast<double>(row(0, c)));
  }
  return s + ")";
}

double max_abs_diff(const Matrix& a, const Matrix& b) {
  return static_cast<double>((a - b).cwiseAbs().maxCoeff());
}

}  // namespace

int main(int argc, char** argv) {
  course::ChapterCli cli("05_masking", "Chapter 05: padding, causal and window masks", 2026);
  std::string mask_kind = "pad", fill_name = "neg-inf", ids_text = "5,2,1,0,0/1,3,1,4,0";
  Index window = 1, vocab = 10, d_model = 512, d_k = 64;
  cli.app().add_option("--mask", mask_kind,
                       "mask of the note-001 batch: none, pad, causal (pad + causal) or window "
                       "(pad + window)")
      ->capture_default_str()->check(CLI::IsMember({"none", "pad", "causal", "window"}));
  cli.app().add_option("--window", window, "W of the window mask: query i sees keys |i - j| <= W")
      ->capture_default_str()->check(CLI::Range(0, 64));
  cli.app().add_option("--fill", fill_name, "score given to a blocked key: neg-inf or -1e9")
      ->capture_default_str()->check(CLI::IsMember({"neg-inf", "-1e9"}));
  cli.app().add_option("--ids", ids_text,
                       "token ids of the batch, sentences separated by '/', padded with 0")
      ->capture_default_str()
      ->check(CLI::Validator([](const std::string& s) { return parse_ids(s, nullptr); }, "IDS"));
  cli.app().add_option("--vocab", vocab, "vocabulary size (ids must be below it)")
      ->capture_default_str()->check(CLI::Range(2, 100000));
  cli.app().add_option("--d-model", d_model, "features per token")
      ->capture_default_str()->check(CLI::Range(2, 2048));
  cli.app().add_option("--d-k", d_k, "the d_k in the scale 1/sqrt(d_k), as note 001 uses it")
      ->capture_default_str()->check(CLI::Range(1, 2048));
  if (auto code = cli.parse(argc, argv)) return *code;
  attn::TokenIds ids;  // [B x n]
  parse_ids(ids_text, &ids);
  if (ids.maxCoeff() >= vocab) {
    std::cerr << "05_masking: --ids: id " << ids.maxCoeff() << " is not below --vocab " << vocab
              << "\n\n" << cli.app().help();
    return 2;
  }
  const float fill = fill_name == "neg-inf" ? -kInf : -1e9f;
  const std::uint64_t seed = cli.options().seed;
  course::Dumper dump = cli.dumper();
  course::Plotter plot = cli.plotter();
  const int pad = 0;
  const Index B = ids.rows(), n = ids.cols();
  const std::string sB = std::to_string(B), sn = std::to_string(n), sd = std::to_string(d_model);

  std::cout << "05 . Masks (mask " << mask_kind << ", fill " << fill_name << ", seed " << seed
            << ", d_model " << d_model << ")\n";

  // ---- 1. A batch of sentences, padded to one length --------------------------------------------
  course::banner(std::cout, "1. A batch of sentences, padded to one length");
  std::cout << "  Sentences differ in length; a batch is one rectangular tensor, so short ones\n"
               "  are filled with the padding id 0. Vocabulary " << vocab << ", id 0 = <pad>.\n";
  course::print_matrix(std::cout, "ids", ids.cast<float>(), {.precision = 0});
  for (Index b = 0; b < B; ++b) {
    std::cout << "  sentence " << b + 1 << ": " << sentence_str(ids, b, pad) << "\n";
  }
  course::notice(std::cout, "the <pad> tokens are not words: nothing should attend to them.");

  // ---- 2. Embedding + position: X [B, n, d_model] -----------------------------------------------
  course::banner(std::cout, "2. Embedding + position: X = table[ids] + PE   [" + sB + ", " + sn +
                              ", " + sd + "]");
  attn::Rng rng(seed);
  const Matrix table = attn::embedding_init(rng, vocab, d_model);  // [vocab x d_model]
  const Matrix pe = attn::sinusoidal_encoding(n, d_model);          // [n x d_model]
  // [embed]
  Batch X = attn::embed(table, ids);                       // [B, n, d_model]
  for (Index b = 0; b < B; ++b) X[b] += pe;                // every sentence gets the same PE
  // [embed]
  std::cout << "  table " << attn::shape_str(table) << " ~ N(0, 1) like nn.Embedding,  PE "
            << attn::shape_str(pe) << " (chapter 07),  X " << X.shape_str() << "\n";
  course::print_matrix(std::cout, "X[0] (row i = token i of sentence 1)", X[0], {.max_cols = 6});
  course::notice(std::cout, "both <pad> rows of sentence 1 share one embedding; only PE tells them "
                          "apart.");

  // ---- 3. The mask, from the ids ----------------------------------------------------------------
  course::banner(std::cout, "3. The mask [" + sB + ", " + sn + ", " + sn + "], built from the ids");
  // [padding_mask]
  AllowedBatch allowed = attn::padding_masks(ids, pad);  // [B, n, n]: <pad> keys blocked
  // [padding_mask]
  if (mask_kind == "causal" || mask_kind == "window") {
    const AllowedMask extra = mask_kind == "causal" ? attn::causal_mask(n)
                                                    : attn::window_mask(n, window);  // [n x n]
    for (Index b = 0; b < B; ++b) allowed[b] = allowed[b].array() && extra.array();
  } else if (mask_kind == "none") {
    allowed.data().setConstant(true);
  }
  for (Index b = 0; b < B; ++b) print_mask("allowed[" + std::to_string(b) + "]", allowed[b]);
  if (mask_kind == "pad") {
    course::notice(std::cout, "columns are blocked, not rows: the padded *keys* are hidden; a "
                            "padded query still");
    std::cout << "     looks at the real words (its output is thrown away later, e.g. by the "
                 "loss).\n";
  } else if (mask_kind == "none") {
    course::notice(std::cout, "--mask none: every query sees every key, padding included.");
  } else {
    course::notice(std::cout, "padding AND " + mask_kind + ": a decoder combines both masks with "
                            "a logical and.");
  }
  dump("ids", Matrix(ids.cast<float>()));
  dump("embedding_table", table);
  dump("pe", pe);
  dump("X", X);
  dump("allowed", allowed);

  // ---- 4. Masked attention: Q = K = V = X -------------------------------------------------------
  course::banner(std::cout, "4. Masked attention, Q = K = V = X: softmax(mask(Q K^T / sqrt(d_k))) V");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_k));
  // [masked_attention]
  const attn::BatchAttentionResult r = attn::attention(  // out [B, n, d_model], weights [B, n, n]
      X, X, X, {.scale = scale, .allowed = allowed, .blocked_score = fill});
  // [masked_attention]
  std::cout << "  Note 001 scales by 1/sqrt(d_k) with d_k = " << d_k << " = d_model / 8 "
            << "(its heads' width, chapter 06).\n";
  Matrix scores0 = (X[0] * X[0].transpose()) * scale;  // [n x n], sentence 1, before the mask
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      if (!allowed[0](i, j)) scores0(i, j) = fill;
  course::print_matrix(std::cout, "scores[0] after the mask", scores0, {.precision = 1});
  for (Index b = 0; b < B; ++b) {
    course::print_matrix(std::cout, "weights[" + std::to_string(b) + "]", r.weights[b]);
  }
  std::cout << "  out " << r.out.shape_str() << "   (the same shape as X)\n";
  float leak = 0.0f;
  for (Index b = 0; b < B; ++b) {
    leak = std::max(leak, largest_blocked_weight(r.weights[b], allowed[b]));
  }
  std::cout << fmt("  largest weight on a blocked key: %g\n", static_cast<double>(leak));
  course::notice(std::cout, "blocked keys get weight exactly 0: exp(-inf) = 0, not a small "
                          "number.");
  {
    // Why the rows are nearly one-hot: |x_i|^2 (embedding ~ d_model, PE d_model / 2) against
    // dot products of unrelated vectors, ~sqrt(d_model) in size.
    const Index real = std::min<Index>(3, n);
    double diag = 0.0, off = 0.0;
    for (Index i = 0; i < real; ++i) {
      for (Index j = 0; j < real; ++j) {
        (i == j ? diag : off) += static_cast<double>(scores0(i, j));
      }
    }
    course::notice(std::cout, fmt("scores of sentence 1's words: %.0f on the diagonal, %.0f off it "
                                "(means): each word attends", diag / static_cast<double>(real),
                                real > 1 ? off / static_cast<double>(real * (real - 1)) : 0.0));
    std::cout << "     almost only to itself, as in chapter 03 (try --d-model 16 --d-k 16).\n";
  }
  dump("scale", Matrix(Matrix::Constant(1, 1, scale)));  // [1 x 1], for replaying the dump
  dump("weights", r.weights);
  dump("out", r.out);
  {
    std::vector<course::HeatmapPanel> panels;
    for (Index b = 0; b < B && b < 8; ++b) {
      panels.push_back({Matrix(r.weights[b]), "sentence " + std::to_string(b + 1) + ": " +
                                                  sentence_str(ids, b, pad)});
    }
    plot.heatmap_grid("05_batch_weights", panels,
                      {.title = "Note 001's batch: weights[b] with the " + mask_kind + " mask",
                       .xlabel = "key j (len_k)",
                       .ylabel = "query i (len_q)",
                       .columns = 2,
                       .cmin = 0.0,
                       .cmax = 1.0,
                       .show_values = n <= 8,
                       .panel_px = 340});
  }

  // ---- 5. Sidebar: the masked_fill that did nothing ---------------------------------------------
  course::banner(std::cout, "5. Sidebar: the masked_fill that did nothing");
  std::cout << "  Note 001's code says   scores.masked_fill(mask, -1e9)   and drops the result.\n"
               "  PyTorch's masked_fill returns a new tensor (masked_fill_ is the in-place one),\n"
               "  so the scores reach the softmax unmasked. Here is what that computes:\n";
  // [bug]
  const attn::BatchAttentionResult unmasked = attn::attention(X, X, X, {.scale = scale});
  // [bug]
  course::print_matrix(std::cout, "weights[0] with the mask dropped", unmasked.weights[0]);
  const AllowedBatch pads = attn::padding_masks(ids, pad);  // the padding alone, [B, n, n]
  float bug_leak = 0.0f;
  for (Index b = 0; b < B; ++b) {
    bug_leak = std::max(bug_leak, largest_blocked_weight(unmasked.weights[b], pads[b]));
  }
  std::cout << fmt("  largest weight on a <pad> key: %.4g   (with the mask: 0)\n",
                   static_cast<double>(bug_leak));
  course::notice(std::cout, "nothing crashes and every row still sums to 1: only a test that "
                          "checks blocked");
  std::cout << "     weights are exactly 0 catches it (tests/test_masked_attention.cpp, "
               "BlockedWeightsAreExactlyZero...).\n";

  // ---- 6. The causal mask, built the two ways the notes build it --------------------------------
  const Index nc = 5, dc = 4;  // a small example whose numbers fit on a line
  course::banner(std::cout, "6. The causal mask: token i sees tokens j <= i, built two ways");
  const Matrix Qc = attn::random_normal(rng, nc, dc);  // [5 x 4]
  const Matrix Kc = attn::random_normal(rng, nc, dc);  // [5 x 4]
  const Matrix Vc = attn::random_normal(rng, nc, dc);  // [5 x 4]
  const float sc = 1.0f / std::sqrt(static_cast<float>(dc));  // 0.5, exact
  const Matrix scores = (Qc * Kc.transpose()) * sc;           // [5 x 5]
  // [causal_two_ways]
  // Note 004: a lower-triangular 0/1 matrix; where it is 0, the score becomes -inf.
  const Matrix tril = Matrix::Ones(nc, nc).triangularView<Eigen::Lower>();  // [5 x 5] of 0/1
  Matrix by_tril = scores;                                                  // [5 x 5]
  for (Index i = 0; i < nc; ++i)
    for (Index j = 0; j < nc; ++j)
      if (tril(i, j) == 0.0f) by_tril(i, j) = -kInf;
  // Note 003: an additive mask, 0 on and below the diagonal and -inf above, added to the scores.
  const Matrix additive = attn::additive_mask(attn::causal_mask(nc));  // [5 x 5]
  const Matrix by_sum = scores + additive;                             // [5 x 5]
  // [causal_two_ways]
  course::print_matrix(std::cout, "tril (note 004: 1 = keep)", tril, {.precision = 0});
  course::print_matrix(std::cout, "additive mask (note 003: scores += mask)", additive,
                     {.precision = 0});
  const Matrix w_tril = attn::softmax_rows(by_tril), w_sum = attn::softmax_rows(by_sum);
  const AllowedMask causal_nc = attn::causal_mask(nc);  // [5 x 5]
  const attn::AttentionResult causal =
      attn::attention(Qc, Kc, Vc, {.allowed = causal_nc});  // weights [5 x 5]
  course::print_matrix(std::cout, "weights (causal)", causal.weights);
  std::cout << fmt("  max |tril way - additive way| = %g,  max |either - attn::attention| = %g\n",
                   max_abs_diff(w_tril, w_sum), max_abs_diff(w_tril, causal.weights));
  course::notice(std::cout, "the same -inf in the same places: bit-for-bit the same weights.");
  course::notice(std::cout, "row 1 can only see itself (weight 1); row 5 sees everything.");
  // What the mask promises: change the last token, and outputs 1..4 do not move by a single bit.
  Matrix Qc2 = Qc, Kc2 = Kc, Vc2 = Vc;
  Qc2.row(nc - 1).setConstant(7.0f);
  Kc2.row(nc - 1).setConstant(-3.0f);
  Vc2.row(nc - 1).setConstant(100.0f);
  const attn::AttentionResult changed = attn::attention(Qc2, Kc2, Vc2, {.allowed = causal_nc});
  std::cout << fmt("  change token 5 entirely: outputs 1-4 move by %g, output 5 by %.3g\n",
                   max_abs_diff(changed.out.topRows(nc - 1), causal.out.topRows(nc - 1)),
                   max_abs_diff(changed.out.bottomRows(1), causal.out.bottomRows(1)));
  course::notice(std::cout, "so all positions train in parallel without any of them seeing the "
                          "answer ahead of it.");
  dump("causal_Q", Qc);
  dump("causal_K", Kc);
  dump("causal_V", Vc);
  dump("causal_weights", causal.weights);
  dump("causal_out", causal.out);

  // ---- 7. A window: attend to neighbours only ---------------------------------------------------
  course::banner(std::cout, "7. A local window: token i sees |i - j| <= " + std::to_string(window) +
                              " (note 002's truncated attention)");
  const AllowedMask band = attn::window_mask(nc, window);  // [5 x 5]
  print_mask("window", band);
  const attn::AttentionResult local = attn::attention(Qc, Kc, Vc, {.allowed = band});
  course::print_matrix(std::cout, "weights (window)", local.weights);
  course::notice(std::cout, fmt("each row keeps at most %d keys: a kernel that skips blocked "
                              "entries does n(2W+1) work, not n^2.", static_cast<int>(2 * window + 1)));

  // ---- 8. -1e9 versus -inf, and a query with nothing to attend to -------------------------------
  course::banner(std::cout, "8. -1e9 versus -inf, and a query with nothing to attend to");
  AllowedMask holey = attn::causal_mask(nc);  // [5 x 5]
  holey.row(2).setConstant(false);            // query 3 may attend to nothing at all
  const attn::AttentionResult with_inf = attn::attention(Qc, Kc, Vc, {.allowed = holey});
  const attn::AttentionResult with_big =
      attn::attention(Qc, Kc, Vc, {.allowed = holey, .blocked_score = -1e9f});
  Matrix ordinary_inf = with_inf.weights, ordinary_big = with_big.weights;
  ordinary_inf.row(2).setZero();
  ordinary_big.row(2).setZero();
  std::cout << fmt("  ordinary rows: max |weights(-inf) - weights(-1e9)| = %g\n",
                   max_abs_diff(ordinary_inf, ordinary_big));
  course::notice(std::cout, "exp(-1e9 - max) underflows to exactly 0: the same weights, bit for "
                          "bit.");
  // Row 3, every score blocked. The textbook "stable" softmax without a guard: exp(s - max)
  // with s = max = -inf is exp(NaN).
  const float naive_weight = std::exp(-kInf - (-kInf)) / (5.0f * std::exp(-kInf - (-kInf)));
  const Matrix mean_v = Vc.colwise().mean();  // [1 x 4]
  std::cout << "  query 3 with every key blocked:\n"
            << fmt("    fill -1e9, softmax:                  weights all %.2f, out = mean of V = %s\n",
                   static_cast<double>(with_big.weights(2, 0)),
                   row_str(mean_v).c_str())
            << fmt("    fill -inf, softmax without a guard:  weights %s (exp(-inf - (-inf)) = "
                   "exp(NaN))\n",
                   std::isnan(naive_weight) ? "NaN" : "not NaN?")
            << fmt("    fill -inf, attn::attention:          weights all %g, out all %g\n",
                   static_cast<double>(with_inf.weights.row(2).maxCoeff()),
                   static_cast<double>(with_inf.out.row(2).cwiseAbs().maxCoeff()));
  course::notice(std::cout, "-1e9 silently averages values the query was told to ignore; NaN "
                          "poisons everything");
  std::cout << "     it touches. The library defines the empty row as zeros, as recent PyTorch "
               "does.\n";

  // ---- 9. Four masks on the same scores ---------------------------------------------------------
  course::banner(std::cout, "9. Four masks on the same scores (figure)");
  const Index nf = 8;
  const Matrix Qf = attn::random_normal(rng, nf, 16), Kf = attn::random_normal(rng, nf, 16);
  const Matrix Vf = attn::random_normal(rng, nf, 16);  // Q, K, V [8 x 16]
  std::vector<int> last_two_padded(nf, 1);
  last_two_padded[nf - 1] = last_two_padded[nf - 2] = pad;
  const std::vector<std::pair<std::string, AllowedMask>> four = {
      {"no mask", attn::full_mask(nf, nf)},
      {"padding (last 2 keys)", attn::padding_mask(last_two_padded, nf, pad)},
      {"causal", attn::causal_mask(nf)},
      {"window, W = " + std::to_string(window), attn::window_mask(nf, window)}};
  std::vector<course::HeatmapPanel> panels;
  for (const auto& [title, mask] : four) {
    const attn::AttentionResult a = attn::attention(Qf, Kf, Vf, {.allowed = mask});
    std::cout << fmt("  %-22s largest weight %.3f, weights exactly 0: %2d of %d\n", title.c_str(),
                     static_cast<double>(a.weights.maxCoeff()),
                     static_cast<int>((a.weights.array() == 0.0f).count()),
                     static_cast<int>(nf * nf));
    panels.push_back({a.weights, title});
  }
  plot.heatmap_grid("05_masks", panels,
                    {.title = "The same scores under four masks (weights, blocked = 0)",
                     .xlabel = "key j",
                     .ylabel = "query i",
                     .columns = 4,
                     .cmin = 0.0,
                     .cmax = 1.0,
                     .panel_px = 260});
  course::notice(std::cout, "a mask only removes keys; the softmax hands their share to the keys "
                          "left.");

  // ---- What to notice ---------------------------------------------------------------------------
  course::banner(std::cout, "What to notice");
  course::notice(std::cout, "A mask is data, not code: true = may attend, applied as -inf before "
                          "the softmax.");
  course::notice(std::cout, "Padding masks keys (columns); causal and window masks are shapes "
                          "in the n x n grid.");
  course::notice(std::cout, "Blocked weights are exactly 0, so blocked tokens cannot change an "
                          "output by one bit.");
  course::notice(std::cout, "-1e9 and -inf agree until a row has nothing left; then -1e9 "
                          "averages and -inf needs a rule.");
  course::notice(std::cout, "A dropped masked_fill result passes every shape check: test the "
                          "zeros.");
  course::try_this(std::cout, "05_masking",
                 {{"--mask causal", "padding and causal together, as a decoder"},
                  {"--fill -1e9 --ids 0,0,0/1,2,3", "a sentence of padding only"},
                  {"--d-model 16 --d-k 16", "short vectors: the weights spread out"}});
  if (const std::string f = plot.summary(); !f.empty()) std::cout << "\n" << f;
  if (const std::string d = dump.summary(); !d.empty()) std::cout << "\n" << d << "\n";
  return 0;
}
