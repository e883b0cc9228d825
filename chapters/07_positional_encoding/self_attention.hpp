// Chapter 03's self-attention layer, which chapter 07 runs on two sentences with and without
// position vectors: what it computes is taught there; here it is only used.
#pragma once

#include "attn/ops/attention.hpp"

namespace positional {

using attn::Matrix;

// One self-attention layer and everything it computes on X [n x d_model].
struct Projections {
  Matrix W_q, W_k, W_v;  // [d_model x d_model] each
};
struct SelfAttention {
  Matrix Q, K, V;           // [n x d_model] each
  attn::AttentionResult r;  // weights [n x n], out [n x d_model]
};

inline SelfAttention self_attention(const Matrix& X, const Projections& W) {
  SelfAttention s;  // assigned below: built from the products, Q, K, V round differently (Eigen)
  s.Q = X * W.W_q;  // [n x d_model]
  s.K = X * W.W_k;  // [n x d_model]
  s.V = X * W.W_v;  // [n x d_model]
  s.r = attn::attention(s.Q, s.K, s.V);  // softmax(Q K^T / sqrt(d_model)) V
  return s;
}

}  // namespace positional
