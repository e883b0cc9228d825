// gradient_check.cpp: central differences in double against every backward pass.
#include "attn/training/gradient_check.hpp"

#include "attn/models/seq2seq.hpp"

#include "attn/core/memory.hpp"
#include "attn/core/random.hpp"
#include "attn/layers/embedding.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/grouped_query.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/transformer.hpp"
#include "attn/models/attention_only.hpp"
#include "attn/models/seq2seq.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/loss.hpp"
#include "attn/ops/masks.hpp"
#include "attn/ops/rope.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <utility>

namespace attn {

// ---- The report ---------------------------------------------------------------------------------

double TensorCheck::relative_error() const {
  if (std::isnan(max_abs_error) || std::isnan(scale)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (max_abs_error == 0.0) return 0.0;
  const double denominator = std::max(scale, floor);
  // The numeric gradient is exactly 0 and the analytic one is not.
  if (denominator == 0.0) return std::numeric_limits<double>::infinity();
  return max_abs_error / denominator;
}

void GradientReport::add(TensorCheck check) {
  tensors.push_back(std::move(check));
  double largest = 0.0;
  for (const TensorCheck& t : tensors) {
    if (t.scale > largest) largest = t.scale;  // a NaN scale is skipped: its error is NaN anyway
  }
  for (TensorCheck& t : tensors) t.floor = kScaleFloorFraction * largest;
}

double GradientReport::worst() const {
  if (tensors.empty()) return 0.0;
  return worst_tensor().relative_error();
}

const TensorCheck& GradientReport::worst_tensor() const {
  require(!tensors.empty(), "GradientReport::worst_tensor", "the report has no tensors");
  const TensorCheck* worst = &tensors.front();
  for (const TensorCheck& t : tensors) {
    const double e = t.relative_error();
    if (std::isnan(e)) return t;
    if (e > worst->relative_error()) worst = &t;
  }
  return *worst;
}

// ---- The core -----------------------------------------------------------------------------------

MatrixD numeric_gradient(Eigen::Ref<MatrixD> value, const LossFunction& loss, double step) {
  require(std::isfinite(step) && step > 0.0, "numeric_gradient",
          [&] { return "step " + std::to_string(step) + ": it must be finite and > 0"; });
  MatrixD numeric(value.rows(), value.cols());  // [rows x cols]
  for (Index r = 0; r < value.rows(); ++r) {
    for (Index c = 0; c < value.cols(); ++c) {
      double& entry = value(r, c);
      const double saved = entry;
      const double h = step * std::max(1.0, std::abs(saved));
      const double plus = saved + h, minus = saved - h;  // the values really stored
      try {
        entry = plus;
        const double l_plus = loss();
        entry = minus;
        const double l_minus = loss();
        entry = saved;
        numeric(r, c) = (l_plus - l_minus) / (plus - minus);
      } catch (...) {
        entry = saved;
        throw;
      }
    }
  }
  return numeric;
}

TensorCheck compare_gradients(std::string name, const MatrixViewD& analytic,
                              const MatrixViewD& numeric) {
  require(analytic.rows() == numeric.rows() && analytic.cols() == numeric.cols(),
          "compare_gradients", [&] {
            return name + ": the analytic gradient is " + shape_str(analytic) +
                   " but the numeric one " + shape_str(numeric) + ": they must have one shape";
          });
  TensorCheck t;
  t.name = std::move(name);
  t.entries = numeric.size();
  if (numeric.size() == 0) return t;
  t.max_abs_error = (analytic - numeric).cwiseAbs().maxCoeff<Eigen::PropagateNaN>();
  t.scale = numeric.cwiseAbs().maxCoeff<Eigen::PropagateNaN>();
  return t;
}

TensorCheck check_tensor(std::string name, Eigen::Ref<MatrixD> value, const MatrixViewD& analytic,
                         const LossFunction& loss, double step) {
  require(analytic.rows() == value.rows() && analytic.cols() == value.cols(), "check_tensor", [&] {
    return name + " is " + shape_str(value) + " but its analytic gradient is " +
           shape_str(analytic) + ": they must have one shape";
  });
  require_apart("check_tensor", {{name, memory_of(value)}},
                {{"its analytic gradient", memory_of(analytic)}});
  const MatrixD numeric = numeric_gradient(value, loss, step);
  return compare_gradients(std::move(name), analytic, numeric);
}

// ---- The course's layers ------------------------------------------------------------------------

namespace {

constexpr Index kN = 5;      // tokens
constexpr Index kModel = 8;  // d_model
constexpr Index kHeads = 2;  // heads, d_k = 4
constexpr Index kFF = 16;    // d_ff
constexpr Index kVocab = 7;  // the embedding's and the loss's vocabulary
constexpr int kMaxDraws = 1000;

MatrixD normal(Rng& rng, Index rows, Index cols, double stddev = 1.0) {
  MatrixD m(rows, cols);  // [rows x cols], filled row by row
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < cols; ++c) m(r, c) = rng.normal(0.0, stddev);
  }
  return m;
}

// L = sum(out * R), elementwise: dL/d(out) = R.
double dot(const MatrixD& out, const MatrixD& R) { return (out.array() * R.array()).sum(); }

// Every bias, gamma and beta moved by N(0, 0.2^2): no bias 0, no gamma 1 (the header says why).
template <typename Layer>
void perturb_vectors(Rng& rng, Layer& layer) {
  for (auto& p : parameters(layer)) {
    if (!p.is_vector) continue;
    for (Index c = 0; c < p.value.cols(); ++c) p.value(0, c) += rng.normal(0.0, 0.2);
  }
}

template <typename Make>
auto draw_until_smooth(const char* layer, Make&& make, double margin = kReluMargin) {
  for (int draw = 0; draw < kMaxDraws; ++draw) {
    auto c = make();
    if (c.relu_margin() >= margin) return c;
  }
  require_failed("check_all_layers", std::string(layer) + ": no case with every ReLU input at "
                                                          "least kReluMargin from 0");
}

GradientReport check_linear(Rng& rng, double h) {
  LinearD layer = cast<double>(linear_init(rng, kModel, 6));
  perturb_vectors(rng, layer);
  MatrixD x = normal(rng, kN, kModel);   // [n x 8]
  const MatrixD R = normal(rng, kN, 6);  // [n x 6]
  const LossFunction loss = [&] { return dot(linear_forward(layer, x), R); };
  LinearD grads = zeros_like(layer);
  const MatrixD dx = linear_backward(layer, x, R, grads);
  GradientReport report{"linear", {}};
  report.add(check_tensor("x", x, dx, loss, h));
  check_parameters(report, layer, grads, loss, h);
  return report;
}

GradientReport check_layer_norm(Rng& rng, double h) {
  LayerNormD norm = cast<double>(layer_norm_init(kModel));
  perturb_vectors(rng, norm);
  MatrixD x = normal(rng, kN, kModel);  // [n x 8]
  x.col(0).array() += 3.0;              // rows with a mean far from 0: the mean term matters
  const MatrixD R = normal(rng, kN, kModel);
  const LossFunction loss = [&] { return dot(layer_norm_forward(norm, x), R); };
  LayerNormCache cache;
  layer_norm_forward(norm, x, &cache);
  LayerNormD grads = zeros_like(norm);
  const MatrixD dx = layer_norm_backward(norm, x, cache, R, grads);
  GradientReport report{"layer norm", {}};
  report.add(check_tensor("x", x, dx, loss, h));
  check_parameters(report, norm, grads, loss, h);
  return report;
}

struct FfnCase {
  FeedForwardD ff;
  MatrixD x, R;
  FeedForwardCacheOf<double> cache;
  double relu_margin() const { return cache.pre_activation.cwiseAbs().minCoeff(); }
};

GradientReport check_ffn(Rng& rng, double h) {
  FfnCase c = draw_until_smooth("feed-forward", [&] {
    FfnCase k{cast<double>(ffn_init(rng, kModel, kFF)), {}, {}, {}};
    perturb_vectors(rng, k.ff);
    k.x = normal(rng, kN, kModel);
    k.R = normal(rng, kN, kModel);
    ffn_forward(k.ff, k.x, &k.cache);
    return k;
  });
  const LossFunction loss = [&] { return dot(ffn_forward(c.ff, c.x), c.R); };
  FeedForwardD grads = zeros_like(c.ff);
  const MatrixD dx = ffn_backward(c.ff, c.x, c.cache, c.R, grads);
  GradientReport report{"feed-forward", {}};
  report.add(check_tensor("x", c.x, dx, loss, h));
  check_parameters(report, c.ff, grads, loss, h);
  return report;
}

GradientReport check_embedding(Rng& rng, double h) {
  MatrixD table = embedding_init(rng, kVocab, kModel).cast<double>();  // [vocab x 8]
  // Id 3 three times (its row sums three rows of R), ids 2, 4 and 6 never (rows of exact 0).
  const int ids_array[] = {3, 1, 3, 0, 5, 3};
  const std::span<const int> ids(ids_array);
  const MatrixD R = normal(rng, static_cast<Index>(ids.size()), kModel);
  const LossFunction loss = [&] { return dot(embedding_forward(table, ids), R); };
  MatrixD d_table = MatrixD::Zero(kVocab, kModel);
  embedding_backward<double>(ids, R, d_table);
  GradientReport report{"embedding", {}};
  report.add(check_tensor("weight", table, d_table, loss, h));
  return report;
}

GradientReport check_attention(Rng& rng, double h, bool causal) {
  // causal: Q, K, V [5 x 4], query i sees keys 0..i. Otherwise 4 queries over 6 keys, d_v = 3,
  // keys 4 and 5 padding, and query 2 allowed no key at all.
  const Index n_q = causal ? kN : 4, n_k = causal ? kN : 6, d_v = causal ? 4 : 3;
  AllowedMask allowed = causal ? causal_mask(kN) : full_mask(n_q, n_k);
  if (!causal) {
    allowed.rightCols(2).setConstant(false);
    allowed.row(2).setConstant(false);
  }
  MatrixD Q = normal(rng, n_q, 4), K = normal(rng, n_k, 4), V = normal(rng, n_k, d_v);
  const MatrixD R = normal(rng, n_q, d_v);
  const AttentionOptions opts{.allowed = allowed};
  const LossFunction loss = [&] { return dot(attention(Q, K, V, opts).out, R); };
  const AttentionResultD result = attention(Q, K, V, opts);
  const AttentionGradsD g = attention_backward(Q, K, V, result.weights, R, opts);
  GradientReport report{causal ? "attention, causal" : "attention, padding + an empty row", {}};
  report.add(check_tensor("Q", Q, g.dQ, loss, h));
  report.add(check_tensor("K", K, g.dK, loss, h));
  report.add(check_tensor("V", V, g.dV, loss, h));
  return report;
}

GradientReport check_self_attention(Rng& rng, double h) {
  MultiHeadAttentionD mha = cast<double>(multi_head_init(rng, kModel, kHeads));
  perturb_vectors(rng, mha);
  MatrixD x = normal(rng, kN, kModel);
  const MatrixD R = normal(rng, kN, kModel);
  const AllowedMask causal = causal_mask(kN);
  const MultiHeadOptions opts{.allowed = causal};
  const LossFunction loss = [&] { return dot(multi_head_forward(mha, x, x, x, opts).out, R); };
  const MultiHeadResultD cache = multi_head_forward(mha, x, x, x, opts);
  MultiHeadAttentionD grads = zeros_like(mha);
  const MultiHeadInputGradsOf<double> g = multi_head_backward(mha, x, x, x, cache, R, grads);
  GradientReport report{"multi-head self-attention, causal", {}};
  report.add(check_tensor("x", x, g.d_query + g.d_key + g.d_value, loss, h));
  check_parameters(report, mha, grads, loss, h);
  return report;
}

GradientReport check_cross_attention(Rng& rng, double h) {
  MultiHeadAttentionD mha = cast<double>(multi_head_init(rng, kModel, kHeads));
  perturb_vectors(rng, mha);
  const Index n_q = 4, n_k = 6;
  MatrixD query = normal(rng, n_q, kModel), key = normal(rng, n_k, kModel),
          value = normal(rng, n_k, kModel);
  const MatrixD R = normal(rng, n_q, kModel);
  AllowedMask padding = full_mask(n_q, n_k);
  padding.col(n_k - 1).setConstant(false);  // the last key is padding
  const MultiHeadOptions opts{.allowed = padding};
  const LossFunction loss = [&] {
    return dot(multi_head_forward(mha, query, key, value, opts).out, R);
  };
  const MultiHeadResultD cache = multi_head_forward(mha, query, key, value, opts);
  MultiHeadAttentionD grads = zeros_like(mha);
  const MultiHeadInputGradsOf<double> g =
      multi_head_backward(mha, query, key, value, cache, R, grads);
  GradientReport report{"multi-head cross-attention, padding", {}};
  report.add(check_tensor("query", query, g.d_query, loss, h));
  report.add(check_tensor("key", key, g.d_key, loss, h));
  report.add(check_tensor("value", value, g.d_value, loss, h));
  check_parameters(report, mha, grads, loss, h);
  return report;
}

struct EncoderCase {
  EncoderLayerD layer;
  MatrixD x, R;
  EncoderLayerCacheOf<double> cache;
  double relu_margin() const { return cache.ff.pre_activation.cwiseAbs().minCoeff(); }
};

GradientReport check_encoder_layer(Rng& rng, double h, NormPlacement placement) {
  AllowedMask padding = full_mask(kN, kN);
  padding.col(kN - 1).setConstant(false);  // the last token is padding
  const EncoderLayerOptions opts{.allowed = padding};
  EncoderCase c = draw_until_smooth("encoder layer", [&] {
    EncoderCase k{
        cast<double>(encoder_layer_init(rng, kModel, kHeads, kFF, placement)), {}, {}, {}};
    perturb_vectors(rng, k.layer);
    k.x = normal(rng, kN, kModel);
    k.R = normal(rng, kN, kModel);
    encoder_layer_forward(k.layer, k.x, opts, &k.cache);
    return k;
  });
  const LossFunction loss = [&] { return dot(encoder_layer_forward(c.layer, c.x, opts), c.R); };
  EncoderLayerD grads = zeros_like(c.layer);
  const MatrixD dx = encoder_layer_backward(c.layer, c.cache, c.R, grads);
  GradientReport report{
      placement == NormPlacement::post ? "encoder layer, post-norm" : "encoder layer, pre-norm",
      {}};
  report.add(check_tensor("x", c.x, dx, loss, h));
  check_parameters(report, c.layer, grads, loss, h);
  return report;
}

struct DecoderCase {
  DecoderLayerD layer;
  MatrixD x, memory, R;
  DecoderLayerCacheOf<double> cache;
  double relu_margin() const { return cache.ff.pre_activation.cwiseAbs().minCoeff(); }
};

GradientReport check_decoder_layer(Rng& rng, double h, NormPlacement placement) {
  const Index n_s = 6;  // memory rows
  const AllowedMask causal = causal_mask(kN);
  AllowedMask padding = full_mask(kN, n_s);
  padding.col(n_s - 1).setConstant(false);  // the source's last token is padding
  const DecoderLayerOptions opts{.self_allowed = causal, .cross_allowed = padding};
  DecoderCase c = draw_until_smooth("decoder layer", [&] {
    DecoderCase k{
        cast<double>(decoder_layer_init(rng, kModel, kHeads, kFF, placement)), {}, {}, {}, {}};
    perturb_vectors(rng, k.layer);
    k.x = normal(rng, kN, kModel);
    k.memory = normal(rng, n_s, kModel);
    k.R = normal(rng, kN, kModel);
    decoder_layer_forward(k.layer, k.x, k.memory, opts, &k.cache);
    return k;
  });
  const LossFunction loss = [&] {
    return dot(decoder_layer_forward(c.layer, c.x, c.memory, opts), c.R);
  };
  DecoderLayerD grads = zeros_like(c.layer);
  const DecoderLayerInputGradsOf<double> g =
      decoder_layer_backward(c.layer, c.memory, c.cache, c.R, grads);
  GradientReport report{
      placement == NormPlacement::post ? "decoder layer, post-norm" : "decoder layer, pre-norm",
      {}};
  report.add(check_tensor("x", c.x, g.d_x, loss, h));
  report.add(check_tensor("memory", c.memory, g.d_memory, loss, h));
  check_parameters(report, c.layer, grads, loss, h);
  return report;
}

GradientReport check_cross_entropy(Rng& rng, double h) {
  MatrixD logits = normal(rng, 6, kVocab, 2.0);  // [6 x 7]
  // Id 0 is padding and ignored: rows 1 and 4 count for nothing, and have a zero gradient.
  const int targets_array[] = {3, 0, 5, 1, 0, 6};
  const std::span<const int> targets(targets_array);
  const CrossEntropyOptions opts{.ignore_index = 0, .label_smoothing = 0.1};
  const LossFunction loss = [&] { return cross_entropy(logits, targets, opts).loss; };
  const CrossEntropyD result = cross_entropy(logits, targets, opts);
  GradientReport report{"softmax cross-entropy, ignore id + smoothing 0.1", {}};
  report.add(check_tensor("logits", logits, result.d_logits, loss, h));
  return report;
}

// The whole encoder-decoder of the training chapter on a padded batch of two pairs: every
// parameter of the model through embeddings, both stacks, the final norms (pre-norm), the
// generator (tied to tgt_embed when `tied`) and the mean cross-entropy over the batch.
struct ModelCase {
  Seq2SeqD model;
  Seq2SeqBatch batch;
  double relu_margin() const {
    double margin = std::numeric_limits<double>::infinity();
    for (Index b = 0; b < batch.src.rows(); ++b) {
      Seq2SeqCacheOf<double> cache;
      seq2seq_forward(model, {batch.src.row(b).data(), static_cast<std::size_t>(batch.src.cols())},
                      {batch.tgt_in.row(b).data(), static_cast<std::size_t>(batch.tgt_in.cols())},
                      &cache);
      for (const auto& l : cache.encoder)
        margin = std::min(margin, l.ff.pre_activation.cwiseAbs().minCoeff());
      for (const auto& l : cache.decoder)
        margin = std::min(margin, l.ff.pre_activation.cwiseAbs().minCoeff());
    }
    return margin;
  }
};

GradientReport check_model(Rng& rng, double h, NormPlacement placement, bool tied) {
  // Pair 0 is full; pair 1 has a padded source token and a padded last target (PAD = 0).
  Seq2SeqBatch batch{TokenIds(2, 5), TokenIds(2, 4), TokenIds(2, 4)};
  batch.src << 2, 3, 4, 5, 6, /**/ 6, 4, 2, 3, 0;
  batch.tgt_in << 1, 6, 5, 4, /**/ 1, 3, 2, 0;
  batch.tgt_out << 6, 5, 4, 3, /**/ 3, 2, 4, 0;
  const Seq2SeqConfig config{.vocab = kVocab,
                             .d_model = kModel,
                             .heads = kHeads,
                             .d_ff = kFF,
                             .layers = 1,
                             .norm = placement,
                             .tied = tied,
                             .max_len = 5};
  // Hundreds of ReLU inputs (two pairs, both stacks): asking each to be 1e-2 from its kink, as
  // for one layer, would reject nearly every draw. 1e-3 still leaves a hundred times the largest
  // move a step of h = 1e-5 causes in any of them (an entry's effect on a pre-activation is
  // below ~10: embeddings are scaled by sqrt(8), weights are below 1).
  ModelCase c = draw_until_smooth(
      "whole model",
      [&] {
        ModelCase k{cast<double>(seq2seq_init(rng, config)), batch};
        perturb_vectors(rng, k.model);
        return k;
      },
      kReluMargin / 10);
  const double smoothing = 0.1;
  const LossFunction loss = [&] { return seq2seq_loss(c.model, c.batch, smoothing, nullptr).loss; };
  Seq2SeqD grads = zeros_like(c.model);
  seq2seq_loss(c.model, c.batch, smoothing, &grads);
  GradientReport report{std::string("whole encoder-decoder, ") +
                            (placement == NormPlacement::post ? "post-norm" : "pre-norm") +
                            (tied ? ", tied" : ""),
                        {}};
  check_parameters(report, c.model, grads, loss, h);
  return report;
}

// The attention-only decoder of the training chapter (attention_only.hpp, the induction-heads
// task) on a batch of two sequences of 5 tokens with a context of T = 6: every parameter through
// both embeddings, two pre-norm attention layers, the final norm, the unembedding and the mean
// cross-entropy over the batch's counted targets. As in the task, the first copy of each segment
// is ignored (-1), and so is the second sequence's last target. pos_embed's last row is never read
// (n = 5 < T): its gradient is exactly 0 both ways. No ReLU, so no kink and nothing to redraw.
GradientReport check_attention_only(Rng& rng, double h) {
  AttentionOnlyBatch batch{TokenIds(2, 5), TokenIds(2, 5), -1};
  batch.inputs << 1, 4, 6, 1, 4, /**/ 5, 2, 0, 5, 2;
  batch.targets << -1, -1, -1, 4, 6, /**/ -1, -1, -1, 2, -1;
  const AttentionOnlyConfig config{
      .vocab = kVocab, .d_model = kModel, .heads = kHeads, .layers = 2, .context = 6};
  AttentionOnlyD model = cast<double>(attention_only_init(rng, config));
  perturb_vectors(rng, model);
  const LossFunction loss = [&] { return attention_only_loss(model, batch, nullptr).loss; };
  AttentionOnlyD grads = zeros_like(model);
  attention_only_loss(model, batch, &grads);
  GradientReport report{"whole attention-only decoder, 2 layers", {}};
  check_parameters(report, model, grads, loss, h);
  return report;
}

// Grouped-query self-attention as chapter 12 trains it: 4 query heads over 2 kv heads (d_k = 2,
// groups of 2, so each kv head's gradient is a sum of two), RoPE on Q and K, causal with a
// sliding window of 3 (on 5 tokens the last two queries lose keys to it), biases on every
// projection (with RoPE even the key bias has a gradient: the rotation differs per position).
GradientReport check_grouped_query(Rng& rng, double h) {
  GroupedQueryAttentionD gqa = cast<double>(grouped_query_init(rng, kModel, 4, 2, true));
  perturb_vectors(rng, gqa);
  MatrixD x = normal(rng, kN, kModel);        // [n x 8]
  const MatrixD R = normal(rng, kN, kModel);  // [n x 8]
  const RopeTable rope = rope_table(kN, gqa.d_k());
  const GroupedQueryOptions opts{.causal = true, .window = 3, .rope = &rope};
  const LossFunction loss = [&] { return dot(grouped_query_forward(gqa, x, opts).out, R); };
  const GroupedQueryResultD cache = grouped_query_forward(gqa, x, opts);
  GroupedQueryAttentionD grads = zeros_like(gqa);
  const MatrixD dx = grouped_query_backward(gqa, x, cache, R, grads);
  GradientReport report{"grouped-query self-attention, RoPE, window 3", {}};
  report.add(check_tensor("x", x, dx, loss, h));
  check_parameters(report, gqa, grads, loss, h);
  return report;
}

}  // namespace

std::vector<GradientReport> check_all_layers(std::uint64_t seed, double step) {
  Rng rng(seed);
  std::vector<GradientReport> reports;
  reports.push_back(check_linear(rng, step));
  reports.push_back(check_layer_norm(rng, step));
  reports.push_back(check_ffn(rng, step));
  reports.push_back(check_embedding(rng, step));
  reports.push_back(check_attention(rng, step, true));
  reports.push_back(check_attention(rng, step, false));
  reports.push_back(check_self_attention(rng, step));
  reports.push_back(check_cross_attention(rng, step));
  reports.push_back(check_encoder_layer(rng, step, NormPlacement::post));
  reports.push_back(check_encoder_layer(rng, step, NormPlacement::pre));
  reports.push_back(check_decoder_layer(rng, step, NormPlacement::post));
  reports.push_back(check_decoder_layer(rng, step, NormPlacement::pre));
  reports.push_back(check_cross_entropy(rng, step));
  reports.push_back(check_model(rng, step, NormPlacement::post, false));
  reports.push_back(check_model(rng, step, NormPlacement::pre, true));
  reports.push_back(check_attention_only(rng, step));
  reports.push_back(check_grouped_query(rng, step));
  return reports;
}

}  // namespace attn
