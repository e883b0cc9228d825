// Chapter 08 as a program: its dump reloads into the library as PyTorch names the parameters
// and reproduces the run bit for bit, the mask promises it prints are exact, the cost table
// follows the formulas, the graph mask keeps every weight on an edge, and usage errors.
#include "chapter_run.hpp"

#include "attn/core/batch.hpp"
#include "attn/layers/transformer.hpp"
#include "course/npy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace test_08_transformer_block {

namespace fs = std::filesystem;
using attn::AllowedBatch;
using attn::Batch;
using attn::Index;
using attn::Matrix;
using attn::RowVector;
using attn_test::contains;
using attn_test::Output;

const attn_test::ChapterRun chapter("08_transformer_block");

struct Dump {
  fs::path dir;
  course::NpyArray get(const std::string& name) const {
    return course::read_npy(dir / (name + ".npy"));
  }
  Matrix matrix(const std::string& name) const { return get(name).to_matrix(); }
  RowVector row(const std::string& name) const { return RowVector(get(name).to_matrix()); }
  attn::MultiHeadAttention mha(const std::string& p, Index heads) const {
    return attn::multi_head_from_pytorch(matrix(p + "in_proj_weight"), row(p + "in_proj_bias"),
                                         matrix(p + "out_proj_weight"), row(p + "out_proj_bias"),
                                         heads);
  }
  attn::FeedForward ff(const std::string& p) const {
    return {{matrix(p + "linear1_weight"), row(p + "linear1_bias")},
            {matrix(p + "linear2_weight"), row(p + "linear2_bias")}};
  }
  attn::LayerNorm norm(const std::string& p, int k) const {
    const std::string n = p + "norm" + std::to_string(k);
    return {row(n + "_weight"), row(n + "_bias"), 1e-5f};
  }
  AllowedBatch mask(const std::string& name) const {
    const Batch ones = get(name).to_batch();
    AllowedBatch m(ones.batch(), ones.rows(), ones.cols());
    m.data() = ones.data().array() != 0.0f;
    return m;
  }
};

TEST(Chapter08, DumpReloadsAndReproducesTheRunBitForBit) {
  for (const std::string args : {"", "--norm pre --layers 3 --heads 2 --d-model 8 --d-ff 16"}) {
    const fs::path dir = chapter.scratch("replay");
    const Output r = chapter.run("--no-plots " + args + " --dump " + (dir / "d").string(), dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const Dump d{dir / "d"};
    const Index H = static_cast<Index>(d.get("heads").data[0]);
    const attn::NormPlacement placement =
        d.get("norm_first").data[0] != 0.0 ? attn::NormPlacement::pre : attn::NormPlacement::post;
    std::vector<attn::EncoderLayer> encoder;
    std::vector<attn::DecoderLayer> decoder;
    for (int l = 0;; ++l) {
      const std::string e = "encoder_layers_" + std::to_string(l) + "_";
      if (!fs::exists(d.dir / (e + "norm1_weight.npy"))) break;
      encoder.push_back(
          {d.mha(e + "self_attn_", H), d.ff(e), d.norm(e, 1), d.norm(e, 2), placement});
      const std::string p = "decoder_layers_" + std::to_string(l) + "_";
      decoder.push_back({d.mha(p + "self_attn_", H), d.mha(p + "multihead_attn_", H), d.ff(p),
                         d.norm(p, 1), d.norm(p, 2), d.norm(p, 3), placement});
    }
    ASSERT_FALSE(encoder.empty());
    const AllowedBatch src = d.mask("src_allowed"), tgt = d.mask("tgt_allowed"),
                       cross = d.mask("cross_allowed");
    // need_weights, as the chapter runs them (it draws the weights): the plain path, whose
    // sums the tiled path orders differently in the last bits.
    const Batch memory = attn::encoder_forward(encoder, d.get("src_x").to_batch(),
                                               {.allowed = src, .need_weights = true});
    const Batch out =
        attn::decoder_forward(decoder, d.get("tgt_x").to_batch(), memory,
                              {.self_allowed = tgt, .cross_allowed = cross, .need_weights = true});
    // The same float operations in the same order on the same bits: equal to the last bit.
    const Batch memory_dumped = d.get("memory").to_batch(), out_dumped = d.get("out").to_batch();
    EXPECT_EQ(std::memcmp(memory.data().data(), memory_dumped.data().data(),
                          sizeof(float) * static_cast<std::size_t>(memory.data().size())),
              0)
        << args;
    EXPECT_EQ(std::memcmp(out.data().data(), out_dumped.data().data(),
                          sizeof(float) * static_cast<std::size_t>(out.data().size())),
              0)
        << args;
    // The masks are what the chapter says: source padding; target padding and causal.
    const int src_len[2] = {4, 6}, tgt_len[2] = {3, 5};
    for (Index b = 0; b < 2; ++b) {
      for (Index i = 0; i < 5; ++i) {
        for (Index j = 0; j < 5; ++j) EXPECT_EQ(tgt[b](i, j), j <= i && j < tgt_len[b]);
        for (Index j = 0; j < 6; ++j) EXPECT_EQ(cross[b](i, j), j < src_len[b]);
      }
    }
  }
}

TEST(Chapter08, PrintsItsShapesAndExactPromises) {
  const fs::path dir = chapter.scratch("claims");
  const Output r = chapter.run("--no-plots", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* piece :
       {"source ids [2 x 6] -> table[ids] + PE [2, 6, 32]\n",
        "target ids [2 x 5] -> table[ids] + PE [2, 5, 32]\n",
        "FFN hidden [2, 6, 64] -> FFN out [2, 6, 32] -> Add & Norm",
        "cross-attention (Q [2, 5, 32], K = V = memory [2, 6, 32]) [2, 5, 32]", "[2, 5, 10]",
        "outputs 1-4 move by 0, output 5 by", "real memory rows move by 0, decoder output by 0\n",
        "largest weight between nodes without an edge: 0\n"}) {
    EXPECT_TRUE(contains(r.out, piece)) << piece;
  }
}

TEST(Chapter08, CostTableFollowsTheFormulas) {
  const fs::path dir = chapter.scratch("costs");
  const Output r = chapter.run("--no-plots", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  // d = 512: RNN 2 n d^2, attention layer 4 n d^2 + 2 n^2 d, its n x n part 2 n^2 d.
  const double d = 512;
  for (const double n : {16.0, 1024.0, 16384.0}) {
    const auto g = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2g", v);
      return std::string(buf);
    };
    EXPECT_TRUE(contains(r.out, g(2 * n * d * d))) << n;
    EXPECT_TRUE(contains(r.out, g(4 * n * d * d + 2 * n * n * d))) << n;
    EXPECT_TRUE(contains(r.out, g(2 * n * n * d))) << n;
  }
  // The crossover the page quotes: 2 n^2 d = 4 n d^2 at n = 2d.
  EXPECT_TRUE(contains(r.out, "at n = 2d = 1024"));
}

TEST(Chapter08, BadOptionsAreUsageErrors) {
  const fs::path dir = chapter.scratch("bad");
  for (const std::string args : {"--heads 3", "--layers 0", "--layers 13", "--norm middle",
                                 "--d-ff 0", "--d-model 1", "--d-model 30 --heads 4"}) {
    const Output r = chapter.run("--no-plots " + args, dir);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_TRUE(contains(r.err, "Usage:")) << args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

TEST(Chapter08, DrawsItsFigures) {
  const fs::path dir = chapter.scratch("figures");
  const Output r = chapter.run("--out " + (dir / "plots").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"08_encoder_attention", "08_decoder_self_attention",
                           "08_cross_attention", "08_rnn_vs_attention", "08_graph_attention"}) {
    for (const char* ext : {".png", ".gp", ".dat"}) {
      EXPECT_TRUE(fs::is_regular_file(dir / "plots" / (std::string(name) + ext))) << name << ext;
    }
  }
}

TEST(Chapter08, NoticesFollowTheKnobs) {
  const fs::path dir = chapter.scratch("notices");
  // Pre-norm computes x + Sublayer(LayerNorm(x)): no "Add & Norm" after the sub-layer.
  {
    const Output r = chapter.run("--no-plots --norm pre --d-ff 16", dir);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(contains(r.out, "Add & Norm"));
    EXPECT_TRUE(contains(r.out, "== 3. The encoder: 2 x (Norm, self-attention, add; Norm, "
                                "feed-forward, add)"));
    // d_ff 16 < d_model 32: the FFN narrows each token, it does not widen it.
    EXPECT_FALSE(contains(attn_test::unwrapped(r.out), "the FFN widens"));
    EXPECT_TRUE(
        contains(attn_test::unwrapped(r.out), "the FFN narrows each token to d_ff = 16 and back"));
  }
  // The padded source positions are read from the ids: sentence 1 is 5 2 1 6 <pad> <pad>.
  {
    const Output r = chapter.run("--no-plots --dump '" + (dir / "d").string() + "'", dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const Matrix src = Dump{dir / "d"}.matrix("src_ids");  // [2 x 6]
    std::vector<Index> pads;
    for (Index j = 0; j < src.cols(); ++j) {
      if (src(0, j) == 0.0f) pads.push_back(j + 1);  // counted from 1, as printed
    }
    ASSERT_EQ(pads, (std::vector<Index>{5, 6}));
    EXPECT_TRUE(contains(attn_test::unwrapped(r.out),
                         "source positions 5-6 of sentence 1 are padding: their columns are "
                         "exactly 0."));
    EXPECT_TRUE(contains(r.out, "== 3. The encoder: 2 x (self-attention, Add & Norm, "
                                "feed-forward, Add & Norm)"));
  }
  fs::remove_all(dir);
}

}  // namespace test_08_transformer_block
