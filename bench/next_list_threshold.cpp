// The two ways LifBackward computes dL/dS at a sparse rule's entries from the next layer's dL/dI
// lists, timed on this machine (codelets/BackwardGather.hpp): the gathered row (the lists
// scattered into a zero-padded row of P floats, then one contiguous dot of P per entry) and
// the list dots (one indexed load per live neuron of the next layer per entry). Both called as
// LifBackward calls them, over ROWS (step, sample) rows of one shard.
//
// build: c++ -std=c++17 -O3 -march=native -fno-math-errno -Icodelets
//          bench/next_list_threshold.cpp -o /tmp/next_list_threshold
// usage: next_list_threshold N NEXT NEXT_SHARD ROWS REPEATS
// prints one line per (entries per row, live per mille of the next layer):
//   "entries live_per_mille gathered_min_ms list_min_ms chosen max_rel_diff"
// (chosen: what listDotsApply picks for the first row, "list" or "gathered").
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "BackwardGather.hpp"
#include "harness.hpp"

namespace {

using namespace popsnn::backward_gather;

using harness::Clock, harness::msSince;

// The next layer's lists of ROWS rows (each shard's live neurons at `perMille` of its width)
// and each row's entries of this shard, drawn once.
struct Rows {
  std::vector<int> starts;
  std::vector<unsigned short> ids;
  std::vector<float> values;
  std::vector<unsigned short> entryIds;
  unsigned capacity = 0;
};

Rows drawRows(unsigned n, unsigned next, unsigned shard, unsigned rows, unsigned entries,
              unsigned perMille, std::mt19937 &rng) {
  const unsigned shards = (next + shard - 1) / shard;
  Rows r;
  r.capacity = rows * shard;
  r.starts.assign(std::size_t(shards) * (rows + 1), 0);
  r.ids.assign(std::size_t(shards) * r.capacity, 0);
  r.values.assign(r.ids.size(), 0.0f);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<unsigned short> order(std::max(n, shard));
  for (unsigned s = 0; s < shards; ++s) {
    const unsigned size = std::min(shard, next - s * shard);
    const unsigned live = (size * perMille + 500) / 1000;
    int *start = &r.starts[s * (rows + 1)];
    for (unsigned k = 0; k < rows; ++k) {
      for (unsigned c = 0; c < size; ++c)
        order[c] = static_cast<unsigned short>(c);
      std::shuffle(order.begin(), order.begin() + size, rng);
      for (unsigned c = 0; c < live; ++c) {
        r.ids[s * r.capacity + unsigned(start[k]) + c] = order[c];
        r.values[s * r.capacity + unsigned(start[k]) + c] = u(rng);
      }
      start[k + 1] = start[k] + int(live);
    }
  }
  for (unsigned k = 0; k < rows; ++k) {
    for (unsigned c = 0; c < n; ++c)
      order[c] = static_cast<unsigned short>(c);
    std::shuffle(order.begin(), order.begin() + n, rng);
    r.entryIds.insert(r.entryIds.end(), order.begin(), order.begin() + entries);
  }
  return r;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: next_list_threshold N NEXT NEXT_SHARD ROWS REPEATS\n");
    return 2;
  }
  const unsigned n = unsigned(std::atoi(argv[1])), next = unsigned(std::atoi(argv[2]));
  const unsigned shard = unsigned(std::atoi(argv[3])), rows = unsigned(std::atoi(argv[4]));
  const unsigned repeats = unsigned(std::atoi(argv[5]));
  const unsigned P = popsnn::codes::pushWidth(next);
  std::mt19937 rng(7);
  std::vector<float> weights(std::size_t(n) * P, 0.0f); // by own neuron, padded (nextWeightsT)
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (unsigned j = 0; j < n; ++j)
    for (unsigned c = 0; c < next; ++c)
      weights[j * P + c] = u(rng);
  std::vector<float> g(P), epsA(n), epsB(n);
  float sink = 0.0f;
  for (unsigned entries : {1u, 2u, 4u, 8u, 16u}) {
    for (unsigned perMille : {20u, 50u, 100u, 150u, 200u, 250u, 300u, 400u, 500u, 700u}) {
      const Rows r = drawRows(n, next, shard, rows, entries, perMille, rng);
      const unsigned allValues = unsigned(r.values.size());
      double gathered = 1e30, list = 1e30, diff = 0.0;
      for (unsigned rep = 0; rep < repeats; ++rep) {
        auto t0 = Clock::now();
        for (unsigned k = 0; k < rows; ++k) {
          popsnn::lif::gatherNextList(r.starts.data(), r.ids.data(), r.values.data(), g.data(),
                                      next, shard, rows, k, allValues);
          nextLayerDots(epsA.data(), &r.entryIds[k * entries], entries, weights.data(), g.data(),
                        P);
          sink += epsA[r.entryIds[k * entries]];
        }
        gathered = std::min(gathered, msSince(t0));
        t0 = Clock::now();
        for (unsigned k = 0; k < rows; ++k) {
          const NextListRow row = nextListRow(r.starts.data(), r.ids.data(), r.values.data(), next,
                                              shard, rows, k, allValues);
          nextListDots(epsB.data(), &r.entryIds[k * entries], entries, weights.data(), P, row);
          sink += epsB[r.entryIds[k * entries]];
        }
        list = std::min(list, msSince(t0));
      }
      // The last row's dots, both ways: the same sums in another order.
      for (unsigned c = 0; c < entries; ++c) {
        const unsigned j = r.entryIds[(rows - 1) * entries + c];
        diff = std::max(diff, double(std::fabs(epsA[j] - epsB[j])) /
                                  std::max(1e-6, double(std::fabs(epsA[j]))));
      }
      const unsigned live = nextListRow(r.starts.data(), r.ids.data(), r.values.data(), next, shard,
                                        rows, 0, allValues)
                                .count();
      std::printf("%u %u %.4f %.4f %s %.2e\n", entries, perMille, gathered, list,
                  listDotsApply(entries, live, P) ? "list" : "gathered", diff);
    }
  }
  std::fprintf(stderr, "checksum %g\n", double(sink));
  return 0;
}
