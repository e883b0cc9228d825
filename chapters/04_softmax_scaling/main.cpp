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
//                      [--no-plots] [--dump DIR] [--step]
#include "attn/core/random.hpp"
#include "attn/ops/softmax.hpp"
#include "attn/ops/softmax_stats.hpp"
#include "course/chapter.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using attn::Index;
using attn::Matrix;
using attn::MatrixD;

struct Knobs {
  Index samples = 20000;  // note 001's experiment, sections 1-3
  double std = 100.0;     // the standard deviation of those samples
  Index d_k = 64;         // the width of section 5's query and keys
  bool no_scale = false;  // section 5 computes softmax(q K^T), without 1/sqrt(d_k)
};

std::span<const float> row_of(const Matrix& m, Index r) {
  return {m.row(r).data(), static_cast<std::size_t>(m.cols())};
}

// A float as the overflow table shows it: "NaN", "inf", or three significant digits.
std::string shown(float v) {
  if (std::isnan(v)) return "NaN";
  return std::isinf(v) ? (v > 0 ? "inf" : "-inf") : fmt::format("{:.3g}", v);
}

// e^x as a factor in a notice: "66477", "3.3e+218", or "e^1503" beyond double's range.
std::string factor_of(double x) {
  const double f = std::exp(x);
  if (f < 1e6) return fmt::format("{:.0f}", f);
  return std::isfinite(f) ? fmt::format("{:.1e}", f) : fmt::format("e^{:.0f}", x);
}

void lesson(course::Chapter& ch, const Knobs& knob) {
  const bool scale = !knob.no_scale;
  const Index N = knob.samples;
  ch.intro("seed {}, samples {}, std {:g}, d_k {}, {}", ch.seed(), N, knob.std, knob.d_k,
           scale ? "scores / sqrt(d_k)" : "unscaled scores");

  ch.step("Note 001's samples: a ~ N(0, {0:g}^2), {1} of them, and b = a / {0:g}", knob.std, N);
  // One generator per experiment, so that a knob of one section never moves another's numbers.
  attn::Rng note_rng(ch.seed());
  // [samples]
  const Matrix a = attn::random_normal(note_rng, 1, N, 0.0, knob.std);  // [1 x N]
  const Matrix b = a / static_cast<float>(knob.std);                    // [1 x N]
  // [samples]
  ch.show("a", a, {.precision = 2});
  ch.show(fmt::format("b = a / {:g}", knob.std), b);
  MatrixD stats(2, 4);  // [2 x 4]: rows a and b; mean, std, min, max
  stats << attn::mean_std_min_max(a), attn::mean_std_min_max(b);
  ch.show("", stats, {.row_labels = {"a", "b"}, .col_labels = {"mean", "std", "min", "max"}});
  if (knob.std > 1.0) {
    ch.notice("b is a with the axis relabelled: the same histogram, {:g} times narrower.",
              knob.std);
  } else if (knob.std < 1.0) {  // dividing by less than 1 stretches
    ch.notice("b is a with the axis relabelled: the same histogram, {:g} times wider.",
              1.0 / knob.std);
  } else {
    ch.notice("b is a with the axis relabelled; with std 1 the two are the same numbers.");
  }
  // One histogram with two axes: b's is a's relabelled, which is the whole point (drawn as two
  // panels, they differed only in their tick labels).
  ch.plot().histograms(
      "04_histograms",
      {{.values = course::values_of(a),
        .title = fmt::format(
            "{} samples: one histogram, read as a (bottom) or as b = a / {:g} (top)", N, knob.std),
        .xlabel = fmt::format("a ~ N(0, {:g}^2)", knob.std),
        .top_per_x = 1.0 / knob.std,
        .top_label = fmt::format("b = a / {:g}", knob.std)}},
      {.width_px = 800});
  ch.dump("a", a);
  ch.dump("b", b);

  // [softmax]
  const Matrix p_a = attn::softmax_rows(a);  // [1 x N], sums to 1
  const Matrix p_b = attn::softmax_rows(b);  // [1 x N], sums to 1
  // [softmax]
  const attn::WeightStats fa = attn::weight_stats(row_of(p_a, 0));
  const attn::WeightStats fb = attn::weight_stats(row_of(p_b, 0));
  // The title is a claim about these numbers: a spike gives one entry most of the weight; flat
  // keeps more than half of the entries in play (exp(entropy) > N/2).
  const bool spike = fa.largest > 0.5;
  const bool flat = std::exp(fb.entropy) > 0.5 * static_cast<double>(N);
  ch.step("Softmax of each: softmax(a) {}, softmax(b) {}", spike ? "is a spike" : "is no spike",
          flat ? "stays flat" : "is not flat");
  const double n = N, ln_N = std::log(n);
  ch.say("            largest  at index  runner-up   entropy  exp(entropy)  above 1e-3");
  for (const auto& [name, f] : {std::pair{"softmax(a)", fa}, std::pair{"softmax(b)", fb}}) {
    ch.say("{}  {:8.6f}  {:8}  {:9.2e}  {:8.4f}  {:12.1f}  {:10}", name, f.largest, f.argmax,
           f.runner_up, f.entropy, std::exp(f.entropy), f.above);
  }
  ch.say("uniform     {:8.6f}    (all 1/N)           {:8.4f}  {:12.1f}", 1.0 / n, ln_N, n);
  ch.notice("entropy in nats: 0 for one-hot, ln N for uniform; exp(entropy) counts the keys in "
            "use.");
  // softmax(b)'s largest weight, written out: p_max = exp(b_max) / sum_j exp(b_j).
  double sum_exp_b = 0.0;
  for (const float b_j : row_of(b, 0)) sum_exp_b += std::exp(double{b_j});
  const double b_max = stats(1, 3), e_half = std::exp(0.5);
  const auto [a_1, a_2] = attn::two_largest(row_of(a, 0));
  const double gap = double{a_1} - double{a_2};
  ch.gap();
  ch.say("softmax(b): b_max = {:.4f} and the mean of exp(b_j) is {:.4f}, so the largest weight is\n"
         "  exp(b_max) / (N mean exp(b_j)) = {:.2f} / ({} x {:.4f}) = {:.6f}\n"
         "  E[exp(Z)] = e^(1/2) = {:.4f} for Z ~ N(0, 1):   exp(b_max) / (N e^(1/2)) = {:.6f}\n"
         "  and the entropy of many N(0, 1) logits is about ln N - 1/2 = {:.4f}",
         b_max, sum_exp_b / n, std::exp(b_max), N, sum_exp_b / n, std::exp(b_max) / sum_exp_b,
         e_half, std::exp(b_max) / (n * e_half), ln_N - 0.5);
  ch.say("softmax(a): the two largest a_j are {:.2f} and {:.2f}, so the runner-up gets\n"
         "  exp(-{:.2f}) = {:.1e} times the leader's weight.",
         a_1, a_2, gap, std::exp(-gap));
  ch.notice("softmax(a) gives {:.6f} to one entry of {}: a lead of {:.1f} in the logits is a "
            "factor of {} in the weights.",
            fa.largest, N, gap, factor_of(gap));
  ch.notice("softmax(b) keeps about {:.0f} entries in play; its largest weight is {:.4f}.",
            std::exp(fb.entropy), fb.largest);
  const Eigen::VectorXd index = Eigen::VectorXd::LinSpaced(N, 0.0, n - 1.0);  // [N]: j = 0, 1, ...
  ch.plot().lines("04_softmax_unscaled",
                  {course::curve(fmt::format("softmax(a), a ~ N(0, {:g}^2)", knob.std), index, p_a,
                                 {.points = false})},
                  {.title = "Softmax of a: almost all the weight on one entry",
                   .xlabel = "index j (from 0)",
                   .ylabel = "weight"});
  ch.plot().lines("04_softmax_scaled",
                  {course::curve(fmt::format("softmax(b), b = a / {:g}", knob.std), index, p_b,
                                 {.points = false}),
                   {.label = "1/N, every weight of a uniform softmax",
                    .x = {0.0, n - 1.0},
                    .y = {1.0 / n, 1.0 / n},
                    .points = false,
                    .dashed = true}},
                  {.title = fmt::format("Softmax of b = a / {:g}: every weight small", knob.std),
                   .xlabel = "index j (from 0)",
                   .ylabel = "weight"});
  ch.dump("softmax_a", p_a);
  ch.dump("softmax_b", p_b);

  ch.step("Overflow: the naive exp(z_j) / sum_k exp(z_k) in float");
  // [overflow]
  const Matrix naive_a = attn::naive_softmax_rows(a);  // [1 x N]: exp(a_j) overflows past 88.7
  const Matrix naive_b = attn::naive_softmax_rows(b);  // [1 x N]: |b_j| < 6, nothing overflows
  // [overflow]
  const double flt_max = std::numeric_limits<float>::max();
  const Index overflowing =
      std::ranges::count_if(row_of(a, 0), [](float x) { return std::isinf(std::exp(x)); });
  const Index nan_a = naive_a.array().isNaN().count();
  const Index zero_a = (naive_a.array() == 0.0f).count();
  ch.say("float's largest value is {:.4e} = exp({:.4f}).\n"
         "exp(a_j) is inf for {} of the {} a_j. The first four, and the largest:\n"
         "       j          a_j   exp(a_j) in float   naive weight   stable weight",
         flt_max, std::log(flt_max), overflowing, N);
  for (const Index j : {Index{0}, Index{1}, Index{2}, Index{3}, fa.argmax}) {
    ch.say("{:8}  {:11.4f}  {:>18}  {:>13}  {:>14}", j, a(0, j), shown(std::exp(a(0, j))),
           shown(naive_a(0, j)), shown(p_a(0, j)));
  }
  ch.say("naive  softmax(a): {} NaN, {} zeros, {} other weights\n"
         "stable softmax(a): {} not finite, sum of the weights {:.6f}\n"
         "naive  softmax(b): max |naive - stable| = {:.1e}, on weights up to {:.1e}",
         nan_a, zero_a, N - nan_a - zero_a, p_a.size() - p_a.array().isFinite().count(),
         p_a.cast<double>().sum(), attn::max_abs_diff(naive_b, p_b), fb.largest);
  if (overflowing > 0) {
    ch.notice("one exp(a_j) = inf makes the sum inf, and every weight inf / inf = NaN or x / inf "
              "= 0.");
  } else if (zero_a == N) {  // every term finite, their sum past float's largest value
    ch.notice("with std {:g} no a_j reaches 88.72, but the sum of the exp(a_j) does overflow: "
              "it is inf, and every weight x / inf = 0.",
              knob.std);
  } else if (nan_a == 0) {
    ch.notice("with std {:g} no a_j reaches 88.72, so even the naive formula survives; try "
              "--std 100.",
              knob.std);
  } else {  // every a_j below -103.3: each exp(a_j) underflows, and the sum is 0
    ch.notice("with std {:g} no a_j reaches 88.72, but every exp(a_j) underflows to 0: the naive "
              "formula divides 0 by 0, which is NaN.",
              knob.std);
  }
  // The stable softmax never makes a NaN or an inf; the closing facts say so.
  if (!p_a.array().isFinite().all()) {
    throw std::runtime_error("the stable softmax of a has entries that are not finite");
  }
  ch.notice("the stable softmax computes exp(a_j - {:.2f}): no exponent above 0, so no overflow. "
            "{} of its weights underflow to exactly 0: their true values are below 1.4e-45.",
            stats(0, 3), fa.zeros);
  ch.dump("naive_softmax_a", naive_a);
  ch.dump("naive_softmax_b", naive_b);

  ch.step("Why sqrt(d_k): var(q . k) = d_k for unit-variance q and k");
  // q . k = sum_i q_i k_i is a sum of d_k independent terms, each of mean E[q_i] E[k_i] = 0 and
  // variance E[q_i^2] E[k_i^2] = 1, and variances of independent terms add: var(q . k) = d_k.
  // The mean is known to be 0, so the variance is estimated as the mean of (q . k)^2 over N
  // pairs; that estimate has standard deviation sqrt((2 d_k^2 + 6 d_k) / N) (see the page).
  constexpr Index n_pairs = 4000;
  const std::vector<Index> widths = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};  // d_k
  attn::Rng dot_rng = ch.rng("dot products");
  MatrixD variance(std::ssize(widths), 4);  // [11 x 4]: d_k, N, mean of q.k, mean of (q.k)^2
  ch.say("{} independent pairs (q, k) per d_k, every component ~ N(0, 1); var = mean of (q.k)^2:\n"
         "  d_k   mean(q.k)    var(q.k)   var / d_k   its expected sd",
         n_pairs);
  for (Index w = 0; w < std::ssize(widths); ++w) {
    const Index d = widths[w];
    // [variance]
    const Matrix q = attn::random_normal(dot_rng, n_pairs, d);       // [N x d_k], one q per row
    const Matrix k = attn::random_normal(dot_rng, n_pairs, d);       // [N x d_k], one k per row
    const Eigen::VectorXf dots = q.cwiseProduct(k).rowwise().sum();  // [N], q_i . k_i
    // [variance]
    const Eigen::ArrayXd x = dots.cast<double>().array();  // [N]
    const double mean = x.mean(), var = x.square().mean();
    ch.say("{:5}  {:10.4f}  {:10.3f}  {:10.4f}   {:.4f}", d, mean, var, var / d,
           std::sqrt((2.0 + 6.0 / d) / n_pairs));
    variance.row(w) << d, n_pairs, mean, var;
  }
  ch.notice("var(q.k) grows like d_k, and var(q.k / sqrt(d_k)) = var(q.k) / d_k stays at 1.");
  ch.notice("unscaled, scores spread like sqrt(d_k): 32 at d_k = 1024. Note 001's a is that, at "
            "100.");
  ch.plot().lines(
      "04_variance_vs_dk",
      {course::curve("measured var(q . k)", variance.col(0), variance.col(3)),
       course::curve("var = d_k", {1.0, 1024.0}, {1.0, 1024.0}, {.points = false, .dashed = true}),
       course::curve("measured var(q . k / sqrt(d_k))", variance.col(0),
                     variance.col(3).cwiseQuotient(variance.col(0)))},
      {.title =
           fmt::format("The variance of a dot product grows with d_k ({} pairs per d_k)", n_pairs),
       .xlabel = "d_k",
       .ylabel = "variance",
       .logx = true,
       .logy = true});
  ch.dump("variance_vs_dk", variance);

  ch.step("One query against 8 keys at d_k = {}, {}", knob.d_k,
          scale ? "scaled by 1/sqrt(d_k)" : "unscaled (--no-scale)");
  const Index d_k = knob.d_k;
  attn::Rng row_rng = ch.rng("one row");
  const Matrix q = attn::random_normal(row_rng, 1, d_k);  // [1 x d_k]
  const Matrix K = attn::random_normal(row_rng, 8, d_k);  // [8 x d_k], one key per row
  // [one_row]
  const float factor = scale ? 1.0f / std::sqrt(static_cast<float>(d_k)) : 1.0f;
  const Matrix scores = (q * K.transpose()) * factor;  // [1 x 8] = [1 x d_k] [d_k x 8]
  const Matrix weights = attn::softmax_rows(scores);   // [1 x 8], sums to 1
  // [one_row]
  ch.say("|q| = {:.2f}, sqrt(d_k) = {:.2f}. For a fixed q, q . k_j ~ N(0, |q|^2) for every key j.",
         q.norm(), std::sqrt(d_k));
  const std::vector<std::string> keys = course::labels("k_", K.rows());
  ch.show(scale ? fmt::format("scores = q K^T / sqrt({})", d_k) : "scores = q K^T", scores,
          {.precision = 2, .col_labels = keys});
  ch.show("weights = softmax(scores)", weights, {.col_labels = keys});
  const attn::WeightStats fr = attn::weight_stats(row_of(weights, 0));
  ch.say("largest weight {:.4f}, entropy {:.4f} of ln 8 = {:.4f}, ||J||_F {:.2e} (section 7)",
         fr.largest, fr.entropy, std::log(8.0), fr.jacobian_norm);
  // For this q the scores q . k_j / sqrt(d_k) have standard deviation |q| / sqrt(d_k) over the
  // keys: about 1 scaled and sqrt(d_k) unscaled on average over q, but this q's own |q| says.
  const double spread = q.norm() * factor;
  ch.notice("{}, the scores spread by about {}: the best key takes {:.2f} and {} of the 8 keys "
            "get more than 0.001.",
            scale ? "scaled" : "unscaled",
            spread >= 10.0 ? fmt::format("{:.0f}", spread) : fmt::format("{:.2g}", spread),
            fr.largest, fr.above);
  ch.dump("q", q);
  ch.dump("K", K);
  ch.dump("scores", scores);
  ch.dump("weights", weights);

  ch.step("As d_k grows: the largest weight and the entropy of a row");
  constexpr Index n_keys = 64, n_queries = 64, n_batches = 8, rows_per_dk = n_queries * n_batches;
  const double ln_keys = std::log(n_keys);
  attn::Rng sweep_rng = ch.rng("saturation sweep");
  // d_k, then mean largest, mean entropy, median ||J||_F unscaled, and the same scaled.
  MatrixD saturation(std::ssize(widths), 7);  // [11 x 7]
  ch.prose("rows of {} weights, {} rows per d_k: the mean largest weight, the mean entropy, the "
           "median ||J||_F (section 7). Uniform: {:.4f}, ln {} = {:.4f}.",
           n_keys, rows_per_dk, 1.0 / n_keys, n_keys, ln_keys);
  ch.say("      ------- softmax(Q K^T) -------    --- softmax(Q K^T / sqrt(d_k)) ---\n"
         "  d_k   largest  entropy  median ||J||    largest  entropy  median ||J||");
  for (Index w = 0; w < std::ssize(widths); ++w) {
    const Index d = widths[w];
    const float inv_sqrt_dk = 1.0f / std::sqrt(static_cast<float>(d));
    attn::WeightRowsTally unscaled, scaled;
    for (Index batch = 0; batch < n_batches; ++batch) {
      // [sweep]
      const Matrix Q = attn::random_normal(sweep_rng, n_queries, d);  // [64 x d_k]
      const Matrix Kb = attn::random_normal(sweep_rng, n_keys, d);    // [64 x d_k]
      const Matrix S = Q * Kb.transpose();                            // [64 x 64] q_i . k_j
      const Matrix P_unscaled = attn::softmax_rows(S);                // [64 x 64]
      const Matrix P_scaled = attn::softmax_rows(S * inv_sqrt_dk);    // [64 x 64]
      // [sweep]
      unscaled.add(P_unscaled);
      scaled.add(P_scaled);
    }
    saturation.row(w) << d, unscaled.mean_largest(), unscaled.mean_entropy(),
        unscaled.median_jacobian_norm(), scaled.mean_largest(), scaled.mean_entropy(),
        scaled.median_jacobian_norm();
    const auto r = saturation.row(w);
    ch.say("{:5}    {:.4f}   {:.4f}      {:.2e}     {:.4f}   {:.4f}      {:.2e}", d, r(1), r(2),
           r(3), r(4), r(5), r(6));
  }
  const Index last = std::ssize(widths) - 1;  // d_k = 1024
  ch.notice("unscaled, the largest weight climbs from {:.2f} to {:.2f} and the entropy falls from "
            "{:.2f} to {:.2f}: the rows turn one-hot as d_k grows.",
            saturation(0, 1), saturation(last, 1), saturation(0, 2), saturation(last, 2));
  ch.notice("scaled, they stay near {:.2f} and {:.2f} at every d_k (ln {} - 1/2 = {:.2f}).",
            saturation(last, 4), saturation(last, 5), n_keys, ln_keys - 0.5);
  const Eigen::VectorXd dks = saturation.col(0);  // [11]: the d_k of each row
  ch.plot().lines(
      "04_saturation_vs_dk",
      {course::curve("largest weight, softmax(Q K^T)", dks, saturation.col(1)),
       course::curve("entropy / ln 64, softmax(Q K^T)", dks, saturation.col(2) / ln_keys,
                     {.dashed = true}),
       course::curve("largest weight, softmax(Q K^T / sqrt(d_k))", dks, saturation.col(4)),
       course::curve("entropy / ln 64, softmax(Q K^T / sqrt(d_k))", dks,
                     saturation.col(5) / ln_keys, {.dashed = true})},
      {.title = "Rows of 64 weights: without 1/sqrt(d_k) they turn one-hot",
       .xlabel = "d_k",
       .ylabel = "mean over 512 rows",
       .logx = true});
  ch.dump("saturation_vs_dk", saturation);

  ch.step("Saturation stops learning: the Jacobian J = diag(p) - p p^T");
  // dp_i / dz_j = p_i (delta_ij - p_j). The backward pass multiplies the gradient arriving at
  // the weights by J (symmetric): dL/dz = J dL/dp. Near one-hot, every entry of J is near 0.
  Matrix z(1, 4);  // [1 x 4]
  z << 2.0f, 1.0f, 0.0f, -1.0f;
  const std::vector<std::string> p_i = course::labels("p_", 4), z_j = course::labels("z_", 4);
  double norms[2] = {};
  for (int t = 0; t < 2; ++t) {
    const float s = t == 0 ? 1.0f : 8.0f;
    // [jacobian]
    const Matrix p = attn::softmax_rows(z * s);                     // [1 x 4]
    const MatrixD J = attn::softmax_jacobian(row_of(p, 0));         // [4 x 4] diag(p) - p p^T
    const double norm = attn::softmax_jacobian_norm(row_of(p, 0));  // sqrt(sum_ij J_ij^2)
    // [jacobian]
    ch.show(t == 0 ? "p = softmax(z), z = (2, 1, 0, -1)" : "p = softmax(8 z)", p,
            {.precision = 6, .col_labels = p_i});
    ch.show("J (J_ij = dp_i / dz_j)", J, {.precision = 6, .row_labels = p_i, .col_labels = z_j});
    ch.say("||J||_F = {:.6f}", norm);
    norms[t] = norm;
    ch.dump(t == 0 ? "J_z" : "J_8z", J);
  }
  ch.dump("z", z);
  ch.notice("8 z is what leaving out 1/sqrt(64) does to scores of spread ~1. ||J||_F is {:.0f} "
            "times smaller: whatever the loss asks of these weights, the scores hardly hear it.",
            norms[0] / norms[1]);
  // The same for many rows of 64 standard-normal logits times a growing spread sigma.
  attn::Rng sat_rng = ch.rng("logit spread");
  const Matrix G = attn::random_normal(sat_rng, 512, n_keys);  // [512 x 64], N(0, 1)
  ch.gap();
  ch.say("512 rows of {} logits sigma * g, g ~ N(0, 1); means and medians over the rows.\n"
         "Uniform weights have ||J||_F = sqrt(63)/64 = {:.4f}.\n"
         "    sigma   largest  entropy   mean ||J||  median ||J||  2 (1 - largest)",
         n_keys, std::sqrt(63.0) / 64.0);
  MatrixD jacobian(13, 5);  // [13 x 5]: sigma, mean largest, mean entropy, mean, median ||J||_F
  for (int e = -4; e <= 8; ++e) {  // sigma = 10^(e/4) = 0.1 ... 100, four steps per decade
    const double sigma = std::pow(10.0, e / 4.0);
    const Matrix P = attn::softmax_rows(G * static_cast<float>(sigma));  // [512 x 64]
    const attn::WeightRowsTally rows(P);
    jacobian.row(e + 4) << sigma, rows.mean_largest(), rows.mean_entropy(),
        rows.mean_jacobian_norm(), rows.median_jacobian_norm();
    const auto r = jacobian.row(e + 4);
    ch.say("{:9.4f}    {:.4f}   {:.4f}     {:.2e}      {:.2e}         {:.2e}", sigma, r(1), r(2),
           r(3), r(4), 2.0 * (1.0 - r(1)));
  }
  ch.notice("||J||_F <= 2 (1 - largest) in every row, so it peaks where a few logits compete and "
            "then falls with 1 - largest.");
  ch.notice("the mean is held up by the few rows whose two best logits nearly tie. The median row "
            "has {:.1e} at sigma = 100 against {:.2f} at sigma = 1.",
            jacobian(12, 4), jacobian(4, 4));
  ch.notice("attention rows without 1/sqrt(d_k) have sigma = |q| ~ sqrt(d_k); at d_k = 1024 "
            "(sigma ~ 32) section 6 measured a median ||J||_F of {:.1e}.",
            saturation(last, 3));
  const Eigen::VectorXd sigmas = jacobian.col(0);
  ch.plot().lines(
      "04_jacobian_norm",
      {course::curve_for_log_y("mean ||J||_F over 512 rows of sigma * g", sigmas, jacobian.col(3)),
       course::curve_for_log_y("median ||J||_F over the same rows", sigmas, jacobian.col(4)),
       course::curve_for_log_y("2 (1 - mean largest weight), a bound on the mean", sigmas,
                               2.0 * (1.0 - jacobian.col(1).array()),
                               {.points = false, .dashed = true}),
       // Markers only: they are a second measurement of the median curve, and fall on it.
       course::curve_for_log_y("median ||J||_F of step 6's rows softmax(Q K^T), d_k = 1..1024, "
                               "at sigma = sqrt(d_k): on the median's curve",
                               saturation.col(0).cwiseSqrt(), saturation.col(3), {.line = false})},
      {.title = "Softmax's gradient vanishes as its logits spread out (64 logits)",
       .xlabel = "sigma, the spread of the logits",
       .ylabel = "||J||_F = ||diag(p) - p p^T||_F",
       .logx = true,
       .logy = true});
  ch.dump("jacobian_vs_sigma", jacobian);

  ch.finish(
      {fmt::format("softmax(a) put {:.6f} on one of {} entries; softmax(b)'s largest is {:.4f}.",
                   fa.largest, N, fb.largest),
       fmt::format("exp overflows float above 88.72: naive softmax(a) had {} NaN, stable none.",
                   nan_a),
       "var(q . k) = d_k, so dividing by sqrt(d_k) keeps scores at spread 1 for every d_k.",
       fmt::format("unscaled, rows of 64 weights turn one-hot: largest {:.2f}, entropy {:.2f} at "
                   "d_k = 1024.",
                   saturation(last, 1), saturation(last, 2)),
       fmt::format("their Jacobian diag(p) - p p^T is ~0 (median {:.1e} against {:.2f} scaled): "
                   "no gradient.",
                   saturation(last, 3), saturation(last, 6))},
      {{"--std 22", "no exp(a_j) overflows: the naive formula survives"},
       {"--std 23", "one exp(a_j) = inf: the naive row is NaN and zeros"},
       {"--no-scale --d-k 1024", "unscaled scores spread by ~32: one key takes most"},
       {"--samples 200000", "smaller largest weight, entropy still ~ ln N - 1/2"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("04_softmax_scaling", "Softmax and scaling", 2026);
  ch.cites("notes 001, 003 and 004");
  Knobs knob;
  ch.option("--samples", knob.samples, "samples in note 001's experiment (sections 1-3)")
      .range(10, 200000);
  ch.option("--std", knob.std, "standard deviation of those samples").range(0.01, 1000.0);
  ch.option("--d-k", knob.d_k, "width of the query and keys of section 5's attention row")
      .range(1, 16384);
  ch.flag("--no-scale", knob.no_scale,
          "section 5 computes softmax(q K^T) instead of softmax(q K^T / sqrt(d_k))");
  return ch.run(argc, argv, [&] { lesson(ch, knob); });
}
