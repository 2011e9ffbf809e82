// The next layer's dL/dI list dots (codelets/BackwardGather.hpp) against a plain double loop:
// nextListDots, and the gathered row's nextLayerDots after gatherNextList, on random lists of
// several next-layer shards (the last one ragged). Prints "name max_relative_error" per check,
// then "choice ENTRIES LIVE P 0|1" for a grid of listDotsApply's inputs (test_engine_list_dots.py
// compares them with its copy of the rule).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "BackwardGather.hpp"

using namespace popsnn::backward_gather;

int main() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const unsigned n = 37, rows = 9;
  for (unsigned next : {5u, 40u, 203u}) {
    const unsigned shard = next > 20 ? 17 : next, shards = (next + shard - 1) / shard;
    const unsigned P = popsnn::codes::pushWidth(next), capacity = rows * shard;
    std::vector<float> weights(std::size_t(n) * P, 0.0f), values(shards * capacity, 0.0f);
    for (unsigned j = 0; j < n; ++j)
      for (unsigned c = 0; c < next; ++c)
        weights[j * P + c] = u(rng);
    std::vector<int> starts(shards * (rows + 1), 0);
    std::vector<unsigned short> ids(shards * capacity, 0), order(shard);
    for (unsigned s = 0; s < shards; ++s) {
      const unsigned size = std::min(shard, next - s * shard);
      for (unsigned k = 0; k < rows; ++k) {
        const unsigned live = unsigned(rng() % (size + 1)); // 0 .. every neuron
        for (unsigned c = 0; c < size; ++c)
          order[c] = static_cast<unsigned short>(c);
        std::shuffle(order.begin(), order.begin() + size, rng);
        const unsigned at = s * capacity + unsigned(starts[s * (rows + 1) + k]);
        for (unsigned c = 0; c < live; ++c) {
          ids[at + c] = order[c];
          values[at + c] = u(rng);
        }
        starts[s * (rows + 1) + k + 1] = starts[s * (rows + 1) + k] + int(live);
      }
    }
    double listErr = 0.0, rowErr = 0.0;
    std::vector<unsigned short> entries(n);
    for (unsigned j = 0; j < n; ++j)
      entries[j] = static_cast<unsigned short>(n - 1 - j);
    std::vector<float> epsList(n), epsRow(n), g(P);
    for (unsigned k = 0; k < rows; ++k) {
      const NextListRow row = nextListRow(starts.data(), ids.data(), values.data(), next, shard,
                                          rows, k, unsigned(values.size()));
      nextListDots(epsList.data(), entries.data(), n, weights.data(), P, row);
      popsnn::lif::gatherNextList(starts.data(), ids.data(), values.data(), g.data(), next, shard,
                                  rows, k, unsigned(values.size()));
      nextLayerDots(epsRow.data(), entries.data(), n, weights.data(), g.data(), P);
      for (unsigned j = 0; j < n; ++j) {
        double want = 0.0, scale = 1e-30;
        for (unsigned s = 0; s < shards; ++s)
          for (int e = starts[s * (rows + 1) + k]; e < starts[s * (rows + 1) + k + 1]; ++e) {
            const double p = double(weights[j * P + s * shard + ids[s * capacity + e]]) *
                             double(values[s * capacity + e]);
            want += p;
            scale += std::fabs(p);
          }
        listErr = std::max(listErr, std::fabs(epsList[j] - want) / scale);
        rowErr = std::max(rowErr, std::fabs(epsRow[j] - want) / scale);
      }
    }
    std::printf("list_dots_%u %.3g\n", next, listErr);
    std::printf("gathered_dots_%u %.3g\n", next, rowErr);
  }
  for (unsigned entries : {1u, 2u, 4u, 8u, 16u, 64u})
    for (unsigned live : {0u, 3u, 20u, 60u, 150u, 1000u})
      for (unsigned P : {16u, 48u, 208u, 1008u})
        std::printf("choice %u %u %u %d\n", entries, live, P, int(listDotsApply(entries, live, P)));
  return 0;
}
