// Chapter 02 as a program: note 000's numbers in the printed walk-through, a --dump whose
// arrays obey the chapter's formulas, identical bytes on every run, and usage errors.
#include "chapter_run.hpp"
#include "course/npy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace test_02_attention_by_hand {

namespace fs = std::filesystem;
using attn::MatrixD;

using attn_test::load;
using attn_test::Output;
using attn_test::read_file;

const attn_test::ChapterRun chapter("02_attention_by_hand");

std::string f4(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

using attn_test::contains;

TEST(Chapter02, TwoRunsPrintIdenticalBytes) {
  chapter.expect_two_identical_runs("--no-plots", 2000u);
  chapter.expect_two_identical_runs("--no-plots --scale --random-weights --seed 9", 2000u);
}

TEST(Chapter02, PrintsNote000sQueries) {
  const fs::path dir = chapter.scratch("queries");
  const Output r = chapter.run("--no-plots", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  // Note 000: q^1 = (1, 2), q^2 = (3, 1), q^3 = (3, 0), q^4 = (2, 6).
  const double q[4][2] = {{1, 2}, {3, 1}, {3, 0}, {2, 6}};
  for (int i = 0; i < 4; ++i) {
    const std::string line =
        "q^" + std::to_string(i + 1) + " = (" + f4(q[i][0]) + ", " + f4(q[i][1]) + ")";
    EXPECT_TRUE(contains(r.out, line)) << line;
  }
  // The written-out product of the note: q^2 = W_q x^2 with x^2 = (3, 2, 1).
  EXPECT_TRUE(contains(r.out, "q^2 = W_q x^2 = (1*3 + 0*2 + 0*1, 0*3 + 0*2 + 1*1) = (3, 1)"));
  fs::remove_all(dir);
}

TEST(Chapter02, PrintsNote000sWeightedSum) {
  const fs::path dir = chapter.scratch("weighted");
  const Output r = chapter.run("--no-plots", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  // y^2 = 0.1 v^1 + 0.2 v^2 + 0.3 v^3 + 0.4 v^4 = (1, 2), term by term.
  EXPECT_TRUE(contains(r.out, "y^2 = 0.1 v^1 + 0.2 v^2 + 0.3 v^3 + 0.4 v^4"));
  EXPECT_TRUE(contains(r.out, "= (0.1, 0.0) + (0.0, 0.4) + (0.9, 0.0) + (0.0, 1.6) = (1.0, 2.0)"));
  // Y = [[0.1, 1, 0.9, 0], [0, 2, 0, 1.6]] under its header and column labels, four decimals.
  const std::string Y = "Y = V weights [2 x 4]\n     y^1     y^2     y^3     y^4\n  " + f4(0.1) +
                        "  " + f4(1) + "  " + f4(0.9) + "  " + f4(0) + "\n  " + f4(0) + "  " +
                        f4(2) + "  " + f4(0) + "  " + f4(1.6) + "\n";
  EXPECT_TRUE(contains(r.out, Y)) << Y;
  EXPECT_TRUE(contains(r.out, "not softmax outputs"));
  fs::remove_all(dir);
}

TEST(Chapter02, DumpObeysTheFormulas) {
  const fs::path dir = chapter.scratch("dump");
  for (const std::string flags : {"", " --scale"}) {
    const fs::path d = dir / ("dump" + flags.substr(flags.empty() ? 0 : 3));
    const Output r = chapter.run("--no-plots --dump '" + d.string() + "'" + flags, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const MatrixD X = load(d, "X"), W_q = load(d, "W_q"), W_k = load(d, "W_k");
    const MatrixD W_v = load(d, "W_v"), Q = load(d, "Q"), K = load(d, "K"), V = load(d, "V");
    const MatrixD A = load(d, "A"), Ap = load(d, "A_prime"), Y = load(d, "Y");
    // The worked example is made of integers and quarters: these products are exact.
    EXPECT_EQ(Q, W_q * X);
    EXPECT_EQ(K, W_k * X);
    EXPECT_EQ(V, W_v * X);
    const double f = flags.empty() ? 1.0 : 1.0 / std::sqrt(2.0);
    // Unscaled: exact. Scaled: the float product rounds once, ~6e-8 relative on |A| <= 14.
    EXPECT_LT((A - K.transpose() * Q * f).cwiseAbs().maxCoeff(), 2e-6) << flags;
    for (int i = 0; i < 4; ++i) {
      double denom = 0;
      for (int j = 0; j < 4; ++j) denom += std::exp(A(j, i));
      for (int j = 0; j < 4; ++j) {
        // float softmax vs double formula: a few ulps of weights <= 1.
        EXPECT_NEAR(Ap(j, i), std::exp(A(j, i)) / denom, 1e-6);
      }
    }
    // Y = V A': four products of values <= 9 and weights <= 1, float rounding ~1e-6.
    EXPECT_LT((Y - V * Ap).cwiseAbs().maxCoeff(), 1e-5);
  }
  fs::remove_all(dir);
}

TEST(Chapter02, BlendNoticeCountsTheWeightsThatUnderflowed) {
  // y^i = sum_j alpha'_{i,j} v^j blends all four values only if no weight is exactly 0. Seed
  // 161's random W_k puts a score so far below its column's best that exp underflows float,
  // and the chapter still said "a blend of all four values".
  const fs::path dir = chapter.scratch("blend");
  for (const std::string args : {"--random-weights --seed 161", ""}) {
    const Output r =
        chapter.run("--no-plots " + args + " --dump '" + (dir / "d").string() + "'", dir);
    ASSERT_EQ(r.code, 0) << args << "\n" << r.err;
    const MatrixD Ap = load(dir / "d", "A_prime");  // [4 x 4], the weights the y^i used
    const long zeros = (Ap.array() == 0.0).count();
    const std::string text = attn_test::unwrapped(r.out);
    if (args.empty()) {
      ASSERT_EQ(zeros, 0) << "note 000's numbers give every key a weight";
      EXPECT_TRUE(contains(text, "each y^i is a blend of all four values"));
    } else {
      ASSERT_GT(zeros, 0) << "seed 161 no longer underflows a weight; pick another seed";
      EXPECT_FALSE(contains(text, "a blend of all four values")) << args;
      EXPECT_TRUE(contains(text, std::to_string(zeros) + " of the weights " +
                                     (zeros == 1 ? "is" : "are") + " exactly 0"))
          << args;
    }
    fs::remove_all(dir / "d");
  }
  fs::remove_all(dir);
}

TEST(Chapter02, DrawsTheWeightsFigure) {
  const fs::path dir = chapter.scratch("figure");
  const Output r = chapter.run("--out '" + (dir / "plots").string() + "'", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "plots" / "02_weights.gp"));
  EXPECT_TRUE(fs::exists(dir / "plots" / "02_weights.dat"));
  fs::remove_all(dir);
}

TEST(Chapter02, BadOptionsAreUsageErrors) {
  const fs::path dir = chapter.scratch("usage");
  for (const std::string args : {"--no-such-option", "--seed minus-one", "--scale=maybe"}) {
    const Output r = chapter.run(args, dir);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_TRUE(contains(r.err, "Usage")) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  fs::remove_all(dir);
}

}  // namespace test_02_attention_by_hand
