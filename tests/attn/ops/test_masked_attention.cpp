// Masked and batched attention (chapter 05): masked weights exactly 0, the behaviour a mask
// promises (the future and the padding cannot reach an output), fully masked rows, the two
// causal constructions, non-finite inputs, PyTorch fixtures and every shape error. The masks
// themselves: test_masks.cpp.
#include "attn/core/random.hpp"
#include "attn/layers/embedding.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/layers/transformer.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"
#include "attn/ops/softmax.hpp"
#include "course/npy.hpp"

#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace test_masked_attention {

using attn_test::allowed_from_rows;
using attn_test::identical;
using attn_test::message_of;

using attn::AllowedBatch;
using attn::AllowedMask;
using attn::Batch;
using attn::Index;
using attn::Matrix;

// ---- Masked attention on one matrix -------------------------------------------------------------

struct Qkv {
  Matrix Q, K, V;
};

Qkv random_qkv(std::uint64_t seed, Index n_q, Index n_k, Index d_k, Index d_v) {
  attn::Rng rng(seed);
  return {attn::random_normal(rng, n_q, d_k), attn::random_normal(rng, n_k, d_k),
          attn::random_normal(rng, n_k, d_v)};
}

TEST(MaskedAttention, BlockedWeightsAreExactlyZeroAndRowsSumToOne) {
  const Qkv x = random_qkv(1, 6, 6, 8, 4);
  for (const AllowedMask& mask : {attn::causal_mask(6), attn::window_mask(6, 1)}) {
    const auto r = attn::attention(x.Q, x.K, x.V, {.allowed = mask});
    for (Index i = 0; i < 6; ++i) {
      for (Index j = 0; j < 6; ++j) {
        if (mask(i, j)) {
          EXPECT_GT(r.weights(i, j), 0.0f) << i << "," << j;
        } else {
          EXPECT_EQ(r.weights(i, j), 0.0f) << i << "," << j;  // exactly
        }
      }
      // At most 6 terms, each rounded once by the normalisation: a few ulps of 1.
      EXPECT_NEAR(r.weights.row(i).sum(), 1.0f, 1e-6f) << i;
    }
  }
}

TEST(MaskedAttention, HandComputedTwoKeysOneBlocked) {
  // Key 1 scores higher but is blocked: all weight goes to key 0, out = v_0 exactly.
  Matrix Q(1, 1), K(2, 1), V(2, 2);
  Q << 1;
  K << 1, 5;
  V << 3, 4,  //
      100, 200;
  const AllowedMask mask = allowed_from_rows({{1, 0}});
  const auto r = attn::attention(Q, K, V, {.allowed = mask});
  EXPECT_EQ(r.weights(0, 0), 1.0f);
  EXPECT_EQ(r.weights(0, 1), 0.0f);
  EXPECT_EQ(r.out(0, 0), 3.0f);
  EXPECT_EQ(r.out(0, 1), 4.0f);
}

TEST(MaskedAttention, FutureTokensCannotChangeEarlierOutputs) {
  // Under a causal mask, output i reads q_i and k_j, v_j for j <= i only. Replace every row
  // after position p by other numbers: outputs 0..p stay the same bit for bit (each score is
  // its own dot product, and a blocked key adds 0 * v = 0 exactly).
  const Index n = 7;
  const Qkv x = random_qkv(2, n, n, 8, 5);
  const AllowedMask causal = attn::causal_mask(n);
  const auto before = attn::attention(x.Q, x.K, x.V, {.allowed = causal});
  for (Index p = 0; p + 1 < n; ++p) {
    Qkv y = random_qkv(100 + static_cast<std::uint64_t>(p), n, n, 8, 5);
    y.Q.topRows(p + 1) = x.Q.topRows(p + 1);
    y.K.topRows(p + 1) = x.K.topRows(p + 1);
    y.V.topRows(p + 1) = x.V.topRows(p + 1);
    const auto after = attn::attention(y.Q, y.K, y.V, {.allowed = causal});
    EXPECT_TRUE(identical(after.out.topRows(p + 1), before.out.topRows(p + 1))) << "p = " << p;
    EXPECT_TRUE(identical(after.weights.topRows(p + 1), before.weights.topRows(p + 1)));
    EXPECT_FALSE(identical(after.out.row(p + 1), before.out.row(p + 1)))
        << "the test must be able to fail: position p+1 sees the change";
  }
}

TEST(MaskedAttention, PaddedTokensCannotChangeRealOutputs) {
  // Note 001's second sentence [1,3,1,4,0]: the last token is padding. Changing its
  // embedding (the K and V rows it contributes) leaves the four real outputs unchanged.
  attn::Rng rng(3);
  const Matrix table = attn::embedding_init(rng, 10, 16);  // [vocab x d_model]
  attn::TokenIds ids(1, 5), other(1, 5);
  ids << 1, 3, 1, 4, 0;
  other << 1, 3, 1, 4, 0;
  Matrix table2 = table;
  table2.row(0) = attn::random_normal(rng, 1, 16, 0.0, 10.0);  // a very different pad vector
  const Matrix pe = attn::sinusoidal_encoding(5, 16);
  const Batch E1 = attn::embed(table, ids), E2 = attn::embed(table2, other);  // [1, 5, 16]
  const Matrix X1 = E1[0] + pe;                                               // [5 x 16]
  const Matrix X2 = E2[0] + pe;
  const AllowedBatch masks = attn::padding_masks(ids);  // [1, 5, 5]
  const AllowedMask mask = masks[0];
  const auto r1 = attn::attention(X1, X1, X1, {.allowed = mask});
  const auto r2 = attn::attention(X2, X2, X2, {.allowed = mask});
  EXPECT_TRUE(identical(r1.out.topRows(4), r2.out.topRows(4)));
  EXPECT_TRUE(identical(r1.weights.topRows(4), r2.weights.topRows(4)));
  // Without the mask the pad token leaks into every output: the test could fail.
  const auto u1 = attn::attention(X1, X1, X1), u2 = attn::attention(X2, X2, X2);
  EXPECT_FALSE(identical(u1.out.topRows(4), u2.out.topRows(4)));
}

TEST(MaskedAttention, FullyMaskedRowGivesZerosNeverNaN) {
  const Qkv x = random_qkv(4, 3, 4, 4, 2);
  AllowedMask mask = attn::full_mask(3, 4);
  mask.row(1).setConstant(false);  // query 1 may attend to nothing
  const auto r = attn::attention(x.Q, x.K, x.V, {.allowed = mask});
  EXPECT_TRUE(r.weights.row(1).isZero(0.0f));
  EXPECT_TRUE(r.out.row(1).isZero(0.0f));
  EXPECT_TRUE(r.out.allFinite());
  const auto plain = attn::attention(x.Q, x.K, x.V);  // the other rows are untouched
  EXPECT_TRUE(identical(r.out.row(0), plain.out.row(0)));
  EXPECT_TRUE(identical(r.out.row(2), plain.out.row(2)));
}

TEST(MaskedAttention, MinusOneBillionEqualsMinusInfinityExceptOnEmptyRows) {
  // exp(-1e9 - max) underflows to exactly 0 in float whenever the row has an allowed score
  // above -1e9 + 104, so ordinary rows agree bit for bit. A row with every key at -1e9 is a
  // row of equal scores: uniform weights, and the output is the mean of V.
  const Qkv x = random_qkv(5, 4, 4, 8, 3);
  AllowedMask mask = attn::causal_mask(4);
  mask.row(2).setConstant(false);
  const auto inf = attn::attention(x.Q, x.K, x.V, {.allowed = mask});
  const auto big = attn::attention(x.Q, x.K, x.V, {.allowed = mask, .blocked_score = -1e9f});
  for (Index i : {0, 1, 3}) {
    EXPECT_TRUE(identical(inf.weights.row(i), big.weights.row(i))) << i;
    EXPECT_TRUE(identical(inf.out.row(i), big.out.row(i))) << i;
  }
  for (Index j = 0; j < 4; ++j) EXPECT_EQ(big.weights(2, j), 0.25f);
  // Four weights of exactly 1/4 times values O(1): the GEMM's rounding, ~1e-7.
  const Matrix mean = x.V.colwise().mean();
  EXPECT_LT((big.out.row(2) - mean).cwiseAbs().maxCoeff(), 1e-6f);
  EXPECT_TRUE(inf.out.row(2).isZero(0.0f));
}

TEST(MaskedAttention, BothCausalConstructionsAgree) {
  // Note 004: a lower-triangular 0/1 matrix, its zeros sent to -inf before the softmax.
  // Note 003: an additive mask (0 or -inf) added to the scores. Same scores, bit for bit.
  const Index n = 6;
  const Qkv x = random_qkv(6, n, n, 4, 4);
  const float scale = 0.5f;                               // 1/sqrt(4), exact
  const Matrix scores = (x.Q * x.K.transpose()) * scale;  // [n x n]
  Matrix by_tril = scores, by_sum = scores + attn::additive_mask(attn::causal_mask(n));
  const Matrix tril = Matrix::Ones(n, n).triangularView<Eigen::Lower>();  // [n x n] of 0/1
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < n; ++j) {
      if (tril(i, j) == 0.0f) by_tril(i, j) = -std::numeric_limits<float>::infinity();
    }
  }
  EXPECT_TRUE(identical(by_tril, by_sum));
  const AllowedMask causal = attn::causal_mask(n);
  const auto lib = attn::attention(x.Q, x.K, x.V, {.allowed = causal});
  EXPECT_TRUE(identical(attn::softmax_rows(by_tril), lib.weights));
}

// ---- Non-finite inputs: every case attention.hpp documents --------------------------------------

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

bool row_is_nan(const Matrix& m, Index i) { return m.row(i).array().isNaN().all(); }
bool row_is_zero(const Matrix& m, Index i) { return (m.row(i).array() == 0.0f).all(); }

// A NaN or an infinity in query i makes every score of row i +-inf or NaN: the row is NaN,
// whatever the keys. Issue 11 (item 14): when every key was positive in that column, -inf gave
// -inf for every key, and the row came out as zeros, as if the mask had emptied it.
TEST(NonFiniteInputs, AQueryWithAnInfinityOrNaNGetsANaNRow) {
  const Qkv x = random_qkv(9, 4, 4, 4, 3);
  for (bool positive_keys : {false, true}) {
    Qkv y = x;
    if (positive_keys) y.K.col(0) = y.K.col(0).cwiseAbs().array() + 1.0f;  // every k_j0 >= 1
    const auto clean = attn::attention(x.Q, y.K, y.V);
    for (float bad : {-kInf, kInf, kNaN}) {
      Qkv z = y;
      z.Q(1, 0) = bad;
      const auto r = attn::attention(z.Q, z.K, z.V);
      EXPECT_TRUE(row_is_nan(r.weights, 1)) << bad << " " << positive_keys;
      EXPECT_TRUE(row_is_nan(r.out, 1)) << bad << " " << positive_keys;
      for (Index i : {0, 2, 3}) {  // each score and output row reads its own query only
        EXPECT_TRUE(identical(r.weights.row(i), clean.weights.row(i))) << i;
        EXPECT_TRUE(identical(r.out.row(i), clean.out.row(i))) << i;
      }
    }
  }
}

// An infinite entry in key j scores +inf for a query positive in that column (its row is NaN:
// inf - inf in the softmax) and -inf for a negative one (key j gets weight exactly 0, as if
// blocked); a NaN entry makes the row of every query that may see key j NaN; a query for which
// key j is blocked does not see it at all.
TEST(NonFiniteInputs, AnInfiniteOrNaNKeyIsNaNOrWeightZeroOrUnseen) {
  const Qkv x = random_qkv(9, 4, 4, 4, 3);
  AllowedMask mask = attn::full_mask(4, 4);
  mask(2, 1) = false;  // query 2 may not see key 1
  Qkv y = x;
  y.K(1, 0) = kInf;
  const auto r = attn::attention(y.Q, y.K, y.V, {.allowed = mask});
  const auto clean = attn::attention(x.Q, x.K, x.V, {.allowed = mask});
  int nan_rows = 0, zero_weight_rows = 0;
  for (Index i : {0, 1, 3}) {
    ASSERT_NE(y.Q(i, 0), 0.0f);  // 0 * inf would be NaN: not the case under test
    if (y.Q(i, 0) > 0.0f) {
      EXPECT_TRUE(row_is_nan(r.weights, i)) << i;
      EXPECT_TRUE(row_is_nan(r.out, i)) << i;
      ++nan_rows;
    } else {
      EXPECT_EQ(r.weights(i, 1), 0.0f) << i;
      EXPECT_TRUE(r.out.row(i).allFinite()) << i;
      ++zero_weight_rows;
    }
  }
  EXPECT_GT(nan_rows, 0);  // both cases occur with this seed
  EXPECT_GT(zero_weight_rows, 0);
  EXPECT_TRUE(identical(r.weights.row(2), clean.weights.row(2)));  // blocked: unseen
  EXPECT_TRUE(identical(r.out.row(2), clean.out.row(2)));

  y.K(1, 0) = kNaN;
  const auto n = attn::attention(y.Q, y.K, y.V, {.allowed = mask});
  for (Index i : {0, 1, 3}) {
    EXPECT_TRUE(row_is_nan(n.weights, i)) << i;
    EXPECT_TRUE(row_is_nan(n.out, i)) << i;
  }
  EXPECT_TRUE(identical(n.weights.row(2), clean.weights.row(2)));
  EXPECT_TRUE(identical(n.out.row(2), clean.out.row(2)));
}

// Issue 11 (item 14): a query whose allowed scores are all -inf has weights 0 / 0. They came out
// as zeros, indistinguishable from a query the mask left nothing; they are NaN now. A query the
// mask leaves nothing is still zeros, and one -inf among finite scores is still weight 0.
TEST(NonFiniteInputs, MinusInfinityForEveryAllowedKeyIsNaNNotAnEmptyRow) {
  Matrix Q(1, 1), K(2, 1), V(2, 2);
  Q << 1;
  K << -kInf, -kInf;  // both scores -inf, no mask
  V << 1, 2,          //
      3, 4;
  const auto unmasked = attn::attention(Q, K, V, {.scale = 1.0f});
  EXPECT_TRUE(row_is_nan(unmasked.weights, 0));
  EXPECT_TRUE(row_is_nan(unmasked.out, 0));

  K << -kInf, 5;  // key 1 scores 5 but is blocked: the only allowed key scores -inf
  const AllowedMask first_only = allowed_from_rows({{1, 0}});
  const auto masked = attn::attention(Q, K, V, {.scale = 1.0f, .allowed = first_only});
  EXPECT_TRUE(row_is_nan(masked.weights, 0));
  EXPECT_TRUE(row_is_nan(masked.out, 0));

  const AllowedMask none = allowed_from_rows({{0, 0}});  // the mask leaves nothing: zeros, not NaN
  const auto empty = attn::attention(Q, K, V, {.scale = 1.0f, .allowed = none});
  EXPECT_TRUE(row_is_zero(empty.weights, 0));
  EXPECT_TRUE(row_is_zero(empty.out, 0));

  const auto one_left = attn::attention(Q, K, V, {.scale = 1.0f});  // -inf and 5: (0, 1) exactly
  EXPECT_EQ(one_left.weights(0, 0), 0.0f);
  EXPECT_EQ(one_left.weights(0, 1), 1.0f);
  EXPECT_EQ(one_left.out(0, 0), 3.0f);  // 0 * 1 + 1 * 3
  EXPECT_EQ(one_left.out(0, 1), 4.0f);
}

// A NaN in value j reaches every query with an allowed key, also one whose weight on j is 0
// (0 * NaN = NaN in weights V): garbage in a padded token is loud. Issue 11 (item 14): it also
// reached a query with no allowed key at all, whose output is now written as zeros.
TEST(NonFiniteInputs, NaNInAValueReachesEveryRowThatAttendsButNotAnEmptyRow) {
  const Qkv x = random_qkv(9, 4, 4, 4, 3);
  AllowedMask mask = attn::full_mask(4, 4);
  mask(2, 3) = false;              // query 2 may not see key 3
  mask.row(1).setConstant(false);  // query 1 may see nothing
  Qkv y = x;
  y.V(3, 0) = kNaN;
  const auto r = attn::attention(y.Q, y.K, y.V, {.allowed = mask});
  const auto clean = attn::attention(x.Q, x.K, x.V, {.allowed = mask});
  EXPECT_TRUE(identical(r.weights, clean.weights));  // V does not enter the weights
  EXPECT_EQ(r.weights(2, 3), 0.0f);
  for (Index i : {0, 2, 3}) {
    EXPECT_TRUE(std::isnan(r.out(i, 0))) << i;
    EXPECT_TRUE(identical(r.out.row(i).tail(2), clean.out.row(i).tail(2))) << i;  // other columns
  }
  EXPECT_TRUE(row_is_zero(r.weights, 1));
  EXPECT_TRUE(row_is_zero(r.out, 1));
}

// An infinite value j gives +inf in that column where j's weight is positive and NaN where it is
// 0 (0 * inf). Issue 11 (item 14): "never NaN" for a query with no allowed key did not hold then
// (0 * inf); its output is written as zeros now.
TEST(NonFiniteInputs, InfinityInAValueIsInfOrNaNAndAnEmptyRowStaysZero) {
  const Qkv x = random_qkv(9, 4, 4, 4, 3);
  AllowedMask mask = attn::full_mask(4, 4);
  mask(2, 3) = false;
  mask.row(1).setConstant(false);
  Qkv y = x;
  y.V(3, 0) = kInf;
  const auto r = attn::attention(y.Q, y.K, y.V, {.allowed = mask});
  for (Index i : {0, 3}) {
    ASSERT_GT(r.weights(i, 3), 0.0f) << i;
    EXPECT_EQ(r.out(i, 0), kInf) << i;
  }
  EXPECT_TRUE(std::isnan(r.out(2, 0)));  // weight exactly 0 on key 3: 0 * inf
  EXPECT_TRUE(row_is_zero(r.weights, 1));
  EXPECT_TRUE(row_is_zero(r.out, 1));

  // Every entry point writes the empty row alike: attention_into, and a batch, whose element 1
  // holds the infinity and leaves its query 1 nothing.
  attn::AttentionResult into;
  attn::attention_into(y.Q, y.K, y.V, into, {.allowed = mask});
  EXPECT_TRUE(row_is_zero(into.out, 1));
  Batch Q(2, 4, 4), K(2, 4, 4), V(2, 4, 3);
  Q[0] = x.Q;
  Q[1] = y.Q;
  K[0] = x.K;
  K[1] = y.K;
  V[0] = x.V;
  V[1] = y.V;
  AllowedBatch masks(2, 4, 4);
  masks[0] = attn::full_mask(4, 4);
  masks[1] = mask;
  const auto batch = attn::attention(Q, K, V, {.allowed = masks});
  EXPECT_TRUE(row_is_zero(Matrix(batch.out[1]), 1));
  EXPECT_TRUE(identical(Matrix(batch.out[1]), r.out));
}

// Finite scores of any size are safe: a score of ~1e17 gives one-hot weights, no inf, no NaN.
// float's plain attention runs a block of query rows at a time once its weights outgrow
// 256 x 256 (216 rows at 300 keys), and a causal block multiplies only the keys its rows may
// see. With blocked_score -1e30 (finite, so every block multiplies every key) the weights are
// the same floats (exp(-1e30 - max) is 0), and so are the outputs (the skipped terms are 0 v = 0);
// a value row past a block's keys that is not finite still reaches it as 0 * inf = NaN
// (attention.hpp); a query with no key in a block whose other rows have some leaves the block
// on the whole-row path, its row zeros.
TEST(MaskedAttention, ACausalBlockMultipliesOnlyTheKeysItSees) {
  constexpr Index n = 300;
  Qkv x = random_qkv(23, n, n, 16, 8);
  const AllowedMask causal = attn::causal_mask(n);
  const auto skipped = attn::attention(x.Q, x.K, x.V, {.allowed = causal});
  const auto whole = attn::attention(x.Q, x.K, x.V, {.allowed = causal, .blocked_score = -1e30f});
  EXPECT_TRUE(skipped.weights == whole.weights);
  EXPECT_TRUE(skipped.out == whole.out);
  EXPECT_EQ(skipped.weights(0, n - 1), 0.0f);
  EXPECT_GT(skipped.out.cwiseAbs().maxCoeff(), 0.0f);
  // Into a buffer that held other numbers: the skipped weights are written, not left.
  attn::AttentionResult reused{Matrix::Constant(n, 8, 7.0f), Matrix::Constant(n, n, 7.0f)};
  attn::attention_into(x.Q, x.K, x.V, reused, {.allowed = causal});
  EXPECT_TRUE(reused.weights == whole.weights);
  EXPECT_TRUE(reused.out == whole.out);
  x.V(n - 1, 2) = std::numeric_limits<float>::infinity();  // a key only the last query sees
  const auto inf = attn::attention(x.Q, x.K, x.V, {.allowed = causal});
  for (Index i : {Index{0}, Index{100}, Index{215}, Index{216}, n - 2}) {
    EXPECT_TRUE(std::isnan(inf.out(i, 2))) << i;  // weight 0 times inf
    EXPECT_TRUE(identical(inf.out.row(i).head(2), skipped.out.row(i).head(2))) << i;
  }
  EXPECT_EQ(inf.out(n - 1, 2), std::numeric_limits<float>::infinity());
  AllowedMask holed = causal;
  holed.row(5).setConstant(false);  // query 5 may see nothing
  const auto empty = attn::attention(x.Q, x.K, x.V, {.allowed = holed});
  EXPECT_TRUE(row_is_zero(empty.weights, 5));
  EXPECT_TRUE(row_is_zero(empty.out, 5));
  EXPECT_TRUE(identical(empty.weights.row(6), inf.weights.row(6)));
}

// attention_scores(): the scores the forward's softmax read, for a figure's twin. Their softmax
// is the forward's weights bit for bit, on the small path and on the blocked one (past
// 256 x 256, where a causal block skips keys); a blocked score is blocked_score, whatever the
// scale; an allowed one is the scaled dot product.
TEST(MaskedAttention, ScoresAreWhatTheSoftmaxRead) {
  for (const Index n : {Index{6}, Index{300}}) {
    const Qkv x = random_qkv(31, n, n, 16, 4);
    AllowedMask holed = attn::causal_mask(n);
    holed.row(2).setConstant(false);  // query 3 may see nothing
    for (const float fill : {-kInf, -1e9f}) {
      for (const std::optional<float> scale : {std::optional<float>(), std::optional(0.3f)}) {
        const attn::AttentionOptions opts{.scale = scale, .allowed = holed, .blocked_score = fill};
        const Matrix S = attn::attention_scores(x.Q, x.K, opts);        // [n x n]
        const Matrix W = attn::attention(x.Q, x.K, x.V, opts).weights;  // [n x n]
        const Matrix P = attn::softmax_rows(S);                         // [n x n]
        const float factor = scale.value_or(0.25f);                     // 1/sqrt(16)
        // Row 3 too: all -inf is zeros in both, all -1e9 the even spread in both.
        EXPECT_TRUE(identical(P, W)) << "n " << n << ", fill " << fill;
        for (Index i = 0; i < n; ++i) {
          for (Index j = 0; j < n; ++j) {
            if (!holed(i, j)) {
              ASSERT_EQ(S(i, j), fill) << i << "," << j;
            } else {
              ASSERT_NEAR(S(i, j), x.Q.row(i).dot(x.K.row(j)) * factor, 1e-5f) << i << "," << j;
            }
          }
        }
      }
    }
  }
  const attn::MatrixD Qd = random_qkv(32, 3, 4, 2, 2).Q.cast<double>();  // [3 x 2]
  const attn::MatrixD Kd = random_qkv(33, 4, 4, 2, 2).K.cast<double>();  // [4 x 2]
  const attn::MatrixD Sd = attn::attention_scores(Qd, Kd);               // [3 x 4]
  EXPECT_LT((Sd - Qd * Kd.transpose() / std::sqrt(2.0)).cwiseAbs().maxCoeff(), 1e-12);
  const AllowedMask causal4 = attn::causal_mask(4);
  EXPECT_EQ(message_of([&] { attn::attention_scores(Qd, Kd, {.allowed = causal4}); }),
            "attention: the mask is [4 x 4] but Q is [3 x 2] and K is [4 x 2]: it must be "
            "[n_q x n_k] = [3 x 4]");
}

TEST(NonFiniteInputs, HugeFiniteScoresAreFine) {
  const Qkv x = random_qkv(9, 4, 4, 4, 3);
  Qkv z = x;
  z.Q.row(0) *= 1e17f;
  const auto big = attn::attention(z.Q, z.K, z.V);
  EXPECT_TRUE(big.weights.allFinite());
  EXPECT_FLOAT_EQ(big.weights.row(0).maxCoeff(), 1.0f);
}

// ---- Batches ------------------------------------------------------------------------------------

Batch fixture(const std::string& name, const std::string& what) {
  return course::read_npy(
             attn_test::fixture("masked_attention", "masked_" + name + "_" + what + ".npy"))
      .to_batch();
}

AllowedBatch allowed_fixture(const std::string& name) {
  const Batch ones = fixture(name, "allowed");  // 1 = may attend
  AllowedBatch m(ones.batch(), ones.rows(), ones.cols());
  m.data() = ones.data().array() != 0.0f;
  return m;
}

class MaskedFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(MaskedFixture, MatchesPyTorch) {
  const std::string c = GetParam();
  const Batch Q = fixture(c, "Q"), K = fixture(c, "K"), V = fixture(c, "V");
  const Batch out = fixture(c, "out"), weights = fixture(c, "weights");
  const AllowedBatch allowed = allowed_fixture(c);
  const auto r = attn::attention(Q, K, V, {.allowed = allowed});
  ASSERT_EQ(r.out.shape(), out.shape());
  ASSERT_EQ(r.weights.shape(), weights.shape());
  // float32 on both sides with d_k <= 8 and O(1) entries: scores agree to a few ulps (~1e-6),
  // weights and outputs (<= 7 terms of |v| < 4) to ~1e-6; 1e-5 leaves room for both roundings.
  EXPECT_LT((r.out.data() - out.data()).cwiseAbs().maxCoeff(), 1e-5f) << c;
  EXPECT_LT((r.weights.data() - weights.data()).cwiseAbs().maxCoeff(), 1e-5f) << c;
  // Blocked entries are exactly 0 on both sides (PyTorch's reference too: the script asserts it).
  for (Index b = 0; b < r.weights.batch(); ++b) {
    const auto m = allowed[allowed.batch() == 1 ? 0 : b];
    for (Index i = 0; i < m.rows(); ++i) {
      for (Index j = 0; j < m.cols(); ++j) {
        if (!m(i, j)) {
          EXPECT_EQ(r.weights[b](i, j), 0.0f) << b << "," << i << "," << j;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, MaskedFixture,
                         ::testing::Values("padding", "causal", "cross_empty_row"));

TEST(BatchAttention, EachElementIsItsOwnAttention) {
  attn::Rng rng(7);
  Batch Q(3, 4, 8), K(3, 5, 8), V(3, 5, 2);
  Q.data() = attn::random_normal(rng, 12, 8);
  K.data() = attn::random_normal(rng, 15, 8);
  V.data() = attn::random_normal(rng, 15, 2);
  const auto r = attn::attention(Q, K, V);
  for (Index b = 0; b < 3; ++b) {
    const auto one = attn::attention(Q[b], K[b], V[b]);
    EXPECT_TRUE(identical(r.out[b], one.out)) << b;
    EXPECT_TRUE(identical(r.weights[b], one.weights)) << b;
  }
}

TEST(MaskedAttention, LargestBlockedIsTheWorstLeakOrExactlyZero) {
  const AllowedMask allowed = allowed_from_rows({{1, 0, 0},  //
                                                 {1, 1, 0}});
  Matrix kept(2, 3);         // [2 x 3]: the blocked entries hold 0, as a kept promise does
  kept << 1.0f, 0.0f, 0.0f,  //
      0.4f, 0.6f, 0.0f;
  EXPECT_EQ(attn::largest_blocked(kept, allowed), 0.0f);
  Matrix leaked = kept;  // [2 x 3]: two blocked entries leak; allowed weights are larger
  leaked(0, 2) = 0.25f;
  leaked(1, 2) = 0.125f;
  EXPECT_EQ(attn::largest_blocked(leaked, allowed), 0.25f);
  EXPECT_EQ(attn::largest_blocked(kept, attn::full_mask(2, 3)), 0.0f);  // nothing blocked
  EXPECT_EQ(attn::largest_blocked(Matrix(0, 0), AllowedMask(0, 0)), 0.0f);
  AllowedBatch stack(2, 2, 3);  // [2, 2, 3]: an element of a batch is read in place
  stack[0] = attn::full_mask(2, 3);
  stack[1] = allowed;
  EXPECT_EQ(attn::largest_blocked(leaked, stack[1]), 0.25f);
  EXPECT_EQ(attn::largest_blocked(leaked, stack[0]), 0.0f);
  EXPECT_EQ(message_of([&] { attn::largest_blocked(kept, attn::causal_mask(3)); }),
            "largest_blocked: weights are [2 x 3] but allowed is [3 x 3]: the mask needs an "
            "entry per weight");
}

// ---- Errors name the shapes ---------------------------------------------------------------------

TEST(MaskedAttention, ShapeErrorsNameTheShapes) {
  const Qkv x = random_qkv(8, 3, 4, 2, 2);
  const AllowedMask causal4 = attn::causal_mask(4);
  EXPECT_EQ(message_of([&] { attn::attention(x.Q, x.K, x.V, {.allowed = causal4}); }),
            "attention: the mask is [4 x 4] but Q is [3 x 2] and K is [4 x 2]: it must be "
            "[n_q x n_k] = [3 x 4]");
  EXPECT_NE(message_of([&] {
              attn::attention(x.Q, x.K, x.V, {.blocked_score = 1.0f});
            }).find("blocked_score"),
            std::string::npos);
  EXPECT_NE(message_of([&] { attn::attention(x.Q, x.K, x.V, {.scale = NAN}); }).find("scale"),
            std::string::npos);
  const Batch Q(2, 3, 2), K(3, 4, 2), V(3, 4, 2);
  EXPECT_EQ(message_of([&] { attn::attention(Q, K, V); }),
            "attention: Q is [2, 3, 2], K is [3, 4, 2], V is [3, 4, 2]: the batch sizes (first "
            "dimension) must agree");
  const Batch Q3(3, 3, 2);
  const AllowedBatch wrong(2, 3, 4);
  EXPECT_EQ(message_of([&] { attn::attention(Q3, K, V, {.allowed = wrong}); }),
            "attention: the mask is [2, 3, 4] but Q is [3, 3, 2]: the mask's batch must be 3 or 1 "
            "(shared)");
  attn::TokenIds ids(1, 2);
  ids << 0, 10;
  EXPECT_EQ(message_of([&] { attn::embed(Matrix::Zero(10, 4), ids); }),
            "embed: ids[0][1] = 10 is outside the vocabulary [0, 10)");
}

}  // namespace test_masked_attention
