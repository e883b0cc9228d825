// column_attention.cpp: the notes' column form, by loops (chapter 02) and by products (chapter 03).
#include "attn/ops/column_attention.hpp"

#include "attn/ops/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

namespace {

// The factor applied to every score: 1 (the notes) or 1/sqrt(d_k). Both forms multiply by the
// same float, so they round identically.
float score_factor(Index d_k, const ColumnOptions& opts) {
  return opts.scale ? 1.0f / std::sqrt(static_cast<float>(d_k)) : 1.0f;
}

// Checks Q, K, V and returns a result that holds copies of them, ready for A, A', Y.
ColumnAttention start_result(std::string_view where, const Matrix& Q, const Matrix& K,
                             const Matrix& V) {
  require(Q.rows() == K.rows(), where, [&] {
    return "Q is " + shape_str(Q) + " but K is " + shape_str(K) +
           ": q and k must have the same length d_k (rows)";
  });
  require(K.cols() == V.cols(), where, [&] {
    return "K is " + shape_str(K) + " but V is " + shape_str(V) +
           ": every key needs a value (same number of columns)";
  });
  require(K.cols() >= 1 && K.rows() >= 1, where,
          [&] { return "K is " + shape_str(K) + ": need at least one key and d_k >= 1"; });
  ColumnAttention r;
  r.Q = Q;
  r.K = K;
  r.V = V;
  return r;
}

void check_weights(std::string_view where, const Matrix& W_q, const Matrix& W_k, const Matrix& W_v,
                   const Matrix& X) {
  const auto check_columns = [&](const char* name, const Matrix& W) {
    require(W.cols() == X.rows(), where, [&] {
      return std::string(name) + " is " + shape_str(W) + " but X is " + shape_str(X) +
             ": W's columns must match X's rows (d_in)";
    });
  };
  check_columns("W_q", W_q);
  check_columns("W_k", W_k);
  check_columns("W_v", W_v);
  require(W_q.rows() == W_k.rows(), where, [&] {
    return "W_q is " + shape_str(W_q) + " but W_k is " + shape_str(W_k) +
           ": q and k must have the same length d_k (rows)";
  });
  require(X.cols() >= 1 && W_q.rows() >= 1, where, [&] {
    return "X is " + shape_str(X) + ", W_q is " + shape_str(W_q) +
           ": need at least one token and d_k >= 1";
  });
}

// Softmax of one query's scores, as attention() (attention.hpp) treats a row without a mask:
// scores that are all -inf leave the weights 0 / 0, which is NaN, not the zeros of an empty row
// (the column form has no mask, so no query is ever left without keys).
void query_softmax(std::span<float> scores) {
  if (!softmax_inplace(scores)) {
    std::fill(scores.begin(), scores.end(), std::numeric_limits<float>::quiet_NaN());
  }
}

}  // namespace

ColumnExample worked_example() {
  ColumnExample e{Matrix(2, 3), Matrix(2, 3), Matrix(2, 3), Matrix(3, 4)};
  e.W_q << 1, 0, 0,  //
      0, 0, 1;
  e.W_k << 0, -0.5f, 0,  //
      0.5f, 0.25f, 0;
  e.W_v << 1, 0, 0,  //
      0, 1, 0;
  e.X << 1, 3, 3, 2,  //
      0, 2, 0, 9,     //
      2, 1, 0, 6;
  return e;
}

// ---- One vector at a time -----------------------------------------------------------------------

Matrix project_loops(const Matrix& W, const Matrix& X) {
  require(W.cols() == X.rows(), "project_loops", [&] {
    return "W is " + shape_str(W) + " but X is " + shape_str(X) +
           ": W's columns must match X's rows";
  });
  Matrix out(W.rows(), X.cols());           // [d_out x n], column i = W x^i
  for (Index i = 0; i < X.cols(); ++i) {    // every input vector x^i
    for (Index r = 0; r < W.rows(); ++r) {  // every entry of W x^i: row r of W . x^i
      float sum = 0.0f;
      for (Index c = 0; c < W.cols(); ++c) sum += W(r, c) * X(c, i);
      out(r, i) = sum;
    }
  }
  return out;
}

Matrix scores_loops(const Matrix& Q, const Matrix& K, const ColumnOptions& opts) {
  require(Q.rows() == K.rows(), "scores_loops", [&] {
    return "Q is " + shape_str(Q) + " but K is " + shape_str(K) +
           ": q and k must have the same length d_k (rows)";
  });
  const float factor = score_factor(Q.rows(), opts);
  Matrix A(K.cols(), Q.cols());             // [n_k x n_q], A(j, i) = alpha_{i,j}
  for (Index i = 0; i < Q.cols(); ++i) {    // query q^i
    for (Index j = 0; j < K.cols(); ++j) {  // key k^j (a token scores itself too: j = i)
      float dot = 0.0f;
      for (Index c = 0; c < Q.rows(); ++c) dot += Q(c, i) * K(c, j);
      A(j, i) = dot * factor;
    }
  }
  return A;
}

Matrix weighted_sum_loops(const Matrix& V, const Matrix& weights) {
  require(V.cols() == weights.rows(), "weighted_sum_loops", [&] {
    return "V is " + shape_str(V) + " but weights is " + shape_str(weights) +
           ": one weight per value vector (V's columns = weights' rows)";
  });
  Matrix Y = Matrix::Zero(V.rows(), weights.cols());  // [d_v x n_q]
  for (Index i = 0; i < weights.cols(); ++i) {        // output y^i
    for (Index j = 0; j < V.cols(); ++j) {            // y^i += alpha'_{i,j} v^j
      for (Index c = 0; c < V.rows(); ++c) Y(c, i) += weights(j, i) * V(c, j);
    }
  }
  return Y;
}

ColumnAttention column_attend_loops(const Matrix& Q, const Matrix& K, const Matrix& V,
                                    const ColumnOptions& opts) {
  ColumnAttention r = start_result("column_attend_loops", Q, K, V);
  r.A = scores_loops(Q, K, opts);  // [n_k x n_q]
  // alpha'_{i,j} = exp(alpha_{i,j}) / sum_j exp(alpha_{i,j}): one query (one column) at a time.
  r.A_prime.resize(r.A.rows(), r.A.cols());  // [n_k x n_q]
  std::vector<float> column(static_cast<std::size_t>(r.A.rows()));
  for (Index i = 0; i < r.A.cols(); ++i) {
    for (Index j = 0; j < r.A.rows(); ++j) column[static_cast<std::size_t>(j)] = r.A(j, i);
    query_softmax(column);
    for (Index j = 0; j < r.A.rows(); ++j) r.A_prime(j, i) = column[static_cast<std::size_t>(j)];
  }
  r.Y = weighted_sum_loops(V, r.A_prime);  // [d_v x n_q]
  return r;
}

ColumnAttention column_attention_loops(const Matrix& W_q, const Matrix& W_k, const Matrix& W_v,
                                       const Matrix& X, const ColumnOptions& opts) {
  check_weights("column_attention_loops", W_q, W_k, W_v, X);
  return column_attend_loops(project_loops(W_q, X), project_loops(W_k, X), project_loops(W_v, X),
                             opts);
}

// ---- Matrix form --------------------------------------------------------------------------------

ColumnAttention column_attend(const Matrix& Q, const Matrix& K, const Matrix& V,
                              const ColumnOptions& opts) {
  ColumnAttention r = start_result("column_attend", Q, K, V);
  r.A.noalias() = K.transpose() * Q;  // [n_k x n_q] = [n_k x d_k] [d_k x n_q]
  if (opts.scale) r.A *= score_factor(Q.rows(), opts);
  // Column i holds query i's scores; transposed once, every query is a contiguous row.
  Matrix by_query = r.A.transpose();  // [n_q x n_k]
  for (Index i = 0; i < by_query.rows(); ++i) {
    query_softmax({by_query.row(i).data(), static_cast<std::size_t>(by_query.cols())});
  }
  r.A_prime = by_query.transpose();  // [n_k x n_q], every column sums to 1
  r.Y.noalias() = V * r.A_prime;     // [d_v x n_q] = [d_v x n_k] [n_k x n_q]
  return r;
}

ColumnAttention column_attention(const Matrix& W_q, const Matrix& W_k, const Matrix& W_v,
                                 const Matrix& X, const ColumnOptions& opts) {
  check_weights("column_attention", W_q, W_k, W_v, X);
  const Matrix Q = W_q * X;  // [d_k x n]
  const Matrix K = W_k * X;  // [d_k x n]
  const Matrix V = W_v * X;  // [d_v x n]
  return column_attend(Q, K, V, opts);
}

}  // namespace attn
