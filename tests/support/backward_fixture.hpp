// backward_fixture.hpp: what the suites of the backward passes share (the layers' suites in
// tests/attn/ops and tests/attn/layers): loading the PyTorch fixtures of
// scripts/fixtures/backward.py (tests/data/backward), comparing with them, and the small
// helpers of the hand calculations, the identities and the error checks.
//
// Where the expected values of those suites come from (the course's rule: never from this
// program's output):
//   A. PyTorch autograd, tests/data/backward/bw_*.npy, written by scripts/fixtures/backward.py
//      (float32, masks 1 = may attend, batch dimension dropped, gradients named d_<state_dict
//      key with '.' -> '_'>). The script cross-checked every tensor against a float64 formula.
//   B. Hand calculations small enough to do on paper, the arithmetic written beside them.
//   C. Identities the masks promise, checked to the bit: a quantity that must not depend on an
//      input is computed twice, the input changed in between, and compared with memcmp
//      (attn_test::identical). Each states exactly which quantities are invariant, and where
//      useful checks that a neighbouring quantity that is NOT invariant does change.
//   D. The errors: every backward pass throws std::invalid_argument naming itself.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/ops/masks.hpp"
#include "course/npy.hpp"
#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace attn_test {

using attn::AllowedMask;
using attn::Index;
using attn::Matrix;
using attn::RowVector;

// ---- Loading the fixtures of scripts/fixtures/backward.py ---------------------------------------

struct Fixture {
  std::string prefix;  // "bw_enc_post_"

  std::filesystem::path path(const std::string& name) const {
    return fixture("backward", prefix + name + ".npy");
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
    for (const auto& entry : std::filesystem::directory_iterator(fixture_folder("backward"))) {
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
inline std::string gradient_name(const std::string& key) {
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
inline constexpr double kFixtureTolerance = 1e-5;

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
    ASSERT_TRUE(first >= 0 && first + count <= total &&
                (vector ? got.rows() == 1 : got.cols() == expected.cols()))
        << case_ << " " << name << ": got " << attn::shape_str(got) << " at " << first
        << ", the fixture is " << attn::shape_str(expected);
    const Matrix block = vector ? Matrix(expected.middleCols(first, count))
                                : Matrix(expected.middleRows(first, count));
    const double scale = expected.cwiseAbs().maxCoeff();
    ASSERT_GT(scale, 0.0) << case_ << " " << name;
    const double ratio = attn::max_abs_diff(got, block) / scale;
    EXPECT_LE(ratio, kFixtureTolerance)
        << case_ << " " << name << " (from " << first
        << "): max |ours - PyTorch| = " << ratio * scale << " of scale " << scale;
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

// ---- B. Hand calculations -----------------------------------------------------------------------

/// A small matrix written out row by row: mat<float>({{1, 2}, {3, 4}}).
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

/// Float and double: every backward pass is a template on its scalar type (attn.hpp).
using Reals = ::testing::Types<float, double>;

/// Calling a backward pass twice into one holder leaves twice one call's gradients (+=).
/// `backward(grads)` runs it once; `layer` gives the shapes. Linear, the FFN and multi-head
/// attention accumulate each parameter with ONE matrix product added to the holder
/// (grads.weight += dy^T x): the first call leaves P, the second P + P, and P + P = 2P exactly
/// in binary floating point, so these compare with memcmp. (That P is the whole product: the
/// sums of the suites run over a handful of rows, one block of Eigen's product kernels, which
/// add their finished sum to the holder.)
template <typename Backward, typename Layer>
void expect_accumulates_exactly(Backward&& backward, const Layer& layer) {
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
}

/// `again` (two calls) is twice `once` (one call) to round-off: LayerNorm accumulates gamma's
/// and beta's gradients row by row (gamma(c) += dy(r, c) xhat(r, c) for r = 0, 1, ...), so the
/// second call adds its rows one at a time to the first call's sum: ((G + t_0) + t_1) + ... is
/// not 2G to the bit, only to a few ulps of G; so are the layers built on it. Compared relative
/// to each tensor's scale at 1e-6 (~ 16 float ulps); a backward that overwrote (=) instead of
/// accumulating would be off by 50%.
template <typename Layer>
void expect_doubled_to_round_off(const Layer& once, const Layer& again) {
  const auto p1 = attn::parameters(once);
  const auto p2 = attn::parameters(again);
  ASSERT_EQ(p1.size(), p2.size());
  for (std::size_t i = 0; i < p1.size(); ++i) {
    const double scale = p1[i].value.cwiseAbs().maxCoeff();
    EXPECT_GT(scale, 0.0) << p1[i].key;
    EXPECT_LE(attn::max_abs_diff(p2[i].value, (2.0f * p1[i].value).eval()), 1e-6 * 2 * scale)
        << p1[i].key;
  }
}

// ---- C. Behaviour, to the bit -------------------------------------------------------------------
//
// A note on zeros: a "zero" gradient is p * (dP - dot) with p = +0, or a sum of such terms
// times finite numbers, so its SIGN follows the other factor and may flip when that factor
// changes. Quantities that are exactly zero are therefore compared by value (== 0, which
// equates -0 and +0); everything else with memcmp. Adding +-0 to a non-zero number changes no
// bit, which is why the non-zero quantities below are invariant to the bit.

/// Every entry is 0 (+0 or -0).
inline bool all_zero(const attn::MatrixView& m) { return (m.array() == 0.0f).all(); }

// ---- D. Errors: std::invalid_argument naming the backward pass, before any gradient is touched --

/// The message starts with "<where>: ".
inline ::testing::AssertionResult names(const std::string& message, const std::string& where) {
  if (message.starts_with(where + ": ")) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected \"" << where << ": ...\", got \"" << message << "\"";
}

/// Every parameter gradient of `grads` is still exactly 0 (a failed call wrote nothing).
template <typename L>
bool untouched(const L& grads) {
  for (const auto& p : attn::parameters(grads)) {
    if (!(p.value.array() == 0).all()) return false;
  }
  return true;
}

}  // namespace attn_test
