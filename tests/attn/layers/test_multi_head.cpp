// Multi-head attention, Linear and LayerNorm (chapter 06): torch.nn.MultiheadAttention and
// torch.nn.LayerNorm fixtures, the equivalences the chapter claims (heads are column blocks of
// one projection, one head is chapter 05's attention, heads do not see each other's columns),
// LayerNorm by hand, and every shape error.
#include "attn/core/random.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/parameters.hpp"
#include "course/npy.hpp"

#include "backward_fixture.hpp"
#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>

namespace test_multi_head {

using attn_test::identical;
using attn_test::message_of;

using attn::Batch;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::RowVector;

std::filesystem::path data(const std::string& file) {
  return attn_test::fixture("multi_head", file);
}

// ---- torch.nn.MultiheadAttention ----------------------------------------------------------------

struct MhaCase {
  const char* name;
  Index heads;
  bool bias;
};
// By name: ctest lists a parameter as gtest prints it, and its raw bytes hold a pointer.
void PrintTo(const MhaCase& c, std::ostream* os) { *os << c.name; }

class MhaFixture : public ::testing::TestWithParam<MhaCase> {};

TEST_P(MhaFixture, MatchesTorchMultiheadAttention) {
  const MhaCase c = GetParam();
  const std::string p = std::string("mha_") + c.name + "_";
  const auto load = [&](const std::string& what) {
    return course::read_npy(data(p + what + ".npy"));
  };
  const Matrix in_w = load("in_proj_weight").to_matrix();    // [3E x E]
  const Matrix out_w = load("out_proj_weight").to_matrix();  // [E x E]
  const RowVector in_b = c.bias ? RowVector(load("in_proj_bias").to_matrix()) : RowVector();
  const RowVector out_b = c.bias ? RowVector(load("out_proj_bias").to_matrix()) : RowVector();
  const attn::MultiHeadAttention mha =
      attn::multi_head_from_pytorch(in_w, in_b, out_w, out_b, c.heads);
  const Batch query = load("query").to_batch(), key = load("key").to_batch(),
              value = load("value").to_batch(), allowed_f = load("allowed").to_batch();
  attn::AllowedBatch allowed(allowed_f.batch(), allowed_f.rows(), allowed_f.cols());
  allowed.data() = allowed_f.data().array() != 0.0f;  // the fixture stores 1 = may attend

  const attn::MultiHeadBatchResult r =
      attn::multi_head_forward(mha, query, key, value, {.allowed = allowed});
  const Batch out = load("out").to_batch(), avg = load("weights_avg").to_batch();
  const course::NpyArray heads = load("weights_heads");  // [B, H, n_q, n_k]
  ASSERT_EQ(r.out.shape(), out.shape());
  ASSERT_EQ(heads.size(), static_cast<std::size_t>(r.weights.data().size()));
  // float32 on both sides, E <= 16: projections sum <= 16 products of O(1) numbers (~1e-6
  // rounding each way), PyTorch scales q before its product and we scale the product (a few
  // ulps more), and W_O sums 16 more. The fixture script found PyTorch within 1e-6 of the
  // float64 formula; 1e-5 leaves room for both sides' rounding.
  EXPECT_LT((r.out.data() - out.data()).cwiseAbs().maxCoeff(), 1e-5f) << c.name;
  EXPECT_LT((r.average_weights().data() - avg.data()).cwiseAbs().maxCoeff(), 1e-5f) << c.name;
  // [B, H, n_q, n_k] in C order is exactly our [B*H, n_q, n_k] stack: compare element by element.
  double worst = 0.0;
  for (std::size_t i = 0; i < heads.size(); ++i) {
    const double ours = r.weights.data().data()[i];
    worst = std::max(worst, std::abs(heads.data[i] - ours));
  }
  EXPECT_LT(worst, 1e-5) << c.name;
  // Padded keys get exactly 0 in every head.
  for (Index b = 0; b < query.batch(); ++b) {
    for (Index h = 0; h < c.heads; ++h) {
      const Matrix w = r.head_weights(b, h);  // [n_q x n_k]
      EXPECT_TRUE((allowed[b].array() || w.array() == 0.0f).all()) << c.name << " " << b << h;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, MhaFixture,
                         ::testing::Values(MhaCase{"pad", 4, true}, MhaCase{"cross", 3, true},
                                           MhaCase{"nobias", 2, false},
                                           MhaCase{"one_head", 1, true}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- The equivalences ---------------------------------------------------------------------------

struct Layer {
  attn::MultiHeadAttention mha;
  Matrix X;  // [n x E]
};

Layer random_setup(std::uint64_t seed, Index E, Index H, Index n) {
  attn::Rng rng(seed);
  Layer s{attn::multi_head_init(rng, E, H), attn::random_normal(rng, n, E)};
  // Non-zero biases, so they are part of every check.
  for (attn::Linear* l : {&s.mha.q_proj, &s.mha.k_proj, &s.mha.v_proj, &s.mha.out_proj}) {
    l->bias = attn::random_uniform(rng, 1, E, -0.5, 0.5);
  }
  return s;
}

TEST(MultiHead, EightSmallProjectionsAreOneBigOne) {
  // W_Q [512 x 512] is eight [64 x 512] projections stacked by rows; their outputs side by
  // side are Q's column blocks. The small and the big product add the same 512 terms per
  // entry, possibly grouped differently by Eigen's blocking, so compare both to double:
  // |error| <= 512 * 2^-24 * sum|terms| ~ 1e-4 for these N(0,1) inputs; 2e-4 is the bound.
  const Layer s = random_setup(1, 512, 8, 5);
  const Matrix Q = attn::linear_forward(s.mha.q_proj, s.X);                          // [5 x 512]
  MatrixD Qd = s.X.cast<double>() * s.mha.q_proj.weight.cast<double>().transpose();  // [5 x 512]
  Qd.rowwise() += s.mha.q_proj.bias.cast<double>();
  for (Index h = 0; h < 8; ++h) {
    attn::Linear head{s.mha.q_proj.weight.middleRows(h * 64, 64),  // W_Q^h [64 x 512]
                      s.mha.q_proj.bias.segment(h * 64, 64)};      // [1 x 64]
    const Matrix Qh = attn::linear_forward(head, s.X);             // [5 x 64]
    EXPECT_LT((Qh.cast<double>() - Qd.middleCols(h * 64, 64)).cwiseAbs().maxCoeff(), 2e-4) << h;
    EXPECT_LT((Q.middleCols(h * 64, 64) - Qh).cwiseAbs().maxCoeff(), 2e-4f) << h;
  }
}

TEST(MultiHead, OneHeadIsChapter05sAttentionWithProjections) {
  const Layer s = random_setup(2, 16, 1, 6);
  const attn::AllowedMask causal = attn::causal_mask(6);
  const auto mh = attn::multi_head_forward(s.mha, s.X, s.X, s.X, {.allowed = causal});
  const Matrix Q = attn::linear_forward(s.mha.q_proj, s.X);  // [6 x 16]
  const Matrix K = attn::linear_forward(s.mha.k_proj, s.X);  // [6 x 16]
  const Matrix V = attn::linear_forward(s.mha.v_proj, s.X);  // [6 x 16]
  const auto one = attn::attention(Q, K, V, {.allowed = causal});
  EXPECT_TRUE(identical(mh.weights[0], one.weights));
  EXPECT_TRUE(identical(mh.concat, one.out));
  EXPECT_TRUE(identical(mh.out, attn::linear_forward(s.mha.out_proj, one.out)));
}

TEST(MultiHead, EachHeadWritesOnlyItsOwnColumns) {
  // Change head 2's rows of W_V: the concatenation changes in head 2's columns only, bit for
  // bit, and every head's weights stay the same (V does not enter the weights).
  Layer s = random_setup(3, 32, 4, 5);
  const auto before = attn::multi_head_forward(s.mha, s.X, s.X, s.X);
  attn::Rng rng(99);
  s.mha.v_proj.weight.middleRows(16, 8) = attn::random_normal(rng, 8, 32);
  const auto after = attn::multi_head_forward(s.mha, s.X, s.X, s.X);
  for (Index h = 0; h < 4; ++h) {
    EXPECT_TRUE(identical(after.weights[static_cast<std::size_t>(h)],
                          before.weights[static_cast<std::size_t>(h)]));
    const bool same =
        identical(after.concat.middleCols(h * 8, 8), before.concat.middleCols(h * 8, 8));
    EXPECT_EQ(same, h != 2) << "head " << h;
  }
}

TEST(MultiHead, PyTorchsStackedLayoutRoundTrips) {
  const Layer s = random_setup(9, 12, 3, 2);
  const attn::MultiHeadAttention back =
      attn::multi_head_from_pytorch(attn::in_proj_weight(s.mha), attn::in_proj_bias(s.mha),
                                    s.mha.out_proj.weight, s.mha.out_proj.bias, 3);
  EXPECT_TRUE(identical(back.q_proj.weight, s.mha.q_proj.weight));
  EXPECT_TRUE(identical(back.k_proj.weight, s.mha.k_proj.weight));
  EXPECT_TRUE(identical(back.v_proj.weight, s.mha.v_proj.weight));
  EXPECT_TRUE(identical(back.v_proj.bias, s.mha.v_proj.bias));
  EXPECT_EQ(attn::in_proj_weight(s.mha).rows(), 36);
}

TEST(MultiHead, ParametersDoNotDependOnTheNumberOfHeads) {
  for (Index H : {1, 2, 4, 8, 16}) {
    attn::Rng rng(4);
    EXPECT_EQ(attn::multi_head_init(rng, 512, H).parameter_count(), 4 * 512 * 512 + 4 * 512) << H;
  }
}

TEST(MultiHead, InitialisationMatchesPyTorchsRanges) {
  attn::Rng rng(5);
  const auto mha = attn::multi_head_init(rng, 64, 4);
  const float xavier = std::sqrt(6.0f / (4 * 64)), linear = 1.0f / 8.0f;
  for (const attn::Linear* l : {&mha.q_proj, &mha.k_proj, &mha.v_proj}) {
    EXPECT_LE(l->weight.cwiseAbs().maxCoeff(), xavier);
    EXPECT_GT(l->weight.cwiseAbs().maxCoeff(), 0.9f * xavier);  // 4096 draws reach the edge
    EXPECT_TRUE(l->bias.isZero(0.0f));
  }
  EXPECT_LE(mha.out_proj.weight.cwiseAbs().maxCoeff(), linear);
  EXPECT_TRUE(mha.out_proj.bias.isZero(0.0f));
}

TEST(MultiHead, AQueryWithNothingToSeeGetsTheOutputBias) {
  const Layer s = random_setup(6, 8, 2, 3);
  attn::AllowedMask mask = attn::full_mask(3, 3);
  mask.row(1).setConstant(false);
  const auto r = attn::multi_head_forward(s.mha, s.X, s.X, s.X, {.allowed = mask});
  EXPECT_TRUE(r.concat.row(1).isZero(0.0f));
  EXPECT_TRUE(identical(r.out.row(1), s.mha.out_proj.bias));  // 0 W_O^T + b_O, exactly
  EXPECT_TRUE(r.out.allFinite());
}

// Issue 11 (item 14): the heads computed a blocked query's output as 0 * V_h, which is NaN when a
// value is infinite, so the "output bias exactly" above held only for finite values. The rows of
// a query with no allowed key are now written as zeros, whatever the values hold.
TEST(MultiHead, AQueryWithNothingToSeeGetsTheOutputBiasWhateverTheValuesHold) {
  const Layer s = random_setup(6, 8, 2, 3);
  attn::AllowedMask mask = attn::full_mask(3, 3);
  mask.row(1).setConstant(false);
  Matrix value = s.X;
  value(2, 0) = std::numeric_limits<float>::infinity();  // V's row 2 is +-inf in every column
  const auto r = attn::multi_head_forward(s.mha, s.X, s.X, value, {.allowed = mask});
  EXPECT_TRUE(r.concat.row(1).isZero(0.0f));
  EXPECT_TRUE(identical(r.out.row(1), s.mha.out_proj.bias));
  // The others see token 2 and are not finite: the infinity did reach the heads.
  EXPECT_FALSE(r.out.row(0).allFinite());
  EXPECT_FALSE(r.out.row(2).allFinite());
}

// ---- Errors name the shapes ---------------------------------------------------------------------

// Issue 11: multi_head_init(rng, 0, 1) said "1 heads do not divide d_model = 0". A size of 0
// (or less) is now named as such, before the divisibility is checked, also for a layer built
// by hand.
TEST(MultiHead, AZeroSizeIsNamedAsSuch) {
  attn::Rng rng(7);
  EXPECT_EQ(message_of([&] { attn::multi_head_init(rng, 0, 1); }),
            "multi_head_init: d_model is 0: it must be at least 1");
  EXPECT_EQ(message_of([&] { attn::multi_head_init(rng, -4, 2); }),
            "multi_head_init: d_model is -4: it must be at least 1");
  EXPECT_EQ(message_of([&] { attn::multi_head_init(rng, 8, 0); }),
            "multi_head_init: heads is 0: it must be at least 1");
  const Matrix X = Matrix::Zero(2, 8);
  EXPECT_EQ(message_of([&] { attn::multi_head_forward(attn::MultiHeadAttention{}, X, X, X); }),
            "multi_head_forward: d_model is 0: it must be at least 1");
  Layer s = random_setup(8, 8, 2, 3);
  s.mha.heads = 0;
  EXPECT_EQ(message_of([&] { attn::multi_head_forward(s.mha, s.X, s.X, s.X); }),
            "multi_head_forward: heads is 0: it must be at least 1");
}

TEST(MultiHead, ShapeErrorsNameTheShapes) {
  attn::Rng rng(7);
  EXPECT_EQ(message_of([&] { attn::multi_head_init(rng, 10, 3); }),
            "multi_head_init: 3 heads do not divide d_model = 10: each head needs d_k = "
            "d_model / heads columns");
  const Layer s = random_setup(8, 8, 2, 3);
  EXPECT_EQ(message_of([&] { attn::multi_head_forward(s.mha, Matrix(3, 6), s.X, s.X); }),
            "linear_forward: x is [3 x 6] but the weight is [8 x 8]: x must have 8 columns "
            "(in_features)");
  EXPECT_EQ(message_of([&] { attn::multi_head_forward(s.mha, s.X, s.X, Matrix(2, 8)); }),
            "multi_head_forward: key is [3 x 8] but value is [2 x 8]: every key needs a value "
            "(same number of rows)");
  const attn::AllowedMask causal4 = attn::causal_mask(4);
  EXPECT_EQ(
      message_of([&] { attn::multi_head_forward(s.mha, s.X, s.X, s.X, {.allowed = causal4}); }),
      "attention: the mask is [4 x 4] but Q is [3 x 4] and K is [3 x 4]: it must be "
      "[n_q x n_k] = [3 x 3]");
  EXPECT_EQ(message_of([&] {
              attn::multi_head_from_pytorch(Matrix(8, 4), RowVector(), Matrix(4, 4), RowVector(),
                                            2);
            }),
            "multi_head_from_pytorch: in_proj_weight is [8 x 4]: it must be [3E x E] = [12 x 4] "
            "(W_Q, W_K, W_V stacked)");
  EXPECT_EQ(message_of([&] { attn::layer_norm_forward(attn::layer_norm_init(4), Matrix(2, 5)); }),
            "layer_norm_forward: x is [2 x 5] but gamma is [1 x 4]: each row of x must have d = 4 "
            "features");
  const Batch q(2, 3, 8), k(3, 3, 8);
  EXPECT_EQ(message_of([&] { attn::multi_head_forward(s.mha, q, k, k); }),
            "multi_head_forward: query is [2, 3, 8], key is [3, 3, 8], value is [3, 3, 8]: the "
            "batch sizes (first dimension) must agree");
}

}  // namespace test_multi_head

namespace test_multi_head {

// need_weights = false above one tile (n > 128): the tiled path, no weights kept, each head's L
// and the mask in the cache instead; its output and its backward agree with the plain path's
// (need_weights = true) to float rounding. The bound: outputs of size ~1 (out_proj of a mean
// of values), sums of ~200 terms: 2e-5 is ~170 ulps of 1, far above the ~10 ulps either path is
// off by, and far below any real error (a dropped key moves an output by ~1e-2). Gradients are
// compared relative to their largest entry, the same way.
TEST(MultiHead, TheTiledPathAgreesWithThePlainOneAboveOneTile) {
  attn::Rng rng(91);
  const Index n = 200, E = 32, H = 4;
  const attn::MultiHeadAttention mha = attn::multi_head_init(rng, E, H);
  const Matrix x = attn::random_normal(rng, n, E);  // [n x E]
  attn::AllowedMask causal = attn::causal_mask(n);  // [n x n]
  causal.col(3).setConstant(false);                 // and a padded key, for a mixed mask
  causal(0, 0) = true;
  const attn::MultiHeadResult plain =
      attn::multi_head_forward(mha, x, x, x, {.allowed = causal, .need_weights = true});
  const attn::MultiHeadResult tiled =
      attn::multi_head_forward(mha, x, x, x, {.allowed = causal, .need_weights = false});
  ASSERT_TRUE(tiled.weights.empty());
  ASSERT_EQ(tiled.lse.rows(), n);
  ASSERT_EQ(tiled.lse.cols(), H);
  EXPECT_LT(attn::max_abs_diff(tiled.out, plain.out), 2e-5);
  const Matrix d_out = attn::random_normal(rng, n, E);  // [n x E]
  attn::MultiHeadAttention g_plain = attn::zeros_like(mha), g_tiled = attn::zeros_like(mha);
  const auto in_plain = attn::multi_head_backward(mha, x, x, x, plain, d_out, g_plain);
  const auto in_tiled = attn::multi_head_backward(mha, x, x, x, tiled, d_out, g_tiled);
  const auto close = [](const Matrix& a, const Matrix& b) {
    return attn::max_abs_diff(a, b) <= 2e-5 * std::max(1.0f, b.cwiseAbs().maxCoeff());
  };
  EXPECT_TRUE(close(in_tiled.d_query, in_plain.d_query));
  EXPECT_TRUE(close(in_tiled.d_key, in_plain.d_key));
  EXPECT_TRUE(close(in_tiled.d_value, in_plain.d_value));
  EXPECT_TRUE(close(g_tiled.q_proj.weight, g_plain.q_proj.weight));
  EXPECT_TRUE(close(g_tiled.k_proj.weight, g_plain.k_proj.weight));
  EXPECT_TRUE(close(g_tiled.v_proj.weight, g_plain.v_proj.weight));
  EXPECT_TRUE(close(g_tiled.out_proj.weight, g_plain.out_proj.weight));
  // Within one tile the plain path runs whatever need_weights says: there is nothing to tile.
  const Matrix small = x.topRows(100);  // [100 x E]
  EXPECT_FALSE(
      attn::multi_head_forward(mha, small, small, small, {.need_weights = false}).weights.empty());
}

// ---- The backward pass (chapter 09) ------------------------------------------------------------

using attn::AllowedMask;
using attn_test::all_zero;
using attn_test::Comparison;
using attn_test::Fixture;
using attn_test::names;
using attn_test::untouched;

TEST(MultiHeadBackward, SelfAttentionMatchesTorch) {
  // nn.MultiheadAttention(16, 4), query = key = value = x, keys 4 and 5 blocked: x reached the
  // output three ways, so its gradient is the sum of the three input gradients.
  Comparison c("mha_self");
  const Fixture& fx = c.fixture();
  const attn::MultiHeadAttention mha = fx.mha("", 4);
  const Matrix x = fx.matrix("x");
  const AllowedMask allowed = fx.mask("allowed");
  const attn::MultiHeadResult r = attn::multi_head_forward(mha, x, x, x, {.allowed = allowed});
  c.check("out", r.out);
  attn::MultiHeadAttention grads = attn::zeros_like(mha);
  const auto g = attn::multi_head_backward(mha, x, x, x, r, fx.matrix("dy"), grads);
  c.check("d_x", g.d_query + g.d_key + g.d_value);
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

TEST(MultiHeadBackward, CrossAttentionMatchesTorch) {
  // nn.MultiheadAttention(12, 3), key = value = memory: d_memory = d_key + d_value.
  Comparison c("mha_cross");
  const Fixture& fx = c.fixture();
  const attn::MultiHeadAttention mha = fx.mha("", 3);
  const Matrix query = fx.matrix("query"), memory = fx.matrix("memory");
  const AllowedMask allowed = fx.mask("allowed");  // all 1
  const attn::MultiHeadResult r =
      attn::multi_head_forward(mha, query, memory, memory, {.allowed = allowed});
  c.check("out", r.out);
  attn::MultiHeadAttention grads = attn::zeros_like(mha);
  const auto g = attn::multi_head_backward(mha, query, memory, memory, r, fx.matrix("dy"), grads);
  c.check("d_query", g.d_query);
  c.check("d_memory", g.d_key + g.d_value);
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

TEST(BackwardIdentity, KeyBiasGradientIsZeroUpToRoundOff) {
  // Adding a vector b_K to every key adds q . b_K to a whole row of scores, which the softmax
  // ignores: d loss / d b_K = 0 exactly, whatever the inputs. In the backward it is the sum of
  // dK's rows, scale sum_i (sum_j dS_ij) q_i, and every row of dS sums to 0 (dS = P * (dP -
  // rowsum(P * dP)), sum_j P_ij = 1). What is left is float round-off: a few ulps of the
  // other bias blocks' scale. (On the mha_self fixture, where PyTorch leaves <= 1.1e-7.)
  const Fixture fx{"bw_mha_self_"};
  const attn::MultiHeadAttention mha = fx.mha("", 4);
  const Matrix x = fx.matrix("x");
  const AllowedMask allowed = fx.mask("allowed");
  const attn::MultiHeadResult r = attn::multi_head_forward(mha, x, x, x, {.allowed = allowed});
  attn::MultiHeadAttention grads = attn::zeros_like(mha);
  attn::multi_head_backward(mha, x, x, x, r, fx.matrix("dy"), grads);
  const double scale =
      std::max(grads.q_proj.bias.cwiseAbs().maxCoeff(), grads.v_proj.bias.cwiseAbs().maxCoeff());
  EXPECT_GT(scale, 0.1);
  EXPECT_LE(grads.k_proj.bias.cwiseAbs().maxCoeff(), 1e-6 * scale);
}

TEST(MultiHeadBackward, CausalEarlierPositionsIgnoreTokenT) {
  // Self-attention (x = query = key = value) [6 x 16], 4 heads, causal, t = 3; x rows t..5
  // changed (token t and the ones after it).
  //  Forward, any d_out: out rows 0..t-1 are invariant (query i reads x rows <= i only).
  //  Backward with d_out rows t.. zero: d_concat rows t.. are 0, so in every head dS rows t..
  //  are 0; dQ, dK, dV rows < t then collect only from queries < t, which never read x rows
  //  >= t; dQ rows >= t are 0, and dK, dV rows >= t are 0 (keys >= t are blocked for the
  //  queries < t, the only ones passing anything back). Hence:
  //    invariant to the bit: d_x rows 0..t-1, and every parameter gradient (a parameter
  //      gradient sums products of an x row, or a concat row, with the matching row of dQ, dK,
  //      dV or d_out; for rows >= t that row is 0, so the changed x rows add only zeros);
  //    exactly 0: d_x rows t..5.
  //  Without the zero d_out, d_x rows < t DO change (through d_key and d_value: later queries
  //  attend to earlier keys and values), which the test also checks, to show the condition is
  //  needed.
  constexpr Index n = 6, t = 3, E = 16;
  attn::Rng rng(25);
  attn::MultiHeadAttention mha = attn::multi_head_init(rng, E, 4);
  mha.q_proj.bias = attn::random_normal(rng, 1, E);
  mha.v_proj.bias = attn::random_normal(rng, 1, E);
  Matrix x = attn::random_normal(rng, n, E);
  const AllowedMask causal = attn::causal_mask(n);
  struct Run {
    attn::MultiHeadResult r;
    Matrix d_x;
    attn::MultiHeadAttention grads;
  };
  const auto run = [&](const Matrix& dy) {
    Run out{attn::multi_head_forward(mha, x, x, x, {.allowed = causal}), {}, attn::zeros_like(mha)};
    const auto g = attn::multi_head_backward(mha, x, x, x, out.r, dy, out.grads);
    out.d_x = g.d_query + g.d_key + g.d_value;
    return out;
  };
  Matrix dy = attn::random_normal(rng, n, E);
  const Matrix x0 = x;
  const auto change = [&] { x.bottomRows(n - t) = attn::random_normal(rng, n - t, E, 0.0, 3.0); };
  // Any d_out: the forward rows < t are invariant, the input gradient rows < t are not.
  const Run a0 = run(dy);
  change();
  const Run a1 = run(dy);
  EXPECT_TRUE(identical(a1.r.out.topRows(t), a0.r.out.topRows(t)));
  EXPECT_FALSE(identical(a1.d_x.topRows(t), a0.d_x.topRows(t)));
  // d_out zero from t on: all of it.
  x = x0;
  dy.bottomRows(n - t).setZero();
  const Run b0 = run(dy);
  change();
  const Run b1 = run(dy);
  EXPECT_TRUE(identical(b1.r.out.topRows(t), b0.r.out.topRows(t)));
  EXPECT_FALSE(identical(b1.r.out.bottomRows(n - t), b0.r.out.bottomRows(n - t)));
  EXPECT_TRUE(identical(b1.d_x.topRows(t), b0.d_x.topRows(t)));
  EXPECT_TRUE(all_zero(b0.d_x.bottomRows(n - t)) && all_zero(b1.d_x.bottomRows(n - t)));
  const auto p0 = attn::parameters(b0.grads), p1 = attn::parameters(b1.grads);
  for (std::size_t i = 0; i < p0.size(); ++i) {
    EXPECT_TRUE(identical(p1[i].value, p0[i].value)) << p0[i].key << " from " << p0[i].first;
  }
}

TEST(MultiHeadBackward, AccumulatingTwiceDoublesExactly) {
  attn::Rng rng(14);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 8);
  attn::MultiHeadAttention mha = attn::multi_head_init(rng, 8, 2);
  mha.q_proj.bias = attn::random_normal(rng, 1, 8);  // non-zero biases, as a trained layer has
  mha.k_proj.bias = attn::random_normal(rng, 1, 8);
  const attn::MultiHeadResult r = attn::multi_head_forward(mha, x, x, x);
  attn_test::expect_accumulates_exactly(
      [&](attn::MultiHeadAttention& g) { attn::multi_head_backward(mha, x, x, x, r, dy, g); }, mha);
}

TEST(MultiHeadBackward, RejectsWrongShapes) {
  attn::Rng rng(35);
  const attn::MultiHeadAttention mha = attn::multi_head_init(rng, 8, 2);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 8);
  const attn::MultiHeadResult r = attn::multi_head_forward(mha, x, x, x);
  const Matrix x3 = attn::random_normal(rng, 3, 8);
  const attn::MultiHeadResult other = attn::multi_head_forward(mha, x3, x3, x3);
  attn::MultiHeadAttention grads = attn::zeros_like(mha);
  EXPECT_TRUE(
      names(message_of([&] { attn::multi_head_backward(mha, x, x, x, r, Matrix(5, 7), grads); }),
            "multi_head_backward"));
  EXPECT_TRUE(names(message_of([&] { attn::multi_head_backward(mha, x, x, x, other, dy, grads); }),
                    "multi_head_backward"));  // the cache of another input
  EXPECT_TRUE(untouched(grads));
  attn::MultiHeadAttention wrong = attn::zeros_like(mha);
  wrong.v_proj.weight.resize(8, 7);  // one projection's gradient of the wrong shape
  EXPECT_TRUE(names(message_of([&] { attn::multi_head_backward(mha, x, x, x, r, dy, wrong); }),
                    "multi_head_backward"));
  EXPECT_TRUE((wrong.out_proj.weight.array() == 0).all() &&
              (wrong.q_proj.weight.array() == 0).all())
      << "multi_head_backward accumulated into other gradients before it threw";
}

TEST(MultiHeadBackward, RejectsTheLayerAsItsOwnGradientsAndAQueryInsideThem) {
  attn::Rng rng(36);
  attn::MultiHeadAttention mha = attn::multi_head_init(rng, 4, 2);
  const Matrix x = attn::random_normal(rng, 3, 4);
  const attn::MultiHeadResult r = attn::multi_head_forward(mha, x, x, x);
  const Matrix dy = attn::random_normal(rng, 3, 4);
  std::string m = message_of([&] { attn::multi_head_backward(mha, x, x, x, r, dy, mha); });
  EXPECT_EQ(m.rfind("multi_head_backward: the gradient of in_proj_weight shares memory with the "
                    "layer's in_proj_weight",
                    0),
            0u)
      << m;
  attn::MultiHeadAttention grads = attn::zeros_like(mha);
  m = message_of(
      [&] { attn::multi_head_backward(mha, x, x, x, r, grads.out_proj.weight.topRows(3), grads); });
  EXPECT_EQ(
      m.rfind("multi_head_backward: the gradient of out_proj.weight shares memory with d_out", 0),
      0u)
      << m;
  EXPECT_TRUE((grads.out_proj.weight.array() == 0.0f).all());
}

TEST(MultiHeadInit, ADModelWhoseProjectionsOverflowIsNamed) {
  // 3 * d_model overflowed Index (undefined behaviour) before anything was checked.
  attn::Rng rng(37);
  const std::string m = message_of([&] { attn::multi_head_init(rng, Index{1} << 62, 1); });
  EXPECT_EQ(m.rfind("multi_head_init: d_model 4611686018427387904 needs ", 0), 0u) << m;
  EXPECT_NE(m.find("of parameters (more elements than an Index can count)"), std::string::npos)
      << m;
}

}  // namespace test_multi_head
