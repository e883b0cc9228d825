// feed_forward.cpp: Linear -> ReLU -> Linear, one token at a time (all at once, as rows).
#include "attn/feed_forward.hpp"

#include <string>

namespace attn {

FeedForward ffn_init(Rng& rng, Index d_model, Index d_ff) {
  // Checked here, so the error names ffn_init and its own sizes, not linear_init's.
  require_at_least_one(d_model, "ffn_init", "d_model");
  require_at_least_one(d_ff, "ffn_init", "d_ff");
  FeedForward ff;
  ff.linear1 = linear_init(rng, d_model, d_ff);  // [d_ff x d_model]
  ff.linear2 = linear_init(rng, d_ff, d_model);  // [d_model x d_ff]
  return ff;
}

Matrix ffn_forward(const FeedForward& ff, const MatrixView& x, FeedForwardCache* cache) {
  require(ff.linear2.in_features() == ff.linear1.out_features() &&
              ff.linear2.out_features() == ff.linear1.in_features(),
          "ffn_forward", [&] {
            return "linear1 is " + shape_str(ff.linear1.weight) + " but linear2 is " +
                   shape_str(ff.linear2.weight) + ": linear2 must be [d_model x d_ff] = " +
                   shape_str(ff.linear1.in_features(), ff.linear1.out_features());
          });
  FeedForwardCache local;  // the same two matrices, dropped on return when nobody asked for them
  FeedForwardCache& c = cache ? *cache : local;
  c.pre_activation = linear_forward(ff.linear1, x);  // [n x d_ff]
  // ReLU, written so that NaN stays NaN (as torch.relu) instead of depending on max()'s order.
  const auto relu = [](float v) { return v < 0.0f ? 0.0f : v; };
  c.hidden = c.pre_activation.unaryExpr(relu);  // [n x d_ff]
  return linear_forward(ff.linear2, c.hidden);  // [n x d_model]
}

}  // namespace attn
