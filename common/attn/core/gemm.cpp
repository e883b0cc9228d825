// gemm.cpp: the packed, register-blocked float product (gemm.hpp says why and what it computes).
#include "attn/core/gemm.hpp"

#include "attn/core/detail/tile_kernel.hpp"
#include "attn/core/memory.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

namespace attn {

// Named, inside the anonymous namespace: with ATTN_UNITY this file shares one unit with the
// other files of core/, whose helpers have names of their own.
namespace {
namespace packed {

// An operand as the product reads it: entry (r, k) at data[r * row + k * col], whatever its
// storage and whether it is transposed.
template <Real T>
struct Strided {
  const T* data;
  Index rows, cols, row, col;
  T operator()(Index r, Index k) const { return data[r * row + k * col]; }
};

template <Real T>
Strided<T> operand(const ViewOf<T>& m, Op op) {
  if (op == Op::plain) return {m.data(), m.rows(), m.cols(), m.outerStride(), 1};
  return {m.data(), m.cols(), m.rows(), 1, m.outerStride()};
}

using Kernel = detail::TileKernel<float>;
// Rows of C a block keeps in registers: with 2 packets per row, 2 kRows accumulators, plus the
// two packets of B and a broadcast. 12 rows fill 27 of 32 registers (AVX-512, NEON), 6 rows
// 15 of 16 (AVX2, SSE).
constexpr Index kRows = EIGEN_ARCH_DEFAULT_NUMBER_OF_REGISTERS >= 32 ? 12 : 6;
using Packet = Kernel::Packet;
constexpr Index kWidth = Kernel::kWidth;  // floats in a packet
constexpr Index kCols = Kernel::kCols;    // 2 packets
// kWidth packets, the rows of a square that ptranspose turns. GCC warns that the template
// argument drops the vector type's alignment attribute (Eigen's own uses of it sit in a system
// header, where the warning is off); the block is only a holder of kWidth packets.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
using Square = Eigen::internal::PacketBlock<Packet, kWidth>;
#pragma GCC diagnostic pop
// The depth of one packed block: a panel of B (kDepth x kCols, 32 KiB with AVX-512) and the
// kRows rows of A a block reads (12 KiB) together fit a 48 KiB L1.
constexpr Index kDepth = 256;
// Up to this many rows of A against a weight read as W^T, W is turned on the way rather than
// packed (few_rows_times_transposed).
constexpr Index kFewRows = 2;
// Rows of A a band holds: kPanelRows x kDepth floats (240 KiB) stay in L2 while B's panels pass.
constexpr Index kPanelRows = 20 * kRows;

// B's rows [k0, k0 + depth) packed panel by panel: panel p holds columns [p kCols, (p + 1) kCols)
// as depth rows of kCols, the columns past N zero. A plain row-major B copies runs of a row; a
// transposed one (a weight W read as W^T) is read along W's rows, which are B's columns. A is not
// packed: a block broadcasts its entries where they are, and copying A (a transpose, for a
// plain x) cost more than it saved on these sizes.
void pack_b(const Strided<float>& b, Index k0, Index depth, float* out) {
  const Index N = b.cols;
  for (Index j0 = 0; j0 < N; j0 += kCols) {
    const Index width = std::min(kCols, N - j0);
    if (b.col == 1 && width == kCols) {
      // A loop of a fixed kCols (two packets' copies), where copy_n would call memmove per row.
      for (Index k = 0; k < depth; ++k) {
        const float* from = b.data + (k0 + k) * b.row + j0;
        for (Index j = 0; j < kCols; ++j) out[k * kCols + j] = from[j];
      }
    } else if (b.col == 1) {
      for (Index k = 0; k < depth; ++k) {
        const float* from = b.data + (k0 + k) * b.row + j0;
        std::copy_n(from, width, out + k * kCols);
        std::fill(out + k * kCols + width, out + (k + 1) * kCols, 0.0f);
      }
    } else {
      // B^T's rows are B's columns: squares of kWidth x kWidth turned in registers (Eigen's
      // ptranspose), the depth past the last whole square entry by entry.
      Index k_square = 0;
      if (b.row == 1 && width == kCols) {
        namespace ep = Eigen::internal;
        for (; k_square + kWidth <= depth; k_square += kWidth) {
          for (Index j = 0; j < kCols; j += kWidth) {
            Square square;
            for (Index r = 0; r < kWidth; ++r) {
              square.packet[r] = ep::ploadu<Packet>(b.data + (j0 + j + r) * b.col + k0 + k_square);
            }
            ep::ptranspose(square);
            for (Index r = 0; r < kWidth; ++r) {
              ep::pstoreu(out + (k_square + r) * kCols + j, square.packet[r]);
            }
          }
        }
      }
      for (Index j = 0; j < width; ++j) {
        const float* from = b.data + (j0 + j) * b.col + k0 * b.row;
        for (Index k = k_square; k < depth; ++k) out[k * kCols + j] = from[k * b.row];
      }
      for (Index k = 0; k < depth; ++k) {
        std::fill(out + k * kCols + width, out + (k + 1) * kCols, 0.0f);
      }
    }
    out += depth * kCols;
  }
}

using detail::Into;

// One block of at most kRows x kCols of C: A read in place (entry (r, k) at a + r a_row +
// k a_col), B from its packed panel. A block narrower than kCols (the last columns of C) runs on
// a scratch block and copies back only C's columns.
void block(const Strided<float>& a, Index r0, Index k0, const float* b, Index depth, float* c,
           Index c_row, Index rows, Index cols, Into mode) {
  Kernel::Block o{a.data + r0 * a.row + k0 * a.col, a.row, a.col, b, kCols, depth, c, c_row, 1.0f};
  const auto run = [&] {
    switch (mode) {
      case Into::store:
        return Kernel::block_rows<kRows, Into::store>(rows, o);
      case Into::chain:
        return Kernel::block_rows<kRows, Into::chain>(rows, o);
      case Into::add:
        return Kernel::block_rows<kRows, Into::add>(rows, o);
    }
  };
  if (cols == kCols) return run();
  alignas(64) float tile[kRows * kCols] = {};
  if (mode != Into::store) {
    for (Index r = 0; r < rows; ++r) std::copy_n(c + r * c_row, cols, tile + r * kCols);
  }
  o.c = tile;
  o.c_row = kCols;
  run();
  for (Index r = 0; r < rows; ++r) std::copy_n(tile + r * kCols, cols, c + r * c_row);
}

// One block of depth of C = A B (k in [k0, k0 + depth)), B's panels packed at `packed`, panel p
// at packed + p panel_stride: every block of rows of C against every panel, a band of A's rows
// at a time (a panel of B stays in L1 while the rows of A's band pass it).
void multiply_depth_block(const Strided<float>& a, Index k0, Index depth, const float* packed,
                          Index panel_stride, Index N, float* c, Index c_row, Into mode) {
  const Index M = a.rows, panels = (N + kCols - 1) / kCols;
  for (Index i0 = 0; i0 < M; i0 += kPanelRows) {
    const Index rows = std::min(kPanelRows, M - i0);
    for (Index p = 0; p < panels; ++p) {
      const float* b_panel = packed + p * panel_stride;
      const Index cols = std::min(kCols, N - p * kCols);
      for (Index r0 = i0; r0 < i0 + rows; r0 += kRows) {
        block(a, r0, k0, b_panel, depth, c + r0 * c_row + p * kCols, c_row,
              std::min(kRows, i0 + rows - r0), cols, mode);
      }
    }
  }
}

// C = A B, or C += A B with `add` when K fits one block of depth (each entry's sum then ends in
// the kernel's registers, before it is added to C).
void packed_product(const Strided<float>& a, const Strided<float>& b, float* c, Index c_row,
                    bool add) {
  const Index N = b.cols, K = a.cols;
  thread_local std::vector<float, Eigen::aligned_allocator<float>> packed;
  const Index panels = (N + kCols - 1) / kCols;
  packed.resize(static_cast<std::size_t>(panels * kCols * std::min(K, kDepth)));
  for (Index k0 = 0; k0 < K; k0 += kDepth) {
    const Index depth = std::min(kDepth, K - k0);
    // The first block of depth starts each chain from 0, the next ones continue it from C.
    const Into mode = add ? Into::add : k0 == 0 ? Into::store : Into::chain;
    pack_b(b, k0, depth, packed.data());
    multiply_depth_block(a, k0, depth, packed.data(), depth * kCols, N, c, c_row, mode);
  }
}

// x y + z rounded as the packets' multiply-add rounds it: fused where the build has FMA, as two
// roundings where it does not (a scalar std::fma would be fused on every build, and slow
// without the instruction).
float madd(float x, float y, float z) {
  namespace ep = Eigen::internal;
  return ep::pfirst(ep::pmadd(ep::pset1<Packet>(x), ep::pset1<Packet>(y), ep::pset1<Packet>(z)));
}

// C = A B or C += A B for a few rows of A against B = W^T (a decoding step's [1 x E] times a
// weight): packing W^T would write as much as the product reads, so squares of kWidth x kWidth of
// W are turned in registers on the way instead, and each of A's rows runs its chains across
// kWidth columns at once. The same chains as the packed product's, bit for bit (gemm.hpp): each
// entry's multiply-adds in order over k, from 0.
void few_rows_times_transposed(const Strided<float>& a, const Strided<float>& b, float* c,
                               Index c_row, bool add) {
  namespace ep = Eigen::internal;
  const Index M = a.rows, N = b.cols, K = a.cols;
  const Index whole_k = K / kWidth * kWidth, whole_n = N / kWidth * kWidth;
  for (Index i = 0; i < M; ++i) {
    float* c_i = c + i * c_row;
    for (Index j0 = 0; j0 < whole_n; j0 += kWidth) {
      Packet acc = ep::pset1<Packet>(0.0f);
      for (Index k0 = 0; k0 < whole_k; k0 += kWidth) {
        Square square;  // rows j0.. of W at columns k0..: after the turn, packet r is column k0 + r
        for (Index r = 0; r < kWidth; ++r) {
          square.packet[r] = ep::ploadu<Packet>(b.data + (j0 + r) * b.col + k0);
        }
        ep::ptranspose(square);
        for (Index r = 0; r < kWidth; ++r) {
          acc = ep::pmadd(ep::pset1<Packet>(a(i, k0 + r)), square.packet[r], acc);
        }
      }
      alignas(64) float lanes[kWidth];
      ep::pstore(lanes, acc);
      for (Index j = 0; j < kWidth; ++j) {
        float sum = lanes[j];
        for (Index k = whole_k; k < K; ++k) sum = madd(a(i, k), b(k, j0 + j), sum);
        c_i[j0 + j] = add ? c_i[j0 + j] + sum : sum;
      }
    }
    for (Index j = whole_n; j < N; ++j) {
      float sum = 0.0f;
      for (Index k = 0; k < K; ++k) sum = madd(a(i, k), b(k, j), sum);
      c_i[j] = add ? c_i[j] + sum : sum;
    }
  }
}

// C += A B for any depth: deeper than one block, the product's chains need memory of their own
// until they end, so the product is made whole in the thread's scratch and then added.
void product_added(const Strided<float>& a, const Strided<float>& b, float* c, Index c_row) {
  const Index M = a.rows, N = b.cols;
  if (a.cols <= kDepth) return packed_product(a, b, c, c_row, true);
  thread_local std::vector<float, Eigen::aligned_allocator<float>> whole;
  whole.resize(static_cast<std::size_t>(M * N));
  packed_product(a, b, whole.data(), N, false);
  for (Index i = 0; i < M; ++i) {
    float* __restrict row = c + i * c_row;
    const float* __restrict add = whole.data() + i * N;
    for (Index j = 0; j < N; ++j) row[j] += add[j];
  }
}

// Eigen's product, for double.
template <typename C, typename Product>
void assign(C& c, const Product& product, bool add) {
  if (add) {
    c.noalias() += product;
  } else {
    c.noalias() = product;
  }
}

const char* name(Op op) { return op == Op::plain ? "" : "^T"; }

}  // namespace packed
}  // namespace

template <Real T>
void gemm(const InView<T>& a, Op op_a, const InView<T>& b, Op op_b, Eigen::Ref<MatrixOf<T>> c,
          Accumulate accumulate) {
  using namespace packed;
  const Strided<T> A = operand<T>(a, op_a), B = operand<T>(b, op_b);
  const Index M = A.rows, K = A.cols, K_b = B.rows, N = B.cols;
  require(K == K_b && c.rows() == M && c.cols() == N, "gemm", [&] {
    return "a" + std::string(name(op_a)) + " is " + shape_str(M, K) + ", b" + name(op_b) + " is " +
           shape_str(K_b, N) + " and c is " + shape_str(c) +
           ": [M x K] times [K x N] needs c [M x N]";
  });
  require_apart("gemm", {{"c", memory_of(c)}}, {{"a", memory_of(a)}, {"b", memory_of(b)}});
  const bool add = accumulate == Accumulate::yes;
  if (K == 0) {
    if (!add) c.setZero();
    return;
  }
  if (c.size() == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (A.rows <= kFewRows && B.row == 1) {
      few_rows_times_transposed(A, B, c.data(), c.outerStride(), add);
    } else if (add) {
      product_added(A, B, c.data(), c.outerStride());
    } else {
      packed_product(A, B, c.data(), c.outerStride(), false);
    }
  } else if (op_a == Op::plain && op_b == Op::plain) {
    assign(c, a * b, add);
  } else if (op_a == Op::plain) {
    assign(c, a * b.transpose(), add);
  } else if (op_b == Op::plain) {
    assign(c, a.transpose() * b, add);
  } else {
    assign(c, a.transpose() * b.transpose(), add);
  }
}

PackedOperand::PackedOperand(const InView<float>& b, Op op) {
  using namespace packed;
  const Strided<float> B = operand<float>(b, op);
  rows_ = B.rows;
  cols_ = B.cols;
  const Index panels = (cols_ + kCols - 1) / kCols;
  require_fits_in_memory("PackedOperand", ElementCount(std::max<Index>(rows_, 1), panels * kCols),
                         sizeof(float), "for the packed operand",
                         [&] { return "op(b) " + shape_str(rows_, cols_); });
  data_.resize(static_cast<std::size_t>(rows_ * panels * kCols));
  // Block of depth k0 / kDepth holds rows [k0, k0 + depth) of every panel, as gemm packs them.
  for (Index k0 = 0; k0 < rows_; k0 += kDepth) {
    pack_b(B, k0, std::min(kDepth, rows_ - k0), data_.data() + k0 * panels * kCols);
  }
}

void gemm(const InView<float>& a, Op op_a, const PackedOperand& b, Eigen::Ref<Matrix> c) {
  using namespace packed;
  const Strided<float> A = operand<float>(a, op_a);
  const Index M = A.rows, K = A.cols, N = c.cols();
  require(c.rows() == M && K <= b.rows() && N <= b.cols(), "gemm", [&] {
    return "a" + std::string(name(op_a)) + " is " + shape_str(M, K) + ", the packed operand " +
           shape_str(b.rows(), b.cols()) + " and c is " + shape_str(c) +
           ": [M x K] times the packed [K' x N'] needs K <= K', c [M x N] with N <= N'";
  });
  require_apart("gemm", {{"c", memory_of(c)}}, {{"a", memory_of(a)}});
  if (K == 0) {
    c.setZero();
    return;
  }
  if (c.size() == 0) return;
  const Index panels = (b.cols() + kCols - 1) / kCols;
  for (Index k0 = 0; k0 < K; k0 += kDepth) {
    // The packed block of depth k0 holds min(kDepth, K' - k0) rows per panel; the product reads
    // the first min(kDepth, K - k0) of them.
    const Index stored = std::min(kDepth, b.rows() - k0), depth = std::min(kDepth, K - k0);
    multiply_depth_block(A, k0, depth, b.data_.data() + k0 * panels * kCols, stored * kCols, N,
                         c.data(), c.outerStride(), k0 == 0 ? Into::store : Into::chain);
  }
}

template void gemm<float>(const InView<float>&, Op, const InView<float>&, Op,
                          Eigen::Ref<MatrixOf<float>>, Accumulate);
template void gemm<double>(const InView<double>&, Op, const InView<double>&, Op,
                           Eigen::Ref<MatrixOf<double>>, Accumulate);

}  // namespace attn
