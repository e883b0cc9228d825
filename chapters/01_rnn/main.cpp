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
#include "course/cli.hpp"
#include "course/print.hpp"
#include "attn/random.hpp"
#include "attn/rnn.hpp"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

using course::fmt;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::RowVector;

namespace {

// The largest |eigenvalue| of W_hh: above 1 some direction grows step after step, below 1
// every direction shrinks (before tanh' <= 1 shrinks it further).
double spectral_radius(const Matrix& W) {
  const Eigen::MatrixXd Wd = W.cast<double>();
  return Eigen::EigenSolver<Eigen::MatrixXd>(Wd, false).eigenvalues().cwiseAbs().maxCoeff();
}

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

}  // namespace

int main(int argc, char** argv) {
  course::ChapterCli cli("01_rnn", "Chapter 01: the RNN recurrence and why attention replaced it",
                       2026);
  Index I = 3, H = 4, T = 5;              // the worked example
  Index H_exp = 32, D = 50, n_seeds = 8;  // the experiment
  std::vector<double> scales = {0.5, 1.0, std::sqrt(3.0), 3.0};
  cli.app().add_option("--input-size", I, "I, features per input x<t>")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cli.app().add_option("--hidden", H, "H, size of the hidden state a<t>")
      ->capture_default_str()->check(CLI::Range(1, 256));
  cli.app().add_option("--steps", T, "T, length of the worked example's sequence")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cli.app().add_option("--experiment-hidden", H_exp, "H of the dependence experiment")
      ->capture_default_str()->check(CLI::Range(1, 256));
  cli.app().add_option("--distance", D, "largest distance T-1 the experiment measures")
      ->capture_default_str()->check(CLI::Range(1, 200));
  cli.app().add_option("--seeds", n_seeds, "random models averaged per point of the experiment")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cli.app().add_option("--scales", scales, "W_hh scales (x PyTorch's init), e.g. 0.5,1,3")
      ->delimiter(',')->expected(1, 6)->capture_default_str()
      ->check(course::finite_range(0.1, 10.0));
  if (auto code = cli.parse(argc, argv)) return *code;
  const std::uint64_t seed = cli.options().seed;
  course::Dumper dump = cli.dumper();
  course::Plotter plot = cli.plotter();

  std::cout << "01 . The RNN recurrence (seed " << seed << ", I = " << I << ", H = " << H
            << ", T = " << T << ")\n";

  // ---- 1. The recurrence: a<t> = tanh(W_ih x<t> + b_ih + W_hh a<t-1> + b_hh) --------------------
  course::banner(std::cout, "1. The recurrence: a<t> = tanh(W_ih x<t> + b_ih + W_hh a<t-1> + b_hh)");
  // PyTorch's default initialisation: all four parameters from U(-k, k), k = 1/sqrt(H).
  attn::Rng rng(seed);
  const attn::RnnCell cell = attn::rnn_init(rng, I, H);
  const Matrix X = attn::random_normal(rng, T, I);            // x<1..T> [T x I], tokens as rows
  const RowVector h0 = attn::random_normal(rng, 1, H, 0.0, 0.5);  // a<0> [1 x H]
  std::cout << "  The notes write a<t> = g(W_aa a<t-1> + W_ax x<t> + b_a). PyTorch names\n"
               "  W_ax weight_ih and W_aa weight_hh, and keeps two biases: b_a = b_ih + b_hh.\n"
               "  Only the sum matters (PyTorch keeps both for cuDNN compatibility).\n"
            << fmt("  Initialised like torch.nn.RNN: every parameter ~ U(-k, k), k = 1/sqrt(H)"
                   " = %.4f.\n", 1.0 / std::sqrt(static_cast<double>(H)));
  course::print_matrix(std::cout, "W_ih (the notes' W_ax)", cell.weight_ih);
  course::print_matrix(std::cout, "W_hh (the notes' W_aa)", cell.weight_hh);
  course::print_matrix(std::cout, "b_ih", cell.bias_ih);
  course::print_matrix(std::cout, "b_hh", cell.bias_hh);
  course::print_matrix(std::cout, "b_a = b_ih + b_hh", cell.bias_ih + cell.bias_hh);
  course::notice(std::cout, "weight_ih is [H x I]: it maps an input of I features to H.");
  course::notice(std::cout, "weight_hh is [H x H]: the same matrix is used at every step t.");
  dump("weight_ih_l0", cell.weight_ih);
  dump("weight_hh_l0", cell.weight_hh);
  const std::vector<std::size_t> shape_h = {static_cast<std::size_t>(H)};
  dump("bias_ih_l0", shape_h, {cell.bias_ih.data(), shape_h[0]});  // [H], as PyTorch stores it
  dump("bias_hh_l0", shape_h, {cell.bias_hh.data(), shape_h[0]});
  dump("x", X);
  dump("h0", Matrix(h0));

  // ---- 2. One step by hand: t = 1 ---------------------------------------------------------------
  course::banner(std::cout, "2. One step by hand: t = 1");
  std::cout << "  Tokens are rows here (as in PyTorch), so W_ih x<t> is computed as x<t> W_ih^T.\n"
               "  a<0> is usually zeros; it is random here so the W_hh term shows.\n";
  const RowVector x1 = X.row(0);  // [1 x I]
  // std::tanh below, as in the library (Eigen's vectorised float tanh is a rougher
  // approximation: 4.9 ulp against glibc's 2.1).
  // [one_step]
  const RowVector from_input = x1 * cell.weight_ih.transpose() + cell.bias_ih;  // [1 x H]
  const RowVector from_state = h0 * cell.weight_hh.transpose() + cell.bias_hh;  // [1 x H]
  const RowVector z1 = from_input + from_state;                                 // [1 x H]
  const RowVector a1 = z1.unaryExpr([](float z) { return std::tanh(z); });      // [1 x H]
  // [one_step]
  course::print_matrix(std::cout, "x<1>", x1);
  course::print_matrix(std::cout, "a<0> (h0)", h0);
  course::print_matrix(std::cout, "W_ih x<1> + b_ih", from_input);
  course::print_matrix(std::cout, "W_hh a<0> + b_hh", from_state);
  course::print_matrix(std::cout, "z<1> = their sum", z1);
  course::print_matrix(std::cout, "a<1> = tanh(z<1>)", a1);
  course::notice(std::cout, "tanh squashes every entry into (-1, 1): the state cannot blow up, "
                          "but it saturates.");

  // ---- 3. Unrolled over the sequence: X [T x I] -> A [T x H] ------------------------------------
  course::banner(std::cout, "3. Unrolled over the sequence: X [T x I] -> A [T x H]");
  const Matrix A = attn::rnn_forward(cell, X, h0);  // a<1..T> [T x H]
  course::print_matrix(std::cout, "X (row t = x<t>)", X);
  course::print_matrix(std::cout, "A (row t = a<t>)", A);
  std::cout << fmt("  max |A row 1 - a<1> by hand| = %.1e\n",
                   static_cast<double>((A.row(0) - a1).cwiseAbs().maxCoeff()));
  course::notice(std::cout, "row t needs row t-1: " + std::to_string(T) +
                              " steps, one after another, whatever the hardware.");
  course::notice(std::cout, "a<T> is the last row; PyTorch returns it again as h_n.");
  dump("hidden_states", A);
  dump("h_n", Matrix(A.bottomRows(1)));

  // ---- 4. Four shapes: N->1, N->N, 1->N, seq2seq ------------------------------------------------
  course::banner(std::cout, "4. Four shapes: N->1, N->N, 1->N, seq2seq");
  const Index O = 2, M = 3;  // classes of the head; length of the decoder's output
  const attn::OutputHead head = attn::head_init(rng, H, O);      // W_y [O x H], b_y [1 x O]
  const attn::RnnCell generator = attn::rnn_init(rng, I, H);     // 1->N: reads its own outputs,
  const attn::OutputHead gen_head = attn::head_init(rng, H, I);  // so its O is I
  const attn::RnnCell decoder = attn::rnn_init(rng, O, H);       // seq2seq: reads y_hat<t-1>
  const std::string sT = std::to_string(T), sI = std::to_string(I), sH = std::to_string(H);
  std::cout << "  The head: y_hat<t> = softmax(W_y a<t> + b_y) with W_y "
            << attn::shape_str(head.weight) << ": a probability per class.\n";
  // [shapes]
  const attn::RnnRun n_to_1 = attn::many_to_one(cell, head, X, h0);     // y_hat [1 x O]
  const attn::RnnRun n_to_n = attn::many_to_many(cell, head, X, h0);    // Y_hat [T x O]
  const attn::RnnRun one_to_n =                                         // Y_hat [T x I]
      attn::one_to_many(generator, gen_head, x1, h0, T);  // x<t+1> = y_hat<t>
  const attn::Seq2SeqRun s2s =                                          // Y_hat [M x O]
      attn::seq2seq(cell, decoder, head, X, h0, M);       // decoder a<0> = encoder a<T>
  // [shapes]
  std::cout << "\n  N->1 (classify a sequence): x " << attn::shape_str(X) << " -> a<" << sT
            << "> [1 x " << sH << "] -> y_hat " << attn::shape_str(n_to_1.outputs) << "\n";
  course::print_matrix(std::cout, "y_hat", n_to_1.outputs);
  std::cout << "\n  N->N (label every step): x " << attn::shape_str(X) << " -> A "
            << attn::shape_str(n_to_n.states) << " -> Y_hat " << attn::shape_str(n_to_n.outputs)
            << "\n";
  course::print_matrix(std::cout, "Y_hat", n_to_n.outputs);
  course::notice(std::cout, "the last row of Y_hat is N->1's y_hat: the same model, read at "
                          "every step.");
  std::cout << "\n  1->N (generate): x<1> [1 x " << sI << "] -> A "
            << attn::shape_str(one_to_n.states) << " -> Y_hat "
            << attn::shape_str(one_to_n.outputs) << ", then x<t+1> = y_hat<t>\n";
  course::print_matrix(std::cout, "Y_hat", one_to_n.outputs);
  course::notice(std::cout, "each output is the next input, so O = I = " + sI +
                              " and step t+1 cannot start before step t ends.");
  std::cout << "\n  seq2seq (encode N, decode M): x " << attn::shape_str(X) << " -> context a<"
            << sT << "> " << attn::shape_str(s2s.context) << ",\n"
            << "    then the decoder from it: A " << attn::shape_str(s2s.decoder_states)
            << " -> Y_hat " << attn::shape_str(s2s.outputs) << ", x<t+1> = y_hat<t>\n";
  course::print_matrix(std::cout, "context = the last row of A above", s2s.context);
  course::print_matrix(std::cout, "Y_hat", s2s.outputs);
  course::notice(std::cout, "the decoder sees the " + sT + " inputs only through these " + sH +
                              " numbers: the context is a bottleneck.");
  dump("W_y", head.weight);
  dump("b_y", Matrix(head.bias));
  dump("y_hat", n_to_n.outputs);

  // ---- 5. What the recurrence costs: sequential steps and long paths ----------------------------
  course::banner(std::cout, "5. What the recurrence costs: sequential steps and long paths");
  std::cout << "  sequence length T                        5      50     500\n"
               "  RNN: steps that must run in order        5      50     500   a<t> waits for "
               "a<t-1>\n"
               "  self-attention: steps in order           1       1       1   all outputs at "
               "once\n"
               "  RNN: cell steps from x<1> to output T    5      50     500\n"
               "  self-attention: x<1> to output T         1       1       1   every pair is "
               "direct\n";
  // The figure of the table's last two rows, for t = 1 .. D.
  course::Series rnn_path, attn_path;
  rnn_path.label = "RNN: t cell steps, each waiting for the one before";
  attn_path.label = "self-attention: 1 step, every pair connected directly";
  for (Index t = 1; t <= D; ++t) {
    rnn_path.x.push_back(static_cast<double>(t));
    rnn_path.y.push_back(static_cast<double>(t));
    attn_path.x.push_back(static_cast<double>(t));
    attn_path.y.push_back(1.0);
  }
  rnn_path.points = attn_path.points = false;
  attn_path.dashed = true;
  plot.lines("01_path_length", {rnn_path, attn_path},
             {.title = "Sequential steps between x<1> and output t",
              .xlabel = "output position t",
              .ylabel = "sequential steps on the path"});
  std::cout << "\n  Along the RNN's path the chain rule multiplies one factor per step:\n"
               "    d a<T>/d x<1> = D<T> W_hh D<T-1> W_hh ... D<2> W_hh D<1> W_ih,"
               "  D<t> = diag(1 - a<t>^2)\n";
  course::notice(std::cout, "T-1 factors of W_hh: if they shrink vectors, the product vanishes");
  std::cout << "     geometrically; if they stretch them, it can explode. Sections 6-7 "
               "measure it.\n";

  // ---- 6. The chain rule, checked against central differences -----------------------------------
  const Index Tc = std::min<Index>(T, 5);  // short enough for finite differences to resolve
  const std::string sTc = std::to_string(Tc);
  course::banner(std::cout, "6. The chain rule, checked against central differences (T = " + sTc +
                              ")");
  const Matrix Xc = X.topRows(Tc);                                             // [Tc x I]
  const MatrixD J = attn::input_jacobians(cell, Xc, h0).back();                // [H x I]
  const MatrixD J_fd = attn::input_jacobian_central_difference(cell, Xc, h0);  // [H x I]
  const double rel = (J - J_fd).cwiseAbs().maxCoeff() / J.cwiseAbs().maxCoeff();
  course::print_matrix(std::cout, "d a<" + sTc + ">/d x<1> by the chain rule", J,
                     {.precision = 8, .max_cols = 6});
  course::print_matrix(std::cout, "d a<" + sTc + ">/d x<1> by central differences, eps = 1e-4",
                     J_fd, {.precision = 8, .max_cols = 6});
  dump("d_aT_d_x1", J);
  // Central differences are good to ~1e-9 here (eps^2 truncation plus 1e-16/eps rounding);
  // a wrong factor in the chain rule would be off by tens of percent.
  const bool ok = rel <= 1e-6;
  std::cout << "  analytic d a<" << sTc << ">/d x<1> " << (ok ? "matches" : "DOES NOT MATCH")
            << fmt(" central finite differences: max relative difference %.1e\n", rel);
  if (!ok) return 1;
  course::notice(std::cout, "(relative to the largest entry; eps is the step added to each "
                          "entry of x<1>)");

  // ---- 7. How much of x<1> reaches a<T>, as the distance T-1 grows ------------------------------
  course::banner(std::cout, "7. How much of x<1> reaches a<T>, as the distance T-1 grows");
  // K random models (PyTorch's init, H = H_exp, inputs ~ N(0, 1), a<0> = 0); in each, W_hh is
  // multiplied by every scale s and nothing else changes. Reported: the geometric mean over
  // the K models of the Frobenius norm ||d a<T>/d x<1>||_F, every sensitivity of every unit
  // to every input feature at once. Geometric, because the norms span dozens of orders of
  // magnitude: an ordinary mean would just report the luckiest model.
  const std::size_t n_s = scales.size();
  std::vector<std::vector<double>> log_norm(n_s, std::vector<double>(D + 1, 0.0));
  std::vector<double> rho(n_s, 0.0);
  attn::Rng exp_rng(seed + 1);
  for (Index k = 0; k < n_seeds; ++k) {
    const attn::RnnCell base = attn::rnn_init(exp_rng, I, H_exp);
    const Matrix Xe = attn::random_normal(exp_rng, D + 1, I);  // x<1..D+1> [(D+1) x I]
    const RowVector a0 = RowVector::Zero(H_exp);               // [1 x H_exp]
    const double rho_base = spectral_radius(base.weight_hh);   // rho(s W) = s rho(W)
    for (std::size_t s = 0; s < n_s; ++s) {
      // [experiment]
      attn::RnnCell scaled = base;
      scaled.weight_hh *= static_cast<float>(scales[s]);  // U(-k, k) becomes U(-s k, s k)
      // Js[d] = d a<d+1>/d x<1> [H x I]: the dependence across a distance of d steps
      const std::vector<MatrixD> Js = attn::input_jacobians(scaled, Xe, a0);
      for (Index d = 0; d <= D; ++d) log_norm[s][d] += std::log(Js[d].norm()) / n_seeds;
      // [experiment]
      rho[s] += scales[s] * rho_base / static_cast<double>(n_seeds);
    }
  }
  // The effective factor per step: (norm at D / norm at 0)^(1/D).
  std::vector<double> per_step(n_s);
  for (std::size_t s = 0; s < n_s; ++s) {
    per_step[s] = std::exp((log_norm[s][D] - log_norm[s][0]) / static_cast<double>(D));
  }
  std::cout << fmt("  H = %d, I = %d, %d models per scale; geometric mean of "
                   "||d a<T>/d x<1>||_F.\n",
                   static_cast<int>(H_exp), static_cast<int>(I), static_cast<int>(n_seeds));
  std::string head_scale = "  W_hh scale s      ", head_rho = "  mean rho(W_hh)    ",
              factor = "  factor per step   ";
  for (std::size_t s = 0; s < n_s; ++s) {
    head_scale += fmt("%11s", fmt("x%.2f", scales[s]).c_str());
    head_rho += fmt("%11.2f", rho[s]);
    factor += fmt("%11.2f", per_step[s]);
  }
  std::cout << head_scale << "\n" << head_rho << "\n  distance T-1\n";
  for (Index d : table_distances(D)) {
    std::string line = fmt("  %12d      ", static_cast<int>(d));
    for (std::size_t s = 0; s < n_s; ++s) line += fmt("%11.1e", std::exp(log_norm[s][d]));
    std::cout << line << "\n";
  }
  std::cout << factor << "\n";
  // The scale closest to PyTorch's own init anchors the notices.
  std::size_t ref = 0;
  for (std::size_t s = 1; s < n_s; ++s) {
    if (std::abs(scales[s] - 1.0) < std::abs(scales[ref] - 1.0)) ref = s;
  }
  const std::string ref_name = fmt("x%.2f", scales[ref]);
  course::notice(std::cout, fmt("at W_hh %s, a<%d> responds to x<1> ~%.0e times as strongly "
                              "as a<1> does.",
                              ref_name.c_str(), static_cast<int>(D + 1),
                              std::exp(log_norm[ref][D] - log_norm[ref][0])));
  course::notice(std::cout, "rho(W_hh) alone is not the rate: every D<t> = diag(1 - a<t>^2) "
                          "<= 1 shrinks as well.");

  // The figure: one curve per scale, and self-attention's one-step path as a flat reference.
  std::vector<course::Series> curves;
  for (std::size_t s = 0; s < n_s; ++s) {
    course::Series c;
    // "W_hh" is left out of figure text: gnuplot's enhanced mode reads "_" as a subscript.
    c.label = fmt("RNN, recurrent weights x%.2f (rho %.2f)%s", scales[s], rho[s],
                  scales[s] == 1.0 ? ", PyTorch's init" : "");
    for (Index d = 0; d <= D; ++d) {
      const double v = std::exp(log_norm[s][d]);
      if (v > 0.0) {  // a log axis cannot show an underflow to 0
        c.x.push_back(static_cast<double>(d));
        c.y.push_back(v);
      }
    }
    c.points = false;
    curves.push_back(std::move(c));
  }
  course::Series flat;
  flat.label = "self-attention: a 1-step path at any distance (drawn at distance 0's level)";
  flat.x = {0.0, static_cast<double>(D)};
  flat.y = {std::exp(log_norm[ref][0]), std::exp(log_norm[ref][0])};
  flat.points = false;
  flat.dashed = true;
  curves.push_back(flat);
  plot.lines("01_dependence", curves,
             {.title = "How much of x<1> reaches a<T> (H = " + std::to_string(H_exp) +
                       ", geometric mean of " + std::to_string(n_seeds) + " models)",
              .xlabel = "distance T - 1 (steps between x<1> and a<T>)",
              .ylabel = "Frobenius norm of d a<T> / d x<1>",
              .logy = true});

  // ---- What to notice ---------------------------------------------------------------------------
  course::banner(std::cout, "What to notice");
  course::notice(std::cout, "One cell, reused at every step. PyTorch's two biases only ever act "
                          "as b_a = b_ih + b_hh.");
  course::notice(std::cout, "N->1, N->N, 1->N, seq2seq: the same cell; only where inputs enter "
                          "and outputs leave differs.");
  course::notice(std::cout, "a<t> needs a<t-1>, so the loop over t is sequential; only X W_ih^T "
                          "is one big product.");
  course::notice(std::cout, fmt("x<1>'s effect on a<T> changes ~%.2fx per step at W_hh %s "
                              "(<1 vanishes, >1 explodes).",
                              per_step[ref], ref_name.c_str()));
  course::notice(std::cout, "Self-attention joins x<1> to every output in one step, all outputs "
                          "at once: chapter 02.");
  course::try_this(std::cout, "01_rnn",
                 {{"--scales 1.5,1.75,2,2.5,3", "where does decay turn into growth?"},
                  {"--experiment-hidden 4", "small H: rho varies a lot between models"},
                  {"--distance 200 --scales 0.5,1", "how far down does it go?"},
                  {"--input-size 1 --hidden 1", "a scalar RNN: every matrix is a number"}});
  if (const std::string f = plot.summary(); !f.empty()) std::cout << "\n" << f;
  if (const std::string s = dump.summary(); !s.empty()) std::cout << "\n" << s << "\n";
  return 0;
}
