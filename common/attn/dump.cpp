// dump.cpp: --dump DIR writes named intermediates as .npy.
#include "attn/dump.hpp"

#include "attn/npy.hpp"

namespace attn {

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

void Dumper::operator()(const std::string& name, std::span<const std::size_t> shape,
                        std::span<const float> data) {
  if (!enabled()) return;
  write_npy(dir_ / (name + ".npy"), shape, data);
  written_.push_back(name);
}

std::string Dumper::summary() const {
  if (!enabled() || written_.empty()) return {};
  std::string s = "wrote " + std::to_string(written_.size()) + " arrays to " + dir_.string() + "/:";
  for (std::size_t i = 0; i < written_.size(); ++i) s += (i == 0 ? " " : ", ") + written_[i];
  return s;
}

}  // namespace attn
