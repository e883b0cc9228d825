// 02_attention_by_hand: self-attention one vector at a time, in the notes' column convention.
//
//   q^i = W_q x^i,  k^i = W_k x^i,  v^i = W_v x^i          every token makes three vectors
//   alpha_{i,j}  = q^i . k^j                                how well key j matches query i
//   alpha'_{i,j} = exp(alpha_{i,j}) / sum_j exp(alpha_{i,j})  softmax over the keys j
//   y^i          = sum_j alpha'_{i,j} v^j                    a blend of the values
//
// Tokens are columns (x^i is column i of X), as in notes 000 and 002. No 1/sqrt(d_k) here,
// as in those notes; --scale adds it (chapter 04 explains why the paper does).
//
//   02_attention_by_hand [--scale] [--random-weights] [--seed N] [--out DIR] [--no-plots]
//                        [--dump DIR]
#include "course/cli.hpp"
#include "attn/column_attention.hpp"
#include "course/print.hpp"
#include "attn/random.hpp"
#include "attn/softmax.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <numbers>
#include <string>
#include <vector>

using course::fmt;
using attn::Index;
using attn::Matrix;
using attn::Vector;

namespace {

// Column i of M as "(2.0000, 6.0000)".
std::string vec(const Matrix& M, Index i, int precision = 4) {
  std::string s = "(";
  for (Index r = 0; r < M.rows(); ++r) {
    s += (r ? ", " : "") + fmt("%.*f", precision, static_cast<double>(M(r, i)));
  }
  return s + ")";
}

// A number inside a written-out sum: "3", "0.5", "(-1)".
std::string term(float v) {
  return v < 0 ? fmt("(%g)", static_cast<double>(v)) : fmt("%g", static_cast<double>(v));
}

// A dot product written out: "3*0 + 1*(-0.5)".
std::string written_dot(const Vector& a, const Vector& b) {
  std::string s;
  for (Index c = 0; c < a.size(); ++c) s += (c ? " + " : "") + term(a(c)) + "*" + term(b(c));
  return s;
}

// "x^1", "x^2", ...: the notes count tokens from 1.
std::string tok(const char* letter, Index i) { return letter + ("^" + std::to_string(i + 1)); }

}  // namespace

int main(int argc, char** argv) {
  course::ChapterCli cli("02_attention_by_hand",
                       "Chapter 02: self-attention by hand, one vector at a time", 2026);
  bool scale = false, random_weights = false;
  cli.app().add_flag("--scale", scale, "divide every score by sqrt(d_k) (the notes do not)");
  cli.app().add_flag("--random-weights", random_weights,
                     "draw W_k and W_v from N(0, 0.5^2) with --seed instead of the fixed ones");
  if (auto code = cli.parse(argc, argv)) return *code;
  course::Dumper dump = cli.dumper();
  course::Plotter plot = cli.plotter();

  std::cout << "02 . Attention by hand, one vector at a time ("
            << (scale ? "scores / sqrt(d_k)" : "unscaled scores, as in the notes")
            << (random_weights ? ", random W_k and W_v, seed " + std::to_string(cli.options().seed)
                               : "")
            << ")\n";

  // ---- 1. The inputs: four vectors x^1..x^4, the columns of X -----------------------------------
  course::banner(std::cout, "1. The inputs: four vectors x^1..x^4, the columns of X");
  // Note 000's numbers; the course keeps them in attn::worked_example() for chapter 03 too.
  attn::ColumnExample ex = attn::worked_example();
  const Matrix& X = ex.X;  // X [d_in x n] = [3 x 4], column i is x^i
  const Index n = X.cols();
  for (Index i = 0; i < n; ++i) std::cout << "  " << tok("x", i) << " = " << vec(X, i, 0) << "\n";
  course::print_matrix(std::cout, "X (column i = x^i)", X, {.precision = 0});
  course::notice(std::cout, "tokens are columns here (the notes' convention); from chapter 04 on "
                          "they are rows.");

  // ---- 2. Three projections per token: q^i = W_q x^i, k^i = W_k x^i, v^i = W_v x^i --------------
  course::banner(std::cout, "2. Three projections per token: q^i = W_q x^i, k^i, v^i");
  // W_q is note 000's: it picks features 1 and 3. The note gives no W_k or W_v; the course's
  // W_k makes weights that are neither uniform nor one-hot, with entries in quarters so every
  // product is exact in float, and W_v keeps features 1 and 2 so v^i is easy to read.
  const Matrix& W_q = ex.W_q;  // [d_k x d_in] = [2 x 3]
  Matrix& W_k = ex.W_k;        // [d_k x d_in] = [2 x 3]
  Matrix& W_v = ex.W_v;        // [d_v x d_in] = [2 x 3]
  if (random_weights) {
    attn::Rng rng(cli.options().seed);
    W_k = attn::random_normal(rng, 2, 3, 0.0, 0.5);
    W_v = attn::random_normal(rng, 2, 3, 0.0, 0.5);
  }
  const Index d_k = W_q.rows(), d_v = W_v.rows();
  course::print_matrix(std::cout, "W_q", W_q, {.precision = 2});
  course::print_matrix(std::cout, "W_k", W_k, {.precision = 2});
  course::print_matrix(std::cout, "W_v", W_v, {.precision = 2});

  // [per_vector]
  Matrix Q(d_k, n), K(d_k, n), V(d_v, n);  // Q, K [d_k x n], V [d_v x n]: column i per token
  for (Index i = 0; i < n; ++i) {
    Q.col(i) = W_q * X.col(i);  // q^i = W_q x^i   [2 x 3] [3 x 1] -> [2 x 1]
    K.col(i) = W_k * X.col(i);  // k^i = W_k x^i
    V.col(i) = W_v * X.col(i);  // v^i = W_v x^i
  }
  // [per_vector]
  std::cout << "  q^2 = W_q x^2 = (" << written_dot(W_q.row(0).transpose(), X.col(1)) << ", "
            << written_dot(W_q.row(1).transpose(), X.col(1)) << ") = " << vec(Q, 1, 0) << "\n";
  for (Index i = 0; i < n; ++i) {
    // Padded to a common width so the three columns line up whatever the signs.
    std::cout << fmt("  %s = %-20s%s = %-20s%s = %s\n", tok("q", i).c_str(), vec(Q, i).c_str(),
                     tok("k", i).c_str(), vec(K, i).c_str(), tok("v", i).c_str(),
                     vec(V, i).c_str());
  }
  course::notice(std::cout, "q^1..q^4 = (1,2), (3,1), (3,0), (2,6): note 000's numbers exactly.");
  course::notice(std::cout, "the same three matrices serve every token: only W_q, W_k, W_v are "
                          "learned.");
  dump("W_q", W_q);
  dump("W_k", W_k);
  dump("W_v", W_v);
  dump("X", X);
  dump("Q", Q);
  dump("K", K);
  dump("V", V);

  // ---- 3. Scores: alpha_{i,j} = q^i . k^j -------------------------------------------------------
  course::banner(std::cout, "3. Scores: alpha_{i,j} = q^i . k^j (query i against every key j)");
  const float factor = scale ? 1.0f / std::sqrt(static_cast<float>(d_k)) : 1.0f;
  // [scores]
  Matrix A(n, n);  // A [n_k x n_q]: A(j, i) = alpha_{i,j}, so column i belongs to query i
  for (Index i = 0; i < n; ++i) {    // query q^i
    for (Index j = 0; j < n; ++j) {  // key k^j, including j = i: a token scores itself too
      A(j, i) = Q.col(i).dot(K.col(j)) * factor;
    }
  }
  // [scores]
  for (Index j = 0; j < n; ++j) {
    std::cout << fmt("  alpha_{2,%d} = q^2 . k^%d = ", static_cast<int>(j + 1),
                     static_cast<int>(j + 1))
              << (scale ? "(" : "") << written_dot(Q.col(1), K.col(j))
              << (scale ? fmt(") / sqrt(%d)", static_cast<int>(d_k)) : "")
              << fmt(" = %.4f\n", static_cast<double>(A(j, 1)));
  }
  course::print_matrix(std::cout, "A (row j = key k^j, column i = query q^i)", A);
  course::notice(std::cout, "column 2 is the four scores above: one query against all four "
                          "keys.");
  course::notice(std::cout, std::string("no 1/sqrt(d_k) ") +
                              (scale ? "in the notes; --scale divided by sqrt(2) here."
                                     : "here, as in notes 000/002; try --scale."));
  dump("A", A);

  // ---- 4. The dot product is |a| |b| cos(theta) -------------------------------------------------
  course::banner(std::cout, "4. The dot product is |a| |b| cos(theta)");
  std::cout << "  pair           a . b     |a|     |b|   cos(theta)   theta\n";
  const std::vector<std::pair<Index, Index>> pairs = {{1, 2}, {3, 3}, {2, 0}, {3, 1}};
  for (const auto& [i, j] : pairs) {
    const double dot = Q.col(i).cast<double>().dot(K.col(j).cast<double>());
    const double na = Q.col(i).cast<double>().norm(), nb = K.col(j).cast<double>().norm();
    const double c = dot / (na * nb);
    std::cout << fmt("  %s, %s   %8.4f  %6.3f  %6.3f   %10.4f  %6.1f deg\n",
                     tok("q", i).c_str(), tok("k", j).c_str(), dot, na, nb, c,
                     std::acos(c) * 180.0 / std::numbers::pi);
  }
  if (!random_weights) {
    course::notice(std::cout, "q^3 . k^1 = 0: the vectors are at 90 degrees, whatever their "
                            "lengths.");
    course::notice(std::cout, "q^4 . k^4 (72.6 deg) outscores q^4 . k^2 (45 deg): length can "
                            "beat direction.");
  }
  course::notice(std::cout, "a score grows with cos(theta) and with both lengths; chapter 04 "
                          "returns to this.");

  // ---- 5. Weights: alpha'_{i,j} = softmax over the keys j ---------------------------------------
  course::banner(std::cout, "5. Weights: alpha'_{i,j} = exp(alpha_{i,j}) / sum_j exp(alpha_{i,j})");
  // [softmax]
  Matrix A_prime(n, n);  // A' [n_k x n_q]: column i = query i's weights, summing to 1
  for (Index i = 0; i < n; ++i) {
    Vector column = A.col(i);  // [n_k x 1], a contiguous copy of the strided column
    attn::softmax_inplace({column.data(), static_cast<std::size_t>(n)});  // max first
    A_prime.col(i) = column;
  }
  // [softmax]
  {
    const double m = A.col(1).cast<double>().maxCoeff();
    double sum = 0;
    std::string sum_terms;
    for (Index j = 0; j < n; ++j) {
      sum += std::exp(A(j, 1) - m);
      sum_terms += fmt("%sexp(%g)", j ? " + " : "", A(j, 1) - m);
    }
    std::cout << fmt("  query 2, less its largest score %g (stable, and the same result):\n", m)
              << "    sum = " << sum_terms << fmt(" = %.4f\n", sum);
    for (Index j = 0; j < n; ++j) {
      std::cout << fmt("    alpha'_{2,%d} = exp(%g) / %.4f = %.4f\n", static_cast<int>(j + 1),
                       A(j, 1) - m, sum, static_cast<double>(A_prime(j, 1)));
    }
  }
  course::print_matrix(std::cout, "A' (column i = query i's weights over the keys j)", A_prime);
  std::cout << "  column sums:";
  for (Index i = 0; i < n; ++i) std::cout << fmt("  %.6f", A_prime.col(i).cast<double>().sum());
  std::cout << "\n";
  course::notice(std::cout, "every column sums to 1 (to float rounding): a share of attention "
                          "per key.");
  course::notice(std::cout, "a gap of 2 in scores is a factor e^2 = 7.4 in weight: softmax "
                          "rewards the best match.");
  dump("A_prime", A_prime);

  const std::vector<std::string> q_tics = {"q^1", "q^2", "q^3", "q^4"};
  const std::vector<std::string> k_tics = {"k^1", "k^2", "k^3", "k^4"};
  plot.heatmap("02_weights", A_prime,
               {.title = "Weights A' = softmax of each column of A = K^T Q",
                .xlabel = "query (column i)",
                .ylabel = "key (row j)",
                .xtics = q_tics,
                .ytics = k_tics,
                .show_values = true,
                .cmin = 0.0,
                .cmax = 1.0,
                .width_px = 640,
                .height_px = 560});

  // ---- 6. Outputs: y^i = sum_j alpha'_{i,j} v^j -------------------------------------------------
  course::banner(std::cout, "6. Outputs: y^i = sum_j alpha'_{i,j} v^j (a weighted sum of values)");
  std::cout << "  Note 000's own example first, with its values and made-up weights:\n";
  Matrix V_note(2, 4);  // [d_v x n]: v^1 = (1,0), v^2 = (0,2), v^3 = (3,0), v^4 = (0,4)
  V_note << 1, 0, 3, 0,  //
      0, 2, 0, 4;
  Matrix W_note(4, 4);  // [n_k x n_q]: the note's four weight columns
  W_note << 0.1f, 0.1f, 0, 0,  //
      0, 0.2f, 0, 0,           //
      0, 0.3f, 0.3f, 0,        //
      0, 0.4f, 0, 0.4f;
  {
    std::string terms, parts;
    for (Index j = 0; j < n; ++j) {
      terms += fmt("%s%.1f v^%d", j ? " + " : "", W_note(j, 1), static_cast<int>(j + 1));
      parts += (j ? " + " : "") + vec(Matrix(W_note(j, 1) * V_note.col(j)), 0, 1);
    }
    std::cout << "  y^2 = " << terms << "\n      = " << parts << " = "
              << vec(attn::weighted_sum_loops(V_note, W_note.col(1)), 0, 1) << "\n";
  }
  const Matrix Y_note = attn::weighted_sum_loops(V_note, W_note);  // [d_v x n_q] = [2 x 4]
  course::print_matrix(std::cout, "weights (the note's, illustrative)", W_note, {.precision = 1});
  course::print_matrix(std::cout, "Y = V weights", Y_note);
  course::notice(std::cout, "Y = [[0.1, 1, 0.9, 0], [0, 2, 0, 1.6]]: note 000's result exactly.");
  course::notice(std::cout, "these weights are illustrative, not softmax outputs: the columns "
                          "sum to 0.1, 1, 0.3, 0.4.");
  dump("V_note", V_note);
  dump("weights_note", W_note);
  dump("Y_note", Y_note);

  std::cout << "\n  Now with the real weights A' of step 5 and this chapter's v^j:\n";
  // [weighted_sum]
  Matrix Y = Matrix::Zero(d_v, n);  // Y [d_v x n_q], column i = y^i
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < n; ++j) Y.col(i) += A_prime(j, i) * V.col(j);  // y^i += alpha' v^j
  }
  // [weighted_sum]
  {
    std::string line = "  y^2 =";
    for (Index j = 0; j < n; ++j) {
      line += fmt("%s %.4f %s", j ? " +" : "", A_prime(j, 1), vec(V, j, 0).c_str());
    }
    std::cout << line << "\n      = " << vec(Y, 1) << "\n";
  }
  course::print_matrix(std::cout, "Y (column i = y^i)", Y);
  course::notice(std::cout, "each y^i is a blend of all four values, mixed by query i's column "
                          "of A'.");
  course::notice(std::cout, "no y^i waits for another: all four could be computed at once.");
  dump("Y", Y);

  // The library's all-loops version (attn::column_attention_loops) must agree with the above.
  const attn::ColumnAttention lib =
      attn::column_attention_loops(W_q, W_k, W_v, X, {.scale = scale});
  std::cout << fmt("  attn::column_attention_loops gives the same Y: max |difference| = %.1e\n",
                   static_cast<double>((lib.Y - Y).cwiseAbs().maxCoeff()));

  // ---- 7. Query, key, value: a search -----------------------------------------------------------
  course::banner(std::cout, "7. Query, key, value: a search");
  std::cout << "  The query is what a token is looking for, each key is what a token offers,\n"
               "  and the value is what it hands over once chosen. Note 004's example: one\n"
               "  searcher, itself and candidates 1, 2, 3, N, with softmax shares\n";
  const std::vector<std::string> who = {"itself", "cand. 1", "cand. 2", "cand. 3", "cand. N"};
  const std::vector<double> share = {0.4, 0.02, 0.3, 0.25, 0.03};
  // Any scores s_j = ln(share_j) + c give these shares back: softmax ignores the shift c.
  Matrix s(1, 5);  // [1 x 5]: one query's scores, c = -ln(0.02) so the smallest is 0
  for (Index j = 0; j < 5; ++j) s(0, j) = static_cast<float>(std::log(share[j] / 0.02));
  const Matrix p = attn::softmax_rows(s);  // [1 x 5]
  std::cout << "                ";
  for (const auto& w : who) std::cout << fmt("%9s", w.c_str());
  std::cout << "\n  score q . k   ";
  for (Index j = 0; j < 5; ++j) std::cout << fmt("%9.4f", static_cast<double>(s(0, j)));
  std::cout << "\n  softmax share ";
  for (Index j = 0; j < 5; ++j) std::cout << fmt("%9.4f", static_cast<double>(p(0, j)));
  std::cout << "\n";
  course::notice(std::cout, "scores ln(share / 0.02) give back exactly these shares: only "
                          "differences of scores matter.");
  course::notice(std::cout, "the searcher receives 0.4 of its own value, 0.3 of candidate 2's, "
                          "... all at once.");

  // ---- What to notice ---------------------------------------------------------------------------
  course::banner(std::cout, "What to notice");
  course::notice(std::cout, "Three learned matrices turn every x^i into q^i, k^i, v^i; "
                          "q^4 = (2, 6) as in note 000.");
  course::notice(std::cout, "alpha_{i,j} = q^i . k^j = |q||k| cos(theta): direction and length "
                          "both count.");
  course::notice(std::cout, "Softmax down each column turns scores into shares that sum to 1.");
  course::notice(std::cout, "The y^i are independent of each other: chapter 03 stacks them "
                          "into matrix products.");
  course::try_this(std::cout, "02_attention_by_hand",
                 {{"--scale", "scores / sqrt(2): flatter weights"},
                  {"--random-weights", "other W_k, W_v, drawn from N(0, 0.25)"},
                  {"--random-weights --seed 7", "and another draw"}});
  if (const std::string f = plot.summary(); !f.empty()) std::cout << "\n" << f;
  if (const std::string d = dump.summary(); !d.empty()) std::cout << "\n" << d << "\n";
  return 0;
}
