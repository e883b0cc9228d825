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
/// ## The folders, in reading order
///
/// Each folder uses only the folders above it (and its own), so the library reads top down and
/// has no cycle:
///
/// - `core/`: the tensors (matrix.hpp, batch.hpp), the matrix product every layer and the
///   plain attention run on (gemm.hpp), the random numbers every initialisation draws
///   (random.hpp), the thread count (threads.hpp), and what memory a tensor occupies and the
///   machine has (memory.hpp: the overlap and size checks below). Every chapter.
/// - `ops/`: functions without parameters: softmax and its statistics, masks, attention with
///   its backward, the notes' column form, the online softmax, cross-entropy (loss.hpp).
///   Chapters 02-05, 09, 10.
/// - `kernels/`: the tiled, memory-lean attention with its backward (tiled_attention.hpp);
///   the KV cache and the decode step of generation (row_cache.hpp, decode_attention.hpp).
///   Chapters 10 and 11.
/// - `layers/`: layers with parameters, each with its backward pass beside its forward:
///   linear, layer norm, feed-forward, embedding, positional encoding, multi-head attention,
///   grouped-query attention (GQA, MQA; grouped_query.hpp), the encoder and decoder layers
///   (transformer.hpp), the RNN; parameters.hpp walks any of them. Chapters 01, 06-09, 11.
/// - `models/`: the two models chapter 09 trains, with their batched losses: the
///   encoder-decoder (seq2seq.hpp) and the attention-only decoder (attention_only.hpp).
/// - `training/`: what trains a model and proves its gradients: the optimisers (optim.hpp)
///   and the gradient check (gradient_check.hpp). Chapter 09.
///
/// A `detail/` folder holds its folder's internal headers, for the library's .cpp files only:
/// `core/detail/tile_kernel.hpp` (one block's arithmetic, for the GEMM and the tiled kernels),
/// `models/detail/sequence_shards.hpp` (a batch's sequences on every core, the same bits for any
/// thread count). Everything public
/// is in namespace attn, whatever its folder; an include names the folder
/// (`#include "attn/layers/linear.hpp"`), or `#include "attn/attn.hpp"` takes it all.
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
/// scaled_dot_product_attention beside nn.MultiheadAttention). The RNN of chapter 01 has
/// rnn_init / rnn_forward and no backward; its output head is a Linear read through
/// softmax_output, and its encoder-decoder is rnn_seq2seq. Stacks of layers have
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
/// Outputs never share memory with inputs, nor with each other. The `_into` functions, which
/// write into buffers the caller keeps, throw std::invalid_argument naming the two when an
/// output overlaps an input (`attention_into(r.out, r.out, r.out, r)`) or another output (dQ
/// and dK as one matrix, lse in a column of out) rather than return a silently wrong answer;
/// every other function returns fresh matrices. A gradient holder is an output too: every
/// backward pass and loss that accumulates into `grads` (and the optimiser's step, the gradient
/// check) refuses one that shares memory with the model (`attention_only_loss(model, batch,
/// &model)`) or with an input view (x, dy, d_out), through check_grads_like (parameters.hpp).
/// The overlap is exact (core/memory.hpp): column blocks of one matrix side by side share no
/// element and are accepted, as multi-head attention writes its heads. Inputs may alias each
/// other freely (Q, K and V are the same matrix in self-attention).
///
/// ## Sizes
///
/// A function that allocates from sizes its caller chose (every `_init`, the masks,
/// random_normal, Batch, the positional tables, count_tiles and tile_map, attention's
/// [n_q x n_k] weights) counts the elements first with every product checked
/// (core/memory.hpp's ElementCount), and throws std::invalid_argument naming the sizes, before
/// allocating anything, when the count overflows Index or its bytes exceed the machine's
/// physical memory: "attention_only_init: d_model 1099511627776 (...) needs ... of parameters;
/// this machine has 23.4 GiB". Waiting for std::bad_alloc would not do: with Linux's
/// overcommit a huge allocation may succeed and the process be killed when it touches it.
///
/// ## Masks cannot dangle
///
/// A MaskView or BatchMaskView holds a pointer to a mask, so a view of a temporary would read
/// freed memory after the statement that made it. Their rvalue constructors are deleted, and
/// indexing a temporary batch (`padding_masks(ids)[0]`) is deleted too, so
/// `const AttentionOptions o{.allowed = causal_mask(4)};` does not compile; give the mask a
/// name first. tests/attn/ops/test_masks.cpp checks this with static_asserts.
#pragma once

// In the order of the folders' table above.
#include "attn/core/batch.hpp"
#include "attn/core/gemm.hpp"
#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"
#include "attn/core/threads.hpp"
#include "attn/kernels/decode_attention.hpp"
#include "attn/kernels/tiled_attention.hpp"
#include "attn/layers/embedding.hpp"
#include "attn/layers/feed_forward.hpp"
#include "attn/layers/grouped_query.hpp"
#include "attn/layers/latent_attention.hpp"
#include "attn/layers/layer_norm.hpp"
#include "attn/layers/linear.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/layers/positional_encoding.hpp"
#include "attn/layers/rnn.hpp"
#include "attn/layers/transformer.hpp"
#include "attn/models/attention_only.hpp"
#include "attn/models/language_model.hpp"
#include "attn/models/seq2seq.hpp"
#include "attn/ops/attention.hpp"
#include "attn/ops/column_attention.hpp"
#include "attn/ops/loss.hpp"
#include "attn/ops/masks.hpp"
#include "attn/ops/online_softmax.hpp"
#include "attn/ops/rope.hpp"
#include "attn/ops/softmax.hpp"
#include "attn/ops/softmax_stats.hpp"
#include "attn/training/gradient_check.hpp"
#include "attn/training/optim.hpp"

/// @dir common/attn
/// The math library, namespace attn: tensors, softmax, attention and masks, every layer of the
/// transformer with its backward pass, the RNN and the notes' column form, on Eigen alone.
/// attn.hpp includes all of it and sets out the conventions every layer follows.

/// @dir common/attn/core
/// The tensors (Matrix, Batch), the random numbers and the thread count the rest builds on.

/// @dir common/attn/ops
/// Functions without parameters: softmax, masks, attention and its backward, cross-entropy.

/// @dir common/attn/kernels
/// The tiled attention of chapter 10, which never holds an n x n matrix, and chapter 11's KV
/// cache with its decode step.

/// @dir common/attn/layers
/// Layers with parameters, each forward beside its backward, and the walk over their tensors.

/// @dir common/attn/models
/// The two models chapter 09 trains, with their batched losses.

/// @dir common/attn/training
/// The optimisers and the gradient check.
