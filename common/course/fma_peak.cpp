// fma_peak.cpp: independent chains of fused multiply-adds, as fast as one core retires them.
#include "course/fma_peak.hpp"

#include <algorithm>
#include <chrono>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

namespace course {
namespace {

// One vector type and two operations per instruction set; the kernel below is written once.
#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
constexpr int kChains = 16;  // 32 zmm registers: 16 accumulators leave room for a and b
constexpr const char* kIsa = "AVX-512F FMA (zmm)";
Vec splat(float x) { return _mm512_set1_ps(x); }
Vec fused(Vec x, Vec a, Vec b) { return _mm512_fmadd_ps(x, a, b); }
float lane0(Vec v) { return _mm512_cvtss_f32(v); }
#elif defined(__FMA__)
using Vec = __m256;
constexpr int kLanes = 8;
constexpr int kChains = 12;  // 16 ymm registers: 12 accumulators, a, b, and no spills
constexpr const char* kIsa = "FMA3 (ymm)";
Vec splat(float x) { return _mm256_set1_ps(x); }
Vec fused(Vec x, Vec a, Vec b) { return _mm256_fmadd_ps(x, a, b); }
float lane0(Vec v) { return _mm256_cvtss_f32(v); }
#else
typedef float Vec __attribute__((vector_size(16)));
constexpr int kLanes = 4;
constexpr int kChains = 12;
constexpr const char* kIsa = "SSE mul+add (no FMA)";
Vec splat(float x) { return Vec{} + x; }
// Two instructions and two roundings (-ffp-contract=off), still 2 flops per lane.
Vec fused(Vec x, Vec a, Vec b) { return x * a + b; }
float lane0(Vec v) { return v[0]; }
#endif

// The value of `v` becomes unknown to the compiler and is kept: nothing that computes it can be
// folded away or dropped (Google Benchmark's DoNotOptimize does the same; the course library
// does not depend on it). An empty asm statement that claims to read and write `v`.
template <typename T>
void opaque(T& v) {
  asm volatile("" : "+m"(v) : : "memory");
}

}  // namespace

FmaKernel fma_kernel() { return {kIsa, kLanes, kChains}; }

float fma_rounds(std::int64_t rounds) {
  Vec acc[kChains];
  // Different starting points, so no two chains are provably equal and merged.
  for (int c = 0; c < kChains; ++c) acc[c] = splat(1.0f + static_cast<float>(c) * 0x1p-10f);
  Vec a = splat(1.0f - 0x1p-20f), b = splat(0x1p-20f);
  // The compiler must not know a and b (or it could reason about the loop): opaque from here.
  opaque(a);
  opaque(b);
  for (std::int64_t r = 0; r < rounds; ++r) {
    for (int c = 0; c < kChains; ++c) acc[c] = fused(acc[c], a, b);  // independent chains
  }
  float sum = 0.0f;
  for (int c = 0; c < kChains; ++c) {
    opaque(acc[c]);  // every chain's last value is used
    sum += lane0(acc[c]);
  }
  return sum;
}

double measure_fma_peak(double seconds) {
  using Clock = std::chrono::steady_clock;
  // 2^20 rounds are 6-8 million cycles (12 FMAs at 2 a cycle, or 16): ~2-3 ms a slice, long
  // against the clock's resolution and short enough that ~100 slices fit in 0.3 s.
  constexpr std::int64_t kRounds = std::int64_t{1} << 20;
  const double flops = fma_kernel().flops_per_round() * static_cast<double>(kRounds);
  const Clock::time_point start = Clock::now();
  double best = 0.0;
  float sink = 0.0f;
  for (;;) {
    const Clock::time_point t0 = Clock::now();
    sink += fma_rounds(kRounds);
    const Clock::time_point t1 = Clock::now();
    best = std::max(best, flops / std::chrono::duration<double>(t1 - t0).count());
    if (std::chrono::duration<double>(t1 - start).count() >= seconds) break;
  }
  opaque(sink);
  return best;
}

}  // namespace course
