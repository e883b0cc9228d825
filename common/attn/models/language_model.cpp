// language_model.cpp: the decoder-only model's forward pass in its two arithmetics, and
// generation with one KV cache per layer (prefill, then one decode step per token).
#include "attn/models/language_model.hpp"

#include "attn/core/memory.hpp"
#include "attn/layers/embedding.hpp"

#include <cmath>
#include <string>

namespace attn {

namespace {

template <Real T>
void check_ids(const LanguageModelOf<T>& model, std::span<const int> ids, const char* where) {
  require(!ids.empty(), where, "the sequence is empty: it needs at least one token");
  require(static_cast<Index>(ids.size()) <= model.config.context, where, [&] {
    return std::to_string(ids.size()) + " tokens are more than the context of " +
           std::to_string(model.config.context) + " positions";
  });
  for (std::size_t i = 0; i < ids.size(); ++i) {
    require(ids[i] >= 0 && ids[i] < model.vocab(), where, [&] {
      return "id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
             " is outside the vocabulary [0, " + std::to_string(model.vocab()) + ")";
    });
  }
}

// The options every attention call of the model shares.
template <Real T>
GroupedQueryOptions attention_options(const LanguageModelOf<T>& model) {
  return {.causal = true,
          .window = model.config.window,
          .rope = &model.rope,
          .rope_layout = model.config.rope_layout,
          .need_weights = false};
}

template <Real T>
DecodeOptions decode_options(const LanguageModelOf<T>& model) {
  return {.heads = model.config.heads, .scale = {}, .window = model.config.window};
}

// y = layer(x) one row at a time [n x out]: each row is the product of that row alone, the
// arithmetic of a decode step's [1 x in] input (a GEMV, where the whole matrix would be a GEMM).
template <Real T>
MatrixOf<T> linear_rows(const LinearOf<T>& layer, const MatrixOf<T>& x) {
  MatrixOf<T> y(x.rows(), layer.out_features());  // [n x out]
  for (Index i = 0; i < x.rows(); ++i) y.row(i) = linear_forward(layer, x.row(i));
  return y;
}

template <Real T>
MatrixOf<T> ffn_rows(const FeedForwardOf<T>& ffn, const MatrixOf<T>& x) {
  MatrixOf<T> y(x.rows(), x.cols());  // [n x E]
  for (Index i = 0; i < x.rows(); ++i) y.row(i) = ffn_forward(ffn, x.row(i));
  return y;
}

// The logits of the final stream [n x E] -> [n x V], with the same arithmetic choice.
template <Real T>
MatrixOf<T> logits_of(const LanguageModelOf<T>& model, const MatrixOf<T>& x,
                      Arithmetic arithmetic) {
  const MatrixOf<T> normed = layer_norm_forward(model.norm, x);  // [n x E], row by row
  const LinearOf<T> head{model.head_weight(), {}};               // [V x E], no bias
  return arithmetic == Arithmetic::rows ? linear_rows(head, normed)
                                        : linear_forward(head, normed);  // [n x V]
}

// One block's attention on the normed stream [n x E] at positions 0..n-1, returning the
// attention's output [n x E] and its rotated keys and values [n x g d_k] (what a cache keeps).
template <Real T>
struct AttentionRows {
  MatrixOf<T> out, K, V;
};

template <Real T>
AttentionRows<T> block_attention(const LanguageModelOf<T>& model,
                                 const LanguageModelBlockOf<T>& block, const MatrixOf<T>& normed,
                                 Arithmetic arithmetic) {
  if (arithmetic == Arithmetic::blocked) {
    GroupedQueryResultOf<T> r = grouped_query_forward(block.attn, normed, attention_options(model));
    return {std::move(r.out), std::move(r.K), std::move(r.V)};
  }
  const GroupedQueryAttentionOf<T>& attn = block.attn;
  MatrixOf<T> Q = linear_rows(attn.q_proj, normed);  // [n x h d_k]
  MatrixOf<T> K = linear_rows(attn.k_proj, normed);  // [n x g d_k]
  MatrixOf<T> V = linear_rows(attn.v_proj, normed);  // [n x g d_k]
  // RoPE turns each entry by itself: a row rotated within the matrix gets the same bits as
  // the same row rotated alone at its position.
  rope_inplace<T>(Q, model.rope, {.layout = model.config.rope_layout, .heads = attn.heads});
  rope_inplace<T>(K, model.rope, {.layout = model.config.rope_layout, .heads = attn.kv_heads});
  const MatrixOf<T> concat = causal_attention_rows(Q, K, V, decode_options(model));  // [n x h d_k]
  return {linear_rows(attn.out_proj, concat), std::move(K), std::move(V)};
}

// The model on ids [n] from position 0, appending each layer's keys and values to `state` when
// it is given: the forward pass and the prefill are this one function.
template <Real T>
MatrixOf<T> run_sequence(const LanguageModelOf<T>& model, std::span<const int> ids,
                         Arithmetic arithmetic, DecodeStateOf<T>* state) {
  MatrixOf<T> x = embedding_forward(model.tok_embed, ids);  // [n x E]
  for (std::size_t l = 0; l < model.blocks.size(); ++l) {
    const LanguageModelBlockOf<T>& block = model.blocks[l];
    const MatrixOf<T> normed1 = layer_norm_forward(block.norm1, x);  // [n x E]
    AttentionRows<T> a = block_attention(model, block, normed1, arithmetic);
    if (state) state->layers[l].append(a.K, a.V);
    x += a.out;
    const MatrixOf<T> normed2 = layer_norm_forward(block.norm2, x);  // [n x E]
    x += arithmetic == Arithmetic::rows ? ffn_rows(block.ffn, normed2)
                                        : ffn_forward(block.ffn, normed2);
  }
  return logits_of(model, x, arithmetic);  // [n x V]
}

template <Real T>
void check_state(const LanguageModelOf<T>& model, const DecodeStateOf<T>& state,
                 const char* where) {
  bool fits = state.layers.size() == model.blocks.size();
  for (std::size_t l = 0; fits && l < state.layers.size(); ++l) {
    const KvCacheOf<T>& c = state.layers[l];
    fits = c.kv_heads == model.config.kv_heads && c.d_k == model.d_model() / model.config.heads &&
           c.rolling() == (model.config.window > 0) &&
           c.capacity() == (model.config.window > 0 ? model.config.window : model.config.context);
  }
  require(fits, where,
          "the decode state was not made for this model: use make_decode_state(model)");
}

}  // namespace

void check_language_model_config(const LanguageModelConfig& c, const char* where) {
  require_at_least_one(c.vocab, where, "vocab");
  require_at_least_one(c.d_ff, where, "d_ff");
  require_at_least_one(c.layers, where, "layers");
  require_at_least_one(c.context, where, "context");
  check_grouped_query_sizes(c.d_model, c.heads, c.kv_heads, where);
  require((c.d_model / c.heads) % 2 == 0, where, [&] {
    return "d_k = d_model / heads = " + std::to_string(c.d_model / c.heads) +
           " is odd: RoPE turns pairs of features";
  });
  require(c.window >= 0, where, [&] {
    return "window is " + std::to_string(c.window) + ": it must be >= 0 (0: no window)";
  });
  require(std::isfinite(c.rope_base) && c.rope_base > 1.0, where,
          [&] { return "rope_base is " + std::to_string(c.rope_base) + ": it must be > 1"; });
  require(std::isfinite(c.embedding_std) && c.embedding_std > 0.0, where, [&] {
    return "embedding_std is " + std::to_string(c.embedding_std) + ": it must be > 0";
  });
}

LanguageModel language_model_init(Rng& rng, const LanguageModelConfig& config) {
  check_language_model_config(config, "language_model_init");
  const Index E = config.d_model, dk = E / config.heads;
  // Per block: W_Q and W_O (E x E each), W_K and W_V (g d_k x E each), the FFN's two, the
  // norms; then the embedding and, untied, the head.
  ElementCount count;
  count.add(E, E, 2).add(config.kv_heads * dk, E, 2).add(config.d_ff, E, 2).add(1, E, 4);
  count = ElementCount(count, config.layers);
  count.add(config.vocab, E, config.tied_embeddings ? 1 : 2);
  require_fits_in_memory("language_model_init", count, sizeof(float), "of parameters", [&] {
    return "vocab " + std::to_string(config.vocab) + ", d_model " + std::to_string(E) + ", d_ff " +
           std::to_string(config.d_ff) + " and " + std::to_string(config.layers) + " layers";
  });
  LanguageModel model;
  model.config = config;
  model.tok_embed = random_normal(rng, config.vocab, E, 0.0, config.embedding_std);  // [V x E]
  for (Index l = 0; l < config.layers; ++l) {
    LanguageModelBlockOf<float> block;
    block.norm1 = layer_norm_init(E);
    block.attn = grouped_query_init(rng, E, config.heads, config.kv_heads);
    block.norm2 = layer_norm_init(E);
    block.ffn = ffn_init(rng, E, config.d_ff);
    model.blocks.push_back(std::move(block));
  }
  model.norm = layer_norm_init(E);
  if (!config.tied_embeddings) model.lm_head = linear_init(rng, E, config.vocab, false);
  model.rope = rope_table(config.context, dk, config.rope_base);
  return model;
}

template <Real T>
MatrixOf<T> language_model_forward(const LanguageModelOf<T>& model, std::span<const int> ids,
                                   Arithmetic arithmetic) {
  check_ids(model, ids, "language_model_forward");
  return run_sequence<T>(model, ids, arithmetic, nullptr);
}

template <Real T>
DecodeStateOf<T> make_decode_state(const LanguageModelOf<T>& model) {
  const LanguageModelConfig& c = model.config;
  const Index capacity = c.window > 0 ? c.window : c.context;
  DecodeStateOf<T> state;
  for (Index l = 0; l < c.layers; ++l) {
    state.layers.push_back(make_kv_cache<T>(capacity, c.kv_heads, c.d_model / c.heads, c.window));
  }
  return state;
}

template <Real T>
MatrixOf<T> language_model_prefill(const LanguageModelOf<T>& model, std::span<const int> ids,
                                   DecodeStateOf<T>& state, Arithmetic arithmetic) {
  check_ids(model, ids, "language_model_prefill");
  check_state(model, state, "language_model_prefill");
  require(state.next_position() == 0, "language_model_prefill", [&] {
    return "the state has seen " + std::to_string(state.next_position()) +
           " tokens: prefill starts a sequence, clear() the state first";
  });
  return run_sequence<T>(model, ids, arithmetic, &state);
}

template <Real T>
MatrixOf<T> language_model_decode(const LanguageModelOf<T>& model, int id,
                                  DecodeStateOf<T>& state) {
  check_state(model, state, "language_model_decode");
  const Index position = state.next_position();  // this token's
  require(position > 0, "language_model_decode",
          "a decode step before prefill: the state has seen no token");
  require(position < model.config.context, "language_model_decode", [&] {
    return "position " + std::to_string(position) + " is past the context of " +
           std::to_string(model.config.context) + " positions";
  });
  require(id >= 0 && id < model.vocab(), "language_model_decode", [&] {
    return "id " + std::to_string(id) + " is outside the vocabulary [0, " +
           std::to_string(model.vocab()) + ")";
  });
  const RopeOptions at{.layout = model.config.rope_layout, .first_position = position};
  MatrixOf<T> x = model.tok_embed.row(id);  // [1 x E]
  for (std::size_t l = 0; l < model.blocks.size(); ++l) {
    const LanguageModelBlockOf<T>& block = model.blocks[l];
    const GroupedQueryAttentionOf<T>& attn = block.attn;
    const MatrixOf<T> normed1 = layer_norm_forward(block.norm1, x);  // [1 x E]
    MatrixOf<T> q = linear_forward(attn.q_proj, normed1);            // [1 x h d_k]
    MatrixOf<T> k = linear_forward(attn.k_proj, normed1);            // [1 x g d_k]
    const MatrixOf<T> v = linear_forward(attn.v_proj, normed1);      // [1 x g d_k]
    rope_inplace<T>(q, model.rope,
                    {.layout = at.layout, .first_position = position, .heads = attn.heads});
    rope_inplace<T>(k, model.rope,
                    {.layout = at.layout, .first_position = position, .heads = attn.kv_heads});
    state.layers[l].append(k, v);  // the cache now ends at this token
    const MatrixOf<T> concat = decode_attention<T>(q, state.layers[l], decode_options(model));
    x += linear_forward(attn.out_proj, concat);  // [1 x E]
    const MatrixOf<T> normed2 = layer_norm_forward(block.norm2, x);
    x += ffn_forward(block.ffn, normed2);
  }
  return logits_of(model, x, Arithmetic::rows);  // [1 x V]
}

#define ATTN_INSTANTIATE(T)                                                                    \
  template MatrixOf<T> language_model_forward(const LanguageModelOf<T>&, std::span<const int>, \
                                              Arithmetic);                                     \
  template DecodeStateOf<T> make_decode_state(const LanguageModelOf<T>&);                      \
  template MatrixOf<T> language_model_prefill(const LanguageModelOf<T>&, std::span<const int>, \
                                              DecodeStateOf<T>&, Arithmetic);                  \
  template MatrixOf<T> language_model_decode(const LanguageModelOf<T>&, int, DecodeStateOf<T>&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
