// positional_encoding.cpp: the sinusoidal table, computed in double and rounded once.
#include "attn/positional_encoding.hpp"

#include <cmath>
#include <string>

namespace attn {

Matrix sinusoidal_encoding(Index positions, Index d_model) {
  require(positions >= 0 && d_model >= 1, "sinusoidal_encoding",
          "positions " + std::to_string(positions) + " must be >= 0 and d_model " +
              std::to_string(d_model) + " >= 1");
  Matrix pe(positions, d_model);  // [positions x d_model]
  for (Index c = 0; c < d_model; ++c) {
    const Index two_i = c - c % 2;  // the pair (2i, 2i+1) shares one frequency
    const double frequency =
        std::pow(10000.0, -static_cast<double>(two_i) / static_cast<double>(d_model));
    for (Index pos = 0; pos < positions; ++pos) {
      const double angle = static_cast<double>(pos) * frequency;
      pe(pos, c) = static_cast<float>(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  return pe;
}

}  // namespace attn
