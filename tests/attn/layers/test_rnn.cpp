// attn::rnn_*: PyTorch's nn.RNN to float rounding, a step by hand, the Jacobian d a<t> / d x<1>
// against autograd and finite differences, the four shapes, and every shape error.
#include "attn/layers/parameters.hpp"
#include "attn/layers/rnn.hpp"

#include "course/npy.hpp"

#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_rnn {

using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::RowVector;

// PyTorch and attn::rnn_forward both compute in float32, but their matrix products add the
// I + H terms of each pre-activation in different orders (reference BLAS versus Eigen, with
// or without FMA), so each pre-activation differs by a few ulps of O(1) values: ~(I + H) 2^-24,
// under 1e-6 for these sizes. tanh has slope <= 1 and the fixtures' recurrences contract, so
// the error does not grow along the sequence (measured: at most 1.2e-7, also for T = 40).
// 1e-5 absolute on states in (-1, 1) leaves room for other BLAS orders and compilers, and a
// wrong bias, transpose or step order would still miss it by orders of magnitude.
constexpr float kTorchTol = 1e-5f;

std::filesystem::path fixture(const std::string& name) {
  return attn_test::fixture("rnn", "rnn_" + name + ".npy");
}

Matrix load(const std::string& name) { return course::read_npy(fixture(name)).to_matrix(); }

attn::RnnCell load_cell(const std::string& c) {
  attn::RnnCell cell;
  cell.weight_ih = load(c + "_weight_ih");  // [H x I]
  cell.weight_hh = load(c + "_weight_hh");  // [H x H]
  cell.bias_ih = load(c + "_bias_ih");      // [H] read as [1 x H]
  cell.bias_hh = load(c + "_bias_hh");      // [1 x H]
  return cell;
}

attn::Linear load_head(const std::string& c) {
  return {load(c + "_head_weight"), load(c + "_head_bias")};
}

// A 1 x 1 cell with round numbers, for checks by hand.
attn::RnnCell scalar_cell(float w_ih, float w_hh, float b_ih, float b_hh) {
  attn::RnnCell cell;
  cell.weight_ih = Matrix::Constant(1, 1, w_ih);
  cell.weight_hh = Matrix::Constant(1, 1, w_hh);
  cell.bias_ih = RowVector::Constant(1, b_ih);
  cell.bias_hh = RowVector::Constant(1, b_hh);
  return cell;
}

// ---- Against PyTorch ----------------------------------------------------------------------------

class RnnFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(RnnFixture, HiddenStatesMatchTorchNnRnn) {
  const std::string c = GetParam();
  const attn::RnnCell cell = load_cell(c);
  const Matrix X = load(c + "_x");                     // [T x I]
  const RowVector h0 = load(c + "_h0");                // [1 x H]
  const Matrix expected = load(c + "_hidden_states");  // [T x H], PyTorch's output
  const Matrix A = attn::rnn_forward(cell, X, h0);
  ASSERT_EQ(A.rows(), expected.rows());
  ASSERT_EQ(A.cols(), expected.cols());
  EXPECT_LE((A - expected).cwiseAbs().maxCoeff(), kTorchTol) << "case " << c;
}

TEST_P(RnnFixture, ManyToManyHeadMatchesLinearThenSoftmax) {
  const std::string c = GetParam();
  const attn::RnnRun run =
      attn::many_to_many(load_cell(c), load_head(c), load(c + "_x"), load(c + "_h0"));
  const Matrix expected = load(c + "_y");  // [T x O]
  ASSERT_EQ(run.outputs.rows(), expected.rows());
  ASSERT_EQ(run.outputs.cols(), expected.cols());
  // The states carry the 1e-5 above; W_y (entries below 1/sqrt(H)) and softmax (slope <= 1/2
  // per logit) do not enlarge it.
  EXPECT_LE((run.outputs - expected).cwiseAbs().maxCoeff(), kTorchTol) << "case " << c;
}

INSTANTIATE_TEST_SUITE_P(Cases, RnnFixture, ::testing::Values("small", "h0", "long"));

TEST(Rnn, JacobiansMatchTorchAutograd) {
  const attn::RnnCell cell = load_cell("h0");
  const Matrix X = load("h0_x");
  const RowVector h0 = load("h0_h0");
  const course::NpyArray ref = course::read_npy(fixture("h0_jacobians"));  // [T, H, I] float64
  const std::vector<MatrixD> J = attn::input_jacobians(cell, X, h0);
  ASSERT_EQ(ref.shape.size(), 3u);
  ASSERT_EQ(J.size(), ref.shape[0]);
  const std::size_t H = ref.shape[1], I = ref.shape[2];
  // Both sides are double arithmetic on the same float32 weights and inputs; only the order
  // of a few dozen additions differs, so agreement is to ~1e-15 on entries of size <= 1.
  for (std::size_t t = 0; t < J.size(); ++t) {
    ASSERT_EQ(J[t].rows(), static_cast<Index>(H));
    ASSERT_EQ(J[t].cols(), static_cast<Index>(I));
    for (std::size_t h = 0; h < H; ++h) {
      for (std::size_t i = 0; i < I; ++i) {
        EXPECT_NEAR(J[t](static_cast<Index>(h), static_cast<Index>(i)),
                    ref.data[(t * H + h) * I + i], 1e-12)
            << "d a<" << t + 1 << "> / d x<1> at (" << h << ", " << i << ")";
      }
    }
  }
}

// ---- By hand ------------------------------------------------------------------------------------

TEST(Rnn, OneStepByHand) {
  // a = tanh(w_ih x + b_ih + w_hh a_prev + b_hh) = tanh(0.5*2 + 0.25 - 1*0.5 - 0.25) = tanh(0.5)
  const attn::RnnCell cell = scalar_cell(0.5f, -1.0f, 0.25f, -0.25f);
  const RowVector a =
      attn::rnn_step(cell, RowVector::Constant(1, 2.0f), RowVector::Constant(1, 0.5f));
  // Every intermediate (1, 1.25, 0.75, 0.5) is exact in float; only tanh rounds.
  EXPECT_NEAR(a(0), std::tanh(0.5), 1e-7);  // tanh(0.5) = 0.46211715726...
}

TEST(Rnn, TwoStepsByHandAndTheirJacobian) {
  // From a<0> = 0: a<1> = tanh(0.5*2 + 0.25 - 0.25) = tanh(1);
  //                a<2> = tanh(0.5*0 + 0.25 - a<1> - 0.25) = tanh(-tanh(1)).
  const attn::RnnCell cell = scalar_cell(0.5f, -1.0f, 0.25f, -0.25f);
  Matrix X(2, 1);
  X << 2.0f, 0.0f;
  const Matrix A = attn::rnn_forward(cell, X);
  const double a1 = std::tanh(1.0), a2 = std::tanh(-std::tanh(1.0));
  EXPECT_NEAR(A(0, 0), a1, 1e-7);
  EXPECT_NEAR(A(1, 0), a2, 2e-7);  // a<1>'s float rounding passes through once more
  // Chain rule by hand: d a<1>/d x<1> = (1 - a1^2) w_ih, d a<2>/d x<1> = (1 - a2^2) w_hh (that).
  const std::vector<MatrixD> J = attn::input_jacobians(cell, X, RowVector::Zero(1));
  ASSERT_EQ(J.size(), 2u);
  EXPECT_NEAR(J[0](0, 0), (1 - a1 * a1) * 0.5, 1e-15);
  EXPECT_NEAR(J[1](0, 0), (1 - a2 * a2) * -1.0 * (1 - a1 * a1) * 0.5, 1e-15);
}

TEST(Rnn, OnlyTheSumOfTheTwoBiasesMatters) {
  // The notes' b_a = b_ih + b_hh: moving all of it into b_ih gives the same states.
  attn::Rng rng(11);
  attn::RnnCell cell = attn::rnn_init(rng, 3, 4);
  const Matrix X = attn::random_normal(rng, 6, 3);  // [6 x 3]
  attn::RnnCell merged = cell;
  merged.bias_ih = cell.bias_ih + cell.bias_hh;
  merged.bias_hh.setZero();
  // The float sum is grouped differently ((p + b_ih) + (r + b_hh) versus (p + b_a) + r), so
  // the pre-activations differ by an ulp or two of O(1) values.
  EXPECT_LE((attn::rnn_forward(cell, X) - attn::rnn_forward(merged, X)).cwiseAbs().maxCoeff(),
            1e-6f);
}

TEST(Rnn, ForwardEqualsStepByStep) {
  attn::Rng rng(5);
  const attn::RnnCell cell = attn::rnn_init(rng, 3, 4);
  const Matrix X = attn::random_normal(rng, 7, 3);              // [7 x 3]
  const RowVector h0 = attn::random_normal(rng, 1, 4, 0, 0.5);  // [1 x 4]
  const Matrix A = attn::rnn_forward(cell, X, h0);              // [7 x 4]
  RowVector a = h0;
  for (Index t = 0; t < X.rows(); ++t) {
    a = attn::rnn_step(cell, X.row(t), a);
    // One product for all t (GEMM) versus one per step (GEMV) may add the three input terms
    // in another order: a few ulps of O(1) values.
    EXPECT_LE((A.row(t) - a).cwiseAbs().maxCoeff(), 1e-6f) << "t = " << t + 1;
  }
  // The double-precision unroll is the same recurrence.
  const MatrixD Ad =
      attn::rnn_forward(attn::cast<double>(cell), X.cast<double>(), h0.cast<double>());
  EXPECT_LE((A.cast<double>() - Ad).cwiseAbs().maxCoeff(), 1e-6);
}

TEST(Rnn, InitialisationIsPyTorchsUniformRange) {
  attn::Rng rng(2026);
  const attn::RnnCell cell = attn::rnn_init(rng, 5, 16);
  EXPECT_EQ(cell.weight_ih.rows(), 16);
  EXPECT_EQ(cell.weight_ih.cols(), 5);
  EXPECT_EQ(cell.weight_hh.rows(), 16);
  EXPECT_EQ(cell.weight_hh.cols(), 16);
  EXPECT_EQ(cell.bias_ih.cols(), 16);
  EXPECT_EQ(cell.bias_hh.cols(), 16);
  const float k = 0.25f;  // 1/sqrt(16)
  for (const Matrix& p : {Matrix(cell.weight_ih), Matrix(cell.weight_hh), Matrix(cell.bias_ih),
                          Matrix(cell.bias_hh)}) {
    EXPECT_LE(p.cwiseAbs().maxCoeff(), k);
  }
  // 256 draws from U(-0.25, 0.25) reach beyond +-0.2 on both sides (probability of not doing
  // so: 2 (0.9)^256 ~ 4e-12), so the range really is the whole interval.
  EXPECT_GT(cell.weight_hh.maxCoeff(), 0.2f);
  EXPECT_LT(cell.weight_hh.minCoeff(), -0.2f);
  // Same seed, same parameters.
  attn::Rng again(2026);
  EXPECT_EQ(attn::rnn_init(again, 5, 16).weight_hh, cell.weight_hh);
}

// ---- The Jacobian against finite differences ----------------------------------------------------

TEST(Rnn, JacobianMatchesCentralDifferences) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    attn::Rng rng(seed);
    const attn::RnnCell cell = attn::rnn_init(rng, 3, 5);
    const Matrix X = attn::random_normal(rng, 5, 3);                     // [5 x 3]
    const RowVector h0 = attn::random_normal(rng, 1, 5, 0.0, 0.5);       // [1 x 5]
    const MatrixD analytic = attn::input_jacobians(cell, X, h0).back();  // [5 x 3]
    const MatrixD numeric = attn::input_jacobian_central_difference(cell, X, h0, 1e-4);
    // Central differences are off by (eps^2 / 6) |a'''| ~ 1e-9 plus the double rounding of
    // the quotient, ~1e-16 / 1e-4 = 1e-12 (measured: under 1e-9 relative for 8 seeds).
    // Relative to the largest entry, 1e-7 leaves a 100x margin; a wrong factor anywhere in
    // the chain rule would be off by far more.
    const double scale = analytic.cwiseAbs().maxCoeff();
    ASSERT_GT(scale, 0.0);
    EXPECT_LE((analytic - numeric).cwiseAbs().maxCoeff() / scale, 1e-7) << "seed " << seed;
  }
}

TEST(Rnn, JacobianVanishesWithoutRecurrentWeights) {
  // With W_hh = 0 nothing of x<1> reaches past a<1>.
  attn::Rng rng(9);
  attn::RnnCell cell = attn::rnn_init(rng, 2, 3);
  cell.weight_hh.setZero();
  const std::vector<MatrixD> J =
      attn::input_jacobians(cell, attn::random_normal(rng, 4, 2), RowVector::Zero(3));
  EXPECT_GT(J[0].norm(), 0.0);
  for (std::size_t t = 1; t < J.size(); ++t) EXPECT_EQ(J[t].norm(), 0.0);
}

// ---- The four shapes ----------------------------------------------------------------------------

class Shapes : public ::testing::Test {
 protected:
  attn::Rng rng{42};
  attn::RnnCell cell = attn::rnn_init(rng, 3, 4);    // I = 3, H = 4
  attn::Linear head = attn::linear_init(rng, 4, 2);  // O = 2
  Matrix X = attn::random_normal(rng, 5, 3);         // [5 x 3]
  RowVector h0 = RowVector::Zero(4);
};

TEST_F(Shapes, ManyToOneUsesTheLastState) {
  const attn::RnnRun one = attn::many_to_one(cell, head, X, h0);
  EXPECT_EQ(one.states.rows(), 5);
  EXPECT_EQ(one.states.cols(), 4);
  ASSERT_EQ(one.outputs.rows(), 1);
  ASSERT_EQ(one.outputs.cols(), 2);
  const attn::RnnRun all = attn::many_to_many(cell, head, X, h0);
  EXPECT_EQ(all.outputs.rows(), 5);
  EXPECT_EQ(all.outputs.cols(), 2);
  EXPECT_EQ(one.outputs, all.outputs.bottomRows(1));  // the same float operations
  for (Index t = 0; t < 5; ++t) EXPECT_NEAR(all.outputs.row(t).sum(), 1.0f, 1e-6f);
}

TEST_F(Shapes, OneToManyFeedsEachOutputBack) {
  attn::Rng g(7);
  const attn::RnnCell gen = attn::rnn_init(g, 3, 4);
  const attn::Linear gen_head = attn::linear_init(g, 4, 3);  // O = I = 3
  const RowVector x1 = X.row(0);
  const attn::RnnRun run = attn::one_to_many(gen, gen_head, x1, h0, 6);
  ASSERT_EQ(run.states.rows(), 6);
  ASSERT_EQ(run.outputs.rows(), 6);
  EXPECT_EQ(run.outputs.cols(), 3);
  // Replay: x<1> = x1, then x<t+1> = y_hat<t>.
  RowVector a = attn::rnn_step(gen, x1, h0);
  EXPECT_EQ(run.states.row(0), a);
  for (Index t = 1; t < 6; ++t) {
    a = attn::rnn_step(gen, run.outputs.row(t - 1), a);
    EXPECT_EQ(run.states.row(t), a) << "t = " << t + 1;  // the very same calls
  }
}

TEST_F(Shapes, Seq2SeqPassesOnlyTheContextVector) {
  attn::Rng g(8);
  const attn::RnnCell decoder = attn::rnn_init(g, 2, 4);  // input O = 2, state H = 4
  const attn::RnnSeq2SeqRun run = attn::rnn_seq2seq(cell, decoder, head, X, h0, 3);
  EXPECT_EQ(run.encoder_states.rows(), 5);
  EXPECT_EQ(run.decoder_states.rows(), 3);
  EXPECT_EQ(run.outputs.rows(), 3);
  EXPECT_EQ(run.outputs.cols(), 2);
  EXPECT_EQ(run.context, RowVector(run.encoder_states.row(4)));
  EXPECT_EQ(run.encoder_states, attn::rnn_forward(cell, X, h0));
  // The decoder's first step: start token x<1> = 0, a<0> = the context.
  EXPECT_EQ(RowVector(run.decoder_states.row(0)),
            attn::rnn_step(decoder, RowVector::Zero(2), run.context));
  // The bottleneck: the outputs are a function of the context alone (the decoder run from the
  // context, with X nowhere in sight, reproduces them exactly).
  const attn::RnnRun from_context =
      attn::one_to_many(decoder, head, RowVector::Zero(2), run.context, 3);
  EXPECT_EQ(from_context.outputs, run.outputs);
  EXPECT_EQ(from_context.states, run.decoder_states);
}

// ---- Shape errors -------------------------------------------------------------------------------

// Expects std::invalid_argument whose message contains `needle`.
template <typename F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning \"" << needle << "\"";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(Shapes, ErrorsNameTheShapes) {
  const Matrix X_bad = Matrix::Zero(5, 2);
  expect_invalid([&] { attn::rnn_forward(cell, X_bad); }, "rnn_forward: X is [5 x 2]");
  expect_invalid([&] { attn::rnn_forward(cell, X, RowVector::Zero(3)); }, "h0 is [1 x 3]");
  expect_invalid([&] { attn::rnn_step(cell, RowVector::Zero(2), h0); }, "x is [1 x 2]");
  expect_invalid([&] { attn::rnn_step(cell, RowVector::Zero(3), RowVector::Zero(5)); },
                 "h0 is [1 x 5]");
  const attn::RnnCellD celld = attn::cast<double>(cell);
  expect_invalid([&] { attn::rnn_forward(celld, MatrixD::Zero(5, 4), MatrixD::Zero(1, 4)); },
                 "X is [5 x 4]");
  expect_invalid([&] { attn::rnn_forward(celld, MatrixD::Zero(5, 3), MatrixD::Zero(2, 4)); },
                 "h0 is [2 x 4]");

  attn::RnnCell broken = cell;
  broken.weight_hh = Matrix::Zero(4, 3);
  expect_invalid([&] { attn::rnn_forward(broken, X); }, "weight_hh is [4 x 3]");
  broken = cell;
  broken.bias_ih = RowVector::Zero(5);
  expect_invalid([&] { attn::rnn_forward(broken, X); }, "bias_ih is [1 x 5]");
  broken = cell;
  broken.bias_hh = RowVector::Zero(3);
  expect_invalid([&] { attn::rnn_forward(broken, X); }, "bias_hh is [1 x 3]");
  broken = cell;
  broken.weight_ih = Matrix(0, 0);
  expect_invalid([&] { attn::rnn_forward(broken, X); }, "weight_ih is [0 x 0]");

  attn::Linear bad_head = head;
  bad_head.weight = Matrix::Zero(2, 5);
  expect_invalid([&] { attn::many_to_many(cell, bad_head, X, h0); }, "W_y is [2 x 5]");
  expect_invalid([&] { attn::softmax_output(bad_head, Matrix::Zero(3, 4)); }, "W_y is [2 x 5]");
  bad_head = head;
  bad_head.bias = RowVector::Zero(3);
  expect_invalid([&] { attn::many_to_one(cell, bad_head, X, h0); }, "b_y is [1 x 3]");

  const Matrix empty(0, 3);
  expect_invalid([&] { attn::many_to_one(cell, head, empty, h0); }, "X is [0 x 3]");
  expect_invalid([&] { attn::input_jacobians(cell, empty, h0); }, "X is [0 x 3]");
  expect_invalid([&] { attn::input_jacobians(cell, X_bad, h0); }, "X is [5 x 2]");
  expect_invalid([&] { attn::input_jacobian_central_difference(cell, X, h0, 0.0); }, "eps is 0");
  // 1->N feeds y_hat (O = 2) back as x (I = 3): refused.
  expect_invalid([&] { attn::one_to_many(cell, head, X.row(0), h0, 3); }, "W_y is [2 x 4]");
  attn::Rng g(3);
  const attn::Linear square = attn::linear_init(g, 4, 3);
  expect_invalid([&] { attn::one_to_many(cell, square, X.row(0), h0, 0); }, "steps is 0");
  const attn::RnnCell small_decoder = attn::rnn_init(g, 2, 6);
  expect_invalid([&] { attn::rnn_seq2seq(cell, small_decoder, head, X, h0, 2); },
                 "the decoder's is [6 x 6]");
  expect_invalid([&] { attn::rnn_init(g, 0, 4); }, "input size 0");
  expect_invalid([&] { attn::softmax_output(attn::Linear{}, Matrix::Zero(3, 4)); },
                 "W_y is [0 x 0]");
}

// nn.RNN(3, 4).state_dict() has these four keys in this order, and 4*3 + 4*4 + 4 + 4 = 36
// numbers; the double twin holds the very same numbers.
TEST(Rnn, ParametersAreNnRnnsStateDict) {
  attn::Rng rng(5);
  const attn::RnnCell cell = attn::rnn_init(rng, 3, 4);
  std::vector<std::string> keys;
  for (const auto& p : attn::parameters(cell)) keys.push_back(p.key);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"}));
  EXPECT_EQ(attn::parameter_count(cell), 36);
  const attn::RnnCellD twin = attn::cast<double>(cell);
  EXPECT_EQ(twin.weight_hh, cell.weight_hh.cast<double>());
  EXPECT_EQ(twin.bias_hh, cell.bias_hh.cast<double>());
}

// Eigenvalues by hand: [[0, -2], [2, 0]] has +-2i (|.| = 2, though no entry's magnitude
// exceeds 2 and the trace is 0); a triangular matrix has its diagonal, here 0.5 and -3.
TEST(Rnn, SpectralRadiusIsTheLargestAbsoluteEigenvalue) {
  Matrix rotation(2, 2), triangular(2, 2);
  rotation << 0, -2,  //
      2, 0;
  triangular << 0.5f, 7,  //
      0, -3;
  EXPECT_NEAR(attn::spectral_radius(rotation), 2.0, 1e-12);  // double eigenvalues of O(1)
  EXPECT_NEAR(attn::spectral_radius(triangular), 3.0, 1e-12);
  EXPECT_EQ(attn_test::message_of([] { attn::spectral_radius(Matrix::Zero(2, 3)); }),
            "spectral_radius: W is [2 x 3]: it must be square and not empty");
}

TEST(Rnn, EmptySequenceGivesNoStates) {
  attn::Rng rng(1);
  const attn::RnnCell cell = attn::rnn_init(rng, 2, 3);
  const Matrix A = attn::rnn_forward(cell, Matrix(0, 2));
  EXPECT_EQ(A.rows(), 0);
  EXPECT_EQ(A.cols(), 3);
}

}  // namespace test_rnn
