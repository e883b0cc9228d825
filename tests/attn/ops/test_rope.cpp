// rope.hpp (chapter 11, tied to chapter 07): the table against chapter 07's frequencies and
// position vectors, both layouts against float64 references and Hugging Face's float32 recipe
// (scripts/fixtures/rope.py), the relative-position identity and its exact relation to
// relative_rotation(), lengths, the layout permutation and the mixed-layout bug, the backward
// pass (round trip, adjoint, finite differences), bad input, and several heads side by side.
//
// The rounding bounds every tolerance below is built from. u is the unit roundoff (2^-24 for
// float, 2^-53 for double): one rounding to nearest moves a value by at most u of itself.
//
// One pair (x, y) of length r rotated by the table's (c, s), x' = x c - y s, y' = x s + y c:
//   - the table's own error: float entries are the double ones rounded once, c(1 + d1) and
//     s(1 + d2) with |d| <= u; that moves (x', y') by d1 c (x, y) + d2 s (-y, x), of length
//     <= (|c| + |s|) u r <= sqrt 2 u r;
//   - the two products round by u |x c|, u |y s| (and u |x s|, u |y c| for y'): a vector of
//     length <= (|c| + |s|) u r <= sqrt 2 u r; the sum or difference by u |x'|: u r.
// So the computed pair is within (2 sqrt 2 + 1) u r = kPairBound u r of the exact rotation by
// the true angle (a fused multiply-add, if the compiler contracts x c - y s, only drops a
// rounding). In double the table is the C library's cos and sin, within 1 ulp (2u) rather than
// half.
#include "attn/core/random.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/ops/rope.hpp"
#include "attn/training/gradient_check.hpp"
#include "course/npy.hpp"

#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace test_rope {

using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::RopeLayout;
using attn::RopeOptions;
using attn::RopeTable;
using attn_test::identical;
using attn_test::message_of;

constexpr double kU = 0x1p-24;    // float's unit roundoff
constexpr double kEps = 0x1p-53;  // double's unit roundoff
// One rotated pair is within kPairBound u of its length of the exact rotation (derived above).
const double kPairBound = 2.0 * std::sqrt(2.0) + 1.0;
constexpr RopeLayout kLayouts[] = {RopeLayout::interleaved, RopeLayout::halves};

// Half an ulp of an angle below 2^13 = 8192 rad: how far m * theta_i, one rounded product, is
// from the exact product of the rounded theta_i. An angle off by e turns a pair by e too much,
// moving it by e times its length.
constexpr double kAngleBelow8192 = 0x1p-41;  // 4.5e-13

const std::filesystem::path kData = attn_test::fixture_folder("rope");

MatrixD load(const std::string& name) { return course::read_npy(kData / name).to_matrix_d(); }

// The table every test below shares: d = 16, positions 0 .. 8191 (the fixture's last position
// is its last row). 8192 x 8 entries: 1.5 MB, built once.
const RopeTable& table16() {
  static const RopeTable t = attn::rope_table(8192, 16);
  return t;
}

// The columns (x, y) of pair i of head h.
std::pair<Index, Index> pair_columns(RopeLayout layout, Index d, Index h, Index i) {
  return layout == RopeLayout::interleaved ? std::pair{h * d + 2 * i, h * d + 2 * i + 1}
                                           : std::pair{h * d + i, h * d + i + d / 2};
}

// For every pair of every head of every row: |got pair - want pair| / |ref pair|; the largest.
double worst_pair_error(const MatrixD& got, const MatrixD& want, const MatrixD& ref, Index d,
                        RopeLayout layout) {
  double worst = 0.0;
  for (Index r = 0; r < got.rows(); ++r) {
    for (Index h = 0; h < got.cols() / d; ++h) {
      for (Index i = 0; i < d / 2; ++i) {
        const auto [a, b] = pair_columns(layout, d, h, i);
        const double err = std::hypot(got(r, a) - want(r, a), got(r, b) - want(r, b));
        worst = std::max(worst, err / std::hypot(ref(r, a), ref(r, b)));
      }
    }
  }
  return worst;
}

// x in the interleaved layout -> the same numbers in the halves layout: y(:, perm[c]) = x(:, c),
// head by head.
template <typename M>
M to_halves(const M& x, Index d) {
  const std::vector<Index> perm = attn::rope_layout_permutation(d);
  M y(x.rows(), x.cols());
  for (Index h = 0; h < x.cols() / d; ++h) {
    for (Index c = 0; c < d; ++c)
      y.col(h * d + perm[static_cast<std::size_t>(c)]) = x.col(h * d + c);
  }
  return y;
}

MatrixD random_d(std::uint64_t seed, Index rows, Index cols) {
  attn::Rng rng(seed);
  return attn::random_normal(rng, rows, cols).cast<double>();
}

Matrix random_f(std::uint64_t seed, Index rows, Index cols) {
  attn::Rng rng(seed);
  return attn::random_normal(rng, rows, cols);
}

// The score (R(m) q) . (R(n) k) of one query row and one key row, in double: float rotations
// are widened first, so the dot product adds no float rounding of its own.
template <typename T>
double score(const attn::MatrixOf<T>& q, Index m, const attn::MatrixOf<T>& k, Index n,
             RopeLayout q_layout, RopeLayout k_layout) {
  const attn::MatrixOf<T> qm =
      attn::rope<T>(q, table16(), {.layout = q_layout, .first_position = m});
  const attn::MatrixOf<T> kn =
      attn::rope<T>(k, table16(), {.layout = k_layout, .first_position = n});
  return qm.template cast<double>().row(0).dot(kn.template cast<double>().row(0));
}

// ---- The table ----------------------------------------------------------------------------------

TEST(RopeTable, FrequenciesAreChapter07sBitForBit) {
  // The same expression, pow(10000, -(2i) / d) in double, as sinusoidal_frequencies: the same
  // binary gives the same bits.
  for (const Index d : {2, 4, 6, 8, 16, 64, 128, 1000, 4096}) {
    const attn::VectorD theta = attn::rope_frequencies(d);
    ASSERT_EQ(theta.size(), d / 2);
    EXPECT_TRUE(identical(theta, attn::sinusoidal_frequencies(d))) << "d " << d;
    EXPECT_TRUE(identical(theta, attn::rope_frequencies(d, 10000.0))) << "the default base";
    EXPECT_EQ(theta(0), 1.0) << "base^0 = 1: pair 0 turns one radian per position";
  }
  // Another base (Llama 3 uses 500000): theta_i = base^(-2i/d), pow within an ulp or so.
  const attn::VectorD t = attn::rope_frequencies(8, 500000.0);
  for (Index i = 0; i < 4; ++i) {
    const double want = std::pow(500000.0, -static_cast<double>(i) / 4.0);
    EXPECT_NEAR(t(i), want, 4 * kEps * want) << i;
  }
}

TEST(RopeTable, FloatEntriesAreTheDoubleOnesRoundedOnce) {
  const RopeTable& t = table16();
  EXPECT_EQ(t.positions, 8192);
  EXPECT_EQ(t.dim, 16);
  EXPECT_EQ(t.base, 10000.0);
  ASSERT_EQ(t.cos_d.rows(), 8192);
  ASSERT_EQ(t.cos_d.cols(), 8);
  EXPECT_TRUE(identical(t.cos, MatrixD(t.cos_d).cast<float>().eval()));
  EXPECT_TRUE(identical(t.sin, MatrixD(t.sin_d).cast<float>().eval()));
  EXPECT_TRUE(identical(t.cos_of<float>(), t.cos));
  EXPECT_TRUE(identical(t.sin_of<double>(), t.sin_d));
  // Chapter 07's table holds the same numbers: PE(m, 2i) = sin(m omega_i), PE(m, 2i+1) =
  // cos(m omega_i), the angle the same one rounded product. Bit for bit, in double and float.
  const MatrixD pe_d = attn::sinusoidal_encoding_d(300, 16);  // [300 x 16]
  const Matrix pe = attn::sinusoidal_encoding(300, 16);       // [300 x 16]
  for (Index i = 0; i < 8; ++i) {
    EXPECT_TRUE(identical(t.sin_d.col(i).head(300), pe_d.col(2 * i))) << i;
    EXPECT_TRUE(identical(t.cos_d.col(i).head(300), pe_d.col(2 * i + 1))) << i;
    EXPECT_TRUE(identical(t.sin.col(i).head(300), pe.col(2 * i))) << i;
    EXPECT_TRUE(identical(t.cos.col(i).head(300), pe.col(2 * i + 1))) << i;
  }
}

TEST(RopeTable, PositionZeroIsTheIdentity) {
  // cos 0 = 1 and sin 0 = 0 exactly, so row 0 turns nothing: x 1 - y 0 = x, x 0 + y 1 = y, bit
  // for bit, in both layouts and both precisions.
  const RopeTable& t = table16();
  EXPECT_TRUE((t.cos_d.row(0).array() == 1.0).all());
  EXPECT_TRUE((t.sin_d.row(0).array() == 0.0).all());
  EXPECT_TRUE((t.cos.row(0).array() == 1.0f).all());
  EXPECT_TRUE((t.sin.row(0).array() == 0.0f).all());
  const Matrix x = random_f(1, 1, 32);  // [1 x 32], 2 heads
  for (const RopeLayout layout : kLayouts) {
    const RopeOptions opts{.layout = layout, .heads = 2};
    EXPECT_TRUE(identical(attn::rope<float>(x, t, opts), x)) << attn::rope_layout_name(layout);
    const MatrixD xd = x.cast<double>();
    EXPECT_TRUE(identical(attn::rope<double>(xd, t, opts), xd));
  }
}

TEST(RopeTable, MatchesTheFixturesCosAndSin) {
  // The fixture takes the same angle m * theta_i in float64 (NumPy); its cos and sin may differ
  // from the C library's by an ulp or two (4 ulps of 1: 8.9e-16), and if NumPy's pow rounded
  // theta_i to the other neighbour the angle would differ by m ulp(theta_i) <= m 2^-52.
  const MatrixD positions = load("rope_positions.npy");  // [1 x 9]
  const MatrixD cos_ref = load("rope_cos_f64.npy");      // [9 x 8]
  const MatrixD sin_ref = load("rope_sin_f64.npy");
  ASSERT_EQ(cos_ref.rows(), positions.cols());
  ASSERT_EQ(cos_ref.cols(), 8);
  const RopeTable& t = table16();
  for (Index r = 0; r < positions.cols(); ++r) {
    const Index m = static_cast<Index>(positions(0, r));
    const double tol = 8 * kEps + static_cast<double>(m) * 0x1p-52;
    for (Index i = 0; i < 8; ++i) {
      EXPECT_NEAR(t.cos_d(m, i), cos_ref(r, i), tol) << "m " << m << " i " << i;
      EXPECT_NEAR(t.sin_d(m, i), sin_ref(r, i), tol) << "m " << m << " i " << i;
    }
  }
}

// ---- Against the float64 references of scripts/fixtures/rope.py ---------------------------------

// Each fixture row at its own position (first_position = m, one row), both precisions.
template <typename T>
MatrixD rope_fixture_rows(RopeLayout layout) {
  const MatrixD positions = load("rope_positions.npy");      // [1 x 9]
  const attn::MatrixOf<T> x = load("rope_x.npy").cast<T>();  // [9 x 32], float32 values
  MatrixD out(x.rows(), x.cols());                           // [9 x 32]
  for (Index r = 0; r < x.rows(); ++r) {
    const RopeOptions opts{
        .layout = layout, .first_position = static_cast<Index>(positions(0, r)), .heads = 2};
    out.row(r) = attn::rope<T>(x.row(r), table16(), opts).template cast<double>();
  }
  return out;
}

const char* reference_file(RopeLayout layout) {
  return layout == RopeLayout::interleaved ? "rope_interleaved_f64.npy" : "rope_halves_f64.npy";
}

TEST(RopeReference, BothLayoutsMatchFloat64InDouble) {
  // Interleaved against torch.view_as_complex times e^(j m theta); halves against Hugging Face's
  // q cos + rotate_half(q) sin, both in float64, at positions 0 .. 8191, 2 heads of 16.
  // Tolerance, of each pair's length: both sides are the same formula in double on the same
  // rounded angle, each within (sqrt 2 + 1) u of arithmetic (top of the file) and sqrt 2 * 4u
  // for a cos and sin within 2 ulps (NumPy's SIMD ones; the C library's are within 1) of the
  // exact rotation: 2 (2.4 + 5.7) u = 16u, so 20u; plus m 2^-52 in case theta_i's pow rounded
  // differently (see MatchesTheFixturesCosAndSin). Measured: 0 interleaved, 3.3u halves.
  const MatrixD positions = load("rope_positions.npy");
  const MatrixD x = load("rope_x.npy");
  for (const RopeLayout layout : kLayouts) {
    const MatrixD ref = load(reference_file(layout));  // [9 x 32]
    const MatrixD got = rope_fixture_rows<double>(layout);
    for (Index r = 0; r < x.rows(); ++r) {
      const double tol = 20 * kEps + positions(0, r) * 0x1p-52;
      EXPECT_LE(worst_pair_error(got.row(r), ref.row(r), x.row(r), 16, layout), tol)
          << attn::rope_layout_name(layout) << " position " << positions(0, r);
    }
  }
}

TEST(RopeReference, BothLayoutsMatchFloat64InFloat) {
  // The float result within kPairBound 2^-24 = 2.3e-7 of each pair's length (derived at the top
  // of the file), whatever the position: the table's angles are exact to double precision, so
  // nothing grows with m. Measured: 1.1e-7 (1.8 u) at worst, as the script's NumPy simulation.
  const MatrixD positions = load("rope_positions.npy");
  const MatrixD x = load("rope_x.npy");
  double worst = 0.0;
  for (const RopeLayout layout : kLayouts) {
    const MatrixD ref = load(reference_file(layout));
    const MatrixD got = rope_fixture_rows<float>(layout);
    for (Index r = 0; r < x.rows(); ++r) {
      const double err = worst_pair_error(got.row(r), ref.row(r), x.row(r), 16, layout);
      EXPECT_LE(err, kPairBound * kU + 20 * kEps + positions(0, r) * 0x1p-52)
          << attn::rope_layout_name(layout) << " position " << positions(0, r);
      worst = std::max(worst, err);
    }
  }
  EXPECT_GT(worst, 1e-8) << "float rounding should show: is the float path computing in double?";
}

TEST(RopeReference, ConsecutiveRowsStartAtFirstPosition) {
  // The fixture's last four rows are positions 8188 .. 8191, the table's last four: one call
  // with first_position 8188 rotates row r at 8188 + r, the same arithmetic as one row at a
  // time, so bit for bit.
  const MatrixD x = load("rope_x.npy");  // [9 x 32]
  for (const RopeLayout layout : kLayouts) {
    const RopeOptions opts{.layout = layout, .first_position = 8188, .heads = 2};
    const MatrixD block = attn::rope<double>(x.bottomRows(4), table16(), opts);  // [4 x 32]
    EXPECT_TRUE(identical(block, rope_fixture_rows<double>(layout).bottomRows(4).eval()));
    const Matrix block_f = attn::rope<float>(x.bottomRows(4).cast<float>(), table16(), opts);
    EXPECT_TRUE(identical(block_f.cast<double>().eval(),
                          rope_fixture_rows<float>(layout).bottomRows(4).eval()));
  }
}

TEST(RopeReference, DecodingOneRowAtItsPositionIsTheSequencesRow) {
  // What a KV cache relies on: rotating token t alone at first_position t gives exactly the row
  // the whole sequence's rotation gives it (same table entry, same arithmetic).
  const Matrix x = random_f(2, 12, 32);  // [12 x 32]
  for (const RopeLayout layout : kLayouts) {
    const Matrix all = attn::rope<float>(x, table16(), {.layout = layout, .heads = 2});
    for (Index t = 0; t < 12; ++t) {
      const Matrix one = attn::rope<float>(
          x.row(t), table16(), {.layout = layout, .first_position = t, .heads = 2});  // [1 x 32]
      EXPECT_TRUE(identical(one, all.row(t))) << t;
    }
  }
}

TEST(RopeHuggingFace, TheTableIsCloserToFloat64ThanTheFloat32Recipe) {
  // transformers' LlamaRotaryEmbedding computes inv_freq and m * theta in float32: the angle
  // carries theta's float32 rounding times m and the product's (half a float ulp of 4096 .. 8192
  // rad is 2.4e-4). The fixture measured its error of each pair's length: 6.5e-5 at 4095,
  // 1.2e-5 .. 1.3e-4 at 8188 .. 8191, against <= 1.0e-7 for the course's table of double
  // angles rounded once. Both use the same float32 formula on the pair (the halves layout), so
  // the difference is the table alone; at positions 0 .. 7 the two are equally good.
  const MatrixD positions = load("rope_positions.npy");
  const MatrixD x = load("rope_x.npy");
  const MatrixD ref = load("rope_halves_f64.npy");
  const MatrixD hf = load("rope_hf_f32.npy");  // [9 x 32]
  const MatrixD ours = rope_fixture_rows<float>(RopeLayout::halves);
  double worst_hf = 0.0;
  for (Index r = 0; r < x.rows(); ++r) {
    const double e_hf = worst_pair_error(hf.row(r), ref.row(r), x.row(r), 16, RopeLayout::halves);
    const double e_ours =
        worst_pair_error(ours.row(r), ref.row(r), x.row(r), 16, RopeLayout::halves);
    const double pos = positions(0, r);
    if (pos <= 7) {
      EXPECT_LE(e_hf, kPairBound * kU) << pos;  // small angles: float32 is enough
    }
    if (pos >= 4095) {
      // At least 20 times closer (measured 150 to 1600 times).
      EXPECT_LT(20 * e_ours, e_hf) << "position " << pos;
      EXPECT_LT(e_hf, 1e-3) << "the recipe is still a rotation by nearly the right angle";
      worst_hf = std::max(worst_hf, e_hf);
    }
  }
  EXPECT_GT(worst_hf, 1e-4) << "measured 1.3e-4 at 8190";
}

// ---- The relative-position identity -------------------------------------------------------------

TEST(RopeRelativePosition, ShiftingBothPositionsKeepsScoresInDouble) {
  // (R(m) q) . (R(n) k) = q^T R(n - m) k for exact angles m theta and n theta with the same
  // rounded theta, so theta's own rounding cannot break the identity. What does: each angle
  // product m theta_i is rounded, by <= half an ulp (2^-41 = 4.5e-13 below 8192 rad), and an
  // angle off by e moves a pair's contribution q_i . k_i by <= e |q_i| |k_i|, <= e |q| |k| summed
  // (Cauchy-Schwarz). Two angles per score, two scores: 4 * 2^-41 |q||k| = 1.8e-12 |q||k|; the
  // cos/sin ulps, the rotations' and the dot product's roundings add ~50 eps (1e-14). What it
  // catches: angles not proportional to the position (a first_position ignored or added
  // twice), q and k paired differently (MixingLayoutsBreaksTheShiftIdentity); those move
  // scores by O(|q||k|). A rotation the wrong way round keeps the identity: the fixtures and
  // IsChapter07sRotationTransposed catch that one.
  const MatrixD q = random_d(3, 1, 16), k = random_d(4, 1, 16);  // [1 x 16] each
  const double qk = q.norm() * k.norm();
  const double tol = 4 * kAngleBelow8192 + 64 * kEps;
  double worst = 0.0;
  for (const RopeLayout layout : kLayouts) {
    for (const auto& [m, n] :
         {std::pair<Index, Index>{3, 10}, {10, 3}, {0, 0}, {100, 7}, {7, 4000}, {2048, 4095}}) {
      const double s0 = score<double>(q, m, k, n, layout, layout);
      for (const Index s : {1, 5, 96, 4000, 4096}) {
        const double s1 = score<double>(q, m + s, k, n + s, layout, layout);
        EXPECT_LE(std::abs(s1 - s0), tol * qk) << "m " << m << " n " << n << " shift " << s;
        worst = std::max(worst, std::abs(s1 - s0) / qk);
      }
    }
  }
  // Measured 2e-14: the bound is for the worst rounding of every angle. Not 0: the shifted
  // scores are computed from other table rows (a call that ignored first_position would pass
  // the identity trivially).
  EXPECT_GT(worst, 0.0);
}

TEST(RopeRelativePosition, ShiftingBothPositionsKeepsScoresInFloat) {
  // In float each rotated pair is within kPairBound u of its length (top of the file), so each
  // score moves by <= 2 kPairBound u |q||k| (Cauchy-Schwarz over the pairs; the dot product
  // itself is taken in double) and the difference of two scores by twice that: 4 * 3.83 * 2^-24
  // = 9.1e-7 of |q||k|, at any position. Angles in double add 1.8e-12, nothing at this scale.
  const Matrix q = random_f(5, 1, 16), k = random_f(6, 1, 16);
  const double qk = q.cast<double>().norm() * k.cast<double>().norm();
  const double tol = 4 * kPairBound * kU + 4 * kAngleBelow8192;
  double worst = 0.0;
  for (const RopeLayout layout : kLayouts) {
    for (const auto& [m, n] :
         {std::pair<Index, Index>{3, 10}, {10, 3}, {100, 7}, {7, 4000}, {2048, 4095}}) {
      const double s0 = score<float>(q, m, k, n, layout, layout);
      for (const Index s : {1, 5, 96, 4000, 4096}) {
        const double s1 = score<float>(q, m + s, k, n + s, layout, layout);
        EXPECT_LE(std::abs(s1 - s0), tol * qk) << "m " << m << " n " << n << " shift " << s;
        worst = std::max(worst, std::abs(s1 - s0) / qk);
      }
    }
  }
  EXPECT_GT(worst, 1e-9) << "float rounding should show";
}

TEST(RopeRelativePosition, ScoreIsQDotKTurnedByTheOffset) {
  // q_m . k_n = q . R(n - m) k: the key turned by the offset alone, the query not at all. For
  // n < m, R(n - m) = R(m - n)^T is the backward pass at m - n. Three rounded angles (m, n and
  // |n - m|, all below 8192 rad): 3 * 2^-41 |q||k| plus ~50 eps, as in the test above.
  const MatrixD q = random_d(7, 1, 16), k = random_d(8, 1, 16);
  const double qk = q.norm() * k.norm();
  const double tol = 3 * kAngleBelow8192 + 64 * kEps;
  for (const RopeLayout layout : kLayouts) {
    for (const auto& [m, n] :
         {std::pair<Index, Index>{0, 9}, {9, 0}, {5, 5}, {100, 4095}, {8191, 1}, {4000, 8000}}) {
      const double lhs = score<double>(q, m, k, n, layout, layout);
      const MatrixD k_turned =
          n >= m ? attn::rope<double>(k, table16(), {.layout = layout, .first_position = n - m})
                 : attn::rope_backward<double>(k, table16(),
                                               {.layout = layout, .first_position = m - n});
      EXPECT_LE(std::abs(lhs - q.row(0).dot(k_turned.row(0))), tol * qk) << m << " " << n;
    }
  }
}

TEST(RopeRelativePosition, IsChapter07sRotationTransposed) {
  // The exact relation to relative_rotation(k) (positional_encoding.hpp). RoPE turns a pair
  // (x, y) by +k theta_i, [x'; y'] = [c -s; s c] [x; y]; R(k)'s block is [c s; -s c], the same
  // rotation transposed, i.e. by -k theta_i: chapter 07 moves (sin, cos) pairs, which turn the
  // other way. With tokens as rows RoPE maps a row x at position k to x R_rope(k)^T, hence
  //
  //     rope(x, first_position = k, interleaved) = x relative_rotation(k)
  //
  // and the score of query m and key n is q relative_rotation(m - n) k^T. Checked bit for bit
  // on the unit rows e_c (rope(e_c) is row c of the matrix): every product is 1 c, 1 s, or 0,
  // exact, and both read the same cos and sin of the same rounded angle from the same binary.
  const Index d = 16;
  for (const Index k : {0, 1, 5, 100, 4095, 8191}) {
    MatrixD rows(d, d);  // [d x d], row c = rope(e_c) at position k
    for (Index c = 0; c < d; ++c) {
      const MatrixD e = MatrixD::Identity(d, d).row(c);  // [1 x d]
      rows.row(c) = attn::rope<double>(e, table16(), {.first_position = k});
    }
    EXPECT_EQ(rows, attn::relative_rotation(k, d)) << "k " << k;
  }
  // And the score through chapter 07's matrix: three rounded angles as in the test above.
  const MatrixD q = random_d(9, 1, d), kv = random_d(10, 1, d);
  for (const auto& [m, n] : {std::pair<Index, Index>{3, 11}, {11, 3}, {4095, 100}}) {
    const double lhs = score<double>(q, m, kv, n, RopeLayout::interleaved, RopeLayout::interleaved);
    const double rhs = (q * attn::relative_rotation(m - n, d) * kv.transpose())(0, 0);
    EXPECT_NEAR(lhs, rhs, (3 * kAngleBelow8192 + 64 * kEps) * q.norm() * kv.norm())
        << m << " " << n;
  }
  // Chapter 07's position vector read with its pairs as (cos, sin) is a point RoPE moves along
  // its circle: RoPE of that row at position k is the same row of position pos + k. Angles
  // below 2048 rad (half an ulp: 1.1e-13), three per entry; each pair has length 1.
  const MatrixD pe = attn::sinusoidal_encoding_d(1100, d);  // [1100 x 16], pairs (sin, cos)
  MatrixD cos_sin(pe.rows(), d);                            // pairs (cos, sin)
  for (Index i = 0; i < d / 2; ++i) {
    cos_sin.col(2 * i) = pe.col(2 * i + 1);
    cos_sin.col(2 * i + 1) = pe.col(2 * i);
  }
  for (const Index pos : {0, 1, 17, 500}) {
    for (const Index k : {0, 1, 3, 599}) {
      const MatrixD moved = attn::rope<double>(cos_sin.row(pos), table16(), {.first_position = k});
      EXPECT_LT(attn::max_abs_diff(moved, cos_sin.row(pos + k)), 3 * 0x1p-43 + 16 * kEps)
          << "pos " << pos << " k " << k;
    }
  }
}

// ---- Lengths ------------------------------------------------------------------------------------

TEST(RopeNorm, EveryPairKeepsItsLength) {
  // An exact rotation keeps each pair's length, so |r' - r| is at most the distance from the
  // exact rotation: kPairBound u r in float (r and r' taken in double: their own rounding is
  // ~1e-16 r). In double: the cos/sin ulp (2u, not u, in the table term) makes it
  // (3 sqrt 2 + 1) u r = 5.3 u r, and hypot is within an ulp (2u) for r and for r': 9.3 u r,
  // so 10 u r. Measured: 1.9u in float, 2.7u in double.
  // Positions 8100 .. 8191: the largest angles the table holds.
  const Matrix x = random_f(11, 92, 32);  // [92 x 32], 2 heads
  const MatrixD xd = x.cast<double>();
  for (const RopeLayout layout : kLayouts) {
    const RopeOptions opts{.layout = layout, .first_position = 8100, .heads = 2};
    const MatrixD yf = attn::rope<float>(x, table16(), opts).cast<double>();
    const MatrixD yd = attn::rope<double>(xd, table16(), opts);
    double worst_f = 0.0, worst_d = 0.0;
    for (Index r = 0; r < x.rows(); ++r) {
      for (Index h = 0; h < 2; ++h) {
        for (Index i = 0; i < 8; ++i) {
          const auto [a, b] = pair_columns(layout, 16, h, i);
          const double len = std::hypot(xd(r, a), xd(r, b));
          worst_f = std::max(worst_f, std::abs(std::hypot(yf(r, a), yf(r, b)) - len) / len);
          worst_d = std::max(worst_d, std::abs(std::hypot(yd(r, a), yd(r, b)) - len) / len);
        }
      }
    }
    EXPECT_LE(worst_f, kPairBound * kU + 4 * kEps) << attn::rope_layout_name(layout);
    EXPECT_LE(worst_d, 10 * kEps) << attn::rope_layout_name(layout);
  }
}

// ---- The two layouts ----------------------------------------------------------------------------

TEST(RopeLayouts, PermutationSendsPairIToIAndIPlusHalf) {
  EXPECT_EQ(attn::rope_layout_permutation(8), (std::vector<Index>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(attn::rope_layout_permutation(2), (std::vector<Index>{0, 1}));
  std::vector<Index> p = attn::rope_layout_permutation(64);
  std::sort(p.begin(), p.end());
  for (Index c = 0; c < 64; ++c) EXPECT_EQ(p[static_cast<std::size_t>(c)], c) << "a permutation";
  EXPECT_STREQ(attn::rope_layout_name(RopeLayout::interleaved), "interleaved");
  EXPECT_STREQ(attn::rope_layout_name(RopeLayout::halves), "halves");
}

TEST(RopeLayouts, HalvesOnPermutedFeaturesIsInterleavedBitForBit) {
  // Each pair meets the same two numbers and the same table entry, in the same arithmetic:
  // bit for bit, both precisions, 2 heads, positions 4000 .. 4009.
  const Matrix x = random_f(12, 10, 32);  // [10 x 32], interleaved
  const RopeOptions inter{.layout = RopeLayout::interleaved, .first_position = 4000, .heads = 2};
  const RopeOptions halves{.layout = RopeLayout::halves, .first_position = 4000, .heads = 2};
  EXPECT_TRUE(identical(to_halves(attn::rope<float>(x, table16(), inter), 16),
                        attn::rope<float>(to_halves(x, 16), table16(), halves)));
  const MatrixD xd = x.cast<double>();
  EXPECT_TRUE(identical(to_halves(attn::rope<double>(xd, table16(), inter), 16),
                        attn::rope<double>(to_halves(xd, 16), table16(), halves)));
  // Without the permutation the layouts are different maps: the same x gives other numbers.
  EXPECT_GT(attn::max_abs_diff(attn::rope<double>(xd, table16(), inter),
                               attn::rope<double>(xd, table16(), halves)),
            0.1);
}

TEST(RopeLayouts, MixingLayoutsBreaksTheShiftIdentity) {
  // The classic bug: q rotated interleaved, k rotated halves. Pair i of q then meets features
  // of k that turn at other frequencies, and the score depends on m and n separately: moving
  // both by s changes it by a sizeable fraction of |q||k| (measured: 0.58 |q||k|), where one
  // layout on both sides stays within 1.8e-12 |q||k| (measured 4e-15), as in
  // ShiftingBothPositionsKeepsScoresInDouble.
  const MatrixD q = random_d(13, 1, 16), k = random_d(14, 1, 16);
  const double qk = q.norm() * k.norm();
  double worst_mixed = 0.0, worst_same = 0.0;
  for (const auto& [m, n] : {std::pair<Index, Index>{3, 10}, {100, 7}, {7, 4000}}) {
    for (const Index s : {1, 5, 96}) {
      const double mixed =
          score<double>(q, m + s, k, n + s, RopeLayout::interleaved, RopeLayout::halves) -
          score<double>(q, m, k, n, RopeLayout::interleaved, RopeLayout::halves);
      const double same =
          score<double>(q, m + s, k, n + s, RopeLayout::halves, RopeLayout::halves) -
          score<double>(q, m, k, n, RopeLayout::halves, RopeLayout::halves);
      worst_mixed = std::max(worst_mixed, std::abs(mixed) / qk);
      worst_same = std::max(worst_same, std::abs(same) / qk);
    }
  }
  EXPECT_LE(worst_same, 4 * kAngleBelow8192 + 64 * kEps);
  EXPECT_GT(worst_mixed, 0.1) << "the mixed layouts should move the scores by O(|q||k|)";
}

// ---- Backward -----------------------------------------------------------------------------------

TEST(RopeBackward, UndoesTheForward) {
  // R^T R = (c^2 + s^2) I for the table's (c, s): within 2u of I in float (each entry rounded
  // once) and 4u in double (cos and sin within an ulp each). The forward and the backward add
  // their arithmetic roundings, (sqrt 2 + 1) u r each (top of the file, without the table
  // term). So 2 (sqrt 2 + 1) + 4 = 8.8 u of each pair's length, at any position. Measured:
  // 4.0u in float, 2.8u in double.
  const Matrix x = random_f(15, 40, 32);  // [40 x 32]
  const double bound = 2 * (std::sqrt(2.0) + 1) + 4;
  for (const RopeLayout layout : kLayouts) {
    const RopeOptions opts{.layout = layout, .first_position = 8152, .heads = 2};
    const Matrix back_f =
        attn::rope_backward<float>(attn::rope<float>(x, table16(), opts), table16(), opts);
    const MatrixD xd = x.cast<double>();
    EXPECT_LE(worst_pair_error(back_f.cast<double>(), xd, xd, 16, layout), bound * kU);
    const MatrixD back_d =
        attn::rope_backward<double>(attn::rope<double>(xd, table16(), opts), table16(), opts);
    EXPECT_LE(worst_pair_error(back_d, xd, xd, 16, layout), bound * kEps);
    // The in-place versions do the same arithmetic.
    Matrix y = x;
    attn::rope_inplace<float>(y, table16(), opts);
    attn::rope_backward_inplace<float>(y, table16(), opts);
    EXPECT_TRUE(identical(y, back_f));
  }
}

TEST(RopeBackward, IsTheAdjointInDouble) {
  // <rope(x), y> = <x, rope_backward(y)>: with the table's (c, s), whatever their rounding, the
  // backward applies the transpose of the forward's matrix, so only the arithmetic separates
  // the two sides: each rotated entry is within (sqrt 2 + 1) eps of its pair's length, and
  // each inner product of N = 8 x 32 terms sums within N eps |a||b| in any order. So
  // 2 (N + 3) eps |x||y| = 5.8e-14 |x||y|; measured 2e-17. The forward used as the backward
  // is off by 4e-5 to 0.1 of |x||y|.
  const MatrixD x = random_d(16, 8, 32), y = random_d(17, 8, 32);  // [8 x 32] each
  const double tol = 2 * (8 * 32 + 3) * kEps * x.norm() * y.norm();
  for (const RopeLayout layout : kLayouts) {
    for (const Index first : {0, 37, 8184}) {
      const RopeOptions opts{.layout = layout, .first_position = first, .heads = 2};
      const double lhs = (attn::rope<double>(x, table16(), opts).array() * y.array()).sum();
      const double rhs =
          (x.array() * attn::rope_backward<double>(y, table16(), opts).array()).sum();
      EXPECT_NEAR(lhs, rhs, tol) << attn::rope_layout_name(layout) << " " << first;
      // The forward in place of the backward fails by O(|x||y|): the check has teeth.
      const double wrong = (x.array() * attn::rope<double>(y, table16(), opts).array()).sum();
      EXPECT_GT(std::abs(lhs - wrong), 1e3 * tol);
    }
  }
}

TEST(RopeBackward, MatchesFiniteDifferences) {
  // L = sum(rope(x) * R), dL/dx = rope_backward(R). L is linear in x, so central differences
  // have no truncation error; only rounding, ~eps |L| / h = 2.2e-16 * 10 / 1e-5 = 2e-10 of the
  // gradient's scale (~2) (gradient_check.hpp); measured 3e-11. 1e-8 leaves a factor 50 over the
  // estimate; a wrong backward (the forward again: measured 1.5 and 2.0) is off by O(1).
  MatrixD x = random_d(18, 3, 32);        // [3 x 32], 2 heads
  const MatrixD R = random_d(19, 3, 32);  // [3 x 32], the upstream gradient
  for (const RopeLayout layout : kLayouts) {
    const RopeOptions opts{.layout = layout, .first_position = 100, .heads = 2};
    const attn::LossFunction loss = [&] {
      return (attn::rope<double>(x, table16(), opts).array() * R.array()).sum();
    };
    const MatrixD dx = attn::rope_backward<double>(R, table16(), opts);
    const attn::TensorCheck check = attn::check_tensor("x", x, dx, loss);
    EXPECT_LT(check.relative_error(), 1e-8) << attn::rope_layout_name(layout);
    EXPECT_GT(check.scale, 0.1);
    const MatrixD wrong = attn::rope<double>(R, table16(), opts);
    EXPECT_GT(attn::check_tensor("x", x, wrong, loss).relative_error(), 0.1)
        << "the forward as the backward must fail the check";
  }
}

// ---- Bad input ----------------------------------------------------------------------------------

TEST(RopeErrors, BadTableArgumentsThrowNamingTheValue) {
  EXPECT_EQ(message_of([] { attn::rope_frequencies(7); }),
            "rope_frequencies: dim is 7: it must be even and >= 2 (RoPE turns pairs)");
  EXPECT_EQ(message_of([] { attn::rope_frequencies(0); }),
            "rope_frequencies: dim is 0: it must be even and >= 2 (RoPE turns pairs)");
  EXPECT_EQ(message_of([] { attn::rope_table(16, 5); }),
            "rope_table: dim is 5: it must be even and >= 2 (RoPE turns pairs)");
  EXPECT_EQ(message_of([] { attn::rope_table(0, 8); }),
            "rope_table: positions is 0: it must be at least 1");
  EXPECT_EQ(message_of([] { attn::rope_table(-3, 8); }),
            "rope_table: positions is -3: it must be at least 1");
  EXPECT_EQ(message_of([] { attn::rope_table(16, 8, 1.0); }),
            "rope_table: base is 1.000000: it must be finite and > 1");
  EXPECT_EQ(message_of([] { attn::rope_frequencies(8, 0.5); }),
            "rope_frequencies: base is 0.500000: it must be finite and > 1");
  for (const double base : {-10000.0, 0.0, std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity()}) {
    const std::string m = message_of([&] { attn::rope_table(16, 8, base); });
    EXPECT_EQ(m.rfind("rope_table: base is ", 0), 0u) << m;
    EXPECT_NE(m.find("it must be finite and > 1"), std::string::npos) << m;
  }
  EXPECT_EQ(message_of([] { attn::rope_layout_permutation(3); }),
            "rope_layout_permutation: dim is 3: it must be even and >= 2 (RoPE turns pairs)");
  EXPECT_THROW(attn::rope_layout_permutation(0), std::invalid_argument);
  // A table the machine cannot hold is refused before allocating (core/memory.hpp).
  const std::string big = message_of([] { attn::rope_table(Index{1} << 40, 1 << 20); });
  EXPECT_EQ(big.rfind("rope_table: positions 1099511627776 and dim 1048576 needs ", 0), 0u) << big;
}

// Calls f on a copy of x in place; expects it to throw `message` and leave the copy unchanged.
template <typename T, typename F>
void expect_refused(const attn::MatrixOf<T>& x, F&& f, const std::string& message) {
  attn::MatrixOf<T> y = x;
  EXPECT_EQ(message_of([&] { f(y); }), message);
  EXPECT_TRUE(identical(y, x)) << "x was changed by a call that threw: " << message;
}

template <typename T>
void check_bad_calls() {
  const RopeTable t = attn::rope_table(100, 8);
  const attn::MatrixOf<T> x = random_f(20, 3, 16).cast<T>();  // [3 x 16]: 2 heads of 8
  using Ref = Eigen::Ref<attn::MatrixOf<T>>;
  const auto both_with = [&](const RopeTable& table, const RopeOptions& opts,
                             const std::string& what) {
    expect_refused<T>(
        x, [&](Ref y) { attn::rope_inplace<T>(y, table, opts); }, "rope: " + what);
    expect_refused<T>(
        x, [&](Ref y) { attn::rope_backward_inplace<T>(y, table, opts); },
        "rope_backward: " + what);
    EXPECT_EQ(message_of([&] { attn::rope<T>(x, table, opts); }), "rope: " + what);
    EXPECT_EQ(message_of([&] { attn::rope_backward<T>(x, table, opts); }),
              "rope_backward: " + what);
  };
  const auto both = [&](const RopeOptions& opts, const std::string& what) {
    both_with(t, opts, what);
  };
  both({.heads = 1}, "x is [3 x 16] but 1 heads of the table's 8 features make 8 columns");
  both({.heads = 3}, "x is [3 x 16] but 3 heads of the table's 8 features make 24 columns");
  both({.heads = 0}, "heads is 0: it must be at least 1");
  both({.heads = -2}, "heads is -2: it must be at least 1");
  both({.first_position = -1, .heads = 2}, "first_position is -1: it must be >= 0");
  // Rows 0 .. 2 at 98 .. 100: the last one is past the table of positions 0 .. 99.
  both({.first_position = 98, .heads = 2},
       "positions 98 .. 100 are beyond the RoPE table of 100 positions (0 .. 99)");
  both({.first_position = 1000, .heads = 2},
       "positions 1000 .. 1002 are beyond the RoPE table of 100 positions (0 .. 99)");
  // Sizes whose product or sum would overflow an Index are refused without computing it.
  const Index huge = std::numeric_limits<Index>::max();
  both({.heads = huge / 2},
       "x is [3 x 16] but 4611686018427387903 heads of the table's 8 features make more than "
       "9223372036854775807 columns");
  // 2^61 + 2 heads of 8 features are 2^64 + 16 columns, which a 64-bit product wraps to 16, x's
  // width: a check by multiplication would let it through to write 2^61 heads past x.
  both({.heads = (Index{1} << 61) + 2},
       "x is [3 x 16] but 2305843009213693954 heads of the table's 8 features make more than "
       "9223372036854775807 columns");
  both({.first_position = huge, .heads = 2},
       "positions from 9223372036854775807 on are beyond the RoPE table of 100 positions (0 .. "
       "99)");
  // A table not made by rope_table(), or one whose public fields were changed since: each of
  // the four matrices is checked (the kernel reads the float or the double pair), and dim.
  const std::string inconsistent =
      "the RoPE table is empty or inconsistent: make it with rope_table()";
  both_with(RopeTable{}, {.heads = 2}, inconsistent);
  const std::vector<std::function<void(RopeTable&)>> tamper = {
      [](RopeTable& b) { b.cos.conservativeResize(100, 3); },
      [](RopeTable& b) { b.sin.conservativeResize(99, 4); },
      [](RopeTable& b) { b.cos_d.conservativeResize(100, 5); },
      [](RopeTable& b) { b.sin_d.resize(0, 0); },
      [](RopeTable& b) { b.dim = 9; },  // 9 / 2 = 4 columns still, but an odd dim
  };
  for (const auto& change : tamper) {
    RopeTable bad = t;
    change(bad);
    both_with(bad, {.heads = 2}, inconsistent);
  }
  // The last rows the table holds are fine, and so are no rows at all.
  EXPECT_NO_THROW(attn::rope<T>(x, t, {.first_position = 97, .heads = 2}));
  EXPECT_EQ(attn::rope<T>(x.topRows(0), t, {.first_position = 100, .heads = 2}).rows(), 0);
}

TEST(RopeErrors, BadCallsThrowBeforeTouchingX) {
  check_bad_calls<float>();
  check_bad_calls<double>();
}

// ---- Several heads, blocks of bigger matrices ---------------------------------------------------

TEST(RopeHeads, EachHeadIsRotatedOnItsOwn) {
  // heads = 3: head h's columns [8h, 8h + 8) turn exactly as a one-head call on them alone.
  const RopeTable t = attn::rope_table(64, 8);
  const Matrix x = random_f(21, 5, 24);  // [5 x 24]
  for (const RopeLayout layout : kLayouts) {
    const Matrix all =
        attn::rope<float>(x, t, {.layout = layout, .first_position = 50, .heads = 3});
    const MatrixD all_d = attn::rope<double>(x.cast<double>(), t,
                                             {.layout = layout, .first_position = 50, .heads = 3});
    for (Index h = 0; h < 3; ++h) {
      const RopeOptions one{.layout = layout, .first_position = 50};
      EXPECT_TRUE(
          identical(attn::rope<float>(x.middleCols(8 * h, 8), t, one), all.middleCols(8 * h, 8)))
          << "head " << h;
      EXPECT_TRUE(identical(attn::rope<double>(x.middleCols(8 * h, 8).cast<double>(), t, one),
                            all_d.middleCols(8 * h, 8)))
          << "head " << h;
    }
  }
}

TEST(RopeHeads, AColumnBlockOfABiggerMatrixTurnsInPlace) {
  // As attention keeps q and k: x [5 x 40] holds 2 heads of 16 in columns 3 .. 34 of rows
  // 1 .. 3; rotating that block in place changes it as rope() of a copy would and touches
  // nothing around it.
  const Matrix big = random_f(22, 5, 40);  // [5 x 40]
  for (const RopeLayout layout : kLayouts) {
    const RopeOptions opts{.layout = layout, .first_position = 7, .heads = 2};
    Matrix y = big;
    attn::rope_inplace<float>(y.block(1, 3, 3, 32), table16(), opts);
    const Matrix block = big.block(1, 3, 3, 32);  // [3 x 32]
    EXPECT_TRUE(identical(y.block(1, 3, 3, 32), attn::rope<float>(block, table16(), opts)));
    Matrix outside = y;
    outside.block(1, 3, 3, 32) = block;
    EXPECT_TRUE(identical(outside, big)) << "columns or rows outside the block changed";
    // The backward on the same block puts it back to rounding: 8.8 u as in UndoesTheForward.
    attn::rope_backward_inplace<float>(y.block(1, 3, 3, 32), table16(), opts);
    EXPECT_LT(attn::max_abs_diff(y, big), 9 * kU * big.cwiseAbs().maxCoeff() * std::sqrt(2.0));
  }
}

}  // namespace test_rope
