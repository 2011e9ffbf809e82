// The push-next vertices' row kernels on one DSNN shard (n 500 hidden neurons, 10 outputs:
// rows of P = 16 floats, T x B = 3,200 spike buffers), as PushSpikes (sumRows: W_next.S) and
// PushGrads (addToRows: dL/dW_next += S^T dL/dI) call them: random spikes, each neuron at its
// own rate around RATE (the DSNN's hidden layer: ~0.08 on MNIST input, ~0.22 on U[0,1]), the
// rows 64-byte aligned as the runtime allocates tensors, the caches evicted between calls.
// Built with -DOLD_LIF_COMMON='"path/LifCommon.hpp"' (another version of codelets/, e.g.
// `git archive main codelets include | tar -x -C /tmp/old`), it times that version's kernels
// too, in the same process, old and new taking turns (read the medians; should GCC take the
// two copies of a header for one, re-date the old copy: touch -d 2020-01-01).
//
// build: c++ -std=c++17 -O2 -march=native -fno-math-errno -fno-trapping-math -Icodelets
//          [-DOLD_LIF_COMMON=...] bench/push_rows_speed.cpp -o /tmp/push_rows_speed
// usage: push_rows_speed [RATE REPEATS]; prints per kernel (and version) the least and median
// thread CPU ms per shard and step, ns per spike, and with OLD_LIF_COMMON the ratios old / new
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits> // before the namespaced copy, as the intrinsics below
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h> // before the namespaced copy: its own include of it is then empty
#endif

#ifdef OLD_LIF_COMMON
namespace old {
#include OLD_LIF_COMMON
} // namespace old
#endif
#include "LifCommon.hpp"
#include "harness.hpp"

namespace {

constexpr unsigned N = 500, ROWS = 3200, P = 16, OFFSET = 1000; // a second shard's ids

// Spike buffers as the id trace holds them: [count, count, ids...] one after another.
std::vector<int> spikeTrace(double rate, std::vector<unsigned> &starts, std::size_t &spikes) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> neuronRate(N);
  for (double &r : neuronRate)
    r = std::min(1.0, 2.0 * rate * u(rng));
  std::vector<int> trace;
  spikes = 0;
  for (unsigned row = 0; row < ROWS; ++row) {
    starts.push_back(unsigned(trace.size()));
    trace.insert(trace.end(), {0, 0});
    for (unsigned i = 0; i < N; ++i)
      if (u(rng) < neuronRate[i])
        trace.push_back(int(OFFSET + i));
    trace[starts.back()] = trace[starts.back() + 1] = int(trace.size() - starts.back() - 2);
    spikes += unsigned(trace[starts.back()]);
  }
  return trace;
}

} // namespace

int main(int argc, char **argv) {
  const double rate = argc > 1 ? std::atof(argv[1]) : 0.083;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 40;
  if (rate <= 0.0 || rate > 1.0 || repeats < 1) {
    std::fprintf(stderr, "usage: %s [RATE in (0, 1] REPEATS >= 1]\n", argv[0]);
    return 2;
  }
  std::vector<unsigned> starts;
  std::size_t spikes = 0;
  const std::vector<int> trace = spikeTrace(rate, starts, spikes);
  std::vector<float> store(N * P + 16), g(std::size_t(ROWS) * P), out(P);
  float *rows =
      reinterpret_cast<float *>((std::uintptr_t(store.data()) + 63) & ~std::uintptr_t(63));
  for (std::size_t k = 0; k < g.size(); ++k)
    g[k] = float(k % 97) * 0.01f - 0.5f;
  auto run = [&](unsigned kind) { // 0 sumRows, 1 addToRows (new; 2, 3 old)
    for (unsigned r = 0; r < ROWS; ++r) {
      const int *buf = &trace[starts[r]];
      const unsigned count = unsigned(buf[0]);
      if (kind == 0)
        popsnn::lif::sumRows(buf + 2, count, OFFSET, rows, P, out.data());
      if (kind == 1)
        popsnn::lif::addToRows(buf + 2, count, OFFSET, &g[r * P], rows, P);
#ifdef OLD_LIF_COMMON
      if (kind == 2)
        old::popsnn::lif::sumRows(buf + 2, count, OFFSET, rows, P, out.data());
      if (kind == 3)
        old::popsnn::lif::addToRows(buf + 2, count, OFFSET, &g[r * P], rows, P);
#endif
    }
  };
#ifdef OLD_LIF_COMMON
  constexpr unsigned KINDS = 4;
#else
  constexpr unsigned KINDS = 2;
#endif
  const char *names[4] = {"sumRows", "addToRows", "sumRows_old", "addToRows_old"};
  const std::vector<std::vector<double>> ms =
      harness::alternatingKinds(KINDS, unsigned(repeats), run);
  // The kernels against plain loops over the same buffers: addToRows bit for bit (each row's
  // terms in the same order), sumRows within float rounding (its two chains add in another).
  std::vector<float> plain(N * P, 0.0f), sums(P);
  std::fill(rows, rows + N * P, 0.0f);
  double sumError = 0.0;
  for (unsigned r = 0; r < ROWS; ++r) {
    const int *buf = &trace[starts[r]];
    const unsigned count = unsigned(buf[0]);
    popsnn::lif::addToRows(buf + 2, count, OFFSET, &g[r * P], rows, P);
    for (unsigned k = 0; k < count; ++k)
      for (unsigned c = 0; c < P; ++c)
        plain[(unsigned(buf[2 + k]) - OFFSET) * P + c] += g[r * P + c];
    popsnn::lif::sumRows(buf + 2, count, OFFSET, &g[0], P, out.data());
    std::fill(sums.begin(), sums.end(), 0.0f);
    for (unsigned k = 0; k < count; ++k)
      for (unsigned c = 0; c < P; ++c)
        sums[c] += g[(unsigned(buf[2 + k]) - OFFSET) * P + c];
    for (unsigned c = 0; c < P; ++c)
      sumError = std::max(sumError, double(std::fabs(sums[c] - out[c])));
  }
  const bool same = std::equal(plain.begin(), plain.end(), rows);
  std::printf("rate %.3f: %.1f spikes per buffer; addToRows as a plain loop bit for bit: %s, "
              "sumRows within %.1e\n",
              rate, double(spikes) / ROWS, same ? "yes" : "no", sumError);
  for (unsigned kind = 0; kind < KINDS; ++kind)
    std::printf("%s min %.3f median %.3f ms, %.2f ns per spike\n", names[kind],
                harness::least(ms[kind]), harness::median(ms[kind]),
                harness::median(ms[kind]) * 1e6 / double(spikes));
  if (KINDS == 4)
    std::printf("old/new median sumRows %.2f addToRows %.2f\n",
                harness::median(ms[2]) / harness::median(ms[0]),
                harness::median(ms[3]) / harness::median(ms[1]));
  return 0;
}
