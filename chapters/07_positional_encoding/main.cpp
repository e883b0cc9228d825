// 07_positional_encoding: self-attention cannot see word order; sinusoidal position vectors give
// it one, and moving every position by k is one fixed rotation.
//
//   PE(pos, 2i)   = sin(omega_i pos)       omega_i = 10000^(-2i / d_model),  i < d_model/2
//   PE(pos, 2i+1) = cos(omega_i pos)
//   PE(pos + k)   = R(k) PE(pos)           R(k) block-diagonal, its entries read off PE(k)
//   PE(pos) . PE(pos + k) = sum_i cos(omega_i k)       (k only: pos cancels)
//
//   07_positional_encoding [--d-model D] [--positions P] [--max-offset K]
//                          [--seed N] [--out DIR] [--no-plots] [--dump DIR] [--step]
#include "attn/core/random.hpp"
#include "attn/layers/embedding.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/ops/attention.hpp"
#include "course/chapter.hpp"
#include "figures.hpp"
#include "self_attention.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using positional::Projections;
using positional::self_attention;
using positional::SelfAttention;

struct Knobs {
  Index d_model = 128;     // features per position: d_model / 2 (sin, cos) pairs
  Index positions = 100;   // P: rows of the whole table and its heat map
  Index max_offset = 100;  // K: the largest shift k of the rotation check and the dot products
};

// A rounding-sized difference: "0" when it is exactly zero, else "2.4e-07".
std::string tiny(double x) { return x == 0.0 ? "0" : fmt::format("{:.1e}", x); }

// [sweep]
// max over pos < P and 0 <= k <= K of |R(k) PE(pos) - PE(pos + k)|, entry by entry. `pe` holds
// PE(0 .. P+K-1) as float (Matrix) or double (MatrixD), and all the arithmetic is in that type.
// R(k) is applied pair by pair, its zeros skipped; its entries are PE(k)'s own.
template <typename Table>
double largest_rotation_error(const Table& pe, Index P, Index K) {
  using Scalar = typename Table::Scalar;
  using Array = Eigen::Array<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Array S = pe(Eigen::all, Eigen::seq(0, Eigen::last, 2)).array();  // [P+K x d/2]: sin
  const Array C = pe(Eigen::all, Eigen::seq(1, Eigen::last, 2)).array();  // [P+K x d/2]: cos
  double worst = 0.0;
  for (Index k = 0; k <= K; ++k) {
    const auto sin_k = S.row(k), cos_k = C.row(k);  // [1 x d/2]: sin(omega_i k), cos(omega_i k)
    // [P x d/2] each: PE(pos+k, 2i) and PE(pos+k, 2i+1) for every pos < P, from PE(pos).
    const Array moved_sin = S.topRows(P).rowwise() * cos_k + C.topRows(P).rowwise() * sin_k;
    const Array moved_cos = C.topRows(P).rowwise() * cos_k - S.topRows(P).rowwise() * sin_k;
    worst = std::max({worst, attn::max_abs_diff(moved_sin, S.middleRows(k, P)),
                      attn::max_abs_diff(moved_cos, C.middleRows(k, P))});
  }
  return worst;
}
// [sweep]

// [recipe]
// The table as the PyTorch tutorials build it, every step in float32:
//   div_term = exp(arange(0, d, 2) * (-ln(10000) / d));  pe[:, 0::2] = sin(position * div_term)
// (with the C library's expf; PyTorch's own float32 exp is off by one ulp now and then, which
// moves its table by the same order as below, not the same bits).
Matrix float32_recipe(const std::vector<Index>& positions, Index d_model) {
  const float c = static_cast<float>(-std::log(10000.0) / d_model);
  Matrix pe(std::ssize(positions), d_model);  // [n x d_model]
  for (Index two_i = 0; two_i + 1 < d_model; two_i += 2) {
    const float div_term = std::exp(static_cast<float>(two_i) * c);  // omega_i, in float32
    for (Index r = 0; r < pe.rows(); ++r) {
      const float angle = static_cast<float>(positions[r]) * div_term;  // rounded to float32
      pe(r, two_i) = std::sin(angle);
      pe(r, two_i + 1) = std::cos(angle);
    }
  }
  return pe;
}
// [recipe]

void lesson(course::Chapter& ch, const Knobs& knob) {
  const Index d_model = knob.d_model, P = knob.positions, K = knob.max_offset, pairs = d_model / 2;
  ch.intro("d_model {}, positions {}, max offset {}, seed {}", d_model, P, K, ch.seed());

  ch.step("Attention ignores order: \"dog bites man\" and \"man bites dog\"");
  attn::Rng rng(ch.seed());
  const std::vector<std::string> words_a = {"dog", "bites", "man"},
                                 words_b = {"man", "bites", "dog"};  // words_a read backwards
  const Matrix table = attn::embedding_init(rng, 3, d_model);  // [3 x d_model]: dog, bites, man
  const double w_std = 1.0 / std::sqrt(d_model);
  const Projections W{attn::random_normal(rng, d_model, d_model, 0.0, w_std),
                      attn::random_normal(rng, d_model, d_model, 0.0, w_std),
                      attn::random_normal(rng, d_model, d_model, 0.0, w_std)};
  ch.prose("One embedding row per word, table {} ~ N(0, 1), and one layer with its own "
           "projections W_q, W_k, W_v {} ~ N(0, 1/{}):",
           course::shape(table), course::shape(W.W_q), d_model);
  ch.say("Q = X W_q, K = X W_k, V = X W_v, out = softmax(Q K^T / sqrt({})) V.", d_model);
  // [permute]
  const std::vector<Index> swap = {2, 1, 0};  // "man bites dog" = rows 2, 1, 0 of the other
  const Matrix X_a = table;                   // [3 x d_model]: dog, bites, man
  const Matrix X_b = X_a(swap, Eigen::all);   // [3 x d_model]: man, bites, dog
  const SelfAttention a = self_attention(X_a, W), b = self_attention(X_b, W);
  const Matrix out_b_back = b.r.out(swap, Eigen::all);  // [3 x d_model], back in a's order
  // [permute]
  ch.show("weights, dog bites man", a.r.weights, {.row_labels = words_a, .col_labels = words_a});
  ch.show("weights, man bites dog", b.r.weights, {.row_labels = words_b, .col_labels = words_b});
  ch.notice("the same nine numbers, rows and columns reversed (the heat map turns by 180 "
            "degrees).");
  ch.show("out, dog bites man", a.r.out, {.max_cols = 6, .row_labels = words_a});
  ch.show("out, man bites dog", b.r.out, {.max_cols = 6, .row_labels = words_b});
  const double diff_qkv = std::max({attn::max_abs_diff(b.Q(swap, Eigen::all), a.Q),
                                    attn::max_abs_diff(b.K(swap, Eigen::all), a.K),
                                    attn::max_abs_diff(b.V(swap, Eigen::all), a.V)});
  const Matrix scores_a = a.Q * a.K.transpose(), scores_b = b.Q * b.K.transpose();  // [3 x 3]
  const double diff_out = attn::max_abs_diff(out_b_back, a.r.out);
  // The notices say equal but for rounding: float sums of a few O(1) terms, ~1e-7 apart. A
  // broken permutation would be off by O(1); 1e-4 of the outputs' size tells the two apart.
  const double diff_weights = attn::max_abs_diff(b.r.weights(swap, swap), a.r.weights);
  if (diff_weights > 1e-4 || diff_out > 1e-4 * (1.0 + a.r.out.cwiseAbs().maxCoeff())) {
    throw std::runtime_error(fmt::format("permuting the words did not just permute the weights "
                                         "({:.1e}) and outputs ({:.1e})",
                                         diff_weights, diff_out));
  }
  ch.say("\"man bites dog\" put back in the order dog, bites, man, minus \"dog bites man\", "
         "max |.|:\n  Q, K, V {},  scores Q K^T {},  weights {},  out {}",
         tiny(diff_qkv), tiny(attn::max_abs_diff(scores_b(swap, swap), scores_a)),
         tiny(diff_weights), tiny(diff_out));
  ch.notice("equal but for rounding: the softmax's sum and weights V add the same terms in "
            "another order, which can move the last bit (float addition is not associative).");
  ch.notice("each word gets the same output whether it bites or is bitten: permute the input rows "
            "and the output rows permute with them. A bag of words is all attention sees.");
  ch.dump("embedding_table", table);
  ch.dump("W_q", W.W_q);
  ch.dump("W_k", W.W_k);
  ch.dump("W_v", W.W_v);
  ch.dump("X_dog_bites_man", X_a);
  ch.dump("X_man_bites_dog", X_b);
  ch.dump("weights_dog_bites_man", a.r.weights);
  ch.dump("weights_man_bites_dog", b.r.weights);
  ch.dump("out_dog_bites_man", a.r.out);
  ch.dump("out_man_bites_dog", b.r.out);

  ch.step("Add a position vector to every word: X + PE(0..2)");
  const Matrix pe3 = attn::sinusoidal_encoding(3, d_model);  // [3 x d_model], positions 0, 1, 2
  // [add_pe]
  const Matrix Xp_a = X_a + pe3;  // [3 x d_model]: dog@0, bites@1, man@2
  const Matrix Xp_b = X_b + pe3;  // [3 x d_model]: man@0, bites@1, dog@2
  const SelfAttention ap = self_attention(Xp_a, W), bp = self_attention(Xp_b, W);
  // [add_pe]
  ch.show("weights, dog bites man + PE", ap.r.weights,
          {.row_labels = words_a, .col_labels = words_a});
  ch.show("weights, man bites dog + PE", bp.r.weights,
          {.row_labels = words_b, .col_labels = words_b});
  const Matrix outp_b_back = bp.r.out(swap, Eigen::all);  // [3 x d_model], a's word order
  ch.say("out, put back: max |difference| = {:.3f}   (without PE: {})\n"
         "the output for \"dog\": |out_dog(dog bites man) - out_dog(man bites dog)| = {:.3f}",
         attn::max_abs_diff(outp_b_back, ap.r.out), tiny(diff_out),
         (ap.r.out.row(0) - bp.r.out.row(2)).norm());
  ch.notice("\"dog\" at position 0 and \"dog\" at position 2 are now different vectors, so the "
            "sentences are different inputs, and the dog that bites is not the dog that is "
            "bitten.");
  ch.dump("X_dog_bites_man_pe", Xp_a);
  ch.dump("X_man_bites_dog_pe", Xp_b);
  ch.dump("weights_dog_bites_man_pe", ap.r.weights);
  ch.dump("weights_man_bites_dog_pe", bp.r.weights);
  ch.dump("out_dog_bites_man_pe", ap.r.out);
  ch.dump("out_man_bites_dog_pe", bp.r.out);
  positional::draw_permutation(ch.plot(), a, b, ap, bp, words_a, words_b);

  ch.step("PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)");
  const Index d8 = 8;
  // [table]
  const Matrix pe8 = attn::sinusoidal_encoding(5, d8);            // [5 x 8]: positions 0 .. 4
  const attn::VectorD omega8 = attn::sinusoidal_frequencies(d8);  // [4]: 1, 0.1, 0.01, 0.001
  // [table]
  ch.prose("Note 004's sentence \"<begin> I am dog <end>\", positions 0 to 4, with d_model 8 so "
           "that every number fits. Pair i turns at omega_i radians per position:");
  ch.say("omega_i = 10000^(-2i/8) = 10^-i for i = 0..3: {:g}", fmt::join(omega8, ", "));
  // Five decimals here and in the rotation below: cos 0.01 = 0.999950000 is 0.99994999 in
  // float and 0.99995000 in double, which four decimals would print as 0.9999 and 1.0000.
  ch.show("PE", pe8,
          {.precision = 5,
           .row_labels = {"<begin>  0", "I        1", "am       2", "dog      3", "<end>    4"},
           .col_labels = {"sin i=0", "cos i=0", "sin i=1", "cos i=1", "sin i=2", "cos i=2",
                          "sin i=3", "cos i=3"}});
  ch.notice("PE(0) = [0, 1, 0, 1, ...]: sin 0 = 0 and cos 0 = 1 in every pair.");
  ch.notice("PE(1, 0) = sin 1 = {:.4f}, PE(1, 1) = cos 1 = {:.4f}: pair 0 turns one radian per "
            "position.",
            pe8(1, 0), pe8(1, 1));
  ch.notice("pair 3 turns 0.001 rad per position and barely moves over five words: it is there "
            "to tell far-apart positions from each other.");
  ch.dump("pe_note004", pe8);

  ch.step("The whole table: PE [{} x {}] (figure)", P, d_model);
  // [whole_table]
  const Matrix pe = attn::sinusoidal_encoding(P, d_model);            // [P x d_model]
  const attn::VectorD omega = attn::sinusoidal_frequencies(d_model);  // [d_model/2]
  // [whole_table]
  ch.show("PE (row = position, column = feature)", pe, {.max_rows = 6, .max_cols = 8});
  const double two_pi = 2.0 * std::numbers::pi;  // a wavelength is 2 pi / omega positions
  ch.say("omega from {:g} (pair 0) down to {:.3g} (pair {});\n"
         "wavelengths 2 pi / omega from {:.2f} to {:.2f} positions",
         omega(0), omega(pairs - 1), pairs - 1, two_pi / omega(0), two_pi / omega(pairs - 1));
  // The slowest pair turns omega_last (P - 1) radians down the table: "hardly changes" while
  // that is a small angle (0.011 rad at the default d_model 128, P = 100).
  const double slowest_turn = omega(pairs - 1) * static_cast<double>(P - 1);
  if (pairs == 1) {
    ch.notice("one pair only (d_model 2): a single sin, cos column pair that repeats every ~6 "
              "positions; the slower pairs come with a wider d_model. Each row is one position's "
              "vector, added to its word.");
  } else if (slowest_turn < 0.1) {
    ch.notice("left, fast stripes: the first pairs repeat every ~6 positions; right, slow columns "
              "that hardly change over {} positions. Each row is one position's vector, added to "
              "its word.",
              P);
  } else {
    ch.notice("left, fast stripes: the first pairs repeat every ~6 positions; right, the slowest "
              "pair turns {:.2f} rad over these {} positions (its wavelength is {:.0f}). Each row "
              "is one position's vector, added to its word.",
              slowest_turn, P, two_pi / omega(pairs - 1));
  }
  ch.dump("pe", pe);
  positional::draw_encoding(ch.plot(), pe);
  positional::draw_frequencies(ch.plot(), pe, omega);

  ch.step("PE(pos + k) = R(k) PE(pos): one fixed rotation for every pos");
  // [rotation]
  // sin(a + b) = sin a cos b + cos a sin b,  cos(a + b) = cos a cos b - sin a sin b,  with
  // a = omega_i pos, b = omega_i k: linear in (sin a, cos a), coefficients from k alone:
  //   PE(pos+k, 2i)   =  PE(k, 2i+1) PE(pos, 2i) + PE(k, 2i)   PE(pos, 2i+1)
  //   PE(pos+k, 2i+1) = -PE(k, 2i)   PE(pos, 2i) + PE(k, 2i+1) PE(pos, 2i+1)
  const MatrixD pe8d = attn::sinusoidal_encoding_d(5, d8);     // [5 x 8], in double
  const MatrixD R2 = attn::relative_rotation(2, d8);           // [8 x 8], k = 2
  const Eigen::VectorXd moved = R2 * pe8d.row(1).transpose();  // [8 x 1]: "I" moved by 2
  // [rotation]
  ch.show("R(2) for d_model 8 (block i = [[cos 2w_i, sin 2w_i], [-sin 2w_i, cos 2w_i]])", R2);
  MatrixD moved_rows(3, d8);  // [3 x 8]: PE(1), R(2) PE(1), PE(3)
  moved_rows << pe8d.row(1), moved.transpose(), pe8d.row(3);
  ch.show("\"I\" moved by 2", moved_rows,
          {.precision = 5, .row_labels = {"PE(1) \"I\"", "R(2) PE(1)", "PE(3) \"dog\""}});
  const MatrixD R1 = attn::relative_rotation(1, d8);  // [8 x 8]
  // Tokens are rows: the same map is a product with R(1)^T on the right, for all rows at once.
  ch.say("max |R(2) PE(\"I\") - PE(\"dog\")| = {:.1e};  rows: max |PE[0:4] R(1)^T - PE[1:5]| "
         "= {:.1e}",
         attn::max_abs_diff(moved.transpose(), pe8d.row(3)),
         attn::max_abs_diff(pe8d.topRows(4) * R1.transpose(), pe8d.bottomRows(4)));
  ch.notice("R(k) does not look at pos: the same matrix moves every word k places on. Its blocks "
            "are PE(k) itself, so the rotation is already in the table.");
  const Matrix pe_big = attn::sinusoidal_encoding(P + K, d_model);       // [P+K x d_model]
  const MatrixD pe_big_d = attn::sinusoidal_encoding_d(P + K, d_model);  // [P+K x d_model]
  const double err_float = largest_rotation_error(pe_big, P, K);
  const double err_double = largest_rotation_error(pe_big_d, P, K);
  // The bounds (README): float, five roundings of at most 2^-24 each on values of size <= 1.
  // Double, each of the three angles omega pos, omega k, omega (pos+k) is rounded once, by up
  // to half an ulp of the largest angle, plus a few ulps of 1 from sin, cos and the products.
  const double largest_angle = P + K - 1;
  const double half_ulp =
      (std::nextafter(largest_angle, 2 * largest_angle + 1) - largest_angle) / 2;
  const double bound_float = 5 * std::ldexp(1.0, -24);
  const double bound_double = 3 * half_ulp + 8 * std::ldexp(1.0, -53);
  ch.say("All pos < {}, k = 0..{} ({} shifts of {} pairs; PE up to position {}):\n"
         "  float  (table rounded to float, float products):  max error {:.1e}   (bound {:.1e})\n"
         "  double (table and products in double):           max error {:.1e}   (bound {:.1e})",
         P, K, course::with_commas(P * (K + 1)), pairs, P + K - 1, err_float, bound_float,
         err_double, bound_double);
  if (!(err_float <= bound_float) || !(err_double <= bound_double)) {
    throw std::runtime_error(fmt::format("PE(pos + k) = R(k) PE(pos) missed its rounding bound: "
                                         "{:.1e} in float (bound {:.1e}), {:.1e} in double (bound "
                                         "{:.1e})",
                                         err_float, bound_float, err_double, bound_double));
  }
  ch.notice("the identity is exact; what is left is rounding. In double it is the rounding of the "
            "angles (their ulp grows with pos), in float the rounding of the table itself.");
  ch.dump("R_1", attn::relative_rotation(1, d_model));
  ch.dump("R_2_note004", R2);
  ch.dump("rotation_max_error", MatrixD{{err_float, err_double}});  // [1 x 2]

  ch.step("PE(pos) . PE(pos + k) = sum_i cos(omega_i k): the offset k, not pos");
  // [dot]
  // Pair i adds sin a sin b + cos a cos b = cos(b - a) = cos(omega_i k): pos cancels.
  Eigen::VectorXd dot_by_offset(K + 1);  // [K+1]
  for (Index k = 0; k <= K; ++k) {
    dot_by_offset(k) = (omega * static_cast<double>(k)).array().cos().sum();
  }
  // [dot]
  // Every PE(pos) . PE(pos') with pos < P at once: the Gram matrix [P x P+K], entry (pos, pos+k).
  const MatrixD gram = pe_big_d.topRows(P) * pe_big_d.transpose();  // [P x P+K]
  double dot_err = 0.0;  // row pos from column pos on: PE(pos) . PE(pos + k), k = 0 .. K
  for (Index pos = 0; pos < P; ++pos) {
    dot_err = std::max(
        dot_err, attn::max_abs_diff(gram.row(pos).segment(pos, K + 1), dot_by_offset.transpose()));
  }
  // |PE(pos+k) - PE(pos)|^2 = |a|^2 + |b|^2 - 2 a.b, and |PE(pos)|^2 = d_model / 2 (one per pair).
  const auto distance = [&](Index k) {
    return std::sqrt(std::max(0.0, d_model - 2 * dot_by_offset(k)));
  };
  Eigen::VectorXf first(K + 1), later(K + 1);  // [K+1]: PE(0) . PE(k), PE(P-1) . PE(P-1+k)
  for (Index k = 0; k <= K; ++k) {
    first(k) = pe_big.row(0).dot(pe_big.row(k));  // in float, from the float table
    later(k) = pe_big.row(P - 1).dot(pe_big.row(P - 1 + k));
  }
  const std::string last = fmt::format("PE({0}).PE({0}+k)", P - 1);
  ch.say("     k   PE(0).PE(k)   {}   sum_i cos(omega_i k)   |PE(pos+k) - PE(pos)|", last);
  std::vector<Index> ks = {0, 1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 4096};
  std::erase_if(ks, [&](Index k) { return k > K; });
  if (ks.back() != K) ks.push_back(K);
  for (const Index k : ks) {
    ch.say("{:6}{:14.4f}{:{}.4f}{:23.4f}{:24.4f}", k, first(k), later(k), last.size() + 3,
           dot_by_offset(k), distance(k));
  }
  ch.say("max |PE(pos).PE(pos+k) - sum_i cos(omega_i k)| over pos < {}, k <= {}: {:.1e} (double)",
         P, K, dot_err);
  Index nearest = 0;  // the offset k >= 1 whose position vectors are closest
  dot_by_offset.tail(K).maxCoeff(&nearest);
  nearest += 1;
  if (nearest == 1) {  // no farther offset comes back above k = 1
    ch.notice("{} at k = 0 (d_model / 2, one per pair), then falling as k grows, with ripples.",
              pairs);
    ch.notice("no two positions share a vector; the closest are neighbours, {:.3f} apart: nearby "
              "looks alike.",
              distance(1));
  } else {
    ch.notice("{} at k = 0 (d_model / 2, one per pair), its largest value; it falls as k grows, "
              "then rises again.",
              pairs);
    ch.notice("the closest positions are k = {} apart ({:.3f}), closer than neighbours ({:.3f}): "
              "{}. More pairs keep far positions apart.",
              nearest, distance(nearest), distance(1),
              pairs == 1
                  ? "with one pair, its angle comes round to nearly where it started"
                  : fmt::format("with only {} pairs the frequencies nearly line up again", pairs));
  }
  ch.dump("dot_by_offset", MatrixD(dot_by_offset.transpose()));  // [1 x K+1]
  positional::draw_dot_product(ch.plot(), dot_by_offset, first, later, P, d_model);

  ch.step("Learned or hand-crafted position vectors (note 002)");
  const Index far = std::min<Index>(50, P + K - 1);
  // The first rows of an untrained nn.Embedding(max_len, d_model): N(0, 1) entries.
  const Matrix learned = attn::random_normal(rng, far + 1, d_model);  // [far+1 x d_model]
  const auto row = [&](std::string_view what, std::string_view sinusoid, std::string_view l) {
    ch.say("{:<23} {:<33} {}", what, sinusoid, l);
  };
  row("", "sinusoidal (this chapter)", fmt::format("learned: nn.Embedding({}, {})", P, d_model));
  row("parameters", "none", course::with_commas(P * d_model) + ", trained with the words");
  row(fmt::format("position {} and on", P), "the formula gives them",
      "no row: max_len caps the input");
  row("moving by k", "one fixed R(k), exact", "whatever training makes of it");
  row(fmt::format("p(0).p(1), p(0).p({})", far),
      fmt::format("{:.1f}, {:.1f}: the offset decides", pe_big.row(0).dot(pe_big.row(1)),
                  pe_big.row(0).dot(pe_big.row(far))),
      fmt::format("{:.1f}, {:.1f}: untrained, noise ~ {:.0f}", learned.row(0).dot(learned.row(1)),
                  learned.row(0).dot(learned.row(far)), std::sqrt(d_model)));
  ch.notice("the paper tried both and found nearly identical results; it kept the sinusoid in the "
            "hope it extrapolates to longer sentences. BERT and GPT-2 learn theirs (512 and 1024 "
            "rows).");

  ch.step("Precision: the float32 recipe against the table computed in double");
  const std::vector<Index> far_positions = {1, 10, 100, 1000, 10000};
  const MatrixD truth = attn::sinusoidal_encoding_at(far_positions, d_model);  // [5 x d_model]
  const Matrix recipe = float32_recipe(far_positions, d_model);                // [5 x d_model]
  const Matrix rounded = truth.cast<float>();   // [5 x d_model], as attn::sinusoidal_encoding
  MatrixD recipe_positions(1, recipe.rows());   // [1 x 5]: far_positions, for the dump
  Eigen::VectorXd recipe_error(recipe.rows());  // [5]: max |recipe - truth| per position
  ch.say("   pos   float32 angle spacing   max |error|: float32 recipe   double, rounded once");
  for (Index r = 0; r < recipe.rows(); ++r) {
    const float angle = static_cast<float>(far_positions[r]);  // pair 0's angle, pos * 1
    recipe_error(r) = attn::max_abs_diff(recipe.row(r), truth.row(r));
    ch.say("{:6}   {:21.1e}   {:26.1e}   {:20.1e}", far_positions[r],
           std::nextafter(angle, 2 * angle) - angle, recipe_error(r),
           attn::max_abs_diff(rounded.row(r), truth.row(r)));
    recipe_positions(0, r) = far_positions[r];
  }
  // Grows: at pos 10000 the recipe is off by more than ten times its error at pos 1 (the sin's
  // own float rounding, ~3e-8).
  const bool recipe_drifts = recipe_error(recipe.rows() - 1) > 10.0 * recipe_error(0);
  if (recipe_drifts) {
    ch.notice("the recipe rounds omega and the angle pos * omega to float32 before the sin: both "
              "errors grow with pos. Angles in double, rounded once at the end, stay within half "
              "a float ulp.");
  } else if (pairs == 1) {  // d_model 2: omega_0 = 1 and every pos * 1 are exact in float32
    ch.notice("here the recipe's error does not grow with pos: its one frequency, omega_0 = 1, and "
              "every angle pos * 1 are exact in float32, so nothing is rounded before the sin. "
              "Wider tables round omega_i (i > 0) and pos * omega_i, and then the error grows "
              "with pos.");
  } else {
    ch.notice("at these positions the recipe's error stays near the sin's own float rounding; it "
              "grows with pos once the rounding of omega_i and of pos * omega_i shows.");
  }
  ch.dump("recipe_positions", recipe_positions);
  ch.dump("pe_float32_recipe", recipe);

  ch.finish(
      {"Without positions, permuting the words permutes the outputs: attention sees a bag of "
       "words.",
       pairs == 1 ? std::string("PE pairs a sin and a cos per frequency; d_model 2 has one, 1 "
                                "radian per position (1/10000 is approached as d_model grows).")
       : omega(pairs - 1) < 2e-4  // within a factor 2 of the formula's limit 10000^-1
           ? std::string("PE pairs a sin and a cos per frequency, from 1 down to 1/10000 radian "
                         "per position.")
           : fmt::format("PE pairs a sin and a cos per frequency, from 1 down to {:.2g} radian per "
                         "position ({} pairs; 1/10000 as d_model grows).",
                         omega(pairs - 1), pairs),
       "Moving by k is one fixed rotation R(k), built from PE(k): exact up to rounding.",
       "PE(pos) . PE(pos + k) = sum_i cos(omega_i k): similarity depends on the offset only.",
       recipe_drifts
           ? "The float32 recipe loses digits at large positions; compute angles in double."
           : "The float32 recipe loses digits at large positions once omega_i is rounded (wider "
             "tables); compute angles in double."},
      {{"--max-offset 4096", "far offsets: similarity sinks to ~0"},
       {"--d-model 8", "4 pairs: k = 63 nearly repeats k = 0"},
       {"--d-model 512 --positions 512", "the paper's width"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("07_positional_encoding", "Positional encoding", 2026);
  ch.cites("notes 002, 003 and 004");
  Knobs knob;
  ch.option("--d-model", knob.d_model,
            "features per position; even, since columns come in (sin, cos) pairs")
      .range(2, 512);
  ch.option("--positions", knob.positions, "positions in the table and its heat map").range(1, 512);
  ch.option("--max-offset", knob.max_offset,
            "largest offset k for the rotation check and the dot-product curve")
      .range(1, 4096);
  ch.require_knobs([&] {
    return knob.d_model % 2 == 0
               ? ""
               : "--d-model: d_model must be even: R(k) rotates (sin, cos) column pairs (the "
                 "library's table alone would end an odd width with a lone sin column)";
  });
  return ch.run(argc, argv, [&] { lesson(ch, knob); });
}
