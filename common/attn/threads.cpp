// threads.cpp: the library's default thread count, from OpenMP (the only file besides the
// parallel loops themselves that needs omp.h, so callers need no OpenMP flags).
#include "attn/threads.hpp"

#include <omp.h>

namespace attn {

int default_threads() { return omp_get_max_threads(); }

}  // namespace attn
