// Exercises 08.1 to 08.3: are your LayerNorm, position-wise feed-forward network and residual
// sub-layer right? The tasks are in chapters/08_transformer_block/exercise/ (README.md there lists
// them). Check them all with
//
//   cmake --build build/release --target exercise_08
//   ctest --test-dir build/release -R Exercise08 --output-on-failure
//
// or one at a time with -R Exercise08LayerNorm, -R Exercise08FeedForward or -R Exercise08Sublayer.
//
// Where the expected values come from: small cases worked out by hand (the arithmetic is written
// out above each test), and the library's own functions, which its suites check independently of
// this file: attn::layer_norm_forward (tests/attn/layers/test_layer_norm.cpp: by hand and against
// torch.nn.LayerNorm), attn::ffn_forward (tests/attn/layers/test_feed_forward.cpp: by hand), and
// attn::encoder_layer_forward (tests/attn/layers/test_transformer.cpp: against PyTorch's
// nn.TransformerEncoderLayer with norm_first false and true). Every comparison is in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_08_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "ffn_sublayer.hpp"
#include "layer_norm_rows.hpp"
#include "position_wise_ffn.hpp"

#include "attn/core/random.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/transformer.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

namespace exercise_08 {

using attn::Index;
using attn::MatrixD;
using attn::NormPlacement;
using attn::RowVectorD;

/// How close counts as the same. Everything here is double, on numbers of size 1 to 10: a right
/// answer that sums or multiplies in another order than the library (or is compiled with fused
/// multiply-adds) differs by a few ulps, 9e-16 at most on these cases (measured). The nearest
/// wrong answers these tests name are LayerNorm's eps left out and eps outside the root at
/// PyTorch's eps = 1e-5, off by 5e-6 and 9e-6 (measured); every other one is off by 0.1 or more.
/// 1e-12 is far from both sides.
constexpr double kTolerance = 1e-12;

MatrixD normal(attn::Rng& rng, Index rows, Index cols, double mean, double stddev) {
  MatrixD m(rows, cols);  // [rows x cols]
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < cols; ++c) m(r, c) = rng.normal(mean, stddev);
  }
  return m;
}

RowVectorD normal_row(attn::Rng& rng, Index d, double mean, double stddev) {
  return normal(rng, 1, d, mean, stddev);  // [1 x d]
}

bool close(const MatrixD& a, const MatrixD& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         ((a - b).array().abs() <= kTolerance).all();
}

/// A usual wrong answer: what it gives on this case, and what to say when yours equals it.
struct WrongAnswer {
  MatrixD value;
  std::string says;
};

/// "" when yours equals expected to kTolerance everywhere. Otherwise: a wrong shape first, then
/// the entry that is furthest off and, when yours is one of the wrong answers (tried in order),
/// what that one is.
std::string verdict(const std::string& what, const MatrixD& yours, const MatrixD& expected,
                    const std::vector<WrongAnswer>& wrong, const std::string& which) {
  if (yours.rows() != expected.rows() || yours.cols() != expected.cols()) {
    return fmt::format(
        "Your {} has shape [{} x {}]; it must be [{} x {}], one row per token ({}). Fix the "
        "shape first: the values are compared after it.",
        what, yours.rows(), yours.cols(), expected.rows(), expected.cols(), which);
  }
  if (close(yours, expected)) return "";
  Index worst_r = 0, worst_c = 0;
  double worst = -1.0;
  for (Index r = 0; r < yours.rows(); ++r) {
    for (Index c = 0; c < yours.cols(); ++c) {
      // A NaN counts as the worst of all, and the first one found is the one named.
      const double off = std::isnan(yours(r, c)) ? std::numeric_limits<double>::infinity()
                                                 : std::abs(yours(r, c) - expected(r, c));
      if (off > worst) {
        worst = off;
        worst_r = r;
        worst_c = c;
      }
    }
  }
  std::string message =
      fmt::format("Your {} is off at row {}, column {}: yours {:.9g}, expected {:.9g} ({}).", what,
                  worst_r, worst_c, yours(worst_r, worst_c), expected(worst_r, worst_c), which);
  for (const WrongAnswer& w : wrong) {
    if (close(yours, w.value)) return message + "\n" + w.says;
  }
  if (yours.array().isNaN().any()) message += "\nYours holds NaN.";
  return message;
}

// ---- When an answer stops the program -------------------------------------------------------
//
// These tests are built with Eigen's checks on: a product whose sizes do not fit, or an index
// past the end of a matrix, stops the program inside your function with Eigen's assertion.
// Before it goes, it prints what that most likely means for the exercise it was in.

const char* abort_hint = "";
std::size_t abort_hint_size = 0;

extern "C" void explain_abort(int) {
  const ssize_t written = write(2, abort_hint, abort_hint_size);
  static_cast<void>(written);  // nothing to do if stderr is gone
}

/// call(), with `hint` printed if it aborts.
template <typename Call>
MatrixD guarded(std::string_view hint, Call call) {
  abort_hint = hint.data();
  abort_hint_size = hint.size();
  const auto previous = std::signal(SIGABRT, explain_abort);
  MatrixD result = call();
  std::signal(SIGABRT, previous);
  return result;
}

// ---- Exercise 08.1: LayerNorm over each row -------------------------------------------------

constexpr std::string_view kLayerNormAbort =
    "\n*** The program stopped inside exercise_layer_norm_rows, most likely on an index out of "
    "range: gamma and beta have d entries, one per column (feature) c, not one per row; x has "
    "n rows and d columns.\n";

MatrixD your_layer_norm(const MatrixD& x, const RowVectorD& gamma, const RowVectorD& beta,
                        double eps) {
  return guarded(kLayerNormAbort, [&] { return exercise_layer_norm_rows(x, gamma, beta, eps); });
}

const std::string kLayerNormStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_layer_norm_rows in "
    "chapters/08_transformer_block/exercise/layer_norm_rows.cpp.";

/// How a wrong LayerNorm divides the centred row.
enum class Divide {
  right,        ///< sqrt(var + eps), var over d
  unbiased,     ///< sqrt(var + eps), var over d - 1
  eps_outside,  ///< sqrt(var) + eps
  no_sqrt,      ///< var + eps
};

/// Each row of x centred on its own mean and divided as `how` says: [n x d], before gamma and
/// beta.
MatrixD standardised_rows(const MatrixD& x, double eps, Divide how) {
  const double d = static_cast<double>(x.cols());
  MatrixD z(x.rows(), x.cols());  // [n x d]
  for (Index r = 0; r < x.rows(); ++r) {
    const Eigen::ArrayXXd centred = x.row(r).array() - x.row(r).mean();  // [1 x d]
    const double sum_sq = centred.square().sum();
    const double var = sum_sq / (how == Divide::unbiased ? d - 1.0 : d);
    const double by = how == Divide::eps_outside ? std::sqrt(var) + eps
                      : how == Divide::no_sqrt   ? var + eps
                                                 : std::sqrt(var + eps);
    z.row(r) = (centred / by).matrix();
  }
  return z;
}

/// z * gamma + beta, feature by feature: [n x d].
MatrixD scaled(const MatrixD& z, const RowVectorD& gamma, const RowVectorD& beta) {
  return ((z.array().rowwise() * gamma.array()).rowwise() + beta.array()).matrix();
}

/// The usual wrong LayerNorms of x, in the order they are tried.
std::vector<WrongAnswer> layer_norm_slips(const MatrixD& x, const RowVectorD& gamma,
                                          const RowVectorD& beta, double eps) {
  const MatrixD z = standardised_rows(x, eps, Divide::right);  // [n x d]
  const double all_mean = x.mean();
  const double all_var = (x.array() - all_mean).square().mean();
  const MatrixD whole = ((x.array() - all_mean) / std::sqrt(all_var + eps)).matrix();  // [n x d]
  const MatrixD columns = standardised_rows(x.transpose(), eps, Divide::right).transpose();
  return {
      {MatrixD::Zero(x.rows(), x.cols()), kLayerNormStub},
      {scaled(standardised_rows(x, eps, Divide::unbiased), gamma, beta),
       "Yours uses the unbiased variance, the sum of squares over d - 1. LayerNorm (PyTorch's "
       "too) divides by d: var = mean of (x - mean)^2 over the row's d features."},
      {scaled(standardised_rows(x, eps, Divide::eps_outside), gamma, beta),
       "Yours divides by sqrt(var) + eps: eps belongs inside the root, sqrt(var + eps)."},
      {scaled(standardised_rows(x, eps, Divide::no_sqrt), gamma, beta),
       "Yours divides by var + eps, without the square root: the row is divided by its "
       "standard deviation, sqrt(var + eps)."},
      {scaled(standardised_rows(x, 0.0, Divide::right), gamma, beta),
       "Yours leaves eps out: sqrt(var), not sqrt(var + eps). However small eps is, it is "
       "needed: a row of equal entries (a padding token's) has var = 0, and only eps keeps "
       "that row from 0 / 0."},
      {scaled(columns, gamma, beta),
       "Yours normalises each column (one feature over the n tokens), not each row. LayerNorm "
       "takes every token alone: its mean and variance over its own d features."},
      {scaled(whole, gamma, beta),
       "Yours uses one mean and one variance for the whole matrix. LayerNorm takes every row "
       "(token) alone: each row has its own mean and variance."},
      {z, "Yours leaves out gamma and beta: after normalising, scale feature c by gamma(c) and "
          "shift it by beta(c)."},
      {scaled(z, beta, gamma),
       "Yours swaps gamma and beta: y = z * gamma + beta, gamma (PyTorch's weight) the scale "
       "and beta (its bias) the shift."},
      {scaled(z, gamma, RowVectorD::Zero(x.cols())),
       "Yours forgets beta: add beta(c) after multiplying by gamma(c)."},
      {(z.array().rowwise() + beta.array()).matrix(),
       "Yours forgets gamma: multiply by gamma(c) before adding beta(c)."},
  };
}

// 1. By hand, d = 4, eps = 4 (large, so that where it goes shows in the first digit):
//   row 0 = (1, 3, 5, 7): mean 4, deviations (-3, -1, 1, 3), var = (9 + 1 + 1 + 9) / 4 = 5,
//     sqrt(5 + 4) = 3, z = (-1, -1/3, 1/3, 1);
//   row 1 = (0, 3, 3, 0): mean 1.5, deviations (-1.5, 1.5, 1.5, -1.5), var = 2.25,
//     sqrt(2.25 + 4) = 2.5, z = (-0.6, 0.6, 0.6, -0.6).
// With gamma = (2, 1, 1, 0.5) and beta = (0, 1, -1, 0.5), y = z * gamma + beta:
//   row 0: (-2, -1/3 + 1, 1/3 - 1, 0.5 + 0.5) = (-2, 2/3, -2/3, 1);
//   row 1: (-1.2, 0.6 + 1, 0.6 - 1, -0.3 + 0.5) = (-1.2, 1.6, -0.4, 0.2).
TEST(Exercise08LayerNorm, TwoRowsByHand) {
  MatrixD x(2, 4);  // [n x d]
  x << 1, 3, 5, 7,  //
      0, 3, 3, 0;
  RowVectorD gamma(4), beta(4);  // [1 x d] each
  gamma << 2, 1, 1, 0.5;
  beta << 0, 1, -1, 0.5;
  const double eps = 4.0;
  MatrixD expected(2, 4);                // [n x d], the arithmetic above
  expected << -2, 2.0 / 3, -2.0 / 3, 1,  //
      -1.2, 1.6, -0.4, 0.2;
  const std::string problem =
      verdict("y", your_layer_norm(x, gamma, beta, eps), expected,
              layer_norm_slips(x, gamma, beta, eps), "d = 4, eps = 4, worked out by hand");
  if (!problem.empty()) FAIL() << problem;
}

// 2. By hand: a row of equal entries, such as a zero padding vector, has var = 0, so
// (x - mean) = 0 and y = 0 * gamma + beta = beta exactly, whatever eps > 0 is. Here eps is
// PyTorch's default, 1e-5, and the third row is row 0 of the first test: its
// z = (-3, -1, 1, 3) / sqrt(5 + 1e-5).
TEST(Exercise08LayerNorm, EqualEntriesComeOutAsBeta) {
  MatrixD x(3, 4);  // [n x d]
  x << 0, 0, 0, 0,  //
      2, 2, 2, 2,   //
      1, 3, 5, 7;
  RowVectorD gamma(4), beta(4);  // [1 x d] each
  gamma << 2, 1, 1, 0.5;
  beta << 0, 1, -1, 0.5;
  const double eps = 1e-5;
  const double s = std::sqrt(5.0 + eps);
  MatrixD expected(3, 4);  // [n x d]
  expected.row(0) = beta;
  expected.row(1) = beta;
  expected.row(2) << -3 / s * 2, -1 / s + 1, 1 / s - 1, 3 / s * 0.5 + 0.5;
  const MatrixD yours = your_layer_norm(x, gamma, beta, eps);
  std::string problem = verdict("y", yours, expected, layer_norm_slips(x, gamma, beta, eps),
                                "rows 0 and 1 have equal entries, eps = 1e-5");
  if (problem.empty()) return;
  if (yours.rows() == 3 && yours.cols() == 4 && yours.topRows(2).array().isNaN().any()) {
    problem += "\nYours is NaN on a row of equal entries: its var is 0, so without eps the "
               "division is 0 / 0. Divide by sqrt(var + eps), with eps inside the root.";
  }
  FAIL() << problem;
}

// 3. Against attn::layer_norm_forward on rows that are not centred (mean 3, standard deviation
// 2), with random gamma and beta, at PyTorch's eps = 1e-5 and at a large eps = 0.5.
TEST(Exercise08LayerNorm, MatchesTheLibrary) {
  attn::Rng rng(808);
  const Index n = 6, d = 8;
  const MatrixD x = normal(rng, n, d, 3.0, 2.0);  // [n x d]
  attn::LayerNormD norm;
  norm.gamma = normal_row(rng, d, 1.0, 0.5);  // [1 x d]
  norm.beta = normal_row(rng, d, 0.0, 0.5);   // [1 x d]
  for (const double eps : {1e-5, 0.5}) {
    norm.eps = eps;
    const MatrixD expected = attn::layer_norm_forward<double>(norm, x);  // [n x d]
    const std::string problem = verdict(
        "y", your_layer_norm(x, norm.gamma, norm.beta, eps), expected,
        layer_norm_slips(x, norm.gamma, norm.beta, eps),
        fmt::format("n = {}, d = {}, eps = {:g}, against attn::layer_norm_forward", n, d, eps));
    if (!problem.empty()) FAIL() << problem;
  }
}

// ---- Exercise 08.2: the position-wise feed-forward network ----------------------------------

constexpr std::string_view kFfnAbort =
    "\n*** The program stopped inside exercise_position_wise_ffn, most likely at a product "
    "whose sizes do not fit: x is [n x d_model] and W1 is stored [d_ff x d_model], one row per "
    "output feature, so the first layer is x * W1.transpose(), [n x d_ff]; the second is "
    "hidden * W2.transpose(). Check also that each bias is added to every row "
    "(.rowwise() + b).\n";

MatrixD your_ffn(const MatrixD& x, const MatrixD& W1, const RowVectorD& b1, const MatrixD& W2,
                 const RowVectorD& b2) {
  return guarded(kFfnAbort, [&] { return exercise_position_wise_ffn(x, W1, b1, W2, b2); });
}

MatrixD relu(const MatrixD& m) { return m.cwiseMax(0.0); }

MatrixD add_to_rows(const MatrixD& m, const RowVectorD& b) { return m.rowwise() + b; }

/// The usual wrong feed-forward networks, in the order they are tried. Those that multiply by
/// W instead of W^T fit only when the weights are square, so only then are they computed.
std::vector<WrongAnswer> ffn_slips(const MatrixD& x, const MatrixD& W1, const RowVectorD& b1,
                                   const MatrixD& W2, const RowVectorD& b2) {
  const MatrixD pre = add_to_rows(x * W1.transpose(), b1);  // [n x d_ff]
  std::vector<WrongAnswer> wrong = {
      {MatrixD::Zero(x.rows(), W2.rows()),
       "Yours is all zeros. Is this still the stub? Write the body of "
       "exercise_position_wise_ffn in chapters/08_transformer_block/exercise/"
       "position_wise_ffn.cpp."},
      {add_to_rows(pre * W2.transpose(), b2),
       "Yours has no ReLU: without it the two layers are one linear map. Apply max(v, 0) to "
       "every entry of x W1^T + b1."},
      {add_to_rows(add_to_rows(relu(x * W1.transpose()), b1) * W2.transpose(), b2),
       "Yours applies the ReLU before adding b1: it is ReLU(x W1^T + b1), the bias inside."},
      {relu(add_to_rows(relu(pre) * W2.transpose(), b2)),
       "Yours applies a ReLU to the output too. There is one ReLU, between the two layers: "
       "FFN(x) may be negative."},
      {relu(x * W1.transpose()) * W2.transpose(),
       "Yours leaves out the biases: add b1 to every row of x W1^T, and b2 to every row of the "
       "output."},
  };
  if (W1.rows() == W1.cols()) {
    wrong.push_back({add_to_rows(relu(add_to_rows(x * W1, b1)) * W2, b2),
                     "Yours multiplies by W1 and W2, not by their transposes. The library stores "
                     "a layer as nn.Linear does, [out x in], one row per output feature, so a "
                     "row vector x goes through it as x W^T. (Here W is square, so x W fits and "
                     "is silently wrong.)"});
    wrong.push_back({add_to_rows(relu(add_to_rows(x * W1, b1)) * W2.transpose(), b2),
                     "Yours multiplies by W1, not W1^T (the second layer is right): W1 is stored "
                     "[d_ff x d_model], one row per output feature, so the first layer is "
                     "x W1^T."});
    wrong.push_back({add_to_rows(relu(pre) * W2, b2),
                     "Yours multiplies by W2, not W2^T (the first layer is right): W2 is stored "
                     "[d_model x d_ff], one row per output feature, so the second layer is "
                     "hidden W2^T."});
  }
  return wrong;
}

// 1. By hand, d_model = d_ff = 2 (square, so that W in place of W^T fits and is caught):
//   W1 = [[1, -1], [2, 1]], b1 = (0.5, -1), W2 = [[1, 2], [-1, 1]], b2 = (0, 1).
//   Row x = (1, 2): x W1^T = (1 - 2, 2 + 2) = (-1, 4); + b1 = (-0.5, 3); ReLU (0, 3);
//     times W2^T: (0 + 3 * 2, 0 + 3 * 1) = (6, 3); + b2 = (6, 4).
//   Row x = (0, -1): x W1^T = (0 + 1, 0 - 1) = (1, -1); + b1 = (1.5, -2); ReLU (1.5, 0);
//     times W2^T: (1.5, -1.5); + b2 = (1.5, -0.5).
TEST(Exercise08FeedForward, TwoTokensByHand) {
  MatrixD x(2, 2);  // [n x d_model]
  x << 1, 2,        //
      0, -1;
  MatrixD W1(2, 2), W2(2, 2);  // [d_ff x d_model], [d_model x d_ff]
  W1 << 1, -1,                 //
      2, 1;
  W2 << 1, 2,  //
      -1, 1;
  RowVectorD b1(2), b2(2);  // [1 x d_ff], [1 x d_model]
  b1 << 0.5, -1;
  b2 << 0, 1;
  MatrixD expected(2, 2);  // [n x d_model], the arithmetic above
  expected << 6, 4,        //
      1.5, -0.5;
  const std::string problem =
      verdict("FFN(x)", your_ffn(x, W1, b1, W2, b2), expected, ffn_slips(x, W1, b1, W2, b2),
              "d_model = d_ff = 2, worked out by hand");
  if (!problem.empty()) FAIL() << problem;
}

// 2. Against attn::ffn_forward, widening d_model = 4 to d_ff = 8 as the chapter widens 32 to
// 64, with random weights and non-zero biases.
TEST(Exercise08FeedForward, WidensAndMatchesTheLibrary) {
  attn::Rng rng(8080);
  const Index n = 5, d_model = 4, d_ff = 8;
  const MatrixD x = normal(rng, n, d_model, 0.0, 1.0);  // [n x d_model]
  attn::FeedForwardD ff;
  ff.linear1.weight = normal(rng, d_ff, d_model, 0.0, 0.5);   // [d_ff x d_model]
  ff.linear1.bias = normal_row(rng, d_ff, 0.0, 0.5);          // [1 x d_ff]
  ff.linear2.weight = normal(rng, d_model, d_ff, 0.0, 0.5);   // [d_model x d_ff]
  ff.linear2.bias = normal_row(rng, d_model, 0.0, 0.5);       // [1 x d_model]
  const MatrixD expected = attn::ffn_forward<double>(ff, x);  // [n x d_model]
  const MatrixD& W1 = ff.linear1.weight;
  const MatrixD& W2 = ff.linear2.weight;
  const RowVectorD& b1 = ff.linear1.bias;
  const RowVectorD& b2 = ff.linear2.bias;
  const std::string problem = verdict(
      "FFN(x)", your_ffn(x, W1, b1, W2, b2), expected, ffn_slips(x, W1, b1, W2, b2),
      fmt::format("n = {}, d_model = {}, d_ff = {}, against attn::ffn_forward", n, d_model, d_ff));
  if (!problem.empty()) FAIL() << problem;
}

// ---- Exercise 08.3: the feed-forward sub-layer, post- or pre-norm ---------------------------

const char* name(NormPlacement p) { return p == NormPlacement::post ? "post-norm" : "pre-norm"; }

MatrixD your_sublayer(const MatrixD& x, const attn::FeedForwardD& ff, const attn::LayerNormD& norm,
                      NormPlacement placement) {
  return exercise_ffn_sublayer(x, ff, norm, placement);
}

/// The usual wrong residual steps for `placement`, from the library's LayerNorm and FFN (each
/// tested on its own, see the top), in the order they are tried.
std::vector<WrongAnswer> sublayer_slips(const MatrixD& x, const attn::FeedForwardD& ff,
                                        const attn::LayerNormD& norm, NormPlacement placement) {
  const auto LN = [&](const MatrixD& v) { return attn::layer_norm_forward<double>(norm, v); };
  const auto F = [&](const MatrixD& v) { return attn::ffn_forward<double>(ff, v); };
  const MatrixD post = LN(x + F(x));  // [n x d_model]
  const MatrixD pre = x + F(LN(x));   // [n x d_model]
  std::vector<WrongAnswer> wrong = {
      {MatrixD::Zero(x.rows(), x.cols()),
       "Yours is all zeros. Is this still the stub? Write the body of exercise_ffn_sublayer in "
       "chapters/08_transformer_block/exercise/ffn_sublayer.cpp."},
  };
  if (placement == NormPlacement::post) {
    wrong.push_back({pre,
                     "Yours is pre-norm's x + FFN(LayerNorm(x)), but placement is post: "
                     "LayerNorm(x + FFN(x)), the norm after the add (check which branch runs)."});
    wrong.push_back({x + LN(F(x)),
                     "Yours normalises FFN(x) alone and then adds x: x + LayerNorm(FFN(x)). "
                     "Post-norm normalises the sum: LayerNorm(x + FFN(x))."});
    wrong.push_back({x + F(x),
                     "Yours leaves out the norm: x + FFN(x). Post-norm normalises that sum: "
                     "LayerNorm(x + FFN(x))."});
    wrong.push_back({LN(F(x)),
                     "Yours leaves out the residual: LayerNorm(FFN(x)). Add x before the norm: "
                     "LayerNorm(x + FFN(x))."});
  } else {
    wrong.push_back({post,
                     "Yours is post-norm's LayerNorm(x + FFN(x)), but placement is pre: "
                     "x + FFN(LayerNorm(x)), the norm on what the FFN reads (check which branch "
                     "runs)."});
    wrong.push_back({LN(x) + F(LN(x)),
                     "Yours adds the normalised copy: LayerNorm(x) + FFN(LayerNorm(x)). The "
                     "residual path carries x itself, untouched: x + FFN(LayerNorm(x))."});
    wrong.push_back({LN(pre),
                     "Yours normalises the sum as well: LayerNorm(x + FFN(LayerNorm(x))). Pre-norm "
                     "adds and stops there; the stream is not normalised (which is why pre-norm "
                     "models add one LayerNorm after the last layer)."});
    wrong.push_back({x + F(x),
                     "Yours leaves out the norm: x + FFN(x). Pre-norm normalises what the FFN "
                     "reads: x + FFN(LayerNorm(x))."});
    wrong.push_back({F(LN(x)), "Yours leaves out the residual: FFN(LayerNorm(x)). Add x: "
                               "x + FFN(LayerNorm(x))."});
  }
  return wrong;
}

/// An FFN d_model = 4 -> d_ff = 3 -> 4 whose second layer is all zeros but for its bias c:
/// FFN(v) = c for every row v, whatever the first layer does.
attn::FeedForwardD constant_ffn(const RowVectorD& c) {
  attn::FeedForwardD ff;
  ff.linear1.weight = MatrixD::Ones(3, 4);  // [d_ff x d_model], never seen in the output
  ff.linear1.bias = RowVectorD::Ones(3);    // [1 x d_ff]
  ff.linear2.weight = MatrixD::Zero(4, 3);  // [d_model x d_ff]
  ff.linear2.bias = c;                      // [1 x d_model]
  return ff;
}

/// gamma = 1, beta = 0, eps = 4: a LayerNorm that only standardises, with an eps that makes the
/// hand arithmetic exact (see the first LayerNorm test).
attn::LayerNormD plain_norm() { return {RowVectorD::Ones(4), RowVectorD::Zero(4), 4.0}; }

// 1. By hand, a silent sub-layer: FFN(v) = 0 for every v (W2 = 0, b2 = 0). Then
//   post-norm: LayerNorm(x + 0) = LayerNorm(x); with gamma = 1, beta = 0, eps = 4 and x's rows
//     (1, 3, 5, 7) and (0, 3, 3, 0), that is (-1, -1/3, 1/3, 1) and (-0.6, 0.6, 0.6, -0.6)
//     (the first LayerNorm test's z);
//   pre-norm: x + FFN(LayerNorm(x)) = x + 0 = x, exactly: the residual path carries x.
// (The library's PreNormLayerWithSilentSublayersIsTheIdentity is this, for a whole layer.)
TEST(Exercise08Sublayer, SilentSublayerByHand) {
  MatrixD x(2, 4);  // [n x d_model]
  x << 1, 3, 5, 7,  //
      0, 3, 3, 0;
  const attn::FeedForwardD ff = constant_ffn(RowVectorD::Zero(4));
  const attn::LayerNormD norm = plain_norm();
  MatrixD normed(2, 4);                // [n x d_model], LayerNorm(x) by hand
  normed << -1, -1.0 / 3, 1.0 / 3, 1,  //
      -0.6, 0.6, 0.6, -0.6;
  for (const NormPlacement placement : {NormPlacement::post, NormPlacement::pre}) {
    const bool post = placement == NormPlacement::post;
    std::vector<WrongAnswer> wrong = {
        post ? WrongAnswer{x,
                           "Yours returns x unchanged. Post-norm normalises the sum even when the "
                           "sub-layer adds nothing: LayerNorm(x + 0) = LayerNorm(x). (x is what "
                           "pre-norm returns here, and what a missing norm returns.)"}
             : WrongAnswer{normed,
                           "Yours returns LayerNorm(x). Pre-norm with a silent sub-layer returns "
                           "x itself, x + FFN(LayerNorm(x)) = x + 0: the residual adds x, not its "
                           "normalised copy, and nothing normalises the sum."}};
    for (WrongAnswer& w : sublayer_slips(x, ff, norm, placement)) wrong.push_back(std::move(w));
    const std::string problem =
        verdict("out", your_sublayer(x, ff, norm, placement), post ? normed : x, wrong,
                fmt::format("{}, FFN(v) = 0, gamma = 1, beta = 0, eps = 4, worked out by hand",
                            name(placement)));
    if (!problem.empty()) FAIL() << problem;
  }
}

// 2. By hand, a constant sub-layer: FFN(v) = c = (6, 2, -2, -6) for every v (W2 = 0, b2 = c).
// x's rows are (1, 3, 5, 7) and (-3, -2, 2, 9), so x + c has rows (7, 5, 3, 1) and (3, 0, 0, 3).
//   pre-norm: x + FFN(LayerNorm(x)) = x + c, exactly;
//   post-norm: LayerNorm(x + c), gamma = 1, beta = 0, eps = 4:
//     (7, 5, 3, 1): mean 4, deviations (3, 1, -1, -3), var 5, sqrt(5 + 4) = 3:
//       (1, 1/3, -1/3, -1);
//     (3, 0, 0, 3): mean 1.5, deviations (1.5, -1.5, -1.5, 1.5), var 2.25, sqrt(6.25) = 2.5:
//       (0.6, -0.6, -0.6, 0.6).
TEST(Exercise08Sublayer, ConstantSublayerByHand) {
  MatrixD x(2, 4);  // [n x d_model]
  x << 1, 3, 5, 7,  //
      -3, -2, 2, 9;
  RowVectorD c(4);  // [1 x d_model]
  c << 6, 2, -2, -6;
  const attn::FeedForwardD ff = constant_ffn(c);
  const attn::LayerNormD norm = plain_norm();
  MatrixD post_expected(2, 4), pre_expected(2, 4);  // [n x d_model] each, the arithmetic above
  post_expected << 1, 1.0 / 3, -1.0 / 3, -1,        //
      0.6, -0.6, -0.6, 0.6;
  pre_expected << 7, 5, 3, 1,  //
      3, 0, 0, 3;
  for (const NormPlacement placement : {NormPlacement::post, NormPlacement::pre}) {
    const bool post = placement == NormPlacement::post;
    const std::string problem = verdict(
        "out", your_sublayer(x, ff, norm, placement), post ? post_expected : pre_expected,
        sublayer_slips(x, ff, norm, placement),
        fmt::format("{}, FFN(v) = (6, 2, -2, -6), gamma = 1, beta = 0, eps = 4, worked out by "
                    "hand",
                    name(placement)));
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. Against the library's encoder layer, which tests/attn/layers/test_transformer.cpp checks
// against PyTorch's nn.TransformerEncoderLayer (norm_first false and true). Its attention's
// output projection is set to zero, so its first sub-layer adds exactly 0: post-norm, it
// returns norm1(x) and the layer is norm2(x1 + FFN(x1)) with x1 = norm1(x); pre-norm, it
// returns x and the layer is x + FFN(norm2(x)). Either way the layer's output is your
// sub-layer's, on the input it hands to the FFN's sub-layer, with norm2. Random weights,
// gamma, beta, and PyTorch's eps = 1e-5.
TEST(Exercise08Sublayer, IsTheEncoderLayersSecondSublayer) {
  attn::Rng rng(8008);
  const Index n = 5, d_model = 8, d_ff = 16, heads = 2;
  const auto linear = [&](Index in, Index out) {
    attn::LinearD l;
    l.weight = normal(rng, out, in, 0.0, 0.4);  // [out x in]
    l.bias = normal_row(rng, out, 0.0, 0.4);    // [1 x out]
    return l;
  };
  const auto layer_norm = [&] {
    return attn::LayerNormD{normal_row(rng, d_model, 1.0, 0.3),  // gamma [1 x d_model]
                            normal_row(rng, d_model, 0.0, 0.3),  // beta [1 x d_model]
                            1e-5};
  };
  attn::EncoderLayerD layer;
  layer.self_attn.heads = heads;
  layer.self_attn.q_proj = linear(d_model, d_model);
  layer.self_attn.k_proj = linear(d_model, d_model);
  layer.self_attn.v_proj = linear(d_model, d_model);
  layer.self_attn.out_proj.weight = MatrixD::Zero(d_model, d_model);  // [d_model x d_model]
  layer.self_attn.out_proj.bias = RowVectorD::Zero(d_model);          // the attention adds 0
  layer.ff.linear1 = linear(d_model, d_ff);                           // [d_ff x d_model]
  layer.ff.linear2 = linear(d_ff, d_model);                           // [d_model x d_ff]
  layer.norm1 = layer_norm();
  layer.norm2 = layer_norm();
  const MatrixD x = normal(rng, n, d_model, 0.5, 1.5);  // [n x d_model]
  for (const NormPlacement placement : {NormPlacement::post, NormPlacement::pre}) {
    layer.norm = placement;
    const MatrixD expected = attn::encoder_layer_forward<double>(layer, x);  // [n x d_model]
    // What the FFN's sub-layer reads: x after the first sub-layer, whose attention adds 0.
    const MatrixD input = placement == NormPlacement::post
                              ? attn::layer_norm_forward<double>(layer.norm1, x)
                              : x;  // [n x d_model]
    const std::string problem =
        verdict("out", your_sublayer(input, layer.ff, layer.norm2, placement), expected,
                sublayer_slips(input, layer.ff, layer.norm2, placement),
                fmt::format("{}, n = {}, d_model = {}, d_ff = {}, against "
                            "attn::encoder_layer_forward",
                            name(placement), n, d_model, d_ff));
    if (!problem.empty()) FAIL() << problem;
  }
}

}  // namespace exercise_08
