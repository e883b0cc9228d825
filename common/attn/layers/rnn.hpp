/// @file
/// The Elman recurrence, exactly as torch.nn.RNN(nonlinearity='tanh') computes it.
///
///   a<t> = tanh(W_ih x<t> + b_ih + W_hh a<t-1> + b_hh),   a<0> = h0 (zeros unless given)
///
/// The notes write the same step with one bias, a<t> = g(W_aa a<t-1> + W_ax x<t> + b_a):
/// W_aa is PyTorch's weight_hh, W_ax is weight_ih, and b_a = b_ih + b_hh. PyTorch keeps two
/// biases only because its kernels add one bias to each of the two matrix products (cuDNN's
/// layout); the model is the same, the sum is all that matters, and a learner who loads
/// PyTorch weights must add them.
///
/// Conventions: tokens are rows. A sequence is X [T x I], row t-1 holding x<t>; the hidden
/// states come back as A [T x H], row t-1 holding a<t>. Weights keep PyTorch's [out x in]
/// layout, so a row-vector step is x W_ih^T (the transpose is a view, not a copy).
///
/// The cell is a template on its scalar type like every layer (attn.hpp, "Two precisions"):
/// RnnCell is float32 like PyTorch's default, and cast<double>(cell) (parameters.hpp) its double
/// twin, which computes the Jacobians, so that what chapter 01 measures is the model's
/// sensitivity, not float rounding. The output head is a Linear(H, O) (linear.hpp) followed by
/// a softmax (softmax_output below). The RNN has no backward pass: chapter 01 differentiates it
/// by the chain rule, in input_jacobians.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"
#include "attn/layers/linear.hpp"

#include <string_view>
#include <vector>

namespace attn {

/// One Elman layer's parameters, named and shaped as torch.nn.RNN names them (the _l0 suffix
/// of the single layer left out here; for_each_parameter gives the state_dict keys with it).
template <Real T>
struct RnnCellOf {
  using Scalar = T;
  MatrixOf<T> weight_ih;   ///< W_ih [H x I], the notes' W_ax
  MatrixOf<T> weight_hh;   ///< W_hh [H x H], the notes' W_aa
  RowVectorOf<T> bias_ih;  ///< b_ih [1 x H]
  RowVectorOf<T> bias_hh;  ///< b_hh [1 x H]; the notes' b_a = b_ih + b_hh

  Index input_size() const { return weight_ih.cols(); }
  Index hidden_size() const { return weight_hh.rows(); }
};
using RnnCell = RnnCellOf<float>;
using RnnCellD = RnnCellOf<double>;

/// PyTorch's default initialisation: every parameter of nn.RNN drawn from U(-k, k) with
/// k = 1/sqrt(H), in the order of RNN.parameters() (weight_ih, weight_hh, bias_ih, bias_hh),
/// each filled row by row. The distribution is PyTorch's; the numbers are attn::Rng's. Throws
/// std::invalid_argument for sizes < 1, or, before drawing anything, for sizes whose parameters
/// the machine cannot hold (core/memory.hpp).
RnnCell rnn_init(Rng& rng, Index input_size, Index hidden_size);

/// Throws std::invalid_argument unless the four parameters agree on I and H.
template <Real T>
void check_cell(const RnnCellOf<T>& cell, std::string_view where);

/// One step: x [1 x I], a_prev [1 x H] -> a [1 x H].
RowVector rnn_step(const RnnCell& cell, const RowVector& x, const RowVector& a_prev);

/// The whole sequence: X [T x I], h0 [1 x H] -> A [T x H]. The input projection
/// X W_ih^T + b_ih is one matrix product for all t (parallel); the recurrence is not.
/// In the cell's precision: `rnn_forward(cast<double>(cell), X, h0)` runs it in double.
template <Real T>
MatrixOf<T> rnn_forward(const RnnCellOf<T>& cell, const InView<T>& X, const InView<T>& h0);
/// The same with h0 = 0, PyTorch's default when no initial state is passed.
template <Real T>
MatrixOf<T> rnn_forward(const RnnCellOf<T>& cell, const InView<T>& X);

/// The output head of the notes, y_hat = softmax(A W_y^T + b_y) row by row: head is a
/// Linear(H, O) (linear_init(rng, H, O), nn.Linear's initialisation), A [n x H] -> Y [n x O].
Matrix softmax_output(const Linear& head, const Matrix& A);

// ---- The four shapes of a recurrent model -------------------------------------------------------

/// The hidden states a model walked through and what its head said.
struct RnnRun {
  Matrix states;   ///< [T x H]: a<1> .. a<T> (for generation: the steps actually taken)
  Matrix outputs;  ///< [T x O] for N->N and 1->N, [1 x O] for N->1
};

/// N->1, classify a sequence: X [T x I] -> states [T x H], outputs [1 x O] = g(W_y a<T> + b_y).
RnnRun many_to_one(const RnnCell& cell, const Linear& head, const Matrix& X, const RowVector& h0);

/// N->N, label every step: X [T x I] -> states [T x H], outputs [T x O].
RnnRun many_to_many(const RnnCell& cell, const Linear& head, const Matrix& X, const RowVector& h0);

/// 1->N, generate: x<1> = x1 [1 x I], and from then on each step's input is the previous
/// step's output, x<t+1> = y_hat<t> (so O must equal I), the way a language model feeds its
/// last prediction back. -> states [steps x H], outputs [steps x O].
RnnRun one_to_many(const RnnCell& cell, const Linear& head, const RowVector& x1,
                   const RowVector& h0, Index steps);

/// N->M, the RNN encoder-decoder: an encoder reads all N inputs from a<0> = h0 and its last
/// state is the context vector; a decoder starts from that state and generates M outputs as
/// one_to_many does, with x<1> = 0 (the start token). X [N x I] -> outputs [M x O]. (The
/// transformer's encoder-decoder is Seq2Seq, models/seq2seq.hpp.)
struct RnnSeq2SeqRun {
  Matrix encoder_states;  ///< [N x H]
  RowVector context;      ///< [1 x H] = the encoder's a<N>, the decoder's a<0>
  Matrix decoder_states;  ///< [M x H]
  Matrix outputs;         ///< [M x O]
};
RnnSeq2SeqRun rnn_seq2seq(const RnnCell& encoder, const RnnCell& decoder, const Linear& head,
                          const Matrix& X, const RowVector& h0, Index out_steps);

// ---- How a<t> depends on x<1> -------------------------------------------------------------------

/// The Jacobians J<t> = d a<t> / d x<1> [H x I] for t = 1..T (element t-1), in double, by the
/// chain rule through the recurrence:
///   J<1> = diag(1 - a<1>^2) W_ih,   J<t> = diag(1 - a<t>^2) W_hh J<t-1>.
/// One forward pass gives every distance at once. X [T x I], h0 [1 x H].
std::vector<MatrixD> input_jacobians(const RnnCell& cell, const Matrix& X, const RowVector& h0);

/// d a<T> / d x<1> [H x I] by central differences of the double rnn_forward, step `eps` per
/// entry of x<1>: (a<T>(x<1> + eps e_j) - a<T>(x<1> - eps e_j)) / (2 eps). The truncation
/// error is ~eps^2/6 |a'''| and the rounding error ~1e-16/eps; eps = 1e-4 balances them to
/// ~1e-9 for a short sequence. A long one defeats the method: once d a<T> / d x<1> falls below
/// ~1e-12 the difference quotient is rounding noise (the vanishing this chapter measures).
MatrixD input_jacobian_central_difference(const RnnCell& cell, const Matrix& X, const RowVector& h0,
                                          double eps = 1e-4);

/// The spectral radius of a square W [H x H], its largest |eigenvalue|, in double. For W_hh it
/// says what the recurrence does to a direction step after step: above 1 some direction grows,
/// below 1 every one shrinks (and tanh' <= 1 shrinks it further).
double spectral_radius(const Matrix& W);

}  // namespace attn
