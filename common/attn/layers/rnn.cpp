// rnn.cpp: the Elman recurrence, its four shapes, and the Jacobian d a<t> / d x<1>.
#include "attn/layers/rnn.hpp"

#include "attn/core/memory.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/ops/softmax.hpp"

#include <Eigen/Eigenvalues>

#include <cmath>
#include <string>

namespace attn {

namespace {

template <typename S>
using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename S>
using Row = Eigen::Matrix<S, 1, Eigen::Dynamic>;

// Element-wise tanh through the C library rather than Eigen's vectorised float tanh, a fast
// rational approximation: measured over [-9, 9], glibc's tanhf is within 2.1 ulp of the true
// value and Eigen's within 4.9. Both are far inside the tests' tolerances, but the course
// prefers the closer one; H is small, so the speed does not matter here.
template <typename S>
Row<S> tanh_row(const Row<S>& z) {
  return z.unaryExpr([](S v) { return std::tanh(v); });
}

// One step from the precomputed input projection p = x W_ih^T + b_ih [1 x H]. PyTorch groups
// the sum the same way (linear_hh(h) + linear_ih(x)), so float results agree to rounding.
template <typename S>
Row<S> step_from_projection(const Mat<S>& W_hh, const Row<S>& b_hh, const Row<S>& p,
                            const Row<S>& a_prev) {
  const Row<S> r = a_prev * W_hh.transpose() + b_hh;  // [1 x H]
  return tanh_row<S>(p + r);                          // [1 x H]
}

// The unrolled recurrence in precision S: X [T x I], h0 [1 x H] -> A [T x H].
template <typename S>
Mat<S> unroll(const Mat<S>& W_ih, const Mat<S>& W_hh, const Row<S>& b_ih, const Row<S>& b_hh,
              const Mat<S>& X, const Row<S>& h0) {
  // Every x<t> is known up front, so the input half of every step is one matrix product.
  Mat<S> P = X * W_ih.transpose();  // [T x H]
  P.rowwise() += b_ih;
  // The other half cannot be batched: step t needs a<t-1>.
  Mat<S> A(X.rows(), W_hh.rows());  // [T x H]
  Row<S> a = h0;                    // [1 x H]
  for (Index t = 0; t < X.rows(); ++t) {
    a = step_from_projection<S>(W_hh, b_hh, P.row(t), a);
    A.row(t) = a;
  }
  return A;
}

std::string int_str(Index n) { return std::to_string(n); }

// The head y_hat = softmax(a W_y^T + b_y) of a hidden state [1 x H].
void check_head(const Linear& head, Index hidden, std::string_view where) {
  require(head.weight.rows() >= 1 && head.weight.cols() >= 1, where, [&] {
    return "W_y is " + shape_str(head.weight) + ": it needs at least one row and column";
  });
  require(!head.has_bias() || head.bias.cols() == head.weight.rows(), where, [&] {
    return "W_y is " + shape_str(head.weight) + " but b_y is " + shape_str(head.bias) +
           ": b_y must be [1 x " + int_str(head.weight.rows()) + "]";
  });
  require(head.weight.cols() == hidden, where, [&] {
    return "W_y is " + shape_str(head.weight) + " but the hidden state is [1 x " + int_str(hidden) +
           "]: W_y must be [O x " + int_str(hidden) + "]";
  });
}

// X [T x I], float or double.
template <Real T, typename M>
void check_sequence(const RnnCellOf<T>& cell, const M& X, std::string_view where,
                    bool need_a_step) {
  require(X.cols() == cell.input_size(), where, [&] {
    return "X is " + shape_str(X) + " but weight_ih is " + shape_str(cell.weight_ih) +
           ": X must be [T x " + int_str(cell.input_size()) + "]";
  });
  require(!need_a_step || X.rows() >= 1, where,
          [&] { return "X is " + shape_str(X) + ": the sequence needs at least one step"; });
}

template <Real T>
void check_state(const RnnCellOf<T>& cell, Index rows, Index cols, std::string_view where) {
  require(rows == 1 && cols == cell.hidden_size(), where, [&] {
    return "h0 is " + shape_str(rows, cols) + " but weight_hh is " + shape_str(cell.weight_hh) +
           ": h0 must be [1 x " + int_str(cell.hidden_size()) + "]";
  });
}

}  // namespace

RnnCell rnn_init(Rng& rng, Index input_size, Index hidden_size) {
  require(input_size >= 1 && hidden_size >= 1, "rnn_init", [&] {
    return "input size " + int_str(input_size) + " and hidden size " + int_str(hidden_size) +
           " must both be at least 1";
  });
  // weight_ih [H x I], weight_hh [H x H], two biases [H].
  require_fits_in_memory(
      "rnn_init",
      ElementCount(hidden_size, input_size).add(hidden_size, hidden_size).add(1, hidden_size, 2),
      sizeof(float), "of parameters", [&] {
        return "input size " + int_str(input_size) + " and hidden size " + int_str(hidden_size);
      });
  const double k = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  RnnCell cell;
  cell.weight_ih = random_uniform(rng, hidden_size, input_size, -k, k);   // [H x I]
  cell.weight_hh = random_uniform(rng, hidden_size, hidden_size, -k, k);  // [H x H]
  cell.bias_ih = random_uniform(rng, 1, hidden_size, -k, k);              // [1 x H]
  cell.bias_hh = random_uniform(rng, 1, hidden_size, -k, k);              // [1 x H]
  return cell;
}

template <Real T>
void check_cell(const RnnCellOf<T>& cell, std::string_view where) {
  const Index H = cell.weight_ih.rows();
  require(H >= 1 && cell.weight_ih.cols() >= 1, where, [&] {
    return "weight_ih is " + shape_str(cell.weight_ih) + ": it needs at least one row and column";
  });
  require(cell.weight_hh.rows() == H && cell.weight_hh.cols() == H, where, [&] {
    return "weight_ih is " + shape_str(cell.weight_ih) + " but weight_hh is " +
           shape_str(cell.weight_hh) + ": weight_hh must be " + shape_str(H, H);
  });
  require(cell.bias_ih.cols() == H, where, [&] {
    return "weight_ih is " + shape_str(cell.weight_ih) + " but bias_ih is " +
           shape_str(cell.bias_ih) + ": bias_ih must be " + shape_str(1, H);
  });
  require(cell.bias_hh.cols() == H, where, [&] {
    return "weight_hh is " + shape_str(cell.weight_hh) + " but bias_hh is " +
           shape_str(cell.bias_hh) + ": bias_hh must be " + shape_str(1, H);
  });
}

RowVector rnn_step(const RnnCell& cell, const RowVector& x, const RowVector& a_prev) {
  check_cell(cell, "rnn_step");
  require(x.cols() == cell.input_size(), "rnn_step", [&] {
    return "x is " + shape_str(x) + " but weight_ih is " + shape_str(cell.weight_ih) +
           ": x must be [1 x " + int_str(cell.input_size()) + "]";
  });
  check_state(cell, a_prev.rows(), a_prev.cols(), "rnn_step");
  const RowVector p = x * cell.weight_ih.transpose() + cell.bias_ih;  // [1 x H]
  return step_from_projection<float>(cell.weight_hh, cell.bias_hh, p, a_prev);
}

template <Real T>
MatrixOf<T> rnn_forward(const RnnCellOf<T>& cell, const InView<T>& X, const InView<T>& h0) {
  check_cell(cell, "rnn_forward");
  check_sequence(cell, X, "rnn_forward", false);
  check_state(cell, h0.rows(), h0.cols(), "rnn_forward");
  return unroll<T>(cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh, MatrixOf<T>(X),
                   RowVectorOf<T>(h0));
}

template <Real T>
MatrixOf<T> rnn_forward(const RnnCellOf<T>& cell, const InView<T>& X) {
  check_cell(cell, "rnn_forward");
  return rnn_forward(cell, X, RowVectorOf<T>::Zero(cell.hidden_size()));
}

// Both precisions, as every layer (attn.hpp, "Two precisions").
#define ATTN_INSTANTIATE_RNN(T)                                                              \
  template void check_cell(const RnnCellOf<T>&, std::string_view);                           \
  template MatrixOf<T> rnn_forward(const RnnCellOf<T>&, const InView<T>&, const InView<T>&); \
  template MatrixOf<T> rnn_forward(const RnnCellOf<T>&, const InView<T>&);
ATTN_INSTANTIATE_RNN(float)
ATTN_INSTANTIATE_RNN(double)
#undef ATTN_INSTANTIATE_RNN

Matrix softmax_output(const Linear& head, const Matrix& A) {
  check_head(head, A.cols(), "softmax_output");
  return softmax_rows(linear_forward(head, A));  // [n x O]
}

// ---- The four shapes ----------------------------------------------------------------------------

RnnRun many_to_one(const RnnCell& cell, const Linear& head, const Matrix& X, const RowVector& h0) {
  check_cell(cell, "many_to_one");
  check_sequence(cell, X, "many_to_one", true);
  check_head(head, cell.hidden_size(), "many_to_one");
  RnnRun run;
  run.states = rnn_forward(cell, X, h0);                         // [T x H]
  run.outputs = softmax_output(head, run.states.bottomRows(1));  // [1 x O]
  return run;
}

RnnRun many_to_many(const RnnCell& cell, const Linear& head, const Matrix& X, const RowVector& h0) {
  check_cell(cell, "many_to_many");
  check_sequence(cell, X, "many_to_many", true);
  check_head(head, cell.hidden_size(), "many_to_many");
  RnnRun run;
  run.states = rnn_forward(cell, X, h0);           // [T x H]
  run.outputs = softmax_output(head, run.states);  // [T x O]
  return run;
}

RnnRun one_to_many(const RnnCell& cell, const Linear& head, const RowVector& x1,
                   const RowVector& h0, Index steps) {
  check_cell(cell, "one_to_many");
  check_head(head, cell.hidden_size(), "one_to_many");
  require(head.out_features() == cell.input_size(), "one_to_many", [&] {
    return "W_y is " + shape_str(head.weight) + " but weight_ih is " + shape_str(cell.weight_ih) +
           ": each output is fed back as the next input, so O must equal I = " +
           int_str(cell.input_size());
  });
  require(steps >= 1, "one_to_many",
          [&] { return "steps is " + int_str(steps) + ": it must be at least 1"; });
  RnnRun run;
  run.states.resize(steps, cell.hidden_size());    // [N x H]
  run.outputs.resize(steps, head.out_features());  // [N x O]
  RowVector x = x1;                                // [1 x I]
  RowVector a = h0;                                // [1 x H]
  for (Index t = 0; t < steps; ++t) {
    a = rnn_step(cell, x, a);
    run.states.row(t) = a;
    run.outputs.row(t) = softmax_output(head, a);
    x = run.outputs.row(t);  // y_hat<t> becomes x<t+1>
  }
  return run;
}

RnnSeq2SeqRun rnn_seq2seq(const RnnCell& encoder, const RnnCell& decoder, const Linear& head,
                          const Matrix& X, const RowVector& h0, Index out_steps) {
  check_cell(encoder, "rnn_seq2seq");
  check_cell(decoder, "rnn_seq2seq");
  check_sequence(encoder, X, "rnn_seq2seq", true);
  check_state(encoder, h0.rows(), h0.cols(), "rnn_seq2seq");
  require(decoder.hidden_size() == encoder.hidden_size(), "rnn_seq2seq", [&] {
    return "the encoder's weight_hh is " + shape_str(encoder.weight_hh) + " but the decoder's is " +
           shape_str(decoder.weight_hh) + ": the context vector must fit the decoder's state";
  });
  RnnSeq2SeqRun run;
  run.encoder_states = rnn_forward(encoder, X, h0);  // [N x H]
  run.context = run.encoder_states.bottomRows(1);    // [1 x H]: all the decoder will see of X
  const RnnRun dec =
      one_to_many(decoder, head, RowVector::Zero(decoder.input_size()), run.context, out_steps);
  run.decoder_states = dec.states;  // [M x H]
  run.outputs = dec.outputs;        // [M x O]
  return run;
}

// ---- Jacobians ----------------------------------------------------------------------------------

std::vector<MatrixD> input_jacobians(const RnnCell& cell, const Matrix& X, const RowVector& h0) {
  check_cell(cell, "input_jacobians");
  check_sequence(cell, X, "input_jacobians", true);
  check_state(cell, h0.rows(), h0.cols(), "input_jacobians");
  const RnnCellD celld = cast<double>(cell);                                  // exact widening
  const MatrixD& W_ih = celld.weight_ih;                                      // [H x I]
  const MatrixD& W_hh = celld.weight_hh;                                      // [H x H]
  const MatrixD A = rnn_forward(celld, X.cast<double>(), h0.cast<double>());  // [T x H]

  // tanh'(z) = 1 - tanh(z)^2 = 1 - a^2, so the step's local derivative needs only a<t>.
  const auto dtanh = [&A](Index t) -> VectorD {
    return (1.0 - A.row(t).array().square()).matrix().transpose();  // [H x 1]
  };
  std::vector<MatrixD> J;
  J.reserve(static_cast<std::size_t>(X.rows()));
  J.push_back(dtanh(0).asDiagonal() * W_ih);  // d a<1> / d x<1> [H x I]
  for (Index t = 1; t < X.rows(); ++t) {
    const MatrixD through = W_hh * J.back();       // [H x I]
    J.push_back(dtanh(t).asDiagonal() * through);  // d a<t+1> / d x<1> [H x I]
  }
  return J;
}

MatrixD input_jacobian_central_difference(const RnnCell& cell, const Matrix& X, const RowVector& h0,
                                          double eps) {
  check_cell(cell, "input_jacobian_central_difference");
  check_sequence(cell, X, "input_jacobian_central_difference", true);
  check_state(cell, h0.rows(), h0.cols(), "input_jacobian_central_difference");
  require(eps > 0.0, "input_jacobian_central_difference",
          [&] { return "eps is " + std::to_string(eps) + ": it must be positive"; });
  const RnnCellD celld = cast<double>(cell);  // exact widening
  const MatrixD Xd = X.cast<double>();        // [T x I]
  const RowVectorD h0d = h0.cast<double>();   // [1 x H]
  const Index last = X.rows() - 1;
  MatrixD J(cell.hidden_size(), cell.input_size());  // [H x I]
  for (Index j = 0; j < cell.input_size(); ++j) {
    MatrixD plus = Xd, minus = Xd;
    plus(0, j) += eps;
    minus(0, j) -= eps;
    const MatrixD a_plus = rnn_forward(celld, plus, h0d).row(last);    // [1 x H]
    const MatrixD a_minus = rnn_forward(celld, minus, h0d).row(last);  // [1 x H]
    J.col(j) = (a_plus - a_minus).transpose() / (2.0 * eps);
  }
  return J;
}

double spectral_radius(const Matrix& W) {
  require(W.rows() == W.cols() && W.rows() >= 1, "spectral_radius",
          [&] { return "W is " + shape_str(W) + ": it must be square and not empty"; });
  // Widened exactly to double, in the column-major layout EigenSolver works in.
  const Eigen::MatrixXd A = W.cast<double>();
  return Eigen::EigenSolver<Eigen::MatrixXd>(A, false).eigenvalues().cwiseAbs().maxCoeff();
}

}  // namespace attn
