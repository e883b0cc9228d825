// bench_gemm: the library's product (core/gemm.hpp) against Eigen's on the products a training
// step of chapter 12's model makes, one core, as a share of that core's FMA peak measured in the
// same run (peak_ratio.hpp). Rows are a batch's stacked positions (192: a quarter of chapter
// 12's 12 windows of 64, one shard of the batch; 768: all of them), the sizes the model's:
//
//   Gemm/<kind>/<rows>/<out>/<in>     kind 0: y = x W^T (forward), 1: dx = dy W, 2: dW += dy^T x
//   EigenGemm/<kind>/<rows>/<out>/<in>  the same product written as an Eigen expression
//
//   taskset -c 1 build/release/benchmarks/bench_gemm
#include "attn/core/gemm.hpp"
#include "attn/core/random.hpp"
#include "peak_ratio.hpp"

#include <benchmark/benchmark.h>

namespace {

using attn::Accumulate;
using attn::Index;
using attn::Matrix;
using attn::Op;

// One product of a linear layer: x [rows x in], W [out x in], and their gradients.
struct LayerProduct {
  Matrix x, w, y, dy, dx, dw;
  LayerProduct(Index rows, Index out, Index in) {
    attn::Rng rng(5);
    x = attn::random_normal(rng, rows, in);    // [rows x in]
    w = attn::random_normal(rng, out, in);     // [out x in]
    dy = attn::random_normal(rng, rows, out);  // [rows x out]
    y.resize(rows, out);                       // [rows x out]
    dx.resize(rows, in);                       // [rows x in]
    dw = Matrix::Zero(out, in);                // [out x in]
  }
};

template <bool Library>
void BM_Product(benchmark::State& state) {
  const auto kind = state.range(0);
  const Index rows = state.range(1), out = state.range(2), in = state.range(3);
  LayerProduct p(rows, out, in);
  for (auto _ : state) {
    if constexpr (Library) {
      if (kind == 0) attn::gemm<float>(p.x, Op::plain, p.w, Op::transposed, p.y);
      if (kind == 1) attn::gemm<float>(p.dy, Op::plain, p.w, Op::plain, p.dx);
      if (kind == 2) attn::gemm<float>(p.dy, Op::transposed, p.x, Op::plain, p.dw, Accumulate::yes);
    } else {
      if (kind == 0) p.y.noalias() = p.x * p.w.transpose();
      if (kind == 1) p.dx.noalias() = p.dy * p.w;
      if (kind == 2) p.dw.noalias() += p.dy.transpose() * p.x;
    }
    benchmark::ClobberMemory();
  }
  bench::count_flops(state, 2.0 * static_cast<double>(rows * out * in));
}

// The model's products: the q and o projections (128 x 128), k and v (64 x 128), the
// feed-forward network's two (512 x 128, 128 x 512) and the head (75 x 128).
void model_products(benchmark::internal::Benchmark* b) {
  const Index sizes[][2] = {{128, 128}, {64, 128}, {512, 128}, {128, 512}, {75, 128}};
  for (const Index rows : {192, 768}) {
    for (const auto& [out, in] : sizes) {
      for (Index kind = 0; kind < 3; ++kind) b->Args({kind, rows, out, in});
    }
  }
}

BENCHMARK(BM_Product<true>)->Name("Gemm")->Apply(model_products);
BENCHMARK(BM_Product<false>)->Name("EigenGemm")->Apply(model_products);

}  // namespace

int main(int argc, char** argv) { return bench::run_against_peak(argc, argv, {"peak_ratio"}); }
