// bench_attention: one attention layer's core (scores, softmax, weighted sum) three ways, for
// n tokens of width d = 64 (n_q = n_k = n, d_k = d_v = d):
//   ColumnLoops   chapter 02: one dot product, one softmax column, one scaled vector at a time
//   ColumnMatrix  chapter 03: A = K^T Q, A' = softmax_cols(A), Y = V A' with Eigen products
//   RowAttention  the library's attn::attention_into (rows, two GEMMs, in-place row softmax,
//                 buffers kept across calls)
//   RowAttentionFresh  the same through attn::attention, allocating the outputs every call
//   RowProductsOnly    just its two GEMMs, no softmax: how much of RowAttention they are
//   RowAttentionTiny   attention_into at n = 4, d = 16, where the arithmetic is a few hundred
//                      nanoseconds and any fixed cost per call shows: building the check
//                      messages before they were needed took 620 ns a call, 264 ns without
//                      (taskset -c 1, Intel Xeon 2 vCPU, release preset, 2026-11-23)
// FLOP/s counts the two products only, 2 * n * n * d multiply-adds each: 4 n^2 d per call.
//
//   build/release/benchmarks/bench_attention --benchmark_min_time=0.2
//   taskset -c 1 build/release/benchmarks/bench_attention --benchmark_filter=Tiny
#include "attn/core/random.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/column_attention.hpp"

#include <benchmark/benchmark.h>

namespace {

using attn::Index;
using attn::Matrix;

constexpr Index kD = 64;

struct Inputs {
  Matrix Q, K, V;  // row form [n x d]; the column form uses their transposes [d x n]
};

Inputs make_inputs(Index n, Index d = kD) {
  attn::Rng rng(42);
  return {attn::random_normal(rng, n, d), attn::random_normal(rng, n, d),
          attn::random_normal(rng, n, d)};  // each [n x d]
}

void set_counters(benchmark::State& state, Index n, Index d = kD) {
  const auto nf = static_cast<double>(n);
  const double flops = 4.0 * nf * nf * static_cast<double>(d);
  constexpr auto rate = benchmark::Counter::kIsIterationInvariantRate;
  state.counters["FLOP/s"] = benchmark::Counter(flops, rate);
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(n), rate);
}

void BM_ColumnLoops(benchmark::State& state) {
  const Index n = state.range(0);
  const Inputs in = make_inputs(n);
  const Matrix Q = in.Q.transpose(), K = in.K.transpose(), V = in.V.transpose();  // [d x n]
  for (auto _ : state) {
    attn::ColumnAttention r = attn::column_attend_loops(Q, K, V, {.scale = true});
    benchmark::DoNotOptimize(r.Y.data());
  }
  set_counters(state, n);
}

void BM_ColumnMatrix(benchmark::State& state) {
  const Index n = state.range(0);
  const Inputs in = make_inputs(n);
  const Matrix Q = in.Q.transpose(), K = in.K.transpose(), V = in.V.transpose();  // [d x n]
  for (auto _ : state) {
    attn::ColumnAttention r = attn::column_attend(Q, K, V, {.scale = true});
    benchmark::DoNotOptimize(r.Y.data());
  }
  set_counters(state, n);
}

void BM_RowAttention(benchmark::State& state) {
  const Index n = state.range(0);
  const Inputs in = make_inputs(n);
  attn::AttentionResult r;
  attn::attention_into(in.Q, in.K, in.V, r);  // allocate (and first-touch) the buffers once
  for (auto _ : state) {
    attn::attention_into(in.Q, in.K, in.V, r);
    benchmark::DoNotOptimize(r.out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n);
}

void BM_RowAttentionTiny(benchmark::State& state) {
  constexpr Index n = 4, d = 16;
  const Inputs in = make_inputs(n, d);
  attn::AttentionResult r;
  attn::attention_into(in.Q, in.K, in.V, r);  // the buffers exist before the clock starts
  for (auto _ : state) {
    attn::attention_into(in.Q, in.K, in.V, r);
    benchmark::DoNotOptimize(r.out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n, d);
}

void BM_RowAttentionFresh(benchmark::State& state) {
  const Index n = state.range(0);
  const Inputs in = make_inputs(n);
  for (auto _ : state) {
    attn::AttentionResult r = attn::attention(in.Q, in.K, in.V);
    benchmark::DoNotOptimize(r.out.data());
  }
  set_counters(state, n);
}

void BM_RowProductsOnly(benchmark::State& state) {
  const Index n = state.range(0);
  const Inputs in = make_inputs(n);
  Matrix W(n, n), out(n, kD);  // weights [n x n], out [n x d]
  for (auto _ : state) {
    W.noalias() = in.Q * in.K.transpose();  // [n x n]
    out.noalias() = W * in.V;               // [n x d]
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (Index n : {16, 64, 256, 1024}) b->Arg(n);
  b->ArgName("n")->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_ColumnLoops)->Apply(sizes);
BENCHMARK(BM_ColumnMatrix)->Apply(sizes);
BENCHMARK(BM_RowAttention)->Apply(sizes);
BENCHMARK(BM_RowAttentionTiny)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_RowAttentionFresh)->Apply(sizes);
BENCHMARK(BM_RowProductsOnly)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
