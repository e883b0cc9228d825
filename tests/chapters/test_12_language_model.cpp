// Chapter 12 as a program (its --quick set, seconds): training resumes exactly from a
// checkpoint, --load samples without training, generation through the cache equals
// recomputation, the knobs' refusals. The corpus itself: test_12_corpus.cpp; the model's
// gradients against PyTorch: tests/attn/models/test_language_model_torch.cpp.
#include "chapter_run.hpp"

#include "attn/core/random.hpp"
#include "attn/models/generation.hpp"
#include "attn/models/language_model.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace test_12_language_model {

namespace fs = std::filesystem;
using attn_test::contains;
using attn_test::Output;

const attn_test::ChapterRun chapter("12_language_model");

// Every .npy of a checkpoint folder, by name: what two runs must agree on to the byte.
std::vector<std::pair<std::string, std::string>> arrays_of(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> arrays;
  for (const std::string& name : attn_test::listing(dir)) {
    if (name.ends_with(".npy")) arrays.emplace_back(name, attn_test::read_file(dir / name));
  }
  return arrays;
}

// llm.c's and PyTorch's promise of a checkpoint: a run of 60 steps, and a run that stops after
// 30, saves, loads and trains 30 more, end with the same weights and the same Adam moments,
// byte for byte (the batches' stream, Adam's step and moments and the schedule's position all
// travel in the checkpoint; one of them missing moves every weight). Not vacuous: the run that
// stopped at 30 has other weights.
TEST(LanguageModelChapter, TrainingResumesExactlyFromACheckpoint) {
  const fs::path dir = chapter.scratch("resume");
  const std::string quick = "--quick --no-plots --steps 60 ";
  const Output whole = chapter.run(quick + "--save " + (dir / "whole").string(), dir);
  ASSERT_EQ(whole.code, 0) << whole.err;
  const Output half = chapter.run(quick + "--stop-at 30 --save " + (dir / "half").string(), dir);
  ASSERT_EQ(half.code, 0) << half.err;
  const Output rest = chapter.run(
      quick + "--load " + (dir / "half").string() + " --save " + (dir / "rest").string(), dir);
  ASSERT_EQ(rest.code, 0) << rest.err;
  EXPECT_TRUE(contains(rest.out, "training goes on from step 31 to step 60")) << rest.out;
  const auto a = arrays_of(dir / "whole"), b = arrays_of(dir / "rest"), c = arrays_of(dir / "half");
  ASSERT_GT(a.size(), 20u);  // weights, moments and the vocabulary
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

// --merges: byte-pair merges learned on the training text, the loss still per character; a
// checkpoint of a run with merges loads only with the same merges (its vocabulary is theirs).
TEST(LanguageModelChapter, MergesLearnTokensAndACheckpointKeepsThem) {
  const fs::path dir = chapter.scratch("merges");
  const Output r =
      chapter.run("--quick --no-plots --merges 24 --save " + (dir / "m").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "24 merges learned: 87 tokens")) << r.out;  // 63 characters + 24
  EXPECT_TRUE(contains(r.out, "nats per character")) << r.out;
  EXPECT_FALSE(contains(r.out, "What the heads learned")) << r.out;  // the scores read characters
  const Output again =
      chapter.run("--quick --no-plots --merges 24 --load " + (dir / "m").string(), dir);
  EXPECT_EQ(again.code, 0) << again.err;
  const Output other = chapter.run("--quick --no-plots --load " + (dir / "m").string(), dir);
  EXPECT_EQ(other.code, 2);
  EXPECT_TRUE(contains(other.err, "was trained with --merges 24, but this run has --merges 0"))
      << other.err;
}

// --load alone trains nothing: it writes with the loaded weights, and says so.
TEST(LanguageModelChapter, LoadAloneSamplesWithoutTraining) {
  const fs::path dir = chapter.scratch("load_only");
  ASSERT_EQ(chapter.run("--quick --no-plots --save " + (dir / "m").string(), dir).code, 0);
  const Output r = chapter.run("--quick --no-plots --load " + (dir / "m").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "no training, the model writes as it is")) << r.out;
  EXPECT_FALSE(contains(r.out, "Training: every position")) << r.out;
  EXPECT_TRUE(contains(r.out, "after 60 steps:")) << r.out;
}

// The knobs' refusals: exit 2, the problem named, nothing trained.
TEST(LanguageModelChapter, BadKnobsAreUsageErrors) {
  const fs::path dir = chapter.scratch("bad");
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--quick --heads 3", "must divide --d-model"},
           {"--quick --kv-heads 3", "--kv-heads 3 must divide --heads 4"},
           {"--quick --prompt '#And'", "'#' never occurs"},
           {"--quick --prompt ''", "--prompt is empty"},
           {"--quick --batch 2 --repeated 3", "--repeated 3 is more than the 2 windows"},
           {"--quick --stop-at 61", "--stop-at 61 is past the end of the schedule"},
           {"--quick --load " + (dir / "nothing").string(), "--load"}}) {
    const Output r = chapter.run(args, dir);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, says)) << args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

// A learner's own corpus too short for a window in its held-out tenth is refused by name.
TEST(LanguageModelChapter, ACorpusTooShortForTheContextIsRefused) {
  const fs::path dir = chapter.scratch("short_corpus");
  const fs::path file = dir / "tiny.txt";
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("In the beginning was a very short text.\n", f);
  std::fclose(f);
  const Output r = chapter.run("--quick --prompt In --corpus " + file.string(), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "fewer than a window and the character after it")) << r.err;
}

// Generation through the KV cache and by recomputing every token compute the same logits with
// the same arithmetic (Arithmetic::rows), so they write the same tokens: greedily, and at a
// temperature for a seed, also past the context (where both restart at the last C/2 tokens).
// Not vacuous: a different seed writes other tokens.
TEST(LanguageModelGeneration, CachedAndRecomputedWriteTheSameTokens) {
  attn::Rng init(7);
  const attn::LanguageModel model = attn::language_model_init(init, {.vocab = 13,
                                                                     .d_model = 16,
                                                                     .heads = 4,
                                                                     .kv_heads = 2,
                                                                     .d_ff = 32,
                                                                     .layers = 2,
                                                                     .context = 12,
                                                                     .embedding_std = 1.0});
  const std::vector<int> prompt = {1, 5, 2};
  for (const attn::SamplingOptions opts : {attn::SamplingOptions{.temperature = 0.0, .top_k = 0},
                                           {.temperature = 1.0, .top_k = 0},
                                           {.temperature = 0.7, .top_k = 4}}) {
    attn::Rng a(11), b(11);
    const std::vector<int> cached = attn::language_model_generate(model, prompt, 40, opts, a);
    const std::vector<int> recomputed =
        attn::language_model_generate(model, prompt, 40, opts, b, attn::Generation::recomputed);
    ASSERT_EQ(cached.size(), 40u);
    EXPECT_EQ(cached, recomputed) << "temperature " << opts.temperature;
  }
  attn::Rng a(11), c(12);
  const attn::SamplingOptions hot{.temperature = 1.0, .top_k = 0};
  EXPECT_NE(attn::language_model_generate(model, prompt, 40, hot, a),
            attn::language_model_generate(model, prompt, 40, hot, c));
}

}  // namespace test_12_language_model
