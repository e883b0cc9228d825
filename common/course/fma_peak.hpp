/// @file
/// One core's peak float32 throughput, measured rather than taken from a data sheet,
/// so that a benchmark can say "x% of what this core can do" on whatever machine it runs on
/// (a cloud vCPU's clock, turbo and the instructions the hypervisor exposes are not known in
/// advance: the course's machines have shown both AVX-512 and AVX2-only CPUs).
///
/// The kernel keeps `chains` independent vector accumulators and updates each with one fused
/// multiply-add per round, acc = acc * a + b. An FMA takes ~4 cycles before its result can be
/// used again and a core issues up to 2 per cycle, so at least 4 x 2 = 8 chains must be in
/// flight to keep both units busy; 12-16 leave slack for a slower FMA (5 cycles) without
/// running out of registers (AVX2 has 16, AVX-512 32). a = 1 - 2^-20 and b = 2^-20 pull every
/// accumulator towards 1, so the numbers stay ordinary (no overflow, no subnormals, which some
/// cores run slowly).
///
/// The build uses -ffp-contract=off, so a * b + c is never fused by the compiler: the kernel
/// calls the FMA intrinsic of the widest vector the build targets (AVX-512F, else FMA3 on
/// 256-bit vectors). Without either it runs a separate multiply and add on 128-bit GCC vectors,
/// which is that build's peak, not the core's. Every FMA counts 2 flops per lane.
#pragma once

#include <cstdint>

namespace course {

struct FmaKernel {
  const char* isa;  ///< "AVX-512F FMA (zmm)", "FMA3 (ymm)" or "SSE mul+add (no FMA)"
  int lanes;        ///< floats per vector
  int chains;       ///< independent accumulators
  /// Flops of one round: chains x lanes x 2.
  double flops_per_round() const { return 2.0 * chains * lanes; }
};

/// What this build's kernel runs.
FmaKernel fma_kernel();

/// Runs `rounds` rounds of the kernel and returns a value that depends on every accumulator
/// (the caller hands it to benchmark::DoNotOptimize or ignores it; the kernel itself also
/// keeps the accumulators alive, so it cannot be optimised away either way).
float fma_rounds(std::int64_t rounds);

/// The best FLOP/s of short slices of the kernel over about `seconds` of wall time. The best
/// rather than the mean: an interruption (another process, a page fault elsewhere) only ever
/// makes a slice slower, and the first slices also wake the vector units and the clock up.
double measure_fma_peak(double seconds = 0.3);

}  // namespace course
