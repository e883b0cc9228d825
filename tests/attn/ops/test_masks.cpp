// masks.hpp (chapter 05): the masks by hand (causal, window, padding, PyTorch's opposite
// convention, the additive form), and mask views that cannot dangle, checked by the compiler.
#include "attn/core/batch.hpp"
#include "attn/core/random.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/transformer.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace test_masks {

using attn_test::allowed_from_rows;
using attn_test::identical;
using attn_test::message_of;

using attn::AllowedBatch;
using attn::AllowedMask;
using attn::Batch;
using attn::Index;
using attn::Matrix;

// ---- The masks, by hand -------------------------------------------------------------------------

TEST(Masks, CausalIsTheLowerTriangle) {
  EXPECT_EQ(attn::causal_mask(4),
            allowed_from_rows({{1, 0, 0, 0}, {1, 1, 0, 0}, {1, 1, 1, 0}, {1, 1, 1, 1}}));
  EXPECT_EQ(attn::causal_mask(0).size(), 0);
}

TEST(Masks, WindowKeepsTheBand) {
  EXPECT_EQ(
      attn::window_mask(5, 1),
      allowed_from_rows(
          {{1, 1, 0, 0, 0}, {1, 1, 1, 0, 0}, {0, 1, 1, 1, 0}, {0, 0, 1, 1, 1}, {0, 0, 0, 1, 1}}));
  EXPECT_EQ(attn::window_mask(3, 0), allowed_from_rows({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}));
  EXPECT_EQ(attn::window_mask(3, 7), attn::full_mask(3, 3));
  EXPECT_THROW(attn::window_mask(3, -1), std::invalid_argument);
}

TEST(Masks, PaddingBlocksThePaddedKeysOfNote001) {
  // Note 001's batch: [[5,2,1,0,0],[1,3,1,4,0]], id 0 is padding.
  attn::TokenIds ids(2, 5);
  ids << 5, 2, 1, 0, 0,  //
      1, 3, 1, 4, 0;
  const AllowedBatch m = attn::padding_masks(ids);
  ASSERT_EQ(m.shape(), (std::vector<std::size_t>{2, 5, 5}));
  for (Index i = 0; i < 5; ++i) {  // every query row alike: it is the keys that are padded
    EXPECT_EQ(AllowedMask(m[0].row(i)), allowed_from_rows({{1, 1, 1, 0, 0}})) << i;
    EXPECT_EQ(AllowedMask(m[1].row(i)), allowed_from_rows({{1, 1, 1, 1, 0}})) << i;
  }
}

TEST(Masks, PyTorchsBlockedConventionIsNegated) {
  const bool blocked[] = {false, false, true};  // key_padding_mask: True = blocked
  EXPECT_EQ(attn::padding_mask_from_blocked(blocked, 2), allowed_from_rows({{1, 1, 0}, {1, 1, 0}}));
}

TEST(Masks, AdditiveFormIsZeroOrFill) {
  const Matrix add = attn::additive_mask(attn::causal_mask(2));
  EXPECT_EQ(add(0, 0), 0.0f);
  EXPECT_EQ(add(1, 0), 0.0f);
  EXPECT_EQ(add(1, 1), 0.0f);
  EXPECT_EQ(add(0, 1), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(attn::additive_mask(attn::causal_mask(2), -1e9f)(0, 1), -1e9f);
}

// Issue 11: additive_mask took any fill, so a fill of +1 raised the blocked scores instead of
// blocking them, and NaN made every masked row NaN, while attention() refuses both as its
// blocked_score. Both now apply one rule, attn::is_blocking_score: a negative number, -inf
// included.
TEST(Masks, AdditiveFillFollowsAttentionsBlockedScoreRule) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const AllowedMask causal = attn::causal_mask(2);
  const Matrix ones = Matrix::Ones(2, 2);
  const auto refused_by_attention = [&](float fill) {
    return message_of([&] {
             attn::attention(ones, ones, ones, {.allowed = causal, .blocked_score = fill});
           }) != "(no exception)";
  };
  // By hand: zero and above would not block, NaN would poison the row.
  for (float fill : {1.0f, 0.0f, -0.0f, nan, inf}) {
    EXPECT_TRUE(refused_by_attention(fill)) << fill;
    EXPECT_EQ(message_of([&] { attn::additive_mask(causal, fill); }),
              "additive_mask: the fill must be negative (-inf or a large negative number), as "
              "attention's blocked_score")
        << fill;
  }
  for (float fill : {-1.0f, -1e9f, -inf}) {
    EXPECT_FALSE(refused_by_attention(fill)) << fill;
    EXPECT_EQ(attn::additive_mask(causal, fill)(0, 1), fill);
  }
}

// ---- Masks cannot dangle ------------------------------------------------------------------------
//
// This compiled and read freed memory:
//
//   const AttentionOptions o{.allowed = causal_mask(4)};   // a view of a temporary mask ...
//   attention(Q, K, V, o);                                  // ... destroyed before it is read
//
// The sanitize preset reported it (heap-use-after-free) only when a test happened to run such a
// line, and a release build silently ignored the mask (row 0 attended to the future). The
// static_asserts below are what would have caught it: they fail to compile the moment a view
// can again be made of a temporary, in every build, whether or not anything runs it.

using attn::BatchMaskView;
using attn::MaskView;

// Whether an options struct can be built with a mask of type M in its mask field (M&& = a
// temporary, as causal_mask(4) is).
template <typename Options, typename M>
concept AllowedFrom = requires(M&& m) {
  Options{.allowed = std::forward<M>(m)};
};
template <typename Options, typename M>
concept SelfAndCrossFrom = requires(M&& m) {
  Options{.self_allowed = std::forward<M>(m)};
  Options{.cross_allowed = std::forward<M>(m)};
};
// Whether element 0 of a batch of type B can be taken (B&& = a temporary batch).
template <typename B>
concept Indexable = requires(B&& b) {
  std::forward<B>(b)[0];
};

// One sequence: a named mask is viewed, a temporary is refused.
static_assert(std::is_convertible_v<AllowedMask&, MaskView>);
static_assert(std::is_convertible_v<const AllowedMask&, MaskView>);
static_assert(!std::is_constructible_v<MaskView, AllowedMask&&>);
static_assert(!std::is_constructible_v<MaskView, const AllowedMask&&>);
// std::optional<MaskView> m = causal_mask(4);
static_assert(!std::is_convertible_v<AllowedMask, std::optional<MaskView>>);
static_assert(!std::is_constructible_v<std::optional<MaskView>, AllowedMask>);
// An Eigen expression would become a temporary AllowedMask on the way: refused too.
using MaskAnd = decltype(std::declval<const AllowedMask&>().array() &&
                         std::declval<const AllowedMask&>().array());
static_assert(!std::is_constructible_v<MaskView, MaskAnd>);
using BlockOfTemporary = decltype(std::declval<AllowedMask>().topRows(2));
static_assert(!std::is_constructible_v<MaskView, BlockOfTemporary>);
static_assert(AllowedFrom<attn::AttentionOptions, const AllowedMask&>);
static_assert(!AllowedFrom<attn::AttentionOptions, AllowedMask>);  // the bug
static_assert(AllowedFrom<attn::MultiHeadOptions, AllowedMask&>);
static_assert(!AllowedFrom<attn::MultiHeadOptions, AllowedMask>);
static_assert(AllowedFrom<attn::EncoderLayerOptions, const AllowedMask&>);
static_assert(!AllowedFrom<attn::EncoderLayerOptions, AllowedMask>);
static_assert(SelfAndCrossFrom<attn::DecoderLayerOptions, const AllowedMask&>);
static_assert(!SelfAndCrossFrom<attn::DecoderLayerOptions, AllowedMask>);
// Element b of a batch: of a named batch only.
static_assert(std::is_constructible_v<MaskView, const AllowedBatch&, Index>);
static_assert(!std::is_constructible_v<MaskView, AllowedBatch&&, Index>);
static_assert(Indexable<AllowedBatch&> && Indexable<const AllowedBatch&>);
static_assert(!Indexable<AllowedBatch>);  // padding_masks(ids)[0]
static_assert(!Indexable<const AllowedBatch>);
static_assert(!Indexable<Batch>);  // embed(table, ids)[0]: the same dangling block
// Batches and stacks: the same rules for the stack view.
static_assert(std::is_convertible_v<const AllowedBatch&, BatchMaskView>);
static_assert(std::is_convertible_v<const AllowedMask&, BatchMaskView>);  // shared, [1, n, n]
static_assert(!std::is_constructible_v<BatchMaskView, AllowedBatch&&>);
static_assert(!std::is_constructible_v<BatchMaskView, AllowedMask&&>);
static_assert(!std::is_convertible_v<AllowedBatch, std::optional<BatchMaskView>>);
static_assert(AllowedFrom<attn::BatchAttentionOptions, const AllowedBatch&>);
static_assert(!AllowedFrom<attn::BatchAttentionOptions, AllowedBatch>);
static_assert(!AllowedFrom<attn::BatchAttentionOptions, AllowedMask>);
static_assert(AllowedFrom<attn::MultiHeadBatchOptions, const AllowedBatch&>);
static_assert(!AllowedFrom<attn::MultiHeadBatchOptions, AllowedBatch>);
static_assert(AllowedFrom<attn::EncoderOptions, const AllowedBatch&>);
static_assert(!AllowedFrom<attn::EncoderOptions, AllowedBatch>);
static_assert(SelfAndCrossFrom<attn::DecoderOptions, const AllowedBatch&>);
static_assert(!SelfAndCrossFrom<attn::DecoderOptions, AllowedBatch>);

TEST(MaskView, NamedMasksAreViewedInPlace) {
  // The bug's own pattern, with the mask given a name: it compiles and the mask is applied.
  const AllowedMask causal = attn::causal_mask(4);
  const attn::AttentionOptions o{.allowed = causal};
  attn::Rng rng(10);
  const Matrix Q = attn::random_normal(rng, 4, 4), K = attn::random_normal(rng, 4, 4),
               V = attn::random_normal(rng, 4, 2);
  const auto r = attn::attention(Q, K, V, o);
  EXPECT_EQ(r.weights(0, 0), 1.0f);  // query 0 sees key 0 only: the whole weight, exactly
  for (Index j = 1; j < 4; ++j) EXPECT_EQ(r.weights(0, j), 0.0f) << j;
  // The view reads the mask itself, not a copy of it.
  EXPECT_EQ(o.allowed->matrix().data(), causal.data());
  EXPECT_EQ(o.allowed->rows(), 4);
  EXPECT_EQ(o.allowed->cols(), 4);
  EXPECT_EQ(AllowedMask(o.allowed->matrix()), causal);
  // A named optional view, the second pattern of the bug, the same way.
  const std::optional<MaskView> m = causal;
  EXPECT_TRUE(identical(attn::attention(Q, K, V, {.allowed = m}).weights, r.weights));
}

TEST(MaskView, ElementsOfANamedBatch) {
  attn::TokenIds ids(2, 4);
  ids << 5, 2, 0, 0,  //
      1, 3, 1, 0;
  const AllowedBatch masks = attn::padding_masks(ids);  // [2, 4, 4]
  const MaskView second(masks, 1);
  ASSERT_EQ(second.rows(), 4);
  ASSERT_EQ(second.cols(), 4);
  for (Index i = 0; i < 4; ++i) {
    for (Index j = 0; j < 4; ++j) EXPECT_EQ(second(i, j), masks[1](i, j)) << i << j;
    EXPECT_EQ(second.row(i).size(), 4u);
    EXPECT_EQ(second.row(i)[3], false);
  }
  EXPECT_THROW(MaskView(masks, 2), std::invalid_argument);
  // A stack view hands out element b, or the one shared mask for every b.
  const BatchMaskView per(masks);
  EXPECT_FALSE(per.shared());
  EXPECT_EQ(per.shape_str(), "[2, 4, 4]");
  EXPECT_EQ(per.element(1).matrix().data(), second.matrix().data());
  EXPECT_THROW(per.element(2), std::invalid_argument);
  const AllowedMask causal = attn::causal_mask(4);
  const BatchMaskView shared(causal);
  EXPECT_TRUE(shared.shared());
  EXPECT_EQ(shared.shape_str(), "[1, 4, 4]");
  EXPECT_EQ(shared.element(7).matrix().data(), causal.data());
  // A shared mask gives each batch element what the mask gives it alone.
  attn::Rng rng(11);
  Batch X(2, 4, 8);  // [2, 4, 8]
  X.data() = attn::random_normal(rng, 8, 8);
  const auto r = attn::attention(X, X, X, {.allowed = causal});
  for (Index b = 0; b < 2; ++b) {
    const auto one = attn::attention(X[b], X[b], X[b], {.allowed = causal});
    EXPECT_TRUE(identical(r.weights[b], one.weights)) << b;
    EXPECT_TRUE(identical(r.out[b], one.out)) << b;
  }
}

// ---- Sizes the machine cannot hold (issue 26) ---------------------------------------------------

TEST(Masks, SizesTheMachineCannotHoldAreNamedBeforeAllocating) {
  // Each threw std::bad_alloc (or, for n^2 past Index, asked Eigen for a wrapped size).
  const Index big = Index{1} << 31;
  const auto starts = [](const std::string& m, const std::string& prefix) {
    return m.rfind(prefix, 0) == 0;
  };
  std::string m = message_of([&] { attn::causal_mask(big); });
  EXPECT_TRUE(starts(m, "causal_mask: a mask of [2147483648 x 2147483648] needs 4.0 EiB for the "
                        "mask; this machine has "))
      << m;
  m = message_of([&] { attn::window_mask(Index{1} << 40, 3); });
  EXPECT_TRUE(starts(m, "window_mask: a mask of [1099511627776 x 1099511627776] needs ")) << m;
  EXPECT_NE(m.find("(more elements than an Index can count)"), std::string::npos) << m;
  m = message_of([&] { attn::full_mask(big, Index{1} << 20); });
  EXPECT_TRUE(starts(m, "full_mask: a mask of [2147483648 x 1048576] needs 2.0 PiB")) << m;
  const std::vector<int> ids(4, 1);
  m = message_of([&] { attn::padding_mask(ids, big * big); });
  EXPECT_TRUE(starts(m, "padding_mask: a mask of [4611686018427387904 x 4] needs ")) << m;
  const std::vector<char> blocked_bytes(4, 0);
  const std::span<const bool> blocked(reinterpret_cast<const bool*>(blocked_bytes.data()), 4);
  m = message_of([&] { attn::padding_mask_from_blocked(blocked, big * big); });
  EXPECT_TRUE(starts(m, "padding_mask_from_blocked: a mask of [4611686018427387904 x 4]")) << m;
  // The masks of 2 sentences of 2^20 ids: 8 MiB of ids, 2 TiB of masks.
  const attn::TokenIds long_ids = attn::TokenIds::Ones(2, Index{1} << 20);
  m = message_of([&] { attn::padding_masks(long_ids); });
  EXPECT_TRUE(starts(m, "padding_masks: ids of [2 x 1048576] (B x n) needs 2.0 TiB for the masks"))
      << m;
}

}  // namespace test_masks
