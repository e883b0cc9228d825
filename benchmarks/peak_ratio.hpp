// peak_ratio.hpp: what every benchmark measured against one core's FMA peak shares. The peak is
// measured once in main(), before the first benchmark, so that every peak_ratio divides by the
// same number, taken on the same core in the same process (course/fma_peak.hpp).
#pragma once

#include "course/fma_peak.hpp"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <unistd.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

/// One core's FMA peak in FLOP/s, measured by run_against_peak() before any benchmark runs.
inline double g_peak = 0.0;

/// FLOP/s and peak_ratio for `flops` per iteration. Rates divide by CPU time, or by wall-clock
/// time for a benchmark marked UseRealTime() (one whose work is on other threads).
inline void count_flops(benchmark::State& state, double flops) {
  constexpr auto rate = benchmark::Counter::kIsIterationInvariantRate;
  state.counters["FLOP/s"] = benchmark::Counter(flops, rate);
  state.counters["peak_ratio"] = benchmark::Counter(flops / g_peak, rate);
}

/// peak_ratio (and any other ratio named) is a rate counter only so that it is divided by the
/// same time as FLOP/s; the console would print it as "0.55/s". This reporter prints the plain
/// number it is (the JSON output carries numbers without units and needs nothing).
class PlainRatioConsole : public benchmark::ConsoleReporter {
 public:
  PlainRatioConsole(std::vector<std::string> plain, OutputOptions options)
      : ConsoleReporter(options), plain_(std::move(plain)) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> shown = runs;
    for (Run& run : shown) {
      for (const std::string& name : plain_) {
        const auto counter = run.counters.find(name);
        if (counter != run.counters.end()) counter->second.flags = benchmark::Counter::kDefaults;
      }
    }
    ConsoleReporter::ReportRuns(shown);
  }

 private:
  std::vector<std::string> plain_;
};

/// Whether the console output is the default one (not --benchmark_format=json or csv).
inline bool console_format(int argc, char** argv) {
  constexpr std::string_view kFlag = "--benchmark_format=";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with(kFlag) && arg.substr(kFlag.size()) != "console") return false;
  }
  return true;
}

/// BENCHMARK_MAIN() plus the peak: parses the flags, calls `before` (to register benchmarks
/// that depend on the machine, or to pin threads), measures the peak, records it and the FMA
/// kernel in the context, and runs every benchmark, showing `plain` counters as plain numbers.
inline int run_against_peak(int argc, char** argv, std::vector<std::string> plain,
                            const std::function<void()>& before = {}) {
  const bool console = console_format(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (before) before();
  g_peak = course::measure_fma_peak(0.3);
  const course::FmaKernel k = course::fma_kernel();
  benchmark::AddCustomContext("fma_peak_GFLOP/s", fmt::format("{:.1f}", g_peak / 1e9));
  benchmark::AddCustomContext("fma_kernel", fmt::format("{}, {} chains", k.isa, k.chains));
  if (console) {
    // Colours only on a terminal, as the library's own console reporter decides.
    PlainRatioConsole display(std::move(plain), isatty(STDOUT_FILENO) ? PlainRatioConsole::OO_Color
                                                                      : PlainRatioConsole::OO_None);
    benchmark::RunSpecifiedBenchmarks(&display);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  return 0;
}

}  // namespace bench
