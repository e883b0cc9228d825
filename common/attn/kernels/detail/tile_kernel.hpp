// tile_kernel.hpp: the register-blocked product behind the tiled forward (tiled_attention.cpp;
// internal, not part of the library's interface).
//
//   C [rows x cols] = scale * (A B)      (store)       or      C += A B      (accumulate)
//   A [rows x depth], read as A(r, k) = a[r * a_row + k * a_col]: any two strides, so the same
//                     kernel reads K_j's rows and the columns of the transposed score tile
//   B [depth x cols], row k at b + k * b_row, cols a multiple of kCols
//
// C is computed kRows rows by kCols columns at a time. The kRows x kCols block lives in 12
// vector registers for the whole depth loop; each step of it loads one row of B's panel (two
// packets), broadcasts kRows entries of A and issues 12 fused multiply-adds. That is the shape
// of the GEMM micro-kernels of BLIS and OpenBLAS for AVX2 (6 x 16 floats): 12 FMAs per 8 loads,
// so the two FMA units, not the loads, set the pace. Eigen's packet functions give the vector
// width of the build: 8 floats with AVX2, 16 with AVX-512, 4 with SSE (the sanitize build).
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

template <Real T>
struct TileKernel {
  using Packet = typename Eigen::internal::packet_traits<T>::type;
  static constexpr Index kWidth = Eigen::internal::unpacket_traits<Packet>::size;
  static constexpr Index kRows = 6;           // rows of C per block
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

  // One block of `Rows` rows (Rows <= kRows: the last rows of C) by kCols columns.
  template <int Rows, bool Accumulate>
  static void block(const Block& o) {
    namespace ep = Eigen::internal;
    Packet acc[Rows][2];
    for (int x = 0; x < Rows; ++x) {
      T* c = o.c + x * o.c_row;
      acc[x][0] = Accumulate ? ep::ploadu<Packet>(c) : ep::pset1<Packet>(T(0));
      acc[x][1] = Accumulate ? ep::ploadu<Packet>(c + kWidth) : ep::pset1<Packet>(T(0));
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
      ep::pstoreu(c, Accumulate ? acc[x][0] : ep::pmul(acc[x][0], s));
      ep::pstoreu(c + kWidth, Accumulate ? acc[x][1] : ep::pmul(acc[x][1], s));
    }
  }

  // The whole product, block by block: a band of kRows rows of A stays in L1 while the band
  // sweeps B's column panels, panel p starting at b + p * b_panel. `cols` must be a multiple
  // of kCols.
  template <bool Accumulate>
  static void multiply(Index rows, Index cols, Index depth, const T* a, Index a_row, Index a_col,
                       const T* b, Index b_row, Index b_panel, T* c, Index c_row, T scale) {
    for (Index r = 0; r < rows; r += kRows) {
      for (Index p = 0; p * kCols < cols; ++p) {
        const Block o{
            a + r * a_row, a_row, a_col, b + p * b_panel, b_row, depth, c + r * c_row + p * kCols,
            c_row,         scale};
        switch (std::min(kRows, rows - r)) {
          case 6:
            block<6, Accumulate>(o);
            break;
          case 5:
            block<5, Accumulate>(o);
            break;
          case 4:
            block<4, Accumulate>(o);
            break;
          case 3:
            block<3, Accumulate>(o);
            break;
          case 2:
            block<2, Accumulate>(o);
            break;
          default:
            block<1, Accumulate>(o);
        }
      }
    }
  }
};

}  // namespace attn::detail
