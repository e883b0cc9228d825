// Planted for the warnings gate (CMakeLists.txt beside this file): it must NOT compile with
// warnings as errors for AVX-512, and must compile everywhere else.
#include "attn/core/matrix.hpp"

#include <Eigen/Core>

// Eigen's 16-lane exp and max, where GCC 12 raises its false positive in its own AVX-512
// header (attn/core/matrix.hpp silences that one): this part must stay quiet.
float exp_max(const attn::Matrix& scores) { return scores.array().exp().maxCoeff(); }

#if defined(__AVX512F__)
// The planted fault: a definite uninitialised read, compiled only for AVX-512, as the false
// positive was. The gate must report it.
int planted(int c) {
  int never_set;
  return never_set + c;
}
#endif
