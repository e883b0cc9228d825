// Chapter 10 as a program: the online softmax's numbers against a hand calculation in double,
// the tiled example against the plain formula on its dump, the tile counts of its masks,
// identical bytes on every run, a live measurement's timings included.
#include "chapter_run.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

namespace test_10_efficient_attention {

namespace fs = std::filesystem;
using attn::MatrixD;
using attn_test::contains;
using attn_test::load;
using attn_test::Output;

const attn_test::ChapterRun chapter("10_efficient_attention");

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// One line of the online softmax's table, as the chapter lays it out.
std::string row(int j, double x, double m, const std::string& rescale, double l) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%4d  %8.2f  %9.4f  %19s  %10.6f", j, x, m, rescale.c_str(), l);
  return buf;
}

TEST(Chapter10, TwoRunsPrintIdenticalBytes) {
  chapter.expect_two_identical_runs("--no-plots", 3000u);
  chapter.expect_two_identical_runs("--no-plots --mask causal --n 13 --seed 4", 3000u);
}

// The default row 3,1,4,1,5,9,2,6: m = 9 and l = sum_j e^(x_j - 9), by hand in double. Six
// printed digits of l (about 1.07) are within float's rounding of a sum of eight terms.
TEST(Chapter10, OnlineSoftmaxMatchesTheHandCalculation) {
  const fs::path dir = chapter.scratch("online");
  const Output r = chapter.run("--no-plots", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const double x[] = {3, 1, 4, 1, 5, 9, 2, 6};
  double l = 0;
  for (double v : x) l += std::exp(v - 9);
  EXPECT_TRUE(contains(r.out, "three passes:  m = 9.0000   l = " + fixed(l, 6))) << l;
  EXPECT_TRUE(contains(r.out, "one pass:      m = 9.0000   l = " + fixed(l, 6))) << l;
  // After x_1 = 3 alone: m = 3, l = 1 (nothing to rescale yet); after x_2 = 1: l = 1 + e^-2.
  EXPECT_TRUE(contains(r.out, row(1, 3, 3, "-", 1.0)));
  EXPECT_TRUE(contains(r.out, row(2, 1, 3, fixed(1, 6), 1 + std::exp(-2.0))));
  // x_6 = 9 raises the maximum from 5: the factor is e^(5 - 9), and l = 1.539846 e^-4 + 1.
  const double l5 = std::exp(-2.0) + std::exp(-4.0) + std::exp(-1.0) + std::exp(-4.0) + 1.0;
  EXPECT_TRUE(contains(r.out, row(6, 9, 9, fixed(std::exp(-4.0), 6), l5 * std::exp(-4.0) + 1)));
  // The merge of x_1..x_3 (m = 4) and x_4..x_8 (m = 9) in both orders: the same bits.
  EXPECT_TRUE(contains(
      r.out, "x_1..x_3:  m = 4.0000  l = " + fixed(std::exp(-1.0) + std::exp(-3.0) + 1.0, 6)));
  EXPECT_TRUE(contains(r.out, "(the same bits)"));
  EXPECT_TRUE(contains(r.out, "log-sum-exp L = m + log l = " + fixed(9 + std::log(l), 6)));
  fs::remove_all(dir);
}

// The dump's arrays against the formula computed here in double: out = softmax(Q K^T / 2) V
// (d = 4) row by row and L = log sum exp of the scaled scores, for every mask. The chapter's
// float result is within float rounding of that: 1e-5 is ~100 ulps of values near 1, ample
// for sums of 10 terms and an exp each.
TEST(Chapter10, DumpedOutputIsAttention) {
  const fs::path dir = chapter.scratch("dump");
  for (const std::string mask : {"none", "causal", "pad"}) {
    const fs::path d = dir / mask;
    const Output r = chapter.run("--no-plots --mask " + mask + " --dump '" + d.string() + "'", dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const MatrixD Q = load(d, "Q"), K = load(d, "K"), V = load(d, "V"), out = load(d, "out");
    const MatrixD L = load(d, "L");
    const long n = Q.rows();
    ASSERT_EQ(n, 10);
    for (long i = 0; i < n; ++i) {
      double m = -INFINITY;
      Eigen::RowVectorXd s(n);
      for (long j = 0; j < n; ++j) {
        const bool allowed = mask == "none" || (mask == "causal" ? j <= i : j < n - 3);
        s[j] = allowed ? Q.row(i).dot(K.row(j)) / 2.0 : -INFINITY;
        m = std::max(m, s[j]);
      }
      const Eigen::RowVectorXd p = (s.array() - m).exp().matrix();
      const double l = p.sum();
      EXPECT_LT((out.row(i) - p * V / l).cwiseAbs().maxCoeff(), 1e-5) << mask << " row " << i;
      EXPECT_NEAR(L(0, i), m + std::log(l), 1e-5) << mask << " row " << i;
    }
    // Padded keys (pad) get no gradient: no query may attend to them.
    if (mask == "pad") {
      const MatrixD dK = load(d, "dK"), dV = load(d, "dV");
      EXPECT_EQ(dK.bottomRows(3).cwiseAbs().maxCoeff(), 0.0);
      EXPECT_EQ(dV.bottomRows(3).cwiseAbs().maxCoeff(), 0.0);
    }
  }
  fs::remove_all(dir);
}

// The tile maps of the example, counted by hand. n = 10 in tiles of 4 queries and 3 keys:
// query tiles {0..3}, {4..7}, {8, 9} against key tiles {0..2}, {3..5}, {6..8}, {9}. Causal
// (key j blocked for query i when j > i): a tile is skipped when its first key is after its
// last query, full when its last key is at or before its first query, mixed otherwise:
// {mixed, mixed, skipped, skipped}, {full, mixed, mixed, skipped}, {full, full, full, mixed}:
// 4 full, 5 mixed, 3 skipped. Padding of the last 3 keys (7, 8, 9) in every row: key tiles 1
// and 2 full, 3 mixed (6 allowed, 7 and 8 not), 4 skipped, for each of the 3 query tiles.
TEST(Chapter10, TileMapsAreCountedByHand) {
  const fs::path dir = chapter.scratch("tiles");
  const Output none = chapter.run("--no-plots", dir);
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_TRUE(contains(none.out, "12 tiles: 12 without a mask test, 0 mixed, 0 skipped"));
  const Output causal = chapter.run("--no-plots --mask causal", dir);
  ASSERT_EQ(causal.code, 0) << causal.err;
  EXPECT_TRUE(contains(causal.out, "12 tiles: 4 without a mask test, 5 mixed, 3 skipped"));
  EXPECT_TRUE(contains(causal.out, "query tile  1 / / . .\n"));
  EXPECT_TRUE(contains(causal.out, "query tile  3 # # # /\n"));
  const Output pad = chapter.run("--no-plots --mask pad", dir);
  ASSERT_EQ(pad.code, 0) << pad.err;
  EXPECT_TRUE(contains(pad.out, "12 tiles: 6 without a mask test, 3 mixed, 3 skipped"));
  // The default 128 x 128 tiles of n = 4096: 32 x 32 pairs, 31 * 32 / 2 = 496 above the
  // diagonal, 48.4%.
  EXPECT_TRUE(contains(attn_test::unwrapped(none.out),
                       "128 x 128 tiles, a causal mask skips 496 of 1,024 tiles (48.4%)"));
  fs::remove_all(dir);
}

// The walk-through's comparisons: the lecture's loop, the library's tiles, the plain path and
// chapter 09's backward agree to float rounding (a printed 0.0e+00 or an e-07/e-08).
TEST(Chapter10, EveryPathAgreesToRounding) {
  const fs::path dir = chapter.scratch("agree");
  for (const std::string args : {"", "--mask causal --query-tile 1 --key-tile 1", "--n 37 --d 9"}) {
    const Output r = chapter.run("--no-plots " + args, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    for (const std::string line :
         {"against attn::tiled_attention, rows", "against attention() (chapter 05), all rows",
          "against chapter 09's attention_backward"}) {
      const auto at = r.out.find(line);
      ASSERT_NE(at, std::string::npos) << line;
      const std::string rest = r.out.substr(at, r.out.find('\n', at) - at);
      EXPECT_TRUE(rest.find("e-0") != std::string::npos || rest.find("e+00") != std::string::npos)
          << args << ": " << rest;
      EXPECT_EQ(rest.find("e-01"), std::string::npos) << rest;
      EXPECT_EQ(rest.find("e-02"), std::string::npos) << rest;
      EXPECT_EQ(rest.find("e-03"), std::string::npos) << rest;
      EXPECT_EQ(rest.find("e-04"), std::string::npos) << rest;
      EXPECT_EQ(rest.find("e-05"), std::string::npos) << rest;
    }
  }
  fs::remove_all(dir);
}

// The speed figures come from the committed measurements, named with their machine and date.
TEST(Chapter10, ReadsTheCommittedMeasurements) {
  const fs::path dir = chapter.scratch("measured");
  const Output r = chapter.run("--out '" + (dir / "plots").string() + "'", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "Measured on ")) << r.out;
  EXPECT_TRUE(contains(r.out, "one core's FMA peak, same run: "));
  for (const char* figure : {"10_speed.png", "10_memory.png", "10_tile_sweep.png"}) {
    EXPECT_TRUE(fs::exists(dir / "plots" / figure)) << figure;
  }
  fs::remove_all(dir);
}

// A live measurement keeps stdout the same bytes on every run: its table, whose GFLOP/s vary
// from run to run, goes to stderr, each line starting "measured: ", and stdout says so.
// --measure-n 16 keeps each run to about 2 s.
TEST(Chapter10, MeasuredTimingsGoToStderr) {
  const fs::path dir = chapter.scratch("measure");
  const std::string args = "--no-plots --measure --measure-n 16";
  const Output a = chapter.run(args, dir), b = chapter.run(args, dir);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_TRUE(contains(a.out, "== What to notice"));
  EXPECT_TRUE(contains(attn_test::unwrapped(a.out), "the table is on stderr"));
  // Not one measured line on stdout; each of them on stderr.
  for (const std::string line :
       {"one core's FMA peak, same run: ", "best tile at n = ", "n = 16: 1 thread "}) {
    EXPECT_FALSE(contains(a.out, line)) << line;
    EXPECT_TRUE(contains(a.err, "measured: " + line)) << line << "\n" << a.err;
  }
  EXPECT_TRUE(contains(a.err, "measured:      n             plain             tiled")) << a.err;
  EXPECT_TRUE(contains(a.err, "measured:     16  ")) << a.err;  // the one row: n = 16
  // Nothing else on stderr: the table, and the progress of the measurement.
  EXPECT_EQ(attn_test::without_lines_starting(a.err, {"measured: ", "measuring: "}), "") << a.err;
  fs::remove_all(dir);
}

}  // namespace test_10_efficient_attention
