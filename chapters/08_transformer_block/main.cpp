// 08_transformer_block: a small encoder-decoder, end to end, with the shape after every stage.
//
//   encoder layer:  x = Norm(x + SelfAttention(x));           x = Norm(x + FFN(x))
//   decoder layer:  y = Norm(y + CausalSelfAttention(y));     y = Norm(y + CrossAttention(y, memory))
//                   y = Norm(y + FFN(y))                      (post-norm; --norm pre: y + f(Norm(y)))
//   FFN(x) = ReLU(x W_1^T + b_1) W_2^T + b_2
//
// Then what the block buys over an RNN (steps, path length, operations), and attention on a
// graph, where the mask is the adjacency matrix.
//
//   08_transformer_block [--layers L] [--heads H] [--d-model D] [--d-ff F] [--norm post|pre]
//                        [--seed N] [--out DIR] [--no-plots] [--dump DIR]
#include "attn/attention.hpp"
#include "course/cli.hpp"
#include "attn/embedding.hpp"
#include "attn/masks.hpp"
#include "attn/positional_encoding.hpp"
#include "course/print.hpp"
#include "attn/random.hpp"
#include "attn/softmax.hpp"
#include "attn/transformer.hpp"

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

using attn::AllowedBatch;
using attn::AllowedMask;
using attn::Batch;
using course::fmt;
using attn::Index;
using attn::Matrix;

namespace {

// "[2, 6, 32]"
std::string shape3(Index a, Index b, Index c) {
  return fmt("[%ld, %ld, %ld]", static_cast<long>(a), static_cast<long>(b), static_cast<long>(c));
}

// ids -> table[ids] + PE: [B, n, d_model].
Batch embed_with_positions(const Matrix& table, const attn::TokenIds& ids) {
  Batch x = attn::embed(table, ids);                                      // [B, n, d]
  const Matrix pe = attn::sinusoidal_encoding(ids.cols(), table.cols());  // [n x d]
  for (Index b = 0; b < x.batch(); ++b) x[b] += pe;
  return x;
}

// Every parameter of one layer, named as PyTorch's state_dict names it ("layers.0.norm1.weight"
// with the dots as underscores), so scripts/check_transformer_dump.py can load them by name.
void dump_mha(course::Dumper& dump, const std::string& p, const attn::MultiHeadAttention& m) {
  dump(p + "in_proj_weight", attn::in_proj_weight(m));
  dump(p + "in_proj_bias", Matrix(attn::in_proj_bias(m)));
  dump(p + "out_proj_weight", m.out_proj.weight);
  dump(p + "out_proj_bias", Matrix(m.out_proj.bias));
}
void dump_rest(course::Dumper& dump, const std::string& p, const attn::FeedForward& ff,
               const std::vector<const attn::LayerNorm*>& norms) {
  dump(p + "linear1_weight", ff.linear1.weight);
  dump(p + "linear1_bias", Matrix(ff.linear1.bias));
  dump(p + "linear2_weight", ff.linear2.weight);
  dump(p + "linear2_bias", Matrix(ff.linear2.bias));
  for (std::size_t k = 0; k < norms.size(); ++k) {
    dump(p + "norm" + std::to_string(k + 1) + "_weight", Matrix(norms[k]->gamma));
    dump(p + "norm" + std::to_string(k + 1) + "_bias", Matrix(norms[k]->beta));
  }
}

double max_abs_diff(const Matrix& a, const Matrix& b) {
  return static_cast<double>((a - b).cwiseAbs().maxCoeff());
}

// 1234567 -> "1.2e+06" for the big counts of the cost table.
std::string count(double v) { return v < 1e5 ? fmt("%.0f", v) : fmt("%.2g", v); }

}  // namespace

int main(int argc, char** argv) {
  course::ChapterCli cli("08_transformer_block",
                       "Chapter 08: the transformer block, encoder and decoder", 2026);
  Index L = 2, H = 4, E = 32, F = 64;
  std::string norm_name = "post";
  cli.app().add_option("--layers", L, "encoder and decoder layers each")
      ->capture_default_str()->check(CLI::Range(1, 12));
  cli.app().add_option("--heads", H, "heads per attention (must divide d_model)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cli.app().add_option("--d-model", E, "features per token")
      ->capture_default_str()->check(CLI::Range(2, 1024));
  cli.app().add_option("--d-ff", F, "width of the feed-forward layer")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cli.app().add_option("--norm", norm_name, "post (the paper's Add & Norm) or pre (norm first)")
      ->capture_default_str()->check(CLI::IsMember({"post", "pre"}));
  if (auto code = cli.parse(argc, argv)) return *code;
  if (E % H != 0) {
    std::cerr << "08_transformer_block: --heads " << H << " does not divide --d-model " << E
              << ": each head needs d_k = d_model / heads columns\n\n" << cli.app().help();
    return 2;
  }
  const attn::NormPlacement norm =
      norm_name == "post" ? attn::NormPlacement::post : attn::NormPlacement::pre;
  const std::uint64_t seed = cli.options().seed;
  course::Dumper dump = cli.dumper();
  course::Plotter plot = cli.plotter();
  const Index vocab = 10, B = 2;

  std::cout << "08 . The transformer block (layers " << L << ", heads " << H << ", d_model " << E
            << ", d_ff " << F << ", " << norm_name << "-norm, seed " << seed << ")\n";

  // ---- 1. A batch to translate: source and target of different lengths --------------------------
  course::banner(std::cout, "1. A batch to translate: source and target of different lengths");
  attn::TokenIds src(2, 6), tgt(2, 5);  // id 0 = <pad>, id 1 = <bos> (the decoder's first input)
  src << 5, 2, 1, 6, 0, 0,  //
      1, 3, 1, 4, 7, 2;
  tgt << 1, 8, 4, 0, 0,  //
      1, 2, 9, 3, 5;
  course::print_matrix(std::cout, "source ids", src.cast<float>(), {.precision = 0});
  course::print_matrix(std::cout, "target ids (1 = <bos>)", tgt.cast<float>(), {.precision = 0});
  course::notice(std::cout, "source lengths 4 and 6, target lengths 3 and 5: padding (id 0) on "
                          "both sides.");

  // ---- 2. Embedding + positions -----------------------------------------------------------------
  course::banner(std::cout, "2. Embedding + positional encoding: ids [B, n] -> [B, n, " +
                              std::to_string(E) + "]");
  attn::Rng rng(seed);
  const Matrix src_table = attn::embedding_init(rng, vocab, E);  // [vocab x E]
  const Matrix tgt_table = attn::embedding_init(rng, vocab, E);  // [vocab x E]
  const Batch src_x = embed_with_positions(src_table, src);       // [2, 6, E]
  const Batch tgt_x = embed_with_positions(tgt_table, tgt);      // [2, 5, E]
  std::cout << "  source ids [2, 6] -> " << src_x.shape_str() << "     target ids [2, 5] -> "
            << tgt_x.shape_str() << "\n";
  const AllowedBatch src_mask = attn::padding_masks(src);  // [2, 6, 6]: source padding
  AllowedBatch tgt_mask = attn::padding_masks(tgt);        // [2, 5, 5]: target padding ...
  for (Index b = 0; b < B; ++b) {
    tgt_mask[b] = tgt_mask[b].array() && attn::causal_mask(5).array();  // ... and causal
  }
  AllowedBatch cross_mask(B, 5, 6);  // [2, 5, 6]: every target query, the real source keys
  for (Index b = 0; b < B; ++b) cross_mask[b] = attn::padding_mask({src.row(b).data(), 6}, 5);
  std::cout << "  masks: encoder " << src_mask.shape_str() << " (padding), decoder self "
            << tgt_mask.shape_str() << " (padding and causal), cross " << cross_mask.shape_str()
            << " (source padding)\n";

  // ---- 3. The encoder ---------------------------------------------------------------------------
  course::banner(std::cout, "3. The encoder: " + std::to_string(L) + " x (self-attention, Add & "
                          "Norm, feed-forward, Add & Norm)");
  std::vector<attn::EncoderLayer> encoder;
  for (Index l = 0; l < L; ++l) encoder.push_back(attn::encoder_layer_init(rng, E, H, F, norm));
  attn::EncoderCache enc_cache;  // what every layer computed, enc_cache.at(b, layer)
  // [encoder]
  const Batch memory =  // [2, 6, E]
      attn::encoder_forward(encoder, src_x, {.allowed = src_mask}, &enc_cache);
  // [encoder]
  const std::string sE = std::to_string(E), sF = std::to_string(F);
  for (Index l = 0; l < L; ++l) {
    const char* add = norm_name == "post" ? "Add & Norm" : "add";
    std::cout << "  layer " << l + 1 << ": x " << shape3(B, 6, E) << " -> self-attention ("
              << H << " heads) " << shape3(B, 6, E) << " -> " << add << "\n"
              << "           -> FFN " << shape3(B, 6, F) << " -> " << shape3(B, 6, E) << " -> "
              << add << "\n";
  }
  course::print_matrix(std::cout, "memory[0] (the encoder's output for sentence 1)", memory[0],
                     {.max_cols = 6});
  course::notice(std::cout, "every layer keeps the shape [B, n, d_model]: layers stack freely.");
  course::notice(std::cout, "the FFN widens each token to d_ff = " + sF + " and back, one token at "
                          "a time; tokens meet only in attention.");

  // ---- 4. The decoder ---------------------------------------------------------------------------
  course::banner(std::cout, "4. The decoder: causal self-attention, cross-attention, feed-forward");
  std::vector<attn::DecoderLayer> decoder;
  for (Index l = 0; l < L; ++l) decoder.push_back(attn::decoder_layer_init(rng, E, H, F, norm));
  attn::DecoderCache dec_cache;  // dec_cache.at(b, layer)
  // [decoder]
  const Batch out = attn::decoder_forward(decoder, tgt_x, memory,  // [2, 5, E]
                                          {.self_allowed = tgt_mask, .cross_allowed = cross_mask},
                                          &dec_cache);
  // [decoder]
  for (Index l = 0; l < L; ++l) {
    std::cout << "  layer " << l + 1 << ": y " << shape3(B, 5, E) << " -> causal self-attention "
              << shape3(B, 5, E) << "\n"
              << "           -> cross-attention (Q " << shape3(B, 5, E) << ", K = V = memory "
              << shape3(B, 6, E) << ") " << shape3(B, 5, E) << "\n"
              << "           -> FFN " << shape3(B, 5, F) << " -> " << shape3(B, 5, E) << "\n";
  }
  const Matrix& cross_w = dec_cache.at(0, L - 1).multihead_attn.weights[0];  // [5 x 6]
  course::print_matrix(std::cout, "cross-attention weights, last layer, head 0, sentence 1 "
                                "(target x source)", cross_w);
  course::notice(std::cout, "queries come from the target, keys and values from the encoder: each "
                          "target position reads the source.");
  course::notice(std::cout, "source positions 5-6 of sentence 1 are padding: their columns are "
                          "exactly 0.");

  // ---- 5. To the vocabulary ---------------------------------------------------------------------
  course::banner(std::cout, "5. To the vocabulary: logits = y W_vocab^T + b -> softmax   [2, 5, " +
                              std::to_string(vocab) + "]");
  const attn::Linear to_vocab = attn::linear_init(rng, E, vocab);  // [vocab x E]
  Batch probs(B, 5, vocab);                                         // [2, 5, vocab]
  for (Index b = 0; b < B; ++b) {
    probs[b] = attn::softmax_rows(attn::linear_forward(to_vocab, out[b]));  // [5 x vocab]
  }
  course::print_matrix(std::cout, "probabilities, sentence 2", probs[1], {.precision = 3});
  std::cout << "  the most likely next token per position of sentence 2:";
  for (Index i = 0; i < 5; ++i) {
    Index best = 0;
    probs[1].row(i).maxCoeff(&best);
    std::cout << " " << best;
  }
  std::cout << "\n";
  course::notice(std::cout, "untrained, so the guesses are noise; what matters is the shape: one "
                          "distribution per target position,");
  std::cout << "     all five computed at once. Dropout is left out: this is inference.\n";

  // ---- 6. What the masks promise ----------------------------------------------------------------
  course::banner(std::cout, "6. What the masks promise, checked on the whole model");
  {
    Batch tgt_changed = tgt_x;  // change sentence 2's last target token entirely
    tgt_changed[1].row(4).setConstant(3.0f);
    const Batch out2 = attn::decoder_forward(
        decoder, tgt_changed, memory, {.self_allowed = tgt_mask, .cross_allowed = cross_mask});
    std::cout << fmt("  change target token 5 of sentence 2:  outputs 1-4 move by %g, output 5 by "
                     "%.3g\n", max_abs_diff(out2[1].topRows(4), out[1].topRows(4)),
                     max_abs_diff(out2[1].bottomRows(1), out[1].bottomRows(1)));
    Batch src_changed = src_x;  // change sentence 1's two padded source tokens
    src_changed[0].bottomRows(2).setConstant(-4.0f);
    const Batch memory2 = attn::encoder_forward(encoder, src_changed, {.allowed = src_mask});
    const Batch out3 = attn::decoder_forward(
        decoder, tgt_x, memory2, {.self_allowed = tgt_mask, .cross_allowed = cross_mask});
    std::cout << fmt("  change sentence 1's padded source:     real memory rows move by %g, "
                     "decoder output by %g\n",
                     max_abs_diff(memory2[0].topRows(4), memory[0].topRows(4)),
                     max_abs_diff(out3[0], out[0]));
  }
  course::notice(std::cout, "the causal mask makes training on whole sentences honest: no "
                          "position sees its answer.");
  course::notice(std::cout, "padding reaches nothing, through " + std::to_string(2 * L) +
                              " layers and the cross-attention.");

  // ---- 7. RNN versus self-attention -------------------------------------------------------------
  course::banner(std::cout, "7. RNN versus self-attention, per layer (d_model = 512)");
  const double d = 512.0;
  std::cout << "        n   sequential steps    longest path     multiply-adds per layer\n"
               "             RNN   attention     RNN  attention   RNN 2nd^2   attention 4nd^2 + "
               "2n^2d   of which 2n^2d\n";
  course::Series rnn_ops, attn_ops, scores_ops;
  rnn_ops.label = "RNN: 2 n d^2 (W_hh a and W_ih x at every step)";
  attn_ops.label = "self-attention layer: 4 n d^2 + 2 n^2 d";
  scores_ops.label = "of which the n x n part: 2 n^2 d";
  for (int p = 4; p <= 14; ++p) {
    const double n = std::ldexp(1.0, p);
    const double rnn = 2 * n * d * d, scores = 2 * n * n * d, layer = 4 * n * d * d + scores;
    rnn_ops.x.push_back(n);
    rnn_ops.y.push_back(rnn);
    attn_ops.x.push_back(n);
    attn_ops.y.push_back(layer);
    scores_ops.x.push_back(n);
    scores_ops.y.push_back(scores);
    if (p % 2 == 0) {
      std::cout << fmt("  %7.0f   %5.0f   %9d   %5.0f  %9d   %9s   %21s   %14s\n", n, n, 1, n, 1,
                       count(rnn).c_str(), count(layer).c_str(), count(scores).c_str());
    }
  }
  rnn_ops.dashed = true;
  plot.lines("08_rnn_vs_attention", {rnn_ops, attn_ops, scores_ops},
             {.title = "Multiply-adds per layer, d_model = 512: the n^2 term takes over at n = d",
              .xlabel = "sequence length n",
              .ylabel = "multiply-adds",
              .logx = true,
              .logy = true});
  course::notice(std::cout, "attention needs 1 step and a path of length 1 between any two tokens; "
                          "the RNN needs n of each");
  std::cout << "     (chapter 01 measured what n steps do to d a<T>/d x<1>: it decays "
               "geometrically).\n";
  course::notice(std::cout, "the price is the n x n term: 2 n^2 d passes the projections' 4 n d^2 "
                          "at n = 2d = 1024.");

  // ---- 8. Attention on a graph ------------------------------------------------------------------
  course::banner(std::cout, "8. Attention on a graph: the mask is the adjacency matrix");
  const Index nodes = 6;
  AllowedMask adjacency = AllowedMask::Identity(nodes, nodes);  // [6 x 6], every node sees itself
  for (const auto& [a, b] : std::vector<std::pair<Index, Index>>{{0, 1}, {1, 2}, {2, 3}, {3, 4},
                                                                  {4, 5}, {0, 3}}) {
    adjacency(a, b) = adjacency(b, a) = true;  // undirected edges
  }
  std::cout << "  edges: 0-1 1-2 2-3 3-4 4-5 0-3, plus a self-loop at every node\n";
  const Matrix features = attn::random_normal(rng, nodes, 8);  // [6 x 8], one row per node
  // [graph]
  const attn::AttentionResult g = attn::attention(features, features, features,
                                                  {.allowed = adjacency});  // weights [6 x 6]
  // [graph]
  course::print_matrix(std::cout, "weights (row = node, column = neighbour)", g.weights);
  double off_edges = 0.0;
  for (Index i = 0; i < nodes; ++i) {
    for (Index j = 0; j < nodes; ++j) {
      if (!adjacency(i, j)) off_edges = std::max(off_edges, static_cast<double>(g.weights(i, j)));
    }
  }
  std::cout << fmt("  largest weight between nodes without an edge: %g\n", off_edges);
  course::notice(std::cout, "one layer is one round of message passing: each node averages its "
                          "neighbours, weighted by attention.");
  course::notice(std::cout, "L layers reach L hops; with a full mask it is an ordinary "
                          "transformer on a complete graph.");
  plot.heatmap("08_graph_attention", g.weights,
               {.title = "Attention on a 6-node graph (blocked = no edge)",
                .xlabel = "neighbour j",
                .ylabel = "node i",
                .show_values = true,
                .cmin = 0.0,
                .cmax = 1.0,
                .width_px = 620,
                .height_px = 540});

  // ---- Figures of the model's attention ---------------------------------------------------------
  {
    std::vector<course::HeatmapPanel> enc, dec, cross;
    for (Index l = 0; l < L && l < 4; ++l) {
      const auto& e = enc_cache.at(0, l).self_attn.weights;       // per head [6 x 6]
      const auto& s = dec_cache.at(1, l).self_attn.weights;       // per head [5 x 5]
      const auto& c = dec_cache.at(0, l).multihead_attn.weights;  // per head [5 x 6]
      for (Index h = 0; h < H && h < 8; ++h) {
        const std::string t = "layer " + std::to_string(l + 1) + ", head " + std::to_string(h);
        enc.push_back({e[static_cast<std::size_t>(h)], t});
        dec.push_back({s[static_cast<std::size_t>(h)], t});
        cross.push_back({c[static_cast<std::size_t>(h)], t});
      }
    }
    const int cols = static_cast<int>(std::min<Index>(H, 8));
    plot.heatmap_grid("08_encoder_attention", enc,
                      {.title = "Encoder self-attention, sentence 1 (source positions 5-6 are "
                                "padding)",
                       .xlabel = "source key", .ylabel = "source query", .columns = cols,
                       .cmin = 0.0, .cmax = 1.0, .panel_px = 200});
    plot.heatmap_grid("08_decoder_self_attention", dec,
                      {.title = "Decoder causal self-attention, sentence 2",
                       .xlabel = "target key", .ylabel = "target query", .columns = cols,
                       .cmin = 0.0, .cmax = 1.0, .panel_px = 200});
    plot.heatmap_grid("08_cross_attention", cross,
                      {.title = "Cross-attention, sentence 1: target positions x source positions",
                       .xlabel = "source position", .ylabel = "target position", .columns = cols,
                       .cmin = 0.0, .cmax = 1.0, .panel_px = 200});
  }

  // ---- dump: everything PyTorch needs to replay the model ---------------------------------------
  if (dump.enabled()) {
    for (Index l = 0; l < L; ++l) {
      const std::string pe = "encoder_layers_" + std::to_string(l) + "_";
      const attn::EncoderLayer& el = encoder[static_cast<std::size_t>(l)];
      dump_mha(dump, pe + "self_attn_", el.self_attn);
      dump_rest(dump, pe, el.ff, {&el.norm1, &el.norm2});
      const std::string pd = "decoder_layers_" + std::to_string(l) + "_";
      const attn::DecoderLayer& dl = decoder[static_cast<std::size_t>(l)];
      dump_mha(dump, pd + "self_attn_", dl.self_attn);
      dump_mha(dump, pd + "multihead_attn_", dl.multihead_attn);
      dump_rest(dump, pd, dl.ff, {&dl.norm1, &dl.norm2, &dl.norm3});
    }
    dump("src_ids", Matrix(src.cast<float>()));
    dump("tgt_ids", Matrix(tgt.cast<float>()));
    dump("src_x", src_x);
    dump("tgt_x", tgt_x);
    dump("src_allowed", src_mask);
    dump("tgt_allowed", tgt_mask);
    dump("cross_allowed", cross_mask);
    dump("memory", memory);
    dump("out", out);
    const float pre = norm == attn::NormPlacement::pre ? 1.0f : 0.0f;
    dump("norm_first", Matrix(Matrix::Constant(1, 1, pre)));  // [1 x 1]: 1 = pre-norm
    dump("heads", Matrix(Matrix::Constant(1, 1, static_cast<float>(H))));
  }

  // ---- What to notice ---------------------------------------------------------------------------
  course::banner(std::cout, "What to notice");
  course::notice(std::cout, "A block is attention, then a position-wise FFN, each wrapped in a "
                          "residual and a LayerNorm.");
  course::notice(std::cout, "The decoder adds cross-attention: Q from the target, K and V from "
                          "the encoder's output.");
  course::notice(std::cout, "Masks carry the rules (causal, padding, graph edges); the code is "
                          "the same for all of them.");
  course::notice(std::cout, "Every stage keeps [B, n, d_model], so layers stack; all positions "
                          "run at once.");
  course::notice(std::cout, "Against an RNN: 1 step and paths of length 1, paid for with an "
                          "n x n term that wins past n = 2d.");
  course::try_this(std::cout, "08_transformer_block",
                 {{"--norm pre", "pre-norm: LayerNorm before each sub-layer"},
                  {"--layers 6 --heads 8 --d-model 64", "a bigger model, the same shapes"},
                  {"--dump /tmp/d", "then replay it in PyTorch: scripts/check_transformer_dump.py"}});
  if (const std::string f = plot.summary(); !f.empty()) std::cout << "\n" << f;
  if (const std::string dsum = dump.summary(); !dsum.empty()) std::cout << "\n" << dsum << "\n";
  return 0;
}
