// measure.cpp: chapter 11's timings of generation with and without the cache, and the table
// they are kept in.
#include "measure.hpp"

#include "attn/core/random.hpp"
#include "course/files.hpp"
#include "course/machine.hpp"
#include "course/print.hpp"
#include "figures.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <stdexcept>

namespace decoding {

namespace {

// The fastest of `repeats` calls of f, in seconds: the least disturbed by the rest of the machine.
template <typename F>
double best_seconds(int repeats, F&& f) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Restores OpenMP's thread count when the measurement ends, however it ends.
struct OneThread {
  int before = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(before); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;
};

}  // namespace

attn::LanguageModelConfig timed_model() {
  return {.vocab = 256,
          .d_model = 256,
          .heads = 8,
          .kv_heads = 2,
          .d_ff = 1024,
          .layers = 4,
          .context = 4096};
}

Measurements measure(Index longest, const std::function<void(const std::string&)>& progress) {
  const OneThread one;  // the measure: generation on one core
  attn::Rng rng(42);
  const attn::LanguageModel model = attn::language_model_init(rng, timed_model());
  std::vector<int> text(static_cast<std::size_t>(longest));
  for (int& id : text) id = static_cast<int>(rng.next_u64() % 256);
  Measurements m{course::cpu_model(), course::today_utc(), {}};
  for (Index n = 128; n <= longest; n *= 2) {
    progress(fmt::format("generating the token after {} tokens, with and without the cache", n));
    const std::span<const int> prefix(text.data(), static_cast<std::size_t>(n));
    // Prefill all but the last 8 tokens, then time 8 decode steps (positions n - 8 .. n - 1):
    // a step cannot be repeated, since each one grows the cache, and 8 steps against caches of
    // n - 8 to n - 1 tokens are the cost at n within 6% (n >= 128).
    constexpr Index kSteps = 8;
    attn::DecodeState state = attn::make_decode_state(model);
    double steps = 1e300;  // the fastest of three rounds, each after a fresh prefill (not timed)
    for (int round = 0; round < 3; ++round) {
      state.clear();
      (void)attn::language_model_prefill(model, prefix.first(static_cast<std::size_t>(n - kSteps)),
                                         state, attn::Arithmetic::blocked);
      steps = std::min(steps, best_seconds(1, [&] {
                         for (Index t = n - kSteps; t < n; ++t) {
                           (void)attn::language_model_decode(
                               model, prefix[static_cast<std::size_t>(t)], state);
                         }
                       }));
    }
    const double recomputed = best_seconds(
        3, [&] { (void)attn::language_model_forward(model, prefix, attn::Arithmetic::blocked); });
    m.speed.push_back({n, static_cast<double>(kSteps) / steps, 1.0 / recomputed});
  }
  return m;
}

namespace {

// "548" or "0.47": whole tokens per second where there are many, two decimals where few.
std::string rate(double per_second) {
  return per_second >= 100 ? course::with_commas(static_cast<long long>(per_second + 0.5))
                           : fmt::format("{:.2f}", per_second);
}

}  // namespace

std::vector<std::string> speed_lines(const Measurements& m) {
  std::vector<std::string> lines{fmt::format("{:>8}  {:>18}  {:>20}  {:>8}", "context",
                                             "cached (tokens/s)", "recomputed (tokens/s)",
                                             "ratio")};
  for (const SpeedRow& r : m.speed) {
    lines.push_back(fmt::format("{:>8}  {:>18}  {:>21}  {:>7.0f}x", course::with_commas(r.n),
                                rate(r.cached), rate(r.recomputed), r.cached / r.recomputed));
  }
  return lines;
}

std::string to_tsv(const Measurements& m) {
  std::string s = fmt::format("# chapter 11's measurements: {}, {}\n", m.machine, m.date);
  s += "# tokens per second generating the token after n, one thread; cached, recomputed\n";
  for (const SpeedRow& r : m.speed) {
    s += fmt::format("speed\t{}\t{:.1f}\t{:.2f}\n", r.n, r.cached, r.recomputed);
  }
  return s;
}

std::optional<Measurements> read_measurements(const std::filesystem::path& path) {
  Measurements m;
  const auto row = [&](const std::string& kind, std::istream& in) {
    SpeedRow r;
    if (kind != "speed" || !(in >> r.n >> r.cached >> r.recomputed)) return false;
    m.speed.push_back(r);
    return r.n >= 1 && r.cached > 0 && r.recomputed > 0;
  };
  const auto taken = course::read_measurement_table(path, "chapter 11's measurements", row);
  if (!taken) return std::nullopt;
  if (m.speed.empty()) throw std::runtime_error(path.string() + ": no measurements in it");
  m.machine = taken->machine;
  m.date = taken->date;
  return m;
}

void show_speed(course::Chapter& ch, bool live, Index longest) {
  std::optional<Measurements> m;
  if (live) {
    m = measure(longest,
                [](const std::string& what) { std::cerr << "measuring: " << what << "\n"; });
    for (const std::string& line : speed_lines(*m)) std::cerr << "measured: " << line << "\n";
    ch.prose(
        "Measured live on this machine (--measure): the table is on stderr, on the lines "
        "starting 'measured: ', since its numbers vary between runs.{}",
        ch.plot().enabled() ? " It is also written as 11_measured.tsv beside the figures." : "");
  } else if ((m = read_measurements(committed_measurements()))) {
    ch.prose("Tokens per second for the token after n, a small decoder (E 256, 8 heads over 2, "
             "4 layers), one thread, measured on {}, {} (measured.tsv; --measure times this "
             "machine):",
             m->machine, m->date);
    for (const std::string& line : speed_lines(*m)) ch.say("{}", line);
  } else {
    ch.say("No measurements in chapters/11_decoding/measured.tsv: run with --measure.");
    return;
  }
  if (!ch.plot().enabled()) return;
  draw_decode_speed(ch.plot(), *m);
  if (live) course::write_file_atomically(ch.plot().out_dir() / "11_measured.tsv", to_tsv(*m));
}

std::filesystem::path committed_measurements() { return ATTN_CHAPTER11_DIR "/measured.tsv"; }

}  // namespace decoding
