// The runtime's thread pool (host/poplar/src/ThreadPool.cpp) under load: loops of 1-9
// tasks of uneven length, some throwing, with pauses long enough for the workers to
// sleep between some of them. Every task must run exactly once per loop and the first
// exception must reach the caller. Built with -fsanitize=thread by test_thread_pool.py.
#include "ThreadPool.hpp"

#include <atomic>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

using poplar::detail::parallelFor;

namespace {

struct Loop {
  std::vector<std::atomic<int>> *runs;
  unsigned spin;
  long throwAt;
};

void task(void *context, std::size_t i) {
  Loop &loop = *static_cast<Loop *>(context);
  (*loop.runs)[i].fetch_add(1, std::memory_order_relaxed);
  volatile unsigned sink = 0;
  for (unsigned k = 0; k < loop.spin * unsigned(i % 3 + 1); ++k)
    sink = sink + k;
  if (long(i) == loop.throwAt)
    throw std::runtime_error("task failed");
}

} // namespace

int main(int argc, char **argv) {
  const long loops = argc > 1 ? std::atol(argv[1]) : 20000;
  std::mt19937 rng(1);
  long wrong = 0, thrown = 0, expected = 0;
  for (long r = 0; r < loops; ++r) {
    const std::size_t n = 1 + rng() % 9;
    std::vector<std::atomic<int>> runs(n);
    Loop loop{&runs, rng() % 4 == 0 ? unsigned(rng() % 20000) : 0u,
              r % 97 == 0 ? long(rng() % n) : -1};
    expected += loop.throwAt >= 0;
    try {
      parallelFor(n, &task, &loop);
    } catch (const std::runtime_error &) {
      ++thrown;
    }
    for (auto &k : runs)
      wrong += k.load() != 1;
    if (r % 2000 == 0) { // long enough that the workers stop spinning and sleep
      volatile unsigned sink = 0;
      for (unsigned k = 0; k < 3000000u; ++k)
        sink = sink + k;
    }
  }
  std::printf("{\"wrong\": %ld, \"thrown\": %ld, \"expected\": %ld}\n", wrong, thrown, expected);
  return 0;
}
