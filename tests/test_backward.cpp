// The backward passes of the training chapter (09_training): linear_backward,
// layer_norm_backward, ffn_backward, embedding_backward, attention_backward(_into),
// multi_head_backward, encoder_layer_backward, decoder_layer_backward and cross_entropy.
//
// Where the expected values come from (the course's rule: never from this program's output):
//   A. PyTorch autograd, tests/data/bw_*.npy, written by scripts/fixtures/backward.py (float32,
//      masks 1 = may attend, batch dimension dropped, gradients named d_<state_dict key with
//      '.' -> '_'>). The script cross-checked every tensor against a float64 formula.
//   B. Hand calculations small enough to do on paper, the arithmetic written beside them.
//   C. Identities the masks promise, checked to the bit: a quantity that must not depend on an
//      input is computed twice, the input changed in between, and compared with memcmp
//      (attn_test::identical). Each states exactly which quantities are invariant, and where
//      useful checks that a neighbouring quantity that is NOT invariant does change.
//   D. The errors: every backward pass throws std::invalid_argument naming itself.
#include "attn/training/gradient_check.hpp"
#include "attn/attn.hpp"
#include "course/npy.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using attn_test::identical;
using attn_test::message_of;

using attn::AllowedMask;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::NormPlacement;
using attn::RowVector;

// ---- Loading the fixtures of scripts/fixtures/backward.py ---------------------------------------

struct Fixture {
  std::string prefix;  // "bw_enc_post_"

  std::filesystem::path path(const std::string& name) const {
    return std::filesystem::path(ATTN_TEST_DATA_DIR) / (prefix + name + ".npy");
  }
  course::NpyArray get(const std::string& name) const { return course::read_npy(path(name)); }
  Matrix matrix(const std::string& name) const { return get(name).to_matrix(); }
  RowVector row(const std::string& name) const { return RowVector(matrix(name)); }
  AllowedMask mask(const std::string& name) const {
    return matrix(name).array() != 0.0f;  // the fixtures store 1 = may attend
  }
  /// An int64 array (ids, targets), row b of a 2-D one when `b` is given.
  std::vector<int> ints(const std::string& name, std::size_t b = 0) const {
    const course::NpyArray a = get(name);
    const std::size_t n = a.shape.size() == 2 ? a.shape[1] : a.size();
    std::vector<int> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<int>(a.data[b * n + i]);
    return v;
  }
  /// Every gradient the case holds: "d_x", "d_self_attn_in_proj_weight", ... (file names).
  std::set<std::string> gradient_names() const {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(ATTN_TEST_DATA_DIR)) {
      const std::string file = entry.path().filename().string();
      const std::string head = prefix + "d_";
      if (file.starts_with(head) && file.ends_with(".npy")) {
        names.insert(file.substr(prefix.size(), file.size() - prefix.size() - 4));
      }
    }
    return names;
  }

  attn::MultiHeadAttention mha(const std::string& p, Index heads) const {
    return attn::multi_head_from_pytorch(matrix(p + "in_proj_weight"), row(p + "in_proj_bias"),
                                         matrix(p + "out_proj_weight"), row(p + "out_proj_bias"),
                                         heads);
  }
  attn::FeedForward ff() const {
    return {{matrix("linear1_weight"), row("linear1_bias")},
            {matrix("linear2_weight"), row("linear2_bias")}};
  }
  attn::LayerNorm norm(const std::string& p) const {
    return {row(p + "weight"), row(p + "bias"), 1e-5f};  // nn.LayerNorm's default eps
  }
};

/// "self_attn.out_proj.weight" -> "d_self_attn_out_proj_weight", the fixture's file name.
std::string gradient_name(const std::string& key) {
  std::string name = "d_" + key;
  for (char& c : name) c = c == '.' ? '_' : c;
  return name;
}

// Tolerance of the fixture comparisons, relative to each tensor's scale (max |PyTorch|):
// max |ours - PyTorch| <= kFixtureTolerance * max |PyTorch|.
//
// Both sides are float32. The fixture script found PyTorch within 3e-7 of a float64 formula
// (relative to the scale) in every tensor; ours rounds alike (float GEMMs over at most 48
// terms, LayerNorm in double rounded once), so the two float32 results should sit within about
// 1e-6 of each other. Each test prints its worst ratio ("[ ratio ]" lines); over the 15 cases
// the worst measured was 3.2e-7 (enc_post, d_self_attn_out_proj_weight; GCC, x86-64, Release),
// most cases 1e-8 to 3e-7. 1e-5 keeps a factor ~30 for other compilers, vector widths and FMA
// contraction. A wrong formula is four orders of magnitude above it: with the library broken on
// purpose (the softmax backward without its row sum, the post-norm residual's gradient dropped,
// the ReLU passing every gradient, LayerNorm's backward without its xhat term) the worst
// ratios of the affected cases were 0.10 to 2.3.
constexpr double kFixtureTolerance = 1e-5;

/// Compares tensors of one case with its fixture, relative to the scale of the WHOLE fixture
/// tensor (so the key block of in_proj_bias, exactly 0 in exact arithmetic and round-off noise
/// in both PyTorch and here, is measured against the gradient's scale, never entry by entry),
/// and keeps the worst ratio and which rows of each tensor were compared.
class Comparison {
 public:
  explicit Comparison(const std::string& case_name)
      : Comparison("bw_" + case_name, Fixture{"bw_" + case_name + "_"}) {}
  Comparison(std::string label, Fixture fx) : case_(std::move(label)), fx_(std::move(fx)) {}
  Comparison(const Comparison&) = delete;
  Comparison& operator=(const Comparison&) = delete;

  const Fixture& fixture() const { return fx_; }

  /// `got` against fixture tensor `name`, or against its block of rows (of elements for a
  /// [1 x n] tensor) that starts at `first` when `got` is smaller.
  void check(const std::string& name, const attn::MatrixView& got, Index first = 0) {
    const Matrix expected = fx_.matrix(name);
    const bool vector = expected.rows() == 1;
    const Index count = vector ? got.cols() : got.rows();
    const Index total = vector ? expected.cols() : expected.rows();
    ASSERT_TRUE(first >= 0 && first + count <= total && (vector ? got.rows() == 1
                                                                : got.cols() == expected.cols()))
        << case_ << " " << name << ": got " << attn::shape_str(got) << " at " << first
        << ", the fixture is " << attn::shape_str(expected);
    const Matrix block = vector ? Matrix(expected.middleCols(first, count))
                                : Matrix(expected.middleRows(first, count));
    const double scale = expected.cwiseAbs().maxCoeff();
    ASSERT_GT(scale, 0.0) << case_ << " " << name;
    const double ratio = attn::max_abs_diff(got, block) / scale;
    EXPECT_LE(ratio, kFixtureTolerance)
        << case_ << " " << name << " (from " << first << "): max |ours - PyTorch| = "
        << ratio * scale << " of scale " << scale;
    covered_[name] += count;
    totals_[name] = total;
    if (!(ratio <= worst_)) {  // NaN counts as worst
      worst_ = ratio;
      worst_name_ = name;
    }
  }

  /// Every parameter gradient of `grads`, by its state_dict key; in_proj_weight and
  /// in_proj_bias come as three blocks (first = 0, E, 2E), each against its rows.
  template <typename L>
  void check_parameters(const L& grads) {
    for (const auto& p : attn::parameters(grads)) check(gradient_name(p.key), p.value, p.first);
  }

  /// Every d_* file of the case was compared, every row of it.
  void expect_every_gradient_compared() const {
    const std::set<std::string> names = fx_.gradient_names();
    EXPECT_FALSE(names.empty()) << case_;
    for (const std::string& name : names) {
      const auto it = covered_.find(name);
      EXPECT_TRUE(it != covered_.end() && it->second == totals_.at(name))
          << case_ << ": " << name << " was not compared in full";
    }
  }

  ~Comparison() {
    std::printf("[ ratio ] %-22s worst %-36s %.2e (tolerance %.0e)\n", case_.c_str(),
                worst_name_.c_str(), worst_, kFixtureTolerance);
  }

 private:
  std::string case_;
  Fixture fx_;
  std::map<std::string, Index> covered_, totals_;
  double worst_ = -1.0;
  std::string worst_name_ = "(nothing compared)";
};

// ================================================================================================
// A. PyTorch fixtures (float32)
// ================================================================================================

TEST(BackwardFixture, Linear) {
  Comparison c("linear");
  const Fixture& fx = c.fixture();
  const attn::Linear layer{fx.matrix("weight"), fx.row("bias")};
  const Matrix x = fx.matrix("x"), dy = fx.matrix("dy");
  c.check("out", attn::linear_forward(layer, x));
  attn::Linear grads = attn::zeros_like(layer);
  c.check("d_x", attn::linear_backward(layer, x, dy, grads));
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

TEST(BackwardFixture, LayerNorm) {
  Comparison c("layer_norm");
  const Fixture& fx = c.fixture();
  const attn::LayerNorm norm = fx.norm("");
  const Matrix x = fx.matrix("x");
  attn::LayerNormCache cache;
  c.check("out", attn::layer_norm_forward(norm, x, &cache));
  attn::LayerNorm grads = attn::zeros_like(norm);
  c.check("d_x", attn::layer_norm_backward(norm, x, cache, fx.matrix("dy"), grads));
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

TEST(BackwardFixture, FeedForward) {
  Comparison c("ffn");
  const Fixture& fx = c.fixture();
  const attn::FeedForward ff = fx.ff();
  const Matrix x = fx.matrix("x");
  attn::FeedForwardCache cache;
  c.check("out", attn::ffn_forward(ff, x, &cache));
  attn::FeedForward grads = attn::zeros_like(ff);
  c.check("d_x", attn::ffn_backward(ff, x, cache, fx.matrix("dy"), grads));
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

TEST(BackwardFixture, Embedding) {
  // Two sequences ids [2 x 5] through one table: the table's gradient is the scatter-add of
  // both sequences' dy, so embedding_backward is called once per sequence into one d_table.
  Comparison c("embedding");
  const Fixture& fx = c.fixture();
  const Matrix table = fx.matrix("weight");  // [7 x 4]
  const course::NpyArray dy = fx.get("dy"), out = fx.get("out");  // [2, 5, 4]
  ASSERT_EQ(dy.shape.size(), 3u);
  Matrix d_table = Matrix::Zero(table.rows(), table.cols());
  for (std::size_t b = 0; b < dy.shape[0]; ++b) {
    const std::vector<int> ids = fx.ints("ids", b);
    // The lookup is a copy: equal to the bit.
    EXPECT_TRUE(identical(attn::embedding_forward(table, std::span<const int>(ids)), out.slice(b)));
    attn::embedding_backward(std::span<const int>(ids), dy.slice(b), d_table);
  }
  c.check("d_weight", d_table);
  // Id 6 never occurs: PyTorch's row is exactly 0, and so is ours (nothing was added to it).
  EXPECT_TRUE((d_table.row(6).array() == 0.0f).all());
  c.expect_every_gradient_compared();
}

class BackwardSdpaFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(BackwardSdpaFixture, MatchesTorchAutograd) {
  Comparison c(std::string("sdpa_") + GetParam());
  const Fixture& fx = c.fixture();
  const Matrix Q = fx.matrix("Q"), K = fx.matrix("K"), V = fx.matrix("V"), dy = fx.matrix("dy");
  const AllowedMask allowed = fx.mask("allowed");
  const attn::AttentionOptions opts{.allowed = allowed};
  const attn::AttentionResult r = attn::attention(Q, K, V, opts);
  c.check("out", r.out);
  c.check("weights", r.weights);
  const attn::AttentionGrads g = attn::attention_backward(Q, K, V, r.weights, dy, opts);
  c.check("d_Q", g.dQ);
  c.check("d_K", g.dK);
  c.check("d_V", g.dV);
  c.expect_every_gradient_compared();
  // attention_backward_into writes into column blocks of wider matrices (how multi-head
  // attention calls it): the same numbers, within the same tolerance of PyTorch, and nothing
  // outside the blocks. (Not the same bits as attention_backward: the products into a strided
  // block take another Eigen path, which may round differently, e.g. with or without FMA.)
  Matrix dQ = Matrix::Constant(Q.rows(), Q.cols() + 3, 7.0f);
  Matrix dK = Matrix::Constant(K.rows(), K.cols() + 3, 7.0f);
  Matrix dV = Matrix::Constant(V.rows(), V.cols() + 3, 7.0f);
  attn::attention_backward_into(Q, K, V, r.weights, dy, dQ.middleCols(2, Q.cols()),
                                dK.middleCols(2, K.cols()), dV.middleCols(2, V.cols()), opts);
  Comparison into(std::string("sdpa_") + GetParam() + " (into)", fx);
  into.check("d_Q", dQ.middleCols(2, Q.cols()));
  into.check("d_K", dK.middleCols(2, K.cols()));
  into.check("d_V", dV.middleCols(2, V.cols()));
  for (const Matrix* m : {&dQ, &dK, &dV}) {
    EXPECT_TRUE((m->leftCols(2).array() == 7.0f).all() && (m->rightCols(1).array() == 7.0f).all());
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardSdpaFixture,
                         ::testing::Values("cross", "causal", "padding"));

TEST(BackwardFixture, MultiHeadSelfAttention) {
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

TEST(BackwardFixture, MultiHeadCrossAttention) {
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

class BackwardEncoderFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(BackwardEncoderFixture, MatchesTorchTransformerEncoderLayer) {
  const std::string name = GetParam();
  Comparison c(name);
  const Fixture& fx = c.fixture();
  const attn::EncoderLayer layer{fx.mha("self_attn_", 4), fx.ff(), fx.norm("norm1_"),
                                 fx.norm("norm2_"),
                                 name == "enc_pre" ? NormPlacement::pre : NormPlacement::post};
  const Matrix x = fx.matrix("x");
  const AllowedMask allowed = fx.mask("allowed");  // key 5 blocked
  attn::EncoderLayerCache cache;
  c.check("out", attn::encoder_layer_forward(layer, x, {.allowed = allowed}, &cache));
  attn::EncoderLayer grads = attn::zeros_like(layer);
  c.check("d_x", attn::encoder_layer_backward(layer, cache, fx.matrix("dy"), grads));
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardEncoderFixture, ::testing::Values("enc_post", "enc_pre"));

class BackwardDecoderFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(BackwardDecoderFixture, MatchesTorchTransformerDecoderLayer) {
  const std::string name = GetParam();
  Comparison c(name);
  const Fixture& fx = c.fixture();
  const attn::DecoderLayer layer{fx.mha("self_attn_", 4),  fx.mha("multihead_attn_", 4),
                                 fx.ff(),
                                 fx.norm("norm1_"),        fx.norm("norm2_"),
                                 fx.norm("norm3_"),
                                 name == "dec_pre" ? NormPlacement::pre : NormPlacement::post};
  const Matrix x = fx.matrix("x"), memory = fx.matrix("memory");
  const AllowedMask self_allowed = fx.mask("self_allowed");    // causal
  const AllowedMask cross_allowed = fx.mask("cross_allowed");  // memory key 5 blocked
  attn::DecoderLayerCache cache;
  c.check("out", attn::decoder_layer_forward(
                     layer, x, memory,
                     {.self_allowed = self_allowed, .cross_allowed = cross_allowed}, &cache));
  attn::DecoderLayer grads = attn::zeros_like(layer);
  const auto g = attn::decoder_layer_backward(layer, memory, cache, fx.matrix("dy"), grads);
  c.check("d_x", g.d_x);
  c.check("d_memory", g.d_memory);
  c.check_parameters(grads);
  c.expect_every_gradient_compared();
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardDecoderFixture, ::testing::Values("dec_post", "dec_pre"));

class BackwardCrossEntropyFixture
    : public ::testing::TestWithParam<std::pair<const char*, double>> {};

TEST_P(BackwardCrossEntropyFixture, MatchesTorchCrossEntropy) {
  // F.cross_entropy(logits [7 x 11], targets, ignore_index=0, label_smoothing), mean
  // reduction; targets hold the ignore id 0 twice.
  const auto [name, smoothing] = GetParam();
  Comparison c(name);
  const Fixture& fx = c.fixture();
  const std::vector<int> targets = fx.ints("targets");
  const attn::CrossEntropy r = attn::cross_entropy(
      fx.matrix("logits"), targets, {.ignore_index = 0, .label_smoothing = smoothing});
  EXPECT_EQ(r.count, 5);  // 7 rows, 2 ignored
  c.check("loss", Matrix::Constant(1, 1, r.loss));
  c.check("d_logits", r.d_logits);
  c.expect_every_gradient_compared();
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardCrossEntropyFixture,
                         ::testing::Values(std::pair<const char*, double>{"xent_plain", 0.0},
                                           std::pair<const char*, double>{"xent_smooth", 0.1}));

// ================================================================================================
// B. Hand calculations and identities
// ================================================================================================

template <typename T>
class BackwardByHand : public ::testing::Test {};
using Reals = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BackwardByHand, Reals);

template <typename T>
attn::MatrixOf<T> mat(std::initializer_list<std::initializer_list<T>> rows) {
  attn::MatrixOf<T> m(static_cast<Index>(rows.size()), static_cast<Index>(rows.begin()->size()));
  Index r = 0;
  for (const auto& row : rows) {
    Index c = 0;
    for (T v : row) m(r, c++) = v;
    ++r;
  }
  return m;
}

TYPED_TEST(BackwardByHand, LinearBackward2x2) {
  using T = TypeParam;
  // y = x W^T + b with W = [[1, 2], [3, 4]], b = [0.5, -1], x = [[1, 2], [3, -1]],
  // dy = [[1, 2], [0, -1]]:
  //   dx = dy W      = [[1*1 + 2*3, 1*2 + 2*4], [0*1 - 1*3, 0*2 - 1*4]] = [[7, 10], [-3, -4]]
  //   dW = dy^T x    = [[1*1 + 0*3, 1*2 + 0*(-1)], [2*1 - 1*3, 2*2 - 1*(-1)]] = [[1, 2], [-1, 5]]
  //   db = colsum dy = [1 + 0, 2 - 1] = [1, 1]
  // Small integers: exact in float and double, so compared with ==.
  const attn::LinearOf<T> layer{mat<T>({{1, 2}, {3, 4}}), mat<T>({{0.5, -1}})};
  const attn::MatrixOf<T> x = mat<T>({{1, 2}, {3, -1}}), dy = mat<T>({{1, 2}, {0, -1}});
  attn::LinearOf<T> grads = attn::zeros_like(layer);
  const attn::MatrixOf<T> dx = attn::linear_backward(layer, x, dy, grads);
  EXPECT_EQ(dx, (mat<T>({{7, 10}, {-3, -4}})));
  EXPECT_EQ(grads.weight, (mat<T>({{1, 2}, {-1, 5}})));
  EXPECT_EQ(attn::MatrixOf<T>(grads.bias), (mat<T>({{1, 1}})));
}

TYPED_TEST(BackwardByHand, SoftmaxBackwardSubtractsTheWeightedRowMean) {
  using T = TypeParam;
  // One query, two keys, d_k = 1, scale 2: Q = [[1]], K = [[0], [ln 3 / 2]], so the scores are
  // 2 * [0, ln 3 / 2] = [0, ln 3] and P = [1, 3] / (1 + 3) = [1/4, 3/4]. V = I (v_0 = (1, 0),
  // v_1 = (0, 1)), d_out = [[2, -1]]:
  //   dP = d_out V^T = [2, -1]
  //   rowsum(P * dP) = 1/4 * 2 + 3/4 * (-1) = -1/4
  //   dS = P * (dP - rowsum) = [1/4 * (2 + 1/4), 3/4 * (-1 + 1/4)] = [9/16, -9/16]
  //     (without the row sum it would be P * dP = [1/2, -3/4]: the test tells them apart)
  //   dQ = scale dS K   = 2 * (9/16 * 0 - 9/16 * ln 3 / 2) = -9/16 ln 3
  //   dK = scale dS^T Q = 2 * [[9/16], [-9/16]] = [[9/8], [-9/8]]
  //   dV = P^T d_out    = [[1/4 * 2, 1/4 * (-1)], [3/4 * 2, 3/4 * (-1)]]
  //                     = [[1/2, -1/4], [3/2, -3/4]]
  // ln 3 / 2 is rounded to T (the scale 2 and the doubling are exact), so P is a few ulps of T
  // from [1/4, 3/4]; everything else is a handful of operations on O(1) numbers: 1e-6 (float)
  // and 1e-14 (double) are ample, and the no-row-sum mistake is off by 1/16 at least.
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  const T half_ln3 = static_cast<T>(std::log(3.0) / 2.0);
  const attn::MatrixOf<T> Q = mat<T>({{1}}), K = mat<T>({{0}, {half_ln3}});
  const attn::MatrixOf<T> V = mat<T>({{1, 0}, {0, 1}}), d_out = mat<T>({{2, -1}});
  const attn::AttentionOptions opts{.scale = 2.0f};
  const auto r = attn::attention(Q, K, V, opts);
  EXPECT_NEAR(r.weights(0, 0), 0.25, tol);
  EXPECT_NEAR(r.weights(0, 1), 0.75, tol);
  const auto g = attn::attention_backward(Q, K, V, r.weights, d_out, opts);
  EXPECT_NEAR(g.dQ(0, 0), -9.0 / 8.0 * static_cast<double>(half_ln3), tol);  // -9/16 ln 3
  EXPECT_NEAR(g.dK(0, 0), 9.0 / 8.0, tol);
  EXPECT_NEAR(g.dK(1, 0), -9.0 / 8.0, tol);
  EXPECT_NEAR(g.dV(0, 0), 0.5, tol);
  EXPECT_NEAR(g.dV(0, 1), -0.25, tol);
  EXPECT_NEAR(g.dV(1, 0), 1.5, tol);
  EXPECT_NEAR(g.dV(1, 1), -0.75, tol);
}

TYPED_TEST(BackwardByHand, CrossEntropyOneRow) {
  using T = TypeParam;
  // V = 3 classes, logits z = [0, 0, ln 2], target 2: softmax = [1, 1, 2] / 4 = [1/4, 1/4, 1/2].
  //   no smoothing:  loss = -log p_2 = ln 2;   d = p - onehot(2) = [1/4, 1/4, -1/2]
  //   smoothing 0.3 (eps / V = 0.1):
  //     loss = 0.7 (-log 1/2) + 0.1 (-log 1/4 - log 1/4 - log 1/2)
  //          = 0.7 ln 2 + 0.1 (2 + 2 + 1) ln 2 = 1.2 ln 2
  //     d = p - 0.7 onehot(2) - 0.1 = [0.15, 0.15, 0.5 - 0.7 - 0.1] = [0.15, 0.15, -0.3]
  // One counted row: the mean divides by 1. ln 2 rounded to T is the only inexact input, and
  // the sums run in double: 1e-6 (float) / 1e-14 (double).
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  const double ln2 = std::log(2.0);
  const attn::MatrixOf<T> z = mat<T>({{0, 0, static_cast<T>(ln2)}});
  const std::vector<int> target{2};
  const auto plain = attn::cross_entropy(z, target);
  EXPECT_EQ(plain.count, 1);
  EXPECT_NEAR(plain.loss, ln2, tol);
  EXPECT_NEAR(plain.d_logits(0, 0), 0.25, tol);
  EXPECT_NEAR(plain.d_logits(0, 1), 0.25, tol);
  EXPECT_NEAR(plain.d_logits(0, 2), -0.5, tol);
  const auto smooth = attn::cross_entropy(z, target, {.label_smoothing = 0.3});
  EXPECT_NEAR(smooth.loss, 1.2 * ln2, tol);
  EXPECT_NEAR(smooth.d_logits(0, 0), 0.15, tol);
  EXPECT_NEAR(smooth.d_logits(0, 1), 0.15, tol);
  EXPECT_NEAR(smooth.d_logits(0, 2), -0.3, tol);
  // The prediction is the argmax: class 2 here, the target, so the row is correct. On a tie the
  // first largest logit is the prediction: z = [1, 1, 0] predicts class 0, so target 1 is wrong.
  EXPECT_EQ(plain.correct, 1);
  const attn::MatrixOf<T> tie = mat<T>({{1, 1, 0}});
  EXPECT_EQ(attn::cross_entropy(tie, std::vector<int>{1}).correct, 0);
  EXPECT_EQ(attn::cross_entropy(tie, std::vector<int>{0}).correct, 1);
}

TYPED_TEST(BackwardByHand, EmbeddingBackwardSumsRepeatedIdsAndLeavesUnusedRowsZero) {
  using T = TypeParam;
  // vocab 4, d_model 2, ids [2, 0, 2], dy = [[1, 2], [3, 4], [5, 6]]:
  //   row 2 gets dy rows 0 and 2: [1 + 5, 2 + 6] = [6, 8];  row 0 gets dy row 1: [3, 4]
  //   rows 1 and 3 occur nowhere: exactly 0.
  // A second call adds it all again (+=): [12, 16] and [6, 8]. Integers: exact.
  const std::vector<int> ids{2, 0, 2};
  const attn::MatrixOf<T> dy = mat<T>({{1, 2}, {3, 4}, {5, 6}});
  attn::MatrixOf<T> d_table = attn::MatrixOf<T>::Zero(4, 2);
  attn::embedding_backward(std::span<const int>(ids), dy, d_table);
  EXPECT_EQ(d_table, (mat<T>({{3, 4}, {0, 0}, {6, 8}, {0, 0}})));
  attn::embedding_backward(std::span<const int>(ids), dy, d_table);
  EXPECT_EQ(d_table, (mat<T>({{6, 8}, {0, 0}, {12, 16}, {0, 0}})));
}

// Accumulation (+=): calling a backward twice on the same inputs leaves 2x the gradients of one
// call. Linear, FFN and multi-head attention accumulate each parameter with ONE matrix product
// added to the holder (grads.weight += dy^T x): the first call leaves P, the second P + P, and
// P + P = 2P exactly in binary floating point, so these are compared with ==. (That P is the
// whole product: the sums here run over 5 rows, one block of Eigen's product kernels, which add
// their finished sum to the holder.)
TEST(BackwardAccumulation, LinearFfnAndMultiHeadDoubleExactly) {
  attn::Rng rng(11);
  const Matrix x = attn::random_normal(rng, 5, 8), dy8 = attn::random_normal(rng, 5, 8);
  const auto twice = [](auto&& backward, const auto& layer) {
    auto once = attn::zeros_like(layer), again = attn::zeros_like(layer);
    backward(once);
    backward(again);
    backward(again);
    const auto p1 = attn::parameters(once);
    const auto p2 = attn::parameters(again);
    ASSERT_EQ(p1.size(), p2.size());
    for (std::size_t i = 0; i < p1.size(); ++i) {
      EXPECT_TRUE(identical(p2[i].value, (2.0f * p1[i].value).eval())) << p1[i].key;
      EXPECT_GT(p1[i].value.cwiseAbs().maxCoeff(), 0.0f) << p1[i].key;  // not a trivial 0 = 2 * 0
    }
  };
  const attn::Linear lin = attn::linear_init(rng, 8, 4);
  const Matrix dy4 = attn::random_normal(rng, 5, 4);
  twice([&](attn::Linear& g) { attn::linear_backward(lin, x, dy4, g); }, lin);

  const attn::FeedForward ff = attn::ffn_init(rng, 8, 16);
  attn::FeedForwardCache ff_cache;
  attn::ffn_forward(ff, x, &ff_cache);
  twice([&](attn::FeedForward& g) { attn::ffn_backward(ff, x, ff_cache, dy8, g); }, ff);

  attn::MultiHeadAttention mha = attn::multi_head_init(rng, 8, 2);
  mha.q_proj.bias = attn::random_normal(rng, 1, 8);  // non-zero biases, as a trained layer has
  mha.k_proj.bias = attn::random_normal(rng, 1, 8);
  const attn::MultiHeadResult r = attn::multi_head_forward(mha, x, x, x);
  twice([&](attn::MultiHeadAttention& g) { attn::multi_head_backward(mha, x, x, x, r, dy8, g); },
        mha);
}

// LayerNorm accumulates gamma's and beta's gradients row by row (gamma(c) += dy(r, c) xhat(r, c)
// for r = 0, 1, ...), so the second call adds its rows one at a time to the first call's sum:
// ((G + t_0) + t_1) + ... is not 2G to the bit, only to a few ulps of G. So are the layers built
// on it. Compared relative to each tensor's scale at 1e-6 (~ 16 float ulps); a backward that
// overwrote (=) instead of accumulating would be off by 50%.
TEST(BackwardAccumulation, LayerNormAndTransformerLayersDoubleToRoundOff) {
  attn::Rng rng(12);
  const auto expect_doubled = [](const auto& once, const auto& again) {
    const auto p1 = attn::parameters(once);
    const auto p2 = attn::parameters(again);
    ASSERT_EQ(p1.size(), p2.size());
    for (std::size_t i = 0; i < p1.size(); ++i) {
      const double scale = p1[i].value.cwiseAbs().maxCoeff();
      EXPECT_GT(scale, 0.0) << p1[i].key;
      EXPECT_LE(attn::max_abs_diff(p2[i].value, (2.0f * p1[i].value).eval()), 1e-6 * 2 * scale)
          << p1[i].key;
    }
  };
  const Matrix x = attn::random_normal(rng, 6, 16, 1.0, 2.0), dy = attn::random_normal(rng, 6, 16);
  {
    attn::LayerNorm norm = attn::layer_norm_init(16);
    norm.gamma = attn::random_normal(rng, 1, 16, 1.0, 0.3);
    attn::LayerNormCache cache;
    attn::layer_norm_forward(norm, x, &cache);
    attn::LayerNorm once = attn::zeros_like(norm), again = attn::zeros_like(norm);
    attn::layer_norm_backward(norm, x, cache, dy, once);
    attn::layer_norm_backward(norm, x, cache, dy, again);
    attn::layer_norm_backward(norm, x, cache, dy, again);
    expect_doubled(once, again);
  }
  for (const NormPlacement placement : {NormPlacement::post, NormPlacement::pre}) {
    const attn::EncoderLayer enc = attn::encoder_layer_init(rng, 16, 4, 32, placement);
    attn::EncoderLayerCache cache;
    attn::encoder_layer_forward(enc, x, {}, &cache);
    attn::EncoderLayer once = attn::zeros_like(enc), again = attn::zeros_like(enc);
    attn::encoder_layer_backward(enc, cache, dy, once);
    attn::encoder_layer_backward(enc, cache, dy, again);
    attn::encoder_layer_backward(enc, cache, dy, again);
    expect_doubled(once, again);

    const attn::DecoderLayer dec = attn::decoder_layer_init(rng, 16, 4, 32, placement);
    const Matrix memory = attn::random_normal(rng, 7, 16);
    const AllowedMask causal = attn::causal_mask(6);
    attn::DecoderLayerCache dcache;
    attn::decoder_layer_forward(dec, x, memory, {.self_allowed = causal}, &dcache);
    attn::DecoderLayer donce = attn::zeros_like(dec), dagain = attn::zeros_like(dec);
    attn::decoder_layer_backward(dec, memory, dcache, dy, donce);
    attn::decoder_layer_backward(dec, memory, dcache, dy, dagain);
    attn::decoder_layer_backward(dec, memory, dcache, dy, dagain);
    expect_doubled(donce, dagain);
  }
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
  const double scale = std::max(grads.q_proj.bias.cwiseAbs().maxCoeff(),
                                grads.v_proj.bias.cwiseAbs().maxCoeff());
  EXPECT_GT(scale, 0.1);
  EXPECT_LE(grads.k_proj.bias.cwiseAbs().maxCoeff(), 1e-6 * scale);
}

// ================================================================================================
// C. Behaviour, to the bit
// ================================================================================================
//
// A note on zeros: a "zero" gradient is p * (dP - dot) with p = +0, or a sum of such terms
// times finite numbers, so its SIGN follows the other factor and may flip when that factor
// changes. Quantities that are exactly zero are therefore compared by value (== 0, which
// equates -0 and +0); everything else with memcmp. Adding +-0 to a non-zero number changes no
// bit, which is why the non-zero quantities below are invariant to the bit.

bool all_zero(const attn::MatrixView& m) { return (m.array() == 0.0f).all(); }

TEST(BackwardBehaviour, PaddedKeyChangesNoGradientAndGetsNone) {
  // Q [4 x 3], K [6 x 3], V [6 x 2]; keys 4 and 5 blocked for every query (padding).
  // Invariant to the bit when K and V rows 4, 5 change to anything finite: the forward's
  // out and weights, dQ (all rows), dK and dV rows 0..3. Exactly 0: dK and dV rows 4, 5.
  attn::Rng rng(21);
  const Matrix Q = attn::random_normal(rng, 4, 3), dy = attn::random_normal(rng, 4, 2);
  Matrix K = attn::random_normal(rng, 6, 3), V = attn::random_normal(rng, 6, 2);
  AllowedMask allowed = attn::full_mask(4, 6);
  allowed.rightCols(2).setConstant(false);
  const attn::AttentionOptions opts{.allowed = allowed};
  const auto run = [&] {
    const attn::AttentionResult r = attn::attention(Q, K, V, opts);
    return std::pair{r, attn::attention_backward(Q, K, V, r.weights, dy, opts)};
  };
  const auto [r0, g0] = run();
  EXPECT_TRUE(all_zero(g0.dK.bottomRows(2)) && all_zero(g0.dV.bottomRows(2)));
  // Huge (1e30: a score of ~1e30, a dP = d_out v of ~1e30, still finite), random, either sign.
  // The limit is a dP that overflows: V rows of 3e38 make d_out v = +-inf, and its weight 0
  // times inf is NaN, in dS and then in dQ and dK (PyTorch alike; attention.hpp's "garbage in
  // is loud" for the forward). The promise is for finite dP, which 1e30 is.
  for (const float size : {1e30f, -1e30f, 5.0f}) {
    K.bottomRows(2) = attn::random_normal(rng, 2, 3) * size;
    V.bottomRows(2) = attn::random_normal(rng, 2, 2) * size;
    const auto [r1, g1] = run();
    EXPECT_TRUE(identical(r1.out, r0.out)) << size;
    EXPECT_TRUE(identical(r1.weights, r0.weights)) << size;
    EXPECT_TRUE(identical(g1.dQ, g0.dQ)) << size;
    EXPECT_TRUE(identical(g1.dK.topRows(4), g0.dK.topRows(4))) << size;
    EXPECT_TRUE(identical(g1.dV.topRows(4), g0.dV.topRows(4))) << size;
    EXPECT_TRUE(all_zero(g1.dK.bottomRows(2))) << size;
    EXPECT_TRUE(all_zero(g1.dV.bottomRows(2))) << size;
  }
}

TEST(BackwardBehaviour, CausalFutureKeyValueChangesNoEarlierQueryGradient) {
  // n = 5, causal; token t = 3's key and value row changed.
  //  (a) any d_out: out rows 0..2 and dQ rows 0..2 are invariant (query i < t reads keys and
  //      values j <= i only, and its row of dS only those). dK and dV rows j < t are NOT: queries
  //      i >= t attend to key j too, with weights renormalised by the new key t.
  //  (b) d_out rows t.. zero: then every gradient is invariant: dS rows t.. are 0 (dP = 0 there),
  //      so dK and dV collect only from queries < t; dK and dV rows t.. are exactly 0 and dQ
  //      rows t.. are exactly 0.
  constexpr Index n = 5, t = 3;
  attn::Rng rng(22);
  const Matrix Q = attn::random_normal(rng, n, 4);
  Matrix K = attn::random_normal(rng, n, 4), V = attn::random_normal(rng, n, 4);
  const Matrix K0 = K, V0 = V;
  const AllowedMask causal = attn::causal_mask(n);
  const attn::AttentionOptions opts{.allowed = causal};
  Matrix dy = attn::random_normal(rng, n, 4);
  const auto run = [&] {
    const attn::AttentionResult r = attn::attention(Q, K, V, opts);
    return std::pair{r, attn::attention_backward(Q, K, V, r.weights, dy, opts)};
  };
  const auto change_token_t = [&] {
    K.row(t) = attn::random_normal(rng, 1, 4, 0.0, 5.0);
    V.row(t) = attn::random_normal(rng, 1, 4, 0.0, 5.0);
  };
  // (a)
  const auto [r0, g0] = run();
  change_token_t();
  const auto [r1, g1] = run();
  EXPECT_TRUE(identical(r1.out.topRows(t), r0.out.topRows(t)));
  EXPECT_TRUE(identical(g1.dQ.topRows(t), g0.dQ.topRows(t)));
  EXPECT_FALSE(identical(g1.dQ.bottomRows(n - t), g0.dQ.bottomRows(n - t)));  // query t sees it
  EXPECT_FALSE(identical(g1.dK.topRows(t), g0.dK.topRows(t)));  // not invariant without (b)
  EXPECT_FALSE(identical(g1.dV.topRows(t), g0.dV.topRows(t)));
  // (b)
  K = K0;
  V = V0;
  dy.bottomRows(n - t).setZero();
  const auto [r2, g2] = run();
  change_token_t();
  const auto [r3, g3] = run();
  EXPECT_TRUE(identical(g3.dQ.topRows(t), g2.dQ.topRows(t)));
  EXPECT_TRUE(identical(g3.dK.topRows(t), g2.dK.topRows(t)));
  EXPECT_TRUE(identical(g3.dV.topRows(t), g2.dV.topRows(t)));
  for (const auto* g : {&g2, &g3}) {
    EXPECT_TRUE(all_zero(g->dQ.bottomRows(n - t)));
    EXPECT_TRUE(all_zero(g->dK.bottomRows(n - t)));
    EXPECT_TRUE(all_zero(g->dV.bottomRows(n - t)));
  }
}

TEST(BackwardBehaviour, QueryWithNoAllowedKeyPassesNothingBack) {
  // Query 1 of 3 may attend to no key. Its row of the weights is 0, so: its dQ row is exactly
  // 0, and dK, dV do not depend on its d_out row or its Q row (changed to anything finite,
  // huge included): invariant to the bit. The other queries' dQ rows are invariant too.
  attn::Rng rng(23);
  Matrix Q = attn::random_normal(rng, 3, 4), dy = attn::random_normal(rng, 3, 2);
  const Matrix K = attn::random_normal(rng, 5, 4), V = attn::random_normal(rng, 5, 2);
  AllowedMask allowed = attn::full_mask(3, 5);
  allowed.row(1).setConstant(false);
  allowed(2, 4) = false;  // and an ordinary blocked key elsewhere
  const attn::AttentionOptions opts{.allowed = allowed};
  const auto run = [&] {
    const attn::AttentionResult r = attn::attention(Q, K, V, opts);
    return attn::attention_backward(Q, K, V, r.weights, dy, opts);
  };
  const attn::AttentionGrads g0 = run();
  EXPECT_TRUE(all_zero(g0.dQ.row(1)));
  for (const float size : {1e30f, 3.0f}) {
    Q.row(1) = attn::random_normal(rng, 1, 4) * size;
    dy.row(1) = attn::random_normal(rng, 1, 2) * size;
    const attn::AttentionGrads g1 = run();
    EXPECT_TRUE(all_zero(g1.dQ.row(1))) << size;
    EXPECT_TRUE(identical(g1.dQ.row(0), g0.dQ.row(0))) << size;
    EXPECT_TRUE(identical(g1.dQ.row(2), g0.dQ.row(2))) << size;
    EXPECT_TRUE(identical(g1.dK, g0.dK)) << size;
    EXPECT_TRUE(identical(g1.dV, g0.dV)) << size;
  }
}

TEST(BackwardBehaviour, IgnoredRowOfCrossEntropyChangesNothing) {
  // targets with the ignore id 0 at row 2: that row's logits (changed to anything, even huge,
  // infinite or NaN: the row is never read) change neither the loss, nor the count, nor any
  // entry of d_logits, and its d_logits row is exactly 0. Both smoothing settings.
  attn::Rng rng(24);
  Matrix logits = attn::random_normal(rng, 5, 7, 0.0, 2.0);
  const std::vector<int> targets{3, 6, 0, 1, 5};
  for (const double eps : {0.0, 0.1}) {
    const attn::CrossEntropyOptions opts{.ignore_index = 0, .label_smoothing = eps};
    const attn::CrossEntropy r0 = attn::cross_entropy(logits, targets, opts);
    EXPECT_EQ(r0.count, 4);
    EXPECT_TRUE(all_zero(r0.d_logits.row(2)));
    for (const float v : {1e30f, -1e30f, std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
      logits.row(2) = attn::random_normal(rng, 1, 7) * v;
      logits(2, 0) = v;  // and the ignored class's own logit
      const attn::CrossEntropy r1 = attn::cross_entropy(logits, targets, opts);
      EXPECT_TRUE(identical(Matrix::Constant(1, 1, r1.loss), Matrix::Constant(1, 1, r0.loss)))
          << eps << " " << v;
      EXPECT_EQ(r1.count, r0.count);
      EXPECT_TRUE(identical(r1.d_logits, r0.d_logits)) << eps << " " << v;
    }
  }
}

TEST(BackwardBehaviour, CausalMultiHeadEarlierPositionsIgnoreTokenT) {
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

class BackwardPaddedEncoder : public ::testing::TestWithParam<NormPlacement> {};

TEST_P(BackwardPaddedEncoder, PaddedTokenChangesNoRealGradient) {
  // Encoder layer on x [6 x 16], token 5 is padding: key 5 blocked for every query (the padding
  // mask; query 5 still attends to keys 0..4, as in PyTorch). Upstream gradient zero at row 5.
  // x row 5 changed (random, and huge: 1e6). Invariant to the bit: out rows 0..4, d_x rows
  // 0..4 and every parameter gradient. Exactly 0: d_x row 5. Why: the real rows never read
  // row 5 forward (blocked key; LayerNorm and FFN act per row); backward, row 5 starts from
  // d_out = 0, which every per-row step (LayerNorm', FFN', the residual) keeps 0, and in the
  // attention a zero d_out row gives a zero dS row, and key 5's column of P is 0; so row 5's
  // inputs only ever meet zeros in the sums that form the parameter gradients.
  const NormPlacement placement = GetParam();
  attn::Rng rng(26);
  attn::EncoderLayer layer = attn::encoder_layer_init(rng, 16, 4, 32, placement);
  for (auto& p : attn::parameters(layer)) {  // biases and norms away from their initial 0 / 1
    if (p.is_vector) p.value += attn::random_normal(rng, 1, p.value.cols(), 0.0, 0.2);
  }
  Matrix x = attn::random_normal(rng, 6, 16);
  const std::vector<int> ids{5, 9, 2, 7, 3, 0};  // id 0 = padding at position 5
  const AllowedMask allowed = attn::padding_mask(ids, 6);
  ASSERT_TRUE(!allowed.col(5).any() && allowed.leftCols(5).all());
  Matrix dy = attn::random_normal(rng, 6, 16);
  dy.row(5).setZero();
  struct Run {
    Matrix out, d_x;
    attn::EncoderLayer grads;
  };
  const auto run = [&] {
    attn::EncoderLayerCache cache;
    Run r{attn::encoder_layer_forward(layer, x, {.allowed = allowed}, &cache), {},
          attn::zeros_like(layer)};
    r.d_x = attn::encoder_layer_backward(layer, cache, dy, r.grads);
    return r;
  };
  const Run r0 = run();
  EXPECT_TRUE(all_zero(r0.d_x.row(5)));
  for (const double size : {1.0, 1e6}) {
    x.row(5) = attn::random_normal(rng, 1, 16, 0.5, 3.0 * size);
    const Run r1 = run();
    EXPECT_TRUE(identical(r1.out.topRows(5), r0.out.topRows(5))) << size;
    EXPECT_FALSE(identical(r1.out.row(5), r0.out.row(5))) << size;
    EXPECT_TRUE(identical(r1.d_x.topRows(5), r0.d_x.topRows(5))) << size;
    EXPECT_TRUE(all_zero(r1.d_x.row(5))) << size;
    const auto p0 = attn::parameters(r0.grads), p1 = attn::parameters(r1.grads);
    for (std::size_t i = 0; i < p0.size(); ++i) {
      EXPECT_TRUE(identical(p1[i].value, p0[i].value))
          << size << " " << p0[i].key << " from " << p0[i].first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Placements, BackwardPaddedEncoder,
                         ::testing::Values(NormPlacement::post, NormPlacement::pre),
                         [](const auto& info) {
                           return info.param == NormPlacement::post ? "post" : "pre";
                         });

// ================================================================================================
// D. Errors: std::invalid_argument naming the backward pass, before any gradient is touched
// ================================================================================================

/// The message starts with "<where>: ".
::testing::AssertionResult names(const std::string& message, const std::string& where) {
  if (message.starts_with(where + ": ")) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected \"" << where << ": ...\", got \"" << message
                                       << "\"";
}

/// Every parameter gradient of `grads` is still exactly 0 (a failed call wrote nothing).
template <typename L>
bool untouched(const L& grads) {
  for (const auto& p : attn::parameters(grads)) {
    if (!(p.value.array() == 0).all()) return false;
  }
  return true;
}

TEST(BackwardErrors, LinearBackward) {
  attn::Rng rng(31);
  const attn::Linear layer = attn::linear_init(rng, 6, 4);
  const Matrix x = attn::random_normal(rng, 5, 6), dy = attn::random_normal(rng, 5, 4);
  attn::Linear grads = attn::zeros_like(layer);
  EXPECT_TRUE(names(message_of([&] { attn::linear_backward(layer, x, Matrix(5, 3), grads); }),
                    "linear_backward"));  // dy [n x out] with the wrong out
  EXPECT_TRUE(names(message_of([&] { attn::linear_backward(layer, x, Matrix(4, 4), grads); }),
                    "linear_backward"));  // dy of another n
  EXPECT_TRUE(names(message_of([&] { attn::linear_backward(layer, Matrix(5, 5), dy, grads); }),
                    "linear_backward"));  // x of the wrong width
  attn::Linear wrong = attn::zeros_like(attn::linear_init(rng, 6, 3));
  EXPECT_TRUE(names(message_of([&] { attn::linear_backward(layer, x, dy, wrong); }),
                    "linear_backward"));  // grads of another layer
  attn::Linear empty;
  EXPECT_TRUE(names(message_of([&] { attn::linear_backward(layer, x, dy, empty); }),
                    "linear_backward"));  // grads not from zeros_like at all
  EXPECT_TRUE(untouched(grads));
}

TEST(BackwardErrors, LayerNormBackward) {
  attn::Rng rng(32);
  const attn::LayerNorm norm = attn::layer_norm_init(8);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 8);
  attn::LayerNormCache cache, other;
  attn::layer_norm_forward(norm, x, &cache);
  attn::layer_norm_forward(norm, Matrix(attn::random_normal(rng, 3, 8)), &other);
  attn::LayerNorm grads = attn::zeros_like(norm);
  EXPECT_TRUE(names(
      message_of([&] { attn::layer_norm_backward(norm, x, cache, Matrix(5, 7), grads); }),
      "layer_norm_backward"));
  EXPECT_TRUE(names(message_of([&] { attn::layer_norm_backward(norm, x, other, dy, grads); }),
                    "layer_norm_backward"));  // the cache of another input
  attn::LayerNorm wrong = attn::zeros_like(attn::layer_norm_init(7));
  EXPECT_TRUE(names(message_of([&] { attn::layer_norm_backward(norm, x, cache, dy, wrong); }),
                    "layer_norm_backward"));
  EXPECT_TRUE(untouched(grads));
}

TEST(BackwardErrors, FfnBackward) {
  attn::Rng rng(33);
  const attn::FeedForward ff = attn::ffn_init(rng, 8, 16);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 8);
  attn::FeedForwardCache cache, other;
  attn::ffn_forward(ff, x, &cache);
  attn::ffn_forward(ff, Matrix(attn::random_normal(rng, 3, 8)), &other);
  attn::FeedForward grads = attn::zeros_like(ff);
  EXPECT_TRUE(names(message_of([&] { attn::ffn_backward(ff, x, cache, Matrix(5, 7), grads); }),
                    "ffn_backward"));  // dy of the wrong width
  EXPECT_TRUE(names(message_of([&] { attn::ffn_backward(ff, x, cache, Matrix(4, 8), grads); }),
                    "ffn_backward"));  // dy of another n
  EXPECT_TRUE(names(message_of([&] { attn::ffn_backward(ff, x, other, dy, grads); }),
                    "ffn_backward"));  // the cache of another input
  EXPECT_TRUE(untouched(grads));
  attn::FeedForward wrong = attn::zeros_like(ff);
  wrong.linear1.weight.resize(16, 7);  // linear1's gradient of the wrong shape, linear2's fine
  EXPECT_TRUE(names(message_of([&] { attn::ffn_backward(ff, x, cache, dy, wrong); }),
                    "ffn_backward"));
  EXPECT_TRUE((wrong.linear2.weight.array() == 0).all() && (wrong.linear2.bias.array() == 0).all())
      << "ffn_backward accumulated into linear2's gradients before it threw";
}

TEST(BackwardErrors, EmbeddingBackward) {
  const std::vector<int> ids{2, 0, 2};
  Matrix d_table = Matrix::Zero(4, 2);
  EXPECT_TRUE(names(message_of([&] {
                      attn::embedding_backward(std::span<const int>(ids), Matrix(3, 3), d_table);
                    }),
                    "embedding_backward"));  // dy of the wrong width
  EXPECT_TRUE(names(message_of([&] {
                      attn::embedding_backward(std::span<const int>(ids), Matrix(2, 2), d_table);
                    }),
                    "embedding_backward"));  // one row of dy per id
  const std::vector<int> outside{2, 4, 0};
  EXPECT_TRUE(names(message_of([&] {
                      attn::embedding_backward(std::span<const int>(outside),
                                               Matrix(Matrix::Ones(3, 2)), d_table);
                    }),
                    "embedding_backward"));  // id 4 of a 4-row table
  EXPECT_TRUE((d_table.array() == 0).all());
}

TEST(BackwardErrors, AttentionBackward) {
  attn::Rng rng(34);
  const Matrix Q = attn::random_normal(rng, 4, 3), K = attn::random_normal(rng, 6, 3),
               V = attn::random_normal(rng, 6, 2), dy = attn::random_normal(rng, 4, 2);
  const attn::AttentionResult r = attn::attention(Q, K, V);
  const attn::AttentionResult other = attn::attention(Q, K.topRows(5), V.topRows(5));
  EXPECT_TRUE(names(message_of([&] { attn::attention_backward(Q, K, V, r.weights, Matrix(4, 3)); }),
                    "attention_backward"));  // d_out of the wrong width
  EXPECT_TRUE(names(message_of([&] { attn::attention_backward(Q, K, V, r.weights, Matrix(3, 2)); }),
                    "attention_backward"));  // d_out of another n_q
  EXPECT_TRUE(names(message_of([&] { attn::attention_backward(Q, K, V, other.weights, dy); }),
                    "attention_backward"));  // the weights (cache) of another input
  // attention_backward_into's shape errors name "attention_backward", as attention_into's
  // name "attention": one check shared by both entry points.
  Matrix dQ(4, 3), dK(6, 3), dV(6, 3);
  EXPECT_TRUE(names(message_of([&] {
                      attn::attention_backward_into(Q, K, V, r.weights, dy, dQ, dK, dV);
                    }),
                    "attention_backward"));  // dV [6 x 3] for V [6 x 2]
}

TEST(BackwardErrors, AttentionBackwardIntoRejectsOutputsOverlappingInputs) {
  // attn.hpp, "Aliasing": the _into functions throw when an output overlaps an input, rather
  // than return a silently wrong answer. attention_backward_into writes dV first and then
  // reads d_out, V, Q and K: dV over V, or dQ over Q (read again for dK), would be wrong.
  attn::Rng rng(38);
  const Matrix Q = attn::random_normal(rng, 4, 3), K = attn::random_normal(rng, 4, 3),
               V = attn::random_normal(rng, 4, 3), dy = attn::random_normal(rng, 4, 3);
  const attn::AttentionResult r = attn::attention(Q, K, V);
  Matrix dQ(4, 3), dK(4, 3), dV(4, 3);
  Matrix v = V;  // dV written over the values
  EXPECT_TRUE(names(
      message_of([&] { attn::attention_backward_into(Q, K, v, r.weights, dy, dQ, dK, v); }),
      "attention_backward"));
  Matrix q = Q;  // dQ written over the queries
  EXPECT_TRUE(names(
      message_of([&] { attn::attention_backward_into(q, K, V, r.weights, dy, q, dK, dV); }),
      "attention_backward"));
  Matrix d = dy;  // dV written over d_out (n_q = n_k, d_v = d_k here)
  EXPECT_TRUE(names(
      message_of([&] { attn::attention_backward_into(Q, K, V, r.weights, d, dQ, dK, d); }),
      "attention_backward"));
  EXPECT_TRUE(identical(v, V) && identical(q, Q) && identical(d, dy));  // nothing was written
}

TEST(BackwardErrors, MultiHeadBackward) {
  attn::Rng rng(35);
  const attn::MultiHeadAttention mha = attn::multi_head_init(rng, 8, 2);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 8);
  const attn::MultiHeadResult r = attn::multi_head_forward(mha, x, x, x);
  const Matrix x3 = attn::random_normal(rng, 3, 8);
  const attn::MultiHeadResult other = attn::multi_head_forward(mha, x3, x3, x3);
  attn::MultiHeadAttention grads = attn::zeros_like(mha);
  EXPECT_TRUE(names(message_of([&] {
                      attn::multi_head_backward(mha, x, x, x, r, Matrix(5, 7), grads);
                    }),
                    "multi_head_backward"));
  EXPECT_TRUE(names(message_of([&] {
                      attn::multi_head_backward(mha, x, x, x, other, dy, grads);
                    }),
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

TEST(BackwardErrors, EncoderLayerBackward) {
  attn::Rng rng(36);
  const attn::EncoderLayer layer = attn::encoder_layer_init(rng, 8, 2, 16);
  const Matrix x = attn::random_normal(rng, 5, 8), dy = attn::random_normal(rng, 5, 8);
  attn::EncoderLayerCache cache;
  attn::encoder_layer_forward(layer, x, {}, &cache);
  attn::EncoderLayer grads = attn::zeros_like(layer);
  EXPECT_TRUE(names(message_of([&] {
                      attn::encoder_layer_backward(layer, cache, Matrix(4, 8), grads);
                    }),
                    "encoder_layer_backward"));  // d_out of another n (the cache's input was 5)
  EXPECT_TRUE(names(message_of([&] {
                      attn::encoder_layer_backward(layer, attn::EncoderLayerCache{}, dy, grads);
                    }),
                    "encoder_layer_backward"));  // no forward filled this cache
  EXPECT_TRUE(untouched(grads));
  attn::EncoderLayer wrong = attn::zeros_like(layer);
  wrong.norm1.gamma.resize(7);  // norm1's gradient is the last one written
  EXPECT_TRUE(names(message_of([&] { attn::encoder_layer_backward(layer, cache, dy, wrong); }),
                    "encoder_layer_backward"));
  wrong.norm1.gamma.setZero(8);
  EXPECT_TRUE(untouched(wrong)) << "encoder_layer_backward accumulated before it threw";
}

TEST(BackwardErrors, DecoderLayerBackward) {
  attn::Rng rng(37);
  const attn::DecoderLayer layer = attn::decoder_layer_init(rng, 8, 2, 16);
  const Matrix x = attn::random_normal(rng, 5, 8), memory = attn::random_normal(rng, 6, 8),
               dy = attn::random_normal(rng, 5, 8);
  attn::DecoderLayerCache cache;
  attn::decoder_layer_forward(layer, x, memory, {}, &cache);
  attn::DecoderLayer grads = attn::zeros_like(layer);
  EXPECT_TRUE(names(message_of([&] {
                      attn::decoder_layer_backward(layer, memory, cache, Matrix(5, 7), grads);
                    }),
                    "decoder_layer_backward"));
  EXPECT_TRUE(names(message_of([&] {
                      attn::decoder_layer_backward(layer, memory.topRows(4), cache, dy, grads);
                    }),
                    "decoder_layer_backward"));  // a memory other than the forward's
  EXPECT_TRUE(untouched(grads));
  attn::DecoderLayer wrong = attn::zeros_like(layer);
  wrong.self_attn.q_proj.bias.resize(5);  // the self-attention's gradient, the last one written
  EXPECT_TRUE(names(message_of([&] {
                      attn::decoder_layer_backward(layer, memory, cache, dy, wrong);
                    }),
                    "decoder_layer_backward"));
  wrong.self_attn.q_proj.bias.setZero(8);
  EXPECT_TRUE(untouched(wrong)) << "decoder_layer_backward accumulated before it threw";
}

TEST(BackwardErrors, CrossEntropy) {
  const Matrix logits = Matrix::Zero(3, 4);
  const std::vector<int> two{1, 2}, outside{1, 4, 0}, fine{1, 2, 3};
  EXPECT_TRUE(names(message_of([&] { attn::cross_entropy(logits, two); }), "cross_entropy"));
  EXPECT_TRUE(names(message_of([&] { attn::cross_entropy(logits, outside); }), "cross_entropy"));
  EXPECT_TRUE(names(message_of([&] {
                      attn::cross_entropy(logits, fine, {.label_smoothing = 1.5});
                    }),
                    "cross_entropy"));
  // ignore_index may lie outside the vocabulary (PyTorch's -100): that target is fine.
  const std::vector<int> padded{1, -100, 3};
  EXPECT_EQ(message_of([&] { attn::cross_entropy(logits, padded); }), "(no exception)");
}

}  // namespace

namespace {

// With a finite blocked_score (-1e9), a query whose every key is blocked has uniform weights,
// but its scores are constants: central differences give it no gradient, and neither may the
// backward pass (it zeroes dS where the mask blocks).
TEST(BackwardMasks, AFiniteBlockedScoreGivesAFullyBlockedRowNoGradient) {
  attn::MatrixD Q(2, 2), K(2, 2), V(2, 2), dO(2, 2);
  Q << 1, 2, 0, 1;
  K << 1, 0, 1, 1;
  V << 1, 0, 0, 2;
  dO << 1, 0.5, -1, 1;
  attn::AllowedMask allowed(2, 2);
  allowed << false, false, true, true;  // query 1 may see nothing
  const attn::AttentionOptions opts{.allowed = allowed, .blocked_score = -1e9f};
  const attn::AttentionResultD fwd = attn::attention(Q, K, V, opts);
  const attn::AttentionGradsD g = attn::attention_backward(Q, K, V, fwd.weights, dO, opts);
  const auto loss = [&] { return (attn::attention(Q, K, V, opts).out.array() * dO.array()).sum(); };
  // Expected from central differences in double (gradient_check.hpp): agreement to ~1e-10.
  EXPECT_LT(attn::check_tensor("Q", Q, g.dQ, loss).max_abs_error, 1e-9);
  EXPECT_LT(attn::check_tensor("K", K, g.dK, loss).max_abs_error, 1e-9);
  EXPECT_LT(attn::check_tensor("V", V, g.dV, loss).max_abs_error, 1e-9);
  EXPECT_EQ(g.dQ.row(0).cwiseAbs().maxCoeff(), 0.0);
}

}  // namespace
