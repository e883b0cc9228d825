// Chapter 07: attention without positions is blind to word order (permuting the input rows
// permutes the output rows, up to rounding), and adding position vectors ends that; then the
// chapter as a program: its dump replayed from the formulas in double, the rotation errors
// within their bounds, the float32 recipe against PyTorch's, usage errors.
#include "chapter_run.hpp"
#include "fixtures.hpp"

#include "attn/core/random.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/ops/attention.hpp"
#include "course/npy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace test_07_positional_encoding {

using attn::max_abs_diff;

namespace fs = std::filesystem;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn_test::contains;
using attn_test::Output;

const attn_test::ChapterRun chapter("07_positional_encoding");

// The paper's formula in double, written here independently of the library.
double pe_formula(double pos, Index c, Index d_model) {
  const double angle = pos / std::pow(10000.0, static_cast<double>(c - c % 2) / d_model);
  return c % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

// A random permutation of 0 .. n-1 from the course's portable generator (Fisher-Yates).
std::vector<Index> shuffled(Index n, attn::Rng& rng) {
  std::vector<Index> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), Index{0});
  for (Index i = n - 1; i > 0; --i) {
    const auto j = static_cast<Index>(rng.next_u64() % static_cast<std::uint64_t>(i + 1));
    std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(j)]);
  }
  return p;
}

struct Layer {
  Matrix W_q, W_k, W_v;
};
struct LayerRun {
  Matrix Q, K, V, scores;
  attn::AttentionResult r;
};
LayerRun self_attention(const Matrix& X, const Layer& W) {
  LayerRun s{X * W.W_q, X * W.W_k, X * W.W_v, {}, {}};
  s.scores = s.Q * s.K.transpose();
  s.r = attn::attention(s.Q, s.K, s.V);
  return s;
}

// ---- Order blindness, computed here -------------------------------------------------------------

TEST(Chapter07, WithoutPositionsPermutingTheWordsPermutesTheOutputs) {
  // For n = 1 .. 16 words and a random permutation p, X' = rows p of X. In exact arithmetic
  // Q' = rows p of Q (and K', V'), scores' = scores[p, p], weights' = weights[p, p] and
  // out' = rows p of out. In float they agree up to rounding, not always to the bit: Eigen's
  // product computes an entry with code that depends on where it sits (blocks of rows and
  // columns, leftovers apart), and the softmax's sum and weights V add the key terms in the
  // permuted order. (Measured here: Q is often bit-identical, scores are not for most n.)
  //
  // Tolerances. A float dot product of depth d is within d 2^-24 sum_k |a_k b_k| of the exact
  // one; two such computations of the same exact value differ by at most twice that. For
  // Q, K, V that bound is checked entry by entry: |Q' - Q[p]| <= 2 d 2^-24 (|X| |W|). Later
  // stages inherit those differences; scores here are O(5) from sums of 32 terms, so
  // 2 * 32 * 6e-8 * ~40 = 1.5e-4 bounds them loosely, and weights (which move by at most
  // a quarter of the score change divided by sqrt(d)) and out (|v| < 8, 16 keys) stay within
  // 1e-5 in practice; 1e-4 and 1e-5 are used.
  attn::Rng rng(7);
  const Index d = 32;
  const double s = 1.0 / std::sqrt(static_cast<double>(d));
  const Layer W{attn::random_normal(rng, d, d, 0.0, s), attn::random_normal(rng, d, d, 0.0, s),
                attn::random_normal(rng, d, d, 0.0, s)};
  const double gamma = 2.0 * d * std::ldexp(1.0, -24);
  for (Index n = 1; n <= 16; ++n) {
    const Matrix X = attn::random_normal(rng, n, d);  // [n x d]
    const std::vector<Index> p = shuffled(n, rng);
    const Matrix Xp = X(p, Eigen::all);  // the same words, reordered
    const LayerRun a = self_attention(X, W), b = self_attention(Xp, W);
    const auto within = [&](const Matrix& got, const Matrix& want, const Matrix& Wm) {
      const MatrixD bound = gamma * (Xp.cwiseAbs().cast<double>() * Wm.cwiseAbs().cast<double>());
      return ((got.cast<double>() - want.cast<double>()).cwiseAbs().array() <= bound.array()).all();
    };
    EXPECT_TRUE(within(b.Q, a.Q(p, Eigen::all), W.W_q)) << n;
    EXPECT_TRUE(within(b.K, a.K(p, Eigen::all), W.W_k)) << n;
    EXPECT_TRUE(within(b.V, a.V(p, Eigen::all), W.W_v)) << n;
    EXPECT_LT(max_abs_diff(b.scores.cast<double>(), a.scores(p, p).cast<double>()), 1e-4) << n;
    EXPECT_LT(max_abs_diff(b.r.weights.cast<double>(), a.r.weights(p, p).cast<double>()), 1e-5);
    EXPECT_LT(max_abs_diff(b.r.out.cast<double>(), a.r.out(p, Eigen::all).cast<double>()), 1e-5);
  }
}

TEST(Chapter07, AddingPositionsBreaksThePermutation) {
  // The same words in another order, each with the position vector of its new place: the
  // inputs are no longer a permutation of each other, nor are the outputs.
  attn::Rng rng(8);
  const Index d = 32, n = 6;
  const double s = 1.0 / std::sqrt(static_cast<double>(d));
  const Layer W{attn::random_normal(rng, d, d, 0.0, s), attn::random_normal(rng, d, d, 0.0, s),
                attn::random_normal(rng, d, d, 0.0, s)};
  const Matrix X = attn::random_normal(rng, n, d);    // [n x d]
  const Matrix pe = attn::sinusoidal_encoding(n, d);  // [n x d]
  const std::vector<Index> reverse = {5, 4, 3, 2, 1, 0};
  const LayerRun a = self_attention(X + pe, W);
  const LayerRun b = self_attention(Matrix(X(reverse, Eigen::all)) + pe, W);
  // Each output row moves by O(0.1..1): far beyond any rounding (1e-5 above).
  EXPECT_GT(max_abs_diff(b.r.out.cast<double>(), a.r.out(reverse, Eigen::all).cast<double>()),
            0.05);
  // What does permute: the rows of X + PE taken together (each word keeps its position).
  // That is the same input in another order, so the output permutes again, as above.
  const Matrix XP = X + pe;
  const LayerRun c = self_attention(XP(reverse, Eigen::all), W);
  EXPECT_LT(max_abs_diff(c.r.out.cast<double>(), a.r.out(reverse, Eigen::all).cast<double>()),
            1e-5);
}

// ---- The chapter as a program -------------------------------------------------------------------

TEST(Chapter07, DumpReplaysDogBitesMan) {
  const fs::path dir = chapter.scratch("dog");
  const Output r = chapter.run("--no-plots --d-model 16 --dump " + (dir / "d").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto L = [&](const std::string& n) { return attn_test::load(dir / "d", n); };
  const MatrixD Xa = L("X_dog_bites_man"), Xb = L("X_man_bites_dog");  // [3 x 16]
  const MatrixD Wq = L("W_q"), Wk = L("W_k"), Wv = L("W_v");           // [16 x 16]
  ASSERT_EQ(Xa.rows(), 3);
  ASSERT_EQ(Xa.cols(), 16);
  // "man bites dog" is "dog bites man" read backwards, exactly.
  EXPECT_EQ(Xb.row(0), Xa.row(2));
  EXPECT_EQ(Xb.row(1), Xa.row(1));
  EXPECT_EQ(Xb.row(2), Xa.row(0));
  // The layer recomputed in double from the dumped input and weights: softmax(Q K^T / 4) V.
  // Float32 products of 16 terms of size ~1: ~1e-6 against double; 1e-5.
  const auto layer = [&](const MatrixD& X) {
    const MatrixD Q = X * Wq, K = X * Wk, V = X * Wv;
    MatrixD w = Q * K.transpose() / 4.0;  // [3 x 3]
    for (Index i = 0; i < 3; ++i) {
      w.row(i) = (w.row(i).array() - w.row(i).maxCoeff()).exp().matrix();
      w.row(i) /= w.row(i).sum();
    }
    return std::pair<MatrixD, MatrixD>{w, w * V};
  };
  for (const std::string s : {"dog_bites_man", "man_bites_dog"}) {
    const MatrixD X = L("X_" + s);
    const auto [w, out] = layer(X);
    EXPECT_LT(max_abs_diff(L("weights_" + s), w), 1e-5) << s;
    EXPECT_LT(max_abs_diff(L("out_" + s), out), 1e-5) << s;
    // With positions: X + PE(0..2) from the formula; one float addition each, values < 5: 1e-6.
    const MatrixD Xp = L("X_" + s + "_pe");
    for (Index i = 0; i < 3; ++i)
      for (Index c = 0; c < 16; ++c) EXPECT_NEAR(Xp(i, c), X(i, c) + pe_formula(i, c, 16), 1e-6);
    const auto [wp, outp] = layer(Xp);
    EXPECT_LT(max_abs_diff(L("out_" + s + "_pe"), outp), 1e-5) << s;
  }
  // Without PE the outputs are a permutation of each other; with PE they are not.
  const MatrixD oa = L("out_dog_bites_man"), ob = L("out_man_bites_dog");
  const MatrixD pa = L("out_dog_bites_man_pe"), pb = L("out_man_bites_dog_pe");
  const std::vector<Index> back = {2, 1, 0};
  EXPECT_LT(max_abs_diff(ob(back, Eigen::all), oa), 1e-6);
  EXPECT_GT(max_abs_diff(pb(back, Eigen::all), pa), 0.05);
  EXPECT_TRUE(contains(r.out, "minus \"dog bites man\", max |.|:\n    Q, K, V "));
}

TEST(Chapter07, PrintsNote004TableWithItsKnownValues) {
  const fs::path dir = chapter.scratch("note004");
  const Output r = chapter.run("--no-plots --dump " + (dir / "d").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const MatrixD pe = attn_test::load(dir / "d", "pe_note004");  // [5 x 8]
  ASSERT_EQ(pe.rows(), 5);
  ASSERT_EQ(pe.cols(), 8);
  for (Index pos = 0; pos < 5; ++pos) {
    for (Index c = 0; c < 8; ++c) {
      // Rounded once to float: within 2^-24 relative of the formula (6e-8 on values <= 1).
      EXPECT_NEAR(pe(pos, c), pe_formula(static_cast<double>(pos), c, 8), 6e-8) << pos << c;
    }
  }
  for (Index c = 0; c < 8; ++c) EXPECT_EQ(pe(0, c), c % 2 == 0 ? 0.0 : 1.0);  // PE(0)
  EXPECT_TRUE(contains(r.out, "PE(1, 0) = sin 1 = 0.8415, PE(1, 1) = cos 1 = 0.5403"));
  // Five decimals of sin 3, cos 3, sin 0.3, cos 0.3.
  EXPECT_TRUE(contains(r.out, "  dog      3   0.14112  -0.98999   0.29552   0.95534"));
}

TEST(Chapter07, RotationErrorsStayWithinTheirBounds) {
  // The chapter checks R(k) PE(pos) = PE(pos + k) over pos < P, k <= K and dumps the largest
  // errors. Bounds (test_positional_encoding.cpp has the derivations): float 5 * 2^-24 =
  // 3.0e-7 whatever the positions; double 3 half-ulps of the largest angle P + K - 1 plus
  // 8 * 2^-53.
  const fs::path dir = chapter.scratch("rotation");
  for (const auto& [P, K, d] :
       std::vector<std::tuple<int, int, int>>{{100, 100, 128}, {512, 1500, 64}, {7, 4096, 8}}) {
    const fs::path d_dir = dir / std::to_string(K);
    const Output r = chapter.run("--no-plots --positions " + std::to_string(P) + " --max-offset " +
                                     std::to_string(K) + " --d-model " + std::to_string(d) +
                                     " --dump " + d_dir.string(),
                                 dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const MatrixD e = attn_test::load(d_dir, "rotation_max_error");  // [1 x 2]: float, double
    const double angle = P + K - 1;
    const double half_ulp = (std::nextafter(angle, 2 * angle) - angle) / 2;
    EXPECT_LE(e(0, 0), 5 * std::ldexp(1.0, -24)) << P << " " << K;
    EXPECT_GT(e(0, 0), 0.0);
    EXPECT_LE(e(0, 1), 3 * half_ulp + 8 * std::ldexp(1.0, -53)) << P << " " << K;
    // R_1 is the block-diagonal rotation by one position: cos 1 and sin 1 in the first block.
    const MatrixD R1 = attn_test::load(d_dir, "R_1");
    ASSERT_EQ(R1.rows(), d);
    EXPECT_EQ(R1(0, 0), std::cos(1.0));
    EXPECT_EQ(R1(0, 1), std::sin(1.0));
    EXPECT_EQ(R1(1, 0), -std::sin(1.0));
    EXPECT_EQ(R1(0, 2), 0.0);
  }
}

TEST(Chapter07, DotProductCurveIsTheSumOfCosines) {
  const fs::path dir = chapter.scratch("dot");
  const Output r = chapter.run("--no-plots --max-offset 300 --dump " + (dir / "d").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const MatrixD dot = attn_test::load(dir / "d", "dot_by_offset");  // [1 x 301]
  ASSERT_EQ(dot.cols(), 301);
  EXPECT_EQ(dot(0, 0), 64.0);  // k = 0: one per pair, d_model / 2
  for (Index k = 0; k <= 300; ++k) {
    double sum = 0.0;  // sum_i cos(k / 10000^(2i/128)), the formula written out
    for (Index i = 0; i < 64; ++i) {
      sum += std::cos(static_cast<double>(k) / std::pow(10000.0, static_cast<double>(2 * i) / 128));
    }
    EXPECT_NEAR(dot(0, k), sum, 1e-11) << k;  // 64 cosines of angles <= 300: a few ulps each
  }
  // PE(0).PE(k) = PE(99).PE(99+k) as printed; the similarity falls on the whole.
  EXPECT_TRUE(contains(r.out, "       k   PE(0).PE(k)   PE(99).PE(99+k)   sum_i cos(omega_i k)"));
  EXPECT_GT(dot(0, 1), dot(0, 10));
  EXPECT_GT(dot(0, 10), dot(0, 300));
}

TEST(Chapter07, Float32RecipeMatchesPyTorchsInSize) {
  // The chapter imitates the tutorials' float32 table; the fixture holds PyTorch's own. They
  // need not agree bit for bit (PyTorch's float32 exp differs from the C library's by an ulp
  // now and then, and that moves a large angle), but both must be off the truth alike.
  const fs::path dir = chapter.scratch("recipe");
  const Output r = chapter.run("--no-plots --d-model 64 --dump " + (dir / "d").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const MatrixD at = attn_test::load(dir / "d", "recipe_positions");     // [1 x 5]
  const MatrixD ours = attn_test::load(dir / "d", "pe_float32_recipe");  // [5 x 64]
  const MatrixD fixture_pos =
      course::read_npy(attn_test::fixture("positional_encoding", "pe_positions.npy")).to_matrix_d();
  const MatrixD truth =
      course::read_npy(attn_test::fixture("positional_encoding", "pe_f64.npy")).to_matrix_d();
  const MatrixD torch32 =
      course::read_npy(attn_test::fixture("positional_encoding", "pe_torch_f32.npy")).to_matrix_d();
  ASSERT_EQ(ours.rows(), at.cols());
  for (Index r5 = 0; r5 < at.cols(); ++r5) {
    Index row = -1;
    for (Index j = 0; j < fixture_pos.cols(); ++j)
      if (fixture_pos(0, j) == at(0, r5)) row = j;
    ASSERT_GE(row, 0) << "position " << at(0, r5) << " is not in the fixture";
    const double e_ours = (ours.row(r5) - truth.row(row)).cwiseAbs().maxCoeff();
    const double e_torch = (torch32.row(row) - truth.row(row)).cwiseAbs().maxCoeff();
    if (at(0, r5) <= 10) {
      EXPECT_LT(e_ours, 1e-6);
      EXPECT_LT(e_torch, 1e-6);
    } else if (at(0, r5) >= 1000) {
      for (const double e : {e_ours, e_torch}) {
        EXPECT_GT(e, 1e-5) << at(0, r5);
        EXPECT_LT(e, 1e-3) << at(0, r5);  // half the float32 spacing near 10^4: 4.9e-4
      }
    }
    // Pair 0 turns at exactly 1 in both (exp(0) = 1), so its angle is pos, exact in float32:
    // the two differ only by their float32 sin/cos, an ulp or so (1.2e-7).
    EXPECT_NEAR(ours(r5, 0), torch32(row, 0), 1.2e-7) << at(0, r5);
    EXPECT_NEAR(ours(r5, 1), torch32(row, 1), 1.2e-7) << at(0, r5);
  }
}

TEST(Chapter07, BadOptionsAreUsageErrors) {
  const fs::path dir = chapter.scratch("bad");
  for (const std::string args :
       {"--d-model 7", "--d-model 1", "--d-model 0", "--d-model 514", "--d-model 2.5",
        "--d-model x", "--positions 0", "--positions 513", "--max-offset 0", "--max-offset 4097",
        "--max-offset -1", "--seed -1"}) {
    const Output r = chapter.run("--no-plots " + args, dir);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(contains(r.err, "Usage:")) << args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << args << ": nothing runs before the options are checked";
  }
  const Output odd = chapter.run("--no-plots --d-model 9", dir);
  EXPECT_TRUE(contains(odd.err, "d_model must be even")) << odd.err;
}

TEST(Chapter07, SmallestAndLargestKnobsRun) {
  const fs::path dir = chapter.scratch("edges");
  for (const std::string args : {"--d-model 2 --positions 1 --max-offset 1",
                                 "--d-model 8 --positions 512 --max-offset 4096"}) {
    const Output r = chapter.run("--no-plots " + args, dir);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    EXPECT_FALSE(contains(r.out, "nan")) << args;
  }
}

TEST(Chapter07, DrawsItsFigures) {
  const fs::path dir = chapter.scratch("figures");
  const Output r = chapter.run("--out " + (dir / "plots").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"07_permutation", "07_encoding", "07_frequencies", "07_dot_product"}) {
    for (const char* ext : {".png", ".gp", ".dat"}) {
      EXPECT_TRUE(fs::is_regular_file(dir / "plots" / (std::string(name) + ext))) << name << ext;
    }
  }
}

TEST(Chapter07, NoticesFollowTheWidth) {
  const fs::path dir = attn_test::scratch("07_positional_encoding", "notices");
  // d_model 2 has one pair, omega_0 = 10000^0 = 1: no slow columns, no 1/10000, and the float32
  // recipe rounds nothing before the sin (1 and pos * 1 are exact), so its error cannot grow.
  {
    const Output r =
        attn_test::run_chapter("07_positional_encoding",
                               "--no-plots --d-model 2 --dump '" + (dir / "d").string() + "'", dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const Matrix recipe = course::read_npy(dir / "d" / "pe_float32_recipe.npy").to_matrix();
    const std::vector<Index> pos = {1, 10, 100, 1000, 10000};
    ASSERT_EQ(recipe.rows(), 5);
    std::vector<double> err;  // against sin, cos of pos in double
    for (Index r = 0; r < 5; ++r) {
      const double a = static_cast<double>(pos[r]);
      err.push_back(
          std::max(std::abs(recipe(r, 0) - std::sin(a)), std::abs(recipe(r, 1) - std::cos(a))));
    }
    // Each entry is sin or cos of an exact angle rounded once to float: <= 2^-25 = 3e-8.
    for (const double e : err) EXPECT_LE(e, 3.0e-8);
    const std::string text = attn_test::unwrapped(r.out);
    EXPECT_FALSE(contains(text, "right, slow columns that hardly change"));
    EXPECT_FALSE(contains(text, "from 1 down to 1/10000 radian per position"));
    EXPECT_FALSE(contains(text, "both errors grow with pos"));
    EXPECT_FALSE(contains(text, "then falling as k grows, with ripples"));
    EXPECT_TRUE(contains(text, "one pair only (d_model 2)"));
    EXPECT_TRUE(contains(text, "here the recipe's error does not grow with pos"));
    EXPECT_TRUE(contains(text, "d_model 2 has one, 1 radian per position"));
  }
  // d_model 8: the slowest omega is 10000^(-6/8) = 0.001, not 1/10000.
  {
    const Output r =
        attn_test::run_chapter("07_positional_encoding", "--no-plots --d-model 8", dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string text = attn_test::unwrapped(r.out);
    EXPECT_FALSE(contains(text, "from 1 down to 1/10000 radian per position"));
    EXPECT_TRUE(contains(text, "from 1 down to 0.001 radian per position (4 pairs"));
  }
  // The default width, 128: 10000^(-126/128) = 1.2e-4, the statements hold.
  const Output d = attn_test::run_chapter("07_positional_encoding", "--no-plots", dir);
  ASSERT_EQ(d.code, 0) << d.err;
  for (const char* line : {"from 1 down to 1/10000 radian per position",
                           "both errors grow with pos", "right, slow columns that hardly change"}) {
    EXPECT_TRUE(contains(attn_test::unwrapped(d.out), line)) << line;
  }
  fs::remove_all(dir);
}

}  // namespace test_07_positional_encoding
