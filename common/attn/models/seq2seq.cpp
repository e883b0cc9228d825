// seq2seq.cpp: the encoder-decoder model, one sequence pair at a time, forward and backward.
#include "attn/models/seq2seq.hpp"

#include "attn/core/memory.hpp"
#include "attn/layers/embedding.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/models/detail/batched_loss.hpp"
#include "attn/models/detail/sequence_shards.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace attn {

namespace {

// Key j may be attended to iff ids[j] is not padding; with `causal`, also only j <= i.
AllowedMask key_mask(std::span<const int> keys, Index n_q, int pad_id, bool causal) {
  const auto n_k = static_cast<Index>(keys.size());
  AllowedMask allowed(n_q, n_k);  // [n_q x n_k]
  for (Index i = 0; i < n_q; ++i) {
    for (Index j = 0; j < n_k; ++j) {
      allowed(i, j) = keys[static_cast<std::size_t>(j)] != pad_id && (!causal || j <= i);
    }
  }
  return allowed;
}

template <Real T>
void check_length(const Seq2SeqOf<T>& model, std::size_t n, const char* name) {
  require(n >= 1 && static_cast<Index>(n) <= model.max_len(), "seq2seq_forward", [&] {
    return std::string(name) + " has " + std::to_string(n) + " tokens: it must have 1 to " +
           std::to_string(model.max_len()) + " (max_len, the positional table's length)";
  });
}

// token vectors sqrt(E) + position vectors: [n x E]
template <Real T>
MatrixOf<T> embed_sequence(const Seq2SeqOf<T>& model, const MatrixOf<T>& table,
                           std::span<const int> ids) {
  const T scale = static_cast<T>(std::sqrt(static_cast<double>(model.d_model())));
  MatrixOf<T> x = embedding_forward(table, ids);  // [n x E]
  x *= scale;
  x += model.positions.topRows(x.rows());
  return x;
}

}  // namespace

Seq2Seq seq2seq_init(Rng& rng, const Seq2SeqConfig& c) {
  require(c.vocab >= 2, "seq2seq_init", [&] {
    return "vocab is " + std::to_string(c.vocab) +
           ": it must be at least 2 (padding and one token)";
  });
  check_head_sizes(c.d_model, c.heads, "seq2seq_init");
  require_at_least_one(c.d_ff, "seq2seq_init", "d_ff");
  require_at_least_one(c.layers, "seq2seq_init", "layers");
  require_at_least_one(c.max_len, "seq2seq_init", "max_len");
  require(c.pad_id >= 0 && c.pad_id < c.vocab, "seq2seq_init", [&] {
    return "pad_id " + std::to_string(c.pad_id) + " is outside the vocabulary [0, " +
           std::to_string(c.vocab) + ")";
  });
  require(std::isfinite(c.embedding_std) && c.embedding_std > 0.0, "seq2seq_init", [&] {
    return "embedding_std is " + std::to_string(c.embedding_std) + ": it must be finite and > 0";
  });
  // Every tensor drawn below, counted before the first is: the two embeddings and the generator
  // [V x E] (and its bias [V]), the positions [max_len x E], per encoder layer one attention
  // (four [E x E] and four [E]), the FFN ([d_ff x E] twice, [d_ff] and [E]) and two norms
  // (2E each), per decoder layer two attentions and three norms, and the two final norms.
  const ElementCount ffn = ElementCount(c.d_ff, c.d_model, 2).add(1, c.d_ff).add(1, c.d_model);
  const ElementCount attention = ElementCount(c.d_model, c.d_model, 4).add(1, c.d_model, 4);
  ElementCount count(c.vocab, c.d_model, 3);
  count.add(1, c.vocab)
      .add(c.max_len, c.d_model)
      .add(ElementCount(attention).add(ffn).add(1, c.d_model, 4), c.layers)
      .add(ElementCount(attention, 2).add(ffn).add(1, c.d_model, 6), c.layers)
      .add(1, c.d_model, 4);
  require_fits_in_memory("seq2seq_init", count, sizeof(float), "of parameters", [&] {
    return "d_model " + std::to_string(c.d_model) + ", d_ff " + std::to_string(c.d_ff) +
           " and max_len " + std::to_string(c.max_len) + " (vocab " + std::to_string(c.vocab) +
           ", layers " + std::to_string(c.layers) + ")";
  });
  Seq2Seq m;
  m.src_embed = random_normal(rng, c.vocab, c.d_model, 0.0, c.embedding_std);  // [V x E]
  m.tgt_embed = random_normal(rng, c.vocab, c.d_model, 0.0, c.embedding_std);  // [V x E]
  for (Index l = 0; l < c.layers; ++l) {
    m.encoder.push_back(encoder_layer_init(rng, c.d_model, c.heads, c.d_ff, c.norm));
  }
  for (Index l = 0; l < c.layers; ++l) {
    m.decoder.push_back(decoder_layer_init(rng, c.d_model, c.heads, c.d_ff, c.norm));
  }
  if (c.norm == NormPlacement::pre) {
    m.encoder_norm = layer_norm_init(c.d_model);
    m.decoder_norm = layer_norm_init(c.d_model);
  }
  m.generator = linear_init(rng, c.d_model, c.vocab);  // weight [V x E], bias [1 x V]
  m.tied = c.tied;
  if (c.tied) m.generator.weight.resize(0, 0);  // tgt_embed stands in for it
  m.pad_id = c.pad_id;
  m.positions = sinusoidal_encoding(c.max_len, c.d_model);  // [max_len x E]
  return m;
}

template <Real T>
MatrixOf<T> seq2seq_forward(const Seq2SeqOf<T>& model, std::span<const int> src,
                            std::span<const int> tgt_in, Seq2SeqCacheOf<T>* cache,
                            NeedWeights need) {
  const bool need_weights = need == NeedWeights::yes;
  check_length(model, src.size(), "src");
  check_length(model, tgt_in.size(), "tgt_in");
  Seq2SeqCacheOf<T> local;
  Seq2SeqCacheOf<T>& c = cache ? *cache : local;
  const auto n_s = static_cast<Index>(src.size()), n_t = static_cast<Index>(tgt_in.size());
  c.src_allowed = key_mask(src, n_s, model.pad_id, false);    // [n_s x n_s]
  c.tgt_allowed = key_mask(tgt_in, n_t, model.pad_id, true);  // [n_t x n_t]
  c.cross_allowed = key_mask(src, n_t, model.pad_id, false);  // [n_t x n_s]
  // ---- encoder ----------------------------------------------------------------------------------
  MatrixOf<T> h = embed_sequence(model, model.src_embed, src);  // [n_s x E]
  c.encoder.resize(model.encoder.size());
  for (std::size_t l = 0; l < model.encoder.size(); ++l) {
    h = encoder_layer_forward(model.encoder[l], h,
                              {.allowed = c.src_allowed, .need_weights = need_weights},
                              &c.encoder[l]);
  }
  if (model.encoder_norm) {
    c.encoder_norm_in = std::move(h);
    h = layer_norm_forward(*model.encoder_norm, c.encoder_norm_in, &c.encoder_norm);
  }
  c.memory = std::move(h);  // [n_s x E]
  // ---- decoder ----------------------------------------------------------------------------------
  MatrixOf<T> y = embed_sequence(model, model.tgt_embed, tgt_in);  // [n_t x E]
  c.decoder.resize(model.decoder.size());
  for (std::size_t l = 0; l < model.decoder.size(); ++l) {
    y = decoder_layer_forward(model.decoder[l], y, c.memory,
                              {.self_allowed = c.tgt_allowed,
                               .cross_allowed = c.cross_allowed,
                               .need_weights = need_weights},
                              &c.decoder[l]);
  }
  if (model.decoder_norm) {
    c.decoder_norm_in = std::move(y);
    y = layer_norm_forward(*model.decoder_norm, c.decoder_norm_in, &c.decoder_norm);
  }
  c.decoder_out = std::move(y);  // [n_t x E]
  // ---- logits -----------------------------------------------------------------------------------
  c.logits.resize(n_t, model.vocab());  // [n_t x V]
  c.logits.noalias() = c.decoder_out * model.output_weight().transpose();
  if (model.generator.has_bias()) c.logits.rowwise() += model.generator.bias;
  return c.logits;
}

template <Real T>
void seq2seq_backward(const Seq2SeqOf<T>& model, std::span<const int> src,
                      std::span<const int> tgt_in, const Seq2SeqCacheOf<T>& c,
                      const InView<T>& d_logits, Seq2SeqOf<T>& grads) {
  const auto n_s = static_cast<Index>(src.size()), n_t = static_cast<Index>(tgt_in.size());
  require(d_logits.rows() == n_t && d_logits.cols() == model.vocab() && c.memory.rows() == n_s &&
              c.decoder_out.rows() == n_t,
          "seq2seq_backward", [&] {
            return "d_logits is " + shape_str(d_logits) + " for " + std::to_string(n_t) +
                   " target tokens and a cache of " + std::to_string(c.decoder_out.rows()) +
                   ": pass the cache of this pair's forward and d_logits [n_t x V]";
          });
  check_grads_like(model, grads, "seq2seq_backward", {{"d_logits", memory_of(d_logits)}});
  const T scale = static_cast<T>(std::sqrt(static_cast<double>(model.d_model())));
  // ---- the generator: logits = y W^T + b, W = tgt_embed when tied -------------------------------
  MatrixOf<T>& d_weight = model.tied ? grads.tgt_embed : grads.generator.weight;
  d_weight.noalias() += d_logits.transpose() * c.decoder_out;  // [V x E]
  if (model.generator.has_bias()) grads.generator.bias += d_logits.colwise().sum();
  MatrixOf<T> d_y = d_logits * model.output_weight();  // [n_t x E]
  // ---- decoder, last layer first; every layer read the memory, so its gradient sums ------------
  if (model.decoder_norm) {
    d_y = layer_norm_backward(*model.decoder_norm, c.decoder_norm_in, c.decoder_norm, d_y,
                              *grads.decoder_norm);
  }
  MatrixOf<T> d_memory = MatrixOf<T>::Zero(n_s, model.d_model());  // [n_s x E]
  for (std::size_t l = model.decoder.size(); l-- > 0;) {
    DecoderLayerInputGradsOf<T> g =
        decoder_layer_backward(model.decoder[l], c.memory, c.decoder[l], d_y, grads.decoder[l]);
    d_y = std::move(g.d_x);
    d_memory += g.d_memory;
  }
  // y = tgt_embed[tgt_in] sqrt(E) + PE: the table's rows get sqrt(E) d_y.
  d_y *= scale;
  embedding_backward(tgt_in, d_y, grads.tgt_embed);
  // ---- encoder ----------------------------------------------------------------------------------
  MatrixOf<T> d_h = std::move(d_memory);
  if (model.encoder_norm) {
    d_h = layer_norm_backward(*model.encoder_norm, c.encoder_norm_in, c.encoder_norm, d_h,
                              *grads.encoder_norm);
  }
  for (std::size_t l = model.encoder.size(); l-- > 0;) {
    d_h = encoder_layer_backward(model.encoder[l], c.encoder[l], d_h, grads.encoder[l]);
  }
  d_h *= scale;
  embedding_backward(src, d_h, grads.src_embed);
}

template <Real T>
Seq2SeqStepOf<T> seq2seq_loss(const Seq2SeqOf<T>& model, const Seq2SeqBatch& batch,
                              double label_smoothing, std::type_identity_t<Seq2SeqOf<T>>* grads,
                              bool keep_logits, int threads) {
  const Index B = batch.src.rows();
  require(batch.tgt_in.rows() == B && batch.tgt_out.rows() == B &&
              batch.tgt_out.cols() == batch.tgt_in.cols(),
          "seq2seq_loss", [&] {
            return "src is " + shape_str(batch.src) + ", tgt_in " + shape_str(batch.tgt_in) +
                   " and tgt_out " + shape_str(batch.tgt_out) +
                   ": one row per pair, tgt_in and tgt_out of one shape";
          });
  if (grads) check_grads_like(model, *grads, "seq2seq_loss");
  detail::check_threads(threads, "seq2seq_loss");
  Seq2SeqStepOf<T> step;
  step.count = (batch.tgt_out.array() != model.pad_id).count();
  const CrossEntropyOptions loss_opts{.ignore_index = model.pad_id,
                                      .label_smoothing = label_smoothing,
                                      .reduction = Reduction::sum};
  const auto row = [](const TokenIds& ids, Index b) {
    return std::span<const int>(ids.row(b).data(), static_cast<std::size_t>(ids.cols()));
  };
  detail::batched_loss<Seq2SeqCacheOf<T>>(
      model, grads, B, B * (batch.src.cols() + batch.tgt_in.cols()), loss_opts, keep_logits,
      threads, step,
      [&](Index b, Seq2SeqCacheOf<T>& cache) {
        return std::pair(  // logits [n_t x V], targets [n_t]
            seq2seq_forward(model, row(batch.src, b), row(batch.tgt_in, b), &cache),
            row(batch.tgt_out, b));
      },
      [&](Index b, const Seq2SeqCacheOf<T>& cache, const MatrixOf<T>& d_logits,
          Seq2SeqOf<T>& shard_grads) {
        seq2seq_backward(model, row(batch.src, b), row(batch.tgt_in, b), cache, d_logits,
                         shard_grads);
      });
  return step;
}

TokenIds seq2seq_greedy(const Seq2Seq& model, const TokenIds& src, int bos, Index steps,
                        int threads) {
  require(steps >= 1 && steps <= model.max_len(), "seq2seq_greedy", [&] {
    return "steps is " + std::to_string(steps) + ": it must be 1 to " +
           std::to_string(model.max_len()) +
           " (max_len: the last step reads bos and steps - 1 decoded tokens)";
  });
  require(bos >= 0 && bos < model.vocab(), "seq2seq_greedy", [&] {
    return "bos " + std::to_string(bos) + " is outside the vocabulary [0, " +
           std::to_string(model.vocab()) + ")";
  });
  detail::check_threads(threads, "seq2seq_greedy");
  const Index B = src.rows();
  TokenIds out(B, steps);  // [B x steps]
  // Step i reads the source and i + 1 target tokens: about B steps (n_s + steps) in all.
  detail::for_each_sequence<Seq2SeqCache>(
      B, B * steps * (src.cols() + steps), model, static_cast<Seq2Seq*>(nullptr), threads,
      [&](Index b, Seq2SeqCache& cache, Seq2Seq*) {
        const std::span<const int> source(src.row(b).data(), static_cast<std::size_t>(src.cols()));
        std::vector<int> target{bos};
        for (Index i = 0; i < steps; ++i) {
          const Matrix& logits = seq2seq_forward(model, source, target, &cache);  // [i+1 x V]
          Index next = 0;
          logits.row(i).maxCoeff(&next);
          out(b, i) = static_cast<int>(next);
          target.push_back(static_cast<int>(next));
        }
      });
  return out;
}

#define ATTN_INSTANTIATE(T)                                                                       \
  template MatrixOf<T> seq2seq_forward(const Seq2SeqOf<T>&, std::span<const int>,                 \
                                       std::span<const int>, Seq2SeqCacheOf<T>*, NeedWeights);    \
  template void seq2seq_backward(const Seq2SeqOf<T>&, std::span<const int>, std::span<const int>, \
                                 const Seq2SeqCacheOf<T>&, const InView<T>&, Seq2SeqOf<T>&);      \
  template Seq2SeqStepOf<T> seq2seq_loss(const Seq2SeqOf<T>&, const Seq2SeqBatch&, double,        \
                                         std::type_identity_t<Seq2SeqOf<T>>*, bool, int);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
