// course::dump_parameters: a layer's parameters written under PyTorch's state_dict keys (dots
// as underscores), read back with course::read_npy: every name, in order, and every array
// equal to the parameter it came from, bit for bit.
#include "attn/multi_head.hpp"
#include "attn/random.hpp"
#include "attn/transformer.hpp"
#include "course/dump.hpp"
#include "course/npy.hpp"

#include "chapter_run.hpp"
#include "expect.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

using attn::Matrix;
using attn_test::identical;

// The key and the parameter it must hold, in the order dump_parameters documents.
using Expected = std::vector<std::pair<std::string, Matrix>>;

void add_mha(Expected& e, const std::string& p, const attn::MultiHeadAttention& m) {
  e.emplace_back(p + "_in_proj_weight", attn::in_proj_weight(m));
  e.emplace_back(p + "_in_proj_bias", attn::in_proj_bias(m));
  e.emplace_back(p + "_out_proj_weight", m.out_proj.weight);
  e.emplace_back(p + "_out_proj_bias", m.out_proj.bias);
}

void add_ffn(Expected& e, const std::string& p, const attn::FeedForward& ff) {
  e.emplace_back(p + "linear1_weight", ff.linear1.weight);
  e.emplace_back(p + "linear1_bias", ff.linear1.bias);
  e.emplace_back(p + "linear2_weight", ff.linear2.weight);
  e.emplace_back(p + "linear2_bias", ff.linear2.bias);
}

void add_norm(Expected& e, const std::string& p, const attn::LayerNorm& norm) {
  e.emplace_back(p + "_weight", norm.gamma);
  e.emplace_back(p + "_bias", norm.beta);
}

// Every expected file is there and holds its parameter; nothing else was written; and the
// dumper lists the names in the documented order.
void expect_written(const fs::path& dir, const course::Dumper& dump, const Expected& expected) {
  std::string names;
  for (const auto& [name, value] : expected) {
    names += (names.empty() ? " " : ", ") + name;
    const course::NpyArray a = course::read_npy(dir / (name + ".npy"));
    EXPECT_EQ(a.shape, (std::vector<std::size_t>{static_cast<std::size_t>(value.rows()),
                                                 static_cast<std::size_t>(value.cols())}))
        << name;
    EXPECT_TRUE(identical(a.to_matrix(), value)) << name;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}),
            static_cast<std::ptrdiff_t>(expected.size()));
  EXPECT_EQ(dump.summary(), "wrote " + std::to_string(expected.size()) + " arrays to " +
                                dir.string() + "/:" + names);
}

TEST(DumpParameters, EncoderLayerUnderItsStateDictKeys) {
  attn::Rng rng(21);
  attn::EncoderLayer layer = attn::encoder_layer_init(rng, 4, 2, 6);  // d_model 4, d_ff 6
  layer.norm2.gamma << 1.0f, 2.0f, 3.0f, 4.0f;  // apart from norm1's, so a swap would show
  const fs::path dir = attn_test::scratch("dump", "encoder");
  course::Dumper dump(dir);
  course::dump_parameters(dump, "encoder_layers_0_", layer);
  Expected e;
  add_mha(e, "encoder_layers_0_self_attn", layer.self_attn);
  add_ffn(e, "encoder_layers_0_", layer.ff);
  add_norm(e, "encoder_layers_0_norm1", layer.norm1);
  add_norm(e, "encoder_layers_0_norm2", layer.norm2);
  ASSERT_EQ(e.size(), 12u);
  EXPECT_EQ(e[0].second.rows(), 12);  // in_proj_weight [3E x E]
  expect_written(dir, dump, e);
  fs::remove_all(dir);
}

TEST(DumpParameters, DecoderLayerAddsTheCrossAttentionAndAThirdNorm) {
  attn::Rng rng(22);
  attn::DecoderLayer layer = attn::decoder_layer_init(rng, 4, 2, 6);
  layer.norm3.beta << 0.5f, -0.5f, 0.25f, -0.25f;  // apart from the other norms' zeros
  const fs::path dir = attn_test::scratch("dump", "decoder");
  course::Dumper dump(dir);
  course::dump_parameters(dump, "decoder_layers_1_", layer);
  Expected e;
  add_mha(e, "decoder_layers_1_self_attn", layer.self_attn);
  add_mha(e, "decoder_layers_1_multihead_attn", layer.multihead_attn);
  add_ffn(e, "decoder_layers_1_", layer.ff);
  add_norm(e, "decoder_layers_1_norm1", layer.norm1);
  add_norm(e, "decoder_layers_1_norm2", layer.norm2);
  add_norm(e, "decoder_layers_1_norm3", layer.norm3);
  ASSERT_EQ(e.size(), 18u);
  expect_written(dir, dump, e);
  fs::remove_all(dir);
}

TEST(DumpParameters, ADisabledDumperWritesNothing) {
  attn::Rng rng(23);
  const fs::path dir = attn_test::scratch("dump", "disabled");
  const fs::path here = fs::current_path();
  fs::current_path(dir);  // a disabled dumper must not write into the working folder either
  course::Dumper off;
  course::dump_parameters(off, "encoder_layers_0_", attn::encoder_layer_init(rng, 4, 2, 6));
  fs::current_path(here);
  EXPECT_TRUE(fs::is_empty(dir));
  EXPECT_EQ(off.summary(), "");
  fs::remove_all(dir);
}

}  // namespace
