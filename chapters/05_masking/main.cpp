// 05_masking: which keys a query may see. Padding, causal and window masks, -inf versus -1e9,
// and the masked_fill that did nothing.
//
//   scores  = Q K^T / sqrt(d_k)                              [n_q x n_k]
//   scores' = scores where allowed, -inf where blocked       (the mask)
//   weights = softmax(scores') per row, out = weights V       blocked weights are exactly 0
//
// Convention (masks.hpp): allowed(i, j) == true means query i MAY attend to key j. PyTorch's
// scaled_dot_product_attention means the same; nn.MultiheadAttention's masks mean the opposite.
//
//   05_masking [--mask none|pad|causal|window] [--window W] [--fill neg-inf|-1e9]
//              [--ids 5,2,1,0,0/1,3,1,4,0] [--vocab V] [--d-model D] [--d-k K]
//              [--seed N] [--out DIR] [--no-plots] [--dump DIR] [--step]
#include "attn/core/random.hpp"
#include "attn/layers/embedding.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"
#include "attn/ops/softmax.hpp"
#include "course/chapter.hpp"
#include "figures.hpp"
#include "inspect.hpp"
#include "token_ids.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using attn::AllowedMask;
using attn::Index;
using attn::Matrix;
using masking::blocked_weights;
using masking::BlockedWeights;
using masking::parse_ids;
using masking::show_mask;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kPad = 0;  // the padding id, as in note 001

struct Knobs {
  std::string mask = "pad";                 // the mask of note 001's batch
  std::string fill = "neg-inf";             // the score a blocked key gets
  std::string ids = "5,2,1,0,0/1,3,1,4,0";  // note 001's batch
  Index window = 1, vocab = 10, d_model = 512, d_k = 64;
};

// The largest weight that lands where the mask says it must not (0 when none does).
float largest_blocked_weight(const attn::Batch& weights, const attn::AllowedBatch& allowed) {
  return (!allowed.data().array()).select(weights.data().array(), 0.0f).maxCoeff();
}

void lesson(course::Chapter& ch, const Knobs& k) {
  attn::TokenIds ids;  // [B x n]
  parse_ids(k.ids, &ids);
  const float fill = k.fill == "neg-inf" ? -kInf : -1e9f;
  const Index B = ids.rows(), n = ids.cols();
  // Note 001 gives ids, no words: the labels are the ids, "<pad>" for 0.
  const auto by_token = [&](Index b, int precision = 4) {  // rows = queries, columns = keys
    return course::PrintOptions{.precision = precision,
                                .row_labels = course::token_labels(ids, b),
                                .col_labels = course::token_labels(ids, b)};
  };
  ch.intro("mask {}, fill {}, seed {}, d_model {}", k.mask, k.fill, ch.seed(), k.d_model);

  ch.step("A batch of sentences, padded to one length");
  ch.prose("Sentences differ in length; a batch is one rectangular tensor, so short ones are "
           "filled with the padding id 0. Vocabulary {}, id 0 = <pad>.",
           k.vocab);
  ch.show("ids", ids.cast<float>(), {.precision = 0, .row_labels = course::labels("sentence ", B)});
  for (Index b = 0; b < B; ++b) {
    const std::vector<std::string> tokens = course::token_labels(ids, b);
    const std::string line = fmt::format("sentence {}: [{}]", b + 1, fmt::join(tokens, " "));
    if (line.size() + 2 <= course::Chapter::kWidth) {
      ch.say("{}", line);
    } else {  // too long for one line: prose wraps between tokens (it never breaks inside [...])
      ch.prose("sentence {}: {}", b + 1, fmt::join(tokens, " "));
    }
  }
  const Index pads = (ids.array() == kPad).count();
  if (pads > 0) {
    ch.notice("the <pad> tokens are not words: nothing should attend to them.");
  } else {
    ch.notice("no <pad> here: every sentence fills the length. Where there is padding, nothing "
              "should attend to it.");
  }

  ch.step("Embedding + position: X = table[ids] + PE");
  attn::Rng rng(ch.seed());
  const Matrix table = attn::embedding_init(rng, k.vocab, k.d_model);  // [vocab x d_model]
  const Matrix pe = attn::sinusoidal_encoding(n, k.d_model);           // [n x d_model]
  // [embed]
  attn::Batch X = attn::embed(table, ids);   // [B, n, d_model]
  for (Index b = 0; b < B; ++b) X[b] += pe;  // every sentence gets the same PE
  // [embed]
  ch.say("table {} ~ N(0, 1) like nn.Embedding,  PE {} (chapter 07),  X {}", course::shape(table),
         course::shape(pe), course::shape(X));
  ch.show("X[0] (sentence 1, a row per token)", X[0],
          {.max_cols = 6, .row_labels = course::token_labels(ids, 0)});
  const Index pads0 = (ids.row(0).array() == kPad).count();  // sentence 1's <pad> rows
  if (pads0 == 0) {
    ch.notice("sentence 1 has no <pad>: each row is its word's embedding plus its position's PE.");
  } else if (pads0 == 1) {
    ch.notice("sentence 1's one <pad> row is table[0] + PE: every <pad> shares that embedding, "
              "and only PE tells them apart.");
  } else {
    ch.notice("{} <pad> rows of sentence 1 share one embedding; only PE tells them apart.",
              pads0 == 2 ? "both" : fmt::format("all {}", pads0));
  }

  ch.step("The mask allowed[b], built from the ids");
  // [padding_mask]
  attn::AllowedBatch allowed = attn::padding_masks(ids, kPad);  // [B, n, n]: <pad> keys blocked
  // [padding_mask]
  if (k.mask == "causal" || k.mask == "window") {
    const AllowedMask extra =
        k.mask == "causal" ? attn::causal_mask(n) : attn::window_mask(n, k.window);  // [n x n]
    for (Index b = 0; b < B; ++b) allowed[b] = allowed[b].array() && extra.array();
  } else if (k.mask == "none") {
    allowed.data().setConstant(true);
  }
  ch.flow({{"ids", ids}, {"allowed", allowed}});
  for (Index b = 0; b < B; ++b) {
    const std::vector<std::string> words = course::token_labels(ids, b);
    show_mask(ch, fmt::format("allowed[{}]", b), allowed[b], words, words);
  }
  const Index blocked = (!allowed.data().array()).count();
  Index empty_rows = 0;  // queries the mask leaves with no key at all
  for (Index b = 0; b < B; ++b) {
    for (Index i = 0; i < n; ++i) empty_rows += !allowed[b].row(i).any();
  }
  if (k.mask == "none") {
    ch.notice("--mask none: every query sees every key, padding included.");
  } else if (blocked == 0) {
    ch.notice("--mask {}, but nothing is blocked: no <pad> in these ids{}.", k.mask,
              k.mask == "pad" ? "" : fmt::format(", and the {} mask reaches every key", k.mask));
  } else if (k.mask == "pad") {
    ch.notice("columns are blocked, not rows: the padded *keys* are hidden; a padded query still "
              "looks at the real words{} (its output is thrown away later, e.g. by the loss).",
              empty_rows > 0 ? " of its sentence, where it has any" : "");
  } else if (k.mask == "causal") {
    ch.notice("padding AND causal: a decoder combines both masks with a logical and.");
  } else {
    ch.notice("padding AND window: the two masks combine with a logical and.");
  }
  if (empty_rows > 0) {
    ch.notice("{} {} no key left at all: step 8 shows what a softmax makes of such a row.",
              empty_rows, empty_rows == 1 ? "query has" : "queries have");
  }
  ch.dump("ids", Matrix(ids.cast<float>()));
  ch.dump("embedding_table", table);
  ch.dump("pe", pe);
  ch.dump("X", X);
  ch.dump("allowed", allowed);

  ch.step("Masked attention, Q = K = V = X: softmax(mask(Q K^T / sqrt(d_k))) V");
  const float scale = 1.0f / std::sqrt(static_cast<float>(k.d_k));
  // [masked_attention]
  const attn::BatchAttentionResult r = attn::attention(  // out [B, n, d_model], weights [B, n, n]
      X, X, X, {.scale = scale, .allowed = allowed, .blocked_score = fill});
  // [masked_attention]
  if (k.d_k * 8 == k.d_model) {
    ch.say("Note 001 scales by 1/sqrt(d_k) with d_k = {} = d_model / 8 (its heads' width, "
           "chapter 06).",
           k.d_k);
  } else {
    ch.say("Note 001 scales by 1/sqrt(d_k) with d_k = d_model / 8 (its heads' width, chapter 06);"
           "\nhere d_k = {} (--d-k) and d_model = {}.",
           k.d_k, k.d_model);
  }
  const Matrix raw0 = (X[0] * X[0].transpose()) * scale;  // [n x n], sentence 1, before the mask
  const Matrix scores0 = allowed[0].select(raw0, fill);   // blocked scores -> the fill
  course::PrintOptions score_layout = by_token(0, 1);
  // -1e9 prints as -1000000000.0: four columns of it (and "...") fit 100 columns, eight do not.
  if (fill != -kInf) score_layout.max_cols = 4;
  ch.show("scores[0] after the mask (row = query, column = key)", scores0, score_layout);
  for (Index b = 0; b < B; ++b) ch.show(fmt::format("weights[{}]", b), r.weights[b], by_token(b));
  ch.flow({{"X", X}, {"weights", r.weights}, {"out", r.out}});
  ch.say("largest weight on a blocked key: {:g}", largest_blocked_weight(r.weights, allowed));
  const BlockedWeights bw = blocked_weights(r.weights, allowed);
  // What the notices below promise: a query with a key left gives every blocked key exactly 0
  // (exp(-inf) = 0, and exp(-1e9 - max) underflows to 0), and with -inf a query with none gets
  // zeros (the library's rule for an empty row).
  if (bw.with_keys != 0.0f || (fill == -kInf && bw.without_keys != 0.0f)) {
    throw std::runtime_error(fmt::format("a blocked key got weight {:g}: the mask did not hold",
                                         std::max(bw.with_keys, bw.without_keys)));
  }
  if (blocked == 0) {
    ch.notice("nothing is blocked in this batch: no score is replaced, every key is in the "
              "softmax.");
  } else if (fill == -kInf) {
    ch.notice("blocked keys get weight exactly 0: exp(-inf) = 0, not a small number.");
  } else if (empty_rows == 0) {
    ch.notice("blocked keys get weight exactly 0: exp(-1e9 - max) underflows to 0 in float, as "
              "exp(-inf) = 0 would.");
  } else {
    ch.notice("with --fill -1e9 a blocked key keeps a score: where a query has keys left, "
              "exp(-1e9 - max) underflows to exactly 0, but {} with none spread{} the weight "
              "evenly over blocked keys ({:g} each).",
              empty_rows == 1 ? "the query" : fmt::format("the {} queries", empty_rows),
              empty_rows == 1 ? "s" : "", bw.without_keys);
  }
  // Why the rows are nearly one-hot at the default sizes: |x_i|^2 (embedding ~ d_model, PE
  // d_model / 2) against dot products of unrelated vectors, ~sqrt(d_model) in size. The scores
  // compared are sentence 1's words' (not <pad>), before the mask.
  std::vector<Index> words0;  // positions of sentence 1's words
  for (Index i = 0; i < n; ++i) {
    if (ids(0, i) != kPad) words0.push_back(i);
  }
  const Index nw = std::ssize(words0);
  double diag = 0.0, off = 0.0, least_self = 1.0;  // least_self: the smallest w(i, i) of a word
  for (const Index i : words0) {
    for (const Index j : words0) (i == j ? diag : off) += raw0(i, j);
    least_self = std::min(least_self, double{r.weights[0](i, i)});
  }
  diag /= std::max<Index>(nw, 1);
  off /= std::max<Index>(nw * (nw - 1), 1);  // the mean over pairs of different words
  if (nw == 0) {
    ch.notice("sentence 1 is padding only: it has no words whose scores to compare.");
  } else if (least_self >= 0.99) {
    ch.notice("scores of sentence 1's words: {:.0f} on the diagonal, {:.0f} off it (means): each "
              "word attends almost only to itself, as in chapter 03 (try --d-model 16 --d-k 16).",
              diag, off);
  } else {
    ch.notice("scores of sentence 1's words: {:.1f} on the diagonal, {:.1f} off it (means): with "
              "these sizes a word keeps as little as {:.2f} of its weight for itself, and the "
              "other keys it may see get the rest.",
              diag, off, least_self);
  }
  ch.dump("scale", Matrix(Matrix::Constant(1, 1, scale)));  // [1 x 1], for replaying the dump
  ch.dump("weights", r.weights);
  ch.dump("out", r.out);
  attn::Batch batch_scores(B, n, n);  // [B, n, n]: what each sentence's softmax read, for the twin
  for (Index b = 0; b < B; ++b) {
    batch_scores[b] = attn::attention_scores(  // [n x n], blocked keys at the fill
        X[b], X[b], {.scale = scale, .allowed = attn::MaskView(allowed, b), .blocked_score = fill});
  }
  masking::draw_batch_weights(ch.plot(), r.weights, batch_scores, allowed, ids,
                              k.ids == Knobs{}.ids ? "Note 001's batch" : "The --ids batch",
                              k.mask);

  ch.step("Sidebar: the masked_fill that did nothing");
  ch.prose("Note 001's code says   scores.masked_fill(mask, -1e9)   and drops the result. "
           "PyTorch's masked_fill returns a new tensor (masked_fill_ is the in-place one), so the "
           "scores reach the softmax unmasked. Here is what that computes:");
  // [bug]
  const attn::BatchAttentionResult unmasked = attn::attention(X, X, X, {.scale = scale});
  // [bug]
  ch.show("weights[0] with the mask dropped", unmasked.weights[0], by_token(0));
  const attn::AllowedBatch pad_mask = attn::padding_masks(ids, kPad);  // the padding, [B, n, n]
  const attn::BatchAttentionResult kept = attn::attention(  // the same, with the padding mask
      X, X, X, {.scale = scale, .allowed = pad_mask, .blocked_score = fill});
  ch.say("largest weight on a <pad> key: {:.4g}   (with the mask: {:g})",
         largest_blocked_weight(unmasked.weights, pad_mask),
         largest_blocked_weight(kept.weights, pad_mask));
  if (pads > 0) {
    ch.notice("nothing crashes and every row still sums to 1: only a test that checks blocked "
              "weights are exactly 0 catches it (tests/attn/ops/test_masked_attention.cpp, "
              "BlockedWeightsAreExactlyZero...).");
  } else {
    ch.notice("these ids have no <pad>, so here the dropped mask changes nothing. With padding it "
              "leaks weight onto the <pad> keys, nothing crashes and every row still sums to 1: "
              "only a test that checks blocked weights are exactly 0 catches it "
              "(tests/attn/ops/test_masked_attention.cpp, BlockedWeightsAreExactlyZero...).");
  }

  ch.step("The causal mask: token i sees tokens j <= i, built two ways");
  const Index nc = 5, dc = 4;  // a small example whose numbers fit on a line
  const std::vector<std::string> q_i = course::labels("q^", nc), k_j = course::labels("k^", nc);
  const Matrix Qc = attn::random_normal(rng, nc, dc);         // [5 x 4]
  const Matrix Kc = attn::random_normal(rng, nc, dc);         // [5 x 4]
  const Matrix Vc = attn::random_normal(rng, nc, dc);         // [5 x 4]
  const float sc = 1.0f / std::sqrt(static_cast<float>(dc));  // 0.5, exact
  const Matrix scores = (Qc * Kc.transpose()) * sc;           // [5 x 5]
  // [causal_two_ways]
  // Note 004: a lower-triangular 0/1 matrix; where it is 0, the score becomes -inf.
  const Matrix tril = Matrix::Ones(nc, nc).triangularView<Eigen::Lower>();  // [5 x 5] of 0/1
  Matrix by_tril = scores;                                                  // [5 x 5]
  for (Index i = 0; i < nc; ++i)
    for (Index j = 0; j < nc; ++j)
      if (tril(i, j) == 0.0f) by_tril(i, j) = -kInf;
  // Note 003: an additive mask, 0 on and below the diagonal and -inf above, added to the scores.
  const Matrix additive = attn::additive_mask(attn::causal_mask(nc));  // [5 x 5]
  const Matrix by_sum = scores + additive;                             // [5 x 5]
  // [causal_two_ways]
  const course::PrintOptions grid{.precision = 0, .row_labels = q_i, .col_labels = k_j};
  ch.show("tril (note 004: 1 = keep)", tril, grid);
  ch.show("additive mask (note 003: scores += mask)", additive, grid);
  const Matrix w_tril = attn::softmax_rows(by_tril), w_sum = attn::softmax_rows(by_sum);  // [5 x 5]
  const AllowedMask causal_nc = attn::causal_mask(nc);                                    // [5 x 5]
  const attn::AttentionResult causal =
      attn::attention(Qc, Kc, Vc, {.allowed = causal_nc});  // weights [5 x 5]
  ch.show("weights (causal)", causal.weights, {.row_labels = q_i, .col_labels = k_j});
  const double two_ways = attn::max_abs_diff(w_tril, w_sum);
  const double vs_library = attn::max_abs_diff(w_tril, causal.weights);
  ch.say("max |tril way - additive way| = {:g},  max |either - attn::attention| = {:g}", two_ways,
         vs_library);
  if (two_ways != 0.0 || vs_library != 0.0) {
    throw std::runtime_error("the two ways of building the causal mask, and attn::attention, "
                             "should give bit-for-bit the same weights");
  }
  ch.notice("the same -inf in the same places: bit-for-bit the same weights.");
  ch.notice("row 1 can only see itself (weight 1); row 5 sees everything.");
  // What the mask promises: change the last token, and outputs 1..4 do not move by a single bit.
  Matrix Qc2 = Qc, Kc2 = Kc, Vc2 = Vc;  // [5 x 4] each
  Qc2.row(nc - 1).setConstant(7.0f);
  Kc2.row(nc - 1).setConstant(-3.0f);
  Vc2.row(nc - 1).setConstant(100.0f);
  const attn::AttentionResult changed = attn::attention(Qc2, Kc2, Vc2, {.allowed = causal_nc});
  const double earlier_moved =
      attn::max_abs_diff(changed.out.topRows(nc - 1), causal.out.topRows(nc - 1));
  ch.say("change token 5 entirely: outputs 1-4 move by {:g}, output 5 by {:.3g}", earlier_moved,
         attn::max_abs_diff(changed.out.bottomRows(1), causal.out.bottomRows(1)));
  if (earlier_moved != 0.0) {
    throw std::runtime_error("the causal mask let token 5 move an earlier output");
  }
  ch.notice("so all positions train in parallel without any of them seeing the answer ahead of "
            "it.");
  ch.dump("causal_Q", Qc);
  ch.dump("causal_K", Kc);
  ch.dump("causal_V", Vc);
  ch.dump("causal_weights", causal.weights);
  ch.dump("causal_out", causal.out);

  ch.step("A local window: token i sees |i - j| <= {} (note 002's truncated attention)", k.window);
  const AllowedMask band = attn::window_mask(nc, k.window);  // [5 x 5]
  show_mask(ch, "window", band, q_i, k_j);
  const attn::AttentionResult local = attn::attention(Qc, Kc, Vc, {.allowed = band});
  ch.show("weights (window)", local.weights, {.row_labels = q_i, .col_labels = k_j});
  if (2 * k.window + 1 < nc) {
    ch.notice("each row keeps at most {} key{}: a kernel that skips blocked entries does n(2W+1) "
              "work, not n^2.",
              2 * k.window + 1, k.window == 0 ? "" : "s");
  } else {
    ch.notice("W = {} reaches all {} keys from every query: the window blocks nothing here. It "
              "saves work (n(2W+1) instead of n^2) only when 2W+1 < n.",
              k.window, nc);
  }

  ch.step("-1e9 versus -inf, and a query with nothing to attend to");
  AllowedMask holey = attn::causal_mask(nc);  // [5 x 5]
  holey.row(2).setConstant(false);            // query 3 may attend to nothing at all
  const attn::AttentionResult with_inf = attn::attention(Qc, Kc, Vc, {.allowed = holey});
  const attn::AttentionResult with_big =
      attn::attention(Qc, Kc, Vc, {.allowed = holey, .blocked_score = -1e9f});
  Matrix ordinary_inf = with_inf.weights, ordinary_big = with_big.weights;  // [5 x 5]
  ordinary_inf.row(2).setZero();                                            // all but row 3
  ordinary_big.row(2).setZero();
  const double fills_differ = attn::max_abs_diff(ordinary_inf, ordinary_big);
  ch.say("ordinary rows: max |weights(-inf) - weights(-1e9)| = {:g}", fills_differ);
  if (fills_differ != 0.0) {
    throw std::runtime_error("-inf and -1e9 gave different weights in rows that have keys left");
  }
  ch.notice("exp(-1e9 - max) underflows to exactly 0: the same weights, bit for bit.");
  // Row 3, every score blocked. The textbook "stable" softmax without a guard: exp(s - max)
  // with s = max = -inf is exp(NaN).
  const float naive_weight = std::exp(-kInf - (-kInf)) / (5.0f * std::exp(-kInf - (-kInf)));
  if (!std::isnan(naive_weight)) {  // IEEE 754 says NaN; only a non-IEEE build gets here
    throw std::runtime_error("exp(-inf - (-inf)) is not NaN in this build: it does not follow "
                             "IEEE 754 (was it compiled with -ffast-math?)");
  }
  const Matrix mean_v = Vc.colwise().mean();  // [1 x 4]
  ch.say("query 3 with every key blocked (mean of V = ({:.4f})):\n"
         "  fill -1e9, softmax:                  weights all {:.2f}, out = mean of V\n"
         "  fill -inf, softmax without a guard:  weights {} (exp(-inf - (-inf)) = exp(NaN))\n"
         "  fill -inf, attn::attention:          weights all {:g}, out all {:g}",
         fmt::join(mean_v.row(0), ", "), with_big.weights(2, 0), "NaN",
         with_inf.weights.row(2).maxCoeff(), with_inf.out.row(2).cwiseAbs().maxCoeff());
  ch.notice("-1e9 silently averages values the query was told to ignore; NaN poisons everything "
            "it touches. The library defines the empty row as zeros, as recent PyTorch does.");

  ch.step("Four masks on the same scores (figure)");
  const Index nf = 8;
  const Matrix Qf = attn::random_normal(rng, nf, 16), Kf = attn::random_normal(rng, nf, 16);
  const Matrix Vf = attn::random_normal(rng, nf, 16);  // Q, K, V [8 x 16]
  std::vector<int> last_two_padded(nf, 1);
  last_two_padded[nf - 1] = last_two_padded[nf - 2] = kPad;
  const std::vector<std::pair<std::string, AllowedMask>> four = {
      {"no mask", attn::full_mask(nf, nf)},
      {"padding (last 2 keys)", attn::padding_mask(last_two_padded, nf, kPad)},
      {"causal", attn::causal_mask(nf)},
      {fmt::format("window, W = {}", k.window), attn::window_mask(nf, k.window)}};
  std::vector<course::HeatmapPanel> panels;
  for (const auto& [title, mask] : four) {
    const attn::AttentionResult a = attn::attention(Qf, Kf, Vf, {.allowed = mask});
    ch.say("{:<22} largest weight {:.3f}, weights exactly 0: {:2} of {}", title,
           a.weights.maxCoeff(), (a.weights.array() == 0.0f).count(), nf * nf);
    const Matrix scores = attn::attention_scores(Qf, Kf, {.allowed = mask});  // [8 x 8], the twin's
    panels.push_back({a.weights, title, {}, {}, mask, scores});
  }
  masking::draw_four_masks(ch.plot(), panels);
  ch.notice("a mask only removes keys; the softmax hands their share to the keys left.");

  ch.finish(
      {fill == -kInf
           ? "A mask is data, not code: true = may attend, applied as -inf before the softmax."
           : "A mask is data, not code: true = may attend, applied as a blocked score before the "
             "softmax (-inf; -1e9 here).",
       "Padding masks keys (columns); causal and window masks are shapes in the n x n grid.",
       fill == -kInf || empty_rows == 0
           ? "Blocked weights are exactly 0, so blocked tokens cannot change an output by one bit."
           : "Blocked weights are exactly 0 wherever a query has a key left; with -1e9, a query "
             "with none averaged the blocked values.",
       "-1e9 and -inf agree until a row has nothing left; then -1e9 averages and -inf needs a "
       "rule.",
       "A dropped masked_fill result passes every shape check: test the zeros."},
      {{"--mask causal", "padding and causal together, as a decoder"},
       {"--fill -1e9 --ids 0,0,0/1,2,3", "a sentence of padding only"},
       {"--d-model 16 --d-k 16", "short vectors: the weights spread out"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("05_masking", "Masks", 2026);
  ch.cites("notes 001, 002, 003 and 004");
  Knobs k;
  ch.option("--mask", k.mask,
            "mask of the note-001 batch: none, pad, causal (pad + causal) or window (pad + window)")
      .one_of({"none", "pad", "causal", "window"});
  ch.option("--window", k.window, "W of the window mask: query i sees keys |i - j| <= W")
      .range(0, 64);
  ch.option("--fill", k.fill, "score given to a blocked key: neg-inf or -1e9")
      .one_of({"neg-inf", "-1e9"});
  ch.option("--ids", k.ids,
            "token ids of the batch, sentences separated by '/', padded with 0; at most 16 "
            "sentences of at most 64 tokens")
      .check("IDS", [](const std::string& s) { return parse_ids(s); });
  ch.option("--vocab", k.vocab,
            "vocabulary size (ids must be below it); 100000 with --d-model 2048: a 0.8 GB table")
      .range(2, 100000);
  ch.option("--d-model", k.d_model, "features per token").range(2, 2048);
  ch.option("--d-k", k.d_k, "the d_k in the scale 1/sqrt(d_k), as note 001 uses it").range(1, 2048);
  ch.require_knobs([&] {
    attn::TokenIds ids;  // [B x n]
    parse_ids(k.ids, &ids);
    return ids.maxCoeff() < k.vocab
               ? std::string()
               : fmt::format("--ids: id {} is not below --vocab {}", ids.maxCoeff(), k.vocab);
  });
  return ch.run(argc, argv, [&] { lesson(ch, k); });
}
