// 03_vectorized_qkv: chapter 02's loops as four matrix products, and the row form they become.
//
//   column form (notes 000, 002)        row form (note 001, the paper, PyTorch)
//   Q = W_q X     [d_k x n]             Q = X W^Q                [n x d_k]
//   K = W_k X     [d_k x n]             K = X W^K                [n x d_k]
//   V = W_v X     [d_v x n]             V = X W^V                [n x d_v]
//   A = K^T Q     [n x n]               scores = Q K^T / sqrt(d_k)  [n x n]
//   A' = softmax of every column        weights = softmax of every row
//   Y = V A'      [d_v x n]             out = weights V          [n x d_v]
//
// One is the transpose of the other. Then note 001's geometry of X X^T, with and without
// learned projections, and what the n x n matrix costs as n grows.
//
//   03_vectorized_qkv [--n N] [--d-model D] [--scale | --no-scale] [--seed N] [--out DIR]
//                     [--no-plots] [--dump DIR]
#include "attn/attention.hpp"
#include "course/cli.hpp"
#include "attn/column_attention.hpp"
#include "course/print.hpp"
#include "attn/random.hpp"
#include "attn/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

using course::fmt;
using attn::Index;
using attn::Matrix;

namespace {

// 640000 -> "640,000": the note writes the count this way.
std::string with_commas(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return out;
}

// Bytes in binary units: "64 B", "2.44 MiB", "16.00 GiB".
std::string bytes_str(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt("%.0f B", b) : fmt("%.2f %s", b, units[u]);
}

double max_abs_diff(const Matrix& a, const Matrix& b) {
  return static_cast<double>((a - b).cwiseAbs().maxCoeff());
}

void print_shapes(const char* what, const std::vector<std::pair<std::string, Matrix>>& ms) {
  std::cout << "  " << what;
  for (std::size_t k = 0; k < ms.size(); ++k) {
    std::cout << (k ? ", " : " ") << ms[k].first << " " << attn::shape_str(ms[k].second);
  }
  std::cout << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  course::ChapterCli cli("03_vectorized_qkv",
                       "Chapter 03: Q, K, V as matrix products, and the row form", 2026);
  Index n_words = 4, d_model = 512;
  bool scale = false;
  cli.app().add_option("--n", n_words, "words in note 001's example (section 4-5)")
      ->capture_default_str()->check(CLI::Range(4, 64));
  cli.app().add_option("--d-model", d_model, "features per word in note 001's example")
      ->capture_default_str()->check(CLI::Range(4, 2048));
  cli.app().add_flag("--scale,!--no-scale", scale,
                     "divide the worked example's scores by sqrt(d_k) (default: no, as the notes)");
  if (auto code = cli.parse(argc, argv)) return *code;
  const std::uint64_t seed = cli.options().seed;
  course::Dumper dump = cli.dumper();
  course::Plotter plot = cli.plotter();

  std::cout << "03 . Vectorised Q, K, V (seed " << seed << ", n = " << n_words
            << ", d_model = " << d_model << ", "
            << (scale ? "scores / sqrt(d_k)" : "unscaled as in the notes") << ")\n";

  // ---- 1. Stack the vectors: the column form in four products -----------------------------------
  course::banner(std::cout, "1. Stack the vectors: Q = W_q X, A = K^T Q, A' = softmax(A), Y = V A'");
  // Chapter 02's example: note 000's W_q and x^1..x^4, the course's W_k and W_v.
  const attn::ColumnExample ex = attn::worked_example();
  const Matrix &W_q = ex.W_q, &W_k = ex.W_k, &W_v = ex.W_v, &X = ex.X;
  const float factor = scale ? 1.0f / std::sqrt(static_cast<float>(W_q.rows())) : 1.0f;
  // [matrix_form]
  const Matrix Q = W_q * X;                      // [d_k x n] = [2 x 3] [3 x 4] = [2 x 4]
  const Matrix K = W_k * X;                      // [d_k x n] = [2 x 4]
  const Matrix V = W_v * X;                      // [d_v x n] = [2 x 4]
  Matrix A = K.transpose() * Q;                  // [n x n] = [4 x 2] [2 x 4] = [4 x 4]
  A *= factor;                                   // 1, or 1/sqrt(d_k) with --scale
  const Matrix A_prime = attn::softmax_cols(A);  // [n x n], every column sums to 1
  const Matrix Y = V * A_prime;                  // [d_v x n] = [2 x 4] [4 x 4] = [2 x 4]
  // [matrix_form]
  print_shapes("shapes:", {{"W_q", W_q}, {"X", X}, {"Q", Q}, {"K^T", K.transpose()}});
  print_shapes("       ", {{"A", A}, {"A'", A_prime}, {"V", V}, {"Y", Y}});
  course::print_matrix(std::cout, "X (column i = x^i)", X, {.precision = 0});
  course::print_matrix(std::cout, "Q = W_q X", Q);
  course::print_matrix(std::cout, "K = W_k X", K);
  course::print_matrix(std::cout, "V = W_v X", V);
  course::notice(std::cout, "one product per matrix: column i of Q is q^i = W_q x^i, for all i "
                          "at once.");
  course::print_matrix(std::cout, scale ? "A = K^T Q / sqrt(2)" : "A = K^T Q", A);
  course::print_matrix(std::cout, "A' = softmax of each column", A_prime);
  course::print_matrix(std::cout, "Y = V A'", Y);
  course::notice(std::cout, "A(j, i) = k^j . q^i: row j of K^T times column i of Q is chapter "
                          "02's alpha_{i,j}.");
  course::notice(std::cout, "only W_q, W_k, W_v are learned; A, A', Y are computed from them "
                          "and X.");
  dump("W_q", W_q);
  dump("W_k", W_k);
  dump("W_v", W_v);
  dump("X", X);
  dump("Q", Q);
  dump("K", K);
  dump("V", V);
  dump("A", A);
  dump("A_prime", A_prime);
  dump("Y", Y);


  // ---- 2. The same numbers as chapter 02's loops ------------------------------------------------
  course::banner(std::cout, "2. The same numbers as chapter 02's loops");
  const attn::ColumnAttention loops =
      attn::column_attention_loops(W_q, W_k, W_v, X, {.scale = scale});
  std::cout << fmt("  worked example, max |loops - products|:  Q %.1e  A %.1e  A' %.1e  Y %.1e\n",
                   max_abs_diff(loops.Q, Q), max_abs_diff(loops.A, A),
                   max_abs_diff(loops.A_prime, A_prime), max_abs_diff(loops.Y, Y));
  course::notice(std::cout, "Q, K, V, A hold integers and quarters, exact in float in any order; "
                          "A' is the same");
  std::cout << "     softmax of the same numbers. Y sums inexact weights, so its last bit may "
               "differ.\n";
  attn::Rng rng(seed);
  const Matrix Wq_r = attn::random_normal(rng, 8, 16), Wk_r = attn::random_normal(rng, 8, 16);
  const Matrix Wv_r = attn::random_normal(rng, 8, 16), X_r = attn::random_normal(rng, 16, 32);
  const attn::ColumnAttention lr = attn::column_attention_loops(Wq_r, Wk_r, Wv_r, X_r, {.scale = true});
  const attn::ColumnAttention mr = attn::column_attention(Wq_r, Wk_r, Wv_r, X_r, {.scale = true});
  std::cout << fmt("  random, d_in 16, d_k 8, n 32, scaled:   Q %.1e  A %.1e  A' %.1e  Y %.1e\n",
                   max_abs_diff(lr.Q, mr.Q), max_abs_diff(lr.A, mr.A),
                   max_abs_diff(lr.A_prime, mr.A_prime), max_abs_diff(lr.Y, mr.Y));
  course::notice(std::cout, fmt("random floats (|A| up to %.0f): the loops add left to right, "
                              "Eigen's GEMM in blocks", max_abs_diff(mr.A, Matrix::Zero(32, 32))));
  std::cout << "     with fused multiply-adds. The same sums, rounded differently: a few units "
               "in the last\n     place of each entry (float's epsilon is 1.2e-7).\n";

  // ---- 3. Tokens as rows: softmax(Q K^T / sqrt(d_k)) V is the transpose -------------------------
  course::banner(std::cout, "3. Tokens as rows: softmax(Q K^T / sqrt(d_k)) V is the transpose");
  const Matrix X_rows = X.transpose();  // [n x d_in] = [4 x 3], row i is x^i
  // [row_form]
  const Matrix Q_rows = X_rows * W_q.transpose();  // [n x d_k] = [4 x 3] [3 x 2] = Q^T
  const Matrix K_rows = X_rows * W_k.transpose();  // [n x d_k] = K^T
  const Matrix V_rows = X_rows * W_v.transpose();  // [n x d_v] = V^T
  const attn::AttentionResult row = attn::attention(  // out [n x d_v], weights [n x n]
      Q_rows, K_rows, V_rows, {.scale = scale ? std::nullopt : std::optional<float>(1.0f)});
  // [row_form]
  print_shapes("shapes:", {{"X", X_rows}, {"Q", Q_rows}, {"K", K_rows}, {"V", V_rows},
                           {"weights", row.weights}, {"out", row.out}});
  course::print_matrix(std::cout, "weights (row i = query i)", row.weights);
  course::print_matrix(std::cout, "out (row i = y^i)", row.out);
  std::cout << fmt("  max |weights - A'^T| = %.1e    max |out - Y^T| = %.1e\n",
                   max_abs_diff(row.weights, A_prime.transpose()),
                   max_abs_diff(row.out, Y.transpose()));
  dump("row_weights", row.weights);
  dump("row_out", row.out);
  course::notice(std::cout, "(A B)^T = B^T A^T: transposing every step of the column form "
                          "gives the row form.");
  course::notice(std::cout, std::string("scaled alike (") +
                              (scale ? "1/sqrt(2) in both" : "unscaled in both; try --scale") +
                              "), the weights agree bit for bit.");
  course::notice(std::cout, "from chapter 04 on the library speaks rows, like the paper and "
                          "PyTorch.");
  plot.heatmap_grid("03_weights",
                    {{A_prime, "column form: A' (column i = query i)"},
                     {row.weights, "row form: weights = A'^T (row i = query i)"}},
                    {.title = "The same weights in both conventions",
                     .xlabel = "column (from 0)",
                     .ylabel = "row (from 0)",
                     .columns = 2,
                     .cmin = 0.0,
                     .cmax = 1.0,
                     .show_values = true,
                     .panel_px = 360});

  // ---- 4. Note 001: X X^T measures how alike the words are --------------------------------------
  const std::string sn = std::to_string(n_words), sd = std::to_string(d_model);
  course::banner(std::cout, "4. Note 001: X [" + sn + " x " + sd + "], X X^T measures how alike "
                          "the words are");
  const Matrix Xw = attn::random_normal(rng, n_words, d_model);  // [n x d_model], row = word
  const Matrix XXt = Xw * Xw.transpose();                         // [n x n] of dot products
  Matrix cosines(n_words, n_words);                               // [n x n]
  for (Index i = 0; i < n_words; ++i) {
    for (Index j = 0; j < n_words; ++j) {
      cosines(i, j) = XXt(i, j) / std::sqrt(XXt(i, i) * XXt(j, j));
    }
  }
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d_model));
  const Matrix self_weights = attn::softmax_rows(XXt * inv_sqrt_d);  // [n x n]
  std::cout << "  Without projections (Q = K = V = X): Attention(X, X, X) = softmax(X X^T / "
               "sqrt(d)) X.\n  Entries of X ~ N(0, 1), seeded.\n";
  course::print_matrix(std::cout, "X X^T (entry i,j = word i . word j)", XXt, {.precision = 1});
  course::print_matrix(std::cout, "cos(theta_ij)", cosines, {.precision = 3});
  std::cout << fmt("  angles from the diagonal: word 1 vs 2 is %.1f deg, word 1 vs 3 is %.1f deg\n",
                   std::acos(cosines(0, 1)) * 180.0 / std::numbers::pi,
                   std::acos(cosines(0, 2)) * 180.0 / std::numbers::pi);
  course::print_matrix(std::cout, "softmax(X X^T / sqrt(d)) (row i = word i's weights)",
                     self_weights);
  double off = 0.0, max_cos = 0.0;  // the largest weight / |cos| between two different words
  for (Index i = 0; i < n_words; ++i) {
    for (Index j = 0; j < n_words; ++j) {
      if (i == j) continue;
      off = std::max(off, static_cast<double>(self_weights(i, j)));
      max_cos = std::max(max_cos, std::abs(static_cast<double>(cosines(i, j))));
    }
  }
  std::cout << fmt("  largest weight a word gives another word: %.1e\n", off);
  if (off < 0.01) {
    course::notice(std::cout, fmt("random words are nearly orthogonal (|cos| <= %.3f); each one's "
                                "dot with itself is ~%s,", max_cos, sd.c_str()));
    std::cout << fmt("     so after / sqrt(%s) the diagonal leads by ~%.0f: each word attends "
                     "almost only to itself.\n", sd.c_str(), std::sqrt(static_cast<double>(d_model)));
  } else {
    course::notice(std::cout, fmt("with only %s features random words are far from orthogonal "
                                "(|cos| up to %.2f):", sd.c_str(), max_cos));
    std::cout << "     the diagonal no longer dominates and the weights spread over several "
                 "words.\n";
  }
  dump("words_X", Xw);
  dump("words_XXt", XXt);
  dump("words_weights", self_weights);

  // The note's illustrative row: its numbers, applied to these words. (Our seeded row is
  // nearly one-hot, as explained above; the note's row shows the mixing better.)
  const float mix[4] = {0.75f, 0.15f, 0.07f, 0.03f};
  std::cout << "\n  Note 001's illustrative row (0.75, 0.15, 0.07, 0.03) applied to words 1-4;\n"
               "  for every feature c: out_{1,c} = 0.75 x_{1,c} + 0.15 x_{2,c} + 0.07 x_{3,c} + "
               "0.03 x_{4,c}\n";
  for (Index c : {Index{0}, Index{1}, d_model - 1}) {
    float out = 0.0f;
    std::string line = fmt("    out_{1,%d} =", static_cast<int>(c + 1));
    for (Index w = 0; w < 4; ++w) {
      out += mix[w] * Xw(w, c);
      line += fmt("%s %.2f*(%.4f)", w ? " +" : "", mix[w], static_cast<double>(Xw(w, c)));
    }
    std::cout << line << fmt(" = %.4f\n", static_cast<double>(out));
  }
  course::notice(std::cout, "one row of weights per word, shared by all " + sd +
                              " features: words are mixed, features are not.");

  // ---- 5. With learned projections: Q = X W^Q, K = X W^K, V = X W^V -----------------------------
  course::banner(std::cout, "5. With projections: Q = X W^Q, K = X W^K, V = X W^V, each W [" + sd +
                              " x " + sd + "]");
  // Random stand-ins for learned weights, N(0, 1/d_model): then Q, K, V entries are ~N(0, 1)
  // like X's, so the scores below are on the same scale as section 4's.
  const double w_std = 1.0 / std::sqrt(static_cast<double>(d_model));
  const Matrix W_Q = attn::random_normal(rng, d_model, d_model, 0.0, w_std);  // [d x d]
  const Matrix W_K = attn::random_normal(rng, d_model, d_model, 0.0, w_std);  // [d x d]
  const Matrix W_V = attn::random_normal(rng, d_model, d_model, 0.0, w_std);  // [d x d]
  // [projected]
  const Matrix Qw = Xw * W_Q;  // [n x d] = [n x d] [d x d]
  const Matrix Kw = Xw * W_K;  // [n x d]
  const Matrix Vw = Xw * W_V;  // [n x d]
  const attn::AttentionResult proj = attn::attention(Qw, Kw, Vw);  // weights [n x n], out [n x d]
  // [projected]
  print_shapes("shapes:", {{"X", Xw}, {"W^Q", W_Q}, {"Q", Qw}, {"Q K^T", proj.weights},
                           {"out", proj.out}});
  course::print_matrix(std::cout, "softmax(Q K^T / sqrt(d)) (row i = word i's weights)",
                     proj.weights);
  course::print_matrix(std::cout, "out = weights V", proj.out, {.max_cols = 6});
  course::notice(std::cout, "W^Q != W^K, so q_i . k_i is no longer a squared length: the "
                          "diagonal need not win.");
  course::notice(std::cout, "the n x n weights are all the words talk through; out keeps X's "
                          "shape [" + sn + " x " + sd + "].");
  dump("W_Q", W_Q);
  dump("W_K", W_K);
  dump("W_V", W_V);
  dump("words_Q", Qw);
  dump("words_K", Kw);
  dump("words_V", Vw);
  dump("words_weights_projected", proj.weights);
  dump("words_out", proj.out);

  // ---- 6. The cost: an n x n matrix of weights --------------------------------------------------
  course::banner(std::cout, "6. The cost: an n x n matrix of weights, per head and per layer");
  std::cout << "         n          n x n entries        float32        float16\n";
  for (std::uint64_t n : {4ULL, 800ULL, 8192ULL, 65536ULL}) {
    const std::uint64_t entries = n * n;
    std::cout << fmt("  %8s  %21s  %13s  %13s\n", with_commas(n).c_str(),
                     with_commas(entries).c_str(),
                     bytes_str(4.0 * static_cast<double>(entries)).c_str(),
                     bytes_str(2.0 * static_cast<double>(entries)).c_str());
  }
  course::notice(std::cout, "800 tokens: 800 x 800 = 640,000 weights (note 000). Twice the "
                          "tokens, 4x the memory.");
  course::notice(std::cout, "65,536 tokens: 65536^2 x 4 B = 16 GiB, for one head of one "
                          "layer. Later chapters");
  std::cout << "     compute attention without ever storing this matrix (online softmax, "
               "tiles).\n";
  {
    course::Series f32, f16, gpu;
    f32.label = "float32 (4 bytes per weight)";
    f16.label = "float16 (2 bytes per weight)";
    gpu.label = "80 GB, the memory of one large GPU";
    gpu.points = false;
    gpu.dashed = true;
    for (int p = 6; p <= 19; ++p) {  // n = 64 .. 524,288
      const double n = std::ldexp(1.0, p), mib = n * n / (1024.0 * 1024.0);
      f32.x.push_back(n);
      f32.y.push_back(4.0 * mib);
      f16.x.push_back(n);
      f16.y.push_back(2.0 * mib);
    }
    gpu.x = {64.0, 524288.0};
    gpu.y = {80e9 / (1024.0 * 1024.0), 80e9 / (1024.0 * 1024.0)};
    course::Series note;  // note 000's example
    note.label = "note 000: n = 800, 640,000 weights, 2.44 MiB";
    note.x = {800.0};
    note.y = {4.0 * 800.0 * 800.0 / (1024.0 * 1024.0)};
    plot.lines("03_attention_memory", {f32, f16, gpu, note},
               {.title = "Memory of one n x n attention matrix (one head, one layer)",
                .xlabel = "sequence length n (tokens)",
                .ylabel = "MiB",
                .logx = true,
                .logy = true});
  }

  // ---- What to notice ---------------------------------------------------------------------------
  course::banner(std::cout, "What to notice");
  course::notice(std::cout, "Q = W_q X, A = K^T Q, A' = softmax(A), Y = V A': chapter 02's loops, "
                          "as four products.");
  course::notice(std::cout, "Loops and products agree exactly on exact numbers, to a few ulps on "
                          "random floats.");
  course::notice(std::cout, "Rows or columns is a choice: the row form is the column form "
                          "transposed.");
  course::notice(std::cout, "Without projections a word mostly attends to itself; W^Q and W^K "
                          "decide who matches whom.");
  course::notice(std::cout, "The weights are n x n: 640,000 at n = 800, 16 GiB of float32 at "
                          "n = 65,536.");
  course::try_this(std::cout, "03_vectorized_qkv",
                 {{"--scale", "both forms scaled by 1/sqrt(2)"},
                  {"--d-model 16", "short vectors: cos is no longer ~0"},
                  {"--n 8 --d-model 4", "self-attention without projections"}});
  if (const std::string f = plot.summary(); !f.empty()) std::cout << "\n" << f;
  if (const std::string d = dump.summary(); !d.empty()) std::cout << "\n" << d << "\n";
  return 0;
}
