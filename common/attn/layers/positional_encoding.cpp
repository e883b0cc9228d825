// positional_encoding.cpp: the sinusoidal table, computed in double and rounded once, and the
// rotations that shift it.
#include "attn/layers/positional_encoding.hpp"

#include "attn/core/memory.hpp"

#include <cmath>
#include <cstddef>
#include <string>

namespace attn {

namespace {

// omega for column c: the pair (2i, 2i+1) shares 10000^(-2i / d_model).
double column_frequency(Index c, Index d_model) {
  const Index two_i = c - c % 2;
  return std::pow(10000.0, -static_cast<double>(two_i) / static_cast<double>(d_model));
}

// One omega per column [d_model], so the table calls pow d_model times, not once per entry.
VectorD column_frequencies(Index d_model) {
  VectorD omega(d_model);
  for (Index c = 0; c < d_model; ++c) omega(c) = column_frequency(c, d_model);
  return omega;
}

// PE(pos, c) for every column c into `row` [1 x d_model], in double. The angle is one
// rounded product pos * omega, the same expression for the table and for R(k).
void encode_position(double pos, const VectorD& omega, Eigen::Ref<Eigen::RowVectorXd> row) {
  for (Index c = 0; c < omega.size(); ++c) {
    const double angle = pos * omega(c);
    row(c) = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
  }
}

}  // namespace

MatrixD sinusoidal_encoding_d(Index positions, Index d_model) {
  require(positions >= 0 && d_model >= 1, "sinusoidal_encoding", [&] {
    return "positions " + std::to_string(positions) + " must be >= 0 and d_model " +
           std::to_string(d_model) + " >= 1";
  });
  require_fits_in_memory("sinusoidal_encoding", ElementCount(positions, d_model), sizeof(double),
                         "for the table", [&] {
                           return "positions " + std::to_string(positions) + " and d_model " +
                                  std::to_string(d_model);
                         });
  const VectorD omega = column_frequencies(d_model);  // [d_model]
  MatrixD pe(positions, d_model);                     // [positions x d_model]
  for (Index pos = 0; pos < positions; ++pos) {
    encode_position(static_cast<double>(pos), omega, pe.row(pos));
  }
  return pe;
}

MatrixD sinusoidal_encoding_at(const std::vector<Index>& positions, Index d_model) {
  require(d_model >= 1, "sinusoidal_encoding_at",
          [&] { return "d_model must be >= 1, got " + std::to_string(d_model); });
  require_fits_in_memory("sinusoidal_encoding_at",
                         ElementCount(static_cast<Index>(positions.size()), d_model),
                         sizeof(double), "for the table", [&] {
                           return std::to_string(positions.size()) + " positions and d_model " +
                                  std::to_string(d_model);
                         });
  const VectorD omega = column_frequencies(d_model);          // [d_model]
  MatrixD pe(static_cast<Index>(positions.size()), d_model);  // [n x d_model]
  for (Index r = 0; r < pe.rows(); ++r) {
    encode_position(static_cast<double>(positions[static_cast<std::size_t>(r)]), omega, pe.row(r));
  }
  return pe;
}

Matrix sinusoidal_encoding(Index positions, Index d_model) {
  return sinusoidal_encoding_d(positions, d_model).cast<float>();  // one rounding per entry
}

VectorD sinusoidal_frequencies(Index d_model) {
  require(d_model >= 1, "sinusoidal_frequencies",
          [&] { return "d_model must be >= 1, got " + std::to_string(d_model); });
  require_fits_in_memory("sinusoidal_frequencies", ElementCount(1, d_model / 2 + d_model % 2),
                         sizeof(double), "for the frequencies",
                         [&] { return "d_model " + std::to_string(d_model); });
  VectorD omega((d_model + 1) / 2);  // [ceil(d_model / 2)]
  for (Index i = 0; i < omega.size(); ++i) omega(i) = column_frequency(2 * i, d_model);
  return omega;
}

MatrixD relative_rotation(Index k, Index d_model) {
  require(d_model >= 2 && d_model % 2 == 0, "relative_rotation", [&] {
    return "d_model must be even and >= 2 (sin/cos pairs), got " + std::to_string(d_model);
  });
  require_fits_in_memory("relative_rotation", ElementCount(d_model, d_model), sizeof(double),
                         "for the rotation", [&] { return "d_model " + std::to_string(d_model); });
  const MatrixD pe_k = sinusoidal_encoding_at({k}, d_model);  // PE(k) [1 x d_model]
  MatrixD R = MatrixD::Zero(d_model, d_model);                // [d_model x d_model], block-diagonal
  for (Index c = 0; c < d_model; c += 2) {
    const double sin_k = pe_k(0, c), cos_k = pe_k(0, c + 1);  // sin(omega_i k), cos(omega_i k)
    R(c, c) = cos_k;
    R(c, c + 1) = sin_k;  // PE(pos+k, 2i)   = cos * PE(pos, 2i) + sin * PE(pos, 2i+1)
    R(c + 1, c) = -sin_k;
    R(c + 1, c + 1) = cos_k;  // PE(pos+k, 2i+1) = -sin * PE(pos, 2i) + cos * PE(pos, 2i+1)
  }
  return R;
}

}  // namespace attn
