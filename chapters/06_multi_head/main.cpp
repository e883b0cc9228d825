// 06_multi_head: h heads, each attending in its own d_k = d_model / h columns, mixed by W_O,
// then Add & Norm. Note 001 sections 3.5-3.6, with the shape printed at every step.
//
//   Q = X W_Q^T + b_Q, K = X W_K^T + b_K, V = X W_V^T + b_V        [B, n, d_model]
//   head_h = softmax(mask(Q_h K_h^T / sqrt(d_k))) V_h               [B, n, d_k], h = 1..H
//   out    = Concat(head_1..head_H) W_O^T + b_O                     [B, n, d_model]
//   y      = LayerNorm(out + X)                                     [B, n, d_model]
//
//   06_multi_head [--heads H] [--d-model D] [--seq-len N] [--mask none|pad|causal]
//                 [--seed N] [--out DIR] [--no-plots] [--dump DIR] [--step]
#include "attn/core/random.hpp"
#include "attn/layers/embedding.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"
#include "course/chapter.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using attn::AllowedBatch;
using attn::Batch;
using attn::Index;
using attn::Matrix;

struct Knobs {
  Index heads = 8, d_model = 512, seq_len = 5;  // note 001's h, d_model, and its batch
  std::string mask = "pad";                     // none, pad, or causal (padding and causal)
};

// Note 001's batch, [[5,2,1,0,0],[1,3,1,4,0]], stretched to length n: sentence 1 has n-2 real
// tokens and sentence 2 has n-1, taken in turn from the note's own words; 0 pads the rest.
attn::TokenIds note_ids(Index n) {
  const int words1[] = {5, 2, 1}, words2[] = {1, 3, 1, 4};
  attn::TokenIds ids = attn::TokenIds::Zero(2, n);  // [2 x n]
  for (Index i = 0; i + 2 < n; ++i) ids(0, i) = words1[i % 3];
  for (Index i = 0; i + 1 < n; ++i) ids(1, i) = words2[i % 4];
  return ids;
}

// "[2, 8, 5, 64]": a PyTorch shape the library holds as column blocks or as stacked matrices
// (no 4-d tensor here), written from the real dimensions of the tensors that hold it.
std::string torch_shape(std::initializer_list<Index> dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

// The mean and the (biased) standard deviation of one row, in double.
template <typename Row>
std::pair<double, double> mean_std(const Row& row) {
  const double m = row.template cast<double>().mean();
  const double v = (row.template cast<double>().array() - m).square().mean();
  return {m, std::sqrt(v)};
}

void lesson(course::Chapter& ch, const Knobs& k) {
  const Index H = k.heads, d_k = k.d_model / k.heads, vocab = 10;
  ch.intro("heads {}, d_model {}, d_k {}, seq-len {}, mask {}, seed {}", H, k.d_model, d_k,
           k.seq_len, k.mask, ch.seed());

  ch.step("The input: note 001's batch, X = table[ids] + PE");
  attn::Rng rng(ch.seed());
  const attn::TokenIds ids = note_ids(k.seq_len);                    // [B x n]
  const Matrix table = attn::embedding_init(rng, vocab, k.d_model);  // [vocab x E]
  Batch X = attn::embed(table, ids);                                 // [B, n, E]
  const Index B = X.batch(), n = X.rows(), E = X.cols();
  const Matrix pe = attn::sinusoidal_encoding(n, E);  // [n x E]
  for (Index b = 0; b < B; ++b) X[b] += pe;
  const std::vector<std::string> words = course::token_labels(ids, 0);  // sentence 1, printed
  ch.show("ids", ids.cast<float>(), {.precision = 0, .row_labels = course::labels("sentence ", B)});
  ch.flow({{"ids", ids}, {"X", X}});
  ch.say("X: batch, position, feature (chapter 05 built it the same way)");
  ch.dump("X", X);

  ch.step("Three projections, all {} heads at once: Q = X W_Q^T + b_Q", H);
  const attn::MultiHeadAttention mha = attn::multi_head_init(rng, E, H);  // W_* [E x E]
  ch.say("W_Q, W_K, W_V, W_O are each {}, initialised as nn.MultiheadAttention does.",
         course::shape(mha.q_proj.weight));
  ch.say("Rows [{0}(h-1), {0}h) of W_Q are head h's own {1} projection (h = 1..{2}), stacked.", d_k,
         course::shape(mha.q_proj.weight.middleRows(0, d_k)), H);
  const attn::MultiHeadResult s1 = attn::multi_head_forward(mha, X[0], X[0], X[0]);  // sentence 1
  ch.show(fmt::format("Q for sentence 1 (head h = columns {0}(h-1)..{0}h-1)", d_k), s1.Q,
          {.max_cols = 6, .row_labels = words});
  // The second head (the first if alone). The course counts heads from 1, like head_1..head_h
  // in the paper; in the code h is an offset from 0, so head h + 1 is printed.
  const Index h = H > 1 ? 1 : 0;
  // [head_view]
  const auto Q_h = s1.Q.middleCols(h * d_k, d_k);  // head h's queries [n x d_k]: a view, no copy
  // [head_view]
  ch.prose("head {}'s Q_h is Q.middleCols({}, {}): it starts {} floats into Q's buffer and steps "
           "{} per row, the same memory PyTorch reshapes:",
           h + 1, h * d_k, d_k, Q_h.data() - s1.Q.data(), Q_h.outerStride());
  ch.say("  {} -> .view{} -> .transpose(1, 2) -> {}", torch_shape({B, s1.Q.rows(), s1.Q.cols()}),
         torch_shape({B, n, H, Q_h.cols()}), torch_shape({B, H, n, Q_h.cols()}));
  ch.notice("one {} product makes every head's queries; splitting them copies nothing.",
            course::shape(mha.q_proj.weight));
  ch.dump("in_proj_weight", attn::in_proj_weight(mha));  // [3E x E], PyTorch's stacked layout
  ch.dump("in_proj_bias", Matrix(attn::in_proj_bias(mha)));
  ch.dump("out_proj_weight", mha.out_proj.weight);
  ch.dump("out_proj_bias", Matrix(mha.out_proj.bias));

  ch.step("The mask, the same for every head");
  AllowedBatch allowed = attn::padding_masks(ids);  // [B, n, n], true = may attend
  if (k.mask == "causal") {
    for (Index b = 0; b < B; ++b) allowed[b] = allowed[b].array() && attn::causal_mask(n).array();
  } else if (k.mask == "none") {
    allowed.data().setConstant(true);
  }
  ch.show("allowed[0] (1 = may attend)", allowed[0].cast<float>(),
          {.precision = 0, .row_labels = words, .col_labels = words});
  ch.say("the mask {}, the same for every head: {}", course::shape(allowed),
         torch_shape({B, H, allowed.rows(), allowed.cols()}));
  if (k.mask == "none") {
    ch.notice("--mask none: no mask reaches the heads (the grid above is what one would allow); "
              "with a mask, PyTorch broadcasts [B, n, n] to [B, H, n, n].");
  } else {
    ch.notice("PyTorch broadcasts [B, n, n] to [B, H, n, n]; the library hands the same mask to "
              "each head.");
  }
  ch.dump("allowed", allowed);

  ch.step("One attention per head: softmax(mask(Q_h K_h^T / sqrt({}))) V_h", d_k);
  // [forward]
  attn::MultiHeadBatchOptions opts;  // --mask none: no mask at all
  if (k.mask != "none") opts.allowed.emplace(allowed);
  const attn::MultiHeadBatchResult r =  // out [B, n, E], weights [B*H, n, n]
      attn::multi_head_forward(mha, X, X, X, opts);
  // [forward]
  for (Index h = 0; h < std::min<Index>(H, 2); ++h) {
    ch.show(fmt::format("sentence 1, head {} weights", h + 1), r.head_weights(0, h),
            {.row_labels = words, .col_labels = words});
  }
  double spread = 0.0;  // how different the heads are: largest weight gap between two heads
  for (Index h = 1; h < H; ++h) {
    spread = std::max(spread, attn::max_abs_diff(r.head_weights(0, h), r.head_weights(0, 0)));
  }
  ch.say("weights {}; the largest gap between a head's weights and head 1's: {:.3f}",
         torch_shape({r.out.batch(), r.heads, r.weights.rows(), r.weights.cols()}), spread);
  ch.notice("each head scores every token against every token, from its own {} dimension{} only.",
            d_k, d_k == 1 ? "" : "s");
  if (k.mask != "none") {
    // The promise of the notice: every head gives every padded key exactly 0.
    float leak = 0.0f;
    for (Index b = 0; b < B; ++b) {
      for (Index head = 0; head < H; ++head) {
        const auto w = r.head_weights(b, head);  // [n x n]
        for (Index j = 0; j < n; ++j) {
          if (ids(b, j) == 0) leak = std::max(leak, w.col(j).cwiseAbs().maxCoeff());
        }
      }
    }
    if (leak != 0.0f) {
      throw std::runtime_error(fmt::format("a head gave a padded key weight {:g}", leak));
    }
    ch.notice("padded key columns are exactly 0 in every head.");
  }
  for (Index b = 0; b < B; ++b) {
    std::vector<course::HeatmapPanel> panels;
    const std::vector<std::string> tokens = course::id_labels(ids, b);
    // The twin shows each weight's score: the projections multi_head_forward made for sentence
    // b, each head's columns scored as its attention scored them (mask or not).
    const Matrix Q = attn::linear_forward(mha.q_proj, X[b]);  // [n x E]
    const Matrix K = attn::linear_forward(mha.k_proj, X[b]);  // [n x E]
    attn::AttentionOptions head_opts;                         // scale 1/sqrt(d_k), -inf
    if (k.mask != "none") head_opts.allowed.emplace(allowed, b);
    for (Index h = 0; h < H && h < 16; ++h) {
      panels.push_back({Matrix(r.head_weights(b, h)), fmt::format("head {}", h + 1), tokens, tokens,
                        attn::AllowedMask(allowed[b]),
                        attn::attention_scores(Q.middleCols(h * d_k, d_k),
                                               K.middleCols(h * d_k, d_k), head_opts)});  // [n x n]
    }
    ch.plot().heatmap_grid(
        fmt::format("06_heads_sentence{}", b + 1), panels,
        // The token ids on the axes say which is which; no axis titles, so the panels get
        // the room.
        {.title = fmt::format("Sentence {}: each head's weights, rows = queries, columns = keys "
                              "({} mask, d_k = {})",
                              b + 1, k.mask, d_k),
         .columns = 4,
         .cmin = 0.0,
         .cmax = 1.0,
         .show_values = n <= 6,
         .panel_px = 220,
         .value_name = "weight",
         .row_name = "query",
         .column_name = "key"});
  }
  ch.dump("out", r.out);
  ch.dump("weights_avg", r.average_weights());
  std::vector<std::size_t> heads_shape = r.weights.shape();  // {B*H, n, n}, stored [B*H, n, n]
  heads_shape.front() = B;                                   // PyTorch's [B, H, n, n]
  heads_shape.insert(heads_shape.begin() + 1, H);
  ch.dump("weights_heads", heads_shape,
          std::span<const float>(r.weights.data().data(), r.weights.data().size()));

  ch.step("Concatenate and mix: out = Concat(head_1..head_{}) W_O^T + b_O", H);
  ch.prose("each head's output {} was written straight into its columns of concat {} (PyTorch: "
           ".transpose(1, 2).reshape({}, {}, {})), then W_O mixes the heads: out {}",
           course::shape(s1.concat.middleCols(0, d_k)), course::shape(s1.concat), r.out.batch(),
           r.out.rows(), r.out.cols(), course::shape(r.out));
  ch.show("concat for sentence 1", s1.concat, {.max_cols = 6, .row_labels = words});
  ch.show("out[0]", r.out[0], {.max_cols = 6, .row_labels = words});
  ch.notice("before W_O, column c of concat holds one head's view; W_O lets every output feature "
            "read all heads.");

  ch.step("Add & Norm: y = LayerNorm(out + X)");
  const attn::LayerNorm norm = attn::layer_norm_init(E);  // gamma = 1, beta = 0, eps = 1e-5
  Batch y(B, n, E);                                       // [B, n, E]
  // [add_norm]
  for (Index b = 0; b < B; ++b) y[b] = attn::layer_norm_forward(norm, r.out[b] + X[b]);
  // [add_norm]
  ch.say("per token (sentence 1):   mean of out+X   std of out+X    mean of y   std of y");
  double least_std = 1.0;  // the smallest std of a y row
  for (Index i = 0; i < n; ++i) {
    const Matrix sum = r.out[0].row(i) + X[0].row(i);  // [1 x E]
    const auto [m1, s1v] = mean_std(sum);
    const auto [m2, s2v] = mean_std(y[0].row(i));
    const double mean_y = std::abs(m2) < 5e-7 ? 0.0 : m2;  // print rounding noise as 0
    ch.say("  token {} {:26.4f} {:15.4f} {:12.6f} {:10.6f}", i + 1, m1, s1v, mean_y, s2v);
    least_std = std::min(least_std, s2v);
  }
  if (E == 1) {  // one feature: x - mean(x) = 0, so the normalised token is 0 and y = beta
    ch.notice("with d_model = 1 a token is a single number: out + X minus its own mean is 0, so "
              "LayerNorm returns beta = 0 for every token (std 0, not 1) and the residual's "
              "information is gone. LayerNorm needs more than one feature.");
  } else if (least_std >= 0.99) {
    ch.notice("the residual keeps X's information; LayerNorm puts every token back at mean 0, "
              "std 1.");
    ch.notice("std is sqrt(var / (var + eps)), a hair under 1: eps = 1e-5 sits inside the root "
              "(PyTorch's definition).");
  } else {
    ch.notice("the residual keeps X's information; LayerNorm puts every token back at mean 0 and "
              "std sqrt(var / (var + eps)): down to {:.4f} here, where a token's variance is not "
              "far above eps = 1e-5 (PyTorch's definition).",
              least_std);
  }
  ch.dump("ln_weight", Matrix(norm.gamma));
  ch.dump("ln_bias", Matrix(norm.beta));
  ch.dump("y", y);

  ch.step("Why more heads cost nothing: the same parameters and FLOPs");
  // H separate [d_k x E] projections against the rows of the one [E x E] W_Q.
  double worst = 0.0;
  for (Index h = 0; h < H; ++h) {
    const attn::Linear small{mha.q_proj.weight.middleRows(h * d_k, d_k),  // W_Q^h [d_k x E]
                             mha.q_proj.bias.segment(h * d_k, d_k)};
    const Matrix Qh = attn::linear_forward(small, X[0]);  // [n x d_k]
    worst = std::max(worst, attn::max_abs_diff(Qh, s1.Q.middleCols(h * d_k, d_k)));
  }
  ch.prose("{} separate W_i^Q {} (the notes' layout) vs one W^Q {}: max difference {:.1e}", H,
           course::shape(mha.q_proj.weight.middleRows(0, d_k).transpose()),
           course::shape(mha.q_proj.weight), worst);
  // One head is chapter 05's attention with projections.
  attn::Rng rng1 = ch.rng("one head");
  const attn::MultiHeadAttention one = attn::multi_head_init(rng1, E, 1);
  const attn::MultiHeadResult a = attn::multi_head_forward(one, X[0], X[0], X[0]);
  const attn::AttentionResult plain = attn::attention(a.Q, a.K, a.V);  // chapter 05, no mask
  const double one_head = attn::max_abs_diff(a.concat, plain.out);
  ch.say("H = 1 against attn::attention on the same projections: max difference {:g}", one_head);
  if (one_head != 0.0) {  // the same function on the same floats: the same bits
    throw std::runtime_error("one head of multi_head_forward differs from attn::attention on the "
                             "same projections");
  }
  ch.gap();
  ch.say("    H   d_k    parameters   multiply-adds per sentence (n = {})\n"
         "                              projections   scores + weighted sums",
         n);
  std::vector<Index> table_heads = {1, 2, 4, 8, 16, 32};  // and this run's H, in order
  if (std::ranges::find(table_heads, H) == table_heads.end()) {
    table_heads.insert(std::ranges::upper_bound(table_heads, H), H);
  }
  for (const Index h : table_heads) {
    if (E % h != 0) continue;
    attn::Rng r_h(ch.seed());
    const long long params = attn::multi_head_init(r_h, E, h).parameter_count();
    const long long proj = 4LL * n * E * E;                 // Q, K, V, W_O: n x E times E x E each
    const long long attn_mads = 2LL * h * n * n * (E / h);  // per head: n^2 d_k twice
    ch.say("{:5} {:5} {:>13} {:>13} {:>13}{}", h, E / h, course::with_commas(params),
           course::with_commas(proj), course::with_commas(attn_mads),
           h == H ? "   <- this run" : "");
  }
  ch.notice("H heads of width d_model/H cost what one head of width d_model costs: 4 d^2 + 4 d "
            "parameters and 4 n d^2 + 2 n^2 d multiply-adds.");
  ch.notice("what changes is what they can express: H separate softmaxes.");

  ch.finish(
      {"Heads are column blocks of one projection: [B, n, d_model] viewed as [B, H, n, d_k], no "
       "copy.",
       "Every head scores every pair of tokens, through its own d_k dimensions and its own "
       "softmax.",
       k.mask == "none" ? "With a mask, all heads share it; --mask none let every head see the "
                          "padding."
                        : "The mask is shared by all heads; padded keys are 0 in each.",
       "More heads, same cost: 4 d^2 + 4 d parameters, 4 n d^2 + 2 n^2 d multiply-adds.",
       E == 1 ? "Add & Norm at d_model = 1 returns 0 for every token: LayerNorm needs more than "
                "one feature."
              : "Add & Norm keeps the input (residual) and re-centres every token (LayerNorm)."},
      {{"--heads 1", "one wide head: one softmax per query"},
       {"--heads 64", "64 heads of 8 dimensions each"},
       {"--mask causal --seq-len 8", "a decoder's self-attention"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("06_multi_head", "Multi-head attention", 2026);
  ch.cites("notes 001, 002 and 003");
  Knobs k;
  ch.option("--heads", k.heads, "number of heads H (must divide d_model)").range(1, 64);
  ch.option("--d-model", k.d_model, "features per token d_model").range(1, 1024);
  ch.option("--seq-len", k.seq_len, "tokens per sentence (sentence 1 has n-2 real ones)")
      .range(3, 64);
  ch.option("--mask", k.mask, "none, pad, or causal (padding and causal)")
      .one_of({"none", "pad", "causal"});
  ch.require_knobs([&] {
    return k.d_model % k.heads == 0
               ? std::string()
               : fmt::format("--heads {} does not divide --d-model {}: each head needs d_k = "
                             "d_model / heads columns",
                             k.heads, k.d_model);
  });
  return ch.run(argc, argv, [&] { lesson(ch, k); });
}
