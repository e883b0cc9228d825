// feed_forward.cpp: Linear -> ReLU -> Linear, one token at a time (all at once, as rows).
#include "attn/layers/feed_forward.hpp"

#include "attn/core/memory.hpp"
#include "attn/layers/parameters.hpp"

#include <string>

namespace attn {

FeedForward ffn_init(Rng& rng, Index d_model, Index d_ff) {
  // Checked here, so the error names ffn_init and its own sizes, not linear_init's.
  require_at_least_one(d_model, "ffn_init", "d_model");
  require_at_least_one(d_ff, "ffn_init", "d_ff");
  // linear1 [d_ff x d_model] and linear2 [d_model x d_ff], with their biases.
  require_fits_in_memory(
      "ffn_init", ElementCount(d_ff, d_model, 2).add(1, d_ff).add(1, d_model), sizeof(float),
      "of parameters",
      [&] { return "d_model " + std::to_string(d_model) + " and d_ff " + std::to_string(d_ff); });
  FeedForward ff;
  ff.linear1 = linear_init(rng, d_model, d_ff);  // [d_ff x d_model]
  ff.linear2 = linear_init(rng, d_ff, d_model);  // [d_model x d_ff]
  return ff;
}

namespace {

template <Real T>
void check_ffn(const FeedForwardOf<T>& ff, const char* where) {
  require(ff.linear2.in_features() == ff.linear1.out_features() &&
              ff.linear2.out_features() == ff.linear1.in_features(),
          where, [&] {
            return "linear1 is " + shape_str(ff.linear1.weight) + " but linear2 is " +
                   shape_str(ff.linear2.weight) + ": linear2 must be [d_model x d_ff] = " +
                   shape_str(ff.linear1.in_features(), ff.linear1.out_features());
          });
}

}  // namespace

template <Real T>
MatrixOf<T> ffn_forward(const FeedForwardOf<T>& ff, const InView<T>& x,
                        FeedForwardCacheOf<T>* cache) {
  check_ffn(ff, "ffn_forward");
  FeedForwardCacheOf<T> local;  // the same two matrices, dropped on return when nobody asked
  FeedForwardCacheOf<T>& c = cache ? *cache : local;
  c.pre_activation = linear_forward(ff.linear1, x);  // [n x d_ff]
  // ReLU, written so that NaN stays NaN (as torch.relu) instead of depending on max()'s order.
  const auto relu = [](T v) { return v < T(0) ? T(0) : v; };
  c.hidden = c.pre_activation.unaryExpr(relu);  // [n x d_ff]
  return linear_forward(ff.linear2, c.hidden);  // [n x d_model]
}

template <Real T>
MatrixOf<T> ffn_backward(const FeedForwardOf<T>& ff, const InView<T>& x,
                         const FeedForwardCacheOf<T>& cache, const InView<T>& dy,
                         FeedForwardOf<T>& grads) {
  check_ffn(ff, "ffn_backward");
  check_grads_like(ff, grads, "ffn_backward", {{"x", memory_of(x)}, {"dy", memory_of(dy)}});
  require(x.cols() == ff.d_model() && dy.rows() == x.rows() && dy.cols() == ff.d_model(),
          "ffn_backward", [&] {
            return "x is " + shape_str(x) + " and dy " + shape_str(dy) +
                   ": both must be [n x d_model], d_model = " + std::to_string(ff.d_model());
          });
  require(cache.pre_activation.rows() == x.rows() && cache.hidden.rows() == x.rows() &&
              cache.pre_activation.cols() == ff.d_ff() && cache.hidden.cols() == ff.d_ff(),
          "ffn_backward", [&] {
            return "x is " + shape_str(x) + " but the cache holds " +
                   shape_str(cache.pre_activation) + ": pass the cache of this x's forward";
          });
  MatrixOf<T> d_hidden =
      linear_backward(ff.linear2, cache.hidden, dy, grads.linear2);  // [n x d_ff]
  // ReLU': 1 where its input was > 0. Where it was <= 0 the output was a constant 0.
  d_hidden = (cache.pre_activation.array() > T(0)).select(d_hidden, T(0));  // [n x d_ff]
  return linear_backward(ff.linear1, x, d_hidden, grads.linear1);           // [n x d_model]
}

#define ATTN_INSTANTIATE(T)                                                         \
  template MatrixOf<T> ffn_forward(const FeedForwardOf<T>&, const InView<T>&,       \
                                   FeedForwardCacheOf<T>*);                         \
  template MatrixOf<T> ffn_backward(const FeedForwardOf<T>&, const InView<T>&,      \
                                    const FeedForwardCacheOf<T>&, const InView<T>&, \
                                    FeedForwardOf<T>&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
