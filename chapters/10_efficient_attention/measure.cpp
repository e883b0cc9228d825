// measure.cpp: chapter 10's timings and the table they are kept in.
#include "measure.hpp"

#include "attn/core/random.hpp"
#include "attn/kernels/tiled_attention.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/softmax.hpp"
#include "course/fma_peak.hpp"
#include "course/machine.hpp"
#include "course/print.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace efficiency {

namespace {

using attn::Matrix;
constexpr Index kD = 64;

double gflops(Index n, double seconds) {
  const auto nf = static_cast<double>(n);
  return 4.0 * nf * nf * static_cast<double>(kD) / seconds / 1e9;
}

struct Inputs {
  Matrix Q, K, V;  // [n x d] each
};

Inputs inputs(Index n) {
  attn::Rng rng(42);
  return {attn::random_normal(rng, n, kD), attn::random_normal(rng, n, kD),
          attn::random_normal(rng, n, kD)};
}

}  // namespace

double seconds_per_call(const std::function<void()>& f) {
  using Clock = std::chrono::steady_clock;
  f();  // warm: buffers allocated and touched, caches filled
  double best = 1e30;
  for (int attempt = 0; attempt < 3; ++attempt) {
    long calls = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      f();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < 0.05);
    best = std::min(best, elapsed / static_cast<double>(calls));
  }
  return best;
}

double best_of_three(const std::function<void()>& f) {
  using Clock = std::chrono::steady_clock;
  double best = 1e30;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const auto start = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

NaiveSplit time_naive_attention(Index n) {
  attn::Rng rng(7);
  const Matrix Q = attn::random_normal(rng, n, kD), K = attn::random_normal(rng, n, kD),
               V = attn::random_normal(rng, n, kD);  // [n x 64] each
  Matrix S(n, n), out(n, kD);                        // [n x n], [n x 64]
  const double scores = best_of_three([&] { S.noalias() = Q * K.transpose(); });
  const Matrix scaled = S * 0.125f;  // [n x n], scaled by 1/sqrt(64)
  const double softmax_and_copy = best_of_three([&] {
    S = scaled;
    for (Index r = 0; r < n; ++r) attn::softmax_inplace({S.row(r).data(), std::size_t(n)});
  });
  const double values = best_of_three([&] { out.noalias() = S * V; });
  const double copy = best_of_three([&] { S = scaled; });
  return {scores, softmax_and_copy - copy, values};
}

Measurements measure(Index longest, const std::function<void(const std::string&)>& progress) {
  Measurements m{course::cpu_model(),
                 course::today_utc(),
                 0,
                 {},
                 {},
                 {},
                 {},
                 std::min<Index>(1024, longest),
                 longest};
  progress("one core's FMA peak");
  m.peak = course::measure_fma_peak(0.3) / 1e9;
  for (Index part = 16; part >= 1; part /= 2) {
    const Index n = longest / part;
    if (n < 16) continue;
    progress(fmt::format("the four paths at n = {}", n));
    const Inputs in = inputs(n);
    SpeedRow row{.n = n};
    attn::AttentionResult plain;  // out [n x d], weights [n x n], kept across calls
    row.plain = gflops(n, seconds_per_call([&] { attn::attention_into(in.Q, in.K, in.V, plain); }));
    Matrix out(n, kD);  // [n x d]
    attn::Vector lse(n);
    for (bool causal : {false, true}) {
      const attn::TiledAttentionOptions opts{.causal = causal, .threads = 1};
      const double g = gflops(n, seconds_per_call([&] {
                                attn::tiled_attention_into(in.Q, in.K, in.V, out, lse, opts);
                              }));
      (causal ? row.tiled_causal : row.tiled) = g;
    }
    Matrix S(n, n);  // [n x n]
    row.gemms = gflops(n, seconds_per_call([&] {
                         S.noalias() = in.Q * in.K.transpose();
                         out.noalias() = S * in.V;
                       }));
    m.speed.push_back(row);
  }
  progress(fmt::format("the tile sizes at n = {}", m.sweep_n));
  {
    const Inputs in = inputs(m.sweep_n);
    Matrix out(m.sweep_n, kD);  // [n x d]
    attn::Vector lse(m.sweep_n);
    for (Index bq : {16, 32, 64, 128, 256}) {
      for (Index bk : {16, 32, 64, 128, 256}) {
        if (bq > m.sweep_n || bk > m.sweep_n) continue;  // only the tiles that fit in n
        const attn::TiledAttentionOptions opts{.query_tile = bq, .key_tile = bk, .threads = 1};
        m.sweep.push_back({bq, bk, gflops(m.sweep_n, seconds_per_call([&] {
                                            attn::tiled_attention_into(in.Q, in.K, in.V, out, lse,
                                                                       opts);
                                          }))});
      }
    }
  }
  progress(fmt::format("one and two threads at n = {}", m.threads_n));
  {
    const Inputs in = inputs(m.threads_n);
    Matrix out(m.threads_n, kD);  // [n x d]
    attn::Vector lse(m.threads_n);
    for (int threads : {1, 2}) {
      const attn::TiledAttentionOptions opts{.threads = threads};
      m.threads.push_back({threads, gflops(m.threads_n, seconds_per_call([&] {
                                             attn::tiled_attention_into(in.Q, in.K, in.V, out, lse,
                                                                        opts);
                                           }))});
    }
  }
  return m;
}

std::vector<std::string> speed_lines(const Measurements& m) {
  std::vector<std::string> lines{
      fmt::format("one core's FMA peak, same run: {:.0f} GFLOP/s", m.peak),
      fmt::format("{:>6}  {:>16}  {:>16}  {:>16}  {:>16}", "n", "plain", "tiled", "tiled, causal",
                  "its 2 GEMMs")};
  const auto cell = [&](double g) { return fmt::format("{:.0f} ({:.0f}%)", g, 100 * g / m.peak); };
  for (const SpeedRow& r : m.speed) {
    lines.push_back(fmt::format("{:>6}  {:>16}  {:>16}  {:>16}  {:>16}", course::with_commas(r.n),
                                cell(r.plain), cell(r.tiled), cell(r.tiled_causal), cell(r.gemms)));
  }
  return lines;
}

std::vector<std::string> tile_and_thread_lines(const Measurements& m) {
  std::vector<std::string> lines;
  const auto best =
      std::max_element(m.sweep.begin(), m.sweep.end(),
                       [](const auto& a, const auto& b) { return a.gflops < b.gflops; });
  if (best != m.sweep.end()) {
    lines.push_back(fmt::format("best tile at n = {}: B_q = {}, B_k = {}: {:.0f} GFLOP/s",
                                course::with_commas(m.sweep_n), best->query_tile, best->key_tile,
                                best->gflops));
  }
  if (m.threads.size() >= 2) {
    lines.push_back(fmt::format(
        "n = {}: {} thread {:.0f} GFLOP/s, {} threads {:.0f} GFLOP/s ({:.2f}x)",
        course::with_commas(m.threads_n), m.threads[0].threads, m.threads[0].gflops,
        m.threads[1].threads, m.threads[1].gflops, m.threads[1].gflops / m.threads[0].gflops));
  }
  return lines;
}

std::string to_tsv(const Measurements& m) {
  std::string s = fmt::format("# chapter 10's measurements: {}, {}\n", m.machine, m.date);
  s += "# GFLOP/s, float32, d = 64, 4 n^2 d flops counted for every path\n";
  s += fmt::format("peak\t{:.1f}\n", m.peak);
  for (const SpeedRow& r : m.speed) {
    s += fmt::format("speed\t{}\t{:.1f}\t{:.1f}\t{:.1f}\t{:.1f}\n", r.n, r.plain, r.tiled,
                     r.tiled_causal, r.gemms);
  }
  for (const SweepCell& c : m.sweep) {
    s += fmt::format("sweep\t{}\t{}\t{:.1f}\n", c.query_tile, c.key_tile, c.gflops);
  }
  for (const ThreadRow& t : m.threads)
    s += fmt::format("threads\t{}\t{:.1f}\n", t.threads, t.gflops);
  s += fmt::format("sweep_n\t{}\nthreads_n\t{}\n", m.sweep_n, m.threads_n);
  for (const MemoryPoint& p : m.memory)
    s += fmt::format("memory\t{}\t{}\t{:.2f}\n", p.path, p.n, p.mib);
  return s;
}

std::optional<Measurements> read_measurements(const std::filesystem::path& path) {
  Measurements m;
  const auto row = [&](const std::string& kind, std::istream& in) {
    if (kind == "peak") {
      in >> m.peak;
    } else if (kind == "speed") {
      SpeedRow r;
      in >> r.n >> r.plain >> r.tiled >> r.tiled_causal >> r.gemms;
      m.speed.push_back(r);
    } else if (kind == "sweep") {
      SweepCell c;
      in >> c.query_tile >> c.key_tile >> c.gflops;
      m.sweep.push_back(c);
    } else if (kind == "threads") {
      ThreadRow t;
      in >> t.threads >> t.gflops;
      m.threads.push_back(t);
    } else if (kind == "sweep_n") {  // absent from older tables, measured at the defaults
      in >> m.sweep_n;
    } else if (kind == "threads_n") {
      in >> m.threads_n;
    } else if (kind == "memory") {
      MemoryPoint p;
      in >> p.path >> p.n >> p.mib;
      m.memory.push_back(p);
    } else {
      return false;
    }
    return !in.fail();
  };
  const auto taken = course::read_measurement_table(path, "chapter 10's measurements", row);
  if (!taken) return std::nullopt;
  m.machine = taken->machine;
  m.date = taken->date;
  if (m.peak <= 0 || m.speed.empty() || m.sweep.empty() || m.threads.empty()) {
    throw std::runtime_error(fmt::format("{}: incomplete (peak, speed, sweep and threads lines "
                                         "are all needed)",
                                         path.string()));
  }
  return m;
}

std::filesystem::path committed_measurements() { return ATTN_CHAPTER10_DIR "/measured.tsv"; }

}  // namespace efficiency
