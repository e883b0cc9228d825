// The product every layer runs on (core/gemm.hpp):
//
//   - what it computes: each entry is one fused multiply-add chain over k in order, from 0. The
//     expected values come from that definition, written as a scalar loop of std::fma (a hand
//     reference, not the kernel), and must match bit for bit on a build with fused
//     multiply-adds, for the four transposes, shapes that cut every block short (M, N, K not
//     multiples of the kernel's 12 or 6 rows, 32, 16 or 8 columns, 256 deep), a row or two
//     against a weight read as W^T (the path that turns W in registers), and views inside
//     larger matrices;
//   - the consequences the page states: row i of a product over many rows is the product of row
//     i alone; a depth past one block (K > 256) continues each chain rather than adding block
//     sums; accumulating adds the whole product to C, as PyTorch accumulates a gradient;
//   - the value: against a double-precision product, within float's rounding of a K-term sum;
//   - double goes through Eigen, with the same checks of its arguments;
//   - bad shapes, overlapping memory, and K = 0.
#include "attn/core/gemm.hpp"

#include "attn/core/random.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace test_gemm {

using attn_test::identical;
using attn_test::message_of;

using attn::Accumulate;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::Op;

// Whether the build's packets multiply and add in one rounding (Eigen's pmadd): AVX2 and
// AVX-512 builds with FMA, and aarch64. Without it (SSE only) each product is rounded first.
#if defined(EIGEN_VECTORIZE_FMA) || defined(__ARM_FEATURE_FMA)
constexpr bool kFused = true;
#else
constexpr bool kFused = false;
#endif

float madd(float a, float b, float c) { return kFused ? std::fma(a, b, c) : a * b + c; }

Matrix apply(const Matrix& m, Op op) { return op == Op::plain ? m : Matrix(m.transpose()); }

// The definition: c(i, j) = madd(a(i, K-1), b(K-1, j), ... madd(a(i, 0), b(0, j), c0)).
Matrix chain(const Matrix& a, const Matrix& b, const Matrix& c0) {
  Matrix c = c0;
  for (Index i = 0; i < a.rows(); ++i) {
    for (Index j = 0; j < b.cols(); ++j) {
      for (Index k = 0; k < a.cols(); ++k) c(i, j) = madd(a(i, k), b(k, j), c(i, j));
    }
  }
  return c;
}

struct Shape {
  Index M, N, K;
};

// Shapes that cut the kernel's blocks short in every direction, one of them deeper than a
// block (K = 300 > 256), and the one-row and one-column products.
const Shape kShapes[] = {{1, 1, 1},    {1, 75, 128}, {13, 33, 7},    {29, 64, 300},
                         {48, 17, 65}, {15, 1, 40},  {100, 100, 100}};

TEST(Gemm, EveryEntryIsOneFusedChainInOrder) {
  attn::Rng rng(31);
  for (const Shape& s : kShapes) {
    for (const Op op_a : {Op::plain, Op::transposed}) {
      for (const Op op_b : {Op::plain, Op::transposed}) {
        const Matrix a = attn::random_normal(rng, s.M, s.K);  // op(a) [M x K]
        const Matrix b = attn::random_normal(rng, s.K, s.N);  // op(b) [K x N]
        const Matrix stored_a = apply(a, op_a), stored_b = apply(b, op_b);
        Matrix c = Matrix::Constant(s.M, s.N, 7.0f);  // overwritten, whatever it held
        attn::gemm<float>(stored_a, op_a, stored_b, op_b, c);
        const Matrix want = chain(a, b, Matrix::Zero(s.M, s.N));
        SCOPED_TRACE(testing::Message()
                     << s.M << " x " << s.N << " x " << s.K << ", ops " << int(op_a) << int(op_b));
        if (kFused) {
          EXPECT_TRUE(identical(c, want));
        } else {
          // Never reached on the course's builds; an SSE-only build rounds each product first,
          // as `madd` does without fma, but its compiler may still contract: 1e-5 relative.
          EXPECT_LE((c - want).cwiseAbs().maxCoeff(), 1e-5f * want.cwiseAbs().maxCoeff() + 1e-6f);
        }
      }
    }
  }
}

TEST(Gemm, AccumulatingAddsTheWholeProductToC) {
  // C + p, p the chain from 0 (PyTorch's grad += new_grad), for depths within one block and
  // past it (K = 300); accumulating the same product twice then doubles it exactly.
  attn::Rng rng(32);
  for (const Shape& s : kShapes) {
    const Matrix a = attn::random_normal(rng, s.M, s.K), b = attn::random_normal(rng, s.K, s.N);
    const Matrix c0 = attn::random_normal(rng, s.M, s.N);
    Matrix c = c0;
    attn::gemm<float>(Matrix(a.transpose()), Op::transposed, b, Op::plain, c, Accumulate::yes);
    const Matrix p = chain(a, b, Matrix::Zero(s.M, s.N));
    SCOPED_TRACE(testing::Message() << s.M << " x " << s.N << " x " << s.K);
    if (kFused) {
      EXPECT_TRUE(identical(c, (c0 + p).eval()));
    }
    Matrix twice = Matrix::Zero(s.M, s.N);
    attn::gemm<float>(a, Op::plain, b, Op::plain, twice, Accumulate::yes);
    attn::gemm<float>(a, Op::plain, b, Op::plain, twice, Accumulate::yes);
    Matrix once(s.M, s.N);
    attn::gemm<float>(a, Op::plain, b, Op::plain, once);
    EXPECT_TRUE(identical(twice, (2.0f * once).eval()));
  }
}

TEST(Gemm, ARowOfAProductIsThatRowsProductAlone) {
  // The decoding step's [1 x E] against the prefill's [n x E]: the same bits (gemm.hpp).
  attn::Rng rng(33);
  const Matrix x = attn::random_normal(rng, 37, 130), w = attn::random_normal(rng, 70, 130);
  Matrix all(37, 70);  // [n x out] = x W^T
  attn::gemm<float>(x, Op::plain, w, Op::transposed, all);
  for (Index i = 0; i < x.rows(); ++i) {
    Matrix one(1, 70);
    attn::gemm<float>(x.row(i), Op::plain, w, Op::transposed, one);
    EXPECT_TRUE(identical(one, all.row(i))) << "row " << i;
  }
}

TEST(Gemm, AgreesWithADoubleProductWithinFloatRounding) {
  // Each entry sums K products: its rounding is at most about K u sum_k |a_ik b_kj| (u = 2^-24;
  // Higham's bound for a recursive sum), so the error is measured against that sum of magnitudes.
  attn::Rng rng(34);
  const Index M = 61, N = 97, K = 700;  // three blocks of depth
  const Matrix a = attn::random_normal(rng, M, K), b = attn::random_normal(rng, K, N);
  Matrix c(M, N);
  attn::gemm<float>(a, Op::plain, b, Op::plain, c);
  const MatrixD exact = a.cast<double>() * b.cast<double>();
  const MatrixD magnitude = a.cast<double>().cwiseAbs() * b.cast<double>().cwiseAbs();
  const double u = std::ldexp(1.0, -24);
  for (Index i = 0; i < M; ++i) {
    for (Index j = 0; j < N; ++j) {
      EXPECT_LE(std::abs(c(i, j) - exact(i, j)), K * u * magnitude(i, j)) << i << ", " << j;
    }
  }
}

TEST(Gemm, ReadsAndWritesViewsInsideLargerMatrices) {
  attn::Rng rng(35);
  const Matrix big_a = attn::random_normal(rng, 40, 50), big_b = attn::random_normal(rng, 60, 70);
  Matrix big_c = Matrix::Constant(30, 90, -3.0f);
  const auto a = big_a.block(3, 5, 20, 31);  // [20 x 31]
  const auto b = big_b.block(2, 4, 31, 45);  // [31 x 45]
  attn::gemm<float>(a, Op::plain, b, Op::plain, big_c.block(4, 6, 20, 45));
  Matrix want = big_c;
  want.block(4, 6, 20, 45) = chain(a, b, Matrix::Zero(20, 45));
  if (kFused) {
    EXPECT_TRUE(identical(big_c, want));  // and nothing outside the block moved
  }
  EXPECT_EQ(big_c(3, 6), -3.0f);
  EXPECT_EQ(big_c(4, 51), -3.0f);
}

TEST(Gemm, DoubleIsEigensProduct) {
  attn::Rng rng(36);
  const MatrixD a = attn::random_normal(rng, 9, 11).cast<double>();
  const MatrixD b = attn::random_normal(rng, 8, 11).cast<double>();
  MatrixD c = MatrixD::Ones(9, 8);
  attn::gemm<double>(a, Op::plain, b, Op::transposed, c, Accumulate::yes);
  const MatrixD want = MatrixD::Ones(9, 8) + a * b.transpose();
  EXPECT_LE((c - want).cwiseAbs().maxCoeff(), 1e-13);  // a sum of 11 products near 1 in double
}

TEST(Gemm, NoDepthGivesZerosOrLeavesC) {
  const Matrix a(3, 0), b(0, 4);
  Matrix c = Matrix::Constant(3, 4, 2.0f);
  attn::gemm<float>(a, Op::plain, b, Op::plain, c, Accumulate::yes);
  EXPECT_TRUE(identical(c, Matrix::Constant(3, 4, 2.0f)));
  attn::gemm<float>(a, Op::plain, b, Op::plain, c);
  EXPECT_TRUE(identical(c, Matrix::Zero(3, 4)));
}

TEST(Gemm, RefusesShapesThatDoNotFitNamingThem) {
  const Matrix a = Matrix::Ones(3, 4), b = Matrix::Ones(5, 6);
  Matrix c(3, 6);
  const std::string what = message_of([&] { attn::gemm<float>(a, Op::plain, b, Op::plain, c); });
  EXPECT_NE(what.find("gemm: a is [3 x 4], b is [5 x 6] and c is [3 x 6]"), std::string::npos)
      << what;
  const std::string wrong_c =
      message_of([&] { attn::gemm<float>(a, Op::plain, b, Op::transposed, c); });
  EXPECT_NE(wrong_c.find("b^T is [6 x 5]"), std::string::npos) << wrong_c;
  Matrix c2(4, 5);
  EXPECT_NO_THROW(attn::gemm<float>(a, Op::transposed, Matrix::Ones(3, 5), Op::plain, c2));
}

TEST(Gemm, RefusesAnOutputThatOverlapsAnInput) {
  Matrix m = Matrix::Ones(4, 4);
  const std::string what =
      message_of([&] { attn::gemm<float>(m, Op::plain, Matrix::Ones(4, 4), Op::plain, m); });
  EXPECT_NE(what.find("gemm"), std::string::npos) << what;
  EXPECT_NE(what.find("c"), std::string::npos) << what;
  EXPECT_TRUE(identical(m, Matrix::Ones(4, 4)));  // refused before writing
}

// A packed operand is packed once and multiplied many times, on its leading block: the chain
// definition again, for a depth that ends inside a packed block of 256 and one past it, a width
// that ends inside a panel, both transposes of b, and the whole operand.
TEST(Gemm, APackedOperandsLeadingBlockIsTheChainDefinition) {
  attn::Rng rng(37);
  constexpr Index K = 300, N = 70;  // op(b) [K x N]: two packed blocks of depth, three panels
  const Matrix b = attn::random_normal(rng, K, N);
  for (const Op op_b : {Op::plain, Op::transposed}) {
    const attn::PackedOperand packed(apply(b, op_b), op_b);
    EXPECT_EQ(packed.rows(), K);
    EXPECT_EQ(packed.cols(), N);
    for (const Shape s :
         {Shape{29, 45, 270}, Shape{13, 70, 300}, Shape{1, 33, 200}, Shape{24, 1, 1}}) {
      const Matrix a = attn::random_normal(rng, s.M, s.K);  // [M x K]
      Matrix c = Matrix::Constant(s.M, s.N, 7.0f);          // overwritten
      attn::gemm(a, Op::plain, packed, c);
      const Matrix want = chain(a, b.topLeftCorner(s.K, s.N), Matrix::Zero(s.M, s.N));
      SCOPED_TRACE(testing::Message()
                   << s.M << " x " << s.N << " x " << s.K << ", op " << int(op_b));
      if (kFused) {
        EXPECT_TRUE(identical(c, want));
      } else {  // as in EveryEntryIsOneFusedChainInOrder: 1e-5 relative
        EXPECT_LE((c - want).cwiseAbs().maxCoeff(), 1e-5f * want.cwiseAbs().maxCoeff() + 1e-6f);
      }
    }
  }
  const attn::PackedOperand packed(b, Op::plain);
  Matrix c(2, 10);
  const std::string deep =
      message_of([&] { attn::gemm(Matrix::Ones(2, 301), Op::plain, packed, c); });
  EXPECT_NE(deep.find("gemm: a is [2 x 301], the packed operand [300 x 70] and c is [2 x 10]"),
            std::string::npos)
      << deep;
  Matrix wide(2, 71);
  EXPECT_NE(message_of([&] {
              attn::gemm(Matrix::Ones(2, 5), Op::plain, packed, wide);
            }).find("the packed operand [300 x 70]"),
            std::string::npos);
}

}  // namespace test_gemm
