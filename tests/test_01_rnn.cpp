// Chapter 01 as a program: deterministic output, a --dump that the library reproduces from
// the dumped weights alone, figures written, and usage errors for knobs out of range.
#include "chapter_run.hpp"
#include "course/npy.hpp"
#include "attn/rnn.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using attn::Matrix;
using attn::MatrixD;
using attn::RowVector;

using attn_test::Output;

const attn_test::ChapterRun chapter("01_rnn");

Matrix load(const fs::path& dir, const std::string& name) {
  return attn_test::load(dir, name).cast<float>();
}

TEST(Chapter01, TwoRunsPrintIdenticalBytes) {
  chapter.expect_two_identical_runs("--no-plots", 1000u);
  chapter.expect_two_identical_runs("--no-plots --seed 777 --hidden 7 --steps 9", 1000u);
}

TEST(Chapter01, PrintsTheShapesAndTheCheck) {
  const fs::path dir = chapter.scratch("shapes");
  const Output r = chapter.run("--no-plots --input-size 5 --hidden 7 --steps 9", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line : {
           "N->1 (classify a sequence): x [9 x 5] -> a<9> [1 x 7] -> y_hat [1 x 2]",
           "N->N (label every step): x [9 x 5] -> A [9 x 7] -> Y_hat [9 x 2]",
           "1->N (generate): x<1> [1 x 5] -> A [9 x 7] -> Y_hat [9 x 5]",
           "seq2seq (encode N, decode M): x [9 x 5] -> context a<9> [1 x 7]\n"
           "  then the decoder from it: A [3 x 7] -> Y_hat [3 x 2]",
           "analytic d a<5>/d x<1> matches central finite differences",
       }) {
    EXPECT_NE(r.out.find(line), std::string::npos) << "missing: " << line;
  }
  // Every line fits a 100-column terminal.
  std::size_t start = 0, longest = 0;
  while (start < r.out.size()) {
    const std::size_t end = std::min(r.out.find('\n', start), r.out.size());
    longest = std::max(longest, end - start);
    start = end + 1;
  }
  EXPECT_LE(longest, 100u);
  fs::remove_all(dir);
}

TEST(Chapter01, DumpIsReproducedFromTheDumpedWeights) {
  const fs::path dir = chapter.scratch("dump");
  const fs::path dump = dir / "dump";
  const Output r = chapter.run(
      "--no-plots --seed 777 --input-size 5 --hidden 7 --steps 9 --dump '" + dump.string() + "'",
      dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("arrays to " + dump.string()), std::string::npos);

  // PyTorch's names and shapes: biases are 1-D [H] as in nn.RNN's state_dict.
  const course::NpyArray b_ih = course::read_npy(dump / "bias_ih_l0.npy");
  ASSERT_EQ(b_ih.shape, std::vector<std::size_t>{7});
  attn::RnnCell cell;
  cell.weight_ih = load(dump, "weight_ih_l0");  // [7 x 5]
  cell.weight_hh = load(dump, "weight_hh_l0");  // [7 x 7]
  cell.bias_ih = b_ih.to_matrix();              // [1 x 7]
  cell.bias_hh = load(dump, "bias_hh_l0");      // [1 x 7]
  const Matrix X = load(dump, "x");             // [9 x 5]
  const RowVector h0 = load(dump, "h0");        // [1 x 7]
  const Matrix A = load(dump, "hidden_states");  // [9 x 7]
  ASSERT_EQ(cell.weight_ih.rows(), 7);
  ASSERT_EQ(cell.weight_ih.cols(), 5);
  ASSERT_EQ(X.rows(), 9);
  ASSERT_EQ(A.rows(), 9);
  ASSERT_EQ(A.cols(), 7);

  // float32 round-trips through .npy exactly and this is the very function the chapter
  // called on the very same floats, so the recomputation is bit for bit the dump.
  EXPECT_EQ(attn::rnn_forward(cell, X, h0), A);
  EXPECT_EQ(load(dump, "h_n"), A.bottomRows(1));
  const attn::OutputHead head{load(dump, "W_y"), load(dump, "b_y")};
  EXPECT_EQ(attn::head_forward(head, A), load(dump, "y_hat"));
  // The Jacobian is dumped as float64 from the chapter's first min(T, 5) = 5 steps.
  const MatrixD J = course::read_npy(dump / "d_aT_d_x1.npy").to_matrix_d();  // [7 x 5]
  EXPECT_EQ(J, attn::input_jacobians(cell, X.topRows(5), h0).back());
  fs::remove_all(dir);
}

TEST(Chapter01, WritesBothFigures) {
  const fs::path dir = chapter.scratch("plots");
  const Output r = chapter.run("--distance 20 --seeds 2 --out '" + (dir / "plots").string() + "'",
                            dir);
  ASSERT_EQ(r.code, 0) << r.err;
  // The data and the script are written even where gnuplot is missing (then no .png).
  for (const char* name : {"01_dependence", "01_path_length"}) {
    EXPECT_TRUE(fs::is_regular_file(dir / "plots" / (std::string(name) + ".dat"))) << name;
    EXPECT_TRUE(fs::is_regular_file(dir / "plots" / (std::string(name) + ".gp"))) << name;
  }
  fs::remove_all(dir);
}

TEST(Chapter01, KnobsOutOfRangeAreUsageErrors) {
  const fs::path dir = chapter.scratch("usage");
  for (const std::string bad :
       {"--input-size 0", "--input-size 65", "--hidden 0", "--hidden 257", "--steps 0",
        "--steps 1001", "--experiment-hidden 0", "--experiment-hidden 257", "--distance 0",
        "--distance 201", "--seeds 0", "--seeds 65", "--scales 0", "--scales 0.5,11",
        "--scales 1,1,1,1,1,1,1", "--hidden seven", "--steps", "--no-such-option"}) {
    const Output r = chapter.run("--no-plots " + bad, dir);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("Usage:"), std::string::npos) << bad << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << bad << ": nothing may run before the options are valid";
  }
  const Output help = chapter.run("--help", dir);
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--hidden"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
