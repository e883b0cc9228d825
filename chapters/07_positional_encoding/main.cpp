// 07_positional_encoding: self-attention cannot see word order; sinusoidal position vectors give
// it one, and moving every position by k is one fixed rotation.
//
//   PE(pos, 2i)   = sin(omega_i pos)       omega_i = 10000^(-2i / d_model),  i = 0 .. d_model/2 - 1
//   PE(pos, 2i+1) = cos(omega_i pos)
//   PE(pos + k)   = R(k) PE(pos)           R(k) block-diagonal, its entries read off PE(k)
//   PE(pos) . PE(pos + k) = sum_i cos(omega_i k)       (k only: pos cancels)
//
//   07_positional_encoding [--d-model D] [--positions P] [--max-offset K]
//                          [--seed N] [--out DIR] [--no-plots] [--dump DIR]
#include "attn/attention.hpp"
#include "course/cli.hpp"
#include "attn/embedding.hpp"
#include "attn/positional_encoding.hpp"
#include "course/print.hpp"
#include "attn/random.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <numbers>
#include <string>
#include <vector>

using course::fmt;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;

namespace {

// One self-attention layer and everything it computes on X [n x d_model].
struct Projections {
  Matrix W_q, W_k, W_v;  // [d_model x d_model] each
};
struct SelfAttention {
  Matrix Q, K, V;            // [n x d_model] each
  attn::AttentionResult r;   // weights [n x n], out [n x d_model]
};

SelfAttention self_attention(const Matrix& X, const Projections& W) {
  SelfAttention s;
  s.Q = X * W.W_q;  // [n x d_model]
  s.K = X * W.W_k;  // [n x d_model]
  s.V = X * W.W_v;  // [n x d_model]
  s.r = attn::attention(s.Q, s.K, s.V);  // softmax(Q K^T / sqrt(d_model)) V
  return s;
}

double max_abs_diff(const Matrix& a, const Matrix& b) {
  return static_cast<double>((a - b).cwiseAbs().maxCoeff());
}

// A rounding-sized difference: "0" when it is exactly zero, else "2.4e-07".
std::string tiny(double x) { return x == 0.0 ? "0" : fmt("%.1e", x); }

// print_matrix with a word in front of every row, and over every column when `columns` is
// given (for small matrices, whose columns are all shown).
void print_rows(const std::string& name, const std::vector<std::string>& rows, const MatrixD& m,
                const std::vector<std::string>& columns = {}, course::PrintOptions opts = {}) {
  std::size_t label = 0;
  for (const auto& r : rows) label = std::max(label, r.size());
  opts.indent = 0;
  const std::string body = course::format_matrix("", m, opts);
  std::cout << name << " " << attn::shape_str(m) << "\n";
  if (!columns.empty()) {
    // Every cell has one width w, two spaces apart: a line is cols * (w + 2) - 2 long.
    const std::size_t width = (body.find('\n') + 2) / columns.size() - 2;
    std::cout << std::string(2 + label + 2, ' ');
    for (std::size_t c = 0; c < columns.size(); ++c) {
      std::cout << (c ? "  " : "") << std::string(width - std::min(width, columns[c].size()), ' ')
                << columns[c];
    }
    std::cout << "\n";
  }
  std::size_t start = 0;
  for (const auto& r : rows) {
    const std::size_t end = body.find('\n', start);
    std::cout << "  " << r << std::string(label - r.size() + 2, ' ')
              << body.substr(start, end - start) << "\n";
    start = end + 1;
  }
}

std::string rtrim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// 12800 -> "12,800".
std::string with_commas(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return out;
}

// [sweep]
// max over pos < P and 0 <= k <= K of |R(k) PE(pos) - PE(pos + k)|, entry by entry. `pe` holds
// PE(0 .. P+K-1) as float (Matrix) or double (MatrixD), and all the arithmetic is in that type.
// R(k) is applied pair by pair, its zeros skipped; its entries are PE(k)'s own.
template <typename Table>
double largest_rotation_error(const Table& pe, Index P, Index K) {
  using Scalar = typename Table::Scalar;
  using Array = Eigen::Array<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Index pairs = pe.cols() / 2;
  Array S(pe.rows(), pairs), C(pe.rows(), pairs);  // [P+K x d/2]: the sin and the cos columns
  for (Index i = 0; i < pairs; ++i) {
    S.col(i) = pe.col(2 * i).array();
    C.col(i) = pe.col(2 * i + 1).array();
  }
  double worst = 0.0;
  for (Index k = 0; k <= K; ++k) {
    const auto sin_k = S.row(k), cos_k = C.row(k);  // [1 x d/2]: sin(omega_i k), cos(omega_i k)
    // [P x d/2] each: PE(pos+k, 2i) and PE(pos+k, 2i+1) for every pos < P, from PE(pos).
    const Array moved_sin = S.topRows(P).rowwise() * cos_k + C.topRows(P).rowwise() * sin_k;
    const Array moved_cos = C.topRows(P).rowwise() * cos_k - S.topRows(P).rowwise() * sin_k;
    worst = std::max({worst, static_cast<double>((moved_sin - S.middleRows(k, P)).abs().maxCoeff()),
                      static_cast<double>((moved_cos - C.middleRows(k, P)).abs().maxCoeff())});
  }
  return worst;
}
// [sweep]

// [recipe]
// The table as the PyTorch tutorials build it, every step in float32:
//   div_term = exp(arange(0, d, 2) * (-ln(10000) / d));  pe[:, 0::2] = sin(position * div_term)
// (with the C library's expf; PyTorch's own float32 exp is off by one ulp now and then, which
// moves its table by the same order as below, not the same bits).
Matrix float32_recipe(const std::vector<Index>& positions, Index d_model) {
  const float c = static_cast<float>(-std::log(10000.0) / static_cast<double>(d_model));
  Matrix pe(static_cast<Index>(positions.size()), d_model);  // [n x d_model]
  for (Index two_i = 0; two_i + 1 < d_model; two_i += 2) {
    const float div_term = std::exp(static_cast<float>(two_i) * c);  // omega_i, in float32
    for (Index r = 0; r < pe.rows(); ++r) {
      const float angle = static_cast<float>(positions[static_cast<std::size_t>(r)]) * div_term;
      pe(r, two_i) = std::sin(angle);
      pe(r, two_i + 1) = std::cos(angle);
    }
  }
  return pe;
}
// [recipe]

}  // namespace

int main(int argc, char** argv) {
  course::ChapterCli cli("07_positional_encoding",
                       "Chapter 07: positional encoding, sinusoids and the rotation R(k)", 2026);
  Index d_model = 128, positions = 100, max_offset = 100;
  cli.app().add_option("--d-model", d_model,
                       "features per position; even, since columns come in (sin, cos) pairs")
      ->capture_default_str()
      ->check(CLI::Range(2, 512))
      ->check(CLI::Validator(
          [](const std::string& s) {
            // CLI::Range ran first, so s is a number; an odd one cannot be split into pairs.
            return s.empty() || (s.back() - '0') % 2 == 0
                       ? std::string()
                       : "d_model must be even: R(k) rotates (sin, cos) column pairs (the "
                         "library's table alone would end an odd width with a lone sin column)";
          },
          "EVEN"));
  cli.app().add_option("--positions", positions, "positions in the table and its heat map")
      ->capture_default_str()->check(CLI::Range(1, 512));
  cli.app().add_option("--max-offset", max_offset,
                       "largest offset k for the rotation check and the dot-product curve")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  if (auto code = cli.parse(argc, argv)) return *code;
  const std::uint64_t seed = cli.options().seed;
  course::Dumper dump = cli.dumper();
  course::Plotter plot = cli.plotter();
  const Index P = positions, K = max_offset, pairs = d_model / 2;
  const std::string sd = std::to_string(d_model), sP = std::to_string(P);

  std::cout << "07 . Positional encoding (d_model " << d_model << ", positions " << P
            << ", max offset " << K << ", seed " << seed << ")\n";

  // ---- 1. Attention ignores order: "dog bites man" and "man bites dog" --------------------------
  course::banner(std::cout, "1. Attention ignores order: \"dog bites man\" and \"man bites dog\"");
  attn::Rng rng(seed);
  const std::vector<std::string> words_a = {"dog", "bites", "man"};
  const std::vector<std::string> words_b = {"man", "bites", "dog"};
  const Matrix table = attn::embedding_init(rng, 3, d_model);  // [3 x d_model]: dog, bites, man
  const double w_std = 1.0 / std::sqrt(static_cast<double>(d_model));
  const Projections W{attn::random_normal(rng, d_model, d_model, 0.0, w_std),
                      attn::random_normal(rng, d_model, d_model, 0.0, w_std),
                      attn::random_normal(rng, d_model, d_model, 0.0, w_std)};
  std::cout << "  One embedding row per word, table [3 x " << sd << "] ~ N(0, 1), and one layer "
            << "with its own projections\n  W_q, W_k, W_v [" << sd << " x " << sd
            << "] ~ N(0, 1/" << sd << "):  Q = X W_q, K = X W_k, V = X W_v,\n"
            << "  out = softmax(Q K^T / sqrt(" << sd << ")) V.\n";
  // [permute]
  const std::vector<Index> swap = {2, 1, 0};      // "man bites dog" = rows 2, 1, 0 of the other
  const Matrix X_a = table;                       // [3 x d_model]: dog, bites, man
  const Matrix X_b = X_a(swap, Eigen::all);       // [3 x d_model]: man, bites, dog
  const SelfAttention a = self_attention(X_a, W), b = self_attention(X_b, W);
  const Matrix out_b_back = b.r.out(swap, Eigen::all);  // [3 x d_model], back in a's order
  // [permute]
  print_rows("weights, dog bites man", words_a, a.r.weights.cast<double>(), words_a);
  print_rows("weights, man bites dog", words_b, b.r.weights.cast<double>(), words_b);
  course::notice(std::cout, "the same nine numbers, rows and columns reversed (the heat map turns "
                          "by 180 degrees).");
  print_rows("out, dog bites man", words_a, a.r.out.cast<double>(), {}, {.max_cols = 6});
  print_rows("out, man bites dog", words_b, b.r.out.cast<double>(), {}, {.max_cols = 6});
  const double diff_qkv = std::max({max_abs_diff(b.Q(swap, Eigen::all), a.Q),
                                    max_abs_diff(b.K(swap, Eigen::all), a.K),
                                    max_abs_diff(b.V(swap, Eigen::all), a.V)});
  const Matrix scores_a = a.Q * a.K.transpose(), scores_b = b.Q * b.K.transpose();  // [3 x 3]
  std::cout << "  \"man bites dog\" put back in the order dog, bites, man, minus \"dog bites man\","
               " max |.|:\n"
            << "    Q, K, V " << tiny(diff_qkv) << ",  scores Q K^T "
            << tiny(max_abs_diff(scores_b(swap, swap), scores_a)) << ",  weights "
            << tiny(max_abs_diff(b.r.weights(swap, swap), a.r.weights)) << ",  out "
            << tiny(max_abs_diff(out_b_back, a.r.out)) << "\n";
  course::notice(std::cout, "equal but for rounding: the softmax's sum and weights V add the same "
                          "terms in another");
  std::cout << "     order, which can move the last bit (float addition is not associative).\n";
  course::notice(std::cout, "each word gets the same output whether it bites or is bitten: "
                          "permute the input rows");
  std::cout << "     and the output rows permute with them. A bag of words is all attention "
               "sees.\n";
  dump("embedding_table", table);
  dump("W_q", W.W_q);
  dump("W_k", W.W_k);
  dump("W_v", W.W_v);
  dump("X_dog_bites_man", X_a);
  dump("X_man_bites_dog", X_b);
  dump("weights_dog_bites_man", a.r.weights);
  dump("weights_man_bites_dog", b.r.weights);
  dump("out_dog_bites_man", a.r.out);
  dump("out_man_bites_dog", b.r.out);

  // ---- 2. Add a position vector to every word: X + PE(0..2) -------------------------------------
  course::banner(std::cout, "2. Add a position vector to every word: X + PE(0..2)");
  const Matrix pe3 = attn::sinusoidal_encoding(3, d_model);  // [3 x d_model], positions 0, 1, 2
  // [add_pe]
  const Matrix Xp_a = X_a + pe3;  // [3 x d_model]: dog@0, bites@1, man@2
  const Matrix Xp_b = X_b + pe3;  // [3 x d_model]: man@0, bites@1, dog@2
  const SelfAttention ap = self_attention(Xp_a, W), bp = self_attention(Xp_b, W);
  // [add_pe]
  print_rows("weights, dog bites man + PE", words_a, ap.r.weights.cast<double>(), words_a);
  print_rows("weights, man bites dog + PE", words_b, bp.r.weights.cast<double>(), words_b);
  const Matrix outp_b_back = bp.r.out(swap, Eigen::all);  // [3 x d_model], a's word order
  std::cout << fmt("  out, put back: max |difference| = %.3f   (without PE: %s)\n",
                   max_abs_diff(outp_b_back, ap.r.out),
                   tiny(max_abs_diff(out_b_back, a.r.out)).c_str())
            << fmt("  the output for \"dog\": |out_dog(dog bites man) - out_dog(man bites dog)| = "
                   "%.3f\n",
                   static_cast<double>((ap.r.out.row(0) - bp.r.out.row(2)).norm()));
  course::notice(std::cout, "\"dog\" at position 0 and \"dog\" at position 2 are now different "
                          "vectors, so the");
  std::cout << "     sentences are different inputs, and the dog that bites is not the dog that "
               "is bitten.\n";
  dump("X_dog_bites_man_pe", Xp_a);
  dump("X_man_bites_dog_pe", Xp_b);
  dump("weights_dog_bites_man_pe", ap.r.weights);
  dump("weights_man_bites_dog_pe", bp.r.weights);
  dump("out_dog_bites_man_pe", ap.r.out);
  dump("out_man_bites_dog_pe", bp.r.out);
  {
    std::vector<course::HeatmapPanel> panels = {
        {a.r.weights, "no PE: dog bites man"}, {b.r.weights, "no PE: man bites dog"},
        {ap.r.weights, "with PE: dog bites man"}, {bp.r.weights, "with PE: man bites dog"}};
    plot.heatmap_grid("07_permutation", panels,
                      {.title = "Attention weights; rows = queries, columns = keys, in sentence "
                                "order",
                       .xlabel = "key j",
                       .ylabel = "query i",
                       .columns = 2,
                       .cmin = 0.0,
                       .cmax = 1.0,
                       .show_values = true,
                       .panel_px = 300});
  }

  // ---- 3. PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) -----------------------
  course::banner(std::cout, "3. PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)");
  const Index d8 = 8;
  // [table]
  const Matrix pe8 = attn::sinusoidal_encoding(5, d8);        // [5 x 8]: positions 0 .. 4
  const attn::VectorD omega8 = attn::sinusoidal_frequencies(d8);  // [4]: 1, 0.1, 0.01, 0.001
  // [table]
  std::cout << "  Note 004's sentence \"<begin> I am dog <end>\", positions 0 to 4, with d_model "
               "8 so that\n  every number fits. Pair i turns at omega_i = 10000^(-2i/8) = 10^-i "
               "radians per position.\n";
  // Column headers over each (sin, cos) pair; a pair takes 20 characters, "%9.4f%9.4f  ".
  std::string heads = "  PE [5 x 8] ", names = std::string(13, ' ');
  for (Index i = 0; i < omega8.size(); ++i) {
    heads += fmt("%18s  ", fmt("i=%d: omega %g", static_cast<int>(i), omega8(i)).c_str());
    names += "      sin      cos  ";
  }
  std::cout << rtrim(heads) << "\n" << rtrim(names) << "\n";
  const std::vector<std::string> sentence = {"<begin>", "I", "am", "dog", "<end>"};
  for (Index pos = 0; pos < 5; ++pos) {
    std::string line = fmt("  %-8s %d ", sentence[static_cast<std::size_t>(pos)].c_str(),
                           static_cast<int>(pos));
    for (Index c = 0; c < d8; ++c) {
      line += fmt("%9.4f%s", static_cast<double>(pe8(pos, c)), c % 2 ? "  " : "");
    }
    std::cout << rtrim(line) << "\n";
  }
  course::notice(std::cout, "PE(0) = [0, 1, 0, 1, ...]: sin 0 = 0 and cos 0 = 1 in every pair.");
  course::notice(std::cout, fmt("PE(1, 0) = sin 1 = %.4f, PE(1, 1) = cos 1 = %.4f: pair 0 turns "
                              "one radian per position.",
                              static_cast<double>(pe8(1, 0)), static_cast<double>(pe8(1, 1))));
  course::notice(std::cout, "pair 3 turns 0.001 rad per position and barely moves over five "
                          "words: it is there to");
  std::cout << "     tell far-apart positions from each other.\n";
  dump("pe_note004", pe8);

  // ---- 4. The whole table: PE [P x d_model] (figure) --------------------------------------------
  course::banner(std::cout, "4. The whole table: PE [" + sP + " x " + sd + "] (figure)");
  // [whole_table]
  const Matrix pe = attn::sinusoidal_encoding(P, d_model);         // [P x d_model]
  const attn::VectorD omega = attn::sinusoidal_frequencies(d_model);  // [d_model/2]
  // [whole_table]
  course::print_matrix(std::cout, "PE (row = position, column = feature)", pe,
                     {.max_rows = 6, .max_cols = 8});
  const double two_pi = 2.0 * std::numbers::pi;
  std::cout << fmt("  omega from %g (pair 0) down to %.3g (pair %d);\n  wavelengths 2 pi / "
                   "omega from %.2f to %.2f positions\n",
                   omega(0), omega(pairs - 1), static_cast<int>(pairs - 1), two_pi / omega(0),
                   two_pi / omega(pairs - 1));
  course::notice(std::cout, "left, fast stripes: the first pairs repeat every ~6 positions; right, "
                          "slow columns that");
  std::cout << "     hardly change over " << P << " positions. Each row is one position's "
            << "vector, added to its word.\n";
  dump("pe", pe);
  plot.heatmap("07_encoding", pe,
               {.title = "Sinusoidal position vectors PE [" + sP + " x " + sd + "]",
                .xlabel = "feature (columns 2i, 2i+1 = sin, cos of pair i)",
                .ylabel = "position pos",
                .cmin = -1.0,
                .cmax = 1.0,
                .width_px = 900,
                .height_px = 640});
  {
    std::vector<course::Series> waves;
    std::vector<Index> shown;
    for (const double share : {0.0, 1.0 / 4, 1.0 / 2}) {  // 2i / d_model: omega 1, 0.1, 0.01
      const Index i = static_cast<Index>(std::lround(share * static_cast<double>(pairs)));
      if (i < pairs && std::find(shown.begin(), shown.end(), i) == shown.end()) shown.push_back(i);
    }
    for (const Index i : shown) {
      course::Series s{.label = fmt("PE(pos, %d): sin, omega = %.3g", static_cast<int>(2 * i),
                                  omega(i)),
                     .points = i == 0};  // pair 0 jumps a radian per position: show the samples
      for (Index pos = 0; pos < P; ++pos) {
        s.x.push_back(static_cast<double>(pos));
        s.y.push_back(static_cast<double>(pe(pos, 2 * i)));
      }
      waves.push_back(std::move(s));
    }
    plot.lines("07_frequencies", waves,
               {.title = "Columns of PE: one sinusoid per pair, each slower than the last",
                .xlabel = "position pos",
                .ylabel = "PE(pos, 2i)"});
  }

  // ---- 5. PE(pos + k) = R(k) PE(pos): one fixed rotation for every pos --------------------------
  course::banner(std::cout, "5. PE(pos + k) = R(k) PE(pos): one fixed rotation for every pos");
  // [rotation]
  // sin(a + b) = sin a cos b + cos a sin b,  cos(a + b) = cos a cos b - sin a sin b,  with
  // a = omega_i pos, b = omega_i k: linear in (sin a, cos a), coefficients from k alone:
  //   PE(pos+k, 2i)   =  PE(k, 2i+1) PE(pos, 2i) + PE(k, 2i)   PE(pos, 2i+1)
  //   PE(pos+k, 2i+1) = -PE(k, 2i)   PE(pos, 2i) + PE(k, 2i+1) PE(pos, 2i+1)
  const MatrixD pe8d = attn::sinusoidal_encoding_d(5, d8);         // [5 x 8], in double
  const MatrixD R2 = attn::relative_rotation(2, d8);               // [8 x 8], k = 2
  const Eigen::VectorXd moved = R2 * pe8d.row(1).transpose();      // [8 x 1]: "I" moved by 2
  // [rotation]
  course::print_matrix(std::cout, "R(2) for d_model 8 (block i = [[cos 2w_i, sin 2w_i], [-sin 2w_i, "
                                "cos 2w_i]])", R2);
  print_rows("\"I\" moved by 2", {"PE(1) \"I\"", "R(2) PE(1)", "PE(3) \"dog\""},
             (MatrixD(3, d8) << pe8d.row(1), moved.transpose(), pe8d.row(3)).finished());
  const double err_dog = (moved.transpose() - pe8d.row(3)).cwiseAbs().maxCoeff();
  const MatrixD R1 = attn::relative_rotation(1, d8);  // [8 x 8]
  // Tokens are rows: the same map is a product with R(1)^T on the right, for all rows at once.
  const double err_rows =
      (pe8d.topRows(4) * R1.transpose() - pe8d.bottomRows(4)).cwiseAbs().maxCoeff();
  std::cout << fmt("  max |R(2) PE(\"I\") - PE(\"dog\")| = %.1e;  rows: max |PE[0:4] R(1)^T - "
                   "PE[1:5]| = %.1e\n",
                   err_dog, err_rows);
  course::notice(std::cout, "R(k) does not look at pos: the same matrix moves every word k places "
                          "on. Its blocks are");
  std::cout << "     PE(k) itself, so the rotation is already in the table.\n";

  std::cout << "  All pos < " << P << ", k = 0.." << K << " ("
            << with_commas(static_cast<std::uint64_t>(P * (K + 1))) << " shifts of " << pairs
            << " pairs; PE up to position " << P + K - 1 << "):\n";
  const Matrix pe_big = attn::sinusoidal_encoding(P + K, d_model);     // [P+K x d_model]
  const MatrixD pe_big_d = attn::sinusoidal_encoding_d(P + K, d_model);  // [P+K x d_model]
  const double err_float = largest_rotation_error(pe_big, P, K);
  const double err_double = largest_rotation_error(pe_big_d, P, K);
  // The bounds (README): float, five roundings of at most 2^-24 each on values of size <= 1.
  // Double, each of the three angles omega pos, omega k, omega (pos+k) is rounded once, by up
  // to half an ulp of the largest angle, plus a few ulps of 1 from sin, cos and the products.
  const double largest_angle = static_cast<double>(P + K - 1);
  const double half_ulp =
      (std::nextafter(largest_angle, 2 * largest_angle + 1) - largest_angle) / 2;
  const double bound_float = 5 * std::ldexp(1.0, -24);
  const double bound_double = 3 * half_ulp + 8 * std::ldexp(1.0, -53);
  std::cout << fmt("    float  (table rounded to float, float products):  max error %.1e   "
                   "(bound %.1e)\n",
                   err_float, bound_float)
            << fmt("    double (table and products in double):           max error %.1e   "
                   "(bound %.1e)\n",
                   err_double, bound_double);
  course::notice(std::cout, "the identity is exact; what is left is rounding. In double it is "
                          "the rounding of the");
  std::cout << "     angles (their ulp grows with pos), in float the rounding of the table "
               "itself.\n";
  dump("R_1", attn::relative_rotation(1, d_model));
  dump("R_2_note004", R2);
  dump("rotation_max_error",
       MatrixD((MatrixD(1, 2) << err_float, err_double).finished()));  // [1 x 2]: float, double

  // ---- 6. PE(pos) . PE(pos + k) = sum_i cos(omega_i k): the offset k, not pos -------------------
  course::banner(std::cout, "6. PE(pos) . PE(pos + k) = sum_i cos(omega_i k): the offset k, not pos");
  // [dot]
  // Pair i adds sin a sin b + cos a cos b = cos(b - a) = cos(omega_i k): pos cancels.
  Eigen::VectorXd dot_by_offset(K + 1);  // [K+1]
  for (Index k = 0; k <= K; ++k) {
    dot_by_offset(k) = (omega * static_cast<double>(k)).array().cos().sum();
  }
  // [dot]
  // Every PE(pos) . PE(pos') with pos < P at once: the Gram matrix [P x P+K], entry (pos, pos+k).
  const MatrixD gram = pe_big_d.topRows(P) * pe_big_d.transpose();  // [P x P+K]
  double dot_err = 0.0;
  for (Index pos = 0; pos < P; ++pos)
    for (Index k = 0; k <= K; ++k)
      dot_err = std::max(dot_err, std::abs(gram(pos, pos + k) - dot_by_offset(k)));
  const std::string h_last = fmt("   PE(%d).PE(%d+k)", static_cast<int>(P - 1),
                                 static_cast<int>(P - 1));
  const std::string h_formula = "   sum_i cos(omega_i k)", h_dist = "   |PE(pos+k) - PE(pos)|";
  std::cout << "       k   PE(0).PE(k)" << h_last << h_formula << h_dist << "\n";
  std::vector<Index> ks = {0, 1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 4096};
  std::erase_if(ks, [&](Index k) { return k > K; });
  if (ks.back() != K) ks.push_back(K);
  for (const Index k : ks) {
    const double d0 = static_cast<double>(pe_big.row(0).dot(pe_big.row(k)));
    const double dl = static_cast<double>(pe_big.row(P - 1).dot(pe_big.row(P - 1 + k)));
    // |a - b|^2 = |a|^2 + |b|^2 - 2 a.b, and |PE(pos)|^2 = d_model / 2 (one per pair).
    const double squared = std::max(0.0, static_cast<double>(d_model) - 2 * dot_by_offset(k));
    const double dist = std::sqrt(squared);
    std::cout << fmt("  %6d%14.4f%*.4f%*.4f%*.4f\n", static_cast<int>(k), d0,
                     static_cast<int>(h_last.size()), dl, static_cast<int>(h_formula.size()),
                     dot_by_offset(k), static_cast<int>(h_dist.size()), dist);
  }
  Index nearest = 1;
  for (Index k = 1; k <= K; ++k) {
    if (dot_by_offset(k) > dot_by_offset(nearest)) nearest = k;
  }
  std::cout << fmt("  max |PE(pos).PE(pos+k) - sum_i cos(omega_i k)| over pos < %d, k <= %d: "
                   "%.1e (double)\n",
                   static_cast<int>(P), static_cast<int>(K), dot_err);
  const auto distance = [&](Index k) {
    return std::sqrt(static_cast<double>(d_model) - 2 * dot_by_offset(k));
  };
  course::notice(std::cout, fmt("%d at k = 0 (d_model / 2, one per pair), then falling as k grows, "
                              "with ripples.",
                              static_cast<int>(pairs)));
  if (nearest == 1) {
    course::notice(std::cout, fmt("no two positions share a vector; the closest are neighbours, "
                                "%.3f apart: nearby looks alike.",
                                distance(1)));
  } else {
    course::notice(std::cout, fmt("the closest positions are k = %d apart (%.3f), closer than "
                                "neighbours (%.3f): with only",
                                static_cast<int>(nearest), distance(nearest), distance(1)));
    std::cout << "     " << pairs << " pairs the frequencies nearly line up again. More pairs "
              << "keep far positions apart.\n";
  }
  dump("dot_by_offset", MatrixD(dot_by_offset.transpose()));  // [1 x K+1]
  {
    course::Series formula{.label = "sum_i cos(omega_i k)", .points = false};
    course::Series first{.label = "PE(0) . PE(k)", .points = K <= 200, .dashed = true};
    course::Series last{.label = fmt("PE(%d) . PE(%d + k)", static_cast<int>(P - 1),
                                   static_cast<int>(P - 1)),
                      .points = K <= 200,
                      .dashed = true};
    for (Index k = 0; k <= K; ++k) {
      const double x = static_cast<double>(k);
      formula.x.push_back(x);
      formula.y.push_back(dot_by_offset(k));
      first.x.push_back(x);
      first.y.push_back(static_cast<double>(pe_big.row(0).dot(pe_big.row(k))));
      last.x.push_back(x);
      last.y.push_back(static_cast<double>(pe_big.row(P - 1).dot(pe_big.row(P - 1 + k))));
    }
    plot.lines("07_dot_product", {formula, first, last},
               {.title = "Similarity of two position vectors depends only on their offset k "
                         "(d_model " + sd + ")",
                .xlabel = "offset k",
                .ylabel = "PE(pos) . PE(pos + k)"});
  }

  // ---- 7. Learned or hand-crafted position vectors (note 002) -----------------------------------
  course::banner(std::cout, "7. Learned or hand-crafted position vectors (note 002)");
  const Index far = std::min<Index>(50, P + K - 1);
  // The first rows of an untrained nn.Embedding(max_len, d_model): N(0, 1) entries.
  const Matrix learned = attn::random_normal(rng, far + 1, d_model);  // [far+1 x d_model]
  const auto ldot = [&](Index p, Index q) {
    return static_cast<double>(learned.row(p).dot(learned.row(q)));
  };
  const auto row3 = [](const std::string& what, const std::string& sinusoid,
                       const std::string& learned_too) {
    std::cout << rtrim(fmt("  %-23s %-33s %s", what.c_str(), sinusoid.c_str(),
                           learned_too.c_str()))
              << "\n";
  };
  row3("", "sinusoidal (this chapter)", "learned: nn.Embedding(" + sP + ", " + sd + ")");
  row3("parameters", "none", with_commas(static_cast<std::uint64_t>(P * d_model)) +
                                 ", trained with the words");
  row3("position " + sP + " and on", "the formula gives them", "no row: max_len caps the input");
  row3("moving by k", "one fixed R(k), exact", "whatever training makes of it");
  row3(fmt("p(0).p(1), p(0).p(%d)", static_cast<int>(far)),
       fmt("%.1f, %.1f: the offset decides", static_cast<double>(pe_big.row(0).dot(pe_big.row(1))),
           static_cast<double>(pe_big.row(0).dot(pe_big.row(far)))),
       fmt("%.1f, %.1f: untrained, noise ~ %.0f", ldot(0, 1), ldot(0, far),
           std::sqrt(static_cast<double>(d_model))));
  course::notice(std::cout, "the paper tried both and found nearly identical results; it kept the "
                          "sinusoid in the");
  std::cout << "     hope it extrapolates to longer sentences. BERT and GPT-2 learn theirs (512 "
               "and 1024 rows).\n";

  // ---- 8. Precision: the float32 recipe against the table computed in double --------------------
  course::banner(std::cout, "8. Precision: the float32 recipe against the table computed in double");
  const std::vector<Index> far_positions = {1, 10, 100, 1000, 10000};
  const MatrixD truth = attn::sinusoidal_encoding_at(far_positions, d_model);  // [5 x d_model]
  const Matrix recipe = float32_recipe(far_positions, d_model);              // [5 x d_model]
  const Matrix rounded = truth.cast<float>();  // [5 x d_model], as attn::sinusoidal_encoding
  std::cout << "     pos   float32 angle spacing   max |error|: float32 recipe   double, "
               "rounded once\n";
  for (std::size_t r = 0; r < far_positions.size(); ++r) {
    const auto row = static_cast<Index>(r);
    const float angle = static_cast<float>(far_positions[r]);  // pair 0's angle, pos * 1
    std::cout << fmt("  %6d   %21.1e   %26.1e   %20.1e\n", static_cast<int>(far_positions[r]),
                     static_cast<double>(std::nextafter(angle, 2 * angle) - angle),
                     (recipe.row(row).cast<double>() - truth.row(row)).cwiseAbs().maxCoeff(),
                     (rounded.row(row).cast<double>() - truth.row(row)).cwiseAbs().maxCoeff());
  }
  course::notice(std::cout, "the recipe rounds omega and the angle pos * omega to float32 before "
                          "the sin: both errors");
  std::cout << "     grow with pos. Angles in double, rounded once at the end, stay within half "
               "a float ulp.\n";
  dump("recipe_positions",
       MatrixD(Eigen::Map<const Eigen::Matrix<Index, 1, Eigen::Dynamic>>(
                   far_positions.data(), static_cast<Index>(far_positions.size()))
                   .cast<double>()));  // [1 x 5]
  dump("pe_float32_recipe", recipe);

  // ---- What to notice ---------------------------------------------------------------------------
  course::banner(std::cout, "What to notice");
  course::notice(std::cout, "Without positions, permuting the words permutes the outputs: "
                          "attention sees a bag of words.");
  course::notice(std::cout, "PE pairs a sin and a cos per frequency, from 1 down to 1/10000 "
                          "radian per position.");
  course::notice(std::cout, "Moving by k is one fixed rotation R(k), built from PE(k): exact up "
                          "to rounding.");
  course::notice(std::cout, "PE(pos) . PE(pos + k) = sum_i cos(omega_i k): similarity depends on "
                          "the offset only.");
  course::notice(std::cout, "The float32 recipe loses digits at large positions; compute angles "
                          "in double.");
  course::banner(std::cout, "Try this");
  std::cout << "  07_positional_encoding --max-offset 4096    far offsets: similarity sinks to ~0\n"
               "  07_positional_encoding --d-model 8          4 pairs: k = 63 nearly repeats k = 0\n"
               "  07_positional_encoding --d-model 512 --positions 512   the paper's width\n";
  if (const std::string f = plot.summary(); !f.empty()) std::cout << "\n" << f;
  if (const std::string d = dump.summary(); !d.empty()) std::cout << "\n" << d << "\n";
  return 0;
}
