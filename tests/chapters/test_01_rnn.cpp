// Chapter 01 as a program: deterministic output, a --dump that the library reproduces from
// the dumped weights alone, figures written, and usage errors for knobs out of range.
#include "attn/layers/parameters.hpp"
#include "attn/layers/rnn.hpp"
#include "chapter_run.hpp"
#include "course/npy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace test_01_rnn {

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
  cell.weight_ih = load(dump, "weight_ih_l0");   // [7 x 5]
  cell.weight_hh = load(dump, "weight_hh_l0");   // [7 x 7]
  cell.bias_ih = b_ih.to_matrix();               // [1 x 7]
  cell.bias_hh = load(dump, "bias_hh_l0");       // [1 x 7]
  const Matrix X = load(dump, "x");              // [9 x 5]
  const RowVector h0 = load(dump, "h0");         // [1 x 7]
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
  const attn::Linear head{load(dump, "W_y"), load(dump, "b_y")};
  EXPECT_EQ(attn::softmax_output(head, A), load(dump, "y_hat"));
  // The Jacobian is dumped as float64 from the chapter's first min(T, 5) = 5 steps.
  const MatrixD J = course::read_npy(dump / "d_a5_d_x1.npy").to_matrix_d();  // [7 x 5]
  EXPECT_EQ(J, attn::input_jacobians(cell, X.topRows(5), h0).back());
  fs::remove_all(dir);
}

TEST(Chapter01, WritesBothFigures) {
  const fs::path dir = chapter.scratch("plots");
  const Output r =
      chapter.run("--distance 20 --seeds 2 --out '" + (dir / "plots").string() + "'", dir);
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
        "--distance 201", "--seeds 0", "--seeds 33", "--scales 0", "--scales 0.5,11",
        "--scales 1,1,1,1,1,1,1", "--hidden seven", "--steps", "--no-such-option"}) {
    const Output r = chapter.run("--no-plots " + bad, dir);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("Usage:"), std::string::npos) << bad << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << bad << ": nothing may run before the options are valid";
  }
  const Output help = chapter.run("--help", dir);
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--hidden"), std::string::npos);
  // The limits CLI11 enforces are stated where a learner looks for them.
  EXPECT_NE(help.out.find("at most 6 values"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("at most 32"), std::string::npos) << help.out;
  fs::remove_all(dir);
}

// d a<t>/d x<1> for t = 1..T by the chain rule written out here, on the double states of
// the double rnn_forward: J<1> = diag(1 - a<1>^2) W_ih, J<t> = diag(1 - a<t>^2) W_hh J<t-1>.
// Independent of attn::input_jacobians, which the chapter calls.
std::vector<MatrixD> jacobians_by_hand(const attn::RnnCell& cell, const Matrix& X,
                                       const RowVector& h0) {
  const MatrixD A =
      attn::rnn_forward(attn::cast<double>(cell), X.cast<double>(), h0.cast<double>());
  const MatrixD W_ih = cell.weight_ih.cast<double>(), W_hh = cell.weight_hh.cast<double>();
  std::vector<MatrixD> J;
  for (attn::Index t = 0; t < X.rows(); ++t) {
    const MatrixD before = t == 0 ? W_ih : MatrixD(W_hh * J.back());  // [H x I]
    MatrixD J_t(before.rows(), before.cols());
    for (attn::Index h = 0; h < before.rows(); ++h) {
      J_t.row(h) = (1.0 - A(t, h) * A(t, h)) * before.row(h);  // tanh' = 1 - a^2
    }
    J.push_back(J_t);
  }
  return J;
}

TEST(Chapter01, DumpedJacobianIsTheOneItsNameSays) {
  // With --steps 13 the chapter checks (and dumps) the Jacobian of its first 5 steps. It used
  // to be called d_aT_d_x1, which it is not: d a<13>/d x<1> differs from it.
  const fs::path dir = chapter.scratch("jacobian_name");
  const fs::path dump = dir / "dump";
  const Output r = chapter.run("--no-plots --seed 777 --input-size 5 --hidden 7 --steps 13 "
                               "--dump '" +
                                   dump.string() + "'",
                               dir);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::is_regular_file(dump / "d_a5_d_x1.npy")) << "the dump names its step";
  EXPECT_FALSE(fs::exists(dump / "d_aT_d_x1.npy")) << "no file claims to be d a<T>/d x<1>";
  EXPECT_TRUE(attn_test::contains(r.out, "analytic d a<5>/d x<1> matches"));

  attn::RnnCell cell;
  cell.weight_ih = load(dump, "weight_ih_l0");  // [7 x 5]
  cell.weight_hh = load(dump, "weight_hh_l0");  // [7 x 7]
  cell.bias_ih = load(dump, "bias_ih_l0");      // [1 x 7]
  cell.bias_hh = load(dump, "bias_hh_l0");      // [1 x 7]
  const Matrix X = load(dump, "x");             // [13 x 5]
  const RowVector h0 = load(dump, "h0");        // [1 x 7]
  ASSERT_EQ(X.rows(), 13);
  const std::vector<MatrixD> by_hand = jacobians_by_hand(cell, X, h0);
  const MatrixD dumped = attn_test::load(dump, "d_a5_d_x1");  // [7 x 5]
  ASSERT_EQ(dumped.rows(), 7);
  ASSERT_EQ(dumped.cols(), 5);
  // Both are double: five products of O(1) [7 x 7] matrices, each entry a sum of at most 7
  // terms, round at ~7 * 2^-53 = 8e-16 relative per step; 1e-13 absolute is that with room.
  EXPECT_LT((dumped - by_hand[4]).cwiseAbs().maxCoeff(), 1e-13);
  // And it is not d a<13>/d x<1>: eight more steps change the entries by far more than the
  // rounding above (3.5e-2 for this seed), so the old name was wrong.
  EXPECT_GT((dumped - by_hand[12]).cwiseAbs().maxCoeff(), 1e-3);
  fs::remove_all(dir);
}

TEST(Chapter01, AcceptedKnobsPassTheirOwnCheck) {
  // --hidden 1 with many inputs saturates tanh: d a<5>/d x<1> is ~1e-19, below what central
  // differences resolve. The chapter printed "DOES NOT MATCH" for a chain rule that is right,
  // exited 1 and skipped the rest; the check now has an absolute floor, and says so.
  const fs::path dir = chapter.scratch("tiny_jacobian");
  for (const std::string args : {"--hidden 1 --input-size 64", "--hidden 1 --seed 7",
                                 "--hidden 1 --input-size 64 --seed 3"}) {
    const Output r = chapter.run("--no-plots " + args, dir);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    EXPECT_EQ(r.err, "") << args;
    EXPECT_FALSE(attn_test::contains(r.out, "DOES NOT MATCH")) << args;
    EXPECT_TRUE(attn_test::contains(r.out, "analytic d a<5>/d x<1> matches central finite "
                                           "differences"))
        << args;
    EXPECT_TRUE(attn_test::contains(r.out, "== What to notice")) << args;
  }
  const Output r = chapter.run("--no-plots --hidden 1 --input-size 64", dir);
  EXPECT_TRUE(attn_test::contains(r.out, "<= 1e-07")) << "the floor is named";
  EXPECT_TRUE(
      attn_test::contains(attn_test::unwrapped(r.out), "only that absolute floor is checked"));
  fs::remove_all(dir);
}

TEST(Chapter01, ContextNoticeFollowsTheSizes) {
  // Two steps of one input feature are 2 numbers; a context of 4 holds them whole, so the
  // notice may not say the 2 inputs are squeezed through fewer numbers.
  const fs::path dir = chapter.scratch("context");
  const Output r = chapter.run("--no-plots --steps 2 --input-size 1 --hidden 4", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string text = attn_test::unwrapped(r.out);
  EXPECT_FALSE(attn_test::contains(text, "these 4 numbers: the context is a bottleneck"));
  EXPECT_TRUE(attn_test::contains(text, "Here they outnumber the 2 input numbers"));
  // The default sizes, 5 steps of 3 features through 4 numbers, keep the plain statement.
  const Output d = chapter.run("--no-plots", dir);
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_TRUE(attn_test::contains(attn_test::unwrapped(d.out),
                                  "these 4 numbers: the context is a bottleneck"));
  fs::remove_all(dir);
}

}  // namespace test_01_rnn
