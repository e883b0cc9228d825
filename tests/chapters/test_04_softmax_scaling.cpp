// Chapter 04 as a program: note 001's experiment checked against double-precision references
// computed here from the dumped samples, the overflow of the naive softmax entry by entry,
// var(q . k) = d_k within a tolerance derived from the sample count (in the chapter's dump and
// in an independent simulation here), saturation as d_k grows, the Jacobian's dumps, identical
// bytes on every run, and usage errors.
#include "attn/core/random.hpp"
#include "chapter_run.hpp"
#include "course/plot.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace test_04_softmax_scaling {

namespace fs = std::filesystem;
using attn::MatrixD;
using attn_test::contains;
using attn_test::load;
using attn_test::Output;

const attn_test::ChapterRun chapter("04_softmax_scaling");

// The stable softmax of one row, in double: the reference the float results are held to.
std::vector<double> softmax_d(const MatrixD& z) {
  const double m = z.maxCoeff();
  std::vector<double> p(static_cast<std::size_t>(z.size()));
  double sum = 0.0;
  for (Eigen::Index j = 0; j < z.size(); ++j) {
    sum += p[static_cast<std::size_t>(j)] = std::exp(z(j) - m);
  }
  for (double& x : p) x /= sum;
  return p;
}

// Float softmax of N entries sums N exponentials in float; recursive summation is off by at
// most N u (u = 2^-24) relative in the worst case, which moves every weight by the same factor.
// (Typical errors are ~sqrt(N) u, a hundred times smaller; this is the bound, not the guess.)
double worst_sum_error(double n) { return n * std::ldexp(1.0, -24); }

class Chapter04Dump : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(chapter.scratch("dump"));
    const Output r = chapter.run("--no-plots --dump '" + (*dir_ / "d").string() + "'", *dir_);
    out_ = new std::string(r.out);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete out_;
  }
  static MatrixD get(const std::string& name) { return load(*dir_ / "d", name); }
  static const std::string& out() { return *out_; }

 private:
  static fs::path* dir_;
  static std::string* out_;
};
fs::path* Chapter04Dump::dir_ = nullptr;
std::string* Chapter04Dump::out_ = nullptr;

TEST_F(Chapter04Dump, NoteSamplesHaveTheNotesDistribution) {
  const MatrixD a = get("a"), b = get("b");
  ASSERT_EQ(a.rows(), 1);
  ASSERT_EQ(a.cols(), 20000);
  const double n = 20000.0;
  // b = a / 100 in float, which the test can redo exactly.
  for (Eigen::Index j = 0; j < a.cols(); ++j) {
    ASSERT_EQ(static_cast<float>(b(j)), static_cast<float>(a(j)) / 100.0f) << j;
  }
  // N(0, 100^2): the sample mean has sd 100 / sqrt(N) = 0.71 and the sample std has sd
  // 100 / sqrt(2N) = 0.50 (normal data). Five of each: wrong by that much only if broken.
  const double mean = a.mean();
  const double std = std::sqrt((a.array() - mean).square().mean());
  EXPECT_NEAR(mean, 0.0, 5.0 * 100.0 / std::sqrt(n));
  EXPECT_NEAR(std, 100.0, 5.0 * 100.0 / std::sqrt(2.0 * n));
  // The printed 1/N of the uniform row and ln N - 1/2.
  EXPECT_TRUE(contains(out(), "uniform     0.000050"));
  EXPECT_TRUE(contains(out(), fmt::format("ln N - 1/2 = {:.4f}", std::log(n) - 0.5)));
}

TEST_F(Chapter04Dump, SoftmaxOfBothMatchesADoubleReference) {
  for (const char* name : {"a", "b"}) {
    const MatrixD z = get(name), p = get(std::string("softmax_") + name);
    const std::vector<double> ref = softmax_d(z);
    // Per weight: exp and the product with 1/sum add a few ulps (~3e-7 relative) to the sum's
    // error; weights that underflow in float (< 1.4e-45) are compared absolutely.
    const double rel = worst_sum_error(20000.0) + 1e-6;
    for (Eigen::Index j = 0; j < z.size(); ++j) {
      const double r = ref[static_cast<std::size_t>(j)];
      ASSERT_NEAR(p(j), r, rel * r + 1e-44) << name << " " << j;
    }
  }
}

TEST_F(Chapter04Dump, ScaledLargestWeightIsFarBelowUnscaled) {
  const MatrixD a = get("a"), b = get("b");
  const double p_max_a = get("softmax_a").maxCoeff(), p_max_b = get("softmax_b").maxCoeff();
  // softmax(b): p_max = exp(b_max) / (N mean exp(b_j)), and mean exp(b_j) >= exp(mean b_j)
  // (Jensen), so p_max <= exp(b_max - mean b) / N. With b_max < 5.5 (20,000 standard normals
  // exceed 5.5 with probability 20000 * 1.9e-8 = 4e-4) that is below exp(5.5) / 20000 = 0.012.
  const double bound_b = std::exp(b.maxCoeff() - b.mean()) / 20000.0;
  EXPECT_LE(p_max_b, bound_b * (1.0 + worst_sum_error(20000.0)));
  EXPECT_LT(b.maxCoeff(), 5.5);
  EXPECT_LT(p_max_b, 0.012);
  // softmax(a): p_max = 1 / (1 + sum_{j != max} exp(a_j - a_max)), recomputed here in double.
  // With std 100 the two largest of 20,000 samples are ~23 apart on average (a third of the
  // time less than 10), and everything else is further behind, so p_max is close to 1 unless
  // the top two nearly tie: below 1/2 needs a gap under ~0.7, a few percent of seeds.
  const double a_max = a.maxCoeff();
  double rest = 0.0;
  for (Eigen::Index j = 0; j < a.size(); ++j) {
    if (a(j) != a_max) rest += std::exp(a(j) - a_max);
  }
  const double ref_a = 1.0 / (1.0 + rest);
  EXPECT_NEAR(p_max_a, ref_a, worst_sum_error(20000.0) * ref_a);
  EXPECT_GT(ref_a, 0.5);
  // Far below: more than 40 times (0.5 / 0.012).
  EXPECT_LT(40.0 * p_max_b, p_max_a);
}

TEST_F(Chapter04Dump, EntropyOfTheScaledSoftmaxIsLnNMinusOneHalf) {
  // For many N(0, 1) logits, H = ln sum e^b - sum p b -> ln N + 1/2 - 1: E[e^Z] = e^(1/2) and
  // E[Z e^Z] / E[e^Z] = 1. Its spread over samples (delta method): H = ln N + ln s - t / s with
  // s, t the means of e^b and b e^b, so var H ~ var(2 e^Z - Z e^Z) / (N e) = (e^2 - e) / (N e),
  // sd = sqrt((e - 1) / N) = 0.0093 for N = 20,000. Five of those: 0.05.
  const MatrixD p = get("softmax_b");
  double h = 0.0;
  for (Eigen::Index j = 0; j < p.size(); ++j) {
    if (p(j) > 0.0) h -= p(j) * std::log(p(j));
  }
  EXPECT_NEAR(h, std::log(20000.0) - 0.5, 0.05);
  // softmax(a) is nearly one-hot: its entropy is far below ln 2 (two equal weights).
  double ha = 0.0;
  const MatrixD pa = get("softmax_a");
  for (Eigen::Index j = 0; j < pa.size(); ++j) {
    if (pa(j) > 0.0) ha -= pa(j) * std::log(pa(j));
  }
  EXPECT_LT(ha, 0.1 * std::log(2.0));
}

TEST_F(Chapter04Dump, NaiveSoftmaxOverflowsEntryByEntryAndStableDoesNot) {
  const MatrixD a = get("a"), naive = get("naive_softmax_a"), stable = get("softmax_a");
  // exp(a_j) in float is inf above ln(FLT_MAX) = 88.72; one inf makes the float sum inf, and
  // IEEE arithmetic then gives inf / inf = NaN for those entries and finite / inf = 0 for the
  // rest. With std 100, P(a_j > 88.72) = 0.19: thousands of the 20,000 overflow.
  int overflowing = 0;
  for (Eigen::Index j = 0; j < a.size(); ++j) {
    const bool inf = std::isinf(std::exp(static_cast<float>(a(j))));
    overflowing += inf;
    if (inf) {
      EXPECT_TRUE(std::isnan(naive(j))) << j;
    } else {
      EXPECT_EQ(naive(j), 0.0) << j;
    }
  }
  EXPECT_GT(overflowing, 1000);
  EXPECT_TRUE(stable.allFinite());
  // 20,000 weights each within the worst-case relative error of its sum: the sum is 1 to that.
  EXPECT_NEAR(stable.sum(), 1.0, 2.0 * worst_sum_error(20000.0));
  EXPECT_TRUE(contains(out(), fmt::format("exp(a_j) is inf for {} of the 20000 a_j", overflowing)));
  // Where the naive formula is safe (|b_j| < 6), it equals the stable one: both are within the
  // worst-case sum error of the same exact weights, so within twice that of each other.
  const MatrixD nb = get("naive_softmax_b"), sb = get("softmax_b");
  ASSERT_TRUE(nb.allFinite());
  for (Eigen::Index j = 0; j < nb.size(); ++j) {
    ASSERT_NEAR(nb(j), sb(j), 2.0 * (worst_sum_error(20000.0) + 1e-6) * sb(j)) << j;
  }
}

TEST_F(Chapter04Dump, DotProductVarianceIsDkWithinItsSamplingError) {
  // Rows: d_k, N, mean of q.k, mean of (q.k)^2. With q, k ~ N(0, I), x = q.k is a sum of d
  // independent terms q_i k_i with E = 0, E[(q_i k_i)^2] = 1, E[(q_i k_i)^4] = 3 * 3 = 9, so
  //   E[x^2] = d,   E[x^4] = d * 9 + 3 d (d - 1) * 1 = 3 d^2 + 6 d,   var(x^2) = 2 d^2 + 6 d.
  // The mean of x^2 over N pairs has sd sqrt((2 d^2 + 6 d) / N), and mean/d has sd
  // sqrt((2 + 6/d) / N); the mean of x has sd sqrt(d / N). Five sd each: a correct run fails
  // with probability ~1e-6 per entry, a wrong variance (d^2, d/2, no sqrt) fails by far.
  const MatrixD t = get("variance_vs_dk");
  ASSERT_EQ(t.rows(), 11);
  ASSERT_EQ(t.cols(), 4);
  for (Eigen::Index r = 0; r < t.rows(); ++r) {
    const double d = t(r, 0), n = t(r, 1);
    EXPECT_EQ(d, std::ldexp(1.0, static_cast<int>(r)));  // 1, 2, 4, ..., 1024
    EXPECT_NEAR(t(r, 3) / d, 1.0, 5.0 * std::sqrt((2.0 + 6.0 / d) / n)) << "d_k " << d;
    EXPECT_NEAR(t(r, 2), 0.0, 5.0 * std::sqrt(d / n)) << "d_k " << d;
    // The printed "expected sd" column is the same formula.
    EXPECT_TRUE(contains(out(), fmt::format("   {:.4f}\n", std::sqrt((2.0 + 6.0 / d) / n)))) << d;
  }
}

TEST(Chapter04, DotProductVarianceIsDkInAnIndependentSimulation) {
  // The same identity without the chapter: 4000 pairs per d_k, drawn and summed in double here.
  // Tolerance as above: five standard deviations of the estimate, sqrt((2 + 6/d) / N).
  attn::Rng rng(424242);
  const int n = 4000;
  for (int d : {1, 8, 64, 512}) {
    double sum_sq = 0.0;
    for (int s = 0; s < n; ++s) {
      double x = 0.0;
      for (int i = 0; i < d; ++i) x += rng.normal() * rng.normal();
      sum_sq += x * x;
    }
    EXPECT_NEAR(sum_sq / n / d, 1.0, 5.0 * std::sqrt((2.0 + 6.0 / d) / n)) << "d_k " << d;
  }
}

TEST_F(Chapter04Dump, UnscaledRowsSaturateAndScaledRowsDoNot) {
  // Rows: d_k, then mean largest weight, mean entropy, median ||J||_F, unscaled then scaled;
  // 512 rows of 64 weights per d_k. For a fixed q the scores q.k_j are N(0, |q|^2) with
  // |q| ~ sqrt(d_k), so scaled rows are softmaxes of ~N(0, 1) logits at every d_k, and
  // unscaled ones of N(0, d_k) logits. Reference values (10^5 simulated rows of 64 normal
  // logits): spread 1 gives mean largest 0.107 (sd over rows 0.045), entropy 3.685 (sd 0.13),
  // median ||J||_F 0.18; spread 32 gives largest 0.950 (sd 0.11), entropy 0.12 (sd 0.24),
  // median ||J||_F 2.4e-4. A mean over 512 rows has sd 0.005 for the largest weight and 0.011
  // for the entropy even when the 8 batches' shared keys cut the independent rows to a tenth;
  // the bounds below are 10 of those or more.
  const MatrixD t = get("saturation_vs_dk");
  ASSERT_EQ(t.rows(), 11);
  ASSERT_EQ(t.cols(), 7);
  // d_k = 1: 1/sqrt(1) = 1, the two softmaxes are of identical scores.
  for (Eigen::Index c = 1; c <= 3; ++c) EXPECT_EQ(t(0, c), t(0, c + 3));
  for (Eigen::Index r = 0; r < t.rows(); ++r) {
    EXPECT_NEAR(t(r, 4), 0.107, 0.05) << "d_k " << t(r, 0);  // scaled: largest
    EXPECT_NEAR(t(r, 5), 3.685, 0.15) << "d_k " << t(r, 0);  // scaled: entropy
    EXPECT_GT(t(r, 6), 0.1) << "d_k " << t(r, 0);            // scaled: median ||J||_F
    EXPECT_LE(t(r, 5), std::log(64.0));                      // no row beats uniform
  }
  const Eigen::Index last = t.rows() - 1;  // d_k = 1024
  EXPECT_GT(t(last, 1), 0.85);
  EXPECT_LT(t(last, 2), 0.4);
  EXPECT_LT(t(last, 3), 1e-2);
  EXPECT_GT(t(last, 1), 5.0 * t(last, 4));  // the scaled largest weight is far below
}

TEST_F(Chapter04Dump, JacobianDumpsAreDiagPMinusPPTransposed) {
  const MatrixD z = get("z");
  ASSERT_EQ(z.cols(), 4);
  for (const auto& [name, s] : {std::pair{"J_z", 1.0}, std::pair{"J_8z", 8.0}}) {
    const std::vector<double> p = softmax_d(z * s);
    const MatrixD J = get(name);
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        const double expected = (i == j ? p[i] : 0.0) - p[i] * p[j];
        // The chapter's p is float (relative error ~3e-7 after exp and normalisation); an
        // entry p_i (1 - p_i) or p_i p_j <= 1/4 moves by < 2e-7.
        EXPECT_NEAR(J(i, j), expected, 2e-7) << name << " " << i << "," << j;
      }
    }
  }
  // ||J||_F <= 2 (1 - p_max): for 8 z, 1 - p_max = (e^-8 + e^-16 + e^-24) / (1 + ...) = 3.4e-4,
  // so ||J_8z||_F <= 6.8e-4, while ||J_z||_F >= p_max (1 - p_max) = 0.64 * 0.36 = 0.23.
  EXPECT_LT(get("J_8z").norm(), 6.8e-4);
  EXPECT_GT(get("J_z").norm(), 0.22);
}

TEST_F(Chapter04Dump, JacobianNormAgainstTheSpreadOfTheLogits) {
  // Rows: sigma, mean largest, mean entropy, mean ||J||_F, median ||J||_F; 512 rows of 64.
  const MatrixD t = get("jacobian_vs_sigma");
  ASSERT_EQ(t.rows(), 13);
  EXPECT_NEAR(t(0, 0), 0.1, 1e-12);
  EXPECT_NEAR(t(12, 0), 100.0, 1e-9);
  // sigma = 0.1: nearly uniform weights, ||J||_F = sqrt(63)/64 to second order in sigma (the
  // first-order change vanishes by symmetry): a simulation gives 0.1246 against 0.1240, so 2%.
  EXPECT_NEAR(t(0, 3), std::sqrt(63.0) / 64.0, 0.02 * std::sqrt(63.0) / 64.0);
  EXPECT_NEAR(t(0, 2), std::log(64.0), 0.01);
  for (Eigen::Index r = 0; r < t.rows(); ++r) {
    // Averaging ||J||_F <= 2 (1 - p_max) over the rows bounds the mean by the mean largest.
    EXPECT_LE(t(r, 3), 2.0 * (1.0 - t(r, 1)) + 1e-12) << "sigma " << t(r, 0);
  }
  // sigma = 100: the typical row has its runner-up ~30 below the top, e^-30 ~ 1e-13.
  EXPECT_LT(t(12, 4), 1e-6);
  EXPECT_GT(t(12, 1), 0.95);
}

TEST(Chapter04, OneRowScoresAreScaledDotProducts) {
  const fs::path dir = chapter.scratch("row");
  const fs::path on = dir / "on", off = dir / "off";
  const Output r1 = chapter.run("--no-plots --d-k 256 --seed 7 --dump '" + on.string() + "'", dir);
  const Output r2 =
      chapter.run("--no-plots --d-k 256 --seed 7 --no-scale --dump '" + off.string() + "'", dir);
  ASSERT_EQ(r1.code, 0) << r1.err;
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_TRUE(contains(r1.out, "5. One query against 8 keys at d_k = 256, scaled"));
  EXPECT_TRUE(contains(r2.out, "5. One query against 8 keys at d_k = 256, unscaled"));
  const MatrixD q = load(on, "q"), K = load(on, "K");
  ASSERT_EQ(q.cols(), 256);
  ASSERT_EQ(K.rows(), 8);
  EXPECT_EQ(q, load(off, "q"));  // the same seed draws the same row
  const MatrixD dots = q * K.transpose();
  // Float dot products of 256 terms: the rounding is at most 256 * 2^-24 * sum |q_i k_i|, and
  // sum |q_i k_i| ~ 256 * E|q_i k_i| = 256 * 2/pi = 163, so ~2.5e-3 in the worst case (~1e-5
  // typically). 3e-3 on the unscaled scores, a sixteenth of it after dividing by sqrt(256).
  EXPECT_LT((load(off, "scores") - dots).cwiseAbs().maxCoeff(), 3e-3);
  EXPECT_LT((load(on, "scores") - dots / 16.0).cwiseAbs().maxCoeff(), 3e-3 / 16.0);
  for (const fs::path& d : {on, off}) {
    const std::vector<double> p = softmax_d(load(d, "scores"));
    const MatrixD w = load(d, "weights");
    // Softmax of 8 floats: a few ulps per weight.
    for (int j = 0; j < 8; ++j) EXPECT_NEAR(w(j), p[static_cast<std::size_t>(j)], 1e-6);
  }
  fs::remove_all(dir);
}

TEST(Chapter04, SmallStdDoesNotOverflow) {
  const fs::path dir = chapter.scratch("small_std");
  const Output r = chapter.run("--no-plots --std 1 --samples 1000", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  // |a_j| < 6 for 1000 standard normals: exp never reaches float's limit at 88.72.
  EXPECT_TRUE(contains(r.out, "exp(a_j) is inf for 0 of the 1000 a_j"));
  EXPECT_TRUE(contains(r.out, "naive  softmax(a): 0 NaN, 0 zeros, 1000 other weights"));
  EXPECT_TRUE(contains(r.out, "uniform     0.001000"));  // 1/N
}

// Just below the std at which the largest a_j passes ln(FLT_MAX) = 88.72, no single exp(a_j)
// overflows, but their sum can: the naive weights are then x / inf = 0, every one of them, and
// the notice must say it was the sum (it used to claim the naive formula survived).
TEST(Chapter04, NaiveSumOverflowsBeforeAnyTermDoes) {
  const fs::path dir = chapter.scratch("sum_overflow");
  const Output r = chapter.run("--no-plots --std 22.64 --dump '" + (dir / "d").string() + "'", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  // The premise, in double from the dumped samples: no term overflows, the sum does.
  const MatrixD a = load(dir / "d", "a");  // [1 x 20000]
  const double ln_max = std::log(double{std::numeric_limits<float>::max()});
  ASSERT_LT(a.maxCoeff(), ln_max) << "this std must leave every exp(a_j) finite in float";
  ASSERT_GT(a.array().exp().sum(), double{std::numeric_limits<float>::max()})
      << "this std must make the sum overflow float";
  const std::string text = attn_test::unwrapped(r.out);
  EXPECT_TRUE(contains(text, "naive  softmax(a): 0 NaN, 20000 zeros, 0 other weights")) << text;
  EXPECT_TRUE(contains(text, "the sum of the exp(a_j) does overflow")) << text;
  EXPECT_FALSE(contains(text, "even the naive formula survives")) << text;
  fs::remove_all(dir);
}

TEST(Chapter04, TwoRunsPrintIdenticalBytes) {
  chapter.expect_two_identical_runs("--no-plots", 4000u);
  chapter.expect_two_identical_runs("--no-plots --samples 500 --std 3 --d-k 7 --no-scale --seed 9",
                                    4000u);
}

TEST(Chapter04, DrawsItsFigures) {
  const fs::path dir = chapter.scratch("figures");
  const Output r = chapter.run("--samples 2000 --out '" + (dir / "plots").string() + "'", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"04_histograms", "04_softmax_unscaled", "04_softmax_scaled",
                           "04_variance_vs_dk", "04_saturation_vs_dk", "04_jacobian_norm"}) {
    EXPECT_TRUE(fs::exists(dir / "plots" / (std::string(name) + ".gp"))) << name;
    EXPECT_TRUE(fs::exists(dir / "plots" / (std::string(name) + ".dat"))) << name;
    if (course::Plotter::gnuplot_available()) {
      EXPECT_TRUE(fs::exists(dir / "plots" / (std::string(name) + ".png"))) << name;
    }
  }
  fs::remove_all(dir);
}

TEST(Chapter04, BadKnobsAreUsageErrors) {
  const fs::path dir = chapter.scratch("usage");
  for (const std::string args :
       {"--no-such-option", "--samples 9", "--samples 200001", "--samples many", "--std 0",
        "--std -1", "--std 1001", "--std nan", "--d-k 0", "--d-k 16385", "--seed -"}) {
    const Output r = chapter.run(args, dir);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_TRUE(contains(r.err, "Usage")) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  fs::remove_all(dir);
}

TEST(Chapter04, NoticesFollowTheKnobs) {
  // --std 0.5 makes b = a / 0.5 twice as wide as a, and softmax(a) of ten samples of spread 0.5
  // is no spike; --d-k 1 draws a q whose length, not sqrt(d_k) = 1, sets the scores' spread.
  // --seed 5: a seed whose one-feature q is short (|q| = 0.15), so "about 1" would be false.
  const fs::path dir = attn_test::scratch("04_softmax_scaling", "notices");
  const Output r = attn_test::run_chapter(
      "04_softmax_scaling",
      "--no-plots --seed 5 --std 0.5 --samples 10 --d-k 1 --dump '" + (dir / "d").string() + "'",
      dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string text = attn_test::unwrapped(r.out);
  EXPECT_FALSE(contains(text, "0.5 times narrower"));
  EXPECT_TRUE(contains(text, "the same histogram, 2 times wider"));
  const MatrixD p_a = load(dir / "d", "softmax_a");  // [1 x 10]
  ASSERT_LT(p_a.maxCoeff(), 0.5) << "ten N(0, 0.25) logits give no entry half the weight";
  EXPECT_FALSE(contains(text, "softmax(a) is a spike"));
  EXPECT_TRUE(contains(text, "softmax(a) is no spike"));
  // One feature, scaled by 1/sqrt(1): every score q k_j has spread |q| over the keys.
  const MatrixD q = load(dir / "d", "q");  // [1 x 1]
  ASSERT_LT(std::abs(q(0, 0)), 0.5) << "this seed's q is short, far from the typical 1";
  EXPECT_FALSE(contains(text, "scaled, the scores spread by about 1:"));
  EXPECT_TRUE(
      contains(text, fmt::format("scaled, the scores spread by about {:.2g}:", std::abs(q(0, 0)))))
      << fmt::format("{:.2g}", std::abs(q(0, 0)));

  // The defaults keep the statements, true there: 100 times narrower, a spike, and a spread
  // near 1, which is |q| / sqrt(64) of the default q (|q|^2 ~ chi-squared with 64 degrees of
  // freedom: |q| / 8 lies within 0.2 of 1 with probability about 0.98).
  const Output d = attn_test::run_chapter(
      "04_softmax_scaling", "--no-plots --dump '" + (dir / "defaults").string() + "'", dir);
  ASSERT_EQ(d.code, 0) << d.err;
  const std::string defaults = attn_test::unwrapped(d.out);
  EXPECT_TRUE(contains(defaults, "the same histogram, 100 times narrower"));
  EXPECT_TRUE(contains(defaults, "softmax(a) is a spike, softmax(b) stays flat"));
  const MatrixD q64 = load(dir / "defaults", "q");  // [1 x 64]
  const double spread = q64.norm() / 8.0;
  EXPECT_NEAR(spread, 1.0, 0.2);
  EXPECT_TRUE(contains(defaults, fmt::format("scaled, the scores spread by about {:.2g}:", spread)))
      << fmt::format("{:.2g}", spread);
  fs::remove_all(dir);
}

}  // namespace test_04_softmax_scaling
