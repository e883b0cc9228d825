// The sinusoidal position vectors (chapter 07): known values, the table against a 40-digit
// reference, the rotation R(k) that moves every position by k (in float and in double, with
// the tolerances derived below), the dot product that depends on the offset only, and errors.
#include "attn/layers/positional_encoding.hpp"
#include "course/npy.hpp"

#include <Eigen/LU>  // determinant()
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_positional_encoding {

using attn::Index;
using attn::Matrix;
using attn::MatrixD;

const std::filesystem::path kData = attn_test::fixture_folder("positional_encoding");

MatrixD load(const std::string& name) { return course::read_npy(kData / name).to_matrix_d(); }

// ---- Known values -------------------------------------------------------------------------------

TEST(PositionalEncodingTable, PositionZeroIsZeroOneZeroOne) {
  // sin 0 = 0 and cos 0 = 1 exactly, in every pair; an odd width ends with sin 0 = 0.
  for (const Index d : {1, 2, 7, 8, 128, 512}) {
    const Matrix pe = attn::sinusoidal_encoding(3, d);
    for (Index c = 0; c < d; ++c) EXPECT_EQ(pe(0, c), c % 2 == 0 ? 0.0f : 1.0f) << d << " " << c;
  }
}

TEST(PositionalEncodingTable, PositionOneOfPairZeroIsSinOne) {
  // omega_0 = 10000^0 = 1, so PE(1, 0) = sin 1 and PE(1, 1) = cos 1, rounded once to float:
  // sin 1 = 0.8414709848078965 (nearest float 0.84147096), cos 1 = 0.5403023058681398.
  const Matrix pe = attn::sinusoidal_encoding(2, 64);
  EXPECT_EQ(pe(1, 0), 0.84147096f);
  EXPECT_EQ(pe(1, 1), 0.54030228f);
  const MatrixD pe_d = attn::sinusoidal_encoding_d(2, 64);
  EXPECT_EQ(pe_d(1, 0), 0.8414709848078965);
  EXPECT_EQ(pe_d(1, 1), 0.5403023058681398);
}

TEST(PositionalEncodingTable, FloatTableIsTheDoubleTableRoundedOnce) {
  const MatrixD pe_d = attn::sinusoidal_encoding_d(300, 96);
  const Matrix pe = attn::sinusoidal_encoding(300, 96);
  EXPECT_TRUE((pe.array() == pe_d.cast<float>().array()).all());
  // _at with the same positions is the same computation, bit for bit.
  const MatrixD at = attn::sinusoidal_encoding_at({0, 1, 299}, 96);
  EXPECT_EQ(at.row(0), pe_d.row(0));
  EXPECT_EQ(at.row(1), pe_d.row(1));
  EXPECT_EQ(at.row(2), pe_d.row(299));
  // Negative positions: sin is odd and cos even, so PE(-p) mirrors PE(p) pair by pair.
  const MatrixD neg = attn::sinusoidal_encoding_at({-37}, 96);
  for (Index c = 0; c < 96; ++c) {
    EXPECT_EQ(neg(0, c), c % 2 == 0 ? -pe_d(37, c) : pe_d(37, c)) << c;
  }
}

TEST(PositionalEncodingTable, FrequenciesFallFromOneToAlmostOneTenThousandth) {
  // d_model = 8: omega_i = 10000^(-2i/8) = 10^-i. pow rounds within an ulp or so: 1e-15 relative.
  const attn::VectorD w = attn::sinusoidal_frequencies(8);
  ASSERT_EQ(w.size(), 4);
  for (Index i = 0; i < 4; ++i) EXPECT_NEAR(w(i), std::pow(10.0, -static_cast<double>(i)), 1e-15);
  EXPECT_EQ(w(0), 1.0);
  // The slowest pair of d_model = 512 turns 10000^(-510/512) rad per position.
  EXPECT_NEAR(attn::sinusoidal_frequencies(512)(255), std::pow(10000.0, -510.0 / 512.0), 1e-19);
  EXPECT_EQ(attn::sinusoidal_frequencies(7).size(), 4);  // three pairs and a lone sin column
}

// ---- Against a reference computed with 40 digits (scripts/fixtures/positional_encoding.py) ------

TEST(PositionalEncodingTable, IsTheTrueValueRoundedOnce) {
  const MatrixD positions = load("pe_positions.npy");  // [1 x N]
  const MatrixD truth = load("pe_f64.npy");            // [N x 64], each the double nearest
  ASSERT_EQ(truth.cols(), 64);
  ASSERT_EQ(positions.cols(), truth.rows());
  std::vector<Index> at;
  for (Index r = 0; r < positions.cols(); ++r) at.push_back(static_cast<Index>(positions(0, r)));
  const MatrixD pe_d = attn::sinusoidal_encoding_at(at, 64);
  const Matrix pe = pe_d.cast<float>();
  const Matrix table = attn::sinusoidal_encoding(at.back() + 1, 64);  // rows 0 .. 10000
  int mismatches = 0;
  for (Index r = 0; r < truth.rows(); ++r) {
    // The library's angle pos * omega carries omega's rounding (the exponent 2i/64 is exact,
    // pow adds < 1 ulp) and the product's: <= 2 ulps of the angle, ~2.2e-16 relative each.
    // With the result's own rounding (< 1 ulp of a value <= 1) that is below
    // 4.5e-16 * angle + 2.3e-16, i.e. 4.5e-12 at pos 10000, where one float ulp is 6e-8.
    const double angle_bound = 4.5e-16 * positions(0, r) + 2.3e-16;
    for (Index c = 0; c < 64; ++c) {
      const double t = truth(r, c);
      ASSERT_LE(std::abs(pe_d(r, c) - t), angle_bound) << "pos " << positions(0, r) << " col " << c;
      // Rounded once to float: within half a float ulp of the truth (2^-24 relative), plus
      // the double's error above.
      ASSERT_LE(std::abs(static_cast<double>(pe(r, c)) - t),
                std::ldexp(std::abs(t), -24) + angle_bound)
          << "pos " << positions(0, r) << " col " << c;
      ASSERT_EQ(table(at[static_cast<std::size_t>(r)], c), pe(r, c));
      // So the float is the float nearest the truth, unless the truth lies within angle_bound
      // of the midpoint between two floats. None of these 1,856 entries does:
      mismatches += pe(r, c) != static_cast<float>(t);
    }
  }
  EXPECT_EQ(mismatches, 0) << "entries that are not the float nearest the true value";
}

TEST(PositionalEncodingTable, OddWidthEndsWithALoneSinColumn) {
  const MatrixD truth = load("pe_odd_f64.npy");  // [5 x 7]
  const MatrixD pe = attn::sinusoidal_encoding_d(5, 7);
  ASSERT_EQ(truth.rows(), 5);
  ASSERT_EQ(truth.cols(), 7);
  // Angles below 5 rad: a few ulps of 1 at most.
  EXPECT_LT((pe - truth).cwiseAbs().maxCoeff(), 1e-15);
}

TEST(PositionalEncodingTable, TheFloat32TutorialRecipeLosesDigitsAtLargePositions) {
  // Documents what the fixture measured: PyTorch's tutorial table, computed in float32, drifts
  // from the truth as pos grows (its angle pos * div_term is rounded to float32 first), while
  // the library's stays within half a float ulp (2^-24 relative) at every position.
  const MatrixD positions = load("pe_positions.npy");
  const MatrixD truth = load("pe_f64.npy");
  const MatrixD torch32 = load("pe_torch_f32.npy");  // [N x 64]
  for (Index r = 0; r < truth.rows(); ++r) {
    const double pos = positions(0, r);
    const double err = (torch32.row(r) - truth.row(r)).cwiseAbs().maxCoeff();
    if (pos < 16) {
      EXPECT_LT(err, 1e-6) << pos;  // angles below 16: float32 sin/cos are fine there
    }
    if (pos >= 1000) {
      EXPECT_GT(err, 1e-5) << pos;  // measured: 2.6e-5 at 1000, 2.0e-4 at 10000
      EXPECT_LT(err, 1e-3) << pos;  // half the float32 spacing at 10^4 is 4.9e-4
    }
  }
}

// ---- The rotation R(k) --------------------------------------------------------------------------

TEST(PositionalEncodingRotation, BlocksAreReadOffPEk) {
  // Block i of R(k) = [[PE(k, 2i+1), PE(k, 2i)], [-PE(k, 2i), PE(k, 2i+1)]], zeros elsewhere.
  for (const Index k : {0, 1, 2, 37, 500, -3}) {
    const MatrixD R = attn::relative_rotation(k, 16);
    const MatrixD pe_k = attn::sinusoidal_encoding_at({k}, 16);
    for (Index r = 0; r < 16; ++r) {
      for (Index c = 0; c < 16; ++c) {
        double expected = 0.0;
        if (r / 2 == c / 2) {
          const double s = pe_k(0, r - r % 2), co = pe_k(0, r - r % 2 + 1);
          expected = r == c ? co : (r < c ? s : -s);
        }
        EXPECT_EQ(R(r, c), expected) << "k " << k << " (" << r << ", " << c << ")";
      }
    }
  }
  // k = 0 is the identity; R(2) of d_model 2 is the 2 x 2 block itself.
  EXPECT_EQ(attn::relative_rotation(0, 8), MatrixD::Identity(8, 8));
  const MatrixD R2 = attn::relative_rotation(2, 2);
  EXPECT_EQ(R2(0, 0), std::cos(2.0));
  EXPECT_EQ(R2(0, 1), std::sin(2.0));
  EXPECT_EQ(R2(1, 0), -std::sin(2.0));
}

TEST(PositionalEncodingRotation, MovesEveryPositionByKInDouble) {
  // PE(pos + k)^T = R(k) PE(pos)^T for all 0 <= pos < 1000 and 0 <= k <= 1000, d_model 16
  // (all pairs), and on a coarser grid for d_model 128; also as rows: PE(pos+k) = PE(pos) R^T.
  //
  // Tolerance. The identity is exact for exact angles omega*pos, omega*k, omega*(pos+k) with
  // the same rounded omega. Each computed angle is off by at most half an ulp of itself, and
  // an angle error e moves a (sin, cos) pair by at most |e| (it turns the pair). Angles stay
  // below 2048 rad here, where half an ulp is 2^-43 = 1.1e-13: three angles give 3.4e-13.
  // sin, cos, the two products and the sum add a few ulps of 1 (~1e-15). So 1e-12.
  const double tol = 1e-12;
  for (const Index d : {16, 128}) {
    const Index step = d == 16 ? 1 : 37;
    const MatrixD pe = attn::sinusoidal_encoding_d(2001, d);  // [2001 x d]
    double worst = 0.0;
    for (Index k = 0; k <= 1000; k += (d == 16 ? 1 : 41)) {
      const MatrixD R = attn::relative_rotation(k, d);  // [d x d]
      if (step == 1) {
        // All positions at once, tokens as rows: [1000 x d] = [1000 x d] [d x d].
        const MatrixD moved = pe.topRows(1000) * R.transpose();
        worst = std::max(worst, (moved - pe.middleRows(k, 1000)).cwiseAbs().maxCoeff());
      } else {
        for (Index pos = 0; pos < 1000; pos += step) {
          const Eigen::VectorXd moved = R * pe.row(pos).transpose();  // [d x 1]
          worst = std::max(worst, (moved.transpose() - pe.row(pos + k)).cwiseAbs().maxCoeff());
        }
      }
    }
    EXPECT_LT(worst, tol) << "d_model " << d;
    EXPECT_GT(worst, 0.0) << "rounding is expected somewhere: the test would see a wrong sign";
  }
}

TEST(PositionalEncodingRotation, MovesEveryPositionByKInFloat) {
  // The same identity with the float table and R(k) rounded to float, products in float.
  //
  // Tolerance. Every float entry is within 2^-24 relative of its double (one rounding). For
  // the pair x = a c + b s with (a, b) = PE(pos) and (c, s) from PE(k), both unit vectors:
  // input errors move x by at most 2^-24 (|a c| + |b s|) <= 2^-24 for R's entries and as much
  // for PE(pos)'s; the two products and the sum round by 2^-24 of values <= 1 (together at
  // most 2^-24 (|ac| + |bs|) + 2^-24); the target PE(pos + k) is itself rounded by 2^-24.
  // Five times 2^-24 = 3.0e-7, independent of pos: the float table does not drift.
  const double tol = 5 * std::ldexp(1.0, -24);
  const Index d = 64;
  const Matrix pe = attn::sinusoidal_encoding(1601, d);  // [1601 x 64]
  double worst = 0.0;
  for (const Index k : {1, 2, 3, 10, 100, 333, 800}) {
    const Matrix R = attn::relative_rotation(k, d).cast<float>();  // [64 x 64]
    const Matrix moved = pe.topRows(800) * R.transpose();          // [800 x 64]
    worst =
        std::max(worst, static_cast<double>((moved - pe.middleRows(k, 800)).cwiseAbs().maxCoeff()));
  }
  EXPECT_LT(worst, tol);
  EXPECT_GT(worst, 1e-8) << "float rounding should show";
}

TEST(PositionalEncodingRotation, IsARotationAndComposes) {
  // R(k)^T R(k) = I (orthogonal), det = 1 (each block cos^2 + sin^2 = 1, no reflection),
  // R(-k) = R(k)^T, R(a) R(b) = R(a + b). Each entry involves two products of numbers <= 1
  // plus the angle rounding of arguments below 1000 (half an ulp: 5.7e-14): 1e-12.
  for (const Index k : {1, 7, 250, 999}) {
    const MatrixD R = attn::relative_rotation(k, 32);
    EXPECT_LT((R.transpose() * R - MatrixD::Identity(32, 32)).cwiseAbs().maxCoeff(), 1e-15);
    EXPECT_NEAR(R.determinant(), 1.0, 1e-13);
    EXPECT_LT((attn::relative_rotation(-k, 32) - R.transpose()).cwiseAbs().maxCoeff(), 1e-15);
    const MatrixD R3 = attn::relative_rotation(3, 32);
    EXPECT_LT((R * R3 - attn::relative_rotation(k + 3, 32)).cwiseAbs().maxCoeff(), 1e-12);
  }
}

TEST(PositionalEncodingRotation, DotProductDependsOnTheOffsetOnly) {
  // PE(pos) . PE(pos + k) = sum_i [sin a sin b + cos a cos b] = sum_i cos(omega_i k).
  // 64 pairs, each off by the angle roundings (< 1.1e-13 per angle below 2048): 64 * 3.4e-13
  // = 2.2e-11 at worst; 1e-10.
  const Index d = 128;
  const MatrixD pe = attn::sinusoidal_encoding_d(2000, d);
  const attn::VectorD omega = attn::sinusoidal_frequencies(d);
  for (const Index k : {0, 1, 2, 5, 50, 999}) {
    const double expected = (omega * static_cast<double>(k)).array().cos().sum();
    for (Index pos = 0; pos < 1000; pos += 7) {
      EXPECT_NEAR(pe.row(pos).dot(pe.row(pos + k)), expected, 1e-10) << pos << " " << k;
    }
  }
  EXPECT_EQ(pe.row(0).dot(pe.row(0)), 64.0);  // |PE(0)|^2 = d/2 exactly: 64 ones and 64 zeros
}

// ---- Errors -------------------------------------------------------------------------------------

TEST(PositionalEncodingErrors, BadSizesThrowNamingTheValue) {
  const auto message_of = [](auto&& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_EQ(message_of([] { attn::relative_rotation(1, 7); }),
            "relative_rotation: d_model must be even and >= 2 (sin/cos pairs), got 7");
  EXPECT_THROW(attn::relative_rotation(1, 0), std::invalid_argument);
  EXPECT_THROW(attn::sinusoidal_encoding(-1, 8), std::invalid_argument);
  EXPECT_THROW(attn::sinusoidal_encoding_d(4, 0), std::invalid_argument);
  EXPECT_THROW(attn::sinusoidal_encoding_at({1}, 0), std::invalid_argument);
  EXPECT_THROW(attn::sinusoidal_frequencies(0), std::invalid_argument);
  EXPECT_EQ(attn::sinusoidal_encoding(0, 8).rows(), 0);  // an empty table is fine
}

TEST(PositionalEncoding, TablesTheMachineCannotHoldAreRefusedBeforeAllocating) {
  const Index n = Index{1} << 20;
  std::string m;
  try {
    attn::sinusoidal_encoding(n, n);
  } catch (const std::invalid_argument& e) {
    m = e.what();
  }
  EXPECT_EQ(m.rfind("sinusoidal_encoding: positions 1048576 and d_model 1048576 needs 8.0 TiB for "
                    "the table",
                    0),
            0u)
      << m;
  m.clear();
  try {
    attn::relative_rotation(1, n * n);
  } catch (const std::invalid_argument& e) {
    m = e.what();
  }
  EXPECT_EQ(m.rfind("relative_rotation: d_model 1099511627776 needs ", 0), 0u) << m;
}

}  // namespace test_positional_encoding
