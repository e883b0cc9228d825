/// @file
/// Every parameter tensor of a layer, by its PyTorch state_dict key: what an optimiser, a
/// gradient check, a checkpoint and a comparison with PyTorch all walk.
///
///     for_each_parameter(layer, "encoder.layers.0.", f)   calls f(key, tensor, first) per tensor
///     parameters(layer, prefix)                           the same as a list of Parameter views
///     zeros_like(layer)                                   a gradient holder: the layer's shapes, 0
///     cast<double>(layer)                                 the same layer in another precision
///
/// The order is PyTorch's named_parameters() order, so two walks over a layer and its
/// gradients (zeros_like(layer), filled by the backward passes) meet the same tensors in step.
///
/// One wrinkle: nn.MultiheadAttention stores W_Q, W_K, W_V as one stacked in_proj_weight
/// [3E x E] (and in_proj_bias [3E]), where the course keeps three Linear layers
/// (multi_head.hpp). Each is visited as a block of that key: the same key three times, with
/// `first` = 0, E, 2E, the block's first row (for a weight) or element (for a bias). A
/// checkpoint writer stacks the blocks of a key; an optimiser, which works entry by entry,
/// does not care.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/memory.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/grouped_query.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/rnn.hpp"
#include "attn/layers/transformer.hpp"

#include <concepts>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace attn {

/// Whether L is Layer<T> for some T, const or not: `IsA<const LinearOf<float>, LinearOf>`.
template <typename L, template <Real> class Layer>
concept IsA = requires {
  typename std::remove_const_t<L>::Scalar;
}
&&std::same_as<std::remove_const_t<L>, Layer<typename std::remove_const_t<L>::Scalar>>;

/// nn.Linear: weight [out x in], then bias [out].
template <typename L, typename F>
requires IsA<L, LinearOf>
void for_each_parameter(L& layer, const std::string& prefix, F&& f) {
  f(prefix + "weight", layer.weight, Index{0});
  if (layer.has_bias()) f(prefix + "bias", layer.bias, Index{0});
}

/// nn.RNN (one layer): weight_ih_l0 [H x I], weight_hh_l0 [H x H], bias_ih_l0 [H], bias_hh_l0 [H].
template <typename L, typename F>
requires IsA<L, RnnCellOf>
void for_each_parameter(L& cell, const std::string& prefix, F&& f) {
  f(prefix + "weight_ih_l0", cell.weight_ih, Index{0});
  f(prefix + "weight_hh_l0", cell.weight_hh, Index{0});
  f(prefix + "bias_ih_l0", cell.bias_ih, Index{0});
  f(prefix + "bias_hh_l0", cell.bias_hh, Index{0});
}

/// nn.LayerNorm: weight (gamma) [d], then bias (beta) [d].
template <typename L, typename F>
requires IsA<L, LayerNormOf>
void for_each_parameter(L& norm, const std::string& prefix, F&& f) {
  f(prefix + "weight", norm.gamma, Index{0});
  f(prefix + "bias", norm.beta, Index{0});
}

/// nn.MultiheadAttention: in_proj_weight (three blocks), in_proj_bias (three blocks),
/// out_proj.weight, out_proj.bias.
template <typename L, typename F>
requires IsA<L, MultiHeadAttentionOf>
void for_each_parameter(L& mha, const std::string& prefix, F&& f) {
  const Index E = mha.d_model();
  f(prefix + "in_proj_weight", mha.q_proj.weight, Index{0});
  f(prefix + "in_proj_weight", mha.k_proj.weight, E);
  f(prefix + "in_proj_weight", mha.v_proj.weight, 2 * E);
  if (mha.q_proj.has_bias()) {
    f(prefix + "in_proj_bias", mha.q_proj.bias, Index{0});
    f(prefix + "in_proj_bias", mha.k_proj.bias, E);
    f(prefix + "in_proj_bias", mha.v_proj.bias, 2 * E);
  }
  for_each_parameter(mha.out_proj, prefix + "out_proj.", f);
}

/// Grouped-query attention as Hugging Face's LlamaAttention names it (grouped_query.hpp):
/// q_proj.*, k_proj.*, v_proj.*, o_proj.*, each weight then its bias (when the layer has them).
/// W_K and W_V are [g d_k x d_model]: the keys carry no head count, the shapes do.
template <typename L, typename F>
requires IsA<L, GroupedQueryAttentionOf>
void for_each_parameter(L& gqa, const std::string& prefix, F&& f) {
  for_each_parameter(gqa.q_proj, prefix + "q_proj.", f);
  for_each_parameter(gqa.k_proj, prefix + "k_proj.", f);
  for_each_parameter(gqa.v_proj, prefix + "v_proj.", f);
  for_each_parameter(gqa.out_proj, prefix + "o_proj.", f);
}

/// The feed-forward network as a transformer layer names it: linear1.*, linear2.*.
template <typename L, typename F>
requires IsA<L, FeedForwardOf>
void for_each_parameter(L& ff, const std::string& prefix, F&& f) {
  for_each_parameter(ff.linear1, prefix + "linear1.", f);
  for_each_parameter(ff.linear2, prefix + "linear2.", f);
}

/// nn.TransformerEncoderLayer: self_attn.*, linear1.*, linear2.*, norm1.*, norm2.*.
template <typename L, typename F>
requires IsA<L, EncoderLayerOf>
void for_each_parameter(L& layer, const std::string& prefix, F&& f) {
  for_each_parameter(layer.self_attn, prefix + "self_attn.", f);
  for_each_parameter(layer.ff, prefix, f);
  for_each_parameter(layer.norm1, prefix + "norm1.", f);
  for_each_parameter(layer.norm2, prefix + "norm2.", f);
}

/// nn.TransformerDecoderLayer: self_attn.*, multihead_attn.*, linear1.*, linear2.*, norm1.*
/// to norm3.*.
template <typename L, typename F>
requires IsA<L, DecoderLayerOf>
void for_each_parameter(L& layer, const std::string& prefix, F&& f) {
  for_each_parameter(layer.self_attn, prefix + "self_attn.", f);
  for_each_parameter(layer.multihead_attn, prefix + "multihead_attn.", f);
  for_each_parameter(layer.ff, prefix, f);
  for_each_parameter(layer.norm1, prefix + "norm1.", f);
  for_each_parameter(layer.norm2, prefix + "norm2.", f);
  for_each_parameter(layer.norm3, prefix + "norm3.", f);
}

/// A view of one parameter tensor (or one block of a stacked one), for code that walks a
/// whole model as a list: the optimiser, clip_grad_norm, the gradient check. T is float or
/// double, const for a view of a const layer.
template <typename T>
struct Parameter {
  using Plain = MatrixOf<std::remove_const_t<T>>;
  using View = Eigen::Map<std::conditional_t<std::is_const_v<T>, const Plain, Plain>>;
  std::string key;         ///< the state_dict key, "encoder.layers.0.self_attn.in_proj_weight"
  View value;              ///< the block
  Index first = 0;         ///< its first row (a matrix) or element (a vector) within the key
  bool is_vector = false;  ///< 1-D in PyTorch (a bias, a LayerNorm's weight): value is [1 x n]

  Parameter(std::string key_, View value_, Index first_, bool is_vector_)
      : key(std::move(key_)), value(value_), first(first_), is_vector(is_vector_) {}
  // Copying a view makes another view of the same numbers, which is what a list needs.
  Parameter(const Parameter&) = default;
  Parameter(Parameter&&) = default;
  // Assigning one Parameter to another would go through the Map and copy one tensor's numbers
  // over another's instead of re-pointing the view (std::swap, vector::erase do that). A list
  // of views is made once and read; write a tensor's numbers with `p.value = ...`.
  Parameter& operator=(const Parameter&) = delete;
  Parameter& operator=(Parameter&&) = delete;
  ~Parameter() = default;
};

/// Every parameter of `layer` (anything with a for_each_parameter), in named_parameters order.
/// The views point into the layer: keep it alive and do not resize it while they are used.
template <typename L>
auto parameters(L& layer, const std::string& prefix = "") {
  using T = std::conditional_t<std::is_const_v<L>, const typename std::remove_const_t<L>::Scalar,
                               typename std::remove_const_t<L>::Scalar>;
  std::vector<Parameter<T>> list;
  for_each_parameter(layer, prefix, [&](const std::string& key, auto& tensor, Index first) {
    constexpr bool vector = std::remove_reference_t<decltype(tensor)>::RowsAtCompileTime == 1;
    list.emplace_back(key, typename Parameter<T>::View(tensor.data(), tensor.rows(), tensor.cols()),
                      first, vector);
  });
  return list;
}

/// Throws std::invalid_argument from `where` unless `grads` has the structure and every
/// tensor shape of `layer`, as zeros_like(layer) makes it, naming the first key that differs;
/// and unless its tensors have memory of their own: a gradient that shares memory with a
/// parameter of `layer` (the layer passed as its own gradient holder) or with one of `inputs`
/// (the backward pass's input views: x, dy, d_out) would be added into what the backward pass
/// is still reading. A composite backward pass checks this before it accumulates anything, so
/// a mismatch leaves every gradient untouched instead of failing halfway with a sub-layer's name.
template <typename L>
void check_grads_like(const L& layer, const L& grads, const char* where,
                      std::initializer_list<NamedMemory> inputs = {}) {
  struct Tensor {
    std::string key;
    std::pair<Index, Index> shape;
    MemoryRange memory;
  };
  std::vector<Tensor> tensors;
  for_each_parameter(layer, "", [&](const std::string& key, const auto& t, Index) {
    tensors.push_back({key, {t.rows(), t.cols()}, memory_of(t)});
  });
  std::size_t i = 0;
  for_each_parameter(grads, "", [&](const std::string& key, const auto& t, Index) {
    const bool known = i < tensors.size() && tensors[i].key == key;
    require(known && tensors[i].shape == std::pair{t.rows(), t.cols()}, where, [&] {
      if (!known)
        return "the gradients hold " + key +
               " where the layer has none: start them "
               "from zeros_like(layer)";
      return "the gradient of " + key + " is " + shape_str(t.rows(), t.cols()) +
             " but the parameter is " + shape_str(tensors[i].shape.first, tensors[i].shape.second) +
             ": start the gradients from zeros_like(layer)";
    });
    // A layer owns its tensors (Eigen matrices, one allocation each), so a gradient can share
    // memory with a parameter only by being the same tensor: the gradients are the layer itself
    // (`linear_backward(l, x, dy, l)`), and gradient i is then parameter i. Compared position by
    // position, with nothing allocated: this runs in every backward pass of every layer of a
    // training step. (Lists of views, which may point anywhere, are compared in full by
    // first_overlap, as Adam::step does.)
    const MemoryRange memory = memory_of(t);
    require(!overlap(memory, tensors[i].memory), where, [&] {
      return "the gradient of " + key + " shares memory with the layer's " + key +
             ": the gradients need memory of their own (zeros_like(layer)), or the backward "
             "pass adds them into the parameters it is still reading";
    });
    for (const NamedMemory& in : inputs) {
      require(!overlap(memory, in.memory), where, [&] {
        return "the gradient of " + key + " shares memory with " + std::string(in.name) +
               ": an output must not alias an input (it would be written while still being "
               "read); pass gradients of their own (zeros_like(layer))";
      });
    }
    ++i;
  });
  require(i == tensors.size(), where, [&] {
    return "the gradients lack " + tensors[i].key + ": start them from zeros_like(layer)";
  });
}

/// The number of scalars in `layer`, as sum(p.numel() for p in model.parameters()).
template <typename L>
Index parameter_count(const L& layer) {
  Index count = 0;
  for_each_parameter(layer, "",
                     [&](const std::string&, const auto& t, Index) { count += t.size(); });
  return count;
}

/// A gradient holder for `layer`: the same structure and shapes, every entry 0, as PyTorch's
/// .grad after zero_grad(). The backward passes accumulate into it (+=).
template <typename L>
L zeros_like(const L& layer) {
  L zero = layer;
  for_each_parameter(zero, "", [](const std::string&, auto& t, Index) { t.setZero(); });
  return zero;
}

/// Sets every entry of a gradient holder back to 0, keeping its memory (zero_grad()).
template <typename L>
void set_zero(L& grads) {
  for_each_parameter(grads, "", [](const std::string&, auto& t, Index) { t.setZero(); });
}

// ---- The same layer in another precision --------------------------------------------------------
// Every parameter cast entry by entry (float -> double is exact); sizes, heads, eps and the norm
// placement copied. The gradient checks run a float model's layers in double with these.

template <Real U, Real T>
LinearOf<U> cast(const LinearOf<T>& l) {
  return {l.weight.template cast<U>(), l.bias.template cast<U>()};
}

template <Real U, Real T>
RnnCellOf<U> cast(const RnnCellOf<T>& c) {
  return {c.weight_ih.template cast<U>(), c.weight_hh.template cast<U>(),
          c.bias_ih.template cast<U>(), c.bias_hh.template cast<U>()};
}

template <Real U, Real T>
LayerNormOf<U> cast(const LayerNormOf<T>& n) {
  return {n.gamma.template cast<U>(), n.beta.template cast<U>(), static_cast<U>(n.eps)};
}

template <Real U, Real T>
FeedForwardOf<U> cast(const FeedForwardOf<T>& ff) {
  return {cast<U>(ff.linear1), cast<U>(ff.linear2)};
}

template <Real U, Real T>
MultiHeadAttentionOf<U> cast(const MultiHeadAttentionOf<T>& m) {
  return {m.heads, cast<U>(m.q_proj), cast<U>(m.k_proj), cast<U>(m.v_proj), cast<U>(m.out_proj)};
}

template <Real U, Real T>
GroupedQueryAttentionOf<U> cast(const GroupedQueryAttentionOf<T>& m) {
  return {m.heads,           m.kv_heads,        cast<U>(m.q_proj),
          cast<U>(m.k_proj), cast<U>(m.v_proj), cast<U>(m.out_proj)};
}

template <Real U, Real T>
EncoderLayerOf<U> cast(const EncoderLayerOf<T>& l) {
  return {cast<U>(l.self_attn), cast<U>(l.ff), cast<U>(l.norm1), cast<U>(l.norm2), l.norm};
}

template <Real U, Real T>
DecoderLayerOf<U> cast(const DecoderLayerOf<T>& l) {
  return {cast<U>(l.self_attn), cast<U>(l.multihead_attn), cast<U>(l.ff), cast<U>(l.norm1),
          cast<U>(l.norm2),     cast<U>(l.norm3),          l.norm};
}

}  // namespace attn
