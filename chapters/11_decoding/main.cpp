// 11_decoding: the decoder at work. A model that generates writes one token at a time, each
// from the tokens before it; everything today's decoders add to attention serves that loop.
//
//   KV cache         keep every layer's k and v; a new token computes one row, not n
//   RoPE             q_m . k_n with each pair of features turned by m theta_i, n theta_i:
//                    (R(m) q) . (R(n) k) = q . R(n - m) k depends on m - n alone
//   grouped queries  g key/value heads shared by h/g query heads: the cache shrinks h/g times
//   sliding window   query i reads keys (i - W, i]: a rolling cache of W rows
//   latent attention cache c = x W_DKV^T (d_c numbers); absorb W_UK into the query
//
//   11_decoding [--d-model E] [--heads H] [--kv-heads G] [--layers L] [--window W]
//               [--prompt N] [--new N] [--layout interleaved|halves] [--seed N] [--out DIR]
//               [--measure [--measure-n N]] [--no-plots] [--dump DIR] [--step]
//
// Timings (--measure) go to stderr on lines starting "measured: "; stdout is the same bytes.
#include "attn/core/random.hpp"
#include "attn/layers/grouped_query.hpp"
#include "attn/layers/latent_attention.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/models/language_model.hpp"
#include "attn/ops/masks.hpp"
#include "attn/ops/rope.hpp"
#include "course/chapter.hpp"
#include "figures.hpp"
#include "measure.hpp"
#include "real_sizes.hpp"
#include "tokens.hpp"

#include <algorithm>
#include <span>
#include <string>
#include <vector>

namespace {

using attn::Arithmetic;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using decoding::from_zero;
using decoding::random_tokens;

struct Knobs {
  Index d_model = 16, heads = 4, kv_heads = 2, layers = 2;
  Index window = 0;             // 0: full causal attention
  Index prompt = 5, fresh = 8;  // the prompt's tokens and how many to generate
  std::string layout = "interleaved";
  bool measure = false;    // time this machine instead of reading measured.tsv
  Index measure_n = 4096;  // with --measure: the longest context timed
};

constexpr Index kVocab = 12;  // token ids 0..11: enough to generate, few enough to read

attn::LanguageModelConfig config_of(const Knobs& knobs, Index window) {
  return {.vocab = kVocab,
          .d_model = knobs.d_model,
          .heads = knobs.heads,
          .kv_heads = knobs.kv_heads,
          .d_ff = 2 * knobs.d_model,
          .layers = knobs.layers,
          .context = 128,
          .window = window,
          .rope_layout =
              knobs.layout == "halves" ? attn::RopeLayout::halves : attn::RopeLayout::interleaved};
}

// ---- 1. Generation, one token at a time ---------------------------------------------------------

void generation(course::Chapter& ch, const Knobs& knobs) {
  ch.step("Generation: one token at a time, with and without a KV cache");
  attn::Rng rng(ch.seed());
  const attn::LanguageModel model = attn::language_model_init(rng, config_of(knobs, knobs.window));
  attn::Rng prompt_rng = ch.rng("prompt");  // its own stream: the same prompt whatever the model
  const std::vector<int> prompt = random_tokens(prompt_rng, knobs.prompt, kVocab);
  ch.prose("A decoder of {} layers (E = {}, {} query heads over {} key/value heads, RoPE{}) with "
           "random weights and a vocabulary of {} tokens. It cannot write English yet (chapter "
           "12 trains it); what matters here is how it generates. The prompt: {}.",
           knobs.layers, knobs.d_model, knobs.heads, knobs.kv_heads,
           knobs.window ? fmt::format(", window {}", knobs.window) : "", kVocab,
           fmt::join(prompt, " "));

  // [uncached]
  // Without a cache: the whole sequence again for every new token, keep the last row.
  std::vector<int> uncached = prompt;
  Matrix uncached_logits(knobs.fresh, kVocab);  // [new x V]: the row each token was chosen from
  for (Index s = 0; s < knobs.fresh; ++s) {
    const Matrix logits = attn::language_model_forward(model, uncached, Arithmetic::rows);
    uncached_logits.row(s) = logits.bottomRows(1);
    uncached.push_back(attn::greedy_token<float>(logits.bottomRows(1)));
  }
  // [uncached]
  // [cached]
  // With a cache: the prompt at once (prefill), then one row per layer per token (decode).
  attn::DecodeState state = attn::make_decode_state(model);  // one KvCache per layer
  std::vector<int> cached = prompt;
  Matrix cached_logits(knobs.fresh, kVocab);                                      // [new x V]
  Matrix row = attn::language_model_prefill(model, prompt, state).bottomRows(1);  // [1 x V]
  for (Index s = 0; s < knobs.fresh; ++s) {
    cached_logits.row(s) = row;
    cached.push_back(attn::greedy_token<float>(row));
    // Each held row: K and V of g kv heads, d_k wide, in every layer, in float.
    const Index held_bytes = state.size() * 2 * knobs.kv_heads * (knobs.d_model / knobs.heads) *
                             knobs.layers * Index{sizeof(float)};
    ch.say("token {:>2} at position {:>2}: {:>2}   cache: {:>2} rows per layer, {} bytes", s + 1,
           std::ssize(cached) - 1, cached.back(), state.size(), course::with_commas(held_bytes));
    if (s + 1 < knobs.fresh) row = attn::language_model_decode(model, cached.back(), state);
  }
  // [cached]
  for (const auto& line : decoding::token_lines("generated with the cache:", cached))
    ch.say("{}", line);
  for (const auto& line : decoding::token_lines("generated without a cache:", uncached))
    ch.say("{}", line);
  ch.say("logits, cached against uncached: max |diff| = {:.1e} ({})",
         attn::max_abs_diff(cached_logits, uncached_logits),
         attn::max_abs_diff(cached_logits, uncached_logits) == 0 ? "the same bits" : "differ");
  ch.notice("The same bits, not merely close: Arithmetic::rows computes every row as a decode "
            "step computes its one row (each product of one row alone, each attention row by "
            "the decode kernel, keys in position order). Any slip of the cache, a position one "
            "off for RoPE, a key too many in the window, would show here as a difference.");

  // The whole text at once both ways: [n x V] each.
  const Matrix fast = attn::language_model_forward(model, cached, Arithmetic::blocked);
  const Matrix exact = attn::language_model_forward(model, cached, Arithmetic::rows);
  ch.say("the fast path (GEMMs, tiled attention) against rows: max |diff| = {:.1e} of logits "
         "up to {:.2f}",
         attn::max_abs_diff(fast, exact), exact.cwiseAbs().maxCoeff());
  ch.notice("The tiled attention sums the keys tile by tile, a decode step one key at a time: "
            "the fast prefill differs from decoding by rounding, a few units in the last place. "
            "(The products agree: the library's GEMM sums each entry in the same order for one "
            "row or n.) The cache is checked bit for bit where the arithmetic is the same, and "
            "within rounding where it cannot be.");

  // The cost: the uncached loop ran the model on prompt, prompt + 1, ..., n - 1 tokens; the
  // cached one computed the prompt's rows once and one row per later token.
  const Index n = std::ssize(cached), p = knobs.prompt;
  ch.say("rows computed per layer: {} without a cache, {} with one",
         (n - 1) * n / 2 - (p - 1) * p / 2, n - 1);
  decoding::show_speed(ch, knobs.measure, knobs.measure_n);  // measured.tsv, or --measure live
  ch.notice("Recomputing costs O(n) rows per token, O(n^2) for a whole text; a decode step one "
            "row. What it still reads in full is the cache: n rows of keys and values per "
            "layer, for every token, which is what the rest of this chapter makes smaller.");
}

// ---- 2. RoPE ------------------------------------------------------------------------------------

void rope(course::Chapter& ch, const Knobs& knobs) {
  ch.step("RoPE: positions as rotations of q and k");
  const Index d = 8;
  const attn::RopeTable table = attn::rope_table(64, d);  // cos, sin [64 x 4]
  ch.prose("Each pair of a head's d = {} features turns by m theta_i at position m, theta_i = "
           "10000^(-2i/d): the frequencies of chapter 07's sinusoids, one radian per position "
           "for pair 0 down to 1/1000 for the last.",
           d);
  ch.show("theta", attn::rope_frequencies(d).transpose(), {.precision = 4});
  attn::Rng rng = ch.rng("rope vectors");
  const Matrix q = attn::random_normal(rng, 1, d), k = attn::random_normal(rng, 1, d);  // [1 x d]
  const attn::RopeLayout layout = config_of(knobs, 0).rope_layout;                      // --layout
  // [rope_scores]
  // Score of the query at position m with the key at position n: S [6 x 6].
  const auto scores = [&](Index shift, attn::RopeLayout q_layout, attn::RopeLayout k_layout) {
    Matrix S(6, 6);
    for (Index m = 0; m < 6; ++m) {
      for (Index n = 0; n < 6; ++n) {
        const Matrix qm =  // [1 x d]: q turned to position m
            attn::rope<float>(q, table, {.layout = q_layout, .first_position = m + shift});
        const Matrix kn =  // [1 x d]: k turned to position n
            attn::rope<float>(k, table, {.layout = k_layout, .first_position = n + shift});
        S(m, n) = (qm * kn.transpose())(0, 0);
      }
    }
    return S;
  };
  // [rope_scores]
  const Matrix S = scores(0, layout, layout);
  ch.show("S(m, n) = R(m)q . R(n)k", S,
          {.row_labels = from_zero("m=", 6), .col_labels = from_zero("n=", 6)});
  ch.say("moved by 40 positions (m + 40, n + 40): max |diff| = {:.1e}",
         attn::max_abs_diff(scores(40, layout, layout), S));
  ch.notice("Each diagonal is one number: the score depends on m - n alone, because R(m)^T R(n) "
            "= R(n - m). Moving both positions changes nothing but rounding (the angles m "
            "theta_i are rounded at other m).");

  // Chapter 07's rotation, and the two layouts.
  const Matrix at5 = attn::rope<float>(q, table, {.first_position = 5});  // [1 x d]
  const MatrixD q_d = q.cast<double>();  // [1 x d], in double: the comparison is of formulas
  ch.say("RoPE at position 5 against chapter 07's q R(5), in double: max |diff| = {:.1e}",
         attn::max_abs_diff(attn::rope<double>(q_d, table, {.first_position = 5}),
                            q_d * attn::relative_rotation(5, d)));
  ch.notice("RoPE is chapter 07's rotation with tokens as rows: the row at position m is "
            "multiplied by chapter 07's R(m), so q_m . k_n = q R(m) R(n)^T k^T = q R(m - n) k^T "
            "(RoPE's own 2 x 2 block, [cos -sin; sin cos] on a column pair, is R's transposed: "
            "chapter 07 stored each pair as (sin, cos)).");
  const std::vector<Index> perm = attn::rope_layout_permutation(d);
  Matrix q_halves(1, d);  // the same vector with its features where the halves layout pairs them
  for (Index c = 0; c < d; ++c) q_halves(0, perm[static_cast<std::size_t>(c)]) = q(0, c);
  const Matrix turned =  // [1 x d], in the halves layout
      attn::rope<float>(q_halves, table, {.layout = attn::RopeLayout::halves, .first_position = 5});
  Matrix back(1, d);  // [1 x d]: turned, its features put back in interleaved order
  for (Index c = 0; c < d; ++c) back(0, c) = turned(0, perm[static_cast<std::size_t>(c)]);
  ch.say("halves layout on permuted features against interleaved: max |diff| = {:.1e}",
         attn::max_abs_diff(back, at5));
  const Matrix mixed = scores(0, attn::RopeLayout::interleaved, attn::RopeLayout::halves);
  ch.show("S with q interleaved, k halves", mixed, {.row_labels = from_zero("m=", 6)});
  ch.notice("Interleaved pairs (2i, 2i+1) are the paper's and llama2.c's; halves (i, i + d/2) "
            "Hugging Face's rotate_half. Each is a permutation of the other, but mixing them "
            "pairs features that were never meant to turn together: the diagonals fall apart, "
            "and scores depend on where the tokens are, not only how far apart.");

  // The long-range decay: the mean score of a vector with itself against distance.
  std::vector<double> distances;  // 1 .. 4096, every distance
  for (Index m = 1; m <= 4096; ++m) distances.push_back(static_cast<double>(m));
  std::vector<std::vector<double>> curves;
  for (const double base : {10000.0, 500000.0}) {
    const attn::VectorD theta = attn::rope_frequencies(64, base);  // [32]
    std::vector<double> curve;
    for (const double m : distances) curve.push_back((m * theta.array()).cos().mean());
    curves.push_back(curve);
  }
  const auto at = [&](std::size_t m) { return curves[0][m - 1]; };  // base 10000, distance m
  ch.say("mean of cos(m theta_i), d = 64: m = 1: {:.3f}, 16: {:.3f}, 256: {:.3f}, 4096: {:.3f}",
         at(1), at(16), at(256), at(4096));
  ch.notice("For a vector with itself the expected score is the mean of cos(m theta_i): it "
            "falls with distance (RoFormer's long-range decay), which is why nearby tokens "
            "score higher at equal content. Llama 3's base 500000 slows the fall for long "
            "contexts.");
  if (ch.plot().enabled()) decoding::draw_rope_decay(ch.plot(), distances, curves, {1e4, 5e5}, 64);
}

// ---- 3. Grouped-query attention -----------------------------------------------------------------

void grouped_queries(course::Chapter& ch, const Knobs& knobs) {
  ch.step("Grouped-query attention: fewer keys and values than queries");
  attn::Rng rng = ch.rng("grouped queries");
  const Index E = knobs.d_model, h = knobs.heads, n = 6, dk = E / h;
  const Matrix x = attn::random_normal(rng, n, E);  // [6 x E]
  ch.prose("Query head a reads key/value head floor(a / (h/g)). With g = h every query head "
           "has its own keys (multi-head attention); with g = 1 all share one (multi-query).");
  std::vector<Index> groups{h};  // g = h, the knob's g, g = 1: each once
  for (const Index g : {knobs.kv_heads, Index{1}}) {
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  }
  double worst = 0;  // over every g: 0 when grouped-query and multi-head agree to the bit
  for (const Index g : groups) {
    const attn::GroupedQueryAttention gqa = attn::grouped_query_init(rng, E, h, g);
    const attn::GroupedQueryResult r = attn::grouped_query_forward(gqa, x, {.need_weights = true});
    // The same layer as multi-head attention: each kv head's rows copied to its query heads.
    Matrix in_proj(3 * E, E);  // [3E x E]: W_Q, then W_K and W_V repeated per group
    in_proj.topRows(E) = gqa.q_proj.weight;
    for (Index a = 0; a < h; ++a) {  // query head a reads kv head a / (h / g)
      in_proj.middleRows(E + a * dk, dk) = gqa.k_proj.weight.middleRows(a / (h / g) * dk, dk);
      in_proj.middleRows(2 * E + a * dk, dk) = gqa.v_proj.weight.middleRows(a / (h / g) * dk, dk);
    }
    const attn::MultiHeadAttention mha = attn::multi_head_from_pytorch(
        in_proj, attn::RowVector(), gqa.out_proj.weight, attn::RowVector(), h);
    const attn::AllowedMask causal = attn::causal_mask(n);
    const attn::MultiHeadResult m = attn::multi_head_forward(mha, x, x, x, {.allowed = causal});
    worst = std::max(worst, attn::max_abs_diff(r.out, m.out));
    ch.say("g = {}: K and V {}, cache {:>2} numbers/token/layer; against MHA: max |diff| {:.1e}", g,
           course::shape(r.K), 2 * g * dk, attn::max_abs_diff(r.out, m.out));
  }
  ch.notice("Grouped-query attention is multi-head attention whose key and value heads are tied "
            "within each group: {}. Heads are column blocks, as in chapter 06: nothing is copied "
            "per query head. The cache holds 2 g d_k numbers per token and layer, h/g times "
            "fewer: Llama 3 8B runs 32 query heads over 8.",
            worst == 0 ? "the same bits here"
                       : "the same to rounding here (a narrower product sums in another order)");
}

// ---- 4. Sliding windows -------------------------------------------------------------------------

void sliding_windows(course::Chapter& ch, const Knobs& knobs) {
  ch.step("Sliding windows: the last W keys, and a rolling cache");
  const Index W = knobs.window > 0 ? knobs.window : 3;
  ch.prose("A window of W = {}{}: query i reads only keys j with i - W < j <= i.", W,
           knobs.window > 0 ? "" : " (--window 0 elsewhere; this step shows one all the same)");
  const attn::AllowedMask mask = attn::sliding_window_mask(8, W);  // [8 x 8]
  ch.show(fmt::format("sliding_window_mask(8, {})", W), mask.cast<float>(), {.precision = 0});
  ch.notice("Query i reads keys i - W + 1 .. i: W keys counting itself, never W + 1 (a "
            "classic off-by-one: a window that reads 129 keys where it should read 128).");

  attn::Rng rng = ch.rng("window model");
  const attn::LanguageModel model = attn::language_model_init(rng, config_of(knobs, W));
  const std::vector<int> text = random_tokens(rng, 3 * W + 2, kVocab);  // wraps the cache 3 times
  const Matrix full = attn::language_model_forward(model, text, Arithmetic::rows);  // [n x V]
  attn::DecodeState state = attn::make_decode_state(model);
  double worst = attn::max_abs_diff(
      attn::language_model_prefill(model, std::span<const int>(text).first(1), state),
      full.topRows(1));
  for (std::size_t t = 1; t < text.size(); ++t) {
    const Matrix row = attn::language_model_decode(model, text[t], state);  // [1 x V]
    worst = std::max(worst, attn::max_abs_diff(row, full.row(static_cast<Index>(t))));
    if (t + 1 == text.size() || static_cast<Index>(t) < W + 2) {
      if (t == 1) ch.say("layer 0's key cache, slot by slot (-1: not filled yet):");
      ch.say("after position {:>2}: slots hold [{}]", t,
             fmt::join(decoding::slot_positions(state.layers[0].keys), ", "));
    }
  }
  ch.say("{} tokens through a rolling cache of {} rows: max |diff| against the uncached "
         "forward = {:.1e}",
         text.size(), W, worst);

  // The receptive field: which tokens can move which logits after L layers.
  // 3 layers reach 3 (W - 1) + 1 tokens: the sequence is one longer, so the edge shows.
  const Index n = std::max<Index>(16, 3 * (W - 1) + 2), last = n - 1;
  std::vector<Matrix> reach;
  for (Index L = 1; L <= 3; ++L) {
    Knobs deeper = knobs;
    deeper.layers = L;
    attn::Rng r = ch.rng("receptive field");
    const attn::LanguageModel m = attn::language_model_init(r, config_of(deeper, W));
    const std::vector<int> ids = random_tokens(r, n, kVocab);
    const Matrix before = attn::language_model_forward(m, ids, Arithmetic::rows);  // [n x V]
    Matrix moved = Matrix::Zero(n, n);  // [outputs x inputs]
    for (Index p = 0; p < n; ++p) {
      std::vector<int> changed = ids;
      changed[static_cast<std::size_t>(p)] = (ids[static_cast<std::size_t>(p)] + 1) % kVocab;
      const Matrix after = attn::language_model_forward(m, changed, Arithmetic::rows);  // [n x V]
      for (Index i = 0; i < n; ++i) moved(i, p) = after.row(i) == before.row(i) ? 0.0f : 1.0f;
    }
    Index first = 0;  // the earliest input that moves the last output
    while (moved(last, first) == 0.0f) ++first;
    ch.say("{} layer{}: output {} is moved by inputs {}..{} ({} of them; L (W - 1) + 1 = {})", L,
           L > 1 ? "s" : "", last, first, last, static_cast<Index>(moved.row(last).sum()),
           L * (W - 1) + 1);
    reach.push_back(moved);
  }
  ch.notice("Each layer lets information travel W - 1 positions further: after L layers an "
            "output can be moved by the last L (W - 1) + 1 inputs. Mistral 7B's 32 layers of W = "
            "4096 reach about "
            "131,000 tokens while caching only 4,096 per layer.");
  if (ch.plot().enabled()) decoding::draw_receptive_field(ch.plot(), reach, W);
}

// ---- 5. Multi-head latent attention -------------------------------------------------------------

void latent_attention(course::Chapter& ch) {
  ch.step("Latent attention: cache a small c, absorb W_UK into the query");
  attn::Rng rng = ch.rng("latent attention");
  const attn::LatentAttentionSizes sizes{
      .d_model = 16, .heads = 2, .d_nope = 4, .d_rope = 4, .d_v = 4, .d_c = 6};
  const attn::LatentAttention mla = attn::latent_attention_init(rng, sizes);
  ch.prose("Each token is compressed to c = x W_DKV^T ({} numbers); head a's keys and values are "
           "c W_UK_a^T and c W_UV_a^T ({} and {} wide), plus a RoPE key of {} shared by the {} "
           "heads. The naive form builds those keys and values; the absorbed form scores the "
           "query against c itself.",
           sizes.d_c, sizes.d_nope, sizes.d_v, sizes.d_rope, sizes.heads);
  const attn::RopeTable table = attn::rope_table(64, sizes.d_rope);
  const attn::LatentAttentionOptions opts{.rope = &table};
  const Matrix x = attn::random_normal(rng, 6, sizes.d_model);  // [6 x 16]
  const attn::LatentAttentionResult naive = attn::latent_attention_forward(mla, x, opts);
  const attn::LatentAttentionResult absorbed = attn::latent_attention_absorbed(mla, x, opts);
  ch.show("c = x W_DKV^T, what the cache keeps", naive.c, {.precision = 3});
  ch.say("absorbed (scores against c) against naive (K and V formed): max |diff| = {:.1e}",
         attn::max_abs_diff(absorbed.out, naive.out));
  attn::LatentCache cache(64, sizes.d_c, sizes.d_rope);  // room for 64 tokens
  Matrix decoded(6, sizes.d_model);                      // [6 x 16]
  for (Index t = 0; t < 6; ++t)
    decoded.row(t) = attn::latent_attention_decode(mla, x.row(t), cache, opts);
  ch.say("decoded token by token against the absorbed forward: max |diff| = {:.1e}",
         attn::max_abs_diff(decoded, absorbed.out));
  // The naive form's K [n x h (d_nope + d_rope)] and V [n x h d_v]: what a multi-head cache of
  // these heads would keep.
  ch.say("cache per token and layer: MLA {} numbers (d_c + d_rope), naive K and V {} (h d_qk + "
         "h d_v)",
         mla.cache_numbers_per_token(), naive.K.cols() + naive.V.cols());
  ch.notice("q . (W_UK c) = (q W_UK) . c: the query moves into the latent space once, and "
            "the keys are never formed. DeepSeek-V2 caches 512 + 64 = 576 numbers per token "
            "and layer where multi-head attention of its 128 heads would cache 32,768: as much "
            "as grouped-query attention with 576 / (2 x 128) = 2.25 key/value heads.");
}

// ---- 6. Real sizes ------------------------------------------------------------------------------

void real_sizes(course::Chapter& ch) {
  ch.step("What the cache costs at real sizes");
  for (const std::string& line : decoding::cache_table()) ch.say("{}", line);
  const double llama2 = decoding::numbers_per_token(decoding::published_model("Llama 2 7B"));
  ch.notice("16-bit numbers, one sequence; * past the context the model was released for (what "
            "its layout would cost there). Against Llama 2 7B's multi-head cache, grouped queries "
            "(Llama 3 8B) hold {:.0f} times fewer numbers per token, Mistral's window stops the "
            "growth at 4,096 tokens, and DeepSeek-V2's latent attention, with 60 layers to Llama "
            "2's 32, holds {:.1f} times fewer.",
            llama2 / decoding::numbers_per_token(decoding::published_model("Llama 3 8B")),
            llama2 / decoding::numbers_per_token(decoding::published_model("DeepSeek-V2")));
  ch.notice("ALiBi (Press et al. 2022) takes another road to positions: no rotation, a bias "
            "-s |i - j| added to each score, linear in distance, with a fixed slope s per head.");
  if (ch.plot().enabled()) decoding::draw_cache_sizes(ch.plot());
}

void lesson(course::Chapter& ch, const Knobs& knobs) {
  ch.intro("E = {}, {} heads over {} kv heads, {} layers, {}, RoPE {}, seed {}", knobs.d_model,
           knobs.heads, knobs.kv_heads, knobs.layers,
           knobs.window ? fmt::format("window {}", knobs.window) : "no window", knobs.layout,
           ch.seed());
  generation(ch, knobs);
  rope(ch, knobs);
  grouped_queries(ch, knobs);
  sliding_windows(ch, knobs);
  latent_attention(ch);
  real_sizes(ch);
  ch.finish(
      {"A KV cache turns each new token into one row per layer; cached and uncached runs "
       "agree to the bit when they share the arithmetic.",
       "RoPE makes q_m . k_n a function of m - n: chapter 07's rotation, applied to q and k.",
       "Grouped-query attention is multi-head attention with tied key/value heads: the cache "
       "shrinks h/g times.",
       "A window of W keys needs a rolling cache of W rows; L layers still reach L (W - 1) + 1 "
       "tokens.",
       "Latent attention caches c and scores against it directly."},
      {{"--window 4", "a rolling cache from the start, and windows through every step"},
       {"--kv-heads 1", "multi-query attention: one key/value head for all"},
       {"--layout halves", "Hugging Face's pairs: other scores, the same constant diagonals"},
       {"--new 30 --prompt 2", "generate longer: still the same bits"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("11_decoding",
                     "Decoding: KV cache, RoPE, grouped queries, windows, latent attention", 2026);
  Knobs knobs;
  ch.option("--d-model", knobs.d_model, "E, the model's width").range(4, 64);
  ch.option("--heads", knobs.heads, "h, the query heads (d_k = E / h must be even)").range(1, 16);
  ch.option("--kv-heads", knobs.kv_heads, "g, the key/value heads, dividing h").range(1, 16);
  ch.option("--layers", knobs.layers, "L, the decoder's layers").range(1, 6);
  ch.option("--window", knobs.window, "W, each query's last keys (0: all)").range(0, 16);
  ch.option("--prompt", knobs.prompt, "tokens in the prompt").range(1, 32);
  ch.option("--new", knobs.fresh, "tokens to generate").range(1, 32);
  ch.option("--layout", knobs.layout, "RoPE's pairs: interleaved or halves")
      .one_of({"interleaved", "halves"});
  ch.flag("--measure", knobs.measure,
          "time generation on this machine (about a minute) for the figure");
  ch.option("--measure-n", knobs.measure_n,
            "with --measure: time contexts 128, 256, ... up to this")
      .range(128, 4096);
  ch.require_knobs([&] {
    if (ch.given("--measure-n") && !knobs.measure)
      return std::string("--measure-n needs --measure");
    if (knobs.d_model % knobs.heads != 0 || (knobs.d_model / knobs.heads) % 2 != 0) {
      return fmt::format("--heads {} must divide --d-model {} into an even d_k", knobs.heads,
                         knobs.d_model);
    }
    if (knobs.heads % knobs.kv_heads != 0) {
      return fmt::format("--kv-heads {} must divide --heads {}", knobs.kv_heads, knobs.heads);
    }
    return std::string();
  });
  return ch.run(argc, argv, [&] { lesson(ch, knobs); });
}
