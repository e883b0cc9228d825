/// @file
/// The math library of the course, in one include, and the conventions every layer follows.
///
/// ## Two layers
///
/// `attn` (this folder, namespace attn) is the math: tensors, softmax, attention, masks and
/// every layer of the transformer, the RNN and the notes' column form. It depends on Eigen
/// only, prints nothing and knows no command line. `course` (common/course, namespace course)
/// is how a chapter talks: options, narration, printing, figures, dumps and .npy files. The
/// arrows run chapters -> course -> attn and never back, so a learner can lift attn into a
/// program of their own without the course's tooling.
///
/// ## Rows and storage
///
/// Tokens are rows, as in PyTorch and the paper: a sequence is [n x d_model], row i is token
/// i; a weight matrix multiplies from the right as its transpose (y = x W^T + b). Matrices are
/// float32 and row-major (attn::Matrix), so a row is contiguous and an .npy file maps onto
/// the buffer without a transpose; reference arithmetic uses MatrixD. A batch [B, n, d] is
/// one row-major [B*n x d] buffer (attn::Batch), strided exactly like a C-contiguous tensor.
/// Only column_attention.hpp keeps the notes' column convention, for chapters 02 and 03.
///
/// ## One naming pattern
///
/// A layer X has a parameter struct, `X_init(rng, sizes...)` that makes fresh parameters as
/// PyTorch initialises them, `X_forward(params, inputs, options = {}, cache = nullptr)`, and
/// `X_backward(params, inputs, cache, d_out, grads)` beside it in the same file, the way llm.c
/// pairs layernorm_forward with layernorm_backward: linear_*, layer_norm_*, ffn_* (ffn = the
/// position-wise feed-forward network, parameters FeedForward), multi_head_*, encoder_layer_*,
/// decoder_layer_*, embedding_forward / embedding_backward, and attention() with
/// attention_backward() (the operation inside multi-head attention, the way PyTorch has
/// scaled_dot_product_attention beside nn.MultiheadAttention). rnn_init / rnn_forward and
/// head_init / head_forward (chapters 01-02) have no backward. Stacks of layers have
/// encoder_forward and decoder_forward; the whole encoder-decoder of the training chapter is
/// seq2seq_forward / seq2seq_backward (seq2seq.hpp), and its loss cross_entropy (loss.hpp).
///
/// ## Two precisions
///
/// Every layer with a backward pass is a template on its scalar type, float or double (the
/// concept Real): `LinearOf<T>`, `MultiHeadAttentionOf<T>`, ..., with `Linear` =
/// `LinearOf<float>` and `LinearD` = `LinearOf<double>`, and the functions explicitly
/// instantiated for both in their .cpp files. float is what PyTorch trains in and what every
/// chapter runs; double exists for one purpose: the gradient checks by central differences
/// (gradient_check.hpp), whose rounding error in float would be ~1e-3 and in double ~1e-10, so
/// that the very code that trains is the code checked, to 1e-6. `cast<double>(layer)`
/// (parameters.hpp) makes the double twin of a float layer. A function template takes its views
/// as `InView<T>`, so its scalar type comes from the layer and a Matrix, a block or an
/// expression converts to the view as before; functions with no layer argument (attention(),
/// cross_entropy()) have a float and a double overload instead.
///
/// ## Parameters and gradients
///
/// A gradient has the shape of its parameter, so gradients are held in a struct of the layer's
/// own type: `Linear grads = zeros_like(layer)`, filled by the backward passes with +=.
/// `parameters(layer)` (parameters.hpp) lists every tensor with its state_dict key, in PyTorch's
/// named_parameters() order; the optimiser (optim.hpp), the gradient clipping, the gradient
/// check and the checkpoints walk a model and its gradients side by side with it.
///
/// ## Options and masks
///
/// What a forward may be asked to do differently is in its options struct, passed by
/// designated initialisers: `attention(Q, K, V, {.scale = 1.0f, .allowed = causal})`. A layer
/// with nothing to choose (linear, layer norm, the FFN) has no options struct; it gains one,
/// before the cache, when it gains a choice.
///
/// A mask is always the options field `allowed` (the decoder has two, `self_allowed` and
/// `cross_allowed`), and `true` means "query i may attend to key j", the meaning of
/// scaled_dot_product_attention's attn_mask (nn.MultiheadAttention's masks mean the opposite;
/// masks.hpp). For one sequence the field is a `std::optional<MaskView>` over an [n_q x n_k]
/// mask; for a batch or a stack it is a `std::optional<BatchMaskView>` over [B, n_q, n_k] (one
/// mask per element) or [1, n_q, n_k] (one mask shared by all). Unset means every key.
///
/// ## Caches: what each backward needs
///
/// A forward that will be differentiated keeps what its backward needs, in one documented
/// way. Either its result already is that (AttentionResult keeps the weights;
/// TiledAttentionResult the output and the log-sum-exp L per query, from which the tiled
/// backward recomputes the weights; MultiHeadResult keeps Q, K, V and the concatenation, with
/// every head's weights or, without need_weights, every head's L and the mask), or it takes a
/// pointer to a cache
/// struct as its last argument and fills it when the pointer is not null: LayerNormCache (the
/// per-row mean and rstd, as PyTorch's native_layer_norm saves them), FeedForwardCache (the
/// pre-activation and the ReLU's output), EncoderLayerCache and DecoderLayerCache (for every
/// sub-layer its input, what it read and returned, its norm's input and statistics, the value
/// after Add & Norm, and the attention's MultiHeadResult or the FFN's cache). A stack fills a
/// StackCache, one layer cache per batch element and layer, read with `cache.at(b, layer)`;
/// chapter 08 prints its attention maps from there (asking for need_weights). The inputs
/// themselves are not cached: the caller has them. Passing no cache costs nothing and computes
/// the same bits.
///
/// The backward passes read them as `X_backward(params, inputs, cache, d_out, grads)`: d_out
/// is dL/d(output), the gradients of the inputs are returned, and the parameter gradients are
/// accumulated into grads with +=, as PyTorch accumulates into .grad, so a parameter used twice
/// (a tied embedding, or a batch walked element by element) sums its contributions without a
/// temporary.
///
/// ## Parameters keep PyTorch's names and layouts
///
/// Linear stores `weight` [out x in] and `bias` [1 x out]; LayerNorm `gamma` and `beta`
/// (PyTorch's weight and bias); multi-head attention is built from and returns
/// `in_proj_weight` [3E x E] with W_Q, W_K, W_V stacked; layers are named `self_attn`,
/// `multihead_attn`, `linear1`, `linear2`, `norm1` to `norm3`. A state_dict entry is one
/// assignment, and a dump names its tensors by the state_dict key.
///
/// ## Errors
///
/// Every public function checks its arguments with attn::require before it touches data and
/// throws std::invalid_argument("<function>: <what is wrong, with the shapes>"), because
/// Eigen's own asserts vanish under NDEBUG. A message with numbers in it is a lambda, built
/// only when the check fails: a check that passes costs a comparison, nothing else.
///
/// ## Aliasing
///
/// Outputs never share memory with inputs. The `_into` functions, which write into buffers
/// the caller keeps, throw std::invalid_argument when an output overlaps an input
/// (`attention_into(r.out, r.out, r.out, r)`) rather than return a silently wrong answer;
/// every other function returns fresh matrices. Inputs may alias each other freely (Q, K and V
/// are the same matrix in self-attention).
///
/// ## Masks cannot dangle
///
/// A MaskView or BatchMaskView holds a pointer to a mask, so a view of a temporary would read
/// freed memory after the statement that made it. Their rvalue constructors are deleted, and
/// indexing a temporary batch (`padding_masks(ids)[0]`) is deleted too, so
/// `const AttentionOptions o{.allowed = causal_mask(4)};` does not compile; give the mask a
/// name first. tests/test_masked_attention.cpp checks this with static_asserts.
#pragma once

#include "attn/attention.hpp"
#include "attn/attention_only.hpp"
#include "attn/batch.hpp"
#include "attn/column_attention.hpp"
#include "attn/embedding.hpp"
#include "attn/feed_forward.hpp"
#include "attn/gradient_check.hpp"
#include "attn/layer_norm.hpp"
#include "attn/linear.hpp"
#include "attn/loss.hpp"
#include "attn/masks.hpp"
#include "attn/matrix.hpp"
#include "attn/multi_head.hpp"
#include "attn/parameters.hpp"
#include "attn/positional_encoding.hpp"
#include "attn/random.hpp"
#include "attn/rnn.hpp"
#include "attn/seq2seq.hpp"
#include "attn/softmax.hpp"
#include "attn/softmax_stats.hpp"
#include "attn/threads.hpp"
#include "attn/transformer.hpp"

/// @dir common/attn
/// The math library, namespace attn: tensors, softmax, attention and masks, every layer of the
/// transformer with its backward pass, the RNN and the notes' column form, on Eigen alone.
/// attn.hpp includes all of it and sets out the conventions every layer follows.
