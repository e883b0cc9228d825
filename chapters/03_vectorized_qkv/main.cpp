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
//                     [--no-plots] [--dump DIR] [--step]
#include "attn/core/random.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/column_attention.hpp"
#include "attn/ops/softmax.hpp"
#include "course/chapter.hpp"

#include <array>
#include <cmath>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using attn::Index;
using attn::Matrix;
using attn::MatrixD;

struct Knobs {
  Index n = 4;          // words in note 001's example (steps 4 and 5)
  Index d_model = 512;  // features per word
  bool scale = false;   // divide the worked example's scores by sqrt(d_k)
};

// Bytes in binary units: "64 B", "2.44 MiB", "16.00 GiB".
std::string bytes_str(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  for (; b >= 1024.0 && u < 4; ++u) b /= 1024.0;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

// "Q 0.0e+00  A 0.0e+00  A' 0.0e+00  Y 2.4e-07": how far the products are from the loops.
std::string differences(const attn::ColumnAttention& loops, const Matrix& Q, const Matrix& A,
                        const Matrix& A_prime, const Matrix& Y) {
  return fmt::format("Q {:.1e}  A {:.1e}  A' {:.1e}  Y {:.1e}", attn::max_abs_diff(loops.Q, Q),
                     attn::max_abs_diff(loops.A, A), attn::max_abs_diff(loops.A_prime, A_prime),
                     attn::max_abs_diff(loops.Y, Y));
}

void lesson(course::Chapter& ch, const Knobs& k) {
  ch.intro("seed {}, n = {}, d_model = {}, {}", ch.seed(), k.n, k.d_model,
           k.scale ? "scores / sqrt(d_k)" : "unscaled as in the notes");

  ch.step("Stack the vectors: Q = W_q X, A = K^T Q, A' = softmax(A), Y = V A'");
  // Chapter 02's example: note 000's W_q and x^1..x^4, the course's W_k and W_v.
  const attn::ColumnExample ex = attn::worked_example();
  const Matrix &W_q = ex.W_q, &W_k = ex.W_k, &W_v = ex.W_v, &X = ex.X;
  const Index d_k = W_q.rows();
  const float factor = k.scale ? 1.0f / std::sqrt(static_cast<float>(d_k)) : 1.0f;
  // [matrix_form]
  const Matrix Q = W_q * X;                      // [d_k x n] = [2 x 3] [3 x 4] = [2 x 4]
  const Matrix K = W_k * X;                      // [d_k x n] = [2 x 4]
  const Matrix V = W_v * X;                      // [d_v x n] = [2 x 4]
  Matrix A = K.transpose() * Q;                  // [n x n] = [4 x 2] [2 x 4] = [4 x 4]
  A *= factor;                                   // 1, or 1/sqrt(d_k) with --scale
  const Matrix A_prime = attn::softmax_cols(A);  // [n x n], every column sums to 1
  const Matrix Y = V * A_prime;                  // [d_v x n] = [2 x 4] [4 x 4] = [2 x 4]
  // [matrix_form]
  const Index n = X.cols();
  const std::vector<std::string> x_i = course::labels("x^", n), q_i = course::labels("q^", n),
                                 k_j = course::labels("k^", n), v_j = course::labels("v^", n),
                                 y_i = course::labels("y^", n);
  ch.flow({{"X", X},
           {"Q = W_q X", Q},
           {"A = K^T Q", A},
           {"A' = softmax(A)", A_prime},
           {"Y = V A'", Y}});
  ch.say("with W_q {}, K^T {}, V {}", course::shape(W_q), course::shape(K.transpose()),
         course::shape(V));
  ch.show("X (column i = x^i)", X, {.precision = 0, .col_labels = x_i});
  ch.show("Q = W_q X", Q, {.col_labels = q_i});
  ch.show("K = W_k X", K, {.col_labels = k_j});
  ch.show("V = W_v X", V, {.col_labels = v_j});
  ch.notice("one product per matrix: column i of Q is q^i = W_q x^i, for all i at once.");
  ch.show(k.scale ? fmt::format("A = K^T Q / sqrt({})", d_k) : "A = K^T Q", A,
          {.row_labels = k_j, .col_labels = q_i});
  ch.show("A' = softmax of each column", A_prime, {.row_labels = k_j, .col_labels = q_i});
  ch.show("Y = V A'", Y, {.col_labels = y_i});
  ch.notice("A(j, i) = k^j . q^i: row j of K^T times column i of Q is chapter 02's alpha_{{i,j}}.");
  ch.notice("only W_q, W_k, W_v are learned; A, A', Y are computed from them and X.");
  ch.dump("W_q", W_q);
  ch.dump("W_k", W_k);
  ch.dump("W_v", W_v);
  ch.dump("X", X);
  ch.dump("Q", Q);
  ch.dump("K", K);
  ch.dump("V", V);
  ch.dump("A", A);
  ch.dump("A_prime", A_prime);
  ch.dump("Y", Y);

  ch.step("The same numbers as chapter 02's loops");
  const attn::ColumnAttention loops =
      attn::column_attention_loops(W_q, W_k, W_v, X, {.scale = k.scale});
  ch.say("{:<41}{}",
         "worked example, max |loops - products|:", differences(loops, Q, A, A_prime, Y));
  // The notice below says Q, A and A' agree exactly: a difference there is a bug, not rounding.
  if (attn::max_abs_diff(loops.Q, Q) != 0.0 || attn::max_abs_diff(loops.A, A) != 0.0 ||
      attn::max_abs_diff(loops.A_prime, A_prime) != 0.0) {
    throw std::runtime_error("chapter 02's loops and the matrix products disagree on the worked "
                             "example's Q, A or A', which are exact in float: " +
                             differences(loops, Q, A, A_prime, Y));
  }
  if (k.scale) {  // K^T Q is exact; the one multiplication by 1/sqrt(2) rounds alike in both
    ch.notice("Q, K, V, K^T Q hold integers and quarters, exact in float in any order, and both "
              "forms round K^T Q x 1/sqrt({}) once, the same way; A' is the same softmax of the "
              "same numbers. Y sums inexact weights, so its last bit may differ.",
              d_k);
  } else {
    ch.notice("Q, K, V, A hold integers and quarters, exact in float in any order; A' is the same "
              "softmax of the same numbers. Y sums inexact weights, so its last bit may differ.");
  }
  attn::Rng rng(ch.seed());
  const Matrix Wq_r = attn::random_normal(rng, 8, 16), Wk_r = attn::random_normal(rng, 8, 16);
  const Matrix Wv_r = attn::random_normal(rng, 8, 16), X_r = attn::random_normal(rng, 16, 32);
  const attn::ColumnAttention lr =
      attn::column_attention_loops(Wq_r, Wk_r, Wv_r, X_r, {.scale = true});
  const attn::ColumnAttention mr = attn::column_attention(Wq_r, Wk_r, Wv_r, X_r, {.scale = true});
  ch.say("{:<41}{}",
         fmt::format("random, d_in {}, d_k {}, n {}, scaled:", X_r.rows(), Wq_r.rows(), X_r.cols()),
         differences(lr, mr.Q, mr.A, mr.A_prime, mr.Y));
  ch.notice("random floats (|A| up to {:.0f}): the loops add left to right, Eigen's GEMM in blocks "
            "with fused multiply-adds. The same sums, rounded differently: a few units in the "
            "last place of each entry (float's epsilon is 1.2e-7).",
            mr.A.cwiseAbs().maxCoeff());

  ch.step("Tokens as rows: softmax(Q K^T / sqrt(d_k)) V is the transpose");
  const Matrix X_rows = X.transpose();  // [n x d_in] = [4 x 3], row i is x^i
  // [row_form]
  const Matrix Q_rows = X_rows * W_q.transpose();     // [n x d_k] = [4 x 3] [3 x 2] = Q^T
  const Matrix K_rows = X_rows * W_k.transpose();     // [n x d_k] = K^T
  const Matrix V_rows = X_rows * W_v.transpose();     // [n x d_v] = V^T
  const attn::AttentionResult row = attn::attention(  // out [n x d_v], weights [n x n]
      Q_rows, K_rows, V_rows, {.scale = k.scale ? std::nullopt : std::optional<float>(1.0f)});
  // [row_form]
  ch.flow({{"X", X_rows},
           {"Q = X W_q^T", Q_rows},
           {"weights", row.weights},
           {"out = weights V", row.out}});
  ch.say("with K {}, V {}", course::shape(K_rows), course::shape(V_rows));
  ch.show("weights (row i = query i)", row.weights, {.row_labels = q_i, .col_labels = k_j});
  ch.show("out (row i = y^i)", row.out, {.row_labels = y_i});
  ch.say("max |weights - A'^T| = {:.1e}    max |out - Y^T| = {:.1e}",
         attn::max_abs_diff(row.weights, A_prime.transpose()),
         attn::max_abs_diff(row.out, Y.transpose()));
  ch.dump("row_weights", row.weights);
  ch.dump("row_out", row.out);
  ch.notice("(A B)^T = B^T A^T: transposing every step of the column form gives the row form.");
  if (attn::max_abs_diff(row.weights, A_prime.transpose()) != 0.0) {
    throw std::runtime_error(fmt::format(
        "the row form's weights differ from A'^T by {:.1e}: the worked example's scores are "
        "exact, so they must agree bit for bit",
        attn::max_abs_diff(row.weights, A_prime.transpose())));
  }
  ch.notice("scaled alike ({}), the weights agree bit for bit.",
            k.scale ? fmt::format("1/sqrt({}) in both", d_k) : "unscaled in both; try --scale");
  ch.notice("from chapter 04 on the library speaks rows, like the paper and PyTorch.");
  ch.plot().heatmap_grid("03_weights",
                         {{.values = A_prime,
                           .title = "column form: A' (a column per query)",
                           .xtics = q_i,
                           .ytics = k_j,
                           .scores = A},
                          {.values = row.weights,
                           .title = "row form: A'^T (a row per query)",
                           .xtics = k_j,
                           .ytics = q_i,
                           .scores = A.transpose()}},
                         {.title = "The same weights in both conventions",
                          .columns = 2,
                          .cmin = 0.0,
                          .cmax = 1.0,
                          .show_values = true,
                          .panel_px = 360,
                          .value_name = "weight"});

  ch.step("Note 001: X {}, X X^T measures how alike the words are",
          attn::shape_str(k.n, k.d_model));
  const Index d = k.d_model;
  const Matrix Xw = attn::random_normal(rng, k.n, d);  // [n x d_model], row = word
  const Matrix XXt = Xw * Xw.transpose();              // [n x n] of dot products
  Matrix cosines(k.n, k.n);                            // [n x n]
  for (Index i = 0; i < k.n; ++i) {
    for (Index j = 0; j < k.n; ++j) cosines(i, j) = XXt(i, j) / std::sqrt(XXt(i, i) * XXt(j, j));
  }
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d));
  const Matrix self_weights = attn::softmax_rows(XXt * inv_sqrt_d);  // [n x n]
  const std::vector<std::string> words = course::labels("word ", k.n);
  ch.say("Without projections (Q = K = V = X): Attention(X, X, X) = softmax(X X^T / sqrt(d)) X.\n"
         "Entries of X ~ N(0, 1), seeded.");
  ch.show("X X^T (entry i,j = word i . word j)", XXt,
          {.precision = 1, .row_labels = words, .col_labels = words});
  ch.show("cos(theta_ij)", cosines, {.precision = 3, .row_labels = words, .col_labels = words});
  ch.say("angles from the diagonal: word 1 vs 2 is {:.1f} deg, word 1 vs 3 is {:.1f} deg",
         std::acos(cosines(0, 1)) * 180.0 / std::numbers::pi,
         std::acos(cosines(0, 2)) * 180.0 / std::numbers::pi);
  ch.show("softmax(X X^T / sqrt(d)) (row i = word i's weights)", self_weights,
          {.row_labels = words, .col_labels = words});
  // The largest weight and |cos| between two different words: the diagonal set to 0 (every
  // weight and |cos| is >= 0) leaves the off-diagonal maxima.
  MatrixD others = self_weights.cast<double>(), abs_cos = cosines.cwiseAbs().cast<double>();
  others.diagonal().setZero();
  abs_cos.diagonal().setZero();
  const double off = others.maxCoeff(), max_cos = abs_cos.maxCoeff();
  // Whether every word still gives itself the largest weight of its row, and the least it gives.
  const double least_self = self_weights.diagonal().cast<double>().minCoeff();
  Index outweighed = 0;  // rows where another word gets more than the word itself
  for (Index i = 0; i < k.n; ++i) outweighed += others.row(i).maxCoeff() > self_weights(i, i);
  const bool self_attending = off < 0.01;  // no word gives another even 1% of its weight
  ch.say("largest weight a word gives another word: {:.1e}", off);
  if (self_attending) {
    ch.notice("random words are nearly orthogonal (|cos| <= {:.3f}); each one's dot with itself "
              "is ~{}, so after / sqrt({}) the diagonal leads by ~{:.0f}: each word attends "
              "almost only to itself.",
              max_cos, d, d, std::sqrt(d));
  } else if (outweighed == 0) {
    ch.notice("with {} features random words are not orthogonal enough (|cos| up to {:.2f}): each "
              "word still weighs itself most (at least {:.2f}), but others get up to {:.2f}.",
              d, max_cos, least_self, off);
  } else {
    ch.notice("with only {} features random words are far from orthogonal (|cos| up to {:.2f}): "
              "in {} of the {} rows another word outweighs the word itself, and the weights "
              "spread over several words.",
              d, max_cos, outweighed, k.n);
  }
  ch.dump("words_X", Xw);
  ch.dump("words_XXt", XXt);
  ch.dump("words_weights", self_weights);

  // The note's illustrative row: its numbers, applied to these words. (Our seeded row is
  // nearly one-hot, as explained above; the note's row shows the mixing better.)
  const std::array<float, 4> mix = {0.75f, 0.15f, 0.07f, 0.03f};
  std::vector<std::string> symbols;  // "0.75 x_{1,c}", ...
  for (Index w = 0; w < 4; ++w) symbols.push_back(fmt::format("{:.2f} x_{{{},c}}", mix[w], w + 1));
  ch.gap();
  ch.say("Note 001's illustrative row ({:.2f}) applied to words 1-4;\n"
         "for every feature c: out_{{1,c}} = {}",
         fmt::join(mix, ", "), fmt::join(symbols, " + "));
  for (const Index c : {Index{0}, Index{1}, d - 1}) {
    float out = 0.0f;
    std::vector<std::string> terms;  // "0.75*(-1.5081)", ...
    for (Index w = 0; w < 4; ++w) {
      out += mix[w] * Xw(w, c);
      terms.push_back(fmt::format("{:.2f}*({:.4f})", mix[w], Xw(w, c)));
    }
    ch.say("  out_{{1,{}}} = {} = {:.4f}", c + 1, fmt::join(terms, " + "), out);
  }
  ch.notice("one row of weights per word, shared by all {} features: words are mixed, features "
            "are not.",
            d);

  ch.step("With projections: Q = X W^Q, K = X W^K, V = X W^V, each W {}", attn::shape_str(d, d));
  // Random stand-ins for learned weights, N(0, 1/d_model): then Q, K, V entries are ~N(0, 1)
  // like X's, so the scores below are on the same scale as step 4's.
  const double w_std = 1.0 / std::sqrt(d);
  const Matrix W_Q = attn::random_normal(rng, d, d, 0.0, w_std);  // [d x d]
  const Matrix W_K = attn::random_normal(rng, d, d, 0.0, w_std);  // [d x d]
  const Matrix W_V = attn::random_normal(rng, d, d, 0.0, w_std);  // [d x d]
  // [projected]
  const Matrix Qw = Xw * W_Q;                                      // [n x d] = [n x d] [d x d]
  const Matrix Kw = Xw * W_K;                                      // [n x d]
  const Matrix Vw = Xw * W_V;                                      // [n x d]
  const attn::AttentionResult proj = attn::attention(Qw, Kw, Vw);  // weights [n x n], out [n x d]
  // [projected]
  ch.flow({{"X", Xw}, {"Q = X W^Q", Qw}, {"weights", proj.weights}, {"out = weights V", proj.out}});
  ch.say("with W^Q {}, K {}, V {}", course::shape(W_Q), course::shape(Kw), course::shape(Vw));
  ch.show("softmax(Q K^T / sqrt(d)) (row i = word i's weights)", proj.weights,
          {.row_labels = words, .col_labels = words});
  ch.show("out = weights V", proj.out, {.max_cols = 6, .row_labels = words});
  ch.notice("W^Q != W^K, so q_i . k_i is no longer a squared length: the diagonal need not win.");
  ch.notice("the n x n weights are all the words talk through; out keeps X's shape {}.",
            course::shape(proj.out));
  ch.dump("W_Q", W_Q);
  ch.dump("W_K", W_K);
  ch.dump("W_V", W_V);
  ch.dump("words_Q", Qw);
  ch.dump("words_K", Kw);
  ch.dump("words_V", Vw);
  ch.dump("words_weights_projected", proj.weights);
  ch.dump("words_out", proj.out);

  ch.step("The cost: an n x n matrix of weights, per head and per layer");
  ch.say("{:>8}  {:>21}  {:>13}  {:>13}", "n", "n x n entries", "float32", "float16");
  for (const long long tokens : {4LL, 800LL, 8192LL, 65536LL}) {
    const long long entries = tokens * tokens;
    ch.say("{:>8}  {:>21}  {:>13}  {:>13}", course::with_commas(tokens),
           course::with_commas(entries), bytes_str(4.0 * entries), bytes_str(2.0 * entries));
  }
  ch.notice("800 tokens: 800 x 800 = 640,000 weights (note 000). Twice the tokens, 4x the memory.");
  ch.notice("65,536 tokens: 65536^2 x 4 B = 16 GiB, for one head of one layer. Later chapters "
            "compute attention without ever storing this matrix (online softmax, tiles).");
  // Memory in GiB (2^30 bytes), as the table prints it; the GPU's 80 GB are decimal bytes.
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  course::Series f32{.label = "float32 (4 bytes per weight)"};
  course::Series f16{.label = "float16 (2 bytes per weight)"};
  for (int p = 6; p <= 19; ++p) {  // n = 64 .. 524,288
    const double tokens = std::ldexp(1.0, p);
    f32.x.push_back(tokens);
    f32.y.push_back(4.0 * tokens * tokens / kGiB);
    f16.x.push_back(tokens);
    f16.y.push_back(2.0 * tokens * tokens / kGiB);
  }
  const double gpu_gib = 80e9 / kGiB, note_gib = 4.0 * 800.0 * 800.0 / kGiB;
  ch.plot().lines(
      "03_attention_memory",
      {f32,
       f16,
       {.label = fmt::format("80 GB = {:.1f} GiB, the memory of one large GPU", gpu_gib),
        .x = {64.0, 524288.0},
        .y = {gpu_gib, gpu_gib},
        .points = false,
        .dashed = true},
       // A dashed stalk from the bottom of the axis (1e-6 GiB) up to the point on
       // the float32 line, which a marker alone would hide in.
       {.label = "note 000: n = 800, 640,000 weights, 2.44 MiB = 0.0024 GiB",
        .x = {800.0, 800.0},
        .y = {1e-6, note_gib},
        .points = false,
        .dashed = true}},
      {.title = "Memory of one n x n attention matrix (one head, one layer)",
       .xlabel = "sequence length n (tokens)",
       .ylabel = "GiB (2^30 bytes)",
       .logx = true,
       .logy = true});

  ch.finish(
      {"Q = W_q X, A = K^T Q, A' = softmax(A), Y = V A': chapter 02's loops, as four products.",
       "Loops and products agree exactly on exact numbers, to a few ulps on random floats.",
       "Rows or columns is a choice: the row form is the column form transposed.",
       self_attending
           ? "Without projections a word mostly attends to itself; W^Q and W^K decide who matches "
             "whom."
           : fmt::format("Without projections, {} features left words far from orthogonal: others "
                         "got up to {:.2f}. W^Q and W^K decide who matches whom.",
                         d, off),
       "The weights are n x n: 640,000 at n = 800, 16 GiB of float32 at n = 65,536."},
      {{"--scale", "both forms scaled by 1/sqrt(2)"},
       {"--d-model 16", "short vectors: cos is no longer ~0"},
       {"--n 8 --d-model 4", "self-attention without projections"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("03_vectorized_qkv", "Vectorised Q, K, V", 2026);
  ch.cites("notes 000, 001 and 002");
  Knobs k;
  ch.option("--n", k.n, "words in note 001's example (steps 4 and 5)").range(4, 64);
  ch.option("--d-model", k.d_model, "features per word in note 001's example").range(4, 2048);
  ch.flag("--scale,!--no-scale", k.scale,
          "divide the worked example's scores by sqrt(d_k) (default: no, as the notes)");
  return ch.run(argc, argv, [&] { lesson(ch, k); });
}
