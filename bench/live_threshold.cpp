// Where "few live neurons" ends, per kind of pass of the compressed backward: each pass has an
// indexed loop over a sample's live neurons and a vector pass over the whole shard of n (the
// others' values are 0, so both give the same sums), and LiveNeurons (codelets/
// SparseBackward.hpp) picks one by a fraction of n. Timed here, on this machine, at a range of
// live fractions, as the backward calls them: one (step, sample) after another, each with its
// own live ids (random order, as joinLive lists them) and its own input rows (random rows of a
// weight gradient of nIn x n, as latency-coded inputs and spikes fall).
//   input_rows: WeightGradRows::addRow at a list input's non-zeros (row += x_i dL/dI; addList)
//   spike_rows: addAtSpikeCols against addAtSpikeRows at an id buffer's spikes (row += dL/dI)
//   row_pass:   one row of n: the carry's decay and the bias gradient's sum (decayLive,
//               publishLive), the loops of those functions
//
// build: c++ -std=c++17 -O3 -march=native -fno-math-errno -fno-trapping-math -Icodelets
//        bench/live_threshold.cpp -o /tmp/live_threshold
// usage: live_threshold N INPUTS ROWS_PER_CALL CALLS REPEATS FRACTION...
// prints per (pass, fraction): "pass fraction indexed_min_ms whole_min_ms whole/indexed"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "BackwardGather.hpp"
#include "BackwardRows.hpp"
#include "harness.hpp"

namespace {

using popsnn::lif::LiveNeurons;

struct Calls {
  std::vector<std::vector<int>> live;   // per call: its live ids
  std::vector<std::vector<int>> inputs; // per call: an id buffer (header + ids)
  std::vector<std::vector<float>> values;
};

Calls makeCalls(unsigned n, unsigned nIn, unsigned rows, unsigned calls, unsigned count,
                std::mt19937 &rng) {
  Calls c;
  std::vector<int> cols(n), ins(nIn);
  std::iota(cols.begin(), cols.end(), 0);
  std::iota(ins.begin(), ins.end(), 0);
  for (unsigned k = 0; k < calls; ++k) {
    std::shuffle(cols.begin(), cols.end(), rng);
    std::shuffle(ins.begin(), ins.end(), rng);
    c.live.emplace_back(cols.begin(), cols.begin() + count);
    std::vector<int> buf(popsnn::codes::BUFFER_HEADER, 0);
    buf[0] = int(rows);
    buf.insert(buf.end(), ins.begin(), ins.begin() + rows);
    c.inputs.push_back(buf);
    c.values.emplace_back(rows, 0.5f);
  }
  return c;
}

void report(const char *pass, double fraction, double indexed, double whole) {
  std::printf("%s %.4f %.4f %.4f %.3f\n", pass, fraction, indexed, whole, whole / indexed);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s N INPUTS ROWS_PER_CALL CALLS REPEATS FRACTION...\n", argv[0]);
    return 2;
  }
  const unsigned n = unsigned(std::atoi(argv[1])), nIn = unsigned(std::atoi(argv[2]));
  const unsigned rows = unsigned(std::atoi(argv[3])), calls = unsigned(std::atoi(argv[4]));
  const unsigned repeats = unsigned(std::atoi(argv[5]));
  std::mt19937 rng(3);
  std::vector<float> grad(std::size_t(nIn) * n, 0.0f), dI(n), gU(n), gb(n, 0.0f);
  for (float &v : dI)
    v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  gU = dI;
  for (int a = 6; a < argc; ++a) {
    const double fraction = std::atof(argv[a]);
    const unsigned count = std::max(1u, unsigned(fraction * n + 0.5));
    const Calls c = makeCalls(n, nIn, rows, calls, count, rng);
    auto inputRows = [&](bool few) {
      for (unsigned k = 0; k < calls; ++k) {
        const LiveNeurons live{c.live[k].data(), count, 0};
        popsnn::backward_gather::WeightGradRows w(grad.data(), dI.data(), n, live);
        w.fewCols = few;
        w.addList({c.inputs[k].data() + popsnn::codes::BUFFER_HEADER, c.values[k].data(), rows});
      }
    };
    auto spikeRows = [&](bool few) {
      for (unsigned k = 0; k < calls; ++k)
        if (few)
          popsnn::backward_rows::addAtSpikeCols(c.inputs[k].data(), dI.data(), n, c.live[k].data(),
                                                count, grad.data());
        else
          popsnn::backward_rows::addAtSpikeRows(c.inputs[k].data(), dI.data(), n, grad.data());
    };
    auto rowPass = [&](bool few) {
      for (unsigned k = 0; k < calls; ++k) {
        const int *__restrict ids = c.live[k].data();
        float *__restrict u = gU.data();
        float *__restrict b = gb.data();
        if (few)
          for (unsigned i = 0; i < count; ++i) {
            u[ids[i]] = 0.9f * u[ids[i]];
            b[ids[i]] += u[ids[i]];
          }
        else
          for (unsigned j = 0; j < n; ++j) {
            u[j] = 0.9f * u[j];
            b[j] += u[j];
          }
      }
    };
    for (auto [name, pass] :
         {std::pair<const char *, std::function<void(bool)>>{"input_rows", inputRows},
          {"spike_rows", spikeRows},
          {"row_pass", rowPass}}) {
      double indexed = 1e30, whole = 1e30; // alternated, so both see the same machine
      for (unsigned r = 0; r < repeats; ++r) {
        indexed = std::min(indexed, harness::leastWallMs(1, [&] { pass(true); }));
        whole = std::min(whole, harness::leastWallMs(1, [&] { pass(false); }));
      }
      report(name, fraction, indexed, whole);
    }
  }
  std::printf("checksum %g\n", double(std::accumulate(grad.begin(), grad.begin() + n, 0.0f)));
  return 0;
}
