// Grouped-query attention (chapter 11): the identities that define it (g = h is multi-head
// attention, g < h is multi-head attention with K and V heads tied in groups), its KV cache,
// PyTorch autograd fixtures in float32 and float64 with RoPE and a sliding window, central
// differences in double on both paths, the plain path against the tiled one, and every refusal.
#include "attn/core/random.hpp"
#include "attn/layers/grouped_query.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/ops/masks.hpp"
#include "attn/ops/rope.hpp"
#include "attn/training/gradient_check.hpp"
#include "course/npy.hpp"

#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace test_grouped_query {

using attn_test::identical;
using attn_test::message_of;

using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::RowVector;

// A layer of h heads over g kv heads with random non-zero biases (nn.Linear's init draws them),
// and an input x [n x d_model].
struct LayerCase {
  attn::GroupedQueryAttention gqa;
  Matrix x;  // [n x E]
};

LayerCase random_setup(std::uint64_t seed, Index E, Index H, Index g, Index n) {
  attn::Rng rng(seed);
  LayerCase s{attn::grouped_query_init(rng, E, H, g, true), {}};
  s.x = attn::random_normal(rng, n, E);
  return s;
}

// The same layer as multi-head attention with K and V heads repeated per group: query head q
// gets kv head q / G's rows of W_K, W_V and of their biases (repeat_interleave, by hand).
attn::MultiHeadAttention tied_mha(const attn::GroupedQueryAttention& gqa) {
  const Index E = gqa.d_model(), H = gqa.heads, G = gqa.group_size(), d_k = gqa.d_k();
  attn::MultiHeadAttention mha;
  mha.heads = H;
  mha.q_proj = gqa.q_proj;
  mha.out_proj = gqa.out_proj;
  for (auto [to, from] :
       {std::pair{&mha.k_proj, &gqa.k_proj}, std::pair{&mha.v_proj, &gqa.v_proj}}) {
    to->weight.resize(E, E);  // [d_model x d_model]
    to->bias.resize(from->has_bias() ? E : 0);
    for (Index q = 0; q < H; ++q) {
      to->weight.middleRows(q * d_k, d_k) = from->weight.middleRows(q / G * d_k, d_k);
      if (from->has_bias()) to->bias.segment(q * d_k, d_k) = from->bias.segment(q / G * d_k, d_k);
    }
  }
  return mha;
}

// Rows of a repeated [H d_k x E] gradient summed per group: the [g d_k x E] gradient of the
// tied weight (the backward of repeat_interleave).
Matrix group_sum(const Matrix& repeated, Index H, Index g, Index d_k) {
  const Index G = H / g;
  Matrix sum = Matrix::Zero(g * d_k, repeated.cols());  // [g d_k x E]
  for (Index q = 0; q < H; ++q)
    sum.middleRows(q / G * d_k, d_k) += repeated.middleRows(q * d_k, d_k);
  return sum;
}
RowVector group_sum(const RowVector& repeated, Index H, Index g, Index d_k) {
  const Index G = H / g;
  RowVector sum = RowVector::Zero(g * d_k);  // [1 x g d_k]
  for (Index q = 0; q < H; ++q) sum.segment(q / G * d_k, d_k) += repeated.segment(q * d_k, d_k);
  return sum;
}

// max |a - b| / max(1, max |b|): an error relative to the tensor's scale (gradients of
// several sizes are compared with one bound).
double relative_diff(const Matrix& a, const Matrix& b) {
  return attn::max_abs_diff(a, b) / std::max(1.0, static_cast<double>(b.cwiseAbs().maxCoeff()));
}

// Whether a refusal's message starts with `prefix` (the function's name, then the facts).
testing::AssertionResult starts_with(const std::string& message, const std::string& prefix) {
  if (message.starts_with(prefix)) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "the message is \"" << message << "\"";
}
testing::AssertionResult contains(const std::string& message, const std::string& part) {
  if (message.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "the message is \"" << message << "\"";
}

// A measured error as the XML report keeps it: "3.1e-08" (std::to_string would print 0.000000).
std::string sci(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1e", v);
  return buffer;
}

// ---- g = h is multi-head attention --------------------------------------------------------------

struct MaskCase {
  const char* name;
  bool causal;
  Index window;
};
void PrintTo(const MaskCase& c, std::ostream* os) { *os << c.name; }

class GroupedQueryIsMultiHead : public testing::TestWithParam<MaskCase> {};

// With one kv head per query head, GQA runs the very calls MHA runs (one GEMM per projection,
// attention_weights_into and weighted_values_into per head on the same column blocks, the
// same mask), so the same binary gives the same bytes: compared bit for bit, forward and
// backward (dx = d_query + d_key + d_value, summed in that order on both sides).
TEST_P(GroupedQueryIsMultiHead, BitForBitOnThePlainPath) {
  const MaskCase c = GetParam();
  const LayerCase s = random_setup(1, 16, 4, 4, 7);
  const attn::MultiHeadAttention mha = tied_mha(s.gqa);  // g = h: nothing repeated
  ASSERT_TRUE(identical(mha.k_proj.weight, s.gqa.k_proj.weight));
  attn::AllowedMask mask =
      c.window > 0 ? attn::sliding_window_mask(7, c.window) : attn::causal_mask(7);  // [7 x 7]
  attn::MultiHeadOptions mha_opts{.need_weights = true};
  if (c.causal) mha_opts.allowed.emplace(mask);
  const auto ref = attn::multi_head_forward(mha, s.x, s.x, s.x, mha_opts);
  const attn::GroupedQueryOptions opts{
      .causal = c.causal, .window = c.window, .need_weights = true};
  const auto r = attn::grouped_query_forward(s.gqa, s.x, opts);
  EXPECT_TRUE(identical(r.out, ref.out));
  EXPECT_TRUE(identical(r.K, ref.K));
  EXPECT_TRUE(identical(r.V, ref.V));
  ASSERT_EQ(r.weights.size(), 4u);
  for (std::size_t q = 0; q < 4; ++q) EXPECT_TRUE(identical(r.weights[q], ref.weights[q])) << q;

  attn::Rng rng(2);
  const Matrix d_out = attn::random_normal(rng, 7, 16);  // [7 x 16]
  attn::MultiHeadAttention mha_grads = attn::zeros_like(mha);
  attn::GroupedQueryAttention grads = attn::zeros_like(s.gqa);
  const auto in = attn::multi_head_backward(mha, s.x, s.x, s.x, ref, d_out, mha_grads);
  const Matrix dx = attn::grouped_query_backward(s.gqa, s.x, r, d_out, grads);
  EXPECT_TRUE(identical(dx, Matrix(in.d_query + in.d_key + in.d_value)));
  EXPECT_TRUE(identical(grads.q_proj.weight, mha_grads.q_proj.weight));
  EXPECT_TRUE(identical(grads.k_proj.weight, mha_grads.k_proj.weight));
  EXPECT_TRUE(identical(grads.v_proj.weight, mha_grads.v_proj.weight));
  EXPECT_TRUE(identical(grads.out_proj.weight, mha_grads.out_proj.weight));
  EXPECT_TRUE(identical(grads.k_proj.bias, mha_grads.k_proj.bias));
  EXPECT_TRUE(identical(grads.out_proj.bias, mha_grads.out_proj.bias));
}

INSTANTIATE_TEST_SUITE_P(Masks, GroupedQueryIsMultiHead,
                         testing::Values(MaskCase{"causal", true, 0}, MaskCase{"window3", true, 3},
                                         MaskCase{"bidirectional", false, 0}),
                         [](const auto& info) { return std::string(info.param.name); });

// Above one tile (n = 130 > 128) both take the tiled path: MHA with the causal mask in memory,
// GQA with the kernel's causal flag and no mask. The kernel classifies the tiles alike either
// way (the wholly blocked tile above the diagonal skipped, the diagonal ones mixed, tested
// element by element) and gives blocked entries exactly 0 either way, so the arithmetic is the
// same; bit for bit is what this machine measures.
TEST(GroupedQueryIsMultiHeadTiled, BitForBitAboveOneTile) {
  const Index n = 130;
  const LayerCase s = random_setup(3, 16, 4, 4, n);
  const attn::MultiHeadAttention mha = tied_mha(s.gqa);
  const attn::AllowedMask causal = attn::causal_mask(n);  // [n x n]
  const auto ref =
      attn::multi_head_forward(mha, s.x, s.x, s.x, {.allowed = causal, .need_weights = false});
  const auto r = attn::grouped_query_forward(s.gqa, s.x, {.need_weights = false});
  ASSERT_TRUE(r.weights.empty());
  ASSERT_TRUE(ref.weights.empty());
  EXPECT_TRUE(identical(r.out, ref.out)) << attn::max_abs_diff(r.out, ref.out);
  attn::Rng rng(4);
  const Matrix d_out = attn::random_normal(rng, n, 16);  // [n x 16]
  attn::MultiHeadAttention mha_grads = attn::zeros_like(mha);
  attn::GroupedQueryAttention grads = attn::zeros_like(s.gqa);
  const auto in = attn::multi_head_backward(mha, s.x, s.x, s.x, ref, d_out, mha_grads);
  const Matrix dx = attn::grouped_query_backward(s.gqa, s.x, r, d_out, grads);
  EXPECT_TRUE(identical(dx, Matrix(in.d_query + in.d_key + in.d_value)));
  EXPECT_TRUE(identical(grads.k_proj.weight, mha_grads.k_proj.weight));
}

// ---- g < h is multi-head attention with tied K, V heads -----------------------------------------

struct GroupCase {
  const char* name;
  Index heads, kv_heads;
  bool tiled;
};
void PrintTo(const GroupCase& c, std::ostream* os) { *os << c.name; }

class GroupedQueryIsTiedMultiHead : public testing::TestWithParam<GroupCase> {};

// MHA whose W_K, W_V rows (and biases) are kv head q / G's for every query head q gives the
// same output: GQA is MHA with K and V heads tied in groups. The backward agrees too, once
// MHA's gradient of each repeated block is summed over its group. Not bit for bit: the K and V
// projections are GEMMs of other widths ([E x g d_k] against [E x E]), which Eigen blocks
// differently (measured: Q identical, K and V 1 to 3 float ulps apart, the output 1.6e-7), and
// the group sum is taken elsewhere (GQA sums dK over the group before multiplying by x; here
// each head's dW_K block is summed after). Bound: 1e-5 relative to each tensor's scale, ~100
// ulps, well above those few ulps through two GEMMs of <= 32 terms and a sum of <= 8 heads; a
// wrong grouping (q % g instead of q / G) or a missing group sum is off by ~0.1 and more.
TEST_P(GroupedQueryIsTiedMultiHead, SameOutputAndGroupSummedGradients) {
  const GroupCase c = GetParam();
  const Index n = c.tiled ? 150 : 7, E = 32, H = c.heads, g = c.kv_heads, d_k = E / H;
  const LayerCase s = random_setup(5, E, H, g, n);
  const attn::MultiHeadAttention mha = tied_mha(s.gqa);
  const attn::AllowedMask window = attn::sliding_window_mask(n, c.tiled ? 40 : 3);  // [n x n]
  const auto ref =
      attn::multi_head_forward(mha, s.x, s.x, s.x, {.allowed = window, .need_weights = !c.tiled});
  const auto r = attn::grouped_query_forward(
      s.gqa, s.x, {.window = c.tiled ? 40 : 3, .need_weights = !c.tiled});
  ASSERT_EQ(r.weights.empty(), c.tiled);
  const double out_diff = relative_diff(r.out, ref.out);
  EXPECT_LE(out_diff, 1e-5);
  RecordProperty("out_max_diff", sci(out_diff));
  // Every query head q reads kv head q / G: its columns of MHA's K are GQA's kv head's.
  for (Index q = 0; q < H; ++q) {
    EXPECT_LE(
        attn::max_abs_diff(ref.K.middleCols(q * d_k, d_k), r.K.middleCols(q / (H / g) * d_k, d_k)),
        1e-5)
        << q;
  }

  attn::Rng rng(6);
  const Matrix d_out = attn::random_normal(rng, n, E);  // [n x E]
  attn::MultiHeadAttention mha_grads = attn::zeros_like(mha);
  attn::GroupedQueryAttention grads = attn::zeros_like(s.gqa);
  const auto in = attn::multi_head_backward(mha, s.x, s.x, s.x, ref, d_out, mha_grads);
  const Matrix dx = attn::grouped_query_backward(s.gqa, s.x, r, d_out, grads);
  EXPECT_LE(relative_diff(dx, in.d_query + in.d_key + in.d_value), 1e-5);
  EXPECT_LE(relative_diff(grads.q_proj.weight, mha_grads.q_proj.weight), 1e-5);
  EXPECT_LE(relative_diff(grads.out_proj.weight, mha_grads.out_proj.weight), 1e-5);
  EXPECT_LE(relative_diff(grads.k_proj.weight, group_sum(mha_grads.k_proj.weight, H, g, d_k)),
            1e-5);
  EXPECT_LE(relative_diff(grads.v_proj.weight, group_sum(mha_grads.v_proj.weight, H, g, d_k)),
            1e-5);
  EXPECT_LE(relative_diff(grads.k_proj.bias, group_sum(mha_grads.k_proj.bias, H, g, d_k)), 1e-5);
  EXPECT_LE(relative_diff(grads.v_proj.bias, group_sum(mha_grads.v_proj.bias, H, g, d_k)), 1e-5);
  // The group sum is not a no-op: one head's block alone is far from it (G >= 2 here).
  EXPECT_GT(relative_diff(grads.v_proj.weight.topRows(d_k), mha_grads.v_proj.weight.topRows(d_k)),
            1e-2);
}

INSTANTIATE_TEST_SUITE_P(Groups, GroupedQueryIsTiedMultiHead,
                         testing::Values(GroupCase{"mqa_8_over_1", 8, 1, false},
                                         GroupCase{"gqa_8_over_2", 8, 2, false},
                                         GroupCase{"gqa_4_over_2", 4, 2, false},
                                         GroupCase{"mqa_8_over_1_tiled", 8, 1, true},
                                         GroupCase{"gqa_8_over_4_tiled", 8, 4, true}),
                         [](const auto& info) { return std::string(info.param.name); });

// With a window of 1 each query reads its own key only, with weight exactly 1 (a softmax of
// one score), so head q's output is exactly row i of its kv head's values: the concatenation
// is V with each kv head's columns repeated G times, in repeat_interleave order (kv head 0,
// 0, 1, 1 for h = 4, g = 2; a layer that tiled them, 0, 1, 0, 1, would fail).
TEST(GroupedQueryMapping, QueryHeadQReadsKvHeadQOverG) {
  const LayerCase s = random_setup(7, 16, 4, 2, 6);
  attn::Rng rng(8);
  const Matrix long_x = attn::random_normal(rng, 140, 16);  // [140 x 16]: above one tile
  for (const bool tiled : {false, true}) {
    const Matrix& x = tiled ? long_x : s.x;
    const auto r = attn::grouped_query_forward(s.gqa, x, {.window = 1, .need_weights = !tiled});
    ASSERT_EQ(r.weights.empty(), tiled);
    for (const Index q : {0, 1, 2, 3}) {
      EXPECT_TRUE(identical(r.concat.middleCols(q * 4, 4), r.V.middleCols(q / 2 * 4, 4)))
          << "query head " << q << (tiled ? ", tiled" : ", plain");
    }
  }
}

// A window as long as the sequence blocks nothing causal attention allows: the same bytes.
TEST(GroupedQueryMapping, AWindowOfNIsCausal) {
  const LayerCase s = random_setup(9, 16, 4, 2, 9);
  const auto causal = attn::grouped_query_forward(s.gqa, s.x, {.need_weights = true});
  const auto window = attn::grouped_query_forward(s.gqa, s.x, {.window = 9, .need_weights = true});
  const auto longer = attn::grouped_query_forward(s.gqa, s.x, {.window = 50, .need_weights = true});
  EXPECT_TRUE(identical(window.out, causal.out));
  EXPECT_TRUE(identical(longer.out, causal.out));
  // And one shorter changes the last query, which loses key 0 (query 8 reads keys 1 .. 8).
  const auto shorter = attn::grouped_query_forward(s.gqa, s.x, {.window = 8, .need_weights = true});
  EXPECT_TRUE(identical(shorter.out.topRows(8), causal.out.topRows(8)));
  EXPECT_FALSE(identical(shorter.out.row(8), causal.out.row(8)));
  EXPECT_EQ(shorter.weights[0](8, 0), 0.0f);
}

// ---- The KV cache -------------------------------------------------------------------------------

// K and V, what decoding keeps per token, are [n x g d_k]: h / g times smaller than MHA's
// [n x d_model]. Llama 2 70B's shape (64 heads over 8 kv heads, d_k = 128, scaled down to
// d_k = 2 here): 8 times fewer bytes per token; MQA: 64 times. W_K and W_V shrink the same way.
TEST(GroupedQueryCache, KeysAndValuesAreHOverGTimesSmaller) {
  const Index n = 5, H = 64, E = 128, d_k = 2;
  attn::Rng rng(10);
  const Matrix x = attn::random_normal(rng, n, E);
  const attn::MultiHeadAttention mha = attn::multi_head_init(rng, E, H, false);
  const auto mha_r = attn::multi_head_forward(mha, x, x, x);
  for (const Index g : {64, 8, 1}) {
    const attn::GroupedQueryAttention gqa = attn::grouped_query_init(rng, E, H, g);
    const auto r = attn::grouped_query_forward(gqa, x);
    EXPECT_EQ(r.K.rows(), n);
    EXPECT_EQ(r.K.cols(), g * d_k);
    EXPECT_EQ(r.V.cols(), g * d_k);
    EXPECT_EQ(mha_r.K.size(), (H / g) * r.K.size()) << "g = " << g;
    EXPECT_EQ(mha_r.V.size(), (H / g) * r.V.size()) << "g = " << g;
    EXPECT_EQ(r.Q.cols(), E);  // the queries keep every head
    EXPECT_EQ(gqa.k_proj.weight.rows(), g * d_k);
    // 2 E^2 for W_Q, W_O, 2 g d_k E for W_K, W_V (no biases by default, as Llama).
    EXPECT_EQ(gqa.parameter_count(), 2 * E * E + 2 * g * d_k * E);
    EXPECT_EQ(attn::parameter_count(gqa), gqa.parameter_count());
  }
}

// ---- PyTorch: forward and autograd (scripts/fixtures/grouped_query.py) --------------------------

std::filesystem::path data(const std::string& file) {
  return attn_test::fixture("grouped_query", file);
}

// The fixture's layer (float32 parameters): h = 4 over g = 2, d_model 16, biases if written.
attn::GroupedQueryAttention load_layer(const std::string& prefix) {
  attn::GroupedQueryAttention gqa;
  gqa.heads = 4;
  gqa.kv_heads = 2;
  const auto load = [&](attn::Linear& l, const std::string& name) {
    l.weight = course::read_npy(data(prefix + name + "_weight.npy")).to_matrix();
    const std::filesystem::path bias = data(prefix + name + "_bias.npy");
    if (std::filesystem::exists(bias)) l.bias = RowVector(course::read_npy(bias).to_matrix());
  };
  load(gqa.q_proj, "q_proj");
  load(gqa.k_proj, "k_proj");
  load(gqa.v_proj, "v_proj");
  load(gqa.out_proj, "o_proj");
  return gqa;
}

struct TorchCase {
  const char* name;
  Index window;
  bool bias;
};
void PrintTo(const TorchCase& c, std::ostream* os) { *os << c.name; }

class GroupedQueryTorch : public testing::TestWithParam<TorchCase> {
 protected:
  // Runs the layer in T on the fixture and compares every tensor the script wrote for the pass
  // `tag` with `bound` x the tensor's scale (max(1, max |reference|)).
  template <attn::Real T>
  void compare(const char* tag, double bound) {
    const TorchCase c = GetParam();
    const std::string prefix = std::string("gqa_") + c.name + "_";
    const attn::GroupedQueryAttentionOf<T> layer = attn::cast<T>(load_layer(prefix));
    ASSERT_EQ(layer.q_proj.has_bias(), c.bias);
    const attn::MatrixOf<T> x = course::read_npy(data(prefix + "x.npy")).to_matrix_d().cast<T>();
    const attn::MatrixOf<T> dy = course::read_npy(data(prefix + "dy.npy")).to_matrix_d().cast<T>();
    const attn::RopeTable rope = attn::rope_table(7, 4);
    for (const bool need_weights : {true, false}) {  // n = 7: both run the plain path
      const auto r = attn::grouped_query_forward(
          layer, x, {.window = c.window, .rope = &rope, .need_weights = need_weights});
      attn::GroupedQueryAttentionOf<T> grads = attn::zeros_like(layer);
      const attn::MatrixOf<T> dx = attn::grouped_query_backward(layer, x, r, dy, grads);
      const auto expect_close = [&](const std::string& name, const auto& ours) {
        const MatrixD ref =
            course::read_npy(data(prefix + tag + "_" + name + ".npy")).to_matrix_d();
        const MatrixD got = ours.template cast<double>();
        ASSERT_EQ(got.rows(), ref.rows()) << name;
        ASSERT_EQ(got.cols(), ref.cols()) << name;
        const double scale = std::max(1.0, ref.cwiseAbs().maxCoeff());
        const double diff = (got - ref).cwiseAbs().maxCoeff();
        EXPECT_LE(diff, bound * scale) << c.name << " " << tag << " " << name;
        RecordProperty(std::string(tag) + "_" + name, sci(diff / scale));
      };
      expect_close("out", r.out);
      expect_close("K", r.K);
      expect_close("d_x", dx);
      for (const auto& p : attn::parameters(grads)) {
        std::string key = p.key;
        std::replace(key.begin(), key.end(), '.', '_');
        expect_close("d_" + key, attn::MatrixOf<T>(p.value));
      }
    }
  }
};

// float32 on both sides: values and gradients of size ~1 through GEMMs of <= 16 terms, a
// softmax and RoPE, summed in other orders by Eigen and by PyTorch (measured: 2.4e-7 of the
// scale at most, 1 to 4 float ulps). 2e-6 x scale (~30 ulps) leaves room for another SIMD
// width's orders; a wrong RoPE angle, mask or group sum is off by 1e-2 and more.
TEST_P(GroupedQueryTorch, MatchesAutogradInFloat32) { compare<float>("f32", 2e-6); }

// float64 on both sides, the same parameters: only the order of sums differs (measured: 2.2e-16
// of the scale at most, one double ulp); 1e-12 is 10^4 times that and 10^5 below float32's.
TEST_P(GroupedQueryTorch, MatchesAutogradInFloat64) { compare<double>("f64", 1e-12); }

INSTANTIATE_TEST_SUITE_P(Cases, GroupedQueryTorch,
                         testing::Values(TorchCase{"causal", 0, false},
                                         TorchCase{"window3", 3, true}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- Central differences in double (gradient_check.hpp) -----------------------------------------

struct CheckCase {
  const char* name;
  Index kv_heads;
  bool tiled;
  attn::RopeLayout layout;
};
void PrintTo(const CheckCase& c, std::ostream* os) { *os << c.name; }

class GroupedQueryGradientCheck : public testing::TestWithParam<CheckCase> {};

// Every entry of x and of every parameter (biases included) nudged by +-h: the bar of every
// layer of the course, kGradientCheckTolerance = 1e-6 (gradient_check.hpp says why). 4 query
// heads over 1, 2 or 4 kv heads, RoPE and a sliding window on, on both paths: the plain one
// on 6 tokens (window 3), the tiled one on 130 (> one tile of 128, window 40: the tile above
// the diagonal skipped, the last two queries' tile of old keys cut by the window), d_model 16
// (d_k 4, two RoPE pairs) and 8 (d_k 2) to keep the tiled case's ~1300 entries cheap (~1.4 s
// each). Measured worst: 1e-10 to 2e-9.
TEST_P(GroupedQueryGradientCheck, MeetsTheBar) {
  const CheckCase c = GetParam();
  const Index n = c.tiled ? 130 : 6, E = c.tiled ? 8 : 16, H = 4, W = c.tiled ? 40 : 3;
  attn::Rng rng(20 + static_cast<std::uint64_t>(c.kv_heads));
  attn::GroupedQueryAttentionD layer =
      attn::cast<double>(attn::grouped_query_init(rng, E, H, c.kv_heads, true));
  MatrixD x = attn::random_normal(rng, n, E).cast<double>();        // [n x E]
  const MatrixD R = attn::random_normal(rng, n, E).cast<double>();  // dL/d(out) [n x E]
  const attn::RopeTable rope = attn::rope_table(n, E / H);
  const attn::GroupedQueryOptions opts{
      .window = W, .rope = &rope, .rope_layout = c.layout, .need_weights = !c.tiled};
  const attn::LossFunction loss = [&] {
    return (attn::grouped_query_forward(layer, x, opts).out.array() * R.array()).sum();
  };
  const attn::GroupedQueryResultD cache = attn::grouped_query_forward(layer, x, opts);
  ASSERT_EQ(cache.weights.empty(), c.tiled);
  attn::GroupedQueryAttentionD grads = attn::zeros_like(layer);
  const MatrixD dx = attn::grouped_query_backward(layer, x, cache, R, grads);
  attn::GradientReport report{c.name, {}};
  report.add(attn::check_tensor("x", x, dx, loss));
  attn::check_parameters(report, layer, grads, loss);
  ASSERT_EQ(report.tensors.size(), 9u);  // x and 8 parameter tensors
  const attn::TensorCheck& worst = report.worst_tensor();
  EXPECT_LE(report.worst(), attn::kGradientCheckTolerance)
      << worst.name << " is off by " << worst.max_abs_error << " at a scale of " << worst.scale;
  RecordProperty("worst", sci(report.worst()));
}

INSTANTIATE_TEST_SUITE_P(
    Groups, GroupedQueryGradientCheck,
    testing::Values(CheckCase{"mqa_plain", 1, false, attn::RopeLayout::interleaved},
                    CheckCase{"gqa_plain", 2, false, attn::RopeLayout::interleaved},
                    CheckCase{"gqa_plain_halves", 2, false, attn::RopeLayout::halves},
                    CheckCase{"mha_plain", 4, false, attn::RopeLayout::interleaved},
                    CheckCase{"mqa_tiled", 1, true, attn::RopeLayout::interleaved},
                    CheckCase{"gqa_tiled", 2, true, attn::RopeLayout::interleaved},
                    CheckCase{"mha_tiled", 4, true, attn::RopeLayout::interleaved}),
    [](const auto& info) { return std::string(info.param.name); });

// ---- The plain path against the tiled one -------------------------------------------------------

// need_weights = true keeps every head's [n x n] weights (the plain path); false, above one
// tile, runs the tiled kernel and keeps each head's log-sum-exp. Both compute the same
// function: outputs of size ~1 (out_proj of means of values) and sums of <= 200 terms, so
// 2e-5 of the scale (~170 float ulps) is far above the ~10 ulps either is off by and far below
// a real error (a key dropped by a wrong window moves an output by ~1e-2); multi_head's test
// uses the same bound. Gradients relative to their largest entry, the same way.
TEST(GroupedQueryPaths, NeedWeightsAgreesWithTheTiledPath) {
  const Index n = 200, E = 32, H = 8, g = 2;
  const LayerCase s = random_setup(30, E, H, g, n);
  const attn::RopeTable rope = attn::rope_table(n, E / H);
  attn::Rng rng(31);
  const Matrix d_out = attn::random_normal(rng, n, E);  // [n x E]
  for (const Index W : {0, 50}) {
    const auto plain =
        attn::grouped_query_forward(s.gqa, s.x, {.window = W, .rope = &rope, .need_weights = true});
    const auto tiled = attn::grouped_query_forward(
        s.gqa, s.x, {.window = W, .rope = &rope, .need_weights = false});
    ASSERT_EQ(plain.weights.size(), static_cast<std::size_t>(H));
    ASSERT_TRUE(plain.lse.size() == 0);
    ASSERT_TRUE(tiled.weights.empty());
    ASSERT_EQ(tiled.lse.rows(), n);
    ASSERT_EQ(tiled.lse.cols(), H);
    EXPECT_LE(relative_diff(tiled.out, plain.out), 2e-5) << "window " << W;
    attn::GroupedQueryAttention g_plain = attn::zeros_like(s.gqa),
                                g_tiled = attn::zeros_like(s.gqa);
    const Matrix dx_plain = attn::grouped_query_backward(s.gqa, s.x, plain, d_out, g_plain);
    const Matrix dx_tiled = attn::grouped_query_backward(s.gqa, s.x, tiled, d_out, g_tiled);
    EXPECT_LE(relative_diff(dx_tiled, dx_plain), 2e-5) << "window " << W;
    const auto p_plain = attn::parameters(g_plain);
    const auto p_tiled = attn::parameters(g_tiled);
    for (std::size_t i = 0; i < p_plain.size(); ++i) {
      EXPECT_LE(relative_diff(Matrix(p_tiled[i].value), Matrix(p_plain[i].value)), 2e-5)
          << p_plain[i].key << ", window " << W;
    }
    // The window blocks keys: the last query's weights are exactly 0 before key n - W.
    if (W > 0) {
      EXPECT_EQ(plain.weights[3].row(n - 1).head(n - W).cwiseAbs().maxCoeff(), 0.0f);
    }
  }
  // Within one tile the plain path runs whatever need_weights says: there is nothing to tile.
  const Matrix small = s.x.topRows(100);  // [100 x E]
  EXPECT_FALSE(attn::grouped_query_forward(s.gqa, small).weights.empty());
}

// ---- Parameters ---------------------------------------------------------------------------------

// Hugging Face's LlamaAttention keys, in its named_parameters order, each weight then its bias.
TEST(GroupedQueryParameters, HuggingFaceKeysAndShapes) {
  attn::Rng rng(40);
  const attn::GroupedQueryAttention with_bias = attn::grouped_query_init(rng, 16, 4, 2, true);
  std::vector<std::string> keys;
  std::vector<std::pair<Index, Index>> shapes;
  for (const auto& p : attn::parameters(with_bias, "model.layers.0.self_attn.")) {
    keys.push_back(p.key);
    shapes.emplace_back(p.value.rows(), p.value.cols());
  }
  const std::string s = "model.layers.0.self_attn.";
  EXPECT_EQ(keys,
            (std::vector<std::string>{s + "q_proj.weight", s + "q_proj.bias", s + "k_proj.weight",
                                      s + "k_proj.bias", s + "v_proj.weight", s + "v_proj.bias",
                                      s + "o_proj.weight", s + "o_proj.bias"}));
  EXPECT_EQ(shapes, (std::vector<std::pair<Index, Index>>{
                        {16, 16}, {1, 16}, {8, 16}, {1, 8}, {8, 16}, {1, 8}, {16, 16}, {1, 16}}));
  const attn::GroupedQueryAttention no_bias = attn::grouped_query_init(rng, 16, 4, 2);
  EXPECT_EQ(attn::parameters(no_bias).size(), 4u);
  // zeros_like keeps the structure and zeroes everything; cast to double and back is exact.
  const attn::GroupedQueryAttention zero = attn::zeros_like(with_bias);
  EXPECT_EQ(zero.kv_heads, 2);
  for (const auto& p : attn::parameters(zero))
    EXPECT_EQ(p.value.cwiseAbs().maxCoeff(), 0.0f) << p.key;
  const attn::GroupedQueryAttention back = attn::cast<float>(attn::cast<double>(with_bias));
  EXPECT_EQ(back.heads, 4);
  EXPECT_TRUE(identical(back.k_proj.weight, with_bias.k_proj.weight));
  EXPECT_TRUE(identical(back.out_proj.bias, with_bias.out_proj.bias));
}

// nn.Linear's init per projection: U(-1/sqrt(in), 1/sqrt(in)) with in = d_model for all four
// (h d_k = d_model), drawn q, k, v, o in that order: the same numbers as four linear_init calls.
TEST(GroupedQueryParameters, InitIsFourLinearLayers) {
  attn::Rng a(41), b(41);
  const attn::GroupedQueryAttention gqa = attn::grouped_query_init(a, 16, 4, 2, true);
  const attn::Linear q = attn::linear_init(b, 16, 16), k = attn::linear_init(b, 16, 8),
                     v = attn::linear_init(b, 16, 8), o = attn::linear_init(b, 16, 16);
  EXPECT_TRUE(identical(gqa.q_proj.weight, q.weight));
  EXPECT_TRUE(identical(gqa.k_proj.bias, k.bias));
  EXPECT_TRUE(identical(gqa.v_proj.weight, v.weight));
  EXPECT_TRUE(identical(gqa.out_proj.weight, o.weight));
  EXPECT_LE(gqa.k_proj.weight.cwiseAbs().maxCoeff(), 0.25f);  // 1/sqrt(16)
  EXPECT_EQ(gqa.group_size(), 2);
  EXPECT_EQ(gqa.d_k(), 4);
}

// ---- Refusals -----------------------------------------------------------------------------------

TEST(GroupedQueryErrors, SizesThatMakeNoLayer) {
  attn::Rng rng(50);
  EXPECT_EQ(message_of([&] { attn::grouped_query_init(rng, 16, 4, 3); }),
            "grouped_query_init: 3 kv_heads do not divide 4 heads: each kv head serves a group of "
            "heads / kv_heads query heads");
  EXPECT_EQ(message_of([&] { attn::grouped_query_init(rng, 10, 4, 2); }),
            "grouped_query_init: 4 heads do not divide d_model = 10: each head needs d_k = d_model "
            "/ heads columns");
  EXPECT_EQ(message_of([&] { attn::grouped_query_init(rng, 16, 0, 1); }),
            "grouped_query_init: heads is 0: it must be at least 1");
  EXPECT_EQ(message_of([&] { attn::grouped_query_init(rng, 16, 4, 0); }),
            "grouped_query_init: kv_heads is 0: it must be at least 1");
  EXPECT_EQ(message_of([&] { attn::grouped_query_init(rng, 0, 4, 2); }),
            "grouped_query_init: d_model is 0: it must be at least 1");
  // A layer whose shapes disagree with its head counts (g edited after the init).
  attn::GroupedQueryAttention bad = attn::grouped_query_init(rng, 16, 4, 2);
  bad.kv_heads = 4;
  const Matrix x = attn::random_normal(rng, 3, 16);
  EXPECT_EQ(message_of([&] { attn::grouped_query_forward(bad, x); }),
            "grouped_query_forward: W_K is [8 x 16] but 4 heads and 4 kv heads of d_k = 4 over "
            "d_model = 16 make it [16 x 16]");
  EXPECT_TRUE(starts_with(
      message_of([&] { attn::grouped_query_forward(attn::GroupedQueryAttention{}, x); }),
      "grouped_query_forward: d_model is 0"));
}

TEST(GroupedQueryErrors, OptionsAndInputsThatDoNotFit) {
  const LayerCase s = random_setup(51, 16, 4, 2, 5);
  EXPECT_EQ(
      message_of([&] { attn::grouped_query_forward(s.gqa, s.x, {.causal = false, .window = 3}); }),
      "grouped_query_forward: a sliding window (window = 3) needs causal = true: query i "
      "reads keys (i - W, i], never a later one");
  EXPECT_EQ(message_of([&] { attn::grouped_query_forward(s.gqa, s.x, {.window = -1}); }),
            "grouped_query_forward: window is -1: it must be >= 1, or 0 for no window");
  const attn::RopeTable wide = attn::rope_table(5, 8);
  EXPECT_EQ(message_of([&] { attn::grouped_query_forward(s.gqa, s.x, {.rope = &wide}); }),
            "grouped_query_forward: the RoPE table rotates 8 features per head but the layer's "
            "heads are d_k = 4 wide: make the table with rope_table(positions, d_k)");
  const attn::RopeTable short_table = attn::rope_table(4, 4);
  EXPECT_EQ(message_of([&] { attn::grouped_query_forward(s.gqa, s.x, {.rope = &short_table}); }),
            "grouped_query_forward: x has 5 tokens (positions 0 .. 4) but the RoPE table covers 4 "
            "positions: make a longer table");
  const Matrix narrow = s.x.leftCols(12);  // [5 x 12]
  EXPECT_EQ(message_of([&] { attn::grouped_query_forward(s.gqa, narrow); }),
            "grouped_query_forward: x is [5 x 12] but the layer takes [n x d_model] = [n x 16], n "
            ">= 1");
  const Matrix empty(0, 16);
  EXPECT_TRUE(starts_with(message_of([&] { attn::grouped_query_forward(s.gqa, empty); }),
                          "grouped_query_forward: x is [0 x 16]"));
}

TEST(GroupedQueryErrors, BackwardRefusesAForeignCacheAndAliasedGradients) {
  LayerCase s = random_setup(52, 16, 4, 2, 5);
  const auto cache = attn::grouped_query_forward(s.gqa, s.x);
  attn::Rng rng(53);
  const Matrix d_out = attn::random_normal(rng, 5, 16);
  attn::GroupedQueryAttention grads = attn::zeros_like(s.gqa);
  // The layer as its own gradients: the backward would add into the weights it still reads.
  EXPECT_TRUE(starts_with(
      message_of([&] { attn::grouped_query_backward(s.gqa, s.x, cache, d_out, s.gqa); }),
      "grouped_query_backward: the gradient of q_proj.weight shares memory "
      "with the layer's q_proj.weight"));
  // Gradients of another layer's shapes (2 kv heads against 1).
  attn::GroupedQueryAttention mqa_grads =
      attn::zeros_like(attn::grouped_query_init(rng, 16, 4, 1, true));
  EXPECT_TRUE(starts_with(
      message_of([&] { attn::grouped_query_backward(s.gqa, s.x, cache, d_out, mqa_grads); }),
      "grouped_query_backward: the gradient of k_proj.weight is [4 x 16] but "
      "the parameter is [8 x 16]"));
  // d_out of the wrong shape, and a cache made on another x.
  const Matrix short_d_out = d_out.topRows(4);
  EXPECT_TRUE(starts_with(
      message_of([&] { attn::grouped_query_backward(s.gqa, s.x, cache, short_d_out, grads); }),
      "grouped_query_backward: x is [5 x 16], d_out [4 x 16]"));
  const Matrix longer = attn::random_normal(rng, 6, 16);
  const Matrix longer_d_out = attn::random_normal(rng, 6, 16);
  EXPECT_TRUE(contains(
      message_of([&] { attn::grouped_query_backward(s.gqa, longer, cache, longer_d_out, grads); }),
      "pass the result of the forward on this x"));
  // Nothing was accumulated by the refused calls.
  for (const auto& p : attn::parameters(grads))
    EXPECT_EQ(p.value.cwiseAbs().maxCoeff(), 0.0f) << p.key;
}

}  // namespace test_grouped_query
