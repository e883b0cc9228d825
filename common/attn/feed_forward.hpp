/// @file
/// The position-wise feed-forward layer of the transformer block:
///
///   FFN(x) = ReLU(x W_1^T + b_1) W_2^T + b_2      x [n x d_model] -> [n x d_model]
///
/// W_1 [d_ff x d_model] widens every token to d_ff features (the paper: 2048 for 512), W_2
/// [d_model x d_ff] brings it back. "Position-wise": each row (token) is transformed alone,
/// with the same weights; tokens only ever meet in attention. PyTorch's TransformerEncoderLayer
/// calls the two layers linear1 and linear2.
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

/// Both layers as nn.Linear initialises them (U(-1/sqrt(fan_in), 1/sqrt(fan_in))).
FeedForward feed_forward_init(Rng& rng, Index d_model, Index d_ff);

/// ReLU(x W_1^T + b_1) W_2^T + b_2 for every row of x [n x d_model]. Throws
/// std::invalid_argument naming the shapes when the layers or x disagree.
Matrix feed_forward(const FeedForward& ff, const Eigen::Ref<const Matrix>& x);

}  // namespace attn
