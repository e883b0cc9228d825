// attention_memory: how much memory one attention call takes beyond its inputs and output,
// the plain path (its [n x n] weights) against the tiled one (a few tiles per thread).
//
//   build/release/benchmarks/attention_memory PATH N [THREADS]
//     PATH     plain | tiled | tiled-causal
//     N        tokens, n_q = n_k = n, d = 64 (plain: at most 16384; tiled: at most 262144)
//     THREADS  the tiled path's OpenMP threads (default 1)
//
// It allocates Q, K, V [n x d] (N(0, 1)) and the output (out [n x d]; the tiled path's L [n]
// too), writing every page, then resets the kernel's peak-RSS mark (writing "5" to
// /proc/self/clear_refs sets VmHWM to the current RSS), runs the call once, and prints one line:
//
//   tiled n=65536 io_MiB=64.25 peak_above_MiB=0.62 seconds=14.81
//
// io_MiB is what the inputs and the output hold; peak_above_MiB is the largest resident set
// during the call minus the resident set just before it: the buffers the call allocated and
// wrote (plain: n^2 x 4 bytes of weights), plus whatever a first call pays once (per-thread
// scratch tiles, the OpenMP runtime, code paged in: well under a MiB). Bad arguments: a usage
// line and exit 2. Linux only (/proc).
//
// The plain path is refused above n = 16384 (1 GiB of weights there; 65536 would want
// 16 GiB and the machine has less). Times are one call on an unpinned process: for speed see
// bench_efficient.
#include "attn/core/random.hpp"
#include "attn/kernels/tiled_attention.hpp"
#include "attn/ops/attention.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

namespace {

using attn::Index;
using attn::Matrix;

constexpr Index kD = 64;
constexpr Index kMaxPlain = 16384;
constexpr Index kMaxTiled = 262144;  // ~16x the minutes of 65536; its inputs are 192 MiB

enum class Path { Plain, Tiled, TiledCausal };

int usage(std::string_view problem) {
  fmt::print(stderr,
             "attention_memory: {}\nusage: attention_memory plain|tiled|tiled-causal N "
             "[THREADS]   (d = 64; plain: N <= {}, tiled: N <= {})\n",
             problem, kMaxPlain, kMaxTiled);
  return 2;
}

std::optional<Index> parse_positive(std::string_view text) {
  Index value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

// VmHWM (peak resident set since the last reset) from /proc/self/status, in KiB; -1 if absent.
long long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Sets VmHWM to the current RSS (proc(5), clear_refs: "5").
bool reset_peak_rss() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  return ::close(fd) == 0 && ok;
}

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) return usage("expected a path and N");
  const std::string_view path_name = argv[1];
  Path path;
  if (path_name == "plain") {
    path = Path::Plain;
  } else if (path_name == "tiled") {
    path = Path::Tiled;
  } else if (path_name == "tiled-causal") {
    path = Path::TiledCausal;
  } else {
    return usage(fmt::format("unknown path '{}'", path_name));
  }
  const std::optional<Index> n_arg = parse_positive(argv[2]);
  if (!n_arg) return usage(fmt::format("N must be a positive integer, not '{}'", argv[2]));
  const Index n = *n_arg;
  if (path == Path::Plain && n > kMaxPlain) {
    return usage(fmt::format("the plain path at n = {} would need {:.1f} MiB for its weights "
                             "alone; it is measured up to n = {}",
                             n, mib(4.0 * static_cast<double>(n) * static_cast<double>(n)),
                             kMaxPlain));
  }
  if (n > kMaxTiled) return usage(fmt::format("n = {} is above {}", n, kMaxTiled));
  int threads = 1;
  if (argc == 4) {
    const std::optional<Index> t = parse_positive(argv[3]);
    if (!t || *t > 1024) {
      return usage(fmt::format("THREADS must be an integer from 1 to 1024, not '{}'", argv[3]));
    }
    threads = static_cast<int>(*t);
  }
  // Eigen's GEMM would use OpenMP threads of its own when the library is built with OpenMP;
  // the plain path is measured as the one-thread call it is in the benchmarks.
  Eigen::setNbThreads(1);

  attn::Rng rng(42);
  const Matrix Q = attn::random_normal(rng, n, kD), K = attn::random_normal(rng, n, kD),
               V = attn::random_normal(rng, n, kD);         // [n x d] each, every page written
  attn::AttentionResult plain;                              // out [n x d]; weights made by the call
  Matrix out;                                               // the tiled path's out [n x d]
  Eigen::VectorXf lse;                                      // and L [n]
  double io_bytes = 4.0 * static_cast<double>(4 * n * kD);  // Q, K, V, out
  if (path == Path::Plain) {
    plain.out = Matrix::Zero(n, kD);
  } else {
    out = Matrix::Zero(n, kD);
    lse = Eigen::VectorXf::Zero(n);
    io_bytes += 4.0 * static_cast<double>(n);
  }

  if (!reset_peak_rss()) {
    fmt::print(stderr, "attention_memory: cannot write /proc/self/clear_refs\n");
    return 1;
  }
  const long long before = peak_rss_kib();
  const auto t0 = std::chrono::steady_clock::now();
  if (path == Path::Plain) {
    attn::attention_into(Q, K, V, plain);
  } else {
    attn::tiled_attention_into(Q, K, V, out, lse,
                               {.causal = path == Path::TiledCausal, .threads = threads});
  }
  const auto t1 = std::chrono::steady_clock::now();
  const long long after = peak_rss_kib();
  if (before < 0 || after < 0) {
    fmt::print(stderr, "attention_memory: no VmHWM in /proc/self/status\n");
    return 1;
  }

  fmt::print("{} n={} io_MiB={:.2f} peak_above_MiB={:.2f} seconds={:.3f}\n", path_name, n,
             mib(io_bytes), static_cast<double>(after - before) / 1024.0,
             std::chrono::duration<double>(t1 - t0).count());
  return std::fflush(stdout) == 0 && !std::ferror(stdout) ? 0 : 1;
}
