/// @file
/// The matrix product every layer runs on: C = op(A) op(B), or C += op(A) op(B), where op
/// leaves an operand as it is or transposes it. A linear layer's three products are its calls:
///
///     forward    y  = x W^T          gemm(x, Op::plain, W, Op::transposed, y)
///     backward   dW += dy^T x        gemm(dy, Op::transposed, x, Op::plain, dW, Accumulate::yes)
///                dx = dy W           gemm(dy, Op::plain, W, Op::plain, dx)
///
/// **Why not Eigen's product.** Eigen's float GEMM keeps a block of 3 packets x 4 columns of C
/// in registers, whatever the register file: 12 of AVX-512's 32. Here the block is kRows rows x
/// 2 packets (12 x 32 floats with AVX-512's 32 registers, 12 x 8 with NEON's, 6 x 16 with AVX2's
/// 16), the shape of the micro-kernels of BLIS and OpenBLAS: each step loads 2 packets and
/// broadcasts kRows numbers for 2 kRows multiply-adds, so the FMA units, not the loads, set the
/// pace. B is packed first in panels of 2 packets' columns, zero-padded (a weight read as W^T
/// turned square by square in registers), so that a panel stays in L1 while the rows of A pass it;
/// A is read where it is. On the products of chapter 12's model (benchmarks/bench_gemm: rows 192
/// and 768, weights 64 to 512 wide), one core of this course's AVX-512 Xeon, 2026-11-28, this runs
/// at 74 to 89% of the same run's FMA peak, Eigen's at 58 to 83%; the output layer's 75 columns
/// fill 2.3 panels of 32, and run at 62 to 67%.
///
/// **The same bits everywhere.** Every entry of the product is one chain of fused multiply-adds
/// over k in order,
///
///     p = fma(a_{K-1} b_{K-1}, ... fma(a_1 b_1, fma(a_0 b_0, 0)))
///
/// and nothing else: no partial sums across packets, no tree. C = op(A) op(B) stores p;
/// C += op(A) op(B) stores C + p, the product summed first and then added, as PyTorch adds a new
/// gradient to the one it holds (so two equal accumulations double C exactly). The vector width
/// only decides how many entries run side by side, the blocking only when a chain is stored and
/// picked up again (a float stored and loaded is the same float). So the result is the same
/// bits with AVX-512, AVX2 or NEON, for any block sizes, any thread, and row i of a product over
/// n rows is the product of row i alone, bit for bit (a decoding step's [1 x E] equals the
/// prefill's row). A build without fused multiply-adds (x86-64 without -march, SSE only) rounds
/// each product before adding it, and differs from the others by that rounding.
///
/// Scratch (the packed panels of B) is kept per thread between calls: no allocation once a thread
/// has seen its largest product. float runs the packed kernel; double (gradient checks, where
/// speed does not matter) runs Eigen's product.
#pragma once

#include "attn/core/matrix.hpp"

#include <Eigen/Core>

#include <vector>

namespace attn {

/// How an operand enters a product.
enum class Op : char {
  plain,       ///< as it is
  transposed,  ///< its transpose
};

/// Whether a product overwrites C or adds to it.
enum class Accumulate : char { no, yes };

/// C = op(a) op(b) ([M x K] times [K x N] into [M x N]), or C += op(a) op(b). C must already
/// have its shape and share no memory with a or b. Throws std::invalid_argument, before
/// writing, naming the shapes that do not fit or the overlap. K = 0 gives zeros (or leaves C).
template <Real T>
void gemm(const InView<T>& a, Op op_a, const InView<T>& b, Op op_b, Eigen::Ref<MatrixOf<T>> c,
          Accumulate accumulate = Accumulate::no);

/// op(b) [K x N] packed once, as gemm packs its second operand on every call, for many
/// products against it: plain attention multiplies K^T and V by one block of query rows at a
/// time, and packing them per block would cost as much as the products.
class PackedOperand {
 public:
  /// Packs op(b). Throws std::invalid_argument when the machine cannot hold it.
  PackedOperand(const InView<float>& b, Op op);
  Index rows() const { return rows_; }  ///< K
  Index cols() const { return cols_; }  ///< N

 private:
  friend void gemm(const InView<float>& a, Op op_a, const PackedOperand& b, Eigen::Ref<Matrix> c);
  Index rows_ = 0, cols_ = 0;
  std::vector<float, Eigen::aligned_allocator<float>> data_;
};

/// C = op(a) B[0:K, 0:N], the leading K rows and N columns of a packed operand, where op(a) is
/// [M x K] and C [M x N]: the same bits as gemm on that block of op(b) (the same chains; a
/// causal row block of attention reads only the keys it may see). Throws std::invalid_argument
/// naming the shapes when K or N exceed the operand's, or when C shares memory with a.
void gemm(const InView<float>& a, Op op_a, const PackedOperand& b, Eigen::Ref<Matrix> c);

}  // namespace attn
