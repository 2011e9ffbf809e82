// Timing helpers shared by the bench's C++ harnesses: wall and thread-CPU clocks in ms, the
// least and median of a run's samples, the least of repeated calls, and a cache eviction
// between calls (in a step other vertices run between two calls of a kernel).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <ctime>
#include <vector>

namespace harness {

using Clock = std::chrono::steady_clock;

inline double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// This thread's CPU time: other processes' load on the VM does not count into it.
inline double threadCpuMs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

inline double least(const std::vector<double> &ms) {
  return *std::min_element(ms.begin(), ms.end());
}

inline double median(std::vector<double> ms) {
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

// The least wall ms of `repeats` calls of run().
template <class F> double leastWallMs(unsigned repeats, F &&run) {
  double best = 1e30;
  for (unsigned r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    run();
    best = std::min(best, msSince(t0));
  }
  return best;
}

// Reads 8 MiB, more than L2, so that the next call finds its data where a step leaves it.
class CacheEvictor {
public:
  void evict() {
    for (std::size_t i = 0; i < buffer_.size(); i += 16)
      sink_ = sink_ + buffer_[i];
  }

private:
  std::vector<float> buffer_ = std::vector<float>(std::size_t(8) << 18, 1.0f);
  volatile float sink_ = 0.0f;
};

} // namespace harness
