// 01_rnn: the Elman recurrence, the four shapes of a recurrent model, and why attention came.
//
//   a<t>     = tanh(W_ih x<t> + b_ih + W_hh a<t-1> + b_hh)      (torch.nn.RNN, tanh)
//   y_hat<t> = softmax(W_y a<t> + b_y)
//
// The walk-through: one step by hand, the whole sequence, N->1 / N->N / 1->N / seq2seq, then
// the two costs of the recurrence that self-attention removes: every step waits for the one
// before, and x<1> reaches a<T> only through T-1 multiplications by W_hh. The experiment
// measures the second one as the Jacobian d a<T> / d x<1>.
//
//   01_rnn [--input-size I] [--hidden H] [--steps T] [--experiment-hidden H] [--distance D]
//          [--seeds K] [--scales s1,s2,...] [--seed N] [--out DIR] [--no-plots] [--dump DIR]
//          [--step]
#include "attn/core/random.hpp"
#include "attn/layers/rnn.hpp"
#include "course/chapter.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::RowVector;

struct Knobs {
  Index I = 3, H = 4, T = 5;                                     // the worked example
  Index H_exp = 32, D = 50, n_seeds = 8;                         // the experiment
  std::vector<double> scales = {0.5, 1.0, std::sqrt(3.0), 3.0};  // W_hh x s
};

// The distances the experiment's table shows: 0, 1, 2, 5, then every `step` up to D.
std::vector<Index> table_distances(Index D) {
  std::vector<Index> rows;
  for (Index d : {0, 1, 2, 5}) {
    if (d <= D) rows.push_back(d);
  }
  const Index step = D <= 100 ? 10 : 20;
  for (Index d = step; d <= D; d += step) rows.push_back(d);
  if (rows.back() != D) rows.push_back(D);
  return rows;
}

// {"x<1>", ..., "x<n>"}: a label per step, the notes' superscript <t> as the program prints it.
std::vector<std::string> at_steps(std::string_view v, Index n) {
  std::vector<std::string> labels;
  for (Index t = 1; t <= n; ++t) labels.push_back(fmt::format("{}<{}>", v, t));
  return labels;
}

// PyTorch keeps a bias as a 1-D [H] tensor, so it is dumped as one, not as [1 x H].
void dump_bias(course::Chapter& ch, const std::string& name, const RowVector& b) {
  const std::size_t n = b.size();
  ch.dump(name, std::span(&n, 1), std::span(b.data(), n));
}

void lesson(course::Chapter& ch, const Knobs& k) {
  const Index I = k.I, H = k.H, T = k.T, D = k.D;
  ch.intro("seed {}, I = {}, H = {}, T = {}", ch.seed(), I, H, T);

  ch.step("The recurrence: a<t> = tanh(W_ih x<t> + b_ih + W_hh a<t-1> + b_hh)");
  // PyTorch's default initialisation: all four parameters from U(-k, k), k = 1/sqrt(H).
  attn::Rng rng(ch.seed());
  const attn::RnnCell cell = attn::rnn_init(rng, I, H);
  const Matrix X = attn::random_normal(rng, T, I);                // x<1..T> [T x I], tokens as rows
  const RowVector h0 = attn::random_normal(rng, 1, H, 0.0, 0.5);  // a<0> [1 x H]
  ch.prose("The notes write a<t> = g(W_aa a<t-1> + W_ax x<t> + b_a). PyTorch names W_ax "
           "weight_ih and W_aa weight_hh, and keeps two biases: b_a = b_ih + b_hh. Only the sum "
           "matters (PyTorch keeps both for cuDNN compatibility).");
  ch.say("Initialised like torch.nn.RNN: every parameter ~ U(-k, k), k = 1/sqrt(H) = {:.4f}.",
         1.0 / std::sqrt(H));
  ch.show("W_ih (the notes' W_ax)", cell.weight_ih);
  ch.show("W_hh (the notes' W_aa)", cell.weight_hh);
  ch.show("b_ih", cell.bias_ih);
  ch.show("b_hh", cell.bias_hh);
  ch.show("b_a = b_ih + b_hh", cell.bias_ih + cell.bias_hh);
  ch.notice("weight_ih is [H x I]: it maps an input of I features to H.");
  ch.notice("weight_hh is [H x H]: the same matrix is used at every step t.");
  ch.dump("weight_ih_l0", cell.weight_ih);
  ch.dump("weight_hh_l0", cell.weight_hh);
  dump_bias(ch, "bias_ih_l0", cell.bias_ih);
  dump_bias(ch, "bias_hh_l0", cell.bias_hh);
  ch.dump("x", X);
  ch.dump("h0", Matrix(h0));

  ch.step("One step by hand: t = 1");
  ch.prose("Tokens are rows here (as in PyTorch), so W_ih x<t> is computed as x<t> W_ih^T. a<0> "
           "is usually zeros; it is random here so the W_hh term shows.");
  const RowVector x1 = X.row(0);  // [1 x I]
  // std::tanh below, as in the library (Eigen's vectorised float tanh is a rougher
  // approximation: 4.9 ulp against glibc's 2.1).
  // [one_step]
  const RowVector from_input = x1 * cell.weight_ih.transpose() + cell.bias_ih;  // [1 x H]
  const RowVector from_state = h0 * cell.weight_hh.transpose() + cell.bias_hh;  // [1 x H]
  const RowVector z1 = from_input + from_state;                                 // [1 x H]
  const RowVector a1 = z1.unaryExpr([](float z) { return std::tanh(z); });      // [1 x H]
  // [one_step]
  ch.show("x<1>", x1);
  ch.show("a<0> (h0)", h0);
  ch.show("W_ih x<1> + b_ih", from_input);
  ch.show("W_hh a<0> + b_hh", from_state);
  ch.show("z<1> = their sum", z1);
  ch.show("a<1> = tanh(z<1>)", a1);
  ch.notice("tanh squashes every entry into (-1, 1): the state cannot blow up, but it saturates.");

  ch.step("Unrolled over the sequence: X [T x I] -> A [T x H]");
  const Matrix A = attn::rnn_forward(cell, X, h0);  // a<1..T> [T x H]
  ch.show("X", X, {.row_labels = at_steps("x", T)});
  ch.show("A", A, {.row_labels = at_steps("a", T)});
  ch.say("max |A row 1 - a<1> by hand| = {:.1e}", attn::max_abs_diff(A.row(0), a1));
  ch.notice("row t needs row t-1: {} steps, one after another, whatever the hardware.", T);
  ch.notice("a<T> is the last row; PyTorch returns it again as h_n.");
  ch.dump("hidden_states", A);
  ch.dump("h_n", Matrix(A.bottomRows(1)));

  ch.step("Four shapes: N->1, N->N, 1->N, seq2seq");
  const Index O = 2, M = 3;  // classes of the head; length of the decoder's output
  const attn::Linear head = attn::linear_init(rng, H, O);      // W_y [O x H], b_y [1 x O]
  const attn::RnnCell generator = attn::rnn_init(rng, I, H);   // 1->N: reads its own outputs,
  const attn::Linear gen_head = attn::linear_init(rng, H, I);  // so its O is I
  const attn::RnnCell decoder = attn::rnn_init(rng, O, H);     // seq2seq: reads y_hat<t-1>
  const std::string a_T = fmt::format("a<{}>", T);
  ch.say("The head: y_hat<t> = softmax(W_y a<t> + b_y) with W_y {}: a probability per class.",
         course::shape(head.weight));
  // [shapes]
  const attn::RnnRun n_to_1 = attn::many_to_one(cell, head, X, h0);   // y_hat [1 x O]
  const attn::RnnRun n_to_n = attn::many_to_many(cell, head, X, h0);  // Y_hat [T x O]
  const attn::RnnRun one_to_n =                                       // Y_hat [T x I]
      attn::one_to_many(generator, gen_head, x1, h0, T);              // x<t+1> = y_hat<t>
  const attn::RnnSeq2SeqRun s2s =                                     // Y_hat [M x O]
      attn::rnn_seq2seq(cell, decoder, head, X, h0, M);               // decoder a<0> = encoder a<T>
  // [shapes]
  ch.gap();
  ch.flow({{"N->1 (classify a sequence): x", X},
           {a_T, n_to_1.states.bottomRows(1)},
           {"y_hat", n_to_1.outputs}});
  ch.show("y_hat", n_to_1.outputs);
  ch.gap();
  ch.flow({{"N->N (label every step): x", X}, {"A", n_to_n.states}, {"Y_hat", n_to_n.outputs}});
  ch.show("Y_hat", n_to_n.outputs, {.row_labels = at_steps("y_hat", T)});
  ch.notice("the last row of Y_hat is N->1's y_hat: the same model, read at every step.");
  ch.gap();
  ch.flow({{"1->N (generate): x<1>", x1}, {"A", one_to_n.states}, {"Y_hat", one_to_n.outputs}});
  ch.show("Y_hat", one_to_n.outputs, {.row_labels = at_steps("y_hat", one_to_n.outputs.rows())});
  ch.notice("each output is the next input, x<t+1> = y_hat<t>, so O = I = {} and step t+1 cannot "
            "start before step t ends.",
            I);
  ch.gap();
  ch.flow({{"seq2seq (encode N, decode M): x", X}, {"context " + a_T, s2s.context}});
  ch.flow({{"then the decoder from it: A", s2s.decoder_states}, {"Y_hat", s2s.outputs}});
  ch.show("context = the last row of A above", s2s.context);
  ch.show("Y_hat", s2s.outputs, {.row_labels = at_steps("y_hat", M)});
  if (T * I > H) {
    ch.notice("the decoder feeds its outputs back as 1->N does, and sees the {} inputs only "
              "through these {} numbers: the context is a bottleneck.",
              T, H);
  } else {  // the context could hold this input whole; not a longer one
    ch.notice("the decoder feeds its outputs back as 1->N does, and sees the {} inputs only "
              "through these {} numbers. Here they outnumber the {} input numbers, but their "
              "count is fixed while a longer input brings more: the context is a bottleneck.",
              T, H, T * I);
  }
  ch.dump("W_y", head.weight);
  ch.dump("b_y", Matrix(head.bias));
  ch.dump("y_hat", n_to_n.outputs);

  ch.step("What the recurrence costs: sequential steps and long paths");
  ch.say("sequence length T                        5      50     500\n"
         "RNN: steps that must run in order        5      50     500   a<t> waits for a<t-1>\n"
         "self-attention: steps in order           1       1       1   all outputs at once\n"
         "RNN: cell steps from x<1> to output T    5      50     500\n"
         "self-attention: x<1> to output T         1       1       1   every pair is direct");
  // The figure of the table's last two rows, for t = 1 .. D.
  course::Series rnn_path{.label = "RNN: t cell steps, each waiting for the one before",
                          .points = false};
  course::Series attn_path{.label = "self-attention: 1 step, every pair connected directly",
                           .points = false,
                           .dashed = true};
  for (Index t = 1; t <= D; ++t) {
    rnn_path.x.push_back(t);
    rnn_path.y.push_back(t);
    attn_path.x.push_back(t);
    attn_path.y.push_back(1.0);
  }
  ch.plot().lines("01_path_length", {rnn_path, attn_path},
                  {.title = "Sequential steps between x<1> and output t",
                   .xlabel = "output position t",
                   .ylabel = "sequential steps on the path"});
  ch.gap();
  ch.say("Along the RNN's path the chain rule multiplies one factor per step:\n"
         "  d a<T>/d x<1> = D<T> W_hh D<T-1> W_hh ... D<2> W_hh D<1> W_ih,"
         "  D<t> = diag(1 - a<t>^2)");
  ch.notice("T-1 factors of W_hh: if they shrink vectors, the product vanishes geometrically; if "
            "they stretch them, it can explode. Steps 6-7 measure it.");

  const Index Tc = std::min<Index>(T, 5);  // short enough for finite differences to resolve
  ch.step("The chain rule, checked against central differences (T = {})", Tc);
  const Matrix Xc = X.topRows(Tc);                                             // [Tc x I]
  const MatrixD J = attn::input_jacobians(cell, Xc, h0).back();                // [H x I]
  const MatrixD J_fd = attn::input_jacobian_central_difference(cell, Xc, h0);  // [H x I]
  const std::string dJ = fmt::format("d a<{}>/d x<1>", Tc);
  ch.show(dJ + " by the chain rule", J, {.precision = 8, .max_cols = 6});
  ch.show(dJ + " by central differences, eps = 1e-4", J_fd, {.precision = 8, .max_cols = 6});
  // Named for the step it is taken at, as printed: with --steps 13 it is still d a<5>/d x<1>.
  ch.dump(fmt::format("d_a{}_d_x1", Tc), J);
  // Central differences with eps = 1e-4 are off by eps^2/6 |d^3 a / d x^3| (truncation) plus
  // ~1e-16/eps (double rounding of O(1) states, divided by 2 eps). PyTorch's init keeps every
  // |W| <= 1/sqrt(H) <= 1 and |tanh'''| <= 2, so over 5 steps the third derivative stays below
  // ~10: an absolute error under 2e-8 + 1e-12, and 1e-7 is that floor with room. Above it a
  // wrong factor in the chain rule is off by tens of percent, which the relative 1e-6 catches;
  // below it (a saturated tanh: 3e-19 at --hidden 1 --input-size 64) the entries are smaller
  // than what central differences resolve, and only the floor can be checked.
  constexpr double kRelative = 1e-6, kFloor = 1e-7;
  const double largest = J.cwiseAbs().maxCoeff(), diff = attn::max_abs_diff(J, J_fd);
  if (!(diff <= kRelative * largest + kFloor)) {
    throw std::runtime_error(fmt::format(
        "the chain rule disagrees with central differences: {} differs by {:.1e}, more than "
        "{:.0e} of its largest entry {:.1e} plus {:.0e}",
        dJ, diff, kRelative, largest, kFloor));
  }
  if (diff <= kRelative * largest) {
    ch.say("analytic {} matches central finite differences: max relative difference {:.1e}", dJ,
           diff / largest);
    ch.notice("(relative to the largest entry; eps is the step added to each entry of x<1>)");
  } else {
    ch.say("analytic {} matches central finite differences: max difference {:.1e} <= {:.0e}", dJ,
           diff, kFloor);
    ch.notice("its largest entry is {:.1e}: below ~{:.0e} the error of central differences "
              "(eps = 1e-4) is as large as the entries, so only that absolute floor is checked. "
              "x<1> hardly reaches a<{}>: the vanishing this chapter is about.",
              largest, kFloor, Tc);
  }
  if (T > Tc) {
    ch.notice("the check uses x<1..{}> of the {} steps (dumped as d_a{}_d_x1): central "
              "differences lose precision as the Jacobian shrinks along a sequence; step 7 "
              "follows longer distances by the chain rule alone.",
              Tc, T, Tc);
  }

  ch.step("How much of x<1> reaches a<T>, as the distance T-1 grows");
  // K random models (PyTorch's init, H = H_exp, inputs ~ N(0, 1), a<0> = 0); in each, W_hh is
  // multiplied by every scale s and nothing else changes. Reported: the geometric mean over
  // the K models of the Frobenius norm ||d a<T>/d x<1>||_F, every sensitivity of every unit
  // to every input feature at once. Geometric, because the norms span dozens of orders of
  // magnitude: an ordinary mean would just report the luckiest model.
  const std::vector<double>& scales = k.scales;
  const std::size_t n_s = scales.size();
  MatrixD log_norm = MatrixD::Zero(n_s, D + 1);  // [scales x distances], mean log norm
  std::vector<double> rho(n_s, 0.0);
  attn::Rng exp_rng = ch.rng("gradient experiment");
  for (Index m = 0; m < k.n_seeds; ++m) {
    const attn::RnnCell base = attn::rnn_init(exp_rng, I, k.H_exp);
    const Matrix Xe = attn::random_normal(exp_rng, D + 1, I);       // x<1..D+1> [(D+1) x I]
    const RowVector a0 = RowVector::Zero(k.H_exp);                  // [1 x H_exp]
    const double rho_base = attn::spectral_radius(base.weight_hh);  // rho(s W) = s rho(W)
    for (std::size_t s = 0; s < n_s; ++s) {
      // [experiment]
      attn::RnnCell scaled = base;
      scaled.weight_hh *= static_cast<float>(scales[s]);  // U(-k, k) becomes U(-s k, s k)
      // Js[d] = d a<d+1>/d x<1> [H x I]: the dependence across a distance of d steps
      const std::vector<MatrixD> Js = attn::input_jacobians(scaled, Xe, a0);
      // A tanh saturated to exactly +-1 in double makes a norm exactly 0 (the true one is below
      // double's range): counted as the smallest normal double, so that log stays finite and
      // the per-step factor below is never log(0) - log(0) = NaN.
      for (Index d = 0; d <= D; ++d) {
        const double tiny = std::numeric_limits<double>::min();  // 2.2e-308
        log_norm(s, d) += std::log(std::max(Js[d].norm(), tiny)) / k.n_seeds;
      }
      // [experiment]
      rho[s] += scales[s] * rho_base / k.n_seeds;
    }
  }
  const MatrixD norm = log_norm.unaryExpr([](double l) { return std::exp(l); });  // [scales x D+1]
  // The effective factor per step: (norm at D / norm at 0)^(1/D).
  std::vector<double> per_step(n_s);
  std::vector<std::string> scale_names;
  for (std::size_t s = 0; s < n_s; ++s) {
    per_step[s] = std::exp((log_norm(s, D) - log_norm(s, 0)) / D);
    scale_names.push_back(fmt::format("x{:.2f}", scales[s]));
  }
  ch.say("H = {}, I = {}, {} models per scale; geometric mean of ||d a<T>/d x<1>||_F.", k.H_exp, I,
         k.n_seeds);
  ch.say("W_hh scale s      {:>11}", fmt::join(scale_names, ""));
  ch.say("mean rho(W_hh)    {:11.2f}", fmt::join(rho, ""));
  ch.say("distance T-1");
  for (Index d : table_distances(D)) ch.say("{:12}      {:11.1e}", d, fmt::join(norm.col(d), ""));
  ch.say("factor per step   {:11.2f}", fmt::join(per_step, ""));
  // The scale closest to PyTorch's own init anchors the notices.
  std::size_t ref = 0;
  for (std::size_t s = 1; s < n_s; ++s) {
    if (std::abs(scales[s] - 1.0) < std::abs(scales[ref] - 1.0)) ref = s;
  }
  ch.notice("at W_hh {}, a<{}> responds to x<1> ~{:.0e} times as strongly as a<1> does.",
            scale_names[ref], D + 1, std::exp(log_norm(ref, D) - log_norm(ref, 0)));
  ch.notice("rho(W_hh) alone is not the rate: every D<t> = diag(1 - a<t>^2) <= 1 shrinks as well.");

  // The figure: one curve per scale, and self-attention's one-step path as a flat reference.
  std::vector<course::Series> curves;
  for (std::size_t s = 0; s < n_s; ++s) {
    // "W_hh" is left out of figure text: gnuplot's enhanced mode reads "_" as a subscript.
    course::Series c{
        .label = fmt::format("RNN, recurrent weights x{:.2f} (rho {:.2f}){}", scales[s], rho[s],
                             scales[s] == 1.0 ? ", PyTorch's init" : ""),
        .points = false};
    for (Index d = 0; d <= D; ++d) {
      if (norm(s, d) > 0.0) {  // a log axis cannot show an underflow to 0
        c.x.push_back(d);
        c.y.push_back(norm(s, d));
      }
    }
    curves.push_back(std::move(c));
  }
  const double level = norm(ref, 0);  // distance 0's, at the reference scale
  curves.push_back({.label = "self-attention: a 1-step path at any distance (drawn at distance "
                             "0's level)",
                    .x = {0.0, static_cast<double>(D)},
                    .y = {level, level},
                    .points = false,
                    .dashed = true});
  ch.plot().lines("01_dependence", curves,
                  {.title = fmt::format("How much of x<1> reaches a<T> (H = {}, geometric mean "
                                        "of {} models)",
                                        k.H_exp, k.n_seeds),
                   .xlabel = "distance T - 1 (steps between x<1> and a<T>)",
                   .ylabel = "Frobenius norm of d a<T> / d x<1>",
                   .logy = true});

  ch.finish(
      {"One cell, reused at every step. PyTorch's two biases only ever act as b_a = b_ih + b_hh.",
       "N->1, N->N, 1->N, seq2seq: the same cell; only where inputs enter and outputs leave "
       "differs.",
       "a<t> needs a<t-1>, so the loop over t is sequential; only X W_ih^T is one big product.",
       fmt::format("x<1>'s effect on a<T> changes ~{:.2f}x per step at W_hh {} (<1 vanishes, "
                   ">1 explodes).",
                   per_step[ref], scale_names[ref]),
       "Self-attention joins x<1> to every output in one step, all outputs at once: chapter 02."},
      {{"--scales 1.5,1.75,2,2.5,3", "where does decay turn into growth?"},
       {"--experiment-hidden 4", "small H: rho varies a lot between models"},
       {"--distance 200 --scales 0.5,1", "how far down does it go?"},
       {"--input-size 1 --hidden 1", "a scalar RNN: every matrix is a number"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("01_rnn", "The RNN recurrence", 2026);
  ch.cites("notes 000 and 004");
  Knobs k;
  ch.option("--input-size", k.I, "I, features per input x<t>").range(1, 64);
  ch.option("--hidden", k.H, "H, size of the hidden state a<t>").range(1, 256);
  ch.option("--steps", k.T, "T, length of the worked example's sequence").range(1, 1000);
  ch.option("--experiment-hidden", k.H_exp, "H of the dependence experiment").range(1, 256);
  ch.option("--distance", k.D, "largest distance T-1 the experiment measures").range(1, 200);
  // The experiment's time grows as seeds x scales x distance x H^2 x I: with every other knob at
  // its largest, 64 models took 25-27 s on a desktop CPU, 32 take 10-13 s.
  ch.option("--seeds", k.n_seeds,
            "random models averaged per point of the experiment (at most 32: the run's time "
            "grows with it, and with every knob at its largest 32 take ~10 s on a desktop CPU)")
      .range(1, 32);
  ch.option("--scales", k.scales, "W_hh scales (x PyTorch's init), e.g. 0.5,1,3; at most 6 values")
      .items(',', 1, 6)
      .range(0.1, 10.0);
  return ch.run(argc, argv, [&] { lesson(ch, k); });
}
