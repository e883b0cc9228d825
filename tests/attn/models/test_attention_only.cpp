// The attention-only decoder of the training chapter (attn/models/attention_only.hpp): its
// initialisation, its forward against an independent computation, causality, the ignored
// targets, the parameter walk, bad input and the gradient check.
//
// Where the expected values come from (the course's rule: never from this program's output):
//   A. Independent computations written in the test with Eigen (the embeddings, LayerNorm, the
//      unembedding, softmax cross-entropy), each tolerance justified beside it.
//   B. Identities checked to the bit: a quantity that must not depend on an input is computed
//      twice, the input changed in between, and compared with memcmp (attn_test::identical).
//      Each test states exactly which quantities are invariant, and checks that a neighbouring
//      quantity that is NOT invariant does change (so the identity is not vacuous).
//   C. Counts from the architecture (V E + T E + L (2E + 4E^2 + 4E) + 2E + V E + V).
//   D. Central differences in double (attn::check_all_layers).
#include "attn/core/random.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/models/attention_only.hpp"
#include "attn/training/gradient_check.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace test_attention_only {

using attn::AttentionOnly;
using attn::AttentionOnlyD;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn_test::identical;
using attn_test::message_of;

// The sizes of the gradient check: V 7, E 8, 2 heads, 2 layers, T 6.
const attn::AttentionOnlyConfig kSmall{
    .vocab = 7, .d_model = 8, .heads = 2, .layers = 2, .context = 6};

AttentionOnly small_model(std::uint64_t seed) {
  attn::Rng rng(seed);
  AttentionOnly m = attn::attention_only_init(rng, kSmall);
  // Move every bias, gamma and beta off its initial 0 or 1, so that no term of the forward or the
  // backward vanishes by accident (a zero bias hides a missing bias term).
  for (auto& p : attn::parameters(m)) {
    if (!p.is_vector) continue;
    for (Index c = 0; c < p.value.cols(); ++c) {
      p.value(0, c) += static_cast<float>(rng.normal(0.0, 0.2));
    }
  }
  return m;
}

template <typename T>
bool same_gradients(const attn::AttentionOnlyOf<T>& a, const attn::AttentionOnlyOf<T>& b) {
  const auto pa = attn::parameters(a);
  const auto pb = attn::parameters(b);
  if (pa.size() != pb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    if (!identical(pa[i].value, pb[i].value)) return false;
  }
  return true;
}

// ---- Initialisation -----------------------------------------------------------------------------

// tok_embed ~ N(0, 1/E) (the header's teaching point), pos_embed ~ N(0, 1), so that token and
// position vectors enter the stream with one variance. Sample standard deviations of N entries
// have a standard error of sigma / sqrt(2 N): 0.55% for the 16384 token entries, 0.78% for the
// 8192 position entries; 3% and 4% are more than five standard errors.
TEST(AttentionOnlyInit, TokenVectorsTimesSqrtEHaveUnitVariance) {
  attn::Rng rng(11);
  const Index V = 256, E = 64, T = 128;
  const AttentionOnly m =
      attn::attention_only_init(rng, {.vocab = V, .d_model = E, .heads = 4, .context = T});
  const auto std_of = [](const Matrix& x) {
    const MatrixD d = x.cast<double>();
    const double mean = d.mean();
    return std::sqrt((d.array() - mean).square().mean());
  };
  EXPECT_NEAR(std_of(m.tok_embed), 1.0 / 8.0, 0.03 / 8.0);
  EXPECT_NEAR(std_of(m.tok_embed * 8.0f), 1.0, 0.03);  // x sqrt(E) = 8: unit variance
  EXPECT_NEAR(std_of(m.pos_embed), 1.0, 0.04);
  EXPECT_EQ(m.layers.size(), 2u);  // the default L
  // nn.Embedding's N(0, 1), the paper's choice, on request.
  const AttentionOnly paper = attn::attention_only_init(
      rng, {.vocab = V, .d_model = E, .heads = 4, .context = T, .embedding_std = 1.0});
  EXPECT_NEAR(std_of(paper.tok_embed), 1.0, 0.03);
  // The layers as their PyTorch modules start: LayerNorm gamma 1, beta 0; xavier_uniform in
  // projections with bound sqrt(6 / 4E), zero biases; nn.Linear's U(-1/sqrt(E), 1/sqrt(E)).
  for (const attn::AttentionOnlyLayerOf<float>& l : m.layers) {
    EXPECT_TRUE((l.norm.gamma.array() == 1.0f).all());
    EXPECT_TRUE((l.norm.beta.array() == 0.0f).all());
    EXPECT_LE(l.attn.q_proj.weight.cwiseAbs().maxCoeff(), std::sqrt(6.0f / (4 * 64)));
    EXPECT_TRUE((l.attn.q_proj.bias.array() == 0.0f).all());
    EXPECT_EQ(l.attn.heads, 4);
  }
  EXPECT_TRUE((m.norm.gamma.array() == 1.0f).all());
  EXPECT_LE(m.unembed.weight.cwiseAbs().maxCoeff(), 1.0f / 8.0f);
  EXPECT_LE(m.unembed.bias.cwiseAbs().maxCoeff(), 1.0f / 8.0f);
  EXPECT_EQ(m.unembed.weight.rows(), V);
  EXPECT_EQ(m.unembed.weight.cols(), E);
}

// ---- The forward against an independent computation ---------------------------------------------

// One layer whose attention out_proj weight and bias are 0 adds exactly 0 to the stream (every
// product in concat W_O^T is a product with 0, and + b_O adds 0), so the logits must be
//   LN_final(tok_embed[ids] sqrt(E) + pos_embed[:n]) W^T + b,
// computed here from the definitions with Eigen. E = 4, so sqrt(E) = 2 is exact.
TEST(AttentionOnlyForward, WithASilentLayerTheLogitsAreTheNormalisedEmbeddings) {
  attn::Rng rng(3);
  AttentionOnlyD m = attn::cast<double>(attn::attention_only_init(
      rng, {.vocab = 3, .d_model = 4, .heads = 2, .layers = 1, .context = 3}));
  m.tok_embed << 0.5, -1.0, 0.25, 2.0,  //
      1.5, 0.0, -0.5, 1.0,              //
      -2.0, 1.0, 0.75, 0.5;
  m.pos_embed << 0.1, 0.2, -0.3, 0.4,  //
      -1.0, 0.5, 0.0, 0.25,            //
      0.3, -0.6, 0.9, -1.2;
  m.norm.gamma << 1.5, 0.5, -1.0, 2.0;
  m.norm.beta << 0.1, -0.2, 0.3, 0.0;
  m.unembed.weight << 1.0, 0.0, -1.0, 0.5,  //
      0.25, 2.0, 0.0, -1.0,                 //
      -0.5, 1.0, 1.0, 1.0;
  m.unembed.bias << 0.1, -0.1, 0.2;
  m.layers[0].norm.gamma << 2.0, -1.0, 0.5, 1.0;  // not the identity: it must not matter either
  m.layers[0].attn.out_proj.weight.setZero();
  m.layers[0].attn.out_proj.bias.setZero();
  const std::vector<int> ids{2, 0, 2};

  // The expectation, from the definitions: x = 2 tok[id] + pos; per row, mean and the biased
  // variance, y = (x - mean) / sqrt(var + eps) gamma + beta; logits = y W^T + b.
  MatrixD expected(3, 3);
  for (Index i = 0; i < 3; ++i) {
    Eigen::RowVectorXd x(4);
    for (Index c = 0; c < 4; ++c) {
      x(c) = 2.0 * m.tok_embed(ids[static_cast<std::size_t>(i)], c) + m.pos_embed(i, c);
    }
    const double mean = x.sum() / 4.0;
    const double var = (x.array() - mean).square().sum() / 4.0;
    Eigen::RowVectorXd y(4);
    for (Index c = 0; c < 4; ++c) {
      y(c) = (x(c) - mean) / std::sqrt(var + m.norm.eps) * m.norm.gamma(c) + m.norm.beta(c);
    }
    for (Index v = 0; v < 3; ++v) {
      double z = m.unembed.bias(v);
      for (Index c = 0; c < 4; ++c) z += y(c) * m.unembed.weight(v, c);
      expected(i, v) = z;
    }
  }
  attn::AttentionOnlyCacheD cache;
  const MatrixD logits = attn::attention_only_forward(m, ids, &cache);
  // Double arithmetic on values below ~10, summed in another order than the library's: a few
  // ulps, ~1e-15. 1e-12 leaves a thousand times that; a missing sqrt(E), position row or
  // gamma moves the logits by O(1).
  EXPECT_LE(attn::max_abs_diff(logits, expected), 1e-12) << logits << "\n\n" << expected;
  EXPECT_TRUE(identical(cache.logits, logits));
  ASSERT_EQ(cache.layers.size(), 1u);
  EXPECT_TRUE((cache.layers[0].attn.out.array() == 0.0).all());  // the layer added exact zeros
  EXPECT_TRUE(identical(cache.norm_in, cache.layers[0].x));

  // Not vacuous: the same model with a live out_proj gives other logits. (Not a constant W_O:
  // that adds one number to every entry of a row, which the final LayerNorm removes exactly.)
  m.layers[0].attn.out_proj.weight.setIdentity();
  EXPECT_GT(attn::max_abs_diff(attn::attention_only_forward(m, ids), expected), 1e-3);
}

// The per-head weights the chapter draws: causal (exact zeros above the diagonal) and each row
// a distribution (sums within float rounding of 1: six terms, 1e-6 is ~10 ulps).
TEST(AttentionOnlyForward, TheCachedHeadWeightsAreCausalDistributions) {
  const AttentionOnly m = small_model(5);
  const std::vector<int> ids{1, 4, 6, 1, 4, 6};
  attn::AttentionOnlyCache cache;
  attn::attention_only_forward(m, ids, &cache, attn::NeedWeights::yes);
  ASSERT_EQ(cache.layers.size(), 2u);
  for (const auto& layer : cache.layers) {
    ASSERT_EQ(layer.attn.weights.size(), 2u);
    for (const Matrix& w : layer.attn.weights) {
      ASSERT_EQ(w.rows(), 6);
      ASSERT_EQ(w.cols(), 6);
      for (Index i = 0; i < 6; ++i) {
        for (Index j = i + 1; j < 6; ++j) EXPECT_EQ(w(i, j), 0.0f) << i << ", " << j;
        EXPECT_NEAR(w.row(i).sum(), 1.0f, 1e-6f);
      }
    }
  }
}

// ---- Causality ----------------------------------------------------------------------------------

// Row i of the logits is made from tokens 0..i only: changing token t (or every token from t
// on) leaves rows 0..t-1 identical to the bit (the causal mask turns their scores on keys >= t
// into -inf, so those keys' weights are exactly 0), and does change row t.
TEST(AttentionOnlyCausality, NoLogitRowBeforeAChangedTokenMoves) {
  const AttentionOnly m = small_model(7);
  const std::vector<int> ids{3, 1, 4, 1, 5, 2};
  const Matrix before = attn::attention_only_forward(m, ids);
  for (Index t = 0; t < 6; ++t) {
    std::vector<int> one = ids, suffix = ids;
    const auto ut = static_cast<std::size_t>(t);
    one[ut] = (ids[ut] + 1) % 7;
    for (std::size_t s = ut; s < suffix.size(); ++s) suffix[s] = (ids[s] + 3) % 7;
    for (const std::vector<int>* changed : {&one, &suffix}) {
      const Matrix after = attn::attention_only_forward(m, *changed);
      // (Not called on the empty block of t = 0: identical() memcmp's the data, and a null
      // pointer there, even for 0 bytes, lets GCC drop Eigen's null check when it frees it.)
      if (t > 0) {
        EXPECT_TRUE(identical(after.topRows(t), before.topRows(t))) << "t = " << t;
      }
      EXPECT_GT(attn::max_abs_diff(after.row(t), before.row(t)), 0.0) << "t = " << t;
    }
  }
}

// The backward pass, with d_logits zero in rows t..n-1: no gradient reaches positions >= t (row
// i's gradient flows only to positions <= i), and whatever those positions hold is multiplied by
// exact zeros. So EVERY parameter gradient -- tok_embed included, whose rows for the old and the
// new token at t each receive exactly +0 from position t, and pos_embed, whose rows >= t receive
// +0 -- is identical to the bit whichever tokens stand at positions t..n-1. Not vacuous: with
// d_logits row t non-zero, changing token t does change the gradients.
TEST(AttentionOnlyCausality, ZeroGradientFromRowTOnMakesTokensFromTOnInvisible) {
  const AttentionOnly m = small_model(8);
  const std::vector<int> ids{3, 1, 4, 1, 5, 2};
  attn::Rng rng(9);
  const Matrix R = attn::random_normal(rng, 6, 7);  // a d_logits with every row non-zero
  const auto gradients = [&](const std::vector<int>& x, const Matrix& d_logits) {
    attn::AttentionOnlyCache cache;
    attn::attention_only_forward(m, x, &cache);
    AttentionOnly g = attn::zeros_like(m);
    attn::attention_only_backward(m, x, cache, d_logits, g);
    return g;
  };
  for (Index t = 1; t < 6; ++t) {
    Matrix d_logits = R;
    d_logits.bottomRows(6 - t).setZero();
    std::vector<int> one = ids, suffix = ids;
    const auto ut = static_cast<std::size_t>(t);
    one[ut] = (ids[ut] + 1) % 7;
    for (std::size_t s = ut; s < suffix.size(); ++s) suffix[s] = (ids[s] + 3) % 7;
    const AttentionOnly base = gradients(ids, d_logits);
    EXPECT_TRUE(same_gradients(gradients(one, d_logits), base)) << "t = " << t;
    EXPECT_TRUE(same_gradients(gradients(suffix, d_logits), base)) << "t = " << t;
    // Row t live again: now token t matters.
    Matrix live = d_logits;
    live.row(t) = R.row(t);
    EXPECT_FALSE(same_gradients(gradients(one, live), gradients(ids, live))) << "t = " << t;
  }
}

// ---- Ignored targets ----------------------------------------------------------------------------

// The induction task's batch: the first copy of the segment is ignored (-1), the second copy
// predicts the next token. In sequence 0 the last target is ignored too, in sequence 1 the last
// two: positions whose targets, and whose later positions' targets, are all ignored.
attn::AttentionOnlyBatch task_batch() {
  attn::AttentionOnlyBatch batch{attn::TokenIds(2, 6), attn::TokenIds(2, 6), -1};
  batch.inputs << 1, 4, 6, 1, 4, 6, /**/ 5, 2, 0, 5, 2, 0;
  batch.targets << -1, -1, -1, 4, 6, -1, /**/ -1, -1, -1, 2, -1, -1;
  return batch;
}

// What is exactly true: an ignored target removes its position's logits row from the loss and
// gives it a zero d_logits row, but it does NOT remove its token from the context: later rows
// attend to it. So changing the token at an ignored position leaves the loss and every gradient
// unchanged to the bit only when every LATER target of its sequence is ignored too (then no
// counted row can see the token: causality). Here: sequence 0's position 5, sequence 1's
// positions 4 and 5. The count and the number correct do not change either.
TEST(AttentionOnlyIgnore, TokensSeenOnlyByIgnoredRowsChangeNothing) {
  const AttentionOnly m = small_model(12);
  const attn::AttentionOnlyBatch batch = task_batch();
  attn::AttentionOnlyBatch changed = batch;
  changed.inputs(0, 5) = 3;
  changed.inputs(1, 4) = 6;
  changed.inputs(1, 5) = 1;
  AttentionOnly g_before = attn::zeros_like(m), g_after = attn::zeros_like(m);
  const attn::AttentionOnlyStep before = attn::attention_only_loss(m, batch, &g_before);
  const attn::AttentionOnlyStep after = attn::attention_only_loss(m, changed, &g_after);
  EXPECT_EQ(before.count, 3);
  EXPECT_EQ(after.count, 3);
  EXPECT_EQ(after.correct, before.correct);
  EXPECT_EQ(std::memcmp(&after.loss, &before.loss, sizeof(float)), 0)
      << after.loss << " vs " << before.loss;
  EXPECT_TRUE(same_gradients(g_after, g_before));
}

// The converse: the token at an ignored position of the first copy is what the second copy must
// copy, and the counted rows after it read it. Changing it changes the loss.
TEST(AttentionOnlyIgnore, AnIgnoredPositionsTokenStillReachesLaterRows) {
  const AttentionOnly m = small_model(12);
  const attn::AttentionOnlyBatch batch = task_batch();
  attn::AttentionOnlyBatch changed = batch;
  changed.inputs(0, 1) = 2;  // target ignored; rows 3 and 4 are counted and see it
  const float before = attn::attention_only_loss(m, batch, nullptr).loss;
  const float after = attn::attention_only_loss(m, changed, nullptr).loss;
  EXPECT_NE(after, before);
}

// The loss and the output bias's gradient against softmax cross-entropy written out here, over
// the counted rows of the whole batch only, divided by the batch's count (3):
//   loss = (1/3) sum_counted (logsumexp(z) - z_y),  d b_unembed = (1/3) sum_counted (p - onehot(y))
// (logits = y W^T + b, so d b is the column sum of d_logits: every ignored row adds nothing).
// Double model; the two computations differ in the order of a few dozen sums of values below
// ~10: ~1e-15. 1e-12 is a thousand times that; an ignored row counted as class 0 moves either by
// ~0.1 or more.
TEST(AttentionOnlyIgnore, LossAndOutputBiasGradientAreTheCountedRowsOnly) {
  const AttentionOnlyD m = attn::cast<double>(small_model(13));
  const attn::AttentionOnlyBatch batch = task_batch();
  AttentionOnlyD grads = attn::zeros_like(m);
  const attn::AttentionOnlyStepD step =
      attn::attention_only_loss(m, batch, &grads, /*keep_logits=*/true);
  ASSERT_EQ(step.logits.size(), 2u);
  double total = 0.0;
  Eigen::RowVectorXd d_bias = Eigen::RowVectorXd::Zero(7);
  Index counted = 0, correct = 0;
  for (Index b = 0; b < 2; ++b) {
    for (Index i = 0; i < 6; ++i) {
      const int y = batch.targets(b, i);
      if (y == batch.ignore_id) continue;
      ++counted;
      const Eigen::RowVectorXd z = step.logits[static_cast<std::size_t>(b)].row(i);
      Eigen::RowVectorXd p = z.array().exp();
      const double sum = p.sum();
      p /= sum;
      total += std::log(sum) - z(y);
      p(y) -= 1.0;
      d_bias += p;
      Index best = 0;
      z.maxCoeff(&best);
      correct += (best == y);
    }
  }
  ASSERT_EQ(counted, 3);
  EXPECT_EQ(step.count, counted);
  EXPECT_EQ(step.correct, correct);
  EXPECT_NEAR(step.loss, total / 3.0, 1e-12);
  EXPECT_LE(attn::max_abs_diff(grads.unembed.bias, d_bias / 3.0), 1e-12);
}

// A batch whose every target is ignored: loss 0, count 0, and no gradient at all (exact zeros),
// as Seq2Seq's loss (PyTorch would give 0 / 0 = NaN).
TEST(AttentionOnlyIgnore, AllIgnoredIsZeroLossAndNoGradient) {
  const AttentionOnly m = small_model(14);
  attn::AttentionOnlyBatch batch = task_batch();
  batch.targets.setConstant(-1);
  AttentionOnly grads = attn::zeros_like(m);
  const attn::AttentionOnlyStep step = attn::attention_only_loss(m, batch, &grads);
  EXPECT_EQ(step.loss, 0.0f);
  EXPECT_EQ(step.count, 0);
  EXPECT_EQ(step.correct, 0);
  EXPECT_TRUE(same_gradients(grads, attn::zeros_like(m)));
}

// The batch loss is the mean over the batch's counted targets, not the mean of the sequences'
// means: loss = (count_0 loss_0 + count_1 loss_1) / (count_0 + count_1), and the gradient is the
// same weighted sum of the one-sequence gradients. Sequence 0 counts 2 targets, sequence 1 one,
// so the two means differ. Double model; 1e-12 of gradients and losses of size ~1 is a
// thousand times the rounding of the few operations that differ.
TEST(AttentionOnlyIgnore, TheBatchMeanIsOverTheBatchCount) {
  const AttentionOnlyD m = attn::cast<double>(small_model(15));
  const attn::AttentionOnlyBatch batch = task_batch();
  const auto one = [&](Index b) {
    return attn::AttentionOnlyBatch{batch.inputs.row(b), batch.targets.row(b), batch.ignore_id};
  };
  AttentionOnlyD g = attn::zeros_like(m), g0 = attn::zeros_like(m), g1 = attn::zeros_like(m);
  const attn::AttentionOnlyStepD s = attn::attention_only_loss(m, batch, &g);
  const attn::AttentionOnlyStepD s0 = attn::attention_only_loss(m, one(0), &g0);
  const attn::AttentionOnlyStepD s1 = attn::attention_only_loss(m, one(1), &g1);
  ASSERT_EQ(s0.count, 2);
  ASSERT_EQ(s1.count, 1);
  EXPECT_NEAR(s.loss, (2.0 * s0.loss + 1.0 * s1.loss) / 3.0, 1e-12);
  EXPECT_GT(std::abs(s.loss - 0.5 * (s0.loss + s1.loss)), 1e-6);  // not the mean of the means
  const auto pg = attn::parameters(g), p0 = attn::parameters(g0), p1 = attn::parameters(g1);
  ASSERT_EQ(pg.size(), p0.size());
  for (std::size_t i = 0; i < pg.size(); ++i) {
    const MatrixD expected = (2.0 * p0[i].value + 1.0 * p1[i].value) / 3.0;
    EXPECT_LE(attn::max_abs_diff(pg[i].value, expected), 1e-12) << pg[i].key;
  }
}

// ---- Sequences side by side ---------------------------------------------------------------------

// A batch of B random sequences over the small model's vocabulary, every third target ignored.
attn::AttentionOnlyBatch random_batch(std::uint64_t seed, Index B) {
  attn::Rng rng(seed);
  attn::AttentionOnlyBatch batch{attn::TokenIds(B, kSmall.context),
                                 attn::TokenIds(B, kSmall.context), -1};
  for (Index i = 0; i < batch.inputs.size(); ++i) {
    batch.inputs.data()[i] = static_cast<int>(rng.next_u64() % kSmall.vocab);
    batch.targets.data()[i] = i % 3 == 2 ? -1 : static_cast<int>(rng.next_u64() % kSmall.vocab);
  }
  return batch;
}

// The loss runs its sequences on OpenMP threads, in shards whose gradients are summed in an order
// the batch fixes (sequence_shards.hpp). So every thread count must give the same bits: the loss,
// the number correct and every gradient. 13 sequences make 8 shards of one or two sequences,
// and 2 and 3 threads split them unevenly. (5 passed too, but LLVM's libomp in the sanitize
// build then leaks 4 KiB of its own thread data at exit, which LeakSanitizer reports.) Not
// vacuous: a sum that followed the threads (each thread accumulating what it ran) would group
// the 13 terms differently for each count; replacing the shard loop by that moved gradients in
// their last bits and failed this test.
TEST(AttentionOnlyThreads, EveryThreadCountGivesTheSameBits) {
  const AttentionOnly m = small_model(21);
  const attn::AttentionOnlyBatch batch = random_batch(22, 13);
  AttentionOnly g1 = attn::zeros_like(m);
  const attn::AttentionOnlyStep s1 = attn::attention_only_loss(m, batch, &g1, true, 1);
  ASSERT_EQ(s1.logits.size(), 13u);
  for (int threads : {2, 3}) {
    AttentionOnly g = attn::zeros_like(m);
    const attn::AttentionOnlyStep s = attn::attention_only_loss(m, batch, &g, true, threads);
    EXPECT_EQ(std::memcmp(&s.loss, &s1.loss, sizeof s.loss), 0) << threads << " threads";
    EXPECT_EQ(s.correct, s1.correct) << threads << " threads";
    EXPECT_TRUE(same_gradients(g, g1)) << threads << " threads";
    for (std::size_t b = 0; b < s.logits.size(); ++b) {
      EXPECT_TRUE(identical(s.logits[b], s1.logits[b])) << threads << " threads, sequence " << b;
    }
  }
}

// The shards together cover every sequence exactly once: the batch's loss and gradient are the
// count-weighted mean of the 13 one-sequence ones (an off-by-one at a shard's edge would drop
// or double one). Before, a batch of another model's sizes runs on the same thread, so the
// shards' kept buffers must be rebuilt for this model's shapes. Double model; 1e-12 of
// gradients of size ~1 is thousands of times the rounding of 13-term sums.
TEST(AttentionOnlyThreads, TheShardsSumEverySequenceOnce) {
  attn::Rng other_rng(5);
  const AttentionOnlyD other = attn::cast<double>(attn::attention_only_init(
      other_rng, {.vocab = 7, .d_model = 4, .heads = 1, .layers = 1, .context = 6}));
  AttentionOnlyD other_grads = attn::zeros_like(other);
  attn::attention_only_loss(other, random_batch(30, 13), &other_grads, false, 2);

  const AttentionOnlyD m = attn::cast<double>(small_model(23));
  const attn::AttentionOnlyBatch batch = random_batch(24, 13);
  AttentionOnlyD g = attn::zeros_like(m);
  const attn::AttentionOnlyStepD s = attn::attention_only_loss(m, batch, &g, false, 2);
  double loss = 0;
  AttentionOnlyD expected = attn::zeros_like(m);
  auto pe = attn::parameters(expected);
  for (Index b = 0; b < batch.inputs.rows(); ++b) {
    const attn::AttentionOnlyBatch one{batch.inputs.row(b), batch.targets.row(b), -1};
    AttentionOnlyD gb = attn::zeros_like(m);
    const attn::AttentionOnlyStepD sb = attn::attention_only_loss(m, one, &gb, false, 2);
    const double weight = static_cast<double>(sb.count) / static_cast<double>(s.count);
    loss += weight * sb.loss;
    const auto pb = attn::parameters(gb);
    for (std::size_t i = 0; i < pe.size(); ++i) pe[i].value += weight * pb[i].value;
  }
  EXPECT_NEAR(s.loss, loss, 1e-12);
  const auto pg = attn::parameters(g);
  for (std::size_t i = 0; i < pg.size(); ++i) {
    EXPECT_LE(attn::max_abs_diff(pg[i].value, pe[i].value), 1e-12) << pg[i].key;
  }
}

// A bad token in the 10th of 13 sequences, found by whichever of 2 threads runs its shard: the
// exception reaches the caller (it must not escape the OpenMP region, which would end the
// program), and the gradients it was given are untouched, though the other shards finished.
TEST(AttentionOnlyThreads, AnErrorInOneSequenceLeavesTheGradientsUntouched) {
  const AttentionOnly m = small_model(25);
  attn::AttentionOnlyBatch batch = random_batch(26, 13);
  batch.inputs(9, 4) = 7;
  AttentionOnly g = attn::zeros_like(m);
  for (auto& p : attn::parameters(g)) p.value.setConstant(0.25f);
  const AttentionOnly before = g;
  EXPECT_EQ(message_of([&] { attn::attention_only_loss(m, batch, &g, false, 2); }),
            "attention_only_forward: ids[4] = 7 is outside the vocabulary [0, 7)");
  EXPECT_TRUE(same_gradients(g, before));
  // Gradients of another model's shapes are refused before anything runs.
  attn::Rng rng(27);
  AttentionOnly wrong = attn::zeros_like(attn::attention_only_init(
      rng, {.vocab = 7, .d_model = 4, .heads = 1, .layers = 2, .context = 6}));
  EXPECT_NE(message_of([&] {
              attn::attention_only_loss(m, random_batch(26, 13), &wrong);
            }).find("attention_only_loss: the gradient of"),
            std::string::npos);
  EXPECT_EQ(
      message_of([&] { attn::attention_only_loss(m, random_batch(26, 13), nullptr, false, -1); }),
      "attention_only_loss: threads is -1: it must be >= 0 (0: default_threads())");
}

// ---- The parameter walk -------------------------------------------------------------------------

// PyTorch's named_parameters() of the replay module: the model's own Parameter pos_embed first
// (a module yields its own parameters before its submodules'), then tok_embed, the layers, the
// final norm and the unembedding. in_proj_weight and in_proj_bias are visited as three blocks
// each (W_Q, W_K, W_V: parameters.hpp).
TEST(AttentionOnlyParameters, NamesOrderShapesAndCount) {
  const AttentionOnly m = small_model(1);
  const Index V = 7, E = 8, T = 6, L = 2;
  std::vector<std::string> keys;
  for (const auto& p : attn::parameters(m)) {
    if (p.first == 0) keys.push_back(p.key);
  }
  std::vector<std::string> expected{"pos_embed", "tok_embed.weight"};
  for (const char* layer : {"layers.0.", "layers.1."}) {
    for (const char* key : {"norm.weight", "norm.bias", "attn.in_proj_weight", "attn.in_proj_bias",
                            "attn.out_proj.weight", "attn.out_proj.bias"}) {
      expected.push_back(std::string(layer) + key);
    }
  }
  for (const char* key : {"norm.weight", "norm.bias", "unembed.weight", "unembed.bias"}) {
    expected.emplace_back(key);
  }
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(attn::parameter_count(m),
            V * E + T * E + L * (2 * E + 4 * E * E + 4 * E) + 2 * E + V * E + V);
  EXPECT_EQ(attn::parameter_count(m), 791);
  const auto params = attn::parameters(m);
  EXPECT_EQ(params[0].value.rows(), T);
  EXPECT_EQ(params[0].value.cols(), E);
  EXPECT_EQ(params[1].value.rows(), V);
  EXPECT_EQ(params.back().value.cols(), V);
  EXPECT_TRUE(params.back().is_vector);
  // cast<double> keeps every entry (float -> double is exact), and back again.
  const AttentionOnly round_trip = attn::cast<float>(attn::cast<double>(m));
  EXPECT_TRUE(same_gradients(round_trip, m));
}

// ---- Bad input ----------------------------------------------------------------------------------

TEST(AttentionOnlyBadInput, ThrowsNamingTheFunctionAndTheCulprit) {
  attn::Rng rng(1);
  attn::AttentionOnlyConfig c = kSmall;
  c.heads = 3;
  EXPECT_EQ(message_of([&] { attn::attention_only_init(rng, c); }),
            "attention_only_init: 3 heads do not divide d_model = 8: each head needs d_k = "
            "d_model / heads columns");
  c = kSmall;
  c.layers = 0;
  EXPECT_EQ(message_of([&] { attn::attention_only_init(rng, c); }),
            "attention_only_init: layers is 0: it must be at least 1");
  c = kSmall;
  c.context = 0;
  EXPECT_EQ(message_of([&] { attn::attention_only_init(rng, c); }),
            "attention_only_init: context is 0: it must be at least 1");
  c = kSmall;
  c.embedding_std = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(message_of([&] {
              attn::attention_only_init(rng, c);
            }).find("attention_only_init: embedding_std"),
            std::string::npos);

  const AttentionOnly m = attn::attention_only_init(rng, kSmall);  // V 7, T 6
  const std::vector<int> bad_id{1, 2, 7}, negative{-1}, seven{1, 2, 3, 4, 5, 6, 0}, empty;
  EXPECT_EQ(message_of([&] { attn::attention_only_forward<float>(m, bad_id); }),
            "attention_only_forward: ids[2] = 7 is outside the vocabulary [0, 7)");
  EXPECT_EQ(message_of([&] { attn::attention_only_forward<float>(m, negative); }),
            "attention_only_forward: ids[0] = -1 is outside the vocabulary [0, 7)");
  EXPECT_EQ(message_of([&] { attn::attention_only_forward<float>(m, seven); }),
            "attention_only_forward: the sequence has 7 tokens: it must have 1 to 6 (the context "
            "T, pos_embed's rows)");
  EXPECT_NE(message_of([&] {
              attn::attention_only_forward<float>(m, empty);
            }).find("attention_only_forward: the sequence has 0 tokens"),
            std::string::npos);

  // The backward with a d_logits of the wrong shape, and a batch whose targets do not match.
  const std::vector<int> ids{1, 2, 3};
  attn::AttentionOnlyCache cache;
  attn::attention_only_forward(m, ids, &cache);
  AttentionOnly grads = attn::zeros_like(m);
  EXPECT_NE(message_of([&] {
              attn::attention_only_backward(m, ids, cache, Matrix::Zero(3, 6), grads);
            }).find("attention_only_backward: d_logits is [3 x 6] for 3 tokens"),
            std::string::npos);
  const attn::AttentionOnlyBatch mismatched{attn::TokenIds::Zero(2, 3), attn::TokenIds::Zero(2, 4),
                                            -1};
  EXPECT_EQ(message_of([&] { attn::attention_only_loss(m, mismatched, nullptr); }),
            "attention_only_loss: inputs are [2 x 3] and targets [2 x 4]: one target per input "
            "token, [B x n] both");
}

// ---- The model as its own gradients, and sizes the machine cannot hold (issue 26) ---------------

TEST(AttentionOnlyBadInput, TheModelAsItsOwnGradientHolderIsRefused) {
  // attention_only_loss(model, batch, &model) added the gradients into the weights it was still
  // reading, and returned normally. Refused now, before anything is computed or changed.
  AttentionOnly m = small_model(3);
  const AttentionOnly before = m;
  const attn::AttentionOnlyBatch batch{attn::TokenIds::Constant(2, 5, 1),
                                       attn::TokenIds::Constant(2, 5, 2), -1};
  std::string msg = message_of([&] { attn::attention_only_loss(m, batch, &m); });
  EXPECT_EQ(msg.rfind("attention_only_loss: the gradient of pos_embed shares memory with the "
                      "layer's pos_embed: the gradients need memory of their own",
                      0),
            0u)
      << msg;
  const std::vector<int> ids{1, 2, 3};
  attn::AttentionOnlyCache cache;
  attn::attention_only_forward(m, ids, &cache);
  msg = message_of(
      [&] { attn::attention_only_backward(m, ids, cache, Matrix::Zero(3, kSmall.vocab), m); });
  EXPECT_EQ(msg.rfind("attention_only_backward: the gradient of pos_embed shares memory", 0), 0u)
      << msg;
  // d_logits inside the gradients: written (the unembedding's gradient) before it is read.
  AttentionOnly grads = attn::zeros_like(m);
  const auto d_logits = grads.unembed.weight.topRows(3).leftCols(kSmall.vocab);  // [3 x V]
  msg = message_of([&] { attn::attention_only_backward(m, ids, cache, d_logits, grads); });
  EXPECT_EQ(msg.rfind("attention_only_backward: the gradient of unembed.weight shares memory "
                      "with d_logits",
                      0),
            0u)
      << msg;
  const auto now = attn::parameters(m);
  const auto then = attn::parameters(before);
  for (std::size_t i = 0; i < now.size(); ++i) {
    EXPECT_TRUE(identical(now[i].value, then[i].value)) << now[i].key;
  }
}

TEST(AttentionOnlyBadInput, AModelTheMachineCannotHoldIsRefusedBeforeAllocating) {
  // d_model 2^40 threw std::bad_alloc from inside the first random_normal: refused now, naming
  // the size and what it needs (4 [E x E] projections per layer alone overflow Index).
  attn::Rng rng(1);
  attn::AttentionOnlyConfig c = kSmall;
  c.d_model = Index{1} << 40;
  c.heads = 1;
  std::string msg = message_of([&] { attn::attention_only_init(rng, c); });
  EXPECT_EQ(msg.rfind("attention_only_init: d_model 1099511627776 (vocab 7, layers 2, context 6) "
                      "needs ",
                      0),
            0u)
      << msg;
  EXPECT_NE(msg.find(" of parameters (more elements than an Index can count); this machine has "),
            std::string::npos)
      << msg;
  // A vocabulary of 2^40 with d_model 8 fits in Index: tok_embed and unembed [V x E], 2^44
  // floats, and unembed's bias [V], 2^40: 68 TiB.
  c = kSmall;
  c.vocab = Index{1} << 40;
  msg = message_of([&] { attn::attention_only_init(rng, c); });
  EXPECT_EQ(msg.rfind("attention_only_init: d_model 8 (vocab 1099511627776, layers 2, context 6) "
                      "needs 68.0 TiB of parameters; this machine has ",
                      0),
            0u)
      << msg;
}

// ---- The gradient check -------------------------------------------------------------------------

// check_all_layers' report for this model (V 7, E 8, 2 heads, 2 layers, T 6, two sequences of 5
// with ignored targets; central differences in double): every one of its 791 parameters
// perturbed, within the course's bar of 1e-6 (gradient_check.hpp says why that bar).
TEST(AttentionOnlyGradientCheck, EveryParameterMeetsTheBar) {
  for (const std::uint64_t seed : {1u, 2u}) {
    const std::vector<attn::GradientReport> reports = attn::check_all_layers(seed);
    const attn::GradientReport* report = nullptr;
    for (const attn::GradientReport& r : reports) {
      if (r.layer == "whole attention-only decoder, 2 layers") report = &r;
    }
    ASSERT_NE(report, nullptr);
    Index entries = 0;
    for (const attn::TensorCheck& t : report->tensors) entries += t.entries;
    EXPECT_EQ(entries, 791);
    const attn::TensorCheck& worst = report->worst_tensor();
    EXPECT_LE(report->worst(), attn::kGradientCheckTolerance)
        << "seed " << seed << ": " << worst.name << " is off by " << worst.max_abs_error
        << " at a scale of " << worst.scale;
    RecordProperty("worst_seed_" + std::to_string(seed), std::to_string(report->worst()));
  }
}

}  // namespace test_attention_only
