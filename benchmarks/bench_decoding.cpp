// bench_decoding: what a KV cache saves per generated token (chapter 11). Attention only: the
// projections of q, k and v (and every other layer) are not timed, in either variant.
//
// h = 8 query heads of d_k = 64, float32, one thread, N(0, 1) inputs, g = 8 kv heads (MHA) and
// g = 2 (GQA), n = 256 .. 4096 tokens already seen:
//   BM_DecodeStep  one decode step with the cache: attn::decode_attention_into of the newest
//                  query [1 x h d_k] against the n keys and values held (a plain cache prefilled
//                  with n rows before the clock starts). Appending the token's own key and
//                  value, a copy of 2 g d_k floats, is not timed. Counted as 4 n h d_k flops
//                  (q k_j and p_j v_j for every key and head); it is bound by memory, not
//                  arithmetic, so the counter that matters is cache_GB/s: the 2 n g d_k floats
//                  of the cache read per step (the h / g heads of a group read their kv head's
//                  rows once). peak_ratio is against one core's FMA peak, measured at start-up
//                  (course/fma_peak.hpp), as in bench_efficient
//   BM_Recompute   the same token without a cache: the causal attention of the whole prefix
//                  recomputed, attn::tiled_attention (causal = true, threads = 1, default tiles)
//                  for each of the h heads over its kv head's columns, n queries x n keys. That
//                  is what a model without a cache does per token: every layer but the last
//                  needs every row's output to make the next layer's keys and values. Counted as
//                  the causal half that is needed, 2 n (n + 1) d_k flops per head (tiles above
//                  the diagonal are skipped); cached_speedup = this time / BM_DecodeStep's time
//                  for the same n and g (measured in this run, this thread's CPU time per
//                  iteration)
//
//   taskset -c 1 build/release/benchmarks/bench_decoding --benchmark_min_time=0.2
#include "peak_ratio.hpp"

#include "attn/core/random.hpp"
#include "attn/kernels/decode_attention.hpp"
#include "attn/kernels/tiled_attention.hpp"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <time.h>
#include <unistd.h>

#include <map>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using bench::count_flops;

using attn::Index;
using attn::Matrix;

constexpr Index kHeads = 8, kD = 64;

// Seconds per decode step, by (n, g), for BM_Recompute's cached_speedup.
std::map<std::pair<Index, Index>, double> g_step_seconds;

struct Inputs {
  Matrix Q;     // [n x h d_k]
  Matrix K, V;  // [n x g d_k]
};

Inputs make_inputs(Index n, Index g) {
  attn::Rng rng(42);
  return {attn::random_normal(rng, n, kHeads * kD), attn::random_normal(rng, n, g * kD),
          attn::random_normal(rng, n, g * kD)};
}

// CPU seconds of this thread per iteration of a benchmark loop, measured around it: the
// "CPU" column's measure (the work itself, whatever else the machine runs; both variants
// run on this one thread).
class LoopClock {
 public:
  LoopClock() : start_(now()) {}
  double per_iteration(const benchmark::State& state) const {
    return (now() - start_) / static_cast<double>(state.iterations());
  }

 private:
  static double now() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  double start_;
};

void BM_DecodeStep(benchmark::State& state) {
  const Index n = state.range(0), g = state.range(1);
  const Inputs in = make_inputs(n, g);
  attn::KvCache cache = attn::make_kv_cache<float>(n, g, kD);
  cache.append(in.K, in.V);  // the n tokens seen so far, the newest included
  const attn::DecodeOptions opts{.heads = kHeads};
  Matrix out = Matrix::Zero(1, kHeads * kD);                              // [1 x h d_k]
  attn::decode_attention_into<float>(in.Q.row(n - 1), cache, out, opts);  // warm-up: scratch
  const LoopClock clock;
  for (auto _ : state) {
    attn::decode_attention_into<float>(in.Q.row(n - 1), cache, out, opts);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  g_step_seconds[{n, g}] = clock.per_iteration(state);
  const auto nf = static_cast<double>(n);
  count_flops(state, 4.0 * nf * kHeads * kD);
  state.counters["cache_GB/s"] =
      benchmark::Counter(2.0 * nf * static_cast<double>(g * kD) * sizeof(float) / 1e9,
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["cache_MiB"] = static_cast<double>(cache.bytes()) / (1 << 20);
}

void BM_Recompute(benchmark::State& state) {
  const Index n = state.range(0), g = state.range(1);
  const Inputs in = make_inputs(n, g);
  const attn::TiledAttentionOptions opts{.causal = true, .threads = 1};
  Matrix out = Matrix::Zero(n, kHeads * kD);  // [n x h d_k]
  Matrix lse = Matrix::Zero(n, kHeads);       // [n x h]: each head's L in a column
  const auto all_heads = [&] {
    for (Index a = 0; a < kHeads; ++a) {
      const Index kv = a / (kHeads / g);
      attn::tiled_attention_into(in.Q.middleCols(a * kD, kD), in.K.middleCols(kv * kD, kD),
                                 in.V.middleCols(kv * kD, kD), out.middleCols(a * kD, kD),
                                 lse.col(a), opts);
    }
  };
  all_heads();  // warm-up: the scratch tiles
  const LoopClock clock;
  for (auto _ : state) {
    all_heads();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double seconds = clock.per_iteration(state);
  const auto nf = static_cast<double>(n);
  count_flops(state, 2.0 * nf * (nf + 1.0) * kD * kHeads);
  const auto step = g_step_seconds.find({n, g});
  if (step != g_step_seconds.end()) state.counters["cached_speedup"] = seconds / step->second;
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "g"});
  for (Index g : {8, 2}) {
    for (Index n : {256, 512, 1024, 2048, 4096}) b->Args({n, g});
  }
}

// Every decode step before the first recomputation, so cached_speedup finds its step's time.
BENCHMARK(BM_DecodeStep)->Apply(sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Recompute)->Apply(sizes)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  // Both variants run on this one thread: Eigen's own threads off.
  return bench::run_against_peak(argc, argv, {"peak_ratio", "cache_GB/s"},
                                 [] { Eigen::setNbThreads(1); });
}
