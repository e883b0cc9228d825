// Exercises 06.1 to 06.3: are your head split, one head's attention and multi-head output
// right? The tasks are in chapters/06_multi_head/exercise/ (README.md there lists them). Check
// them all with
//
//   cmake --build build/release --target exercise_06
//   ctest --test-dir build/release -R Exercise06 --output-on-failure
//
// or one at a time with -R Exercise06Split, -R Exercise06Head or -R Exercise06Forward.
//
// Where the expected values come from: small cases worked out by hand (written out below), two
// identities (a head's block is the product with that head's own rows of W_Q, as the chapter
// shows; the heads side by side are Q again; values that are all the same come back unchanged,
// whatever the weights), and the library's own functions, which its suites check
// independently of this file: attn::multi_head_forward (tests/attn/layers/test_multi_head.cpp,
// against torch.nn.MultiheadAttention) and attn::attention (tests/attn/ops/test_attention.cpp),
// used here in double. Every comparison is in double.
//
// When yours is wrong, the message says where, and, when yours is one of the usual wrong
// answers, which one: each test computes those wrong answers too and compares yours with them.
//
// The course's own suite builds these same tests twice more: against reference answers
// (tests/chapters/exercise_06_solution.cpp), which must pass them, and against the untouched
// stubs, which must fail them. Your copy carries the label "exercises", which
// `ctest --preset release` leaves out: the stubs fail by design.
#include "head_attention.hpp"
#include "multi_head_out.hpp"
#include "split_head.hpp"

#include "attn/core/random.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/ops/attention.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace exercise_06 {

using attn::Index;
using attn::MatrixD;
using attn::VectorD;

/// How close counts as the same for computed values. Everything is double, on numbers of size
/// about 1, through sums of at most 12 products and one softmax: a right answer that adds in
/// another order than the library, or divides by sqrt(d_k) where the library multiplies by its
/// inverse, differs by a few ulps, below 1e-14. The wrong answers named here are off by 1e-3 or
/// more (the smallest: sqrt(d_model) for sqrt(d_k) on weak scores). 1e-12 is far from both.
constexpr double kTolerance = 1e-12;

/// How close counts as the same for a copy: splitting and putting back move numbers without
/// arithmetic, so they come back bit for bit.
constexpr double kCopyTolerance = 0.0;

/// [rows x cols] of N(0, stddev^2) samples, drawn in float by the library and held in double.
MatrixD normal(attn::Rng& rng, Index rows, Index cols, double stddev = 1.0) {
  return attn::random_normal(rng, rows, cols, 0.0, stddev).cast<double>();
}

MatrixD rows_of(std::initializer_list<std::initializer_list<double>> rows) {
  MatrixD m(static_cast<Index>(rows.size()), static_cast<Index>(rows.begin()->size()));
  Index r = 0;
  for (const auto& row : rows) {
    Index c = 0;
    for (double x : row) m(r, c++) = x;
    ++r;
  }
  return m;
}

/// A usual wrong answer: what it gives on this case, and what to say when yours equals it.
/// shape_only: it is named whenever yours has its shape (a wrong shape says enough).
struct Mistake {
  MatrixD value;
  std::string says;
  bool shape_only = false;
};

bool same_shape(const MatrixD& a, const MatrixD& b) {
  return a.rows() == b.rows() && a.cols() == b.cols();
}

bool near(const MatrixD& a, const MatrixD& b, double tolerance) {
  return same_shape(a, b) && ((a - b).array().abs() <= tolerance).all();
}

/// "" when yours equals expected to `tolerance` everywhere. Otherwise the shape, or the worst
/// entry, and which usual wrong answer yours is, when it is one (checked in order).
std::string judge(const std::string& what, const MatrixD& yours, const MatrixD& expected,
                  const std::vector<Mistake>& mistakes, const std::string& context,
                  double tolerance = kTolerance) {
  if (!same_shape(yours, expected)) {
    std::string message =
        fmt::format("Your {} is [{} x {}], but it must be [{} x {}] ({}).", what, yours.rows(),
                    yours.cols(), expected.rows(), expected.cols(), context);
    for (const Mistake& m : mistakes) {
      if (m.shape_only && same_shape(yours, m.value)) return message + "\n" + m.says;
    }
    return message;
  }
  if (near(yours, expected, tolerance)) return "";
  Index worst_r = 0, worst_c = 0;
  double worst = -1;
  for (Index r = 0; r < yours.rows(); ++r) {
    for (Index c = 0; c < yours.cols(); ++c) {
      double error = std::abs(yours(r, c) - expected(r, c));
      if (std::isnan(error)) error = std::numeric_limits<double>::infinity();  // NaN ranks first
      if (error > worst) {
        worst = error;
        worst_r = r;
        worst_c = c;
      }
    }
  }
  std::string message =
      fmt::format("Your {} differs at ({}, {}): yours {:.6g}, expected {:.6g} ({}).", what, worst_r,
                  worst_c, yours(worst_r, worst_c), expected(worst_r, worst_c), context);
  for (const Mistake& m : mistakes) {
    if (!m.shape_only && near(yours, m.value, kTolerance)) return message + "\n" + m.says;
  }
  if (yours.array().isNaN().any()) message += "\nYours holds NaN.";
  return message;
}

// ---- The two ways to cut d_model columns into heads, and the usual wrong answers -------------

/// blocks: head h owns columns h d_k .. (h + 1) d_k - 1 (the right one). interleaved: head h
/// owns columns h, h + heads, h + 2 heads, ... (a reshape to [n, d_k, heads]).
enum class Layout { blocks, interleaved };

Index column_of(Layout layout, Index heads, Index d_k, Index h, Index c) {
  return layout == Layout::blocks ? h * d_k + c : c * heads + h;
}

/// Head h's columns of M [n x d_model] in `layout`: [n x d_k].
MatrixD gather(const MatrixD& M, Index heads, Index h, Layout layout) {
  const Index d_k = M.cols() / heads;
  MatrixD head(M.rows(), d_k);  // [n x d_k]
  for (Index c = 0; c < d_k; ++c) head.col(c) = M.col(column_of(layout, heads, d_k, h, c));
  return head;
}

/// Head h by the library's attention() on its columns in `layout`, the scores divided by
/// sqrt(divisor) (0: by sqrt(d_k), the library's default scale): [n_q x d_k].
MatrixD library_head(const MatrixD& Q, const MatrixD& K, const MatrixD& V, Index heads, Index h,
                     Layout layout = Layout::blocks, double divisor = 0) {
  const MatrixD Q_h = gather(Q, heads, h, layout);  // [n_q x d_k]
  const MatrixD K_h = gather(K, heads, h, layout);  // [n_k x d_k]
  const MatrixD V_h = gather(V, heads, h, layout);  // [n_k x d_k]
  if (divisor == 0) return attn::attention(Q_h, K_h, V_h).out;
  // The scale option is a float; dividing Q_h in double keeps the wrong answer exact.
  const MatrixD Q_scaled = Q_h / std::sqrt(divisor);  // [n_q x d_k]
  return attn::attention(Q_scaled, K_h, V_h, {.scale = 1.0f}).out;
}

/// Head h with the softmax down each column of scores (over the queries), not along each row.
MatrixD softmax_over_queries(const MatrixD& Q, const MatrixD& K, const MatrixD& V, Index heads,
                             Index h) {
  const Index d_k = Q.cols() / heads;
  const MatrixD Q_h = Q.middleCols(h * d_k, d_k), K_h = K.middleCols(h * d_k, d_k);
  MatrixD P = Q_h * K_h.transpose() / std::sqrt(static_cast<double>(d_k));  // [n_q x n_k]
  for (Index j = 0; j < P.cols(); ++j) {
    P.col(j) = (P.col(j).array() - P.col(j).maxCoeff()).exp().matrix();
    P.col(j) /= P.col(j).sum();
  }
  return P * V.middleCols(h * d_k, d_k);  // [n_q x d_k]
}

/// Every head by library_head, head h split in `split` and written back in `put`:
/// [n_q x d_model].
MatrixD concat_of(const MatrixD& Q, const MatrixD& K, const MatrixD& V, Index heads,
                  Layout split = Layout::blocks, Layout put = Layout::blocks, double divisor = 0) {
  const Index d_k = Q.cols() / heads;
  MatrixD concat(Q.rows(), Q.cols());  // [n_q x d_model]
  for (Index h = 0; h < heads; ++h) {
    const MatrixD head = library_head(Q, K, V, heads, h, split, divisor);  // [n_q x d_k]
    for (Index c = 0; c < d_k; ++c) concat.col(column_of(put, heads, d_k, h, c)) = head.col(c);
  }
  return concat;
}

/// concat W^T + b on every row: [n_q x d_model].
MatrixD project(const MatrixD& concat, const MatrixD& W, const VectorD& b) {
  MatrixD out = concat * W.transpose();  // [n_q x d_model]
  out.rowwise() += b.transpose();
  return out;
}

/// A layer in double with random weights and non-zero biases, so that every part shows.
attn::MultiHeadAttentionD random_layer(attn::Rng& rng, Index d_model, Index heads) {
  attn::MultiHeadAttentionD mha;
  mha.heads = heads;
  // Weights of spread 1/sqrt(d_model) keep projections of unit-size inputs near unit size.
  const double spread = 1.0 / std::sqrt(static_cast<double>(d_model));
  for (attn::LinearD* layer : {&mha.q_proj, &mha.k_proj, &mha.v_proj, &mha.out_proj}) {
    layer->weight = normal(rng, d_model, d_model, spread);  // [d_model x d_model], [out x in]
    layer->bias = normal(rng, 1, d_model, 0.5).row(0);      // [1 x d_model]
  }
  return mha;
}

// ---- Exercise 06.1: one head's columns -------------------------------------------------------

const std::string kSplitStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_split_head in "
    "chapters/06_multi_head/exercise/split_head.cpp.";

std::vector<Mistake> split_mistakes(const MatrixD& Q, Index heads, Index h) {
  const Index n = Q.rows(), d_model = Q.cols(), d_k = d_model / heads;
  std::vector<Mistake> mistakes = {
      {MatrixD::Zero(n, d_k), kSplitStub},
      {gather(Q, heads, h, Layout::interleaved),
       "Yours takes every heads-th column (h, h + heads, h + 2 heads, ...): the interleaved "
       "split, what a reshape to [n, d_k, heads] gives. Head h owns one contiguous block, "
       "columns h d_k .. (h + 1) d_k - 1, as Q.middleCols(h * d_k, d_k) views it."},
  };
  if (h >= 1) {
    mistakes.push_back({Q.middleCols((h - 1) * d_k, d_k),
                        "Yours is the block of head h - 1. h counts from 0 here, as column "
                        "offsets do (the page's head 1 is h = 0): head h starts at column h d_k."});
  }
  if (h + 1 < heads) {
    mistakes.push_back({Q.middleCols((h + 1) * d_k, d_k),
                        "Yours is the block of head h + 1: head h starts at column h d_k, so "
                        "head 0 starts at column 0."});
  }
  mistakes.push_back({MatrixD(d_k, d_model),
                      "Yours is [d_k x d_model]: rows of Q, not columns. Row t of Q is token t, "
                      "and every head keeps every token; a head owns d_k of the columns.",
                      true});
  if (heads != d_k) {
    mistakes.push_back({MatrixD(n, heads),
                        "Yours is `heads` columns wide: d_k and heads swapped? Each head is "
                        "d_k = d_model / heads columns wide.",
                        true});
  }
  mistakes.push_back({MatrixD(n, d_model),
                      "Yours is as wide as Q: all of it, not head h's d_k = d_model / heads "
                      "columns.",
                      true});
  return mistakes;
}

// 1. By hand: Q [4 x 6] with Q(t, c) = 10 t + c, so every entry says where it came from.
// heads = 3, so d_k = 6 / 3 = 2, and head h = 1 (the second) owns columns 1 * 2 = 2 and 3:
// rows (2, 3), (12, 13), (22, 23), (32, 33). The interleaved split would take columns 1 and 4,
// (1, 4), (11, 14), ...; head 0 columns 0 and 1; head 2 columns 4 and 5.
TEST(Exercise06Split, SecondOfThreeHeadsByHand) {
  MatrixD Q(4, 6);  // [n x d_model]
  for (Index t = 0; t < 4; ++t) {
    for (Index c = 0; c < 6; ++c) Q(t, c) = static_cast<double>(10 * t + c);
  }
  const MatrixD expected = rows_of({{2, 3}, {12, 13}, {22, 23}, {32, 33}});  // [n x d_k]
  const std::string problem = judge(
      "head", exercise_split_head(Q, 3, 1), expected, split_mistakes(Q, 3, 1),
      "Q(t, c) = 10 t + c [4 x 6], heads = 3, h = 1: expected columns 2 and 3", kCopyTolerance);
  if (!problem.empty()) FAIL() << problem;
}

// 2. The chapter's equivalence: Q = X W_Q^T + b_Q with W_Q [d_model x d_in] stored [out x in],
// and head h's block of Q is X times head h's own rows of W_Q (its [d_k x d_in] projection
// W_Q^h, the notes' W_i^Q transposed), plus its part of the bias. Computed apart, by two
// products: they add the same 8 terms per entry, so they agree to rounding (kTolerance). Heads
// 1 to 3 first, then head 0, so that an off-by-one fails before it can reach column -d_k;
// n = 12 tokens, so that taking rows instead of columns stays inside Q too.
TEST(Exercise06Split, EachHeadIsItsOwnSmallProjection) {
  const Index n = 12, d_in = 8, d_model = 12, heads = 4, d_k = d_model / heads;
  attn::Rng rng(6);
  const MatrixD X = normal(rng, n, d_in);              // [n x d_in]
  const MatrixD W_Q = normal(rng, d_model, d_in);      // [d_model x d_in]
  const VectorD b_Q = normal(rng, d_model, 1).col(0);  // [d_model]
  const MatrixD Q = project(X, W_Q, b_Q);              // [n x d_model], all heads at once
  for (Index h : {1, 2, 3, 0}) {
    const MatrixD W_h = W_Q.middleRows(h * d_k, d_k);  // [d_k x d_in], head h's own
    const MatrixD expected = project(X, W_h, b_Q.segment(h * d_k, d_k));  // [n x d_k]
    const std::string problem =
        judge("head", exercise_split_head(Q, heads, h), expected, split_mistakes(Q, heads, h),
              fmt::format("Q [{} x {}], heads = {}, h = {}: expected X (W_Q's rows {} .. {})^T "
                          "+ their biases",
                          n, d_model, heads, h, h * d_k, (h + 1) * d_k - 1));
    if (!problem.empty()) FAIL() << problem;
  }
}

// 3. The heads side by side are Q again, for 4 heads of 3 columns, 3 of 4, one head of all 12
// (d_k = d_model) and 12 heads of one column each. A copy, so exactly (kCopyTolerance). 4 heads
// first: there the interleaved split differs from the blocks (with 1 or 12 heads it does not).
// Each head is checked as it comes, heads 1 and up first, then head 0, so that an off-by-one
// fails before it can reach column -d_k or d_model; n = 12 tokens, so that taking rows instead
// of columns stays inside Q too.
TEST(Exercise06Split, HeadsSideBySideAreQAgain) {
  const Index n = 12, d_model = 12;
  attn::Rng rng(60);
  const MatrixD Q = normal(rng, n, d_model);  // [n x d_model]
  for (Index heads : {4, 3, 1, 12}) {
    const Index d_k = d_model / heads;
    MatrixD side_by_side(n, d_model);  // [n x d_model], head h in columns h d_k ..
    std::vector<Index> order;          // 1 .. heads - 1, then 0
    for (Index h = 1; h < heads; ++h) order.push_back(h);
    order.push_back(0);
    for (Index h : order) {
      const MatrixD head = exercise_split_head(Q, heads, h);
      const std::string problem =
          judge("head", head, Q.middleCols(h * d_k, d_k), split_mistakes(Q, heads, h),
                fmt::format("Q [{} x {}], heads = {}, h = {}: expected columns {} .. {}", n,
                            d_model, heads, h, h * d_k, (h + 1) * d_k - 1),
                kCopyTolerance);
      if (!problem.empty()) FAIL() << problem;
      side_by_side.middleCols(h * d_k, d_k) = head;
    }
    // Each head was right, so this holds; it is the chapter's claim, stated once more.
    if (!near(side_by_side, Q, kCopyTolerance)) {
      FAIL() << fmt::format("With heads = {}, your heads side by side are not Q again.", heads);
    }
  }
}

// ---- Exercise 06.2: one head's attention -----------------------------------------------------

const std::string kHeadStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_head_attention in "
    "chapters/06_multi_head/exercise/head_attention.cpp.";

std::vector<Mistake> head_mistakes(const MatrixD& Q, const MatrixD& K, const MatrixD& V,
                                   Index heads, Index h) {
  const Index n_q = Q.rows(), n_k = K.rows(), d_model = Q.cols(), d_k = d_model / heads;
  std::vector<Mistake> mistakes = {
      {MatrixD::Zero(n_q, d_k), kHeadStub},
      {library_head(Q, K, V, heads, h, Layout::blocks, static_cast<double>(d_model)),
       fmt::format("Yours divides the scores by sqrt(d_model) = sqrt({}), not by sqrt(d_k) = "
                   "sqrt({}). Each head's score is a sum of d_k products, so d_k sets its spread "
                   "(the page's exercise on where 1/sqrt(d_k) comes from).",
                   d_model, d_k)},
      {library_head(Q, K, V, heads, h, Layout::blocks, 1.0),
       "Yours does not scale the scores: divide Q_h K_h^T by sqrt(d_k) before the softmax."},
      {library_head(Q, K, V, heads, h, Layout::interleaved),
       "Yours takes head h's columns interleaved (h, h + heads, ...). Head h owns one contiguous "
       "block of Q, K and V: columns h d_k .. (h + 1) d_k - 1 (exercise 06.1)."},
      {softmax_over_queries(Q, K, V, heads, h),
       "Yours normalises each column of scores (over the queries). The softmax runs along each "
       "row: query i's weights over the keys sum to 1."},
  };
  if (h >= 1) {
    mistakes.push_back({library_head(Q, K, V, heads, h - 1),
                        "Yours is the output of head h - 1: h counts from 0, head h owns columns "
                        "h d_k .. (h + 1) d_k - 1."});
  }
  if (h + 1 < heads) {
    mistakes.push_back({library_head(Q, K, V, heads, h + 1),
                        "Yours is the output of head h + 1: head h owns columns "
                        "h d_k .. (h + 1) d_k - 1."});
  }
  mistakes.push_back({MatrixD(n_q, d_model),
                      "Yours is as wide as V: did you multiply the weights by all of V? The head "
                      "reads its own d_k columns V_h only.",
                      true});
  mistakes.push_back({MatrixD(n_q, n_k),
                      "Yours is [n_q x n_k], the shape of the weights: multiply them by V_h.",
                      true});
  return mistakes;
}

// 1. By hand: d_model = 6, heads = 3, d_k = 2, head h = 1 owns columns 2 and 3 (marked | |).
// Its queries are (1, 1) and (0, 0), its keys (1, 1) and (0, 0), its values (1, 0) and (0, 1).
// Query 0: scores (1 + 1) / sqrt(2) = sqrt(2) and 0, weights a = e^sqrt2 / (e^sqrt2 + 1) =
// 1 / (1 + e^-sqrt2) = 0.80443 and 1 - a, output a (1, 0) + (1 - a) (0, 1) = (a, 1 - a).
// Query 1: scores 0 and 0, weights 1/2 each, output (0.5, 0.5). The other columns hold other
// numbers, so that reading them shows: dividing by sqrt(6) would give weight
// 1 / (1 + e^-0.8165) = 0.6935, no scale 1 / (1 + e^-2) = 0.8808.
TEST(Exercise06Head, SecondOfThreeHeadsByHand) {
  const MatrixD Q = rows_of({{3, -1, 1, 1, 2, 5},  // [n_q x d_model]
                             {1, 4, 0, 0, -2, 0}});
  const MatrixD K = rows_of({{0, 2, 1, 1, -3, 1},  // [n_k x d_model]
                             {5, 1, 0, 0, 2, 2}});
  const MatrixD V = rows_of({{7, 7, 1, 0, 7, 7},  // [n_k x d_model]
                             {-7, 0, 0, 1, 1, 3}});
  const double a = 1.0 / (1.0 + std::exp(-std::sqrt(2.0)));
  const MatrixD expected = rows_of({{a, 1 - a}, {0.5, 0.5}});  // [n_q x d_k]
  const std::string problem = judge(
      "head output", exercise_head_attention(Q, K, V, 3, 1), expected, head_mistakes(Q, K, V, 3, 1),
      fmt::format("d_model = 6, heads = 3, h = 1: expected ({:.6g}, {:.6g}), (0.5, 0.5)", a,
                  1 - a));
  if (!problem.empty()) FAIL() << problem;
}

// 2. Against the library: the columns of head h in multi_head_forward's concatenation, for a
// self-attention layer (5 tokens, d_model = 12, 3 heads of 4) and a cross-attention one
// (3 queries over 6 keys, d_model = 8, 4 heads of 2), every head, with the projections Q, K, V
// the library made. Heads 1 and up first, head 0 last, so that an off-by-one fails first.
TEST(Exercise06Head, MatchesTheLibrarysHeads) {
  struct Case {
    Index n_q, n_k, d_model, heads;
  };
  attn::Rng rng(606);
  for (const Case& c : {Case{5, 5, 12, 3}, Case{3, 6, 8, 4}}) {
    const attn::MultiHeadAttentionD mha = random_layer(rng, c.d_model, c.heads);
    const MatrixD query = normal(rng, c.n_q, c.d_model);                         // [n_q x d_model]
    const MatrixD key = c.n_q == c.n_k ? query : normal(rng, c.n_k, c.d_model);  // [n_k x ..]
    const attn::MultiHeadResultD r = attn::multi_head_forward(mha, query, key, key);
    const Index d_k = c.d_model / c.heads;
    std::vector<Index> order;
    for (Index h = 1; h < c.heads; ++h) order.push_back(h);
    order.push_back(0);
    for (Index h : order) {
      const std::string problem =
          judge("head output", exercise_head_attention(r.Q, r.K, r.V, c.heads, h),
                r.concat.middleCols(h * d_k, d_k), head_mistakes(r.Q, r.K, r.V, c.heads, h),
                fmt::format("n_q = {}, n_k = {}, d_model = {}, heads = {}, h = {}: "
                            "multi_head_forward's concat, columns {} .. {}",
                            c.n_q, c.n_k, c.d_model, c.heads, h, h * d_k, (h + 1) * d_k - 1));
      if (!problem.empty()) FAIL() << problem;
    }
  }
}

// 3. An identity: when every value of the head is the same number, 0.75, the output is 0.75
// everywhere, whatever the queries and keys, because each query's weights sum to 1. The other
// heads' values are random, and the scores large (spread 3), so only a head that reads its own
// columns of V and normalises each row passes. Head 1 of 3, so that heads 0 and 2 exist.
// Necessary only; test 2 decides.
TEST(Exercise06Head, EqualValuesComeBackUnchanged) {
  const Index n_q = 4, n_k = 7, d_model = 6, heads = 3, h = 1, d_k = d_model / heads;
  attn::Rng rng(66);
  const MatrixD Q = normal(rng, n_q, d_model, 3.0);            // [n_q x d_model]
  const MatrixD K = normal(rng, n_k, d_model, 3.0);            // [n_k x d_model]
  MatrixD V = normal(rng, n_k, d_model);                       // [n_k x d_model]
  V.middleCols(h * d_k, d_k).setConstant(0.75);                // head 1's values, all 0.75
  const MatrixD expected = MatrixD::Constant(n_q, d_k, 0.75);  // [n_q x d_k]
  const std::string problem =
      judge("head output", exercise_head_attention(Q, K, V, heads, h), expected,
            head_mistakes(Q, K, V, heads, h),
            "every value of head 1 is 0.75, so each output must be 0.75: a weighted mean of 0.75s");
  if (!problem.empty()) FAIL() << problem;
}

// ---- Exercise 06.3: multi-head attention from the projections --------------------------------

const std::string kForwardStub =
    "Yours is all zeros. Is this still the stub? Write the body of exercise_multi_head_out in "
    "chapters/06_multi_head/exercise/multi_head_out.cpp.";

const std::string kNoProjection =
    "Yours is the concatenation itself: you forgot the output projection. out = concat W_O^T + "
    "b_O; without it, output feature o holds one head's view only.";
const std::string kNoTranspose =
    "Yours is concat W_O + b_O: W_O is stored [out x in], as nn.Linear stores it, so out = "
    "concat W_O^T + b_O, out(t, o) = sum_c concat(t, c) W_O(o, c) + b_O(o).";
const std::string kNoBias =
    "Yours leaves out the bias: out = concat W_O^T + b_O, b_O on every row.";
const std::string kOneWideHead =
    "Yours is one head as wide as d_model: one softmax over all the columns. Each head attends "
    "on its own d_k = d_model / heads columns, with its own softmax, scaled by 1/sqrt(d_k).";
const std::string kNoScale =
    "Your heads do not scale the scores: each divides Q_h K_h^T by sqrt(d_k) before its "
    "softmax (exercise 06.2).";
const std::string kWideScale =
    "Your heads divide the scores by sqrt(d_model), not sqrt(d_k): each head's score is a sum "
    "of d_k products (exercise 06.2).";

std::vector<Mistake> forward_mistakes(const MatrixD& Q, const MatrixD& K, const MatrixD& V,
                                      Index heads, const MatrixD& W_O, const VectorD& b_O) {
  const Index n_q = Q.rows(), d_model = Q.cols(), d_k = d_model / heads;
  const MatrixD concat = concat_of(Q, K, V, heads);  // [n_q x d_model]
  std::vector<Mistake> mistakes = {
      {MatrixD::Zero(n_q, d_model), kForwardStub},
      {concat, kNoProjection},
      {concat * W_O + MatrixD::Ones(n_q, 1) * b_O.transpose(), kNoTranspose},
      {concat * W_O.transpose(), kNoBias},
      {project(concat_of(Q, K, V, heads, Layout::blocks, Layout::blocks, double(d_model)), W_O,
               b_O),
       kWideScale},
      {project(concat_of(Q, K, V, heads, Layout::blocks, Layout::blocks, 1.0), W_O, b_O), kNoScale},
      {project(concat_of(Q, K, V, heads, Layout::interleaved, Layout::blocks), W_O, b_O),
       "Yours takes each head's columns interleaved (h, h + heads, ...). Head h reads the block "
       "h d_k .. (h + 1) d_k - 1 of Q, K and V, and writes the same block of concat."},
      {project(concat_of(Q, K, V, heads, Layout::interleaved, Layout::interleaved), W_O, b_O),
       "Yours splits and concatenates interleaved (head h in columns h, h + heads, ...). Head h "
       "owns the contiguous block h d_k .. (h + 1) d_k - 1, on the way in and on the way out."},
  };
  if (heads > 1) mistakes.push_back({project(concat_of(Q, K, V, 1), W_O, b_O), kOneWideHead});
  mistakes.push_back({MatrixD(n_q, d_k),
                      "Yours is [n_q x d_k], one head's width: the output puts every head side "
                      "by side (d_model columns), then projects.",
                      true});
  return mistakes;
}

// 1. By hand: d_model = 4, heads = 2, d_k = 2, one query over two keys.
//   Q = (0, 0 | 1, 1);  keys (3, -1 | 1, 1) and (-2, 5 | 0, 0);  values (2, 0 | 1, 0), (0, 4 | 0,
//   1).
// Head 0: query (0, 0), scores 0 and 0, weights 1/2 each: (2, 0)/2 + (0, 4)/2 = (1, 2).
// Head 1: query (1, 1), scores 2 / sqrt(2) = sqrt(2) and 0, weights a = 1 / (1 + e^-sqrt2) =
// 0.80443 and 1 - a: output (a, 1 - a). concat = (1, 2, a, 1 - a).
// W_O [4 x 4] ([out x in]) has W_O(o, c) = 1 for c = o + 1 (mod 4), else 0: output feature o reads
// concat feature o + 1, so concat W_O^T = (2, a, 1 - a, 1); with b_O = (0, 0, 0, 10):
//   out = (2, a, 1 - a, 11).
// The usual wrong answers, worked the same way, with s = 1 / (1 + e^-1) = 0.73106:
//   concat itself                 (1, 2, a, 1 - a)
//   concat W_O + b_O              (1 - a, 1, 2, a + 10)   feature o reads feature o - 1
//   no bias                       (2, a, 1 - a, 1)
//   sqrt(d_model) = 2 in heads    (2, s, 1 - s, 11)       head 1's score 2/2 = 1
//   one head over all 4 columns   (4 (1 - s), s, 1 - s, 2 s + 10)   scores (0+0+1+1)/2 = 1 and 0,
//                                                         weights s, 1 - s on the whole values
TEST(Exercise06Forward, TwoHeadsByHand) {
  const MatrixD Q = rows_of({{0, 0, 1, 1}});  // [n_q x d_model]
  const MatrixD K = rows_of({{3, -1, 1, 1},   // [n_k x d_model]
                             {-2, 5, 0, 0}});
  const MatrixD V = rows_of({{2, 0, 1, 0},  // [n_k x d_model]
                             {0, 4, 0, 1}});
  MatrixD W_O = MatrixD::Zero(4, 4);  // [d_model x d_model], [out x in]
  for (Index o = 0; o < 4; ++o) W_O(o, (o + 1) % 4) = 1;
  VectorD b_O(4);  // [d_model]
  b_O << 0, 0, 0, 10;
  const double a = 1.0 / (1.0 + std::exp(-std::sqrt(2.0))), s = 1.0 / (1.0 + std::exp(-1.0));
  const MatrixD expected = rows_of({{2, a, 1 - a, 11}});  // [n_q x d_model]
  std::vector<Mistake> mistakes = {
      {MatrixD::Zero(1, 4), kForwardStub},
      {rows_of({{1, 2, a, 1 - a}}), kNoProjection},
      {rows_of({{1 - a, 1, 2, a + 10}}), kNoTranspose},
      {rows_of({{2, a, 1 - a, 1}}), kNoBias},
      {rows_of({{2, s, 1 - s, 11}}), kWideScale},
      {rows_of({{4 * (1 - s), s, 1 - s, 2 * s + 10}}), kOneWideHead},
  };
  // The interleaved splits and the shape hint, computed as in test 2.
  for (Mistake& m : forward_mistakes(Q, K, V, 2, W_O, b_O)) mistakes.push_back(std::move(m));
  const std::string problem = judge(
      "out", exercise_multi_head_out(Q, K, V, 2, W_O, b_O), expected, mistakes,
      fmt::format("heads = 2, W_O moves feature o + 1 to o, b_O = (0, 0, 0, 10): expected (2, "
                  "{:.6g}, {:.6g}, 11)",
                  a, 1 - a));
  if (!problem.empty()) FAIL() << problem;
}

// 2. Against the library: multi_head_forward's out, from the projections Q, K, V it made, for
// self-attention (5 tokens, d_model = 12, 3 heads), cross-attention (3 queries over 6 keys,
// d_model = 8, 4 heads) and one head (4 tokens, d_model = 6). Random W_O and non-zero b_O.
TEST(Exercise06Forward, MatchesMultiHeadForward) {
  struct Case {
    Index n_q, n_k, d_model, heads;
  };
  attn::Rng rng(6006);
  for (const Case& c : {Case{5, 5, 12, 3}, Case{3, 6, 8, 4}, Case{4, 4, 6, 1}}) {
    const attn::MultiHeadAttentionD mha = random_layer(rng, c.d_model, c.heads);
    const MatrixD query = normal(rng, c.n_q, c.d_model);                         // [n_q x d_model]
    const MatrixD key = c.n_q == c.n_k ? query : normal(rng, c.n_k, c.d_model);  // [n_k x ..]
    const attn::MultiHeadResultD r = attn::multi_head_forward(mha, query, key, key);
    const MatrixD& W_O = mha.out_proj.weight;           // [d_model x d_model], [out x in]
    const VectorD b_O = mha.out_proj.bias.transpose();  // [d_model]
    std::vector<Mistake> mistakes = forward_mistakes(r.Q, r.K, r.V, c.heads, W_O, b_O);
    // The library's own concatenation is the "no projection" answer too (ahead of the rest).
    mistakes.insert(mistakes.begin() + 1, Mistake{r.concat, kNoProjection});
    const std::string problem =
        judge("out", exercise_multi_head_out(r.Q, r.K, r.V, c.heads, W_O, b_O), r.out, mistakes,
              fmt::format("n_q = {}, n_k = {}, d_model = {}, heads = {}: multi_head_forward's out",
                          c.n_q, c.n_k, c.d_model, c.heads));
    if (!problem.empty()) FAIL() << problem;
  }
}

}  // namespace exercise_06
