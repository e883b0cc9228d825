// 09_training: attention learns. Every map so far came from random weights; here the weights
// are trained, with backward passes written by hand, and the heads come to mean something.
//
//   one backward step by hand   out = softmax(Q K^T / sqrt(d)) V, and dQ, dK, dV from dO
//   every backward pass checked central differences in double, every layer and a whole model
//   reversal                    an encoder-decoder learns to write its input backwards; its
//                               cross-attention becomes the anti-diagonal
//   induction heads             a 2-layer attention-only decoder learns to copy: a previous-token
//                               head in layer 1, an induction head in layer 2
//
//   09_training [--task both|reversal|induction] [--steps N] [--lr X] [--layers L] [--heads H]
//               [--d-model D] [--length N] [--context T] [--label-smoothing E] [--norm pre|post]
//               [--save DIR] [--load DIR] [--seed N] [--out DIR] [--no-plots] [--dump DIR]
//
// Timings (seconds, tokens per second) go to stderr: they vary between runs, and stdout is the
// same bytes on every run.
#include "attn/core/random.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/models/attention_only.hpp"
#include "attn/models/seq2seq.hpp"
#include "attn/ops/attention.hpp"
#include "attn/training/gradient_check.hpp"
#include "checkpoints.hpp"
#include "cost.hpp"
#include "course/chapter.hpp"
#include "course/checkpoint.hpp"
#include "course/training_loop.hpp"
#include "figures.hpp"
#include "knobs.hpp"
#include "tasks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using training::History;
using training::induction_config;
using training::kBatch;  // sequences per training step
using training::Knobs;
using training::reversal_config;
using training::StepResult;

// ---- 1. One backward step by hand ---------------------------------------------------------------

void backward_by_hand(course::Chapter& ch) {
  ch.step("One backward step by hand: two tokens, d = 2");
  ch.prose("Attention's forward (chapter 04), with the loss L = sum(dO * out) for a chosen dO, "
           "so that dL/d(out) = dO:");
  ch.say("  S = Q K^T / sqrt(d)      P = softmax(S) row by row      out = P V");
  MatrixD Q(2, 2), K(2, 2), V(2, 2), dO(2, 2);  // [2 x 2] each: two tokens, d = 2
  Q << 1, 2, 0, 1;
  K << 1, 0, 1, 1;
  V << 1, 0, 0, 2;
  dO << 1, 0, 0, 1;  // L = out(1,1) + out(2,2)
  const std::vector<std::string> tok = course::labels("t", 2);
  const course::PrintOptions rows{.row_labels = tok};
  ch.show("Q", Q, rows);
  ch.show("K", K, rows);
  ch.show("V", V, rows);
  ch.show("dO = dL/d(out)", dO, rows);
  const attn::AttentionResultD fwd = attn::attention(Q, K, V);  // weights P [2 x 2], out [2 x 2]
  ch.show("P = softmax(Q K^T / sqrt 2)", fwd.weights, {.row_labels = tok, .col_labels = tok});
  ch.show("out = P V", fwd.out, rows);

  ch.say("Backward, from the output to the inputs (attention.hpp, attention_backward):");
  // [backward]
  const MatrixD dV = fwd.weights.transpose() * dO;  // [2 x 2]: value j got P(i, j) of out i
  const MatrixD dP = dO * V.transpose();            // [2 x 2]
  ch.show("dV = P^T dO", dV, rows);
  ch.show("dP = dO V^T", dP, {.row_labels = tok, .col_labels = tok});
  // Through the softmax: each row p of P has the Jacobian diag(p) - p p^T.
  const Eigen::VectorXd row_dot = (fwd.weights.array() * dP.array()).rowwise().sum();  // [2]
  MatrixD dS = fwd.weights.array() * (dP.colwise() - row_dot).array();                 // [2 x 2]
  ch.show("rowsum(P * dP)  (one number per query)", MatrixD(row_dot), {.row_labels = tok});
  ch.show("dS = P * (dP - rowsum(P * dP))", dS, {.row_labels = tok, .col_labels = tok});
  const Eigen::RowVectorXd p = fwd.weights.row(0);  // query 1's weights [1 x 2]
  const MatrixD jacobian = MatrixD(p.asDiagonal()) - p.transpose() * p;  // [2 x 2]
  ch.show("query 1's softmax Jacobian J = diag(p) - p p^T", jacobian);
  const MatrixD applied = (jacobian * dP.row(0).transpose()).transpose();  // [1 x 2]
  ch.show("J applied to row 1 of dP: the numbers of row 1 of dS", applied);
  ch.notice("the row form never builds J: dS = P * (dP - rowsum(P * dP)) costs O(n^2), the "
            "Jacobians O(n^3).");
  const double scale = 1.0 / std::sqrt(2.0);
  const MatrixD dQ = scale * dS * K;              // [2 x 2]
  const MatrixD dK = scale * dS.transpose() * Q;  // [2 x 2]
  // [backward]
  ch.show("dQ = dS K / sqrt 2", dQ, rows);
  ch.show("dK = dS^T Q / sqrt 2", dK, rows);

  // The library computes the same numbers, and central differences agree.
  const attn::AttentionGradsD lib = attn::attention_backward(Q, K, V, fwd.weights, dO);
  const double agree = std::max({attn::max_abs_diff(lib.dQ, dQ), attn::max_abs_diff(lib.dK, dK),
                                 attn::max_abs_diff(lib.dV, dV)});
  double numeric = 0.0;
  for (MatrixD* x : {&Q, &K, &V}) {
    const MatrixD& analytic = x == &Q ? dQ : x == &K ? dK : dV;
    const attn::TensorCheck c = attn::check_tensor("x", *x, analytic, [&] {
      return (attn::attention(Q, K, V).out.array() * dO.array()).sum();
    });
    numeric = std::max(numeric, c.max_abs_error);
  }
  ch.say("attn::attention_backward gives the same dQ, dK, dV (max difference {:.1e});\n"
         "central differences (L(x + h) - L(x - h)) / 2h in double agree to {:.1e}.",
         agree, numeric);
  ch.dump("example_Q", Matrix(Q.cast<float>()));
  ch.dump("example_dQ", Matrix(dQ.cast<float>()));
  ch.dump("example_dK", Matrix(dK.cast<float>()));
  ch.dump("example_dV", Matrix(dV.cast<float>()));
}

// ---- 2. Every backward pass, checked ------------------------------------------------------------

// Whether a gradient-check name is the key block of a stacked in_proj_bias,
// "...in_proj_bias[E:2E]": the one bias whose true gradient is exactly 0 (the query's and the
// value's are not).
bool is_key_bias(const std::string& name) {
  const std::size_t at = name.find("in_proj_bias[");
  if (at == std::string::npos) return false;
  long first = 0, last = 0;
  if (std::sscanf(name.c_str() + at, "in_proj_bias[%ld:%ld]", &first, &last) != 2) return false;
  return first > 0 && last == 2 * first;
}

void gradient_checks(course::Chapter& ch) {
  ch.step("Every backward pass, checked by central differences in double");
  ch.prose("Each layer runs in double (the same code as in float: the layers are templates), "
           "and every parameter and input entry e is nudged by +-h, h = 1e-5 max(1, |e|):");
  ch.say("  numeric = (L(e + h) - L(e - h)) / 2h      error = max |analytic - numeric| / scale");
  ch.prose("where scale is the tensor's largest gradient (at least 1e-3 of its layer's largest). "
           "The worst tensor of each case:");
  const std::vector<attn::GradientReport> reports = attn::check_all_layers(ch.seed());
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const attn::GradientReport& r = reports[i];
    ch.say("  {:<50} {:.1e}", r.layer, r.worst());
    if (!(r.worst() <= attn::kGradientCheckTolerance)) {
      throw std::runtime_error(
          fmt::format("the gradient check of {} failed: {:.1e} > 1e-6", r.layer, r.worst()));
    }
  }
  const auto worst =
      std::max_element(reports.begin(), reports.end(),
                       [](const auto& a, const auto& b) { return a.worst() < b.worst(); });
  ch.notice("every error is below the bar of 1e-6. The largest, {:.1e}, is {}'s {}{}.",
            worst->worst(), worst->layer, worst->worst_tensor().name,
            is_key_bias(worst->worst_tensor().name)
                ? ": a key bias, whose true gradient is exactly 0 (adding one number to every "
                  "score of a row changes no softmax), so only rounding is left to measure"
                : "");
  training::draw_gradient_check(ch.plot(), reports);
}

// ---- 3. Reversal --------------------------------------------------------------------------------

// Cross-attention of the last decoder layer, head 1, on one pair, teacher-forced: [n x n]; and
// when `scores` is given, the scores its softmax read [n x n] (for the timelapse's twin).
Matrix cross_attention(const attn::Seq2Seq& model, const attn::Seq2SeqBatch& batch, Index b,
                       Matrix* scores = nullptr) {
  attn::Seq2SeqCache cache;
  const auto n = static_cast<std::size_t>(batch.src.cols());
  attn::seq2seq_forward<float>(model, {batch.src.row(b).data(), n}, {batch.tgt_in.row(b).data(), n},
                               &cache, attn::NeedWeights::yes);
  const attn::MultiHeadResult& cross = cache.decoder.back().multihead_attn;
  if (scores != nullptr) {
    const Index d_k = model.decoder.back().multihead_attn.d_k();  // head 1: the first d_k columns
    *scores = attn::attention_scores(cross.Q.leftCols(d_k), cross.K.leftCols(d_k),
                                     {.allowed = cache.cross_allowed});
  }
  return cross.weights.front();
}

// The mean weight on source position n - 1 - i for output i: 1 for a perfect anti-diagonal.
double anti_diagonal(const attn::Seq2Seq& model, const attn::Seq2SeqBatch& batch) {
  double mass = 0;
  for (Index b = 0; b < batch.src.rows(); ++b) {
    const Matrix w = cross_attention(model, batch, b);  // [n x n]
    mass += w.rowwise().reverse().trace() / static_cast<double>(w.rows());
  }
  return mass / static_cast<double>(batch.src.rows());
}

void reversal(course::Chapter& ch, const Knobs& k) {
  ch.step("Task 1: reverse a sequence with an encoder-decoder");  // always the first task
  const Index n = k.length;
  // [reversal_model]
  attn::Rng rng(ch.seed());
  attn::Seq2Seq model = attn::seq2seq_init(rng, reversal_config(k));
  // [reversal_model]
  course::TrainingState run = training::start_training(ch, k, model, rng);  // step 0, or --load's
  attn::Rng held_out_rng = ch.rng("reversal held-out");    // never a training sequence's
  const Index held = training::held_out_count(run.steps);  // 1,000, fewer for a short schedule
  const attn::Seq2SeqBatch held_out = training::reversal_batch(held_out_rng, held, n);
  const attn::Seq2SeqBatch curve_set =
      training::reversal_batch(held_out_rng, training::curve_count(held), n);
  const std::span<const int> example(held_out.src.row(0).data(), static_cast<std::size_t>(n));
  ch.prose("vocabulary {} (<pad>, <bos>, the symbols a..j), sequences of {} symbols; the "
           "decoder reads <bos> y_1 .. y_{} and must write y_1 .. y_{} (teacher forcing).",
           training::kReversalVocab, n, n - 1, n);
  ch.prose("model: d_model {}, {} head{}, d_ff {}, {} encoder + {} decoder layer{}, {}-norm; {} "
           "parameters",
           k.d_model, k.heads, k.heads == 1 ? "" : "s", 2 * k.d_model, k.layers, k.layers,
           k.layers == 1 ? "" : "s", k.norm, attn::parameter_count(model));
  ch.prose("embeddings start at N(0, 1/d_model): times sqrt(d_model) they have variance 1, "
           "like the position vectors added to them (with N(0, 1) the model did not learn at "
           "all).");
  const Index steps = training::last_step(k, run);  // the step training stops after
  if (steps > run.step) {
    ch.prose("training: {} steps of {} sequences, Adam (betas 0.9, 0.98), peak lr {} {}; "
             "gradients clipped to norm 1; label smoothing {}",
             steps - run.step, kBatch, k.lr,
             run.steps > 100 ? "after 100 warm-up steps, then cosine to 0"
                             : "reached by a linear warm-up over every step",
             k.label_smoothing);
  }

  const std::vector<Index> snapshot_steps = {50, 100, 200, 400, steps};
  std::vector<course::HeatmapPanel> frames;
  const std::vector<std::string> src_labels = training::reversal_tokens(example);
  const std::vector<std::string> out_labels =
      training::reversal_tokens({held_out.tgt_out.row(0).data(), static_cast<std::size_t>(n)});
  const auto snapshot = [&](Index step) {
    if (!frames.empty() && frames.back().title == fmt::format("step {}", step)) return;
    Matrix scores;                                                  // [n x n]
    Matrix weights = cross_attention(model, held_out, 0, &scores);  // [n x n]
    frames.push_back({.values = std::move(weights),
                      .title = fmt::format("step {}", step),
                      .xtics = src_labels,
                      .ytics = out_labels,
                      .scores = std::move(scores)});
  };
  // [reversal_training]
  const training::Schedule schedule = training::schedule_of(run, steps, k.lr);
  const History h = training::train<attn::Seq2Seq>(
      "reversal", model, schedule, run,
      [&](attn::Seq2Seq& grads) {
        const attn::Seq2SeqBatch batch = training::reversal_batch(rng, kBatch, n);
        const attn::Seq2SeqStep s =
            attn::seq2seq_loss<float>(model, batch, k.label_smoothing, &grads);
        return StepResult{s.loss, s.count, s.correct};
      },
      [&] {
        const attn::Seq2SeqStep s = attn::seq2seq_loss<float>(model, curve_set, 0.0, nullptr);
        return std::pair{static_cast<double>(s.loss), training::exact_reversals(model, curve_set)};
      },
      snapshot_steps, snapshot);
  // [reversal_training]

  const double exact = training::exact_reversals(model, held_out);
  const attn::Seq2SeqStep final_loss = attn::seq2seq_loss<float>(model, held_out, 0.0, nullptr);
  ch.say("after {} steps, on {} held-out sequences (loss {:.4f} under teacher forcing):", steps,
         held, final_loss.loss);
  ch.say("  exactly reversed: {:.1f}%   (greedy decoding, every symbol right)", 100.0 * exact);
  const std::vector<int> got = training::greedy_reverse(model, example);
  ch.say("  e.g. source  {}\n       decoded {}", fmt::join(src_labels, " "),
         fmt::join(training::reversal_tokens(got), " "));
  ch.show("cross-attention, last decoder layer, head 1 (rows: output, columns: source)",
          frames.back().values,
          {.precision = 2, .row_labels = out_labels, .col_labels = src_labels});
  const double diagonal = anti_diagonal(model, held_out);
  if (diagonal > 0.5) {
    ch.notice("output position i reads source position {} - i: the anti-diagonal, learned (its "
              "mean weight over the held-out set: {:.2f}).",
              n + 1, diagonal);
  } else {
    ch.notice("the anti-diagonal holds only {:.2f} of the weight on average: this head has not "
              "(or not alone) learned where to read; other layers or heads may do the work.",
              diagonal);
  }
  if (!h.step.empty()) training::draw_reversal_training(ch.plot(), frames, h);
  ch.dump("reversal_cross_attention", frames.back().values);
  if (!k.save.empty()) training::save_reversal(ch, k.save + "/reversal", model, run, rng, held_out);
}

// ---- 4. Induction heads -------------------------------------------------------------------------

void induction(course::Chapter& ch, const Knobs& k) {
  ch.step("Task {}: induction heads in a {}-layer attention-only decoder", k.task == "both" ? 2 : 1,
          k.layers);
  const Index T = k.context;
  attn::Rng rng = ch.rng("induction model");
  attn::AttentionOnly model = attn::attention_only_init(rng, induction_config(k));
  course::TrainingState run = training::start_training(ch, k, model, rng);  // step 0, or --load's
  const Index steps = training::last_step(k, run);
  attn::Rng held_out_rng = ch.rng("induction held-out");
  const Index held = training::held_out_count(run.steps);  // 1,000, fewer for a short schedule
  const std::vector<training::InductionSequence> held_out =
      training::induction_sequences(held_out_rng, held, T);
  const std::vector<training::InductionSequence> curve_seqs(
      held_out.begin(), held_out.begin() + training::curve_count(held));
  const attn::AttentionOnlyBatch held_out_batch = training::induction_batch(held_out);
  const attn::AttentionOnlyBatch curve_batch = training::induction_batch(curve_seqs);
  const training::InductionSequence& ex = held_out.front();
  const std::vector<std::string> ex_tokens = training::induction_tokens(ex.ids);
  ch.prose("{} tokens (A..Z, a..f), sequences of {}: all different except a segment of {} to {} "
           "that occurs twice; the loss is on the second copy, where the first tells what comes "
           "next.",
           training::kInductionVocab, T, std::max<Index>(2, T / 4), std::max<Index>(2, 5 * T / 12));
  ch.say("e.g. {}   (the segment at {} and {}, length {})", fmt::join(ex_tokens, ""), ex.first + 1,
         ex.second + 1, ex.length);
  ch.prose("model: {} layer{} of x = x + MultiHead(LayerNorm(x)), causal, {} head{} each, no "
           "feed-forward; learned positions; d_model {}; {} parameters",
           k.layers, k.layers == 1 ? "" : "s", k.heads, k.heads == 1 ? "" : "s", k.d_model,
           attn::parameter_count(model));

  const Index last = k.layers - 1;
  const std::vector<Index> snapshot_steps = {100, 200, 300, steps};
  std::vector<course::HeatmapPanel> frames;
  // The model is causal: the figures hatch the keys after each query.
  const attn::AllowedMask causal = attn::causal_mask(std::ssize(ex_tokens));  // [T x T]
  const auto snapshot = [&](Index step) {
    if (!frames.empty() && frames.back().title == fmt::format("step {}", step)) return;
    attn::AttentionOnlyCache cache;
    attn::attention_only_forward<float>(model, ex.ids, &cache, attn::NeedWeights::yes);
    const attn::MultiHeadResult& a = cache.layers[static_cast<std::size_t>(last)].attn;
    const Index d_k = model.layers[static_cast<std::size_t>(last)].attn.d_k();
    frames.push_back({a.weights.front(), fmt::format("step {}", step), ex_tokens, ex_tokens, causal,
                      attn::attention_scores(a.Q.leftCols(d_k), a.K.leftCols(d_k),  // [T x T]
                                             {.allowed = causal})});
  };
  const training::Schedule schedule = training::schedule_of(run, steps, k.lr);
  const History h = training::train<attn::AttentionOnly>(
      "induction", model, schedule, run,
      [&](attn::AttentionOnly& grads) {
        const attn::AttentionOnlyBatch batch =
            training::induction_batch(training::induction_sequences(rng, kBatch, T));
        const attn::AttentionOnlyStep s = attn::attention_only_loss<float>(model, batch, &grads);
        return StepResult{s.loss, s.count, s.correct};
      },
      [&] {
        const attn::AttentionOnlyStep s =
            attn::attention_only_loss<float>(model, curve_batch, nullptr);
        return std::pair{static_cast<double>(s.loss),
                         static_cast<double>(s.correct) / static_cast<double>(s.count)};
      },
      snapshot_steps, snapshot);

  const attn::AttentionOnlyStep final_step =
      attn::attention_only_loss<float>(model, held_out_batch, nullptr);
  ch.prose("after {} steps, on {} held-out sequences (loss {:.4f}): the next token in the second "
           "copy is predicted right {:.1f}% of the time ({} of {}).",
           steps, held, final_step.loss,
           100.0 * static_cast<double>(final_step.correct) / static_cast<double>(final_step.count),
           final_step.correct, final_step.count);

  ch.say("\nwhat each head does: its mean attention weight, over the held-out sequences,\n"
         "  on the previous token t - 1     (every position t >= 2)\n"
         "  on the token after the earlier  (the positions t of the second copy, whose token\n"
         "    copy of t's token              occurred before at s: the weight on s + 1)\n\n"
         "  head             previous token   after the earlier copy");
  const std::vector<training::HeadScores> scores = training::head_scores(model, held_out);
  // Heads of one layer may share a job (--heads 2 splits it), so a layer's score is its heads' sum.
  double layer1_previous = 0, last_induction = 0;
  for (const training::HeadScores& s : scores) {
    ch.say("  layer {} head {}  {:>16.2f}   {:>22.2f}", s.layer + 1, s.head + 1, s.previous,
           s.induction);
    if (s.layer == 0) layer1_previous += s.previous;
    if (s.layer == k.layers - 1) last_induction += s.induction;
  }
  const bool shared = k.heads > 1;
  if (k.layers >= 2 && layer1_previous > 0.5 && last_induction > 0.5) {
    ch.notice("layer 1 looks at the previous token ({:.2f} of its attention{}): it copies 'the "
              "token before me' into each position. Layer {} then finds the earlier place whose "
              "token before it was the current token, and reads the token there ({:.2f}): the "
              "induction head.",
              layer1_previous, shared ? ", summed over its heads" : "", k.layers, last_induction);
  } else if (k.layers == 1) {
    ch.notice("with one layer nothing can first write 'the token before me' into each position, "
              "so no head can find the position after the earlier copy ({:.2f} of the attention "
              "goes there): compare the accuracy with two layers'.",
              last_induction);
  } else {
    ch.notice("no previous-token and induction heads (yet): layer 1 gives {:.2f} of its attention "
              "to the previous token, layer {} {:.2f} to the token after the earlier copy{}; more "
              "steps, or another learning rate, may get there.",
              layer1_previous, k.layers, last_induction,
              shared ? " (each summed over the layer's heads)" : "");
  }

  training::draw_induction_heads(ch.plot(), model, ex.ids, ex_tokens, causal);
  if (!h.step.empty()) training::draw_induction_training(ch.plot(), frames, h, k.layers);
  if (!k.save.empty())
    training::save_induction(ch, k.save + "/induction", model, run, rng, held_out);
}

void lesson(course::Chapter& ch, const Knobs& k) {
  ch.intro("task {}, steps {}, lr {}, layers {}, heads {}, d_model {}, seed {}", k.task,
           k.trains() ? k.steps : 0, k.lr, k.layers, k.heads, k.d_model, ch.seed());
  backward_by_hand(ch);
  gradient_checks(ch);
  if (k.task != "induction") reversal(ch, k);
  if (k.task != "reversal") induction(ch, k);
  ch.finish(
      {"A backward pass runs the forward's steps in reverse, each passing dL/d(its input) back.",
       "Through the softmax: dS = P * (dP - rowsum(P * dP)), never the n x n Jacobian per row.",
       "Blocked and padded keys have weight 0, so they get exactly 0 gradient.",
       "Only W_Q, W_K, W_V (and the rest) are learned; the attention maps follow from them.",
       k.task == "reversal"    ? "Trained heads specialise: reversal's cross-attention turns "
                                 "anti-diagonal when it has learned."
       : k.task == "induction" ? "Trained heads specialise: a previous-token head, then an "
                                 "induction head, when copying has been learned."
                               : "Trained heads specialise: an anti-diagonal for reversal, "
                                 "previous-token and induction heads for copying, once learned."},
      {{"--task induction --layers 1", "one layer cannot learn induction: why two are needed"},
       {"--norm post", "the paper's post-norm: compare the anti-diagonal's weight"},
       {"--lr 0.05", "too large a step: compare the held-out loss and the heads"},
       {"--heads 2", "two heads per layer: watch them share the work"},
       {"--task induction --steps 200", "stopped early: before the induction head forms"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("09_training", "Attention learns: training, backward passes by hand", 2026);
  Knobs k;
  ch.option("--task", k.task, "reversal, induction or both")
      .one_of({"both", "reversal", "induction"});
  ch.option("--steps", k.steps,
            "training steps of each task (the schedule's length); 100000 take minutes, days at "
            "the largest sizes: a run over a minute prints its estimate on stderr first")
      .range(1, training::kMaxSteps);
  ch.option("--stop-at", k.stop_at,
            "stop after this step of the schedule (--save, then --load "
            "to go on exactly)")
      .range(0, training::kMaxSteps);
  ch.option("--lr", k.lr, "Adam's peak learning rate").range(1e-6, 1.0);
  ch.option("--layers", k.layers, "layers (reversal: encoder and decoder each)").range(1, 8);
  ch.option("--heads", k.heads, "heads per attention (must divide d_model)").range(1, 16);
  ch.option("--d-model", k.d_model,
            "features per token; 256 takes minutes, about 40 with --layers 8 --length 32")
      .range(2, 256);
  ch.option("--length", k.length, "reversal: symbols per sequence").range(2, 32);
  ch.option("--context", k.context, "induction: tokens per sequence").range(8, 40);
  ch.option("--label-smoothing", k.label_smoothing, "reversal: label smoothing (the paper: 0.1)")
      .range(0.0, 0.9);
  ch.option("--norm", k.norm, "reversal: pre (norm first) or post (the paper's Add & Norm)")
      .one_of({"pre", "post"});
  ch.output_folder("--save", k.save,
                   "write the trained weights to DIR/reversal and DIR/induction (a "
                   "checkpoint per task)");
  ch.input_folder("--load", k.load,
                  "start from what --save wrote: evaluate it, or with --steps or --stop-at "
                  "train on, from its Adam state");
  ch.require_knobs([&] {
    k.steps_given = ch.given("--steps");
    if (k.d_model % k.heads != 0) {
      return fmt::format("--heads {} does not divide --d-model {}: each head needs d_k = "
                         "d_model / heads columns",
                         k.heads, k.d_model);
    }
    return training::checkpoint_problem(ch, k);
  });
  return ch.run(argc, argv, [&] {
    training::announce_cost(ch.name(), k);  // on stderr, when the run will take over a minute
    lesson(ch, k);
  });
}
