// bench_efficient: how close attention comes to what one core can do. Every benchmark reports
// FLOP/s and peak_ratio = FLOP/s / P, where P is one core's float32 FMA peak measured by this
// process at start-up (fma_peak.hpp: ~0.3 s of independent FMA chains on the widest vector the
// build targets), so the ratio holds on any machine and clock. P also goes into the output's
// context ("fma_peak_GFLOP/s") and BM_PeakFMA runs the same kernel as a benchmark (its
// peak_ratio should read ~1.00: a check of the measurement).
//
// d = 64, float32, Q, K, V [n x d] of N(0, 1), buffers kept across calls (and touched once
// before the clock starts: fresh memory costs ~2.5 ms per MiB, measured), n in {256, 1024,
// 4096} unless said. Flops are counted as the two products Q K^T and P V, 2 n^2 d each:
// 4 n^2 d per call for EVERY variant, so a masked variant that skips work reads as faster:
//   BM_PeakFMA        the peak kernel itself; FLOP/s = 2 x lanes x FMAs
//   BM_Plain          attn::attention_into: two products and a row softmax over the kept
//                     [n x n] weights (the library's plain path; past 256 x 256 weights, a
//                     block of query rows at a time, on the library's GEMM)
//   BM_PlainCausal    the same with causal_mask(n); counted at 4 n^2 d, although past 256 x 256
//                     a block of rows multiplies only the keys it may see (~half the work)
//   BM_Gemms          only the plain path's two GEMMs, W = Q K^T and W V: its ceiling
//   BM_Tiled          attn::tiled_attention_into into kept out and L, threads = 1, default tiles
//   BM_TiledCausal    causal = true, threads = 1; counted at 4 n^2 d although the tiles above
//                     the diagonal are skipped (~half the work), as FlashAttention's papers count
//   BM_TiledWindow    causal = true, window = W (chapter 11's sliding window), threads = 1,
//                     n = 4096, W in {1024, 256}; counted at 4 n^2 d like BM_TiledCausal, so
//                     that the two read side by side: the ratio of their times is the work the
//                     window skips (tiles_run: 0.25 at W = 1024 against causal's 0.52)
//   BM_TiledPadding   an explicit [n x n] mask blocking the last quarter of the keys (padding),
//                     counted at 4 n^2 d too although those key tiles are skipped
//   BM_TiledThreads   n = 4096, threads = 1 and 2, wall-clock time (UseRealTime): the speed-up
//                     is the ratio of the two FLOP/s; peak_ratio stays against ONE core's peak.
//                     Registered only when the process may run on two CPUs or more, so a
//                     pinned run leaves it out by itself
//   BM_TileSweep      n = 1024, query_tile (Bq) x key_tile (Bk) in {16, ..., 256}^2, threads = 1
//   BM_PlainBackward  attn::attention_backward_into from the forward's weights, into kept dQ, dK,
//                     dV; n in {256, 1024}; counted at 8 n^2 d (dV, dP, dQ, dK: four products)
//   BM_TiledBackward  attn::tiled_attention_backward_into from out and L; counted at 8 n^2 d as
//                     well, so that the two compare directly, although FlashAttention's backward
//                     recomputes S = Q K^T per tile (five products at least)
//   BM_TiledForwardBackward  the tiled forward and then its backward, threads = 1, n in {256,
//                     1024, 4096}, causal 0 or 1; in ms, for benchmarks/pytorch_attention.py's
//                     same sizes; counted at 12 n^2 d (4 forward + 8 backward)
//   BM_MultiHead      attn::multi_head_forward, d_model 512, 8 heads (d_k = 64), n = 1024,
//                     self-attention (query = key = value = x [n x 512]), a new result each call
//                     (as the function returns one); need_weights:0 is the tiled path (as
//                     nn.TransformerEncoderLayer calls it), need_weights:1 the plain path that
//                     keeps every head's weights (nn.MultiheadAttention's default). Counted as
//                     the heads' attention, 4 n^2 d_model, plus the four projections (Q, K, V
//                     and the output), 2 n d_model^2 each: 8 n d_model^2. Its tiled path runs
//                     OpenMP's default threads: one when pinned
//   tiles_run         (tiled benchmarks) the fraction of tile pairs computed, count_tiles()
//
// One-thread numbers, pinned to one core (everything but BM_TiledThreads, see above):
//   taskset -c 1 build/release/benchmarks/bench_efficient --benchmark_min_time=0.3
// Threads, unpinned (two cores):
//   build/release/benchmarks/bench_efficient --benchmark_min_time=0.3 --benchmark_filter=Threads
// scripts/measure_efficiency.sh OUT runs both (and attention_memory) into a summary table.
#include "peak_ratio.hpp"

#include "attn/core/random.hpp"
#include "attn/kernels/tiled_attention.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <sched.h>
#include <unistd.h>

#include <string_view>
#include <vector>

namespace {

using bench::count_flops;

using attn::Index;
using attn::Matrix;

constexpr Index kD = 64;

struct Inputs {
  Matrix Q, K, V;  // [n x d] each
};

Inputs make_inputs(Index n) {
  attn::Rng rng(42);
  return {attn::random_normal(rng, n, kD), attn::random_normal(rng, n, kD),
          attn::random_normal(rng, n, kD)};
}

double attention_flops(Index n, double products = 2.0) {
  const auto nf = static_cast<double>(n);
  return products * 2.0 * nf * nf * static_cast<double>(kD);
}

void count_tiles_run(benchmark::State& state, Index n, const attn::TiledAttentionOptions& o) {
  const attn::TileCounts t = attn::count_tiles(n, n, o);
  state.counters["tiles_run"] =
      static_cast<double>(t.total - t.skipped) / static_cast<double>(t.total);
}

void BM_PeakFMA(benchmark::State& state) {
  constexpr std::int64_t kRounds = std::int64_t{1} << 16;
  for (auto _ : state) benchmark::DoNotOptimize(course::fma_rounds(kRounds));
  const course::FmaKernel k = course::fma_kernel();
  count_flops(state, k.flops_per_round() * static_cast<double>(kRounds));
  state.SetLabel(fmt::format("{}, {} chains", k.isa, k.chains));
}

void plain(benchmark::State& state, bool causal) {
  const Index n = state.range(0);
  const Inputs in = make_inputs(n);
  attn::AllowedMask mask;  // [n x n] when causal
  attn::AttentionOptions opts;
  if (causal) {
    mask = attn::causal_mask(n);
    opts.allowed = mask;
  }
  attn::AttentionResult r;
  attn::attention_into(in.Q, in.K, in.V, r, opts);  // allocate and touch the buffers once
  for (auto _ : state) {
    attn::attention_into(in.Q, in.K, in.V, r, opts);
    benchmark::DoNotOptimize(r.out.data());
    benchmark::ClobberMemory();
  }
  count_flops(state, attention_flops(n));
}

void BM_Plain(benchmark::State& state) { plain(state, false); }
void BM_PlainCausal(benchmark::State& state) { plain(state, true); }

void BM_Gemms(benchmark::State& state) {
  const Index n = state.range(0);
  const Inputs in = make_inputs(n);
  Matrix W = Matrix::Zero(n, n), out = Matrix::Zero(n, kD);  // [n x n], [n x d]
  for (auto _ : state) {
    W.noalias() = in.Q * in.K.transpose();  // [n x n]
    out.noalias() = W * in.V;               // [n x d]
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  count_flops(state, attention_flops(n));
}

// The tiled forward with `opts`, into kept out and L; one warm-up call first so that the
// per-thread scratch tiles exist before the clock starts.
void tiled(benchmark::State& state, Index n, const attn::TiledAttentionOptions& opts) {
  const Inputs in = make_inputs(n);
  Matrix out = Matrix::Zero(n, kD);                // [n x d]
  Eigen::VectorXf lse = Eigen::VectorXf::Zero(n);  // [n]
  attn::tiled_attention_into(in.Q, in.K, in.V, out, lse, opts);
  for (auto _ : state) {
    attn::tiled_attention_into(in.Q, in.K, in.V, out, lse, opts);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  count_flops(state, attention_flops(n));
  count_tiles_run(state, n, opts);
}

void BM_Tiled(benchmark::State& state) { tiled(state, state.range(0), {.threads = 1}); }

void BM_TiledCausal(benchmark::State& state) {
  tiled(state, state.range(0), {.causal = true, .threads = 1});
}

void BM_TiledWindow(benchmark::State& state) {
  tiled(state, state.range(0), {.causal = true, .window = state.range(1), .threads = 1});
}

void BM_TiledPadding(benchmark::State& state) {
  const Index n = state.range(0);
  attn::AllowedMask allowed = attn::AllowedMask::Constant(n, n, true);  // [n x n]
  allowed.rightCols(n / 4).setConstant(false);  // the last quarter of the keys is padding
  tiled(state, n, {.allowed = allowed, .threads = 1});
}

void BM_TiledThreads(benchmark::State& state) {
  tiled(state, state.range(0), {.threads = static_cast<int>(state.range(1))});
}

void BM_TileSweep(benchmark::State& state) {
  tiled(state, 1024, {.query_tile = state.range(0), .key_tile = state.range(1), .threads = 1});
}

// d_out [n x d] for the backward passes: any values will do, N(0, 1) like the inputs.
Matrix make_d_out(Index n) {
  attn::Rng rng(7);
  return attn::random_normal(rng, n, kD);
}

void BM_PlainBackward(benchmark::State& state) {
  const Index n = state.range(0);
  const Inputs in = make_inputs(n);
  const Matrix d_out = make_d_out(n);
  attn::AttentionResult r;
  attn::attention_into(in.Q, in.K, in.V, r);  // the forward's weights: the backward's cache
  Matrix dQ = Matrix::Zero(n, kD), dK = Matrix::Zero(n, kD), dV = Matrix::Zero(n, kD);
  for (auto _ : state) {
    attn::attention_backward_into(in.Q, in.K, in.V, r.weights, d_out, dQ, dK, dV);
    benchmark::DoNotOptimize(dQ.data());
    benchmark::DoNotOptimize(dK.data());
    benchmark::DoNotOptimize(dV.data());
    benchmark::ClobberMemory();
  }
  count_flops(state, attention_flops(n, 4.0));
}

void BM_TiledBackward(benchmark::State& state) {
  const Index n = state.range(0);
  const Inputs in = make_inputs(n);
  const Matrix d_out = make_d_out(n);
  const attn::TiledAttentionOptions opts{.threads = 1};
  attn::TiledAttentionResult fwd = attn::tiled_attention(in.Q, in.K, in.V, opts);
  Matrix dQ = Matrix::Zero(n, kD), dK = Matrix::Zero(n, kD), dV = Matrix::Zero(n, kD);
  attn::tiled_attention_backward_into(in.Q, in.K, in.V, fwd.out, fwd.lse, d_out, dQ, dK, dV,
                                      opts);  // warm-up: the scratch tiles
  for (auto _ : state) {
    attn::tiled_attention_backward_into(in.Q, in.K, in.V, fwd.out, fwd.lse, d_out, dQ, dK, dV,
                                        opts);
    benchmark::DoNotOptimize(dQ.data());
    benchmark::DoNotOptimize(dK.data());
    benchmark::DoNotOptimize(dV.data());
    benchmark::ClobberMemory();
  }
  count_flops(state, attention_flops(n, 4.0));
}

// One training use of attention: the tiled forward, then its backward, on one thread; in ms,
// against benchmarks/pytorch_attention.py's forward and autograd backward of the same sizes.
// Causal when the second argument is 1 (the tiles above the diagonal skipped both ways).
void BM_TiledForwardBackward(benchmark::State& state) {
  const Index n = state.range(0);
  const Inputs in = make_inputs(n);
  const Matrix d_out = make_d_out(n);
  const attn::TiledAttentionOptions opts{.causal = state.range(1) != 0, .threads = 1};
  attn::TiledAttentionResult fwd = attn::tiled_attention(in.Q, in.K, in.V, opts);  // kept
  Matrix dQ = Matrix::Zero(n, kD), dK = Matrix::Zero(n, kD), dV = Matrix::Zero(n, kD);
  const auto once = [&] {
    attn::tiled_attention_into(in.Q, in.K, in.V, fwd.out, fwd.lse, opts);
    attn::tiled_attention_backward_into(in.Q, in.K, in.V, fwd.out, fwd.lse, d_out, dQ, dK, dV,
                                        opts);
  };
  once();  // warm-up: the kept buffers and the scratch tiles
  for (auto _ : state) {
    once();
    benchmark::DoNotOptimize(dQ.data());
    benchmark::ClobberMemory();
  }
  count_flops(state, attention_flops(n, 6.0));  // 4 n^2 d forward + 8 n^2 d backward
}

void BM_MultiHead(benchmark::State& state) {
  constexpr Index n = 1024, d_model = 512, heads = 8;
  attn::Rng rng(42);
  const attn::MultiHeadAttention mha = attn::multi_head_init(rng, d_model, heads);
  const Matrix x = attn::random_normal(rng, n, d_model);  // [n x d_model]
  const attn::MultiHeadOptions opts{.need_weights = state.range(0) != 0};
  for (auto _ : state) {
    attn::MultiHeadResult r = attn::multi_head_forward(mha, x, x, x, opts);
    benchmark::DoNotOptimize(r.out.data());
    benchmark::ClobberMemory();
  }
  const auto nf = static_cast<double>(n), df = static_cast<double>(d_model);
  count_flops(state, 4.0 * nf * nf * df + 8.0 * nf * df * df);
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("n")->Unit(benchmark::kMillisecond);
  for (Index n : {256, 1024, 4096}) b->Arg(n);
}

void backward_sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("n")->Unit(benchmark::kMillisecond);
  for (Index n : {256, 1024}) b->Arg(n);
}

void tile_grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"Bq", "Bk"})->Unit(benchmark::kMillisecond);
  for (Index bq : {16, 32, 64, 128, 256}) {
    for (Index bk : {16, 32, 64, 128, 256}) b->Args({bq, bk});
  }
}

BENCHMARK(BM_PeakFMA)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Plain)->Apply(sizes);
BENCHMARK(BM_PlainCausal)->Apply(sizes);
BENCHMARK(BM_Gemms)->Apply(sizes);
BENCHMARK(BM_Tiled)->Apply(sizes);
BENCHMARK(BM_TiledCausal)->Apply(sizes);
BENCHMARK(BM_TiledWindow)
    ->ArgNames({"n", "W"})
    ->Args({4096, 1024})
    ->Args({4096, 256})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TiledPadding)->Apply(sizes);
BENCHMARK(BM_TileSweep)->Apply(tile_grid);
BENCHMARK(BM_PlainBackward)->Apply(backward_sizes);
BENCHMARK(BM_TiledBackward)->Apply(backward_sizes);
BENCHMARK(BM_TiledForwardBackward)
    ->ArgNames({"n", "causal"})
    ->ArgsProduct({{256, 1024, 4096}, {0, 1}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MultiHead)->ArgName("need_weights")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Two threads on one core would measure the scheduler, not the speed-up: BM_TiledThreads is
// registered (last) only when the process may use two CPUs.
void register_threads_benchmark() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0 || CPU_COUNT(&cpus) < 2) return;
  benchmark::RegisterBenchmark("BM_TiledThreads", BM_TiledThreads)
      ->ArgNames({"n", "threads"})
      ->Args({4096, 1})
      ->Args({4096, 2})
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_against_peak(argc, argv, {"peak_ratio"}, [] {
    register_threads_benchmark();
    // The library is built with OpenMP, which would let Eigen spread the plain path's GEMMs over
    // every core of an unpinned run; the plain numbers are one core's, like the tiled ones
    // (BM_TiledThreads sets its threads itself).
    Eigen::setNbThreads(1);
  });
}
