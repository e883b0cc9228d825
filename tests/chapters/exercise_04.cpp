// Exercises 04.1 to 04.3: are your log-sum-exp, softmax entropy and scaled attention weights
// right? The tasks are in chapters/04_softmax_scaling/exercise/ (README.md there lists them).
// Check them all with
//
//   cmake --build build/release --target exercise_04
//   ctest --test-dir build/release -R Exercise04 --output-on-failure
//
// or one at a time with -R Exercise04LogSumExp, -R Exercise04Entropy or -R Exercise04Weights.
//
// Where the expected values come from: cases worked out by hand (the numbers are written out
// beside each), identities (log-sum-exp moves with a shift of its logits; the two-logit
// entropy has a closed form; the entropy of softmax(s z) is ln n at s = 0 and falls as s
// grows), and the library's own functions, which its suites check independently of this file:
// attn::attention (tests/attn/ops/test_attention.cpp, against PyTorch) and attn::entropy with
// attn::softmax_rows (tests/attn/ops/test_softmax_stats.cpp, tests/attn/ops/test_softmax.cpp).
// Every comparison is in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_04_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "attention_weights.hpp"
#include "log_sum_exp.hpp"
#include "softmax_entropy.hpp"

#include "exercise_checks.hpp"

#include "attn/core/random.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/softmax.hpp"
#include "attn/ops/softmax_stats.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace exercise_04 {

using attn::Index;
using attn::MatrixD;
using attn::VectorD;

/// How close counts as the same, relative to the size of the expected value (and absolute below
/// 1). Everything here is double. A right answer that adds in another order than the expected
/// value's computation differs by a few ulps of the largest term: at most about 1e-15 relative,
/// so 2e-13 at the logits of 1000 used below. The wrong answers these tests name are off by
/// ln 2 = 0.69 of something or more (ln n, a missing max, bits for nats), or are inf or NaN.
/// 1e-12 is far from both.
constexpr double kTolerance = 1e-12;

/// How close an entropy computed from float weights (attn::softmax_rows, attn::entropy) comes to
/// the exact one. Each float weight is rounded by 6e-8 of itself and each logit by 6e-8 of
/// itself (logits up to 2 x 3.5 here), which moves the entropy by at most about
/// 6e-8 x (H + 1) + 6e-8 x 7 < 1e-6; 1e-5 leaves room and is still 1e4 times smaller than
/// the gap between nats and bits at these entropies.
constexpr double kFloatTolerance = 1e-5;

constexpr double kInf = std::numeric_limits<double>::infinity();

/// The same number, for a right answer or one of the usual wrong ones: equal within kTolerance
/// (relative above 1), or the same inf, or both NaN.
bool same(double yours, double expected) {
  if (std::isnan(expected) || std::isnan(yours)) return std::isnan(expected) && std::isnan(yours);
  if (std::isinf(expected) || std::isinf(yours)) return yours == expected;
  return std::abs(yours - expected) <= kTolerance * std::max(1.0, std::abs(expected));
}

bool same(const MatrixD& yours, const MatrixD& expected) {
  if (yours.rows() != expected.rows() || yours.cols() != expected.cols()) return false;
  for (Index r = 0; r < yours.rows(); ++r) {
    for (Index c = 0; c < yours.cols(); ++c) {
      if (!same(yours(r, c), expected(r, c))) return false;
    }
  }
  return true;
}

VectorD vec(std::initializer_list<double> values) {
  VectorD v(static_cast<Index>(values.size()));  // [n]
  Index j = 0;
  for (double x : values) v(j++) = x;
  return v;
}

std::string vec_str(const VectorD& v) {
  std::string s = "(";
  for (Index j = 0; j < v.size(); ++j) s += fmt::format("{}{:.6g}", j ? ", " : "", v(j));
  return s + ")";
}

/// A usual wrong answer: what it gives on this case, and what to say when yours equals it.
template <typename Value>
struct WrongAnswer {
  Value value;
  std::string says;
};

/// What to add when yours is one of the wrong answers (checked in order), skipping any that
/// happen to equal the right answer on this case: "" when it is none of them.
template <typename Value>
std::string which_wrong(const Value& yours, const Value& expected,
                        const std::vector<WrongAnswer<Value>>& wrong) {
  for (const WrongAnswer<Value>& w : wrong) {
    if (!same(w.value, expected) && same(yours, w.value)) return "\n" + w.says;
  }
  return "";
}

// ---- Exercise 04.1: log-sum-exp ---------------------------------------------------------------

/// The formula m + log sum_j exp(z_j - m) with a shift m of the caller's choosing: right in exact
/// arithmetic for any m, right in double only for m = max z. The wrong answers' engine.
double lse_shifted_by(const VectorD& z, double m) {
  return m + std::log((z.array() - m).exp().sum());
}

std::vector<WrongAnswer<double>> wrong_lse(const VectorD& z) {
  const double max = z.maxCoeff(), min = z.minCoeff(), mean = z.mean();
  const double n = static_cast<double>(z.size());
  return {
      {0.0, "Yours is 0: is this still the stub? Write the body of exercise_log_sum_exp in "
            "chapters/04_softmax_scaling/exercise/log_sum_exp.cpp."},
      {std::log(z.array().exp().sum()),
       "Yours is the naive log(sum_j exp(z_j)): exp overflows to inf above 709.78 and underflows "
       "to 0 below -745. Subtract the largest z_j first, and add it back after the log."},
      // The mean first: where both overflow, the min does too, and it fails an earlier case.
      {lse_shifted_by(z, mean),
       "Yours subtracts the mean of z: right on paper, but the exponents z_j - mean reach half "
       "the spread of z or more, and exp(1000) is inf. Subtract the largest."},
      {lse_shifted_by(z, min),
       "Yours subtracts the smallest z_j: right on paper, but the exponents z_j - min reach the "
       "spread of z, and exp(800) is inf. Subtract the largest, so every exponent is <= 0."},
      {lse_shifted_by(z, max) - max,
       "Yours is log sum_j exp(z_j - m): you subtracted m = max z and forgot to add it back. "
       "lse(z) = m + log sum_j exp(z_j - m)."},
      {max, "Yours is max z alone: the log of the sum, log sum_j exp(z_j - m), is missing."},
      {lse_shifted_by(z, max) - std::log(n),
       "Yours is m + log(the mean of exp(z_j - m)): that is lse(z) - ln n. Take the log of the "
       "sum, not of the mean."},
  };
}

/// "" when yours is lse(z); otherwise what is wrong, and which usual mistake it is, if one.
std::string lse_problem(const VectorD& z, double expected, const std::string& why) {
  const double yours = exercise_log_sum_exp(z);
  if (same(yours, expected)) return "";
  return fmt::format("For z = {}, yours is {:.16g}, expected {:.16g} ({}).", vec_str(z), yours,
                     expected, why) +
         which_wrong(yours, expected, wrong_lse(z));
}

// 1. By hand. The order matters: a case fails on the first wrong formula it can tell apart.
//   (1, 2, 3): m = 3, sum = e^-2 + e^-1 + e^0 = 0.1353352832366127 + 0.3678794411714423 + 1
//              = 1.5032147244080551, so 3 + ln 1.5032147244080551 = 3 + 0.4076059644443804.
//   (0, ln 2, ln 3, ln 4): exp gives 1, 2, 3, 4, so ln 10 = 2.302585092994046.
//   (1000, 1000): 1000 + ln 2 = 1000.6931471805599 (naive: log(inf) = inf).
//   (-1000, -1000, -1000): -1000 + ln 3 = -998.9013877113318 (naive: log(0) = -inf).
//   (-800, -790): -790 + ln(1 + e^-10) = -790 + 4.539889e-5 = -789.9999546011007
//              (naive: exp(-800) and exp(-790) are both 0 in double, log(0) = -inf).
//   (-800, 0): 0 + ln(1 + e^-800) = 0 in double (e^-800 = 4e-348 is below its smallest number);
//              subtracting the smallest gives -800 + log(1 + exp(800)) = inf.
//   (-2000, 0): 0 likewise; subtracting the mean gives -1000 + log(exp(-1000) + exp(1000)) = inf
//              (the mean passes (-800, 0): -400 + log(exp(-400) + exp(400)) = 0).
//   (5): one logit, lse = 5.
TEST(Exercise04LogSumExp, HandComputedCases) {
  const double ln2 = std::numbers::ln2;
  struct Case {
    VectorD z;
    double expected;
    std::string why;
  };
  const std::vector<Case> cases = {
      {vec({1, 2, 3}), 3.4076059644443806, "3 + ln(e^-2 + e^-1 + 1)"},
      {vec({0, ln2, std::log(3.0), std::log(4.0)}), 2.302585092994046, "ln(1 + 2 + 3 + 4)"},
      {vec({1000, 1000}), 1000.6931471805599, "1000 + ln 2"},
      {vec({-1000, -1000, -1000}), -998.9013877113318, "-1000 + ln 3"},
      {vec({-800, -790}), -789.9999546011007, "-790 + ln(1 + e^-10)"},
      {vec({-800, 0}), 0.0, "0 + ln(1 + e^-800), and e^-800 is 0 in double"},
      {vec({-2000, 0}), 0.0, "0 + ln(1 + e^-2000)"},
      {vec({5}), 5.0, "one logit: ln e^5"},
  };
  for (const Case& c : cases) {
    const std::string problem = lse_problem(c.z, c.expected, c.why);
    if (!problem.empty()) FAIL() << problem;
  }
}

// 2. Identities on 16 random logits z ~ N(0, 1): lse(z + c) = lse(z) + c for every c (the factor
// e^c comes out of the sum), and max z <= lse(z) <= max z + ln n (the sum of exp(z_j - m) lies
// in [1, n]). lse(z) itself is computed naively here, which is safe because |z_j| < 6. The shifts
// reach where the naive formula overflows (c = 710, 1000, 1e5) and underflows (c = -750, -1000).
TEST(Exercise04LogSumExp, ShiftingTheLogitsShiftsTheAnswer) {
  attn::Rng rng(404);
  VectorD z(16);  // [n]
  for (Index j = 0; j < z.size(); ++j) z(j) = rng.normal(0.0, 1.0);
  const double lse_z = std::log(z.array().exp().sum());
  for (double c : {0.0, 100.0, -100.0, 700.0, 710.0, -750.0, 1000.0, -1000.0, 1e5}) {
    const VectorD shifted = (z.array() + c).matrix();  // [n]
    const double yours = exercise_log_sum_exp(shifted);
    const double max = shifted.maxCoeff(), ln_n = std::log(16.0);
    if (!(yours >= max - kTolerance * std::abs(max) &&
          yours <= max + ln_n + kTolerance * std::abs(max))) {
      FAIL() << fmt::format("For z + {:g} (16 logits z ~ N(0, 1)), yours is {:.16g}, outside "
                            "[max, max + ln n] = [{:.10g}, {:.10g}], where lse must lie.",
                            c, yours, max, max + ln_n) +
                    which_wrong(yours, lse_z + c, wrong_lse(shifted));
    }
    if (!same(yours, lse_z + c)) {
      FAIL() << fmt::format(
                    "For z + {:g}, yours is {:.16g}, but lse(z + c) = lse(z) + c = {:.16g}.", c,
                    yours, lse_z + c) +
                    which_wrong(yours, lse_z + c, wrong_lse(shifted));
    }
  }
}

// ---- Exercise 04.2: the entropy of softmax(z) -------------------------------------------------

const std::string kEntropyStub =
    "Yours is 0: is this still the stub? Write the body of exercise_softmax_entropy in "
    "chapters/04_softmax_scaling/exercise/softmax_entropy.cpp.";

/// Why an entropy of softmax(z) came out NaN or inf: which of the two traps z sets.
std::string not_finite_because(const VectorD& z) {
  const bool overflows = z.maxCoeff() > 709.78;           // exp(z_j) is inf in double above that
  VectorD p = (z.array() - z.maxCoeff()).exp().matrix();  // [n], the stable weights
  p /= p.sum();
  const bool underflows = (p.array() == 0.0).any();
  std::string message = "\nYours is not finite.";
  if (overflows) {
    message += " Here exp(z_j) is inf for the largest logits: subtract the largest z_j before "
               "exp, or the weights are inf / inf = NaN.";
  }
  if (underflows) {
    message += " Here some weights underflow to exactly 0, and 0 * log(0) = 0 * -inf = NaN. "
               "Use ln p_j = z_j - lse(z), which is finite, or leave out the weights that are 0 "
               "(their share, the limit of p ln p, is 0).";
  }
  return message;
}

/// "" when yours is the entropy `expected` of softmax(z); otherwise what is wrong, and which
/// usual mistake it is, if one.
std::string entropy_problem(const VectorD& z, double expected, const std::string& where) {
  const double yours = exercise_softmax_entropy(z);
  if (same(yours, expected)) return "";
  std::string message =
      fmt::format("For {}, yours is {:.16g}, expected {:.16g}.", where, yours, expected);
  if (yours == 0.0) return message + "\n" + kEntropyStub;
  if (!std::isfinite(yours)) return message + not_finite_because(z);
  return message +
         which_wrong(yours, expected,
                     std::vector<WrongAnswer<double>>{
                         {expected / std::numbers::ln2,
                          "Yours is in bits (log2): the page measures entropy in nats, "
                          "with the natural log. Yours is 1/ln 2 = 1.44 times too large."},
                         {-expected, "Yours has the wrong sign: H = -sum_j p_j ln p_j, and it is "
                                     "never negative since every ln p_j <= 0."},
                     });
}

// 1. By hand:
//   (0, 0, 0, 0): four equal weights 1/4, H = ln 4 = 1.3862943611198906.
//   (0, ln 3): weights 1/4 and 3/4, H = (1/4) ln 4 + (3/4) ln(4/3) = ln 4 - (3/4) ln 3
//              = 1.3862943611198906 - 0.8239592165010823 = 0.5623351446188083.
//   (3, 2, 1, 1) ln 2: exp gives 8, 4, 2, 2, weights 1/2, 1/4, 1/8, 1/8, so
//              H = (1/2) ln 2 + (1/4) 2 ln 2 + (1/4) 3 ln 2 = 1.75 ln 2 = 1.2130075659799042.
//   (1000, 1000, 1000, 1000): ln 4 again; the naive exp(1000) is inf, inf / inf = NaN.
//   (0, -800): weights 1 and e^-800, which is 0 in double: H = 801 e^-800 = 0 in double.
//              No overflow here, but 0 * log(0) = NaN.
//   (1000, 1000, -1000): weights 1/2, 1/2 and 0: H = ln 2 = 0.6931471805599453. Both at once.
TEST(Exercise04Entropy, HandComputedCases) {
  const double ln2 = std::numbers::ln2;
  struct Case {
    VectorD z;
    double expected;
  };
  const std::vector<Case> cases = {
      {vec({0, 0, 0, 0}), 1.3862943611198906},
      {vec({0, std::log(3.0)}), 0.5623351446188083},
      {vec({3 * ln2, 2 * ln2, ln2, ln2}), 1.2130075659799042},
      {vec({1000, 1000, 1000, 1000}), 1.3862943611198906},
      {vec({0, -800}), 0.0},
      {vec({1000, 1000, -1000}), 0.6931471805599453},
  };
  for (const Case& c : cases) {
    const std::string problem = entropy_problem(c.z, c.expected, "z = " + vec_str(c.z));
    if (!problem.empty()) FAIL() << problem;
  }
}

// 2. Two logits z = (0, t) have a closed form. For t >= 0, p = (1, e^t) / (1 + e^t), so
// ln p_2 = -ln(1 + e^-t) and ln p_1 = -t - ln(1 + e^-t), and
//     H = -p_1 ln p_1 - p_2 ln p_2 = ln(1 + e^-t) + t / (1 + e^t)
// (log1p keeps it exact for large t); H(-t) = H(t) by symmetry. At t = 0 it is ln 2; at
// |t| = 800, e^-800 is 0 and e^800 inf in double, so it is 0 there, and finite it must be.
TEST(Exercise04Entropy, TwoLogitsFollowTheBinaryEntropy) {
  for (double t : {0.0, 0.5, -2.0, 10.0, -30.0, 50.0, 800.0, -800.0}) {
    const double a = std::abs(t);
    const double expected = std::log1p(std::exp(-a)) + a / (1.0 + std::exp(a));
    const std::string problem =
        entropy_problem(vec({0, t}), expected, fmt::format("z = (0, {:g})", t));
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. The page's step 6 in one row: 64 logits s z, z ~ N(0, 1), for a growing scale s. At s = 0
// every logit is 0 and H = ln 64 exactly; as s grows the entropy never rises (dH/ds = -s var_p(z),
// the variance of z under the weights p), and at s = 1e5 the two best logits are thousands
// apart and H is 0 to double precision, but finite. At s = 0.5, 1 and 2 yours must also agree
// with the library's attn::entropy of the float weights attn::softmax_rows gives.
TEST(Exercise04Entropy, FallsFromLnNAsTheLogitsSpread) {
  attn::Rng rng(2026);
  const Index n = 64;
  VectorD z(n);  // [n]
  for (Index j = 0; j < n; ++j) z(j) = rng.normal(0.0, 1.0);
  const double ln_n = std::log(static_cast<double>(n));
  double previous = kInf;
  for (double s : {0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 32.0, 1000.0, 1e5}) {
    const VectorD logits = (s * z.array()).matrix();  // [n]
    const std::string where = fmt::format("64 logits s z with s = {:g}", s);
    if (s == 0.0) {
      const std::string problem = entropy_problem(logits, ln_n, where + " (all 0: H = ln 64)");
      if (!problem.empty()) FAIL() << problem;
    }
    const double yours = exercise_softmax_entropy(logits);
    if (s == 1e5) {  // two best logits 1e5 x their gap apart: H = 0 in double
      const std::string problem = entropy_problem(logits, 0.0, where);
      if (!problem.empty()) FAIL() << problem;
    }
    if (!std::isfinite(yours) || yours < -kTolerance || yours > ln_n + kTolerance) {
      FAIL() << fmt::format("For {}, yours is {:.16g}: an entropy lies in [0, ln 64 = {:.6f}].",
                            where, yours, ln_n) +
                    (std::isfinite(yours) ? "" : not_finite_because(logits));
    }
    if (yours > previous + kTolerance) {
      FAIL() << fmt::format(
          "Yours rises from {:.10g} to {:.10g} at s = {:g}: spreading the logits further apart "
          "can only sharpen the weights, so the entropy must not grow.",
          previous, yours, s);
    }
    previous = yours;
    if (s == 0.5 || s == 1.0 || s == 2.0) {
      attn::Matrix row = logits.transpose().cast<float>();  // [1 x n]
      const attn::Matrix p = attn::softmax_rows(row);       // [1 x n], float
      const double library =
          attn::entropy(std::span<const float>(p.data(), static_cast<std::size_t>(p.size())));
      if (std::abs(yours - library) > kFloatTolerance) {
        FAIL() << fmt::format("For {}, yours is {:.10g}, but attn::entropy(softmax) gives {:.10g} "
                              "(within {:g}: it works in float).",
                              where, yours, library, kFloatTolerance) +
                      which_wrong(yours, library,
                                  std::vector<WrongAnswer<double>>{
                                      {library / std::numbers::ln2,
                                       "Yours is in bits (log2), the page's entropy in nats."},
                                      {-library, "Yours has the wrong sign."}});
      }
    }
  }
}

// ---- Exercise 04.3: softmax(Q K^T / sqrt(d_k)) ------------------------------------------------

const std::string kWeightsStub =
    "Yours is all zeros: is this still the stub? Write the body of exercise_attention_weights in "
    "chapters/04_softmax_scaling/exercise/attention_weights.cpp.";

/// The library's weights softmax(Q K^T * scale), rows = queries (attn::attention, in double).
MatrixD library_weights(const MatrixD& Q, const MatrixD& K, float scale) {
  return attn::attention(Q, K, K, {.scale = scale}).weights;  // [n_q x n_k]
}

/// The usual wrong answers on Q, K, whose d_k is a power of 4 so that every scale below is
/// exact in float. `also` comes first: the wrong answers a case can add of its own. Without
/// `scale_mistakes`, only the stub is added to them: on rows whose scores are thousands apart,
/// every wrong scale gives the same one-hot weights, and a name would be a guess.
std::vector<WrongAnswer<MatrixD>> wrong_weights(const MatrixD& Q, const MatrixD& K,
                                                std::vector<WrongAnswer<MatrixD>> also = {},
                                                bool scale_mistakes = true) {
  const float d_k = static_cast<float>(Q.cols()), root = std::sqrt(d_k);
  std::vector<WrongAnswer<MatrixD>> wrong = std::move(also);
  wrong.push_back({MatrixD::Zero(Q.rows(), K.rows()), kWeightsStub});
  if (!scale_mistakes) return wrong;
  wrong.push_back({library_weights(Q, K, 1.0f),
                   "Yours leaves out the scale: these are softmax(Q K^T). Divide the scores by "
                   "sqrt(d_k), d_k being the number of columns of Q."});
  wrong.push_back({library_weights(Q, K, 1.0f / d_k),
                   fmt::format("Yours divides the scores by d_k = {:g}, not by sqrt(d_k) = {:g}. "
                               "var(q . k) = d_k, so the spread to undo is its square root.",
                               d_k, root)});
  wrong.push_back({library_weights(Q, K, root),
                   "Yours multiplies the scores by sqrt(d_k) instead of dividing by it."});
  // softmax down each column: the key's weights over the queries, [n_k x n_q], transposed.
  wrong.push_back({library_weights(K, Q, 1.0f / root).transpose(),
                   "Yours takes the softmax down each column (each key's scores over the "
                   "queries): it is along each row, so that query i's weights sum to 1."});
  return wrong;
}

/// "" when yours equals expected; otherwise the shape, or the worst entry and which usual
/// mistake yours is, if one.
std::string weights_problem(const MatrixD& yours, const MatrixD& expected,
                            const std::vector<WrongAnswer<MatrixD>>& wrong,
                            const std::string& which) {
  if (yours.rows() != expected.rows() || yours.cols() != expected.cols()) {
    std::string message = fmt::format(
        "Your weights are [{} x {}], but they must be [n_q x n_k] = [{} x {}] ({}): one row per "
        "query, one column per key.",
        yours.rows(), yours.cols(), expected.rows(), expected.cols(), which);
    if (yours.rows() == expected.cols() && yours.cols() == expected.rows()) {
      message += " Yours is the transpose: the scores are Q K^T, not K Q^T.";
    }
    return message;
  }
  if (same(yours, expected)) return "";
  const auto [worst_r, worst_c] = attn_test::worst_entry(yours, expected);
  std::string message =
      fmt::format("Your weights differ at ({}, {}): yours {:.6g}, expected {:.6g} ({}).", worst_r,
                  worst_c, yours(worst_r, worst_c), expected(worst_r, worst_c), which);
  const std::string named = which_wrong(yours, expected, wrong);
  if (!named.empty()) return message + named;
  if (!yours.array().isFinite().all()) {
    message += "\nYours holds NaN or inf: exp overflowed. Subtract each row's largest score "
               "before exp.";
  }
  return message;
}

// 1. By hand, d_k = 4 (sqrt(d_k) = 2), two queries and three keys:
//   Q = [1 1 1 1; 1 0 0 0] [2 x 4],  K = [1 1 1 1; 0 0 0 0; -1 -1 -1 -1] [3 x 4].
//   Q K^T = [4 0 -4; 1 0 -1], divided by 2: [2 0 -2; 0.5 0 -0.5].
//   Row 0: e^2 = 7.38905609893065, e^0 = 1, e^-2 = 0.1353352832366127, sum 8.524391382167263:
//          weights 0.8668133321973349, 0.11731042782619837, 0.01587623997646677.
//   Row 1: e^0.5 = 1.6487212707001282, 1, e^-0.5 = 0.6065306597126334, sum 3.2552519304127614:
//          weights 0.5064803910556541, 0.30719588571849843, 0.1863237232258476.
// Unscaled, row 0 would be softmax(4, 0, -4); divided by d_k = 4, softmax(1, 0, -1).
TEST(Exercise04Weights, TwoQueriesByHand) {
  MatrixD Q(2, 4);  // [n_q x d_k]
  Q << 1, 1, 1, 1,  //
      1, 0, 0, 0;
  MatrixD K(3, 4);  // [n_k x d_k]
  K << 1, 1, 1, 1,  //
      0, 0, 0, 0,   //
      -1, -1, -1, -1;
  MatrixD expected(2, 3);  // [n_q x n_k], the weights above
  expected << 0.8668133321973349, 0.11731042782619837, 0.01587623997646677,  //
      0.5064803910556541, 0.30719588571849843, 0.1863237232258476;
  const std::string problem = weights_problem(exercise_attention_weights(Q, K), expected,
                                              wrong_weights(Q, K), "d_k = 4, worked by hand");
  if (!problem.empty()) FAIL() << problem;
}

// 2. Against the library on random rows: Q [5 x 16], K [7 x 16], entries ~ N(0, 1), so the
// scale is 1/4, and the weights are attn::attention's (tests/attn/ops/test_attention.cpp checks
// them against PyTorch). n_q != n_k, so a transposed answer shows in its shape.
TEST(Exercise04Weights, MatchesTheLibraryOnRandomRows) {
  attn::Rng rng(4040);
  MatrixD Q(5, 16), K(7, 16);  // [n_q x d_k], [n_k x d_k]
  for (MatrixD* m : {&Q, &K}) {
    for (Index r = 0; r < m->rows(); ++r) {
      for (Index c = 0; c < m->cols(); ++c) (*m)(r, c) = rng.normal(0.0, 1.0);
    }
  }
  const MatrixD expected = library_weights(Q, K, 0.25f);  // [5 x 7]
  const std::string problem =
      weights_problem(exercise_attention_weights(Q, K), expected, wrong_weights(Q, K),
                      "n_q = 5, n_k = 7, d_k = 16: attn::attention's weights");
  if (!problem.empty()) FAIL() << problem;
}

/// softmax along each row of S, each row shifted by shift(row) before exp: the right answer in
/// exact arithmetic for any shift, and the engine of the overflow test's wrong answers.
template <typename Shift>
MatrixD softmax_rows_shifted(const MatrixD& S, Shift shift) {
  MatrixD W(S.rows(), S.cols());  // [rows x cols]
  for (Index i = 0; i < S.rows(); ++i) {
    const VectorD row = S.row(i).transpose();
    const VectorD e = (row.array() - shift(row)).exp().matrix();
    W.row(i) = (e / e.sum()).transpose();
  }
  return W;
}

// 3. Scores in the thousands, d_k = 64 (sqrt(d_k) = 8). Every row of Q and K is one value
// repeated 64 times, so q . k / 8 = 64 q k / 8 = 8 q k:
//   Q rows 50, 1, 2, -50; K rows 50, 49, -50.
//   Row 0 (q = 50):  20000, 19600, -20000 -> (1 / (1 + e^-400), e^-400 / (1 + e^-400), 0)
//                    = (1, 1.9151695967140057e-174, 0) in double.
//   Row 1 (q = 1):   400, 392, -400 -> e^-8 = 3.3546262790251185e-4, 1 / (1 + e^-8) =
//                    0.9996646498695336, e^-8 / (1 + e^-8) = 3.3535013046647816e-4, and 0.
//   Row 2 (q = 2):   800, 784, -800 -> e^-16 = 1.1253517471925912e-7, 1 / (1 + e^-16) =
//                    0.9999998874648379, e^-16 / (1 + e^-16) = 1.12535162055095e-7, and 0.
//   Row 3 (q = -50): -20000, -19600, 20000 -> (0, 0, 1).
// Each usual mistake leaves its own rows NaN, which is how the test tells them apart:
//   the naive softmax: rows 0, 2 and 3 (exp(20000) and exp(800) are inf; exp(400) is not);
//   each row's minimum subtracted: every row (exponents up to 40000, 800, 1600, 40000);
//   each row's mean subtracted: rows 0 and 3 only (row 2's mean is 261.3: exp(538.7) is finite);
//   the largest score of the whole matrix, 20000, subtracted: rows 1 and 2 (every exp is 0).
TEST(Exercise04Weights, ScoresInTheThousandsGiveNoNaN) {
  MatrixD Q(4, 64), K(3, 64);  // [n_q x d_k], [n_k x d_k]
  const double q_values[] = {50, 1, 2, -50}, k_values[] = {50, 49, -50};
  for (Index r = 0; r < 4; ++r) Q.row(r).setConstant(q_values[r]);
  for (Index r = 0; r < 3; ++r) K.row(r).setConstant(k_values[r]);
  MatrixD expected(4, 3);                              // [n_q x n_k], the weights above
  expected << 1.0, 1.9151695967140057e-174, 0.0,       //
      0.9996646498695336, 3.3535013046647816e-4, 0.0,  //
      0.9999998874648379, 1.12535162055095e-7, 0.0,    //
      0.0, 0.0, 1.0;
  const MatrixD S = Q * K.transpose() / 8.0;  // [4 x 3], the scaled scores above
  const double global_max = S.maxCoeff();
  const std::vector<WrongAnswer<MatrixD>> own = {
      {softmax_rows_shifted(S, [](const VectorD&) { return 0.0; }),
       "Yours is the naive exp(s_ij) / sum_l exp(s_il): exp(20000) is inf, and inf / inf is NaN. "
       "Subtract each row's largest score before exp."},
      {softmax_rows_shifted(S, [](const VectorD& row) { return row.minCoeff(); }),
       "Yours subtracts each row's smallest score: the exponents then reach the row's spread "
       "(40000 here), and exp overflows. Subtract each row's largest."},
      {softmax_rows_shifted(S, [](const VectorD& row) { return row.mean(); }),
       "Yours subtracts each row's mean score: the exponents then reach thousands, and exp "
       "overflows. Subtract each row's largest."},
      {softmax_rows_shifted(S, [&](const VectorD&) { return global_max; }),
       "Yours subtracts one maximum for the whole matrix: rows 1 and 2 (scores 400 and 800 at "
       "most) lie over 19000 below it, every exp underflows to 0, and 0 / 0 is NaN. Subtract "
       "each row's own largest."},
  };
  const std::string problem =
      weights_problem(exercise_attention_weights(Q, K), expected, wrong_weights(Q, K, own, false),
                      "d_k = 64, scores up to 20000, worked by hand");
  if (!problem.empty()) FAIL() << problem;
}

}  // namespace exercise_04
