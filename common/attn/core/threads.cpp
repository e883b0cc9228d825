// threads.cpp: the library's default thread count, from OpenMP (the only file besides the
// parallel loops themselves that needs omp.h, so callers need no OpenMP flags).
#include "attn/core/threads.hpp"

#include <omp.h>

#include <algorithm>

namespace attn {

int default_threads() { return omp_get_max_threads(); }

int team_for(int threads, Index tasks, double flops) {
  const int wanted = threads > 0 ? threads : flops < kThreadedFlops ? 1 : default_threads();
  return static_cast<int>(std::max<Index>(1, std::min<Index>(wanted, tasks)));
}

}  // namespace attn
