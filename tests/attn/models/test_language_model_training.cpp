// Training the language model of chapter 12 (attn/models/language_model_training.hpp): the
// batch's loss and every gradient.
//
// Where the expected values come from (never from this program's output):
//   A. Central differences (training/gradient_check.hpp) of the batch loss in double, for every
//      parameter, tied and untied, with RoPE in both layouts, a window and grouped heads.
//   B. Identities: the stacked batch's logits are each window's own forward pass
//      (language_model_forward, which never stacks), and its loss is the mean of their
//      cross-entropies; the bytes do not depend on the number of threads.
//   C. Bad input is refused before any gradient moves.
//   (PyTorch's numbers for the same weights: test_language_model_torch.cpp.)
#include "attn/core/random.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/models/language_model.hpp"
#include "attn/models/language_model_training.hpp"
#include "attn/ops/loss.hpp"
#include "attn/training/gradient_check.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace test_language_model_training {

using attn::Index;
using attn::LanguageModel;
using attn::LanguageModelBatch;
using attn::LanguageModelConfig;
using attn::LanguageModelD;
using attn_test::identical;
using attn_test::message_of;

LanguageModelConfig config_of(bool tied, Index window, attn::RopeLayout layout) {
  return {.vocab = 7,
          .d_model = 8,
          .heads = 4,
          .kv_heads = 2,
          .d_ff = 12,
          .layers = 2,
          .context = 9,
          .window = window,
          .rope_layout = layout,
          .tied_embeddings = tied,
          .embedding_std = 0.5};
}

// A model whose every LayerNorm is moved off (1, 0), so that a gradient missing a factor gamma
// or a beta term cannot pass at gamma = 1, beta = 0 (as check_all_layers does).
LanguageModel model_of(const LanguageModelConfig& config, std::uint64_t seed) {
  attn::Rng rng(seed);
  LanguageModel m = attn::language_model_init(rng, config);
  const auto move_norm = [&](attn::LayerNorm& norm) {
    norm.gamma += attn::random_normal(rng, 1, norm.gamma.cols(), 0.0, 0.2);
    norm.beta += attn::random_normal(rng, 1, norm.beta.cols(), 0.0, 0.2);
  };
  for (attn::LanguageModelBlockOf<float>& b : m.blocks) {
    move_norm(b.norm1);
    move_norm(b.norm2);
  }
  move_norm(m.norm);
  return m;
}

LanguageModelBatch batch_of(Index B, Index n, Index vocab, std::uint64_t seed) {
  attn::Rng rng(seed);
  LanguageModelBatch batch{attn::TokenIds(B, n), attn::TokenIds(B, n)};
  const auto draw = [&] {
    return static_cast<int>(rng.next_u64() % static_cast<std::uint64_t>(vocab));
  };
  for (Index b = 0; b < B; ++b) {
    for (Index i = 0; i < n; ++i) {
      batch.inputs(b, i) = draw();
      batch.targets(b, i) = draw();
    }
  }
  return batch;
}

template <typename Model>
bool same_gradients(const Model& a, const Model& b) {
  const auto pa = attn::parameters(a);
  const auto pb = attn::parameters(b);
  for (std::size_t i = 0; i < pa.size(); ++i) {
    if (!identical(pa[i].value, pb[i].value)) return false;
  }
  return pa.size() == pb.size();
}

// A. Every parameter's gradient against central differences of the batch loss, in double:
// three windows of 8 tokens; the relative error bound is the checker's (gradient_check.hpp says
// why 1e-6 separates rounding, ~1e-9 here, from a wrong gradient, ~1e-3 and above).
struct GradientCase {
  const char* name;
  bool tied;
  Index window;
  attn::RopeLayout layout;
};

class LanguageModelGradients : public testing::TestWithParam<GradientCase> {};

TEST_P(LanguageModelGradients, EveryParameterMatchesCentralDifferences) {
  const GradientCase c = GetParam();
  LanguageModelD m = attn::cast<double>(model_of(config_of(c.tied, c.window, c.layout), 41));
  const LanguageModelBatch batch = batch_of(3, 8, m.vocab(), 42);
  LanguageModelD grads = attn::zeros_like(m);
  attn::language_model_loss(m, batch, &grads);
  attn::GradientReport report{c.name, {}};
  attn::check_parameters(report, m, grads, [&] {
    return static_cast<double>(attn::language_model_loss(m, batch, nullptr).loss);
  });
  ASSERT_EQ(report.tensors.size(), attn::parameters(m).size());
  EXPECT_LT(report.worst(), attn::kGradientCheckTolerance)
      << c.name << ": " << report.worst_tensor().name;
}

INSTANTIATE_TEST_SUITE_P(
    Configurations, LanguageModelGradients,
    testing::Values(GradientCase{"untied", false, 0, attn::RopeLayout::interleaved},
                    GradientCase{"tied_window3_halves", true, 3, attn::RopeLayout::halves}),
    [](const testing::TestParamInfo<GradientCase>& info) { return std::string(info.param.name); });

// The check above can fail: a gradient with one entry moved by 1e-3 of its tensor's scale
// reads far above the bound (the checker's own tests plant such errors in every layer; here the
// tied embedding, which gets two contributions, is the one planted).
TEST(LanguageModelGradientsCanFail, APlantedErrorInTheTiedEmbeddingIsCaught) {
  LanguageModelD m =
      attn::cast<double>(model_of(config_of(true, 0, attn::RopeLayout::interleaved), 43));
  const LanguageModelBatch batch = batch_of(2, 6, m.vocab(), 44);
  LanguageModelD grads = attn::zeros_like(m);
  attn::language_model_loss(m, batch, &grads);
  grads.tok_embed(1, 2) += 1e-3 * grads.tok_embed.cwiseAbs().maxCoeff();
  attn::GradientReport report{"planted", {}};
  attn::check_parameters(report, m, grads, [&] {
    return static_cast<double>(attn::language_model_loss(m, batch, nullptr).loss);
  });
  EXPECT_GT(report.worst(), attn::kGradientCheckTolerance);
  EXPECT_EQ(report.worst_tensor().name, "tok_embed.weight");
}

// B. The stacked batch is B separate windows: row b n + i of its logits is row i of window b's
// own forward pass, which never stacks anything (Arithmetic::blocked: the same per-head
// attention on a single sequence). Float, so not bits: a GEMM over B n rows may sum a row in
// another order than one over n rows; 1e-5 of logits of size ~1 is tens of float ulps, far
// below a window reading its neighbour's rows (which moves logits by ~1e-1).
TEST(LanguageModelBatch, EachWindowIsItsOwnSequence) {
  const LanguageModel m = model_of(config_of(false, 0, attn::RopeLayout::interleaved), 45);
  const Index B = 4, n = 9;
  const LanguageModelBatch batch = batch_of(B, n, m.vocab(), 46);
  attn::LanguageModelCache cache;
  const attn::Matrix& logits = attn::language_model_forward_batch(m, batch.inputs, cache);
  ASSERT_EQ(logits.rows(), B * n);
  double summed_loss = 0;
  for (Index b = 0; b < B; ++b) {
    const std::span<const int> ids(batch.inputs.row(b).data(), static_cast<std::size_t>(n));
    const attn::Matrix alone = attn::language_model_forward(m, ids);  // [n x V]
    EXPECT_LT((logits.middleRows(b * n, n) - alone).cwiseAbs().maxCoeff(), 1e-5) << "window " << b;
    const std::span<const int> targets(batch.targets.row(b).data(), static_cast<std::size_t>(n));
    summed_loss += attn::cross_entropy(alone, targets).loss;
  }
  // The batch's loss is the mean over all B n positions: with windows of one length, the mean
  // of the windows' means (float cross-entropies accumulated in double; 1e-5 as above).
  const attn::LanguageModelStep step = attn::language_model_loss(m, batch, nullptr);
  EXPECT_NEAR(step.loss, summed_loss / static_cast<double>(B), 1e-5);
  EXPECT_EQ(step.count, B * n);
}

// Changing window 1's tokens leaves window 0's logits exactly as they were: nothing crosses
// between windows (positions restart at 0 in each and each attends within itself).
TEST(LanguageModelBatch, NoWindowReadsAnother) {
  const LanguageModel m = model_of(config_of(false, 0, attn::RopeLayout::interleaved), 47);
  LanguageModelBatch batch = batch_of(2, 9, m.vocab(), 48);
  attn::LanguageModelCache c1, c2;
  const attn::Matrix before = attn::language_model_forward_batch(m, batch.inputs, c1);
  for (Index i = 0; i < 9; ++i) batch.inputs(1, i) = (batch.inputs(1, i) + 1) % 7;
  const attn::Matrix after = attn::language_model_forward_batch(m, batch.inputs, c2);
  EXPECT_TRUE(identical(before.topRows(9), after.topRows(9)));
  EXPECT_FALSE(identical(before.bottomRows(9), after.bottomRows(9)));
}

// The (window, head) attentions run on any number of threads, each writing its own block, and
// every sum over rows is one product: the loss and every gradient are the same bits for 1, 2
// and 3 threads. Windows of 40 tokens and 6 of them make the work worth a team, so the threads
// really run (below kThreadedFlops the loop would stay on one thread whatever is asked).
TEST(LanguageModelBatch, EveryThreadCountGivesTheSameBits) {
  LanguageModelConfig config = config_of(false, 0, attn::RopeLayout::interleaved);
  config.context = 40;
  config.d_model = 32;
  const LanguageModel m = model_of(config, 49);
  const LanguageModelBatch batch = batch_of(6, 40, m.vocab(), 50);
  LanguageModel g1 = attn::zeros_like(m);
  const attn::LanguageModelStep s1 = attn::language_model_loss(m, batch, &g1, nullptr, false, 1);
  for (int threads : {2, 3}) {
    LanguageModel g = attn::zeros_like(m);
    const attn::LanguageModelStep s =
        attn::language_model_loss(m, batch, &g, nullptr, false, threads);
    EXPECT_EQ(s.loss, s1.loss) << threads << " threads";
    EXPECT_TRUE(same_gradients(g, g1)) << threads << " threads";
  }
}

// C. Bad input: named, and the gradients untouched.
TEST(LanguageModelBatch, BadInputIsRefusedBeforeAnyGradientMoves) {
  const LanguageModel m = model_of(config_of(false, 0, attn::RopeLayout::interleaved), 51);
  LanguageModel g = attn::zeros_like(m);
  const LanguageModel zero = attn::zeros_like(m);
  LanguageModelBatch too_long = batch_of(2, 10, m.vocab(), 52);  // context 9
  EXPECT_NE(message_of([&] {
              attn::language_model_loss(m, too_long, &g);
            }).find("longer than the context of 9"),
            std::string::npos);
  LanguageModelBatch bad_target = batch_of(2, 5, m.vocab(), 53);
  bad_target.targets(1, 3) = 7;
  EXPECT_NE(message_of([&] {
              attn::language_model_loss(m, bad_target, &g);
            }).find("target id 7 in row 1 at position 3"),
            std::string::npos);
  LanguageModelBatch mismatched = batch_of(2, 5, m.vocab(), 54);
  mismatched.targets = attn::TokenIds::Zero(2, 4);
  EXPECT_NE(message_of([&] {
              attn::language_model_loss(m, mismatched, &g);
            }).find("one target per input position"),
            std::string::npos);
  EXPECT_TRUE(same_gradients(g, zero));
  LanguageModel self = m;
  EXPECT_NE(message_of([&] {
              attn::language_model_loss(self, batch_of(1, 3, 7, 55), &self);
            }).find("shares memory"),
            std::string::npos);
}

}  // namespace test_language_model_training
