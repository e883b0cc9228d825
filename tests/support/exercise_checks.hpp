// exercise_checks.hpp: what the chapters' exercise tests (tests/chapters/exercise_NN.cpp) share:
// random inputs in double, and where a learner's matrix is furthest from the expected one.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"

#include <cmath>
#include <limits>

namespace attn_test {

/// [rows x cols] of N(0, stddev^2) draws in double, row by row from `rng` (the library's
/// random_normal gives float).
inline attn::MatrixD normal_matrix(attn::Rng& rng, attn::Index rows, attn::Index cols,
                                   double stddev = 1.0) {
  attn::MatrixD m(rows, cols);  // [rows x cols]
  for (attn::Index r = 0; r < rows; ++r) {
    for (attn::Index c = 0; c < cols; ++c) m(r, c) = rng.normal(0.0, stddev);
  }
  return m;
}

/// An entry of a matrix.
struct Entry {
  attn::Index row = 0, col = 0;
};

/// Where `yours` and `expected` (the same shape) differ the most: a NaN difference ranks above
/// any number (and of several NaNs, the last), so the message shows the NaN a learner must fix.
inline Entry worst_entry(const attn::MatrixD& yours, const attn::MatrixD& expected) {
  Entry worst_at;
  double worst = -1;
  for (attn::Index r = 0; r < yours.rows(); ++r) {
    for (attn::Index c = 0; c < yours.cols(); ++c) {
      const double error = std::abs(yours(r, c) - expected(r, c));
      if (!(error <= worst)) {
        worst = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
        worst_at = {r, c};
      }
    }
  }
  return worst_at;
}

}  // namespace attn_test
