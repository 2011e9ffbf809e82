// Internal: the worker threads that run tiles in parallel. One pool per
// process; the calling thread takes part in every parallel loop.
#pragma once
#include <cstddef>

namespace poplar {
namespace detail {

using TaskFn = void (*)(void *context, std::size_t index);

// Runs fn(context, i) for i in [0, n), spread over the pool's threads, and
// returns when all are done. Rethrows the first exception a task threw.
void parallelFor(std::size_t n, TaskFn fn, void *context);

// Threads taking part in parallelFor ($POPSNN_NUM_THREADS, else the hardware's).
unsigned poolThreads();

} // namespace detail
} // namespace poplar
