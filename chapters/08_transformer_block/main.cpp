// 08_transformer_block: a small encoder-decoder, end to end, with the shape after every stage.
//
//   encoder layer:  x = Norm(x + SelfAttention(x));       x = Norm(x + FFN(x))
//   decoder layer:  y = Norm(y + CausalSelfAttention(y)); y = Norm(y + CrossAttention(y, memory))
//                   y = Norm(y + FFN(y))                  (post-norm; --norm pre: y + f(Norm(y)))
//   FFN(x) = ReLU(x W_1^T + b_1) W_2^T + b_2
//
// Then what the block buys over an RNN (steps, path length, operations), and attention on a
// graph, where the mask is the adjacency matrix.
//
//   08_transformer_block [--layers L] [--heads H] [--d-model D] [--d-ff F] [--norm post|pre]
//                        [--seed N] [--out DIR] [--no-plots] [--dump DIR] [--step]
#include "attn/core/random.hpp"
#include "attn/layers/embedding.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/layers/transformer.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/masks.hpp"
#include "attn/ops/softmax.hpp"
#include "course/chapter.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using attn::AllowedBatch;
using attn::AllowedMask;
using attn::Batch;
using attn::Index;
using attn::Matrix;
using attn::TokenIds;

struct Knobs {
  Index layers = 2;           // encoder and decoder layers each
  Index heads = 4;            // heads per attention; must divide d_model
  Index d_model = 32;         // features per token
  Index d_ff = 64;            // width of the feed-forward layer
  std::string norm = "post";  // "post": Norm(x + f(x)), the paper's; "pre": x + f(Norm(x))
};

constexpr int kPad = 0, kBos = 1;  // id 0 = <pad>; id 1 = <bos>, the decoder's first input
const std::map<int, std::string> kTargetNames = {{kPad, "<pad>"}, {kBos, "<bos>"}};

// ids -> table[ids] + PE: [B, n, d_model].
Batch embed_with_positions(const Matrix& table, const TokenIds& ids) {
  Batch x = attn::embed(table, ids);                                      // [B, n, d_model]
  const Matrix pe = attn::sinusoidal_encoding(ids.cols(), table.cols());  // [n x d_model]
  for (Index b = 0; b < x.batch(); ++b) x[b] += pe;
  return x;
}

// "5-6" or "1, 5-6": the positions (from 1) of sentence b's <pad> tokens, read from the ids,
// wherever they are ("" when there are none).
std::string pad_positions(const TokenIds& ids, Index b) {
  std::vector<std::string> runs;
  for (Index j = 0; j < ids.cols(); ++j) {
    if (ids(b, j) != kPad) continue;
    Index end = j;
    while (end + 1 < ids.cols() && ids(b, end + 1) == kPad) ++end;
    runs.push_back(end == j ? fmt::format("{}", j + 1) : fmt::format("{}-{}", j + 1, end + 1));
    j = end;
  }
  return fmt::format("{}", fmt::join(runs, ", "));
}

// 1234567 -> "1.2e+06" for the big counts of the cost table.
std::string count(double v) {
  return v < 1e5 ? fmt::format("{:.0f}", v) : fmt::format("{:.2g}", v);
}

void lesson(course::Chapter& ch, const Knobs& k) {
  const Index L = k.layers, H = k.heads, E = k.d_model, F = k.d_ff, vocab = 10;
  const bool post = k.norm == "post";
  const attn::NormPlacement norm = post ? attn::NormPlacement::post : attn::NormPlacement::pre;
  const std::string add = post ? "Add & Norm" : "add";  // what follows each sub-layer
  ch.intro("layers {}, heads {}, d_model {}, d_ff {}, {}-norm, seed {}", L, H, E, F, k.norm,
           ch.seed());

  ch.step("A batch to translate: source and target of different lengths");
  TokenIds src(2, 6), tgt(2, 5);  // [B x n_s], [B x n_t]; every target starts with <bos>
  src << 5, 2, 1, 6, 0, 0,        //
      1, 3, 1, 4, 7, 2;
  tgt << 1, 8, 4, 0, 0,  //
      1, 2, 9, 3, 5;
  const Index B = src.rows(), n_s = src.cols(), n_t = tgt.cols();
  // A sentence's length is its real tokens; its padding comes after them.
  const Eigen::VectorX<Index> src_len = (src.array() != kPad).rowwise().count();  // [B]
  const Eigen::VectorX<Index> tgt_len = (tgt.array() != kPad).rowwise().count();  // [B]
  const std::vector<std::string> sentence = course::labels("sentence ", B);
  ch.show("source ids", src.cast<float>(),
          {.precision = 0, .row_labels = sentence, .col_labels = course::labels("", n_s)});
  ch.show("target ids (1 = <bos>)", tgt.cast<float>(),
          {.precision = 0, .row_labels = sentence, .col_labels = course::labels("", n_t)});
  ch.notice("source lengths {}, target lengths {}: padding (id {}) on both sides.",
            fmt::join(src_len, " and "), fmt::join(tgt_len, " and "), kPad);

  ch.step("Embedding + positional encoding: ids [B, n] -> [B, n, {}]", E);
  attn::Rng rng(ch.seed());
  const Matrix src_table = attn::embedding_init(rng, vocab, E);  // [vocab x d_model]
  const Matrix tgt_table = attn::embedding_init(rng, vocab, E);  // [vocab x d_model]
  const Batch src_x = embed_with_positions(src_table, src);      // [B, n_s, d_model]
  const Batch tgt_x = embed_with_positions(tgt_table, tgt);      // [B, n_t, d_model]
  ch.flow({{"source ids", src}, {"table[ids] + PE", src_x}});
  ch.flow({{"target ids", tgt}, {"table[ids] + PE", tgt_x}});
  const AllowedBatch src_mask = attn::padding_masks(src);  // [B, n_s, n_s]: source padding
  AllowedBatch tgt_mask = attn::padding_masks(tgt);        // [B, n_t, n_t]: target padding ...
  const AllowedMask causal = attn::causal_mask(n_t);       // [n_t x n_t]: ... and the future
  for (Index b = 0; b < B; ++b) tgt_mask[b] = tgt_mask[b].array() && causal.array();
  AllowedBatch cross_mask(B, n_t, n_s);  // [B, n_t, n_s]: every target query, real source keys
  for (Index b = 0; b < B; ++b) {
    cross_mask[b] = attn::padding_mask(std::span<const int>(src.row(b).data(), n_s), n_t);
  }
  ch.say("masks: encoder      {}  padding\n"
         "       decoder self {}  padding and causal\n"
         "       cross        {}  source padding",
         course::shape(src_mask), course::shape(tgt_mask), course::shape(cross_mask));

  // Post-norm wraps each sub-layer as Norm(x + f(x)), pre-norm as x + f(Norm(x)).
  ch.step("The encoder: {} x ({})", L,
          post ? "self-attention, Add & Norm, feed-forward, Add & Norm"
               : "Norm, self-attention, add; Norm, feed-forward, add");
  std::vector<attn::EncoderLayer> encoder;
  for (Index l = 0; l < L; ++l) encoder.push_back(attn::encoder_layer_init(rng, E, H, F, norm));
  attn::EncoderCache enc_cache;  // what every layer computed, enc_cache.at(b, layer)
  // [encoder]
  const Batch memory =  // [B, n_s, d_model]
      attn::encoder_forward(encoder, src_x, {.allowed = src_mask, .need_weights = true},
                            &enc_cache);  // need_weights: the figures draw them
  // [encoder]
  using Sub = attn::SublayerCache;
  using FFN = attn::FeedForwardCache;
  for (Index l = 0; l < L; ++l) {  // the shapes each sub-layer read and returned, from the cache
    using Enc = attn::EncoderLayerCache;
    const auto at = [&](auto part, auto tensor) { return enc_cache.stacked(l, part, tensor); };
    ch.flow({{fmt::format("layer {}: x", l + 1), at(&Enc::sublayer1, &Sub::input)},
             {fmt::format("self-attention ({} head{})", H, H == 1 ? "" : "s"),
              at(&Enc::sublayer1, &Sub::sublayer_out)},
             {add, at(&Enc::sublayer1, &Sub::output)},
             {"FFN hidden", at(&Enc::ff, &FFN::hidden)},
             {"FFN out", at(&Enc::sublayer2, &Sub::sublayer_out)},
             {add, at(&Enc::sublayer2, &Sub::output)}});
  }
  ch.show("memory[0] (the encoder's output for sentence 1)", memory[0],
          {.max_cols = 6, .row_labels = course::token_labels(src, 0)});
  ch.notice("every layer keeps the shape [B, n, d_model]: layers stack freely.");
  ch.notice("the FFN {} each token to d_ff = {} and back, one token at a time; tokens meet only in "
            "attention.",
            F > E   ? "widens"
            : F < E ? "narrows"
                    : "maps",
            F);

  ch.step("The decoder: {} x ({})", L,
          post ? "causal self-attn, Add & Norm, cross-attn, Add & Norm, FFN, Add & Norm"
               : "Norm, causal self-attn, add; Norm, cross-attn, add; Norm, FFN, add");
  std::vector<attn::DecoderLayer> decoder;
  for (Index l = 0; l < L; ++l) decoder.push_back(attn::decoder_layer_init(rng, E, H, F, norm));
  attn::DecoderCache dec_cache;  // dec_cache.at(b, layer)
  // [decoder]
  const Batch out = attn::decoder_forward(decoder, tgt_x, memory,  // [B, n_t, d_model]
                                          {.self_allowed = tgt_mask,
                                           .cross_allowed = cross_mask,
                                           .need_weights = true},  // the figures draw them
                                          &dec_cache);
  // [decoder]
  for (Index l = 0; l < L; ++l) {
    using Dec = attn::DecoderLayerCache;
    const auto at = [&](auto part, auto tensor) { return dec_cache.stacked(l, part, tensor); };
    const std::string cross =
        fmt::format("cross-attention (Q {}, K = V = memory {})",
                    course::shape(at(&Dec::sublayer2, &Sub::sublayer_in)), course::shape(memory));
    ch.flow({{fmt::format("layer {}: y", l + 1), at(&Dec::sublayer1, &Sub::input)},
             {"causal self-attention", at(&Dec::sublayer1, &Sub::sublayer_out)},
             {add, at(&Dec::sublayer1, &Sub::output)},
             {cross, at(&Dec::sublayer2, &Sub::sublayer_out)},
             {add, at(&Dec::sublayer2, &Sub::output)},
             {"FFN hidden", at(&Dec::ff, &FFN::hidden)},
             {"FFN out", at(&Dec::sublayer3, &Sub::sublayer_out)},
             {add, at(&Dec::sublayer3, &Sub::output)}});
  }
  const Matrix& cross_w = dec_cache.at(0, L - 1).multihead_attn.weights[0];  // [n_t x n_s]
  ch.show("cross-attention weights, last layer, head 1, sentence 1 (target x source)", cross_w,
          {.row_labels = course::token_labels(tgt, 0, kTargetNames),
           .col_labels = course::token_labels(src, 0)});
  ch.notice("queries come from the target, keys and values from the encoder: each target "
            "position reads the source.");
  const std::string src_pads = pad_positions(src, 0);  // sentence 1's, e.g. "5-6"
  const float leak = attn::largest_blocked(cross_w, cross_mask[0]);
  if (leak != 0.0f) {
    throw std::runtime_error(fmt::format("cross-attention gave a padded source position weight "
                                         "{:g}",
                                         leak));
  }
  if (src_pads.empty()) {
    ch.notice("sentence 1's source has no padding: no column is blocked.");
  } else {
    const bool one = src_pads.find_first_of(",-") == std::string::npos;
    ch.notice("source position{} {} of sentence 1 {} padding: {} exactly 0.", one ? "" : "s",
              src_pads, one ? "is" : "are", one ? "its column is" : "their columns are");
  }

  ch.step("To the vocabulary: logits = y W_vocab^T + b -> softmax");
  const attn::Linear to_vocab = attn::linear_init(rng, E, vocab);  // weight [vocab x d_model]
  Batch logits(B, n_t, vocab), probs(B, n_t, vocab);               // [B, n_t, vocab] each
  for (Index b = 0; b < B; ++b) {
    logits[b] = attn::linear_forward(to_vocab, out[b]);  // [n_t x vocab]
    probs[b] = attn::softmax_rows(logits[b]);            // one distribution per row
  }
  ch.flow({{"decoder output", out}, {"logits", logits}, {"softmax", probs}});
  const TokenIds every_id = Eigen::RowVectorXi::LinSpaced(vocab, 0, vocab - 1);  // [1 x vocab]
  ch.show("probabilities, sentence 2 (row = position's input, column = next token)", probs[1],
          {.precision = 3,
           .row_labels = course::token_labels(tgt, 1, kTargetNames),
           .col_labels = course::token_labels(every_id, 0, kTargetNames)});
  std::vector<Index> best(n_t);
  for (Index i = 0; i < n_t; ++i) probs[1].row(i).maxCoeff(&best[i]);
  ch.say("the most likely next token per position of sentence 2: {}", fmt::join(best, " "));
  ch.notice("untrained, so the guesses are noise; what matters is the shape: one distribution "
            "per target position, all {} computed at once. Dropout is left out: this is "
            "inference.",
            n_t);

  ch.step("What the masks promise, checked on the whole model");
  const Index last = n_t - 1;  // change sentence 2's last target token entirely
  Batch tgt_changed = tgt_x;
  tgt_changed[1].row(last).setConstant(3.0f);
  // need_weights as in the runs above: the same (plain) path, so that any difference is a leak
  // and not the last bits of the tiled path's other order of sums.
  const attn::DecoderOptions dec_opts{
      .self_allowed = tgt_mask, .cross_allowed = cross_mask, .need_weights = true};
  const Batch out2 = attn::decoder_forward(decoder, tgt_changed, memory, dec_opts);
  const double earlier_moved = attn::max_abs_diff(out2[1].topRows(last), out[1].topRows(last));
  ch.say("change target token {} of sentence 2:  outputs 1-{} move by {:g}, output {} by {:.3g}",
         n_t, last, earlier_moved, n_t,
         attn::max_abs_diff(out2[1].bottomRows(1), out[1].bottomRows(1)));
  Batch src_changed = src_x;  // sentence 1's padded source tokens changed, wherever they are
  for (Index j = 0; j < n_s; ++j) {
    if (src(0, j) == kPad) src_changed[0].row(j).setConstant(-4.0f);
  }
  const Batch memory2 =
      attn::encoder_forward(encoder, src_changed, {.allowed = src_mask, .need_weights = true});
  const Batch out3 = attn::decoder_forward(decoder, tgt_x, memory2, dec_opts);
  double real_moved = 0.0;  // over the memory rows of sentence 1's real tokens
  for (Index j = 0; j < n_s; ++j) {
    if (src(0, j) == kPad) continue;
    real_moved =
        std::max<double>(real_moved, (memory2[0].row(j) - memory[0].row(j)).cwiseAbs().maxCoeff());
  }
  const double out_moved = attn::max_abs_diff(out3[0], out[0]);
  ch.say("change sentence 1's padded source:     real memory rows move by {:g}, decoder output "
         "by {:g}",
         real_moved, out_moved);
  // The two notices below are these promises; a mask that leaks is a bug to report, not narrate.
  if (earlier_moved != 0.0 || real_moved != 0.0 || out_moved != 0.0) {
    throw std::runtime_error(fmt::format("a mask leaked: earlier target outputs moved by {:g}, "
                                         "real memory rows by {:g}, the decoder output by {:g}",
                                         earlier_moved, real_moved, out_moved));
  }
  ch.notice("the causal mask makes training on whole sentences honest: no position sees its "
            "answer.");
  ch.notice("padding reaches nothing, through {} layers and the cross-attention.", 2 * L);

  const double d = 512.0;
  ch.step("RNN versus self-attention, per layer (d_model = {})", d);
  ch.say("          sequential steps   longest path       multiply-adds per layer\n"
         "      n     RNN  attention    RNN  attention   RNN 2nd^2   attention 4nd^2 + 2n^2d"
         "   its 2n^2d");
  course::Series rnn_ops{.label = "RNN: 2 n d^2 (W_hh a and W_ih x at every step)", .dashed = true};
  course::Series attn_ops{.label = "self-attention layer: 4 n d^2 + 2 n^2 d"};
  course::Series scores_ops{.label = "of which the n x n part: 2 n^2 d"};
  for (int p = 4; p <= 14; ++p) {
    const double n = std::ldexp(1.0, p);
    const double rnn = 2 * n * d * d, scores = 2 * n * n * d, layer = 4 * n * d * d + scores;
    const auto point = [n](course::Series& s, double y) { s.x.push_back(n), s.y.push_back(y); };
    point(rnn_ops, rnn);
    point(attn_ops, layer);
    point(scores_ops, scores);
    if (p % 2 == 0) {
      ch.say("{:>7.0f} {:>7.0f} {:>10} {:>6.0f} {:>10} {:>11} {:>25} {:>11}", n, n, 1, n, 1,
             count(rnn), count(layer), count(scores));
    }
  }
  ch.plot().lines(
      "08_rnn_vs_attention", {rnn_ops, attn_ops, scores_ops},
      {.title = "Multiply-adds per layer (d = 512): the n^2 part passes the RNN at n = d, "
                "the projections at n = 2d",
       .xlabel = "sequence length n",
       .ylabel = "multiply-adds",
       .logx = true,
       .logy = true});
  ch.notice("attention needs 1 step and a path of length 1 between any two tokens; the RNN needs "
            "n of each (chapter 01 measured what n steps do to d a<T>/d x<1>: it decays "
            "geometrically).");
  ch.notice("the price is the n x n term: 2 n^2 d passes the projections' 4 n d^2 at n = 2d = {}.",
            2 * d);

  ch.step("Attention on a graph: the mask is the adjacency matrix");
  const Index nodes = 6;
  const std::vector<std::pair<Index, Index>> edges = {{0, 1}, {1, 2}, {2, 3},
                                                      {3, 4}, {4, 5}, {0, 3}};
  AllowedMask adjacency = AllowedMask::Identity(nodes, nodes);  // [6 x 6], every node sees itself
  std::vector<std::string> named;
  for (const auto& [a, b] : edges) {
    adjacency(a, b) = adjacency(b, a) = true;             // undirected edges
    named.push_back(fmt::format("{}-{}", a + 1, b + 1));  // nodes count from 1, like tokens
  }
  ch.say("edges: {}, plus a self-loop at every node", fmt::join(named, " "));
  const Matrix features = attn::random_normal(rng, nodes, 8);  // [6 x 8], one row per node
  // [graph]
  const attn::AttentionResult g =
      attn::attention(features, features, features, {.allowed = adjacency});  // weights [6 x 6]
  // [graph]
  std::vector<std::string> node;
  for (Index i = 0; i < nodes; ++i) node.push_back(fmt::format("{}", i + 1));
  ch.show("weights (row = node, column = neighbour)", g.weights,
          {.row_labels = node, .col_labels = node});
  const float off_edge = attn::largest_blocked(g.weights, adjacency);
  ch.say("largest weight between nodes without an edge: {:g}", off_edge);
  if (off_edge != 0.0f) {
    throw std::runtime_error("the adjacency mask let weight through between unconnected nodes");
  }
  ch.notice("one layer is one round of message passing: each node averages its neighbours, "
            "weighted by attention.");
  ch.notice("L layers reach L hops; with a full mask it is an ordinary transformer on a complete "
            "graph.");
  ch.plot().heatmap("08_graph_attention", g.weights,
                    {.title = "Attention on a 6-node graph (hatched: no edge)",
                     .xlabel = "neighbour j",
                     .ylabel = "node i",
                     .allowed = adjacency,
                     .show_values = true,
                     .cmin = 0.0,
                     .cmax = 1.0,
                     .width_px = 620,
                     .height_px = 560,
                     .value_name = "weight",
                     .scores = attn::attention_scores(  // [6 x 6], what the softmax read
                         features, features, {.allowed = adjacency})});

  // The model's attention, per layer (up to 4) and head (up to 8), from the caches, with the
  // tokens on the axes and each mask's blocked cells hatched.
  const std::vector<std::string> src_tokens = course::id_labels(src, 0),
                                 tgt_tokens = course::id_labels(tgt, 1, kTargetNames),
                                 cross_tokens = course::id_labels(tgt, 0, kTargetNames);
  // Beside each weight, in the figures' twins, its score: head h's columns of the Q and K the
  // cache kept, scored under the mask that attention used.
  const auto head_scores = [&](const attn::MultiHeadResult& a, Index h, const AllowedBatch& mask,
                               Index b) {
    const Index d_k = a.Q.cols() / H;
    return attn::attention_scores(a.Q.middleCols(h * d_k, d_k), a.K.middleCols(h * d_k, d_k),
                                  {.allowed = attn::MaskView(mask, b)});  // [n_q x n_k]
  };
  std::vector<course::HeatmapPanel> enc, dec, crs;
  for (Index l = 0; l < L && l < 4; ++l) {
    const attn::MultiHeadResult& e = enc_cache.at(0, l).self_attn;       // per head [n_s x n_s]
    const attn::MultiHeadResult& s = dec_cache.at(1, l).self_attn;       // per head [n_t x n_t]
    const attn::MultiHeadResult& c = dec_cache.at(0, l).multihead_attn;  // per head [n_t x n_s]
    for (std::size_t h = 0; h < e.weights.size() && h < 8; ++h) {
      const std::string t = fmt::format("layer {}, head {}", l + 1, h + 1);
      const auto head = static_cast<Index>(h);
      enc.push_back({e.weights[h], t, src_tokens, src_tokens, AllowedMask(src_mask[0]),
                     head_scores(e, head, src_mask, 0)});
      dec.push_back({s.weights[h], t, tgt_tokens, tgt_tokens, AllowedMask(tgt_mask[1]),
                     head_scores(s, head, tgt_mask, 1)});
      crs.push_back({c.weights[h], t, src_tokens, cross_tokens, AllowedMask(cross_mask[0]),
                     head_scores(c, head, cross_mask, 0)});
    }
  }
  const int heads_shown = static_cast<int>(std::min<Index>(H, 8));  // a panel column per head
  // The tokens on the axes say which is which; no axis titles, so the panels get the room.
  const auto grid = [&](std::string title) {
    return course::GridOptions{.title = std::move(title),
                               .columns = heads_shown,
                               .cmin = 0.0,
                               .cmax = 1.0,
                               .panel_px = 200,
                               .value_name = "weight",
                               .row_name = "query",
                               .column_name = "key"};
  };
  ch.plot().heatmap_grid(
      "08_encoder_attention", enc,
      grid(src_pads.empty() ? std::string("Encoder self-attention, sentence 1 (no "
                                          "padding); rows = queries, columns = keys")
                            : fmt::format("Encoder self-attention, sentence 1 (source "
                                          "positions {} are padding); rows = queries, "
                                          "columns = keys",
                                          src_pads)));
  ch.plot().heatmap_grid("08_decoder_self_attention", dec,
                         grid("Decoder causal self-attention, sentence 2; rows = queries, "
                              "columns = keys"));
  ch.plot().heatmap_grid("08_cross_attention", crs,
                         grid("Cross-attention, sentence 1: target tokens (rows) read source "
                              "tokens (columns)"));

  // Everything PyTorch needs to replay the model (scripts/check_transformer_dump.py): each
  // parameter under the state_dict key of nn.ModuleDict({"encoder": nn.TransformerEncoder,
  // "decoder": nn.TransformerDecoder}), recorded in the dump's manifest.json.
  for (std::size_t l = 0; l < encoder.size(); ++l) {
    course::dump_parameters(ch.dumper(), fmt::format("encoder.layers.{}.", l), encoder[l]);
    course::dump_parameters(ch.dumper(), fmt::format("decoder.layers.{}.", l), decoder[l]);
  }
  ch.dump("src_ids", Matrix(src.cast<float>()));
  ch.dump("tgt_ids", Matrix(tgt.cast<float>()));
  ch.dump("src_x", src_x);
  ch.dump("tgt_x", tgt_x);
  ch.dump("src_allowed", src_mask);
  ch.dump("tgt_allowed", tgt_mask);
  ch.dump("cross_allowed", cross_mask);
  ch.dump("memory", memory);
  ch.dump("out", out);
  ch.dump("norm_first", Matrix(Matrix::Constant(1, 1, post ? 0.0f : 1.0f)));  // 1 = pre-norm
  ch.dump("heads", Matrix(Matrix::Constant(1, 1, static_cast<float>(H))));    // [1 x 1]

  ch.finish(
      {"A block is attention, then a position-wise FFN, each wrapped in a residual and a "
       "LayerNorm.",
       "The decoder adds cross-attention: Q from the target, K and V from the encoder's output.",
       "Masks carry the rules (causal, padding, graph edges); the code is the same for all of "
       "them.",
       "Every stage keeps [B, n, d_model], so layers stack; all positions run at once.",
       "Against an RNN: 1 step and paths of length 1, paid for with an n x n term that wins past "
       "n = 2d."},
      {{"--norm pre", "pre-norm: LayerNorm before each sub-layer"},
       {"--layers 6 --heads 8 --d-model 64", "a bigger model, the same shapes"},
       {"--dump /tmp/d", "then replay it in PyTorch: scripts/check_transformer_dump.py"}});
}

}  // namespace

int main(int argc, char** argv) {
  course::Chapter ch("08_transformer_block", "The transformer block", 2026);
  ch.cites("notes 001, 002 and 003");
  Knobs k;
  ch.option("--layers", k.layers, "encoder and decoder layers each").range(1, 12);
  ch.option("--heads", k.heads, "heads per attention (must divide d_model)").range(1, 64);
  ch.option("--d-model", k.d_model,
            "features per token; 1024 with --layers 12 --d-ff 4096: 1.4 GB of weights")
      .range(2, 1024);
  ch.option("--d-ff", k.d_ff, "width of the feed-forward layer").range(1, 4096);
  ch.option("--norm", k.norm, "post (the paper's Add & Norm) or pre (norm first)")
      .one_of({"post", "pre"});
  ch.require_knobs([&] {
    if (k.d_model % k.heads == 0) return std::string();
    return fmt::format("--heads {} does not divide --d-model {}: each head needs d_k = d_model / "
                       "heads columns",
                       k.heads, k.d_model);
  });
  return ch.run(argc, argv, [&] { lesson(ch, k); });
}
