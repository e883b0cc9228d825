// dump.cpp: --dump DIR writes named intermediates as .npy.
#include "course/dump.hpp"

#include "attn/multi_head.hpp"
#include "attn/transformer.hpp"
#include "course/npy.hpp"

namespace course {

Dumper::Dumper(std::filesystem::path dir) : dir_(std::move(dir)) {}

void Dumper::operator()(const std::string& name, const Matrix& m) {
  if (!enabled()) return;
  write_npy(dir_ / (name + ".npy"), m);
  written_.push_back(name);
}

void Dumper::operator()(const std::string& name, const MatrixD& m) {
  if (!enabled()) return;
  write_npy(dir_ / (name + ".npy"), m);
  written_.push_back(name);
}

void Dumper::operator()(const std::string& name, const Batch& x) {
  const std::vector<std::size_t> shape = x.shape();
  (*this)(name, shape, {x.data().data(), static_cast<std::size_t>(x.data().size())});
}

void Dumper::operator()(const std::string& name, const BatchOf<bool>& allowed) {
  if (!enabled()) return;
  const Matrix ones = allowed.data().cast<float>();  // [B*n_q x n_k] of 1 and 0
  const std::vector<std::size_t> shape = allowed.shape();
  (*this)(name, shape, {ones.data(), static_cast<std::size_t>(ones.size())});
}

void Dumper::operator()(const std::string& name, std::span<const std::size_t> shape,
                        std::span<const float> data) {
  if (!enabled()) return;
  write_npy(dir_ / (name + ".npy"), shape, data);
  written_.push_back(name);
}

namespace {

// The pieces of a layer, under the names nn.MultiheadAttention, nn.Linear and nn.LayerNorm give
// them. Bias vectors are written as [1 x n] matrices, as the chapters always dumped them.
void dump_mha(Dumper& dump, const std::string& p, const attn::MultiHeadAttention& m) {
  dump(p + "_in_proj_weight", attn::in_proj_weight(m));
  dump(p + "_in_proj_bias", Matrix(attn::in_proj_bias(m)));
  dump(p + "_out_proj_weight", m.out_proj.weight);
  dump(p + "_out_proj_bias", Matrix(m.out_proj.bias));
}

void dump_ffn(Dumper& dump, const std::string& p, const attn::FeedForward& ff) {
  dump(p + "linear1_weight", ff.linear1.weight);
  dump(p + "linear1_bias", Matrix(ff.linear1.bias));
  dump(p + "linear2_weight", ff.linear2.weight);
  dump(p + "linear2_bias", Matrix(ff.linear2.bias));
}

void dump_norm(Dumper& dump, const std::string& p, const attn::LayerNorm& norm) {
  dump(p + "_weight", Matrix(norm.gamma));  // PyTorch's weight is the paper's gamma
  dump(p + "_bias", Matrix(norm.beta));
}

}  // namespace

void dump_parameters(Dumper& dump, const std::string& prefix, const attn::EncoderLayer& layer) {
  dump_mha(dump, prefix + "self_attn", layer.self_attn);
  dump_ffn(dump, prefix, layer.ff);
  dump_norm(dump, prefix + "norm1", layer.norm1);
  dump_norm(dump, prefix + "norm2", layer.norm2);
}

void dump_parameters(Dumper& dump, const std::string& prefix, const attn::DecoderLayer& layer) {
  dump_mha(dump, prefix + "self_attn", layer.self_attn);
  dump_mha(dump, prefix + "multihead_attn", layer.multihead_attn);
  dump_ffn(dump, prefix, layer.ff);
  dump_norm(dump, prefix + "norm1", layer.norm1);
  dump_norm(dump, prefix + "norm2", layer.norm2);
  dump_norm(dump, prefix + "norm3", layer.norm3);
}

std::string Dumper::summary() const {
  if (!enabled() || written_.empty()) return {};
  std::string s = "wrote " + std::to_string(written_.size()) + " arrays to " + dir_.string() + "/:";
  for (std::size_t i = 0; i < written_.size(); ++i) s += (i == 0 ? " " : ", ") + written_[i];
  return s;
}

}  // namespace course
