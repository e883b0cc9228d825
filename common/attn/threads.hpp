/// @file
/// The library's threads. Its parallel loops (tiled attention's tiles and heads, a training
/// batch's sequences) use OpenMP, and each takes a `threads` argument whose 0 means this
/// default. Whatever the count, their results are the same bytes: every result is summed in an
/// order the data fixes, never the threads.
#pragma once

namespace attn {

/// The threads a parallel loop of the library uses when its caller passes 0: OMP_NUM_THREADS if
/// it is set, otherwise one per core (OpenMP's omp_get_max_threads()).
int default_threads();

}  // namespace attn
