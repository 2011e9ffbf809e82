// The sparse rule's layer-major forward (codelets/LifForward.cpp's step1 for Leaky) timed in two
// loop orders on the issue-13 setting's shapes: step-outer (every sample's row of step t, then
// t + 1: U and S[t-1] of all B samples, B x n floats each, walked once a step) against blocks of
// samples walked over all their steps (a block's U and S stay in L1). Each row: the listed
// input's W rows summed (sparseRowSum), the fused Leaky step (leakForwardRow: update, masked
// surrogate, spike ids) and the gradient trace's scan (forEachNonzero; with -DSCAN_BY_LANES
// appendNonzero, the engine's: by lanes); the block order writes its trace rows
// sample-major (an upper bound: the engine's rows [t, b] would need a reorder on top). Synthetic
// latency-coded input: each of ~half the 784 inputs fires once per sample.
//
// build: g++ -std=c++17 -O3 -march=native -fno-math-errno -fno-trapping-math -Icodelets
//          bench/forward_order.cpp -o /tmp/forward_order
// usage: forward_order [n T B block repeats]; prints the fused kernel's best ms alone with a
// checksum of U and the trace after a step-outer run (compare builds of two codelet versions),
// then the best ms of each order and the trace entries both wrote (equal: the same arithmetic).
// Block 256 (= B) runs the step-outer order through the block loop: the two loops' code differs
// by a few per cent by itself.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "LeakForwardRow.hpp"
#include "SparseBackward.hpp"
#include "harness.hpp"

using namespace popsnn::lif;

namespace {

struct Setting {
  unsigned n, T, B, nIn = 784;
  std::vector<unsigned> starts, ids; // the input list: row (t, b)'s ids
  std::vector<float> values, weights, bias;
};

Setting make(unsigned n, unsigned T, unsigned B) {
  Setting s{n, T, B};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<unsigned>> rows(std::size_t(T) * B);
  for (unsigned b = 0; b < B; ++b)
    for (unsigned i = 0; i < s.nIn; ++i)
      if (uniform(rng) < 0.5f)
        rows[std::size_t(unsigned(uniform(rng) * float(T - 1))) * B + b].push_back(i);
  s.starts.push_back(0);
  for (const auto &r : rows) {
    s.ids.insert(s.ids.end(), r.begin(), r.end());
    s.starts.push_back(unsigned(s.ids.size()));
  }
  s.values.assign(s.ids.size(), 1.0f);
  s.weights.resize(std::size_t(s.nIn) * n);
  for (float &w : s.weights)
    w = 0.35f * normal(rng);
  s.bias.assign(n, 0.02f);
  return s;
}

struct State {
  std::vector<float> u, prev, acc, sg;
  std::vector<int> spikeIds;
  std::vector<unsigned short> traceIds;
  std::vector<float> traceValues;
  unsigned used = 0, spikes = 0;
};

// Row (t, b): input, fused step, trace scan.
inline void row(const Setting &s, State &st, unsigned t, unsigned b) {
  const unsigned n = s.n, r = t * s.B + b;
  float *acc = st.acc.data();
  sparseRowSum(&s.ids[s.starts[r]], ListedValues{&s.values[s.starts[r]]},
               s.starts[r + 1] - s.starts[r], s.weights.data(), n, acc, n, false);
  for (unsigned j = 0; j < n; ++j)
    acc[j] += s.bias[j];
  float *sg = st.sg.data();
  st.spikes +=
      leakForwardRow(n, 0.95f, 1.0f, popsnn::codes::RESET_SUBTRACT, popsnn::codes::FAST_SIGMOID,
                     25.0f, popsnn::codes::RULE_WINDOW, 0.2f, acc, &st.u[std::size_t(b) * n],
                     &st.prev[std::size_t(b) * n], sg, 0, st.spikeIds.data(), 0, n);
#ifdef SCAN_BY_LANES
  st.used += appendNonzero(sg, n, st.used, unsigned(st.traceIds.size()), st.traceIds.data(),
                           st.traceValues.data());
#else
  forEachNonzero(sg, n, [&](unsigned j, float v) {
    st.traceIds[st.used] = static_cast<unsigned short>(j);
    st.traceValues[st.used] = v;
    ++st.used;
  });
#endif
}

double run(const Setting &s, State &st, unsigned block) {
  std::fill(st.u.begin(), st.u.end(), 0.0f);
  std::fill(st.prev.begin(), st.prev.end(), 0.0f);
  st.used = st.spikes = 0;
  const double t0 = harness::threadCpuMs();
  if (block == 0) {
    for (unsigned t = 0; t < s.T; ++t)
      for (unsigned b = 0; b < s.B; ++b)
        row(s, st, t, b);
  } else {
    for (unsigned b0 = 0; b0 < s.B; b0 += block)
      for (unsigned t = 0; t < s.T; ++t)
        for (unsigned b = b0; b < std::min(s.B, b0 + block); ++b)
          row(s, st, t, b);
  }
  return (harness::threadCpuMs() - t0) * 1e-3; // seconds
}

// The fused step alone (leakForwardRow), its input rows precomputed: the kernel's own cost.
double fusedOnly(const Setting &s, State &st, const std::vector<float> &inputs) {
  std::fill(st.u.begin(), st.u.end(), 0.0f);
  std::fill(st.prev.begin(), st.prev.end(), 0.0f);
  const unsigned n = s.n, rows = unsigned(inputs.size() / n);
  const double t0 = harness::threadCpuMs();
  for (unsigned t = 0; t < s.T; ++t)
    for (unsigned b = 0; b < s.B; ++b)
      st.spikes +=
          leakForwardRow(n, 0.95f, 1.0f, popsnn::codes::RESET_SUBTRACT, popsnn::codes::FAST_SIGMOID,
                         25.0f, popsnn::codes::RULE_WINDOW, 0.2f,
                         &inputs[std::size_t((t * s.B + b) % rows) * n], &st.u[std::size_t(b) * n],
                         &st.prev[std::size_t(b) * n], st.sg.data(), 0, st.spikeIds.data(), 0, n);
  return (harness::threadCpuMs() - t0) * 1e-3; // seconds
}

} // namespace

int main(int argc, char **argv) {
  const unsigned n = argc > 1 ? unsigned(std::atoi(argv[1])) : 100;
  const unsigned T = argc > 2 ? unsigned(std::atoi(argv[2])) : 100;
  const unsigned B = argc > 3 ? unsigned(std::atoi(argv[3])) : 256;
  const unsigned block = argc > 4 ? unsigned(std::atoi(argv[4])) : 4;
  const int repeats = argc > 5 ? std::atoi(argv[5]) : 10;
  const Setting s = make(n, T, B);
  State st;
  st.u.resize(std::size_t(B) * n);
  st.prev.resize(std::size_t(B) * n);
  st.acc.resize(n + 8);
  st.sg.resize(n + 8);
  st.spikeIds.resize(n + 8);
  st.traceIds.resize(std::size_t(T) * B * n);
  st.traceValues.resize(std::size_t(T) * B * n);
  double best[2] = {1e9, 1e9};
  unsigned entries[2] = {0, 0}, spikes[2] = {0, 0};
  for (int k = 0; k < repeats; ++k)
    for (int kind = 0; kind < 2; ++kind) {
      best[kind] = std::min(best[kind], run(s, st, kind == 0 ? 0 : block));
      entries[kind] = st.used;
      spikes[kind] = st.spikes;
    }
  std::vector<float> inputs(std::size_t(97) * n);
  std::mt19937 rng(5);
  for (float &v : inputs)
    v = std::normal_distribution<float>(0.05f, 0.3f)(rng);
  double fused = 1e9;
  for (int k = 0; k < repeats; ++k)
    fused = std::min(fused, fusedOnly(s, st, inputs));
  // Bit patterns of the states and the trace after a run: equal across builds of one order.
  run(s, st, 0);
  const auto bits = [](float v) {
    unsigned u;
    std::memcpy(&u, &v, sizeof u);
    return u;
  };
  unsigned long long check = 0;
  for (float v : st.u)
    check = check * 31 + bits(v);
  for (unsigned k = 0; k < st.used; ++k)
    check = check * 31 + bits(st.traceValues[k]) + st.traceIds[k];
  std::printf("leakForwardRow alone %.3f ms; checksum %llx\n", fused * 1e3, check);
  std::printf("step-outer %.3f ms, blocks of %u %.3f ms; trace %u / %u entries (%.2f%%), "
              "spikes %u / %u (%.2f%%)\n",
              best[0] * 1e3, block, best[1] * 1e3, entries[0], entries[1],
              100.0 * entries[0] / (double(T) * B * n), spikes[0], spikes[1],
              100.0 * spikes[0] / (double(T) * B * n));
  return 0;
}
