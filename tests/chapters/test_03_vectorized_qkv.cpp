// Chapter 03 as a program: every shape printed, loops == products on the worked example, the
// row form equal to the column form transposed (printed and dumped), the n x n cost table
// recomputed here, identical bytes on every run, and usage errors.
#include "chapter_run.hpp"
#include "course/npy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace test_03_vectorized_qkv {

namespace fs = std::filesystem;
using attn::Index;
using attn::MatrixD;

using attn_test::load;
using attn_test::Output;
using attn_test::read_file;

const attn_test::ChapterRun chapter("03_vectorized_qkv");

using attn_test::contains;

// The number printed after `label` in the output, e.g. "max |out - Y^T| = " -> 2.4e-07.
double number_after(const std::string& text, const std::string& label) {
  const std::size_t at = text.find(label);
  if (at == std::string::npos) return NAN;
  return std::strtod(text.c_str() + at + label.size(), nullptr);
}

// 640000 -> "640,000", written independently of the chapter's own helper.
std::string grouped(std::uint64_t v) {
  std::string s = std::to_string(v);
  for (int k = static_cast<int>(s.size()) - 3; k > 0; k -= 3) s.insert(static_cast<size_t>(k), ",");
  return s;
}

TEST(Chapter03, TwoRunsPrintIdenticalBytes) {
  chapter.expect_two_identical_runs("--no-plots", 2000u);
  chapter.expect_two_identical_runs("--no-plots --scale --n 6 --d-model 64 --seed 3", 2000u);
}

TEST(Chapter03, PrintsEveryShape) {
  const fs::path dir = chapter.scratch("shapes");
  const Output r = chapter.run("--no-plots --n 6 --d-model 16", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  // Note 000's shapes: W_q 2x3, X 3x4, Q 2x4, K^T 4x2, A 4x4, V 2x4, Y 2x4.
  EXPECT_TRUE(contains(r.out, "X [3 x 4] -> Q = W_q X [2 x 4] -> A = K^T Q [4 x 4] -> "
                              "A' = softmax(A) [4 x 4] -> Y = V A' [2 x 4]\n"));
  EXPECT_TRUE(contains(r.out, "with W_q [2 x 3], K^T [4 x 2], V [2 x 4]\n"));
  // The row form: tokens as rows, everything transposed.
  EXPECT_TRUE(contains(r.out, "X [4 x 3] -> Q = X W_q^T [4 x 2] -> weights [4 x 4] -> "
                              "out = weights V [4 x 2]\n"));
  EXPECT_TRUE(contains(r.out, "with K [4 x 2], V [4 x 2]\n"));
  // Note 001 with n = 6 words of d = 16 features: X X^T [n x n], out [n x d].
  EXPECT_TRUE(contains(r.out, "X X^T (entry i,j = word i . word j) [6 x 6]"));
  EXPECT_TRUE(contains(r.out, "X [6 x 16] -> Q = X W^Q [6 x 16] -> weights [6 x 6] -> "
                              "out = weights V [6 x 16]\n"));
  EXPECT_TRUE(contains(r.out, "with W^Q [16 x 16], K [6 x 16], V [6 x 16]\n"));
  fs::remove_all(dir);
}

TEST(Chapter03, LoopsEqualProductsAndRowsEqualColumnsTransposed) {
  const fs::path dir = chapter.scratch("equal");
  for (const std::string flags : {"", " --scale"}) {
    const Output r = chapter.run("--no-plots" + flags, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    // Integers and quarters: Q, K, V, A are exact in any order, and A' is the same softmax of
    // the same floats. Y sums inexact weights, so only a bound: a 4-term sum of values <= 9.
    EXPECT_TRUE(contains(r.out, "max |loops - products|:  Q 0.0e+00  A 0.0e+00  A' 0.0e+00"))
        << flags;
    EXPECT_LT(number_after(r.out, "A' 0.0e+00  Y "), 1e-5) << flags;
    EXPECT_TRUE(contains(r.out, "max |weights - A'^T| = 0.0e+00")) << flags;
    EXPECT_LT(number_after(r.out, "max |out - Y^T| = "), 1e-5) << flags;
  }
  fs::remove_all(dir);
}

TEST(Chapter03, DumpedRowFormIsTheTransposedColumnForm) {
  const fs::path dir = chapter.scratch("dump");
  const Output r = chapter.run("--no-plots --dump '" + (dir / "d").string() + "'", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const fs::path d = dir / "d";
  const MatrixD Q = load(d, "Q"), K = load(d, "K"), V = load(d, "V"), A = load(d, "A");
  const MatrixD Ap = load(d, "A_prime"), Y = load(d, "Y");
  EXPECT_EQ(Q, load(d, "W_q") * load(d, "X"));  // exact: small integers
  EXPECT_EQ(A, K.transpose() * Q);              // exact: integers and quarters
  EXPECT_EQ(load(d, "row_weights"), Ap.transpose());
  // out = weights V against Y = V A': the same 4-term sums in another order, ~1e-6.
  EXPECT_LT((load(d, "row_out") - Y.transpose()).cwiseAbs().maxCoeff(), 1e-5);
  EXPECT_LT((Y - V * Ap).cwiseAbs().maxCoeff(), 1e-5);
  // Note 001's section: X X^T of the dumped words, and every weight row sums to 1.
  const MatrixD Xw = load(d, "words_X");
  // float products of 512 terms of size ~1: |X X^T| ~ 500, relative float rounding ~1e-6.
  EXPECT_LT((load(d, "words_XXt") - Xw * Xw.transpose()).cwiseAbs().maxCoeff(), 1e-2);
  const MatrixD w = load(d, "words_weights_projected");
  for (int i = 0; i < w.rows(); ++i) EXPECT_NEAR(w.row(i).sum(), 1.0, 1e-6);
  fs::remove_all(dir);
}

TEST(Chapter03, CostTableIsComputedNotCopied) {
  const fs::path dir = chapter.scratch("cost");
  const Output r = chapter.run("--no-plots", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (std::uint64_t n : {4ULL, 800ULL, 8192ULL, 65536ULL}) {
    EXPECT_TRUE(contains(r.out, grouped(n * n))) << n;
  }
  EXPECT_TRUE(contains(r.out, "640,000"));  // note 000: 800 x 800
  // 65536^2 weights x 4 bytes = 2^32 * 2^2 = 2^34 bytes = 16 GiB; float16 half of it.
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.2f GiB", std::ldexp(1.0, 34) / std::ldexp(1.0, 30));
  EXPECT_TRUE(contains(r.out, gib)) << gib;
  // 800^2 x 4 = 2,560,000 bytes = 2.44 MiB.
  std::snprintf(gib, sizeof gib, "%.2f MiB", 800.0 * 800.0 * 4.0 / (1024.0 * 1024.0));
  EXPECT_TRUE(contains(r.out, gib)) << gib;
  fs::remove_all(dir);
}

TEST(Chapter03, DrawsItsFigures) {
  const fs::path dir = chapter.scratch("figures");
  const Output r = chapter.run("--out '" + (dir / "plots").string() + "'", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"03_weights", "03_attention_memory"}) {
    EXPECT_TRUE(fs::exists(dir / "plots" / (std::string(name) + ".gp"))) << name;
    EXPECT_TRUE(fs::exists(dir / "plots" / (std::string(name) + ".dat"))) << name;
  }
  fs::remove_all(dir);
}

TEST(Chapter03, BadKnobsAreUsageErrors) {
  const fs::path dir = chapter.scratch("usage");
  for (const std::string args :
       {"--no-such-option", "--n 1", "--n 65", "--d-model 0", "--d-model many", "--seed -"}) {
    const Output r = chapter.run(args, dir);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_TRUE(contains(r.err, "Usage")) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  fs::remove_all(dir);
}

TEST(Chapter03, NoticesFollowTheKnobs) {
  const fs::path dir = chapter.scratch("notices");
  // With 4 features random words are far from orthogonal: a word gives others a real share, yet
  // the closing facts said "Without projections a word mostly attends to itself".
  const Output r =
      chapter.run("--no-plots --d-model 4 --n 8 --dump '" + (dir / "d").string() + "'", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  MatrixD W = load(dir / "d", "words_weights");  // [8 x 8], softmax(X X^T / 2)
  const MatrixD self = W.diagonal();
  W.diagonal().setZero();
  ASSERT_GE(W.maxCoeff(), 0.01) << "4 features should leave a word at least 1% for another";
  bool outweighed = false;  // does some word give another more than itself?
  for (Index i = 0; i < W.rows(); ++i) {
    outweighed = outweighed || W.row(i).maxCoeff() > self(i);
  }
  const std::string text = attn_test::unwrapped(r.out);
  EXPECT_FALSE(contains(text, "a word mostly attends to itself"));
  EXPECT_FALSE(contains(text, "each word attends almost only to itself"));
  EXPECT_TRUE(contains(text, "Without projections, 4 features left words far from orthogonal"));
  EXPECT_TRUE(contains(text, outweighed ? "another word outweighs the word itself"
                                        : "word still weighs itself most"));

  // --scale divides K^T Q by sqrt(2): A no longer holds integers and quarters, which the notice
  // claimed, though K^T Q does and both forms round the one multiplication alike.
  const Output s = chapter.run("--no-plots --scale --dump '" + (dir / "s").string() + "'", dir);
  ASSERT_EQ(s.code, 0) << s.err;
  const MatrixD A = load(dir / "s", "A");  // [4 x 4]
  bool quarters = true;
  for (Index i = 0; i < A.size(); ++i) {
    quarters = quarters && 4.0 * A(i) == std::round(4.0 * A(i));
  }
  ASSERT_FALSE(quarters) << "a scaled score is some integer / sqrt(2)";
  const std::string scaled = attn_test::unwrapped(s.out);
  EXPECT_FALSE(contains(scaled, "Q, K, V, A hold integers and quarters"));
  EXPECT_TRUE(contains(scaled, "Q, K, V, K^T Q hold integers and quarters"));

  // The defaults keep both statements, which are true there.
  const Output d = chapter.run("--no-plots", dir);
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_TRUE(
      contains(attn_test::unwrapped(d.out), "Without projections a word mostly attends to itself"));
  EXPECT_TRUE(contains(attn_test::unwrapped(d.out), "Q, K, V, A hold integers and quarters"));
  fs::remove_all(dir);
}

}  // namespace test_03_vectorized_qkv
