/// @file
/// The library's threads. Its parallel loops (tiled attention's tiles and heads, a training
/// batch's sequences) use OpenMP, and each takes a `threads` argument whose 0 means this
/// default. Whatever the count, their results are the same bytes: every result is summed in an
/// order the data fixes, never the threads.
#pragma once

#include "attn/core/matrix.hpp"

namespace attn {

/// The least work, in flops, worth a parallel region. Starting and joining one costs
/// microseconds (far more when other programs hold the cores, since OpenMP's idle threads
/// spin before they sleep), and the training chapter and the gradient checks make thousands of
/// calls far below it.
inline constexpr double kThreadedFlops = 4.0e6;

/// The threads of a parallel loop over `tasks` tasks worth `flops` in all: the caller's
/// `threads` when it chose (> 0); otherwise one below kThreadedFlops, else default_threads().
/// Never more than `tasks` (at least 1).
int team_for(int threads, Index tasks, double flops);

/// The threads a parallel loop of the library uses when its caller passes 0: OMP_NUM_THREADS if
/// it is set, otherwise one per core (OpenMP's omp_get_max_threads()).
int default_threads();

}  // namespace attn
