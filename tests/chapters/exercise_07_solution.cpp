// Right answers to exercises 07.1 to 07.3 (chapters/07_positional_encoding/exercise/), written
// with plain loops and without the library's positional encoding or attention, so that the
// course's suite can prove that tests/chapters/exercise_07.cpp passes right answers as well as
// failing the stubs. The marked regions are the worked answers chapter 07's page shows.
#include "reorder_and_attend.hpp"
#include "shift_positions.hpp"
#include "sinusoidal_table.hpp"

#include <cmath>
#include <cstddef>

// 07.1: sin on the even columns, cos on the odd ones, omega_i = 10000^(-2i/d).
// [answer_07_1]
attn::MatrixD exercise_sinusoidal_table(attn::Index positions, attn::Index d_model) {
  attn::MatrixD pe(positions, d_model);  // [positions x d_model]
  for (attn::Index two_i = 0; two_i < d_model; two_i += 2) {
    const double omega = std::pow(10000.0, -static_cast<double>(two_i) / d_model);
    for (attn::Index pos = 0; pos < positions; ++pos) {
      const double angle = static_cast<double>(pos) * omega;
      pe(pos, two_i) = std::sin(angle);
      pe(pos, two_i + 1) = std::cos(angle);
    }
  }
  return pe;
}
// [answer_07_1]

// 07.2: each (sin, cos) pair turned by omega_i k, the way that moves it on.
// [answer_07_2]
attn::MatrixD exercise_shift_positions(const attn::MatrixD& rows, attn::Index k) {
  const attn::Index d_model = rows.cols();
  attn::MatrixD moved(rows.rows(), d_model);  // [n x d_model]
  for (attn::Index two_i = 0; two_i < d_model; two_i += 2) {
    const double omega = std::pow(10000.0, -static_cast<double>(two_i) / d_model);
    const double c = std::cos(omega * k), s = std::sin(omega * k);  // PE(k, 2i+1), PE(k, 2i)
    for (attn::Index r = 0; r < rows.rows(); ++r) {
      const double a = rows(r, two_i), b = rows(r, two_i + 1);
      moved(r, two_i) = a * c + b * s;
      moved(r, two_i + 1) = -a * s + b * c;
    }
  }
  return moved;
}
// [answer_07_2]

// 07.3: reorder, add the slots' positions, attend, and scatter each output to its word's row.
// [answer_07_3]
attn::MatrixD exercise_reorder_and_attend(const attn::MatrixD& X, const attn::MatrixD& W_q,
                                          const attn::MatrixD& W_k, const attn::MatrixD& W_v,
                                          const std::vector<attn::Index>& order,
                                          bool add_positions) {
  const attn::Index n = X.rows(), d_model = X.cols();
  attn::MatrixD S(n, d_model);  // [n x d_model]: row r = word order[r]
  for (attn::Index r = 0; r < n; ++r) {
    S.row(r) = X.row(order[static_cast<std::size_t>(r)]);
    for (attn::Index c = 0; add_positions && c < d_model; ++c) {
      const double omega = std::pow(10000.0, -static_cast<double>(c - c % 2) / d_model);
      S(r, c) += c % 2 == 0 ? std::sin(omega * r) : std::cos(omega * r);  // PE(r, c): the slot's
    }
  }
  const attn::MatrixD Q = S * W_q, K = S * W_k, V = S * W_v;  // [n x d_k], [n x d_k], [n x d_v]
  attn::MatrixD weights = Q * K.transpose() / std::sqrt(static_cast<double>(W_q.cols()));
  for (attn::Index r = 0; r < n; ++r) {  // softmax of each row, its largest score subtracted
    weights.row(r) = (weights.row(r).array() - weights.row(r).maxCoeff()).exp().matrix();
    weights.row(r) /= weights.row(r).sum();
  }
  const attn::MatrixD out = weights * V;  // [n x d_v], in S's order
  attn::MatrixD back(n, W_v.cols());      // [n x d_v], in X's order
  for (attn::Index r = 0; r < n; ++r) back.row(order[static_cast<std::size_t>(r)]) = out.row(r);
  return back;
}
// [answer_07_3]
