/// @file
/// The position-wise feed-forward network (ffn) of the transformer block:
///
///     FFN(x) = ReLU(x W_1^T + b_1) W_2^T + b_2      x [n x d_model] -> [n x d_model]
///
/// W_1 [d_ff x d_model] widens every token to d_ff features (the paper: 2048 for 512), W_2
/// [d_model x d_ff] brings it back. "Position-wise": each row (token) is transformed alone,
/// with the same weights; tokens only ever meet in attention. PyTorch's TransformerEncoderLayer
/// calls the two layers linear1 and linear2.
///
/// Names: the parameters are a FeedForward; its functions use the short name, ffn_init and
/// ffn_forward and ffn_backward, "ffn" = the position-wise
/// feed-forward network, as the paper writes FFN(x).
#pragma once

#include "attn/core/random.hpp"
#include "attn/layers/linear.hpp"

namespace attn {

template <Real T>
struct FeedForwardOf {
  using Scalar = T;
  LinearOf<T> linear1;  ///< W_1 [d_ff x d_model], b_1 [1 x d_ff]
  LinearOf<T> linear2;  ///< W_2 [d_model x d_ff], b_2 [1 x d_model]

  Index d_model() const { return linear1.in_features(); }
  Index d_ff() const { return linear1.out_features(); }
};
using FeedForward = FeedForwardOf<float>;
using FeedForwardD = FeedForwardOf<double>;

/// What ffn_backward needs besides x and the parameters: the ReLU's input (its derivative
/// is 1 where that is > 0, else 0) and its output (linear2's input, for W_2's gradient).
template <Real T>
struct FeedForwardCacheOf {
  MatrixOf<T> pre_activation;  ///< [n x d_ff] = x W_1^T + b_1
  MatrixOf<T> hidden;          ///< [n x d_ff] = ReLU(pre_activation)
};
using FeedForwardCache = FeedForwardCacheOf<float>;

/// Both layers as nn.Linear initialises them (U(-1/sqrt(fan_in), 1/sqrt(fan_in))). Throws
/// std::invalid_argument unless d_model and d_ff are at least 1 and the machine can hold the
/// two layers (core/memory.hpp), before drawing anything.
FeedForward ffn_init(Rng& rng, Index d_model, Index d_ff);

/// ReLU(x W_1^T + b_1) W_2^T + b_2 for every row of x [n x d_model], filling `cache` when
/// given. Throws std::invalid_argument naming the shapes when the layers or x disagree.
template <Real T>
MatrixOf<T> ffn_forward(const FeedForwardOf<T>& ff, const InView<T>& x,
                        FeedForwardCacheOf<T>* cache = nullptr);

/// The backward pass, given dy [n x d_model] and the forward's cache: back through linear2
/// (d_hidden = dy W_2), through the ReLU (d_pre = d_hidden where pre_activation > 0, else 0:
/// PyTorch's threshold_backward, which gives 0 at exactly 0), through linear1. Returns dx
/// [n x d_model] and accumulates both layers' gradients into grads. Throws
/// std::invalid_argument (check_grads_like) unless grads is shaped like ff and shares no memory
/// with it, x or dy.
template <Real T>
MatrixOf<T> ffn_backward(const FeedForwardOf<T>& ff, const InView<T>& x,
                         const FeedForwardCacheOf<T>& cache, const InView<T>& dy,
                         FeedForwardOf<T>& grads);

}  // namespace attn
