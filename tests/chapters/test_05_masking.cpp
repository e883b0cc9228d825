// Chapter 05 as a program: note 001's batch end to end through --dump (the input rebuilt from
// the formulas, the weights recomputed in double), the masks it builds for every --mask,
// the printed identities, no NaN under any combination of knobs, and usage errors.
#include "chapter_run.hpp"

#include "attn/core/batch.hpp"
#include "course/npy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace test_05_masking {

namespace fs = std::filesystem;
using attn::Batch;
using attn::Index;
using attn_test::contains;
using attn_test::Output;

const attn_test::ChapterRun chapter("05_masking");

Batch load3(const fs::path& dir, const std::string& name) {
  return course::read_npy(dir / (name + ".npy")).to_batch();
}

// Note 001's batch and which keys are padding (id 0).
const int kIds[2][5] = {{5, 2, 1, 0, 0}, {1, 3, 1, 4, 0}};

TEST(Chapter05, Note001BatchEndToEnd) {
  const fs::path dir = chapter.scratch("note001");
  const Output r = chapter.run("--no-plots --dump " + (dir / "d").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const Batch X = load3(dir / "d", "X"), W = load3(dir / "d", "weights"),
              out = load3(dir / "d", "out"), allowed = load3(dir / "d", "allowed");
  const attn::MatrixD table = attn_test::load(dir / "d", "embedding_table");  // [10 x 512]
  ASSERT_EQ(X.shape(), (std::vector<std::size_t>{2, 5, 512}));
  ASSERT_EQ(W.shape(), (std::vector<std::size_t>{2, 5, 5}));
  ASSERT_EQ(out.shape(), (std::vector<std::size_t>{2, 5, 512}));
  ASSERT_EQ(table.rows(), 10);

  for (Index b = 0; b < 2; ++b) {
    // X = table[ids] + PE, with PE from the paper's formula evaluated here in double. Each
    // entry is one float addition of two O(1) floats: within 1 ulp of 4 (4.8e-7) of the truth.
    for (Index i = 0; i < 5; ++i) {
      for (Index c = 0; c < 512; ++c) {
        const double angle = static_cast<double>(i) / std::pow(10000.0, (c - c % 2) / 512.0);
        const double pe = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
        ASSERT_NEAR(X[b](i, c), table(kIds[b][i], c) + pe, 1e-6) << b << " " << i << " " << c;
      }
    }
    // The padding mask from the ids: key j is allowed iff ids[b][j] != 0, for every query.
    for (Index i = 0; i < 5; ++i) {
      for (Index j = 0; j < 5; ++j) {
        EXPECT_EQ(allowed[b](i, j), kIds[b][j] != 0 ? 1.0f : 0.0f) << b << " " << i << " " << j;
      }
    }

    // Weights recomputed in double from the dumped X: softmax(X X^T / 8) over allowed keys.
    // The scores are up to ~110 and the float32 dot products of 512 terms carry rounding of
    // ~sqrt(512) * 2^-24 * 110 ~ 1.5e-4 at worst against double; a weight w moves by at most
    // w(1-w) times that, so 1e-4 bounds the difference of weights and (|x| < 5) outputs.
    const attn::MatrixD x = X[b].cast<double>();
    const attn::MatrixD scores = x * x.transpose() / 8.0;  // [5 x 5]
    for (Index i = 0; i < 5; ++i) {
      double max = -INFINITY, sum = 0.0;
      for (Index j = 0; j < 5; ++j) {
        if (kIds[b][j] != 0) max = std::max(max, scores(i, j));
      }
      attn::MatrixD w = attn::MatrixD::Zero(1, 5);
      for (Index j = 0; j < 5; ++j) {
        if (kIds[b][j] != 0) sum += (w(0, j) = std::exp(scores(i, j) - max));
      }
      w /= sum;
      for (Index j = 0; j < 5; ++j) {
        if (kIds[b][j] == 0) {
          EXPECT_EQ(W[b](i, j), 0.0f) << "a padded key must get weight exactly 0";
        } else {
          EXPECT_NEAR(W[b](i, j), w(0, j), 1e-4) << b << " " << i << " " << j;
        }
      }
      const attn::MatrixD expected_out = w * x;  // [1 x 512]
      EXPECT_LT((out[b].row(i).cast<double>() - expected_out).cwiseAbs().maxCoeff(), 1e-4);
    }
  }
  EXPECT_TRUE(contains(r.out, "largest weight on a blocked key: 0\n"));
  EXPECT_TRUE(contains(r.out, "X [2, 5, 512]"));
  EXPECT_TRUE(contains(r.out, "out [2, 5, 512]"));
}

TEST(Chapter05, MaskKindsCombinePaddingWithTheShape) {
  // --mask causal and --mask window are the padding mask AND the shape, by hand here.
  const fs::path dir = chapter.scratch("kinds");
  for (const std::string kind : {"none", "pad", "causal", "window"}) {
    const fs::path d = dir / kind;
    const Output r =
        chapter.run("--no-plots --mask " + kind + " --window 1 --dump " + d.string(), dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const Batch allowed = load3(d, "allowed"), W = load3(d, "weights");
    for (Index b = 0; b < 2; ++b) {
      for (Index i = 0; i < 5; ++i) {
        for (Index j = 0; j < 5; ++j) {
          bool expect = true;
          if (kind != "none") expect = kIds[b][j] != 0;
          if (kind == "causal") expect = expect && j <= i;
          if (kind == "window") expect = expect && std::abs(i - j) <= 1;
          EXPECT_EQ(allowed[b](i, j), expect ? 1.0f : 0.0f) << kind << " " << b << i << j;
          if (!expect) {
            EXPECT_EQ(W[b](i, j), 0.0f) << kind;
          }
        }
      }
    }
  }
}

TEST(Chapter05, PrintsTheIdentitiesItClaims) {
  const fs::path dir = chapter.scratch("claims");
  const Output r = chapter.run("--no-plots", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  // Each of these is an exact identity, so the printed difference must be exactly 0.
  EXPECT_TRUE(
      contains(r.out, "max |tril way - additive way| = 0,  max |either - attn::attention| = 0\n"));
  EXPECT_TRUE(contains(r.out, "outputs 1-4 move by 0, output 5 by"));
  EXPECT_TRUE(contains(r.out, "ordinary rows: max |weights(-inf) - weights(-1e9)| = 0\n"));
  EXPECT_TRUE(contains(r.out, "weights all 0.20, out = mean of V"));  // 1/5 for 5 keys
  EXPECT_TRUE(contains(r.out, "fill -inf, softmax without a guard:  weights NaN"));
  EXPECT_TRUE(contains(r.out, "fill -inf, attn::attention:          weights all 0, out all 0\n"));
  // The sidebar's bug must show: the dropped mask leaks weight onto <pad> keys.
  EXPECT_FALSE(contains(r.out, "largest weight on a <pad> key: 0 "));
}

TEST(Chapter05, NoNaNUnderAnyKnobs) {
  // Every mask and fill, with a sentence that is all padding (every key blocked), in a batch
  // of one and of two: the dumps are finite and nothing prints as nan.
  const fs::path dir = chapter.scratch("every_knob");
  int runs = 0;
  for (const std::string mask : {"none", "pad", "causal", "window"}) {
    for (const std::string fill : {"neg-inf", "-1e9"}) {
      for (const std::string ids : {"0,0,0/1,2,3", "7", "0", "1,0,0,0,0,0,0,0"}) {
        const fs::path d = dir / std::to_string(runs++);
        const Output r =
            chapter.run("--no-plots --d-model 8 --d-k 8 --window 0 --mask " + mask + " --fill " +
                            fill + " --ids " + ids + " --dump " + d.string(),
                        dir);
        ASSERT_EQ(r.code, 0) << mask << " " << fill << " " << ids << "\n" << r.err;
        EXPECT_FALSE(contains(r.out, "nan")) << mask << " " << fill << " " << ids;
        for (const char* name : {"weights", "out"}) {
          EXPECT_TRUE(load3(d, name).data().allFinite()) << name << " " << mask << " " << fill;
        }
        // A sentence of padding only: zeros with -inf, the uniform average with -1e9.
        if (ids == "0,0,0/1,2,3" && mask != "none") {
          const Batch W = load3(d, "weights");
          for (Index j = 0; j < 3; ++j) {
            EXPECT_EQ(W[0](0, j), fill == "neg-inf" ? 0.0f : 1.0f / 3.0f) << mask << " " << fill;
          }
        }
      }
    }
  }
}

TEST(Chapter05, BadOptionsAreUsageErrors) {
  const fs::path dir = chapter.scratch("bad");
  for (const std::string args :
       {"--mask diagonal", "--window -1", "--window 65", "--fill 0", "--ids 1,a", "--ids 1,2/3",
        "--ids ''", "--ids 1,,2", "--ids -3", "--ids 10", "--vocab 1", "--d-model 0", "--d-k 0",
        "--ids 5 --vocab 5"}) {
    const Output r = chapter.run("--no-plots " + args, dir);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(contains(r.err, "Usage:")) << args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << args << ": nothing runs before the options are checked";
  }
}

TEST(Chapter05, DrawsItsFigures) {
  const fs::path dir = chapter.scratch("figures");
  const Output r = chapter.run("--out " + (dir / "plots").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"05_batch_weights", "05_masks"}) {
    for (const char* ext : {".png", ".gp", ".dat"}) {
      EXPECT_TRUE(fs::is_regular_file(dir / "plots" / (std::string(name) + ext))) << name << ext;
    }
  }
}

TEST(Chapter05, NoticesFollowTheIdsAndKnobs) {
  const fs::path dir = chapter.scratch("notices");
  // One sentence, one word: no padding to share an embedding, nothing to block.
  {
    const Output r = chapter.run("--no-plots --ids 1", dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string text = attn_test::unwrapped(r.out);
    EXPECT_FALSE(contains(text, "both <pad> rows of sentence 1 share one embedding"));
    EXPECT_TRUE(contains(text, "sentence 1 has no <pad>"));
    EXPECT_FALSE(contains(text, "columns are blocked, not rows"));
    EXPECT_TRUE(contains(text, "--mask pad, but nothing is blocked"));
    EXPECT_FALSE(contains(text, "blocked keys get weight exactly 0"));
  }
  // d_k = 16 is not d_model / 8 = 2, and 16 features leave words a real share of each other.
  {
    const Output r = chapter.run(
        "--no-plots --d-model 16 --d-k 16 --dump '" + (dir / "small").string() + "'", dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string text = attn_test::unwrapped(r.out);
    EXPECT_FALSE(contains(text, "d_k = 16 = d_model / 8"));
    EXPECT_TRUE(contains(text, "here d_k = 16 (--d-k) and d_model = 16"));
    const Batch W = load3(dir / "small", "weights");  // [2, 5, 5]
    double least_self = 1.0;  // sentence 1's words are positions 0, 1, 2 (ids 5, 2, 1)
    for (Index i = 0; i < 3; ++i) least_self = std::min(least_self, double{W[0](i, i)});
    ASSERT_LT(least_self, 0.99) << "16 features: a word shares its weight";
    EXPECT_FALSE(contains(text, "each word attends almost only to itself"));
    EXPECT_TRUE(contains(text, "a word keeps as little as"));
    // 16 = 128 / 8: there the note's relation holds and is printed.
    const Output ok = chapter.run("--no-plots --d-model 128 --d-k 16", dir);
    ASSERT_EQ(ok.code, 0) << ok.err;
    EXPECT_TRUE(contains(ok.out, "d_k = 16 = d_model / 8"));
  }
  // -1e9 and a sentence of padding only: its 3 queries spread 1/3 over 3 blocked keys, so
  // "blocked keys get weight exactly 0: exp(-inf) = 0" contradicted the number above it.
  {
    const Output r = chapter.run("--no-plots --fill -1e9 --ids 0,0,0/1,2,3", dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string text = attn_test::unwrapped(r.out);
    EXPECT_TRUE(contains(text, "largest weight on a blocked key: 0.333333"));
    EXPECT_FALSE(contains(text, "blocked keys get weight exactly 0: exp(-inf) = 0"));
    EXPECT_TRUE(contains(text, "the 3 queries with none spread the weight evenly over blocked "
                               "keys (0.333333 each)"));
    EXPECT_FALSE(contains(text, "Blocked weights are exactly 0, so blocked tokens cannot change"));
    EXPECT_FALSE(contains(text, "a padded query still looks at the real words (its output"));
  }
  // W = 3 around 5 tokens reaches every key: the window saves nothing there.
  {
    const Output r = chapter.run("--no-plots --window 3", dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string text = attn_test::unwrapped(r.out);
    EXPECT_FALSE(contains(text, "each row keeps at most 7 keys"));
    EXPECT_TRUE(contains(text, "W = 3 reaches all 5 keys from every query"));
  }
  // The default batch keeps every original statement, all true there.
  {
    const Output r = chapter.run("--no-plots", dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string text = attn_test::unwrapped(r.out);
    for (const char* line :
         {"both <pad> rows of sentence 1 share one embedding", "d_k = 64 = d_model / 8",
          "blocked keys get weight exactly 0: exp(-inf) = 0",
          "each word attends almost only to itself", "each row keeps at most 3 keys"}) {
      EXPECT_TRUE(contains(text, line)) << line;
    }
  }
  fs::remove_all(dir);
}

TEST(Chapter05, HelpStatesTheLimitsOfIds) {
  const fs::path dir = chapter.scratch("help");
  const Output r = chapter.run("--help", dir);
  ASSERT_EQ(r.code, 0);
  EXPECT_TRUE(contains(attn_test::unwrapped(r.out), "at most 16 sentences of at most 64 tokens"))
      << r.out;
  fs::remove_all(dir);
}

}  // namespace test_05_masking
