/// @file
/// --dump DIR, the chapter's intermediates as .npy files for inspection in NumPy:
///
///   >>> import numpy as np; W = np.load("dump/W_ax.npy")
#pragma once

#include "course/types.hpp"

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace attn {  // attn/transformer.hpp; declared only, so every chapter need not include it
struct EncoderLayer;
struct DecoderLayer;
}  // namespace attn

namespace course {

class Dumper {
 public:
  /// An empty `dir` disables the dumper: every call below then does nothing.
  explicit Dumper(std::filesystem::path dir = {});

  bool enabled() const { return !dir_.empty(); }

  /// Writes `DIR/NAME.npy` (float32, C order) and remembers the name for summary().
  void operator()(const std::string& name, const Matrix& m);
  void operator()(const std::string& name, const MatrixD& m);
  /// A batch as the 3-D array [B, rows, cols] (float32), as PyTorch would save the tensor.
  void operator()(const std::string& name, const Batch& x);
  /// A batch of masks as float32 [B, n_q, n_k]: 1 = may attend, 0 = blocked.
  void operator()(const std::string& name, const BatchOf<bool>& allowed);
  /// An N-d array, e.g. [B, n, d] written from B row-major [n x d] slices laid end to end.
  void operator()(const std::string& name, std::span<const std::size_t> shape,
                  std::span<const float> data);

  /// "wrote 12 arrays to dump/: W_ax, W_aa, ..." (empty when disabled or nothing written).
  std::string summary() const;

 private:
  std::filesystem::path dir_;
  std::vector<std::string> written_;
};

/// One layer's parameters under PyTorch's state_dict keys with the dots as underscores, so a
/// script loads them by name: `prefix` "encoder_layers_0_" gives
/// encoder_layers_0_self_attn_in_proj_weight [3E x E], ..._in_proj_bias [1 x 3E],
/// ..._out_proj_weight [E x E], ..._out_proj_bias [1 x E], then linear1_weight [d_ff x E],
/// linear1_bias [1 x d_ff], linear2_weight [E x d_ff], linear2_bias [1 x E], norm1_weight,
/// norm1_bias, norm2_weight, norm2_bias [1 x E] each, in that order. Nothing when disabled.
void dump_parameters(Dumper& dump, const std::string& prefix, const attn::EncoderLayer& layer);
/// The same for a decoder layer: self_attn_*, then multihead_attn_* (the cross-attention),
/// linear1/linear2, and norm1 to norm3.
void dump_parameters(Dumper& dump, const std::string& prefix, const attn::DecoderLayer& layer);

}  // namespace course
