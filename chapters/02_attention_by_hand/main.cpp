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
//                        [--dump DIR] [--step]
#include "attn/core/random.hpp"
#include "attn/ops/column_attention.hpp"
#include "attn/ops/softmax.hpp"
#include "course/chapter.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using attn::Index;
using attn::Matrix;
using attn::Vector;

struct Knobs {
  bool scale = false;           // divide the scores by sqrt(d_k)
  bool random_weights = false;  // draw W_k and W_v instead of the fixed ones
};

// Column i of M as "(2.0000, 6.0000)".
std::string vec(const Matrix& M, Index i, int precision = 4) {
  return fmt::format("({:.{}f})", fmt::join(M.col(i), ", "), precision);
}

// A number inside a written-out sum: "3", "0.5", "(-1)".
std::string term(float v) { return v < 0 ? fmt::format("({:g})", v) : fmt::format("{:g}", v); }

// A dot product written out: "3*0 + 1*(-0.5)".
std::string written_dot(const Vector& a, const Vector& b) {
  std::vector<std::string> products;
  for (Index c = 0; c < a.size(); ++c) products.push_back(term(a(c)) + "*" + term(b(c)));
  return fmt::format("{}", fmt::join(products, " + "));
}

void lesson(course::Chapter& ch, const Knobs& k) {
  ch.intro("{}{}", k.scale ? "scores / sqrt(d_k)" : "unscaled scores, as in the notes",
           k.random_weights ? fmt::format(", random W_k and W_v, seed {}", ch.seed()) : "");

  ch.step("The inputs: four vectors x^1..x^4, the columns of X");
  // Note 000's numbers; the course keeps them in attn::worked_example() for chapter 03 too.
  attn::ColumnExample ex = attn::worked_example();
  const Matrix& X = ex.X;  // X [d_in x n] = [3 x 4], column i is x^i
  const Index n = X.cols();
  const std::vector<std::string> x_i = course::labels("x^", n), q_i = course::labels("q^", n),
                                 k_j = course::labels("k^", n), y_i = course::labels("y^", n);
  for (Index i = 0; i < n; ++i) ch.say("{} = {}", x_i[i], vec(X, i, 0));
  ch.show("X (column i = x^i)", X, {.precision = 0, .col_labels = x_i});
  ch.notice("tokens are columns here (the notes' convention); from chapter 04 on they are rows.");

  ch.step("Three projections per token: q^i = W_q x^i, k^i, v^i");
  // W_q is note 000's: it picks features 1 and 3. The note gives no W_k or W_v; the course's
  // W_k makes weights that are neither uniform nor one-hot, with entries in quarters so every
  // product is exact in float, and W_v keeps features 1 and 2 so v^i is easy to read.
  const Matrix& W_q = ex.W_q;  // [d_k x d_in] = [2 x 3]
  Matrix& W_k = ex.W_k;        // [d_k x d_in] = [2 x 3]
  Matrix& W_v = ex.W_v;        // [d_v x d_in] = [2 x 3]
  if (k.random_weights) {
    attn::Rng rng(ch.seed());
    W_k = attn::random_normal(rng, 2, 3, 0.0, 0.5);
    W_v = attn::random_normal(rng, 2, 3, 0.0, 0.5);
  }
  const Index d_k = W_q.rows(), d_v = W_v.rows();
  ch.show("W_q", W_q, {.precision = 2});
  ch.show("W_k", W_k, {.precision = 2});
  ch.show("W_v", W_v, {.precision = 2});

  // [per_vector]
  Matrix Q(d_k, n), K(d_k, n), V(d_v, n);  // Q, K [d_k x n], V [d_v x n]: column i per token
  for (Index i = 0; i < n; ++i) {
    Q.col(i) = W_q * X.col(i);  // q^i = W_q x^i   [2 x 3] [3 x 1] -> [2 x 1]
    K.col(i) = W_k * X.col(i);  // k^i = W_k x^i
    V.col(i) = W_v * X.col(i);  // v^i = W_v x^i
  }
  // [per_vector]
  ch.say("q^2 = W_q x^2 = ({}, {}) = {}", written_dot(W_q.row(0).transpose(), X.col(1)),
         written_dot(W_q.row(1).transpose(), X.col(1)), vec(Q, 1, 0));
  for (Index i = 0; i < n; ++i) {
    ch.say("q^{0} = {1:<20}k^{0} = {2:<20}v^{0} = {3}", i + 1, vec(Q, i), vec(K, i), vec(V, i));
  }
  ch.notice("q^1..q^4 = (1,2), (3,1), (3,0), (2,6): note 000's numbers exactly.");
  ch.notice("the same three matrices serve every token: only W_q, W_k, W_v are learned.");
  ch.dump("W_q", W_q);
  ch.dump("W_k", W_k);
  ch.dump("W_v", W_v);
  ch.dump("X", X);
  ch.dump("Q", Q);
  ch.dump("K", K);
  ch.dump("V", V);

  ch.step("Scores: alpha_{{i,j}} = q^i . k^j (query i against every key j)");
  const float factor = k.scale ? 1.0f / std::sqrt(static_cast<float>(d_k)) : 1.0f;
  // [scores]
  Matrix A(n, n);  // A [n_k x n_q]: A(j, i) = alpha_{i,j}, so column i belongs to query i
  for (Index i = 0; i < n; ++i) {    // query q^i
    for (Index j = 0; j < n; ++j) {  // key k^j, including j = i: a token scores itself too
      A(j, i) = Q.col(i).dot(K.col(j)) * factor;
    }
  }
  // [scores]
  for (Index j = 0; j < n; ++j) {
    const std::string sum = written_dot(Q.col(1), K.col(j));
    ch.say("alpha_{{2,{0}}} = q^2 . k^{0} = {1} = {2:.4f}", j + 1,
           k.scale ? fmt::format("({}) / sqrt({})", sum, d_k) : sum, A(j, 1));
  }
  ch.show("A (row j = key k^j, column i = query q^i)", A, {.row_labels = k_j, .col_labels = q_i});
  ch.notice("column 2 is the four scores above: one query against all four keys.");
  ch.notice("no 1/sqrt(d_k) {}", k.scale ? "in the notes; --scale divided by sqrt(2) here."
                                         : "here, as in notes 000/002; try --scale.");
  ch.dump("A", A);

  ch.step("The dot product is |a| |b| cos(theta)");
  ch.say("pair           a . b     |a|     |b|   cos(theta)   theta");
  for (const auto& [i, j] : std::vector<std::pair<Index, Index>>{{1, 2}, {3, 3}, {2, 0}, {3, 1}}) {
    const Eigen::VectorXd q = Q.col(i).cast<double>(), key = K.col(j).cast<double>();
    const double cos_theta = q.dot(key) / (q.norm() * key.norm());
    ch.say("q^{}, k^{}   {:8.4f}  {:6.3f}  {:6.3f}   {:10.4f}  {:6.1f} deg", i + 1, j + 1,
           q.dot(key), q.norm(), key.norm(), cos_theta,
           std::acos(cos_theta) * 180.0 / std::numbers::pi);
  }
  if (!k.random_weights) {
    ch.notice("q^3 . k^1 = 0: the vectors are at 90 degrees, whatever their lengths.");
    ch.notice("q^4 . k^4 (72.6 deg) outscores q^4 . k^2 (45 deg): length can beat direction.");
  }
  ch.notice("a score grows with cos(theta) and with both lengths; chapter 04 returns to this.");

  ch.step("Weights: alpha'_{{i,j}} = exp(alpha_{{i,j}}) / sum_j exp(alpha_{{i,j}})");
  // [softmax]
  Matrix A_prime(n, n);  // A' [n_k x n_q]: column i = query i's weights, summing to 1
  for (Index i = 0; i < n; ++i) {
    Vector column = A.col(i);  // [n_k x 1], a contiguous copy of the strided column
    attn::softmax_inplace({column.data(), static_cast<std::size_t>(n)});  // max first
    A_prime.col(i) = column;
  }
  // [softmax]
  {  // query 2's softmax written out, as a learner would do it on paper
    const double m = A.col(1).cast<double>().maxCoeff();
    double sum = 0;
    std::vector<std::string> terms;
    for (Index j = 0; j < n; ++j) {
      sum += std::exp(A(j, 1) - m);
      terms.push_back(fmt::format("exp({:g})", A(j, 1) - m));
    }
    ch.say("query 2, less its largest score {:g} (stable, and the same result):", m);
    ch.say("  sum = {} = {:.4f}", fmt::join(terms, " + "), sum);
    for (Index j = 0; j < n; ++j) {
      ch.say("  alpha'_{{2,{}}} = exp({:g}) / {:.4f} = {:.4f}", j + 1, A(j, 1) - m, sum,
             A_prime(j, 1));
    }
  }
  ch.show("A' (column i = query i's weights over the keys j)", A_prime,
          {.row_labels = k_j, .col_labels = q_i});
  ch.say("column sums:  {:.6f}", fmt::join(A_prime.cast<double>().colwise().sum(), "  "));
  ch.notice("every column sums to 1 (to float rounding): a share of attention per key.");
  ch.notice("a gap of 2 in scores is a factor e^2 = 7.4 in weight: softmax rewards the best "
            "match.");
  ch.dump("A_prime", A_prime);
  ch.plot().heatmap("02_weights", A_prime,
                    {.title = "Weights A' = softmax of each column of A = K^T Q",
                     .xlabel = "query (column i)",
                     .ylabel = "key (row j)",
                     .xtics = q_i,
                     .ytics = k_j,
                     .show_values = true,
                     .cmin = 0.0,
                     .cmax = 1.0,
                     .width_px = 640,
                     .height_px = 560,
                     .value_name = "weight",
                     .scores = A});

  ch.step("Outputs: y^i = sum_j alpha'_{{i,j}} v^j (a weighted sum of values)");
  ch.say("Note 000's own example first, with its values and made-up weights:");
  Matrix V_note(2, 4);   // [d_v x n]: v^1 = (1,0), v^2 = (0,2), v^3 = (3,0), v^4 = (0,4)
  V_note << 1, 0, 3, 0,  //
      0, 2, 0, 4;
  Matrix W_note(4, 4);         // [n_k x n_q]: the note's four weight columns
  W_note << 0.1f, 0.1f, 0, 0,  //
      0, 0.2f, 0, 0,           //
      0, 0.3f, 0.3f, 0,        //
      0, 0.4f, 0, 0.4f;
  {
    std::vector<std::string> terms, parts;
    for (Index j = 0; j < n; ++j) {
      terms.push_back(fmt::format("{:.1f} v^{}", W_note(j, 1), j + 1));
      parts.push_back(vec(Matrix(W_note(j, 1) * V_note.col(j)), 0, 1));
    }
    ch.say("y^2 = {}", fmt::join(terms, " + "));
    ch.say("    = {} = {}", fmt::join(parts, " + "),
           vec(attn::weighted_sum_loops(V_note, W_note.col(1)), 0, 1));
  }
  const Matrix Y_note = attn::weighted_sum_loops(V_note, W_note);  // [d_v x n_q] = [2 x 4]
  ch.show("weights (the note's, illustrative)", W_note,
          {.precision = 1, .row_labels = k_j, .col_labels = q_i});
  ch.show("Y = V weights", Y_note, {.col_labels = y_i});
  ch.notice("Y = [[0.1, 1, 0.9, 0], [0, 2, 0, 1.6]]: note 000's result exactly.");
  ch.notice("these weights are illustrative, not softmax outputs: the columns sum to 0.1, 1, "
            "0.3, 0.4.");
  ch.dump("V_note", V_note);
  ch.dump("weights_note", W_note);
  ch.dump("Y_note", Y_note);

  ch.gap();
  ch.say("Now with the real weights A' of step 5 and this chapter's v^j:");
  // [weighted_sum]
  Matrix Y = Matrix::Zero(d_v, n);  // Y [d_v x n_q], column i = y^i
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < n; ++j) Y.col(i) += A_prime(j, i) * V.col(j);  // y^i += alpha' v^j
  }
  // [weighted_sum]
  {
    std::vector<std::string> terms;
    for (Index j = 0; j < n; ++j) {
      terms.push_back(fmt::format("{:.4f} {}", A_prime(j, 1), vec(V, j, 0)));
    }
    ch.say("y^2 = {}", fmt::join(terms, " + "));
    ch.say("    = {}", vec(Y, 1));
  }
  ch.show("Y (column i = y^i)", Y, {.col_labels = y_i});
  // A weight is exactly 0 when exp of its score underflows float (a score ~104 below its
  // column's best, which --random-weights can draw): that value is then left out of y^i.
  const Index zeros = (A_prime.array() == 0.0f).count();
  if (zeros == 0) {
    ch.notice("each y^i is a blend of all four values, mixed by query i's column of A'.");
  } else {
    ch.notice("each y^i is a blend of the values, mixed by query i's column of A'. {} of the "
              "weights {} exactly 0 (exp of a score far below its column's best underflows "
              "float), so {} out of {} y^i.",
              zeros, zeros == 1 ? "is" : "are",
              zeros == 1 ? "that value drops" : "those values drop", zeros == 1 ? "its" : "their");
  }
  ch.notice("no y^i waits for another: all four could be computed at once.");
  ch.dump("Y", Y);

  // The library's all-loops version (attn::column_attention_loops) must agree with the above:
  // the same products summed in the same order, so the same bits unless the compiler fused a
  // multiply-add differently (a few float ulps of |Y| <= 4 max |v|, far below 1e-5).
  const attn::ColumnAttention lib =
      attn::column_attention_loops(W_q, W_k, W_v, X, {.scale = k.scale});
  const double lib_diff = attn::max_abs_diff(lib.Y, Y);
  if (!(lib_diff <= 1e-5 * (1.0 + V.cwiseAbs().maxCoeff()))) {
    throw std::runtime_error(fmt::format("attn::column_attention_loops disagrees with the loops "
                                         "above: max |difference| of Y = {:.1e}",
                                         lib_diff));
  }
  ch.say("attn::column_attention_loops gives the same Y{}: max |difference| = {:.1e}",
         lib_diff == 0.0 ? "" : " to float rounding", lib_diff);

  ch.step("Query, key, value: a search");
  ch.prose("The query is what a token is looking for, each key is what a token offers, and the "
           "value is what it hands over once chosen. Note 004's example: one searcher, itself "
           "and candidates 1, 2, 3, N, with softmax shares");
  const std::vector<double> share = {0.4, 0.02, 0.3, 0.25, 0.03};
  // Any scores s_j = ln(share_j) + c give these shares back: softmax ignores the shift c.
  Matrix s(1, 5);  // [1 x 5]: one query's scores, c = -ln(0.02) so the smallest is 0
  for (Index j = 0; j < 5; ++j) s(0, j) = static_cast<float>(std::log(share[j] / 0.02));
  Matrix table(2, 5);  // [2 x 5]: the scores, and the shares softmax gives back
  table << s, attn::softmax_rows(s);
  ch.show("", table,
          {.row_labels = {"score q . k", "softmax share"},
           .col_labels = {"itself", "cand. 1", "cand. 2", "cand. 3", "cand. N"}});
  ch.notice("scores ln(share / 0.02) give back exactly these shares: only differences of scores "
            "matter.");
  ch.notice("the searcher receives 0.4 of its own value, 0.3 of candidate 2's, ... all at once.");

  ch.finish(
      {"Three learned matrices turn every x^i into q^i, k^i, v^i; q^4 = (2, 6) as in note 000.",
       "alpha_{i,j} = q^i . k^j = |q||k| cos(theta): direction and length both count.",
       "Softmax down each column turns scores into shares that sum to 1.",
       "The y^i are independent of each other: chapter 03 stacks them into matrix products."},
      {{"--scale", "scores / sqrt(2): flatter weights"},
       {"--random-weights", "other W_k, W_v, drawn from N(0, 0.25)"},
       {"--random-weights --seed 7", "and another draw"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("02_attention_by_hand", "Attention by hand, one vector at a time", 2026);
  ch.cites("notes 000, 002 and 004");
  Knobs k;
  ch.flag("--scale", k.scale, "divide every score by sqrt(d_k) (the notes do not)");
  ch.flag("--random-weights", k.random_weights,
          "draw W_k and W_v from N(0, 0.5^2) with --seed instead of the fixed ones");
  return ch.run(argc, argv, [&] { lesson(ch, k); });
}
