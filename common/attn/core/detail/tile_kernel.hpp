// tile_kernel.hpp: the register-blocked product behind the tiled forward (tiled_attention.cpp)
// and the library's GEMM (gemm.cpp); internal, not part of the library's interface.
//
//   C [rows x cols] = scale * (A B)        Into::store
//   C = fma chain over k continued from C   Into::chain   (C + a_0 b_0 + a_1 b_1 + ..., in order)
//   C = C + (A B)                           Into::add     (the product summed from 0, then added)
//   A [rows x depth], read as A(r, k) = a[r * a_row + k * a_col]: any two strides, so the same
//                     kernel reads K_j's rows and the columns of the transposed score tile
//   B [depth x cols], row k at b + k * b_row, cols a multiple of kCols
//
// C is computed Rows rows by kCols columns at a time. The Rows x kCols block lives in 2 Rows
// vector registers for the whole depth loop; each step of it loads one row of B's panel (two
// packets), broadcasts Rows entries of A and issues 2 Rows fused multiply-adds. That is the
// shape of the GEMM micro-kernels of BLIS and OpenBLAS (6 x 16 floats for AVX2): with 6 rows,
// 12 FMAs per 8 loads, so the two FMA units, not the loads, set the pace. Eigen's packet
// functions give the vector width of the build: 8 floats with AVX2, 16 with AVX-512, 4 with SSE
// (the sanitize build) and NEON.
//
// Why not Eigen's GEMM on the tiles, as before: each call on a 128 x 128 tile packs both of its
// operands again and runs its own blocking for a product that already fits in cache; on this
// course's machine the tiles' two products reached 56% of one core's FMA peak that way.
// Each entry of C sums its depth terms in order k = 0, 1, 2, ..., whatever the thread.
#pragma once

#include "attn/core/matrix.hpp"

#include <Eigen/Core>

#include <algorithm>

namespace attn::detail {

/// What a block does with C.
enum class Into : char {
  store,  ///< C = scale * (A B)
  chain,  ///< C's value starts each entry's chain of fused multiply-adds
  add,    ///< C = C + (A B), the product summed from 0 first
};

template <Real T>
struct TileKernel {
  using Packet = typename Eigen::internal::packet_traits<T>::type;
  static constexpr Index kWidth = Eigen::internal::unpacket_traits<Packet>::size;
  static constexpr Index kRows = EIGEN_ARCH_DEFAULT_NUMBER_OF_REGISTERS >= 32 ? 12 : 6;
  static constexpr Index kCols = 2 * kWidth;  // columns of C per block: two packets

  // Columns padded up to whole blocks.
  static constexpr Index padded(Index cols) { return (cols + kCols - 1) / kCols * kCols; }

  // One block's operands: kRows (or fewer) rows of A from `a`, one panel of B from `b`, the
  // block of C at `c`.
  struct Block {
    const T* a;
    Index a_row, a_col;
    const T* b;
    Index b_row, depth;
    T* c;
    Index c_row;
    T scale;
  };

  // One block of `Rows` rows by kCols columns.
  template <int Rows, Into Mode>
  static void block(const Block& o) {
    namespace ep = Eigen::internal;
    Packet acc[Rows][2];
    for (int x = 0; x < Rows; ++x) {
      T* c = o.c + x * o.c_row;
      const bool chain = Mode == Into::chain;
      acc[x][0] = chain ? ep::ploadu<Packet>(c) : ep::pset1<Packet>(T(0));
      acc[x][1] = chain ? ep::ploadu<Packet>(c + kWidth) : ep::pset1<Packet>(T(0));
    }
    for (Index k = 0; k < o.depth; ++k) {
      const Packet b0 = ep::ploadu<Packet>(o.b + k * o.b_row);
      const Packet b1 = ep::ploadu<Packet>(o.b + k * o.b_row + kWidth);
      const T* a_k = o.a + k * o.a_col;
      for (int x = 0; x < Rows; ++x) {
        const Packet ax = ep::pset1<Packet>(a_k[x * o.a_row]);
        acc[x][0] = ep::pmadd(ax, b0, acc[x][0]);
        acc[x][1] = ep::pmadd(ax, b1, acc[x][1]);
      }
    }
    const Packet s = ep::pset1<Packet>(o.scale);
    for (int x = 0; x < Rows; ++x) {
      T* c = o.c + x * o.c_row;
      for (int half = 0; half < 2; ++half) {
        T* at = c + half * kWidth;
        if constexpr (Mode == Into::store) {
          ep::pstoreu(at, ep::pmul(acc[x][half], s));
        } else if constexpr (Mode == Into::add) {
          ep::pstoreu(at, ep::padd(ep::ploadu<Packet>(at), acc[x][half]));
        } else {
          ep::pstoreu(at, acc[x][half]);
        }
      }
    }
  }

  // A block of `rows` <= MaxRows rows: each count is its own instance, its accumulators in
  // registers.
  template <int MaxRows, Into Mode>
  static void block_rows(Index rows, const Block& o) {
    if constexpr (MaxRows > 1) {
      if (rows < MaxRows) return block_rows<MaxRows - 1, Mode>(rows, o);
    }
    block<MaxRows, Mode>(o);
  }

  // The whole product, block by block: a band of kRows rows of A stays in L1 while the band
  // sweeps B's column panels, panel p starting at b + p * b_panel. `cols` must be a multiple
  // of kCols.
  template <Into Mode>
  static void multiply(Index rows, Index cols, Index depth, const T* a, Index a_row, Index a_col,
                       const T* b, Index b_row, Index b_panel, T* c, Index c_row, T scale) {
    for (Index r = 0; r < rows; r += kRows) {
      for (Index p = 0; p * kCols < cols; ++p) {
        const Block o{
            a + r * a_row, a_row, a_col, b + p * b_panel, b_row, depth, c + r * c_row + p * kCols,
            c_row,         scale};
        block_rows<kRows, Mode>(std::min(kRows, rows - r), o);
      }
    }
  }
};

}  // namespace attn::detail
