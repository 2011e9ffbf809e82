// Timing helpers shared by the bench's C++ harnesses: wall and thread-CPU clocks in ms, the
// least and median of a run's samples, the least of repeated calls, and a cache eviction
// between calls (in a step other vertices run between two calls of a kernel).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

// p moved on to the next 64-byte boundary (the engine allocates every variable on one; a
// std::vector's data is not, and vector loads across two cache lines cost more).
inline float *aligned64(float *p) {
  return reinterpret_cast<float *>((reinterpret_cast<std::uintptr_t>(p) + 63) / 64 * 64);
}

// Every value of type T in a binary file, in order (none if it cannot be read).
template <class T> std::vector<T> readValues(const char *path) {
  std::vector<T> values;
  if (FILE *f = std::fopen(path, "rb")) {
    T v;
    while (std::fread(&v, sizeof v, 1, f) == 1)
      values.push_back(v);
    std::fclose(f);
  }
  return values;
}

// Thread CPU ms of two versions of a kernel (run(which, first row, rows)) over `rows` rows in
// calls of `chunk` rows, the caches evicted before each call, `repeats` times each; the two take
// turns and which goes first alternates, so that neither gains from the order.
template <class F>
std::array<std::vector<double>, 2> alternatingChunks(unsigned repeats, unsigned rows,
                                                     unsigned chunk, F &&run) {
  CacheEvictor caches;
  std::array<std::vector<double>, 2> ms;
  for (unsigned rep = 0; rep < repeats; ++rep)
    for (unsigned turn = 0; turn < 2; ++turn) {
      const unsigned which = (rep + turn) % 2;
      double total = 0.0;
      for (unsigned r0 = 0; r0 < rows; r0 += chunk) {
        caches.evict();
        const double start = threadCpuMs();
        run(which, r0, std::min(chunk, rows - r0));
        total += threadCpuMs() - start;
      }
      ms[which].push_back(total);
    }
  return ms;
}

// Thread CPU ms of `kinds` kernels (run(kind)), the caches evicted before each call, over
// repeats + 1 rounds (the first, which pages the buffers in, untimed). With 4 kinds (two kernels,
// each current and old: kind + 2 its old form) odd rounds run the old forms first.
template <class F>
std::vector<std::vector<double>> alternatingKinds(unsigned kinds, unsigned repeats, F &&run) {
  CacheEvictor caches;
  std::vector<std::vector<double>> ms(kinds);
  for (unsigned rep = 0; rep <= repeats; ++rep)
    for (unsigned slot = 0; slot < kinds; ++slot) {
      const unsigned kind = rep % 2 ? (slot + 2) % kinds : slot;
      caches.evict();
      const double t0 = threadCpuMs();
      run(kind);
      if (rep > 0)
        ms[kind].push_back(threadCpuMs() - t0);
    }
  return ms;
}

// The least and median ms of both versions and their ratios first / second.
inline void printPair(const char *first, const char *second,
                      const std::array<std::vector<double>, 2> &ms) {
  std::printf("%s min %.2f median %.2f ms\n", first, least(ms[0]), median(ms[0]));
  std::printf("%s min %.2f median %.2f ms\n", second, least(ms[1]), median(ms[1]));
  std::printf("%s/%s min %.2f median %.2f\n", first, second, least(ms[0]) / least(ms[1]),
              median(ms[0]) / median(ms[1]));
}

// The chunked harnesses' command line, FILE [CHUNK REPEATS] (defaults 128 and 5): false, with
// the usage or the bad value on stderr, when it cannot be used.
struct ChunkArgs {
  const char *file = nullptr;
  unsigned chunk = 128, repeats = 5;
};
inline bool parseChunkArgs(int argc, char **argv, const char *fileName, ChunkArgs &out) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s %s [CHUNK REPEATS]\n", argv[0], fileName);
    return false;
  }
  out.file = argv[1];
  const int chunk = argc > 2 ? std::atoi(argv[2]) : int(out.chunk);
  const int repeats = argc > 3 ? std::atoi(argv[3]) : int(out.repeats);
  if (chunk < 1 || repeats < 1) {
    std::fprintf(stderr, "%s: CHUNK and REPEATS must be whole numbers of at least 1\n", argv[0]);
    return false;
  }
  out.chunk = unsigned(chunk), out.repeats = unsigned(repeats);
  return true;
}

} // namespace harness
