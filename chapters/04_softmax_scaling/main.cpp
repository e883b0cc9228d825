// 04_softmax_scaling: why attention divides its scores by sqrt(d_k), and why softmax
// subtracts the maximum before it exponentiates.
//
//   softmax(z)_j = exp(z_j - m) / sum_k exp(z_k - m),   m = max_k z_k
//   Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
//   var(q . k) = d_k       for q, k with independent components of mean 0 and variance 1
//   d softmax(z) / dz = diag(p) - p p^T, which goes to 0 as p goes to one-hot
//
// First note 001's experiment (20,000 samples of N(0, 100^2), softmax before and after
// dividing them by 100), then the three reasons behind it: overflow, the variance of a dot
// product, and the gradient of a saturated softmax.
//
//   04_softmax_scaling [--samples N] [--std S] [--d-k D] [--no-scale] [--seed N] [--out DIR]
//                      [--no-plots] [--dump DIR]
#include "course/cli.hpp"
#include "course/print.hpp"
#include "attn/random.hpp"
#include "attn/softmax.hpp"
#include "attn/softmax_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

using course::fmt;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;

namespace {

std::span<const float> row_of(const Matrix& m, Index r) {
  return {m.row(r).data(), static_cast<std::size_t>(m.cols())};
}

std::vector<double> values_of(const Matrix& m) { return {m.data(), m.data() + m.size()}; }

// Mean, standard deviation (dividing by N), smallest and largest entry, in double.
struct Summary {
  double mean = 0.0, std = 0.0, min = 0.0, max = 0.0;
};

Summary summarise(const Matrix& m) {
  const Eigen::ArrayXd v = Eigen::Map<const Eigen::ArrayXf>(m.data(), m.size()).cast<double>();
  const double mean = v.mean();
  return {mean, std::sqrt((v - mean).square().mean()), v.minCoeff(), v.maxCoeff()};
}

// The middle value (the mean of the two middle ones for an even count) of a copy.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// What section 2 reports about one row of weights.
struct RowFacts {
  double largest = 0.0, runner_up = 0.0, entropy = 0.0;
  Index at = 0, above = 0, zeros = 0;  // index of the largest, weights > 1e-3, weights == 0
};

RowFacts facts(std::span<const float> p) {
  RowFacts f;
  for (std::size_t j = 0; j < p.size(); ++j) {
    const double w = p[j];
    if (w > f.largest) {
      f.runner_up = f.largest;
      f.largest = w;
      f.at = static_cast<Index>(j);
    } else if (w > f.runner_up) {
      f.runner_up = w;
    }
    f.above += w > 1e-3;
    f.zeros += w == 0.0;
  }
  f.entropy = attn::entropy(p);
  return f;
}

// Mean largest weight, mean entropy, and every row's ||J||_F, over the rows of P.
struct RowsFacts {
  double largest = 0.0, entropy = 0.0;
  std::vector<double> jacobian_norms;
};

RowsFacts rows_facts(const Matrix& P, RowsFacts f = {}) {
  for (Index r = 0; r < P.rows(); ++r) {
    const std::span<const float> p = row_of(P, r);
    f.largest += *std::max_element(p.begin(), p.end());
    f.entropy += attn::entropy(p);
    f.jacobian_norms.push_back(attn::softmax_jacobian_norm(p));
  }
  return f;
}

// A float as the overflow table shows it: "NaN", "inf", or three significant digits.
std::string shown(float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt("%.3g", static_cast<double>(v));
}

int count_where(const Matrix& m, bool (*pred)(float)) {
  return static_cast<int>(std::count_if(m.data(), m.data() + m.size(), pred));
}

}  // namespace

int main(int argc, char** argv) {
  course::ChapterCli cli("04_softmax_scaling",
                       "Chapter 04: softmax, overflow, and why scores are divided by sqrt(d_k)",
                       2026);
  Index n_samples = 20000, d_k = 64;
  double stddev = 100.0;
  bool no_scale = false;
  cli.app().add_option("--samples", n_samples, "samples in note 001's experiment (sections 1-3)")
      ->capture_default_str()->check(CLI::Range(10, 200000));
  cli.app().add_option("--std", stddev, "standard deviation of those samples")
      ->capture_default_str()->check(course::finite_range(0.01, 1000.0));
  cli.app().add_option("--d-k", d_k, "width of the query and keys of section 5's attention row")
      ->capture_default_str()->check(CLI::Range(1, 16384));
  cli.app().add_flag("--no-scale", no_scale,
                     "section 5 computes softmax(q K^T) instead of softmax(q K^T / sqrt(d_k))");
  if (auto code = cli.parse(argc, argv)) return *code;
  const bool scale = !no_scale;
  const std::uint64_t seed = cli.options().seed;
  course::Dumper dump = cli.dumper();
  course::Plotter plot = cli.plotter();
  const std::string sN = std::to_string(n_samples), sstd = fmt("%g", stddev);
  const double N = static_cast<double>(n_samples);

  std::cout << "04 . Softmax and scaling (seed " << seed << ", samples " << sN << ", std " << sstd
            << ", d_k " << d_k << ", " << (scale ? "scores / sqrt(d_k)" : "unscaled scores")
            << ")\n";

  // ---- 1. Note 001's samples: a ~ N(0, 100^2), and b = a / 100 ----------------------------------
  course::banner(std::cout, "1. Note 001's samples: a ~ N(0, " + sstd + "^2), " + sN +
                              " of them, and b = a / " + sstd);
  // One generator per experiment, so that a knob of one section never moves another's numbers.
  attn::Rng note_rng(seed);
  // [samples]
  const Matrix a = attn::random_normal(note_rng, 1, n_samples, 0.0, stddev);  // [1 x N]
  const Matrix b = a / static_cast<float>(stddev);                              // [1 x N]
  // [samples]
  course::print_matrix(std::cout, "a", a, {.precision = 2});
  course::print_matrix(std::cout, "b = a / " + sstd, b);
  const Summary sa = summarise(a), sb = summarise(b);
  std::cout << "            mean        std        min        max\n"
            << fmt("  a   %9.4f  %9.4f  %9.4f  %9.4f\n", sa.mean, sa.std, sa.min, sa.max)
            << fmt("  b   %9.4f  %9.4f  %9.4f  %9.4f\n", sb.mean, sb.std, sb.min, sb.max);
  course::notice(std::cout, "b is a with the axis relabelled: the same histogram, " + sstd +
                              " times narrower.");
  plot.histograms("04_histograms",
                  {{.values = values_of(a),
                    .title = "Histogram of a",
                    .xlabel = "a ~ N(0, " + sstd + "^2)"},
                   {.values = values_of(b),
                    .title = "Histogram of b",
                    .xlabel = "b = a / " + sstd}},
                  {.title = sN + " samples, before and after dividing by " + sstd});
  dump("a", a);
  dump("b", b);

  // ---- 2. Softmax of each: a spike, or a flat spread --------------------------------------------
  course::banner(std::cout, "2. Softmax of each: softmax(a) is a spike, softmax(b) stays flat");
  // [softmax]
  const Matrix p_a = attn::softmax_rows(a);  // [1 x N], sums to 1
  const Matrix p_b = attn::softmax_rows(b);  // [1 x N], sums to 1
  // [softmax]
  const RowFacts fa = facts(row_of(p_a, 0)), fb = facts(row_of(p_b, 0));
  const double ln_N = std::log(N);
  std::cout << "              largest  at index  runner-up   entropy  exp(entropy)  above 1e-3\n";
  for (const auto& [name, f] : {std::pair{"softmax(a)", fa}, std::pair{"softmax(b)", fb}}) {
    std::cout << fmt("  %s  %8.6f  %8d  %9.2e  %8.4f  %12.1f  %10d\n", name, f.largest,
                     static_cast<int>(f.at), f.runner_up, f.entropy, std::exp(f.entropy),
                     static_cast<int>(f.above));
  }
  std::cout << fmt("  uniform     %8.6f    (all 1/N)           %8.4f  %12.1f\n", 1.0 / N, ln_N, N);
  course::notice(std::cout, "entropy in nats: 0 for one-hot, ln N for uniform; exp(entropy) counts "
                          "the keys in use.");
  // softmax(b)'s largest weight, written out: p_max = exp(b_max) / sum_j exp(b_j).
  double sum_exp_b = 0.0;
  for (Index j = 0; j < n_samples; ++j) sum_exp_b += std::exp(static_cast<double>(b(0, j)));
  const double mean_exp_b = sum_exp_b / N, e_half = std::exp(0.5);
  std::cout << fmt("\n  softmax(b): b_max = %.4f and the mean of exp(b_j) is %.4f, so the largest "
                   "weight is\n",
                   sb.max, mean_exp_b)
            << fmt("    exp(b_max) / (N mean exp(b_j)) = %.2f / (%s x %.4f) = %.6f\n",
                   std::exp(sb.max), sN.c_str(), mean_exp_b, std::exp(sb.max) / sum_exp_b)
            << fmt("    E[exp(Z)] = e^(1/2) = %.4f for Z ~ N(0, 1):   exp(b_max) / (N e^(1/2)) "
                   "= %.6f\n",
                   e_half, std::exp(sb.max) / (N * e_half))
            << fmt("    and the entropy of many N(0, 1) logits is about ln N - 1/2 = %.4f\n",
                   ln_N - 0.5);
  std::vector<float> top_a(a.data(), a.data() + a.size());
  std::partial_sort(top_a.begin(), top_a.begin() + 2, top_a.end(), std::greater<>());
  const double gap = static_cast<double>(top_a[0]) - static_cast<double>(top_a[1]);
  std::cout << fmt("  softmax(a): the two largest a_j are %.2f and %.2f, so the runner-up gets\n"
                   "    exp(-%.2f) = %.1e times the leader's weight.\n",
                   static_cast<double>(top_a[0]), static_cast<double>(top_a[1]), gap,
                   std::exp(-gap));
  course::notice(std::cout, fmt("softmax(a) gives %.6f to one entry of %s: a lead of %.1f in "
                              "the logits", fa.largest, sN.c_str(), gap));
  std::cout << fmt("     is a factor of %.0f in the weights.\n", std::exp(gap));
  course::notice(std::cout, fmt("softmax(b) keeps about %.0f entries in play; its largest weight "
                              "is %.4f.", std::exp(fb.entropy), fb.largest));
  {
    course::Series sa_line, sb_line, uniform;
    sa_line.label = "softmax(a), a ~ N(0, " + sstd + "^2)";
    sb_line.label = "softmax(b), b = a / " + sstd;
    sa_line.points = sb_line.points = false;
    for (Index j = 0; j < n_samples; ++j) {
      sa_line.x.push_back(static_cast<double>(j));
      sa_line.y.push_back(p_a(0, j));
      sb_line.y.push_back(p_b(0, j));
    }
    sb_line.x = sa_line.x;
    uniform.label = "1/N, every weight of a uniform softmax";
    uniform.x = {0.0, N - 1.0};
    uniform.y = {1.0 / N, 1.0 / N};
    uniform.points = false;
    uniform.dashed = true;
    plot.lines("04_softmax_unscaled", {sa_line},
               {.title = "Softmax of a: almost all the weight on one entry",
                .xlabel = "index j (from 0)",
                .ylabel = "weight"});
    plot.lines("04_softmax_scaled", {sb_line, uniform},
               {.title = "Softmax of b = a / " + sstd + ": every weight small",
                .xlabel = "index j (from 0)",
                .ylabel = "weight"});
  }
  dump("softmax_a", p_a);
  dump("softmax_b", p_b);

  // ---- 3. Overflow: exp(a_j) without subtracting the maximum ------------------------------------
  course::banner(std::cout, "3. Overflow: the naive exp(z_j) / sum_k exp(z_k) in float");
  // [overflow]
  const Matrix naive_a = attn::naive_softmax_rows(a);  // [1 x N]: exp(a_j) overflows past 88.7
  const Matrix naive_b = attn::naive_softmax_rows(b);  // [1 x N]: |b_j| < 6, nothing overflows
  // [overflow]
  const double flt_max = std::numeric_limits<float>::max();
  int overflowing = 0;
  for (Index j = 0; j < n_samples; ++j) overflowing += std::isinf(std::exp(a(0, j)));
  const auto is_nan = [](float x) { return std::isnan(x); };
  const auto is_zero = [](float x) { return x == 0.0f; };
  const auto not_finite = [](float x) { return !std::isfinite(x); };
  const int nan_a = count_where(naive_a, is_nan), zero_a = count_where(naive_a, is_zero);
  std::cout << fmt("  float's largest value is %.4e = exp(%.4f).\n", flt_max, std::log(flt_max))
            << fmt("  exp(a_j) is inf for %d of the %s a_j. The first four, and the largest:\n",
                   overflowing, sN.c_str());
  std::cout << "         j          a_j   exp(a_j) in float   naive weight   stable weight\n";
  for (Index j : {Index{0}, Index{1}, Index{2}, Index{3}, fa.at}) {
    std::cout << fmt("  %8d  %11.4f  %18s  %13s  %14s\n", static_cast<int>(j),
                     static_cast<double>(a(0, j)), shown(std::exp(a(0, j))).c_str(),
                     shown(naive_a(0, j)).c_str(), shown(p_a(0, j)).c_str());
  }
  std::cout << fmt("  naive  softmax(a): %d NaN, %d zeros, %d other weights\n", nan_a, zero_a,
                   static_cast<int>(n_samples) - nan_a - zero_a)
            << fmt("  stable softmax(a): %d not finite, sum of the weights %.6f\n",
                   count_where(p_a, not_finite), p_a.cast<double>().sum());
  const double naive_err = static_cast<double>((naive_b - p_b).cwiseAbs().maxCoeff());
  std::cout << fmt("  naive  softmax(b): max |naive - stable| = %.1e, on weights up to %.1e\n",
                   naive_err, fb.largest);
  if (overflowing > 0) {
    course::notice(std::cout, "one exp(a_j) = inf makes the sum inf, and every weight inf / inf "
                            "= NaN or x / inf = 0.");
  } else {
    course::notice(std::cout, "with std " + sstd + " no a_j reaches 88.72, so even the naive "
                            "formula survives; try --std 100.");
  }
  course::notice(std::cout, fmt("the stable softmax computes exp(a_j - %.2f): no exponent above "
                              "0, so no overflow.", sa.max));
  std::cout << fmt("     %d of its weights underflow to exactly 0: their true values are "
                   "below 1.4e-45.\n", static_cast<int>(fa.zeros));
  dump("naive_softmax_a", naive_a);
  dump("naive_softmax_b", naive_b);

  // ---- 4. Why sqrt(d_k): var(q . k) = d_k -------------------------------------------------------
  course::banner(std::cout, "4. Why sqrt(d_k): var(q . k) = d_k for unit-variance q and k");
  // q . k = sum_i q_i k_i is a sum of d_k independent terms, each of mean E[q_i] E[k_i] = 0 and
  // variance E[q_i^2] E[k_i^2] = 1, and variances of independent terms add: var(q . k) = d_k.
  // The mean is known to be 0, so the variance is estimated as the mean of (q . k)^2 over N
  // pairs; that estimate has standard deviation sqrt((2 d_k^2 + 6 d_k) / N) (see the page).
  constexpr Index n_pairs = 4000;
  std::vector<Index> widths;  // d_k = 1, 2, 4, ..., 1024
  for (Index d = 1; d <= 1024; d *= 2) widths.push_back(d);
  attn::Rng dot_rng(seed + 1);
  MatrixD variance_table(static_cast<Index>(widths.size()), 4);  // d_k, N, mean, var
  std::cout << fmt("  %d independent pairs (q, k) per d_k, every component ~ N(0, 1); "
                   "var = mean of (q.k)^2:\n", static_cast<int>(n_pairs));
  std::cout << "    d_k   mean(q.k)    var(q.k)   var / d_k   its expected sd\n";
  course::Series var_measured, var_line, var_scaled;
  for (std::size_t w = 0; w < widths.size(); ++w) {
    const Index d = widths[w];
    // [variance]
    const Matrix q = attn::random_normal(dot_rng, n_pairs, d);  // [N x d_k], one q per row
    const Matrix k = attn::random_normal(dot_rng, n_pairs, d);  // [N x d_k], one k per row
    const Eigen::VectorXf dots = q.cwiseProduct(k).rowwise().sum();  // [N], q_i . k_i
    // [variance]
    const Eigen::ArrayXd x = dots.cast<double>().array();
    const double dd = static_cast<double>(d), mean = x.mean(), var = x.square().mean();
    const double sd_ratio = std::sqrt((2.0 + 6.0 / dd) / static_cast<double>(n_pairs));
    std::cout << fmt("  %5d  %10.4f  %10.3f  %10.4f   %.4f\n", static_cast<int>(d), mean, var,
                     var / dd, sd_ratio);
    variance_table.row(static_cast<Index>(w)) << dd, static_cast<double>(n_pairs), mean, var;
    var_measured.x.push_back(dd);
    var_measured.y.push_back(var);
    var_scaled.x.push_back(dd);
    var_scaled.y.push_back(var / dd);
  }
  course::notice(std::cout, "var(q.k) grows like d_k, and var(q.k / sqrt(d_k)) = var(q.k) / d_k "
                          "stays at 1.");
  course::notice(std::cout, "unscaled, scores spread like sqrt(d_k): 32 at d_k = 1024. Note 001's "
                          "a is that, at 100.");
  var_line.label = "var = d_k";
  var_line.x = {1.0, 1024.0};
  var_line.y = {1.0, 1024.0};
  var_line.points = false;
  var_line.dashed = true;
  var_measured.label = "measured var(q . k)";
  var_scaled.label = "measured var(q . k / sqrt(d_k))";
  plot.lines("04_variance_vs_dk", {var_measured, var_line, var_scaled},
             {.title = "The variance of a dot product grows with d_k (" +
                       std::to_string(n_pairs) + " pairs per d_k)",
              .xlabel = "d_k",
              .ylabel = "variance",
              .logx = true,
              .logy = true});
  dump("variance_vs_dk", variance_table);

  // ---- 5. One query against 8 keys --------------------------------------------------------------
  const std::string sd = std::to_string(d_k);
  course::banner(std::cout, "5. One query against 8 keys at d_k = " + sd + ", " +
                              (scale ? "scaled by 1/sqrt(d_k)" : "unscaled (--no-scale)"));
  attn::Rng row_rng(seed + 2);
  const Matrix q = attn::random_normal(row_rng, 1, d_k);  // [1 x d_k]
  const Matrix K = attn::random_normal(row_rng, 8, d_k);  // [8 x d_k], one key per row
  // [one_row]
  const float factor = scale ? 1.0f / std::sqrt(static_cast<float>(d_k)) : 1.0f;
  const Matrix scores = (q * K.transpose()) * factor;  // [1 x 8] = [1 x d_k] [d_k x 8]
  const Matrix weights = attn::softmax_rows(scores);    // [1 x 8], sums to 1
  // [one_row]
  std::cout << fmt("  |q| = %.2f, sqrt(d_k) = %.2f. For a fixed q, q . k_j ~ N(0, |q|^2) for "
                   "every key j.\n",
                   static_cast<double>(q.norm()), std::sqrt(static_cast<double>(d_k)));
  course::print_matrix(std::cout, scale ? "scores = q K^T / sqrt(" + sd + ")" : "scores = q K^T",
                     scores, {.precision = 2});
  course::print_matrix(std::cout, "weights = softmax(scores)", weights);
  const RowFacts fr = facts(row_of(weights, 0));
  std::cout << fmt("  largest weight %.4f, entropy %.4f of ln 8 = %.4f, ||J||_F %.2e "
                   "(section 7)\n",
                   fr.largest, fr.entropy, std::log(8.0),
                   attn::softmax_jacobian_norm(row_of(weights, 0)));
  course::notice(std::cout, fmt("%s, the scores spread by about %.0f: the best key takes %.2f and "
                              "%d of the 8 keys",
                              scale ? "scaled" : "unscaled",
                              scale ? 1.0 : std::sqrt(static_cast<double>(d_k)), fr.largest,
                              static_cast<int>(fr.above)));
  std::cout << (scale ? "     get more than 0.001. Try --no-scale, and --d-k 1024 --no-scale.\n"
                      : "     get more than 0.001. Try it without --no-scale, or with --d-k 4 "
                        "--no-scale.\n");
  dump("q", q);
  dump("K", K);
  dump("scores", scores);
  dump("weights", weights);

  // ---- 6. As d_k grows: largest weight and entropy, with and without 1/sqrt(d_k) ----------------
  course::banner(std::cout, "6. As d_k grows: the largest weight and the entropy of a row");
  constexpr Index n_keys = 64, n_queries = 64, n_batches = 8;
  const double rows_per_dk = static_cast<double>(n_queries * n_batches);
  const double ln_keys = std::log(static_cast<double>(n_keys));
  attn::Rng sweep_rng(seed + 3);
  // d_k, then mean largest, mean entropy, median ||J||_F unscaled, and the same scaled.
  MatrixD saturation_table(static_cast<Index>(widths.size()), 7);
  std::cout << fmt("  rows of %d weights, %d rows per d_k: the mean largest weight, the mean "
                   "entropy,\n  the median ||J||_F (section 7). Uniform: %.4f, ln %d = %.4f.\n",
                   static_cast<int>(n_keys), static_cast<int>(rows_per_dk), 1.0 / n_keys,
                   static_cast<int>(n_keys), ln_keys);
  std::cout << "        ------- softmax(Q K^T) -------    --- softmax(Q K^T / sqrt(d_k)) ---\n"
               "    d_k   largest  entropy  median ||J||    largest  entropy  median ||J||\n";
  course::Series top_u, top_s, ent_u, ent_s, jac_dk;
  for (std::size_t w = 0; w < widths.size(); ++w) {
    const Index d = widths[w];
    const float inv_sqrt_dk = 1.0f / std::sqrt(static_cast<float>(d));
    RowsFacts unscaled, scaled;
    for (Index batch = 0; batch < n_batches; ++batch) {
      // [sweep]
      const Matrix Q = attn::random_normal(sweep_rng, n_queries, d);  // [64 x d_k]
      const Matrix Kb = attn::random_normal(sweep_rng, n_keys, d);    // [64 x d_k]
      const Matrix S = Q * Kb.transpose();                            // [64 x 64] q_i . k_j
      const Matrix P_unscaled = attn::softmax_rows(S);                // [64 x 64]
      const Matrix P_scaled = attn::softmax_rows(S * inv_sqrt_dk);    // [64 x 64]
      // [sweep]
      unscaled = rows_facts(P_unscaled, std::move(unscaled));
      scaled = rows_facts(P_scaled, std::move(scaled));
    }
    const double x = static_cast<double>(d);
    const double row[7] = {x,
                           unscaled.largest / rows_per_dk,
                           unscaled.entropy / rows_per_dk,
                           median(unscaled.jacobian_norms),
                           scaled.largest / rows_per_dk,
                           scaled.entropy / rows_per_dk,
                           median(scaled.jacobian_norms)};
    for (Index c = 0; c < 7; ++c) saturation_table(static_cast<Index>(w), c) = row[c];
    std::cout << fmt("  %5d    %.4f   %.4f      %.2e     %.4f   %.4f      %.2e\n",
                     static_cast<int>(d), row[1], row[2], row[3], row[4], row[5], row[6]);
    top_u.x.push_back(x), top_u.y.push_back(row[1]);
    ent_u.x.push_back(x), ent_u.y.push_back(row[2] / ln_keys);
    top_s.x.push_back(x), top_s.y.push_back(row[4]);
    ent_s.x.push_back(x), ent_s.y.push_back(row[5] / ln_keys);
    // Section 7's figure: these rows' logits spread like |q| ~ sqrt(d_k) (log axis: only > 0).
    if (row[3] > 0.0) jac_dk.x.push_back(std::sqrt(x)), jac_dk.y.push_back(row[3]);
  }
  const Index last = static_cast<Index>(widths.size()) - 1;  // d_k = 1024
  course::notice(std::cout, fmt("unscaled, the largest weight climbs from %.2f to %.2f and the "
                              "entropy falls from %.2f",
                              saturation_table(0, 1), saturation_table(last, 1),
                              saturation_table(0, 2)));
  std::cout << fmt("     to %.2f: the rows turn one-hot as d_k grows.\n",
                   saturation_table(last, 2));
  course::notice(std::cout, fmt("scaled, they stay near %.2f and %.2f at every d_k (ln %d - 1/2 = "
                              "%.2f).",
                              saturation_table(last, 4), saturation_table(last, 5),
                              static_cast<int>(n_keys), ln_keys - 0.5));
  top_u.label = "largest weight, softmax(Q K^T)";
  ent_u.label = "entropy / ln 64, softmax(Q K^T)";
  top_s.label = "largest weight, softmax(Q K^T / sqrt(d_k))";
  ent_s.label = "entropy / ln 64, softmax(Q K^T / sqrt(d_k))";
  ent_u.dashed = ent_s.dashed = true;
  plot.lines("04_saturation_vs_dk", {top_u, ent_u, top_s, ent_s},
             {.title = "Rows of 64 weights: without 1/sqrt(d_k) they turn one-hot",
              .xlabel = "d_k",
              .ylabel = "mean over 512 rows",
              .logx = true});
  dump("saturation_vs_dk", saturation_table);

  // ---- 7. Saturation stops learning: the Jacobian diag(p) - p p^T -------------------------------
  course::banner(std::cout, "7. Saturation stops learning: the Jacobian J = diag(p) - p p^T");
  // dp_i / dz_j = p_i (delta_ij - p_j). The backward pass multiplies the gradient arriving at
  // the weights by J (symmetric): dL/dz = J dL/dp. Near one-hot, every entry of J is near 0.
  Matrix z(1, 4);  // [1 x 4]
  z << 2.0f, 1.0f, 0.0f, -1.0f;
  double norms[2] = {};
  for (int t = 0; t < 2; ++t) {
    const float s = t == 0 ? 1.0f : 8.0f;
    // [jacobian]
    const Matrix p = attn::softmax_rows(z * s);                      // [1 x 4]
    const MatrixD J = attn::softmax_jacobian(row_of(p, 0));          // [4 x 4] diag(p) - p p^T
    const double norm = attn::softmax_jacobian_norm(row_of(p, 0));  // sqrt(sum_ij J_ij^2)
    // [jacobian]
    course::print_matrix(std::cout, t == 0 ? "p = softmax(z), z = (2, 1, 0, -1)" : "p = softmax(8 z)",
                       p, {.precision = 6});
    course::print_matrix(std::cout, "J", J, {.precision = 6});
    std::cout << fmt("  ||J||_F = %.6f\n", norm);
    norms[t] = norm;
    dump(t == 0 ? "J_z" : "J_8z", J);
  }
  dump("z", z);
  course::notice(std::cout, fmt("8 z is what leaving out 1/sqrt(64) does to scores of spread ~1. "
                              "||J||_F is %.0f times", norms[0] / norms[1]));
  std::cout << "     smaller: whatever the loss asks of these weights, the scores hardly hear "
               "it.\n";
  // The same for many rows of 64 standard-normal logits times a growing spread sigma.
  attn::Rng sat_rng(seed + 4);
  const Matrix G = attn::random_normal(sat_rng, 512, n_keys);  // [512 x 64], N(0, 1)
  std::cout << fmt("\n  512 rows of %d logits sigma * g, g ~ N(0, 1); means and medians over "
                   "the rows.\n  Uniform weights have ||J||_F = sqrt(63)/64 = %.4f.\n",
                   static_cast<int>(n_keys), std::sqrt(63.0) / 64.0);
  std::cout << "      sigma   largest  entropy   mean ||J||  median ||J||  2 (1 - largest)\n";
  MatrixD jacobian_table(13, 5);  // sigma, mean largest, mean entropy, mean and median ||J||_F
  course::Series jac_mean, jac_median, jac_bound;
  for (int k = -4; k <= 8; ++k) {  // sigma = 0.1 ... 100, four steps per decade
    const double sigma = std::pow(10.0, k / 4.0);
    const Matrix P = attn::softmax_rows(G * static_cast<float>(sigma));  // [512 x 64]
    const RowsFacts f = rows_facts(P);
    const double rows = static_cast<double>(P.rows()), top = f.largest / rows;
    const double jmean =
        std::accumulate(f.jacobian_norms.begin(), f.jacobian_norms.end(), 0.0) / rows;
    const double jmed = median(f.jacobian_norms);
    std::cout << fmt("  %9.4f    %.4f   %.4f     %.2e      %.2e         %.2e\n", sigma, top,
                     f.entropy / rows, jmean, jmed, 2.0 * (1.0 - top));
    jacobian_table.row(k + 4) << sigma, top, f.entropy / rows, jmean, jmed;
    // A log axis cannot show 0 (rows whose other weights all underflowed): leave those out.
    if (jmean > 0.0) jac_mean.x.push_back(sigma), jac_mean.y.push_back(jmean);
    if (jmed > 0.0) jac_median.x.push_back(sigma), jac_median.y.push_back(jmed);
    if (top < 1.0) jac_bound.x.push_back(sigma), jac_bound.y.push_back(2.0 * (1.0 - top));
  }
  course::notice(std::cout, "||J||_F peaks where a few logits compete, then falls with "
                          "1 - largest:");
  std::cout << "     ||J||_F <= 2 (1 - largest) in every row.\n";
  course::notice(std::cout, "the mean is held up by the few rows whose two best logits "
                          "nearly tie. The median");
  std::cout << fmt("     row has %.1e at sigma = 100 against %.2f at sigma = 1.\n",
                   jacobian_table(12, 4),
                   jacobian_table(4, 4));
  course::notice(std::cout, "attention rows without 1/sqrt(d_k) have sigma = |q| ~ sqrt(d_k);");
  std::cout << fmt("     at d_k = 1024 (sigma ~ 32) section 6 measured a median ||J||_F of "
                   "%.1e.\n", saturation_table(last, 3));
  jac_mean.label = "mean ||J||_F over 512 rows of sigma * g";
  jac_median.label = "median ||J||_F over the same rows";
  jac_bound.label = "2 (1 - mean largest weight), a bound on the mean";
  jac_bound.points = false;
  jac_bound.dashed = true;
  jac_dk.label = "median ||J||_F of section 6's rows softmax(Q K^T), d_k = 1..1024, at sigma = "
                 "sqrt(d_k)";
  plot.lines("04_jacobian_norm", {jac_mean, jac_median, jac_bound, jac_dk},
             {.title = "Softmax's gradient vanishes as its logits spread out (64 logits)",
              .xlabel = "sigma, the spread of the logits",
              .ylabel = "||J||_F = ||diag(p) - p p^T||_F",
              .logx = true,
              .logy = true});
  dump("jacobian_vs_sigma", jacobian_table);

  // ---- What to notice ---------------------------------------------------------------------------
  course::banner(std::cout, "What to notice");
  course::notice(std::cout, fmt("softmax(a) put %.6f on one of %s entries; softmax(b)'s "
                              "largest is %.4f.", fa.largest, sN.c_str(), fb.largest));
  course::notice(std::cout, fmt("exp overflows float above 88.72: naive softmax(a) had %d NaN, "
                              "stable none.", nan_a));
  course::notice(std::cout, "var(q . k) = d_k, so dividing by sqrt(d_k) keeps scores at spread 1 "
                          "for every d_k.");
  course::notice(std::cout, fmt("unscaled, rows of 64 weights turn one-hot: largest %.2f, entropy "
                              "%.2f at d_k = 1024.",
                              saturation_table(last, 1), saturation_table(last, 2)));
  course::notice(std::cout, fmt("their Jacobian diag(p) - p p^T is ~0 (median %.1e against %.2f "
                              "scaled): no gradient.",
                              saturation_table(last, 3), saturation_table(last, 6)));
  if (const std::string f = plot.summary(); !f.empty()) std::cout << "\n" << f;
  if (const std::string d = dump.summary(); !d.empty()) std::cout << "\n" << d << "\n";
  return 0;
}
