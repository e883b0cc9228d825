// The decoder-only language model of chapters 11 and 12 (attn/models/language_model.hpp):
// generation with a KV cache against recomputing every token, the window's reach through the
// layers, the two arithmetics, and bad input.
//
// Where the expected values come from (never from this program's output):
//   A. Identities to the bit (attn_test::identical): the cached run and the uncached one
//      compute the same rows with the same arithmetic (Arithmetic::rows), so their logits and
//      tokens must be the same bits; a logit that must not depend on a token is computed before
//      and after changing it.
//   B. Each identity's neighbour that must NOT hold is checked too (the token just inside the
//      window's reach does move the logit), so that no identity holds by accident.
//   C. The arithmetic of a window: after L layers of windows of W keys, position i reads
//      positions i - L (W - 1) .. i and no earlier one.
#include "attn/core/random.hpp"
#include "attn/models/generation.hpp"
#include "attn/models/language_model.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace test_language_model {

using attn::Arithmetic;
using attn::Index;
using attn::LanguageModel;
using attn::LanguageModelConfig;
using attn::Matrix;
using attn_test::identical;
using attn_test::message_of;

// d_model 24: a row of 96 bytes, so rows of a matrix are not all 64-byte aligned and the
// per-row products meet unaligned rows (an alignment-dependent kernel would break the identity).
LanguageModelConfig small_config(Index window) {
  return {.vocab = 11,
          .d_model = 24,
          .heads = 4,
          .kv_heads = 2,
          .d_ff = 40,
          .layers = 2,
          .context = 40,
          .window = window};
}

LanguageModel small_model(const LanguageModelConfig& config, std::uint64_t seed = 3) {
  attn::Rng rng(seed);
  return attn::language_model_init(rng, config);
}

std::vector<int> random_ids(Index n, Index vocab, std::uint64_t seed) {
  attn::Rng rng(seed);
  std::vector<int> ids(static_cast<std::size_t>(n));
  for (int& id : ids) id = static_cast<int>(rng.next_u64() % static_cast<std::uint64_t>(vocab));
  return ids;
}

// Greedy generation with the cache: the prompt's logits, then one row per new token.
struct Generation {
  std::vector<int> tokens;
  Matrix last_logits;  // [steps x V]: the logits each new token was chosen from
};

Generation generate_cached(const LanguageModel& model, std::vector<int> tokens, Index steps,
                           attn::DecodeState& state) {
  Generation run;
  run.last_logits.resize(steps, model.vocab());
  Matrix logits = attn::language_model_prefill(model, tokens, state, Arithmetic::rows);
  Matrix row = logits.bottomRows(1);  // [1 x V]
  for (Index s = 0; s < steps; ++s) {
    run.last_logits.row(s) = row;
    tokens.push_back(attn::greedy_token<float>(row));
    if (s + 1 < steps) row = attn::language_model_decode(model, tokens.back(), state);
  }
  run.tokens = tokens;
  return run;
}

// Greedy generation without a cache, as nanoGPT's generate: the whole sequence again per token.
Generation generate_uncached(const LanguageModel& model, std::vector<int> tokens, Index steps) {
  Generation run;
  run.last_logits.resize(steps, model.vocab());
  for (Index s = 0; s < steps; ++s) {
    const Matrix logits = attn::language_model_forward(model, tokens, Arithmetic::rows);
    run.last_logits.row(s) = logits.bottomRows(1);
    tokens.push_back(attn::greedy_token<float>(logits.bottomRows(1)));
  }
  run.tokens = tokens;
  return run;
}

// ---- A. The cache changes nothing --------------------------------------------------------------

class CachedGeneration : public ::testing::TestWithParam<Index> {};  // the window, 0: none

TEST_P(CachedGeneration, EqualsRecomputingEveryTokenBitForBit) {
  const LanguageModel model = small_model(small_config(GetParam()));
  const std::vector<int> prompt = random_ids(6, model.vocab(), 11);
  attn::DecodeState state = attn::make_decode_state(model);
  const Index steps = 30;  // 36 tokens: with W = 5 the rolling cache wraps six times
  const Generation cached = generate_cached(model, prompt, steps, state);
  const Generation uncached = generate_uncached(model, prompt, steps);
  EXPECT_TRUE(identical(cached.last_logits, uncached.last_logits));
  EXPECT_EQ(cached.tokens, uncached.tokens);
  EXPECT_EQ(state.next_position(), 6 + steps - 1);  // the last chosen token was never fed back
}

TEST_P(CachedGeneration, ADecodeStepEqualsTheForwardRowOfItsPosition) {
  // Teacher forcing: feed a fixed sequence token by token; row t of the logits must be the
  // forward pass's row t, for every t, also after the window has wrapped.
  const LanguageModel model = small_model(small_config(GetParam()));
  const std::vector<int> ids = random_ids(23, model.vocab(), 12);
  const Matrix full = attn::language_model_forward(model, ids, Arithmetic::rows);  // [23 x V]
  attn::DecodeState state = attn::make_decode_state(model);
  const Matrix first = attn::language_model_prefill(model, std::span<const int>(ids).first(1),
                                                    state, Arithmetic::rows);
  EXPECT_TRUE(identical(first, full.topRows(1)));
  for (std::size_t t = 1; t < ids.size(); ++t) {
    const Matrix row = attn::language_model_decode(model, ids[t], state);
    EXPECT_TRUE(identical(row, full.row(static_cast<Index>(t)))) << "position " << t;
  }
}

TEST_P(CachedGeneration, AClearedStateDecodesANewSequenceAsAFreshOne) {
  // The "position pointer not reset" bug: a second sequence must start at position 0.
  const LanguageModel model = small_model(small_config(GetParam()));
  attn::DecodeState reused = attn::make_decode_state(model);
  (void)generate_cached(model, random_ids(9, model.vocab(), 13), 12, reused);
  reused.clear();
  attn::DecodeState fresh = attn::make_decode_state(model);
  const std::vector<int> prompt = random_ids(4, model.vocab(), 14);
  const Generation a = generate_cached(model, prompt, 10, reused);
  const Generation b = generate_cached(model, prompt, 10, fresh);
  EXPECT_TRUE(identical(a.last_logits, b.last_logits));
}

INSTANTIATE_TEST_SUITE_P(Windows, CachedGeneration, ::testing::Values(0, 1, 5, 40),
                         [](const auto& info) { return "W" + std::to_string(info.param); });

TEST(CachedGenerationState, AWindowKeepsWRowsWhateverTheLength) {
  const LanguageModel model = small_model(small_config(5));
  attn::DecodeState state = attn::make_decode_state(model);
  // 2 layers x (K and V) x 5 rows x g d_k = 2 x 6 = 12 floats.
  EXPECT_EQ(state.bytes(), std::size_t{2 * 2 * 5 * 12 * sizeof(float)});
  (void)generate_cached(model, random_ids(6, model.vocab(), 15), 20, state);
  EXPECT_EQ(state.size(), 5);
  EXPECT_EQ(state.bytes(), std::size_t{2 * 2 * 5 * 12 * sizeof(float)});
}

// ---- C. How far a window reaches through the layers
// ----------------------------------------------

TEST(LanguageModelWindow, PositionIReadsExactlyTheLastLTimesWMinusOnePlusOneTokens) {
  // Two layers of W = 3: one layer moves information W - 1 = 2 positions forward, two layers 4.
  // Logit row i depends on tokens i - 4 .. i. Token p = i - 5 must not move row i (to the bit),
  // token p = i - 4 must.
  const Index W = 3, L = 2, reach = L * (W - 1);
  const LanguageModel model = small_model(small_config(W));
  const std::vector<int> ids = random_ids(20, model.vocab(), 16);
  const Matrix before = attn::language_model_forward(model, ids, Arithmetic::rows);
  const Index i = 15;
  for (const Index p : {i - reach - 1, i - reach}) {
    std::vector<int> changed = ids;
    changed[static_cast<std::size_t>(p)] = (ids[static_cast<std::size_t>(p)] + 1) % 11;
    const Matrix after = attn::language_model_forward(model, changed, Arithmetic::rows);
    if (p < i - reach) {
      EXPECT_TRUE(identical(after.row(i), before.row(i))) << "token " << p << " reached row " << i;
    } else {
      EXPECT_FALSE(identical(after.row(i), before.row(i))) << "token " << p << " did not";
    }
  }
}

TEST(LanguageModelWindow, ThePastNeverMovesAnEarlierRow) {
  // Causality: changing token p changes no row before p, in either arithmetic.
  const LanguageModel model = small_model(small_config(0));
  const std::vector<int> ids = random_ids(12, model.vocab(), 17);
  std::vector<int> changed = ids;
  changed[7] = (ids[7] + 3) % 11;
  for (const Arithmetic a : {Arithmetic::rows, Arithmetic::blocked}) {
    const Matrix x = attn::language_model_forward(model, ids, a);
    const Matrix y = attn::language_model_forward(model, changed, a);
    EXPECT_TRUE(identical(x.topRows(7), y.topRows(7)));
    EXPECT_FALSE(identical(x.row(7), y.row(7)));
  }
}

// ---- The two arithmetics ------------------------------------------------------------------------

TEST(LanguageModelArithmetic, BlockedEqualsRowsToRounding) {
  // GEMMs sum each product's E or d_ff terms in another order than one row's product: each
  // differs by a few float ulps of its terms' size, and two layers and the head carry that to
  // the logits. 1e-5 of the largest logit is about 80 float ulps of it: room for the ~10
  // products in the path, each a few ulps, while an error in the blocked path (a wrong mask, a
  // missing RoPE) moves logits by their own size. Measured here: about 1e-7 relative.
  for (const Index window : {0, 5}) {
    const LanguageModel model = small_model(small_config(window));
    const std::vector<int> ids = random_ids(33, model.vocab(), 18);
    const Matrix rows = attn::language_model_forward(model, ids, Arithmetic::rows);
    const Matrix blocked = attn::language_model_forward(model, ids, Arithmetic::blocked);
    EXPECT_LE(attn::max_abs_diff(rows, blocked), 1e-5 * rows.cwiseAbs().maxCoeff())
        << "window " << window;
  }
}

TEST(LanguageModelArithmetic, ABlockedPrefillThenDecodingStaysWithinRounding) {
  const LanguageModel model = small_model(small_config(5));
  const std::vector<int> ids = random_ids(20, model.vocab(), 19);
  const Matrix full = attn::language_model_forward(model, ids, Arithmetic::rows);
  attn::DecodeState state = attn::make_decode_state(model);
  const Matrix prompt = attn::language_model_prefill(model, std::span<const int>(ids).first(12),
                                                     state, Arithmetic::blocked);
  double worst = attn::max_abs_diff(prompt, full.topRows(12));
  for (std::size_t t = 12; t < ids.size(); ++t) {
    worst = std::max(worst, attn::max_abs_diff(attn::language_model_decode(model, ids[t], state),
                                               full.row(static_cast<Index>(t))));
  }
  EXPECT_LE(worst, 1e-5 * full.cwiseAbs().maxCoeff());  // as BlockedEqualsRowsToRounding
  EXPECT_GT(worst, 0.0);  // the two arithmetics do differ: the exact identity needs rows
}

TEST(LanguageModelInit, TiedEmbeddingsUseTheTokenTableAsTheHead) {
  LanguageModelConfig c = small_config(0);
  c.tied_embeddings = true;
  const LanguageModel model = small_model(c);
  EXPECT_EQ(model.lm_head.weight.size(), 0);
  EXPECT_EQ(&model.head_weight(), &model.tok_embed);
  EXPECT_EQ(model.rope.dim, 6);  // d_k = 24 / 4
  EXPECT_EQ(model.rope.positions, 40);
}

// ---- Bad input ----------------------------------------------------------------------------------

TEST(LanguageModelErrors, ConfigurationsThatCannotWorkAreRefusedByName) {
  auto refused = [](LanguageModelConfig c) {
    return message_of([&] {
      attn::Rng rng(1);
      (void)attn::language_model_init(rng, c);
    });
  };
  LanguageModelConfig c = small_config(0);
  c.kv_heads = 3;
  EXPECT_NE(refused(c).find("kv_heads"), std::string::npos) << refused(c);
  c = small_config(0);
  c.heads = 8;  // d_k = 3: odd
  EXPECT_NE(refused(c).find("odd"), std::string::npos) << refused(c);
  c = small_config(-1);
  EXPECT_NE(refused(c).find("window"), std::string::npos) << refused(c);
  c = small_config(0);
  c.context = 0;
  EXPECT_NE(refused(c).find("context"), std::string::npos) << refused(c);
}

TEST(LanguageModelErrors, DecodingOutOfOrderIsLoud) {
  const LanguageModel model = small_model(small_config(0));
  attn::DecodeState state = attn::make_decode_state(model);
  EXPECT_NE(message_of([&] {
              (void)attn::language_model_decode(model, 1, state);
            }).find("before prefill"),
            std::string::npos);
  const std::vector<int> prompt{1, 2, 3};
  (void)attn::language_model_prefill(model, prompt, state);
  EXPECT_NE(message_of([&] {
              (void)attn::language_model_prefill(model, prompt, state);
            }).find("clear() the state"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              (void)attn::language_model_decode(model, 11, state);
            }).find("outside the vocabulary"),
            std::string::npos);
  EXPECT_EQ(state.next_position(), 3);  // the refusals changed nothing
  const LanguageModel other = small_model(small_config(5));
  EXPECT_NE(message_of([&] {
              (void)attn::language_model_decode(other, 1, state);
            }).find("not made for this model"),
            std::string::npos);
}

TEST(LanguageModelErrors, TheContextIsAHardLimit) {
  LanguageModelConfig c = small_config(0);
  c.context = 5;
  const LanguageModel model = small_model(c);
  attn::DecodeState state = attn::make_decode_state(model);
  EXPECT_NE(message_of([&] {
              (void)attn::language_model_forward(model, std::vector<int>(6, 1));
            }).find("more than the context"),
            std::string::npos);
  (void)attn::language_model_prefill(model, std::vector<int>(5, 1), state);
  EXPECT_NE(message_of([&] {
              (void)attn::language_model_decode(model, 1, state);
            }).find("past the context"),
            std::string::npos);
}

TEST(LanguageModelErrors, GenerationRefusesBadSamplingOptionsByItsOwnName) {
  const LanguageModel model = small_model(small_config(0));
  const std::vector<int> prompt = {1, 2, 3};
  attn::Rng rng(4);
  const attn::Rng before = rng;
  EXPECT_EQ(message_of([&] {
              attn::language_model_generate(model, prompt, 5, {.temperature = -1.0}, rng);
            }),
            "language_model_generate: temperature -1: it must be finite and >= 0 (0 is greedy)");
  EXPECT_EQ(
      message_of([&] { attn::language_model_generate(model, prompt, 5, {.top_k = -2}, rng); }),
      "language_model_generate: top_k -2: it must be >= 0 (0 keeps every id)");
  EXPECT_EQ(rng.state().words, before.state().words);  // refused before any draw
  EXPECT_EQ(attn::language_model_generate(model, prompt, 5, {.temperature = 0.5}, rng).size(), 5u);
}

}  // namespace test_language_model
