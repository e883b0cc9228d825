/// @file
/// The position-wise feed-forward network (ffn) of the transformer block:
///
///   FFN(x) = ReLU(x W_1^T + b_1) W_2^T + b_2      x [n x d_model] -> [n x d_model]
///
/// W_1 [d_ff x d_model] widens every token to d_ff features (the paper: 2048 for 512), W_2
/// [d_model x d_ff] brings it back. "Position-wise": each row (token) is transformed alone,
/// with the same weights; tokens only ever meet in attention. PyTorch's TransformerEncoderLayer
/// calls the two layers linear1 and linear2.
///
/// Names: the parameters are a FeedForward; its functions use the short name, ffn_init and
/// ffn_forward (and ffn_backward in the training chapter), "ffn" = the position-wise
/// feed-forward network, as the paper writes FFN(x).
#pragma once

#include "attn/linear.hpp"
#include "attn/random.hpp"

namespace attn {

struct FeedForward {
  Linear linear1;  ///< W_1 [d_ff x d_model], b_1 [1 x d_ff]
  Linear linear2;  ///< W_2 [d_model x d_ff], b_2 [1 x d_model]

  Index d_model() const { return linear1.in_features(); }
  Index d_ff() const { return linear1.out_features(); }
};

/// What ffn_backward will need besides x and the parameters: the ReLU's input (its derivative
/// is 1 where that is > 0, else 0) and its output (linear2's input, for W_2's gradient).
struct FeedForwardCache {
  Matrix pre_activation;  ///< [n x d_ff] = x W_1^T + b_1
  Matrix hidden;          ///< [n x d_ff] = ReLU(pre_activation)
};

/// Both layers as nn.Linear initialises them (U(-1/sqrt(fan_in), 1/sqrt(fan_in))). Throws
/// std::invalid_argument unless d_model and d_ff are at least 1.
FeedForward ffn_init(Rng& rng, Index d_model, Index d_ff);

/// ReLU(x W_1^T + b_1) W_2^T + b_2 for every row of x [n x d_model], filling `cache` when
/// given. Throws std::invalid_argument naming the shapes when the layers or x disagree.
Matrix ffn_forward(const FeedForward& ff, const MatrixView& x, FeedForwardCache* cache = nullptr);

}  // namespace attn
