// dump.cpp: --dump DIR writes named intermediates as .npy.
#include "course/dump.hpp"

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

std::string Dumper::summary() const {
  if (!enabled() || written_.empty()) return {};
  std::string s = "wrote " + std::to_string(written_.size()) + " arrays to " + dir_.string() + "/:";
  for (std::size_t i = 0; i < written_.size(); ++i) s += (i == 0 ? " " : ", ") + written_[i];
  return s;
}

}  // namespace course
