// 10_efficient_attention: the same attention, made fast and small. The [n x n] weights never
// exist: keys and values stream past a tile of queries, and an online softmax keeps, per
// query, a running maximum m, a running sum l and an unnormalised output O.
//
//   online softmax   m_j = max(m_{j-1}, x_j),  l_j = l_{j-1} e^{m_{j-1} - m_j} + e^{x_j - m_j}
//   merge            m = max(m_a, m_b),        l = l_a e^{m_a - m} + l_b e^{m_b - m}
//   tiled forward    per key tile: S = Q_i K_j^T s, m' = max(m, rowmax S), P = e^{S - m'},
//                    l = l e^{m - m'} + rowsum P,  O = O e^{m - m'} + P V_j;  out = O / l,
//                    L = m + log l  (kept for the backward)
//   tiled backward   D = rowsum(dO * out), P = e^{S - L}, dS = P * (dO V^T - D)
//
//   10_efficient_attention [--row 3,1,4,1,5,9,2,6] [--split J] [--n N] [--d D]
//                          [--query-tile BQ] [--key-tile BK] [--mask none|causal|pad]
//                          [--padding P] [--measure [--measure-n N]] [--seed N] [--out DIR]
//                          [--no-plots] [--dump DIR] [--step]
//
// Timings go to stderr, a live measurement's table too, each line starting "measured: " (they
// vary between runs; stdout is the same bytes on every run). The speed figures are drawn from
// measured.tsv, measured on the course's machine, or with --measure from a live measurement of
// this one.
#include "attn/core/random.hpp"
#include "attn/kernels/tiled_attention.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"
#include "attn/ops/online_softmax.hpp"
#include "attn/ops/softmax.hpp"
#include "course/chapter.hpp"
#include "course/files.hpp"
#include "figures.hpp"
#include "measure.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace {

using attn::AllowedMask;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::Vector;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Knobs {
  std::vector<double> row{3, 1, 4, 1, 5, 9, 2, 6};  // the row the online softmax reads
  Index split = 3;                     // the merge's cut: entries [0, split) and [split, end)
  Index n = 10;                        // tokens of the tiled example (queries and keys)
  Index d = 4;                         // d_k = d_v of the tiled example
  Index query_tile = 4, key_tile = 3;  // B_q and B_k of the tiled example
  std::string mask = "none";           // the example's mask: none, causal or pad
  Index padding = 3;                   // pad: this many keys at the end are padding
  bool measure = false;                // time this machine instead of reading measured.tsv
  Index measure_n = 4096;              // with --measure: the longest sequence timed
};

// "(1.0597, 0.0819, ...)": the first six entries of a vector, each 8 wide, so a line stays
// within 100 columns whatever B_q is.
std::string first_entries(const Vector& v) {
  const Index shown = std::min<Index>(v.size(), 6);
  return fmt::format("({:>8.4f}{})", fmt::join(v.head(shown), ", "),
                     shown < v.size() ? ", ..." : "");
}

// ---- 1. The memory wall -------------------------------------------------------------------------

std::string mib(double bytes) {
  return bytes >= 1024.0 * 1024 * 1024 ? fmt::format("{:.0f} GiB", bytes / (1024.0 * 1024 * 1024))
                                       : fmt::format("{:.0f} MiB", bytes / (1024.0 * 1024));
}

void memory_wall(course::Chapter& ch) {
  ch.step("The memory wall: the n x n weights");
  ch.prose("Every chapter so far made the weights softmax(Q K^T / sqrt(d_k)) as one [n x n] "
           "matrix. For one head of width d = 64 in float32, the inputs and the output grow "
           "with n, the weights with n^2:");
  ch.say("{:>8}  {:>16}  {:>14}  {:>9}", "n", "Q, K, V and out", "weights n x n", "ratio");
  for (double n : {1024.0, 4096.0, 16384.0, 65536.0}) {
    const double io = 4 * n * 64 * 4, weights = n * n * 4;
    ch.say("{:>8}  {:>16}  {:>14}  {:>8.0f}x", course::with_commas(static_cast<long long>(n)),
           mib(io), mib(weights), weights / io);
  }
  ch.notice("At n = 65,536 the weights of one head are 16 GiB: written by Q K^T, read and "
            "written again by the softmax, read by the product with V. They do not fit in any "
            "cache, and at that size not in this machine's memory either.");

  // The split of the time, measured live: on stderr, since seconds differ between runs.
  const Index n = 1024;
  const efficiency::NaiveSplit t = efficiency::time_naive_attention(n);
  std::cerr << fmt::format(
      "measured: naive attention at n = {}, d = 64, one call: Q K^T {:.2f} ms ({:.0f}%), the "
      "softmax pass {:.2f} ms ({:.0f}%), P V {:.2f} ms ({:.0f}%)\n",
      n, t.scores * 1e3, 100 * t.scores / t.total(), t.softmax * 1e3, 100 * t.softmax / t.total(),
      t.values * 1e3, 100 * t.values / t.total());
  ch.prose("The program has just timed naive attention at n = 1,024 (the line 'measured:' on "
           "stderr; it varies by machine and load). The two GEMMs do all 4 n^2 d flops; the "
           "pass between them does none of them, but an exp per entry and a trip of the n x n "
           "matrix through memory, and its share of the time is what tiling removes.");
}

// ---- 2. Online softmax --------------------------------------------------------------------------

void online_softmax(course::Chapter& ch, const Knobs& k) {
  ch.step("Online softmax: one pass instead of three");
  const std::vector<float> x(k.row.begin(), k.row.end());
  const auto n = static_cast<Index>(x.size());
  const Eigen::Map<const attn::RowVector> row(x.data(), n);  // [1 x n]
  ch.show("x", row, {.precision = 2, .col_labels = course::labels("x_", n)});
  ch.prose("The safe softmax of chapter 04 reads the row three times: the maximum m, then "
           "the normaliser l = sum_j exp(x_j - m), then every exp(x_j - m) / l.");
  const float m3 = row.maxCoeff();
  const float l3 = (row.array() - m3).exp().sum();
  ch.say("three passes:  m = {:.4f}   l = {:.6f}", m3, l3);

  ch.prose("The online softmax keeps both in one pass. When a new entry raises the maximum, "
           "the sum so far was taken against the old maximum, and one factor e^(m_old - m_new) "
           "moves it to the new one:");
  // [online]
  attn::OnlineSoftmax state;  // m = -inf, l = 0: nothing seen
  ch.say("{:>4}  {:>8}  {:>9}  {:>19}  {:>10}", "j", "x_j", "m_j", "rescale e^(m' - m_j)", "l_j");
  for (Index j = 0; j < n; ++j) {
    const float m_old = state.max;  // m', the maximum before x_j
    state.add(
        x[static_cast<std::size_t>(j)]);  // m = max(m, x_j); l = l e^(m_old - m) + e^(x_j - m)
    ch.say("{:>4}  {:>8.2f}  {:>9.4f}  {:>19}  {:>10.6f}", j + 1, x[static_cast<std::size_t>(j)],
           state.max,
           j == 0 ? std::string("-")
                  : fmt::format("{:.6f}", attn::OnlineSoftmax::rescale(m_old, state.max)),
           state.sum);
  }
  // [online]
  ch.say("one pass:      m = {:.4f}   l = {:.6f}   (three passes: l = {:.6f}, |diff| {:.1e})",
         state.max, state.sum, l3, std::abs(state.sum - l3));
  ch.notice("The old sum is rescaled only where the maximum grows (factor below 1); where it "
            "does not the factor is 1. The new term e^(x_j - m_j) is exactly 1 at an entry "
            "that sets the maximum, and below 1 everywhere else.");

  ch.prose("Two states of disjoint parts of the row merge the same way, in either order. This "
           "is what lets a tile of keys be summed on its own and folded into the rest:");
  const Index cut = std::min(k.split, n - 1);
  attn::OnlineSoftmax a, b;
  a.add(std::span<const float>(x.data(), static_cast<std::size_t>(cut)));
  b.add(std::span<const float>(x.data() + cut, static_cast<std::size_t>(n - cut)));
  const attn::OnlineSoftmax ab = attn::OnlineSoftmax::merge(a, b);
  const attn::OnlineSoftmax ba = attn::OnlineSoftmax::merge(b, a);
  ch.say("x_1..x_{}:  m = {:.4f}  l = {:.6f}", cut, a.max, a.sum);
  ch.say("x_{}..x_{}:  m = {:.4f}  l = {:.6f}", cut + 1, n, b.max, b.sum);
  ch.say("merge(a, b): m = {:.4f}  l = {:.6f}", ab.max, ab.sum);
  ch.say("merge(b, a): m = {:.4f}  l = {:.6f}  ({})", ba.max, ba.sum,
         ab.max == ba.max && ab.sum == ba.sum ? "the same bits" : "different bits");
  ch.say("log-sum-exp L = m + log l = {:.6f}", ab.log_sum_exp());
  ch.notice("The merge is symmetric, so its result does not depend on the order (to the last "
            "bit); against the one-pass sum it differs at most in the last bits, as any two "
            "orders of a float sum do.");
}

// ---- 3. Tiled attention, forward ----------------------------------------------------------------

struct Example {
  Matrix Q, K, V;       // [n x d] each
  AllowedMask allowed;  // [n x n], what the plain path is given
  bool causal = false;  // the tiled path needs no mask in memory for a causal one
  Index query_tile = 1, key_tile = 1;
};

Example make_example(course::Chapter& ch, const Knobs& k) {
  attn::Rng rng(ch.seed());
  Example e{attn::random_normal(rng, k.n, k.d),
            attn::random_normal(rng, k.n, k.d),
            attn::random_normal(rng, k.n, k.d),
            AllowedMask::Constant(k.n, k.n, true),
            k.mask == "causal",
            k.query_tile,
            k.key_tile};
  if (e.causal) e.allowed = attn::causal_mask(k.n);
  if (k.mask == "pad") e.allowed.rightCols(k.padding).setConstant(false);  // padded keys
  return e;
}

// The tiled path's options for the example: the causal flag, or a view of its mask.
attn::TiledAttentionOptions tiled_options(const Example& e) {
  attn::TiledAttentionOptions opts{
      .causal = e.causal, .query_tile = e.query_tile, .key_tile = e.key_tile};
  if (!e.causal) opts.allowed.emplace(e.allowed);
  return opts;
}

// What one query tile keeps while the key tiles stream past: per query the running maximum m
// and sum l of the online softmax, and the output O not yet divided by l.
struct QueryTileState {
  Vector m;  // [B_q], -inf before any allowed key
  Vector l;  // [B_q]
  Matrix O;  // [B_q x d_v]
};

// [fold]
// One key tile into the state: S = Q_i K_j^T * scale, masked [B_q x b_k]; V_j [b_k x d_v].
void fold_key_tile(QueryTileState& st, const Matrix& S, const Eigen::Ref<const Matrix>& V_j) {
  Matrix P = Matrix::Zero(S.rows(), S.cols());  // [B_q x b_k], this tile's exp(S - m)
  for (Index r = 0; r < S.rows(); ++r) {
    const float m_new = std::max(st.m[r], S.row(r).maxCoeff());
    if (m_new == -kInf) continue;  // no allowed key so far: nothing to add
    const float rescale = attn::OnlineSoftmax::rescale(st.m[r], m_new);  // e^(m - m_new)
    P.row(r) = (S.row(r).array() - m_new).exp().matrix();
    st.l[r] = st.l[r] * rescale + P.row(r).sum();  // the old sum, moved to the new maximum
    st.O.row(r) *= rescale;                        // the old output, likewise
    st.m[r] = m_new;
  }
  st.O += P * V_j;  // [B_q x d_v]
}
// [fold]

void tiled_forward(course::Chapter& ch, const Knobs& k, const Example& e) {
  ch.step("Tiled attention: queries in tiles outside, keys and values inside");
  const Index n = k.n, d = k.d, Bq = std::min(k.query_tile, n), Bk = std::min(k.key_tile, n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  ch.prose("FlashAttention-2's loop order: each tile of B_q queries is one task (one thread); "
           "the key and value tiles stream past it, and the query tile keeps only m, l and "
           "the unnormalised output O. Here n = {}, d = {}, B_q = {}, B_k = {}, mask: {}.",
           n, d, Bq, Bk, k.mask);
  const std::vector<std::string> tok = course::labels("t", n);
  ch.show("Q", e.Q, {.row_labels = tok});
  ch.dump("Q", e.Q);
  ch.dump("allowed", attn::AllowedBatch(e.allowed));  // [1, n, n]
  ch.dump("K", e.K);
  ch.dump("V", e.V);

  // The first query tile, step by step: a teaching version of the library's loop.
  const Matrix Qi = e.Q.topRows(Bq);  // [B_q x d], query tile 1
  QueryTileState st{Vector::Constant(Bq, -kInf), Vector::Zero(Bq), Matrix::Zero(Bq, d)};
  for (Index k0 = 0; k0 < n; k0 += Bk) {
    const Index bk = std::min(Bk, n - k0);
    Matrix S = Qi * e.K.middleRows(k0, bk).transpose() * scale;  // [B_q x b_k]
    for (Index r = 0; r < Bq; ++r) {
      for (Index c = 0; c < bk; ++c) {
        if (!e.allowed(r, k0 + c)) S(r, c) = -kInf;  // blocked: weight exactly 0
      }
    }
    fold_key_tile(st, S, e.V.middleRows(k0, bk));
    const Index tile = k0 / Bk + 1, tiles = (n + Bk - 1) / Bk;
    if (tile <= 3 || tile == tiles) {  // the first three and the last: the pattern, not pages
      ch.say("after key tile {} of {} ({}):", tile, tiles,
             bk == 1 ? fmt::format("key {}", k0 + 1) : fmt::format("keys {}..{}", k0 + 1, k0 + bk));
      ch.say("  m = {}", first_entries(st.m));
      ch.say("  l = {}", first_entries(st.l));
    } else if (tile == 4) {
      ch.say("...");
    }
  }
  Matrix out_i = Matrix::Zero(Bq, d);  // [B_q x d]: O / l, zero where no key was allowed
  for (Index r = 0; r < Bq; ++r) {
    if (st.l[r] > 0) out_i.row(r) = st.O.row(r) / st.l[r];
  }
  ch.show("out of query tile 1 = O / l", out_i, {.row_labels = course::labels("t", Bq)});

  // The library: every tile, and L kept.
  const attn::TiledAttentionOptions opts = tiled_options(e);
  const attn::TiledAttentionResult tiled = attn::tiled_attention(e.Q, e.K, e.V, opts);
  const attn::AttentionResult plain =
      attn::attention(e.Q, e.K, e.V, {.allowed = e.allowed});  // weights [n x n]
  ch.say("the loop above against attn::tiled_attention, rows 1..{}:  max |diff| = {:.1e}", Bq,
         attn::max_abs_diff(out_i, tiled.out.topRows(Bq)));
  ch.say("attn::tiled_attention against attention() (chapter 05), all rows:  max |diff| = {:.1e}",
         attn::max_abs_diff(tiled.out, plain.out));
  ch.show("L = m + log l, per query", tiled.lse.transpose(), {.col_labels = tok});
  ch.dump("out", tiled.out);
  ch.dump("L", attn::RowVector(tiled.lse.transpose()));
  ch.notice("O is divided by l once, at the end; until then every new maximum only rescales "
            "it. L is all the backward pass will keep of the weights: n numbers, not n^2.");

  // Against float64, FlashAttention's own criterion: the tiled error is of the plain one's size.
  const MatrixD Qd = e.Q.cast<double>(), Kd = e.K.cast<double>(), Vd = e.V.cast<double>();
  const attn::AttentionResultD exact = attn::attention(Qd, Kd, Vd, {.allowed = e.allowed});
  const double ulp = std::numeric_limits<float>::epsilon() *
                     std::max(1.0, exact.out.cwiseAbs().maxCoeff());  // float's step at |out|
  ch.say("error against float64:  plain {:.1e}   tiled {:.1e}   (one float ulp at |out|: {:.1e})",
         attn::max_abs_diff(plain.out.cast<double>(), exact.out),
         attn::max_abs_diff(tiled.out.cast<double>(), exact.out), ulp);
  ch.notice("FlashAttention's criterion: the tiled error is of the plain one's size (the tests "
            "require at most twice it, or a few ulps where both are a rounding or two).");

  ch.prose("Which tiles are computed: '#' without a mask test, '/' with one, '.' skipped "
           "whole (with a causal mask, the tiles above the diagonal; with padding, the tiles "
           "of padded keys):");
  const attn::TileMap map = attn::tile_map(n, n, opts);
  efficiency::show_tile_map(ch, map);
  const attn::TileCounts c = map.counts();
  ch.say("{} tiles: {} without a mask test, {} mixed, {} skipped", c.total, c.full, c.mixed,
         c.skipped);
  const attn::TiledAttentionOptions defaults;
  const attn::TileCounts big = attn::count_tiles(4096, 4096, {.causal = true});
  ch.notice("At n = 4,096 with the library's default {} x {} tiles, a causal mask skips {} of "
            "{} tiles ({:.1f}%): half the work is never done, where the plain path computes "
            "every score and then blocks it.",
            defaults.query_tile, defaults.key_tile, course::with_commas(big.skipped),
            course::with_commas(big.total),
            100.0 * static_cast<double>(big.skipped) / static_cast<double>(big.total));
}

// ---- 4. Tiled attention, backward ---------------------------------------------------------------

void tiled_backward(course::Chapter& ch, const Example& e) {
  ch.step("The backward pass from L: recompute, do not store");
  ch.prose("Chapter 09's backward read the weights P. The tiled backward recomputes each tile "
           "of them from Q, K and L, P = exp(S - L), and replaces rowsum(P * dP) by "
           "D = rowsum(dO * out), which needs no P at all:");
  ch.say("  D = rowsum(dO * out)   P = exp(Q_i K_j^T s - L)   dP = dO_i V_j^T   dS = P * (dP - D)");
  ch.say("  dV_j += P^T dO_i       dK_j += s dS^T Q_i         dQ_i += s dS K_j");
  attn::Rng rng = ch.rng("upstream gradient");
  const Matrix dO = attn::random_normal(rng, e.Q.rows(), e.V.cols());  // [n x d]
  const attn::TiledAttentionOptions opts = tiled_options(e);
  const attn::TiledAttentionResult fwd = attn::tiled_attention(e.Q, e.K, e.V, opts);
  const attn::AttentionGrads tiled = attn::tiled_attention_backward(e.Q, e.K, e.V, fwd, dO, opts);
  const attn::AttentionResult plain_fwd = attn::attention(e.Q, e.K, e.V, {.allowed = e.allowed});
  const attn::AttentionGrads plain =
      attn::attention_backward(e.Q, e.K, e.V, plain_fwd.weights, dO, {.allowed = e.allowed});
  ch.say("against chapter 09's attention_backward:  dQ {:.1e}   dK {:.1e}   dV {:.1e}",
         attn::max_abs_diff(tiled.dQ, plain.dQ), attn::max_abs_diff(tiled.dK, plain.dK),
         attn::max_abs_diff(tiled.dV, plain.dV));
  ch.dump("dO", dO);
  ch.dump("dQ", tiled.dQ);
  ch.dump("dK", tiled.dK);
  ch.dump("dV", tiled.dV);
  ch.notice("Recomputing costs a product: 5 per tile pair where the plain backward makes 4 (S "
            "again). The key tiles run in a fixed number of groups, each adding into a copy of "
            "dQ of its own, so every sum has one order whatever the threads. Not storing P saves "
            "n^2 numbers per head, which is what makes long sequences fit at all.");
}

// ---- 5. The measurements ------------------------------------------------------------------------

void measurements(course::Chapter& ch, const Knobs& k) {
  ch.step("What it buys: speed and memory");
  std::optional<efficiency::Measurements> m;
  const char* note = "GFLOP/s, float32, d = 64, one thread, 4 n^2 d flops counted for every path "
                     "(the causal path does about half of them, so it can pass 100%).";
  if (k.measure) {
    m = efficiency::measure(
        k.measure_n, [](const std::string& what) { std::cerr << "measuring: " << what << "\n"; });
    // Seconds vary between runs: the table goes to stderr, so stdout stays the same bytes.
    for (const auto& part : {efficiency::speed_lines(*m), efficiency::tile_and_thread_lines(*m)})
      for (const std::string& line : part) std::cerr << "measured: " << line << "\n";
    ch.prose(
        "Measured live on this machine (--measure): the table is on stderr, on the lines "
        "starting 'measured: ', since its numbers vary between runs.{}",
        ch.plot().enabled() ? " It is also written as 10_measured.tsv beside the figures." : "");
    ch.notice("{}", note);
  } else {
    m = efficiency::read_measurements(efficiency::committed_measurements());
    if (!m) {
      ch.say("No measurements in chapters/10_efficient_attention/measured.tsv: run with "
             "--measure.");
      return;
    }
    ch.say("Measured on {}, {} (measured.tsv; --measure times this machine).", m->machine, m->date);
    for (const std::string& line : efficiency::speed_lines(*m)) ch.say("{}", line);
    ch.notice("{}", note);
    for (const std::string& line : efficiency::tile_and_thread_lines(*m)) ch.say("{}", line);
  }

  for (const efficiency::MemoryPoint& p : m->memory) {
    if (p.n == 16384 || p.n == 65536) {
      ch.say("peak memory above the inputs and the output, {} at n = {}: {:.1f} MiB", p.path,
             course::with_commas(p.n), p.mib);
    }
  }
  if (ch.plot().enabled()) efficiency::draw_figures(ch.plot(), *m);
  if (k.measure && ch.plot().enabled()) {
    course::write_file_atomically(ch.plot().out_dir() / "10_measured.tsv", efficiency::to_tsv(*m));
  }
}

void lesson(course::Chapter& ch, const Knobs& k) {
  ch.intro("n = {}, d = {}, tiles {}x{}, {}, seed {}", k.n, k.d, k.query_tile, k.key_tile,
           k.mask == "none" ? "no mask" : k.mask, ch.seed());
  memory_wall(ch);
  online_softmax(ch, k);
  const Example e = make_example(ch, k);
  tiled_forward(ch, k, e);
  tiled_backward(ch, e);
  measurements(ch, k);
  ch.finish({"The weights need not exist: an online softmax folds each key tile into m, l and O.",
             "The merge of two partial softmax states is order-free, so tiles can run in any order "
             "and on any thread.",
             "L = m + log l per query is all the backward keeps; it recomputes P tile by tile.",
             "Memory grows with n, not n^2; a causal mask skips the tiles above the diagonal."},
            {{"--mask causal", "tiles above the diagonal skipped, half the work"},
             {"--mask pad --padding 5", "the padded keys' tiles skipped"},
             {"--query-tile 1 --key-tile 1", "the online softmax one key at a time: the same out"},
             {"--measure", "time this machine and draw its figures"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("10_efficient_attention", "Efficient attention: online softmax and tiles",
                     2026);
  Knobs k;
  ch.option("--row", k.row,
            "the row the online softmax reads: 2 to 16 comma-separated numbers in [-1000, 1000]")
      .items(',', 2, 16)
      .range(-1000, 1000);
  ch.option("--split", k.split, "the merge's cut: entries before and from it").range(1, 15);
  ch.option("--n", k.n, "tokens of the tiled example").range(1, 64);
  ch.option("--d", k.d, "d_k = d_v of the tiled example").range(1, 64);
  ch.option("--query-tile", k.query_tile, "B_q, queries per tile").range(1, 64);
  ch.option("--key-tile", k.key_tile, "B_k, keys per tile").range(1, 64);
  ch.option("--mask", k.mask, "the example's mask: none, causal or pad")
      .one_of({"none", "causal", "pad"});
  ch.option("--padding", k.padding, "with --mask pad: how many keys at the end are padding")
      .range(0, 64);
  ch.flag("--measure", k.measure,
          "time this machine (about 20 s) and draw the speed figures from it");
  ch.option("--measure-n", k.measure_n,
            "with --measure: the longest sequence timed (16 takes about 2 s)")
      .range(16, 4096);
  ch.require_knobs([&] {
    if (k.split >= std::ssize(k.row)) {
      return fmt::format("--split {} must be below the row's length {}", k.split, k.row.size());
    }
    if (k.mask == "pad" && k.padding > k.n) {
      return fmt::format("--padding {} is more than --n {}", k.padding, k.n);
    }
    if (ch.given("--measure-n") && !k.measure) return std::string("--measure-n needs --measure");
    return std::string();
  });
  return ch.run(argc, argv, [&] { lesson(ch, k); });
}
