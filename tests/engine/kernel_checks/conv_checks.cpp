// The event-driven convolution's two kernels (codelets/ConvEvents.hpp's windowEventsRow,
// and ConvKernels.hpp's scatterRow, which rows take when the work does not hold the lists)
// against the dense one (gatherRow), and the weight gradient by positions
// (weightGradByPositions) and by taps (ConvWeightTaps.hpp's weightGradByTaps) against the one
// by inputs (weightGradByInputs), and the input
// gradient's window runs after a folded 2 x 2 max pool kernel row by kernel row
// (ConvInputRuns.hpp's pooledLists, addListedRuns) against position by position
// (pooledPositions, addWindowRuns), entry for entry: each pair sums every output's terms in
// the same order, so they must give the same floats.
// Geometries with strides, padding and channel counts below, at and past a vector; inputs as spikes
// (ones) and as real values. Prints one line per case: its name and the number of outputs that
// differ from gatherRow's bits (0 expected).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "ConvEvents.hpp"
#include "ConvInputRuns.hpp"
#include "ConvWeightTaps.hpp"

using popsnn::conv::Window;

namespace {

unsigned mismatches(const std::vector<float> &a, const std::vector<float> &b) {
  unsigned bad = 0;
  for (std::size_t k = 0; k < a.size(); ++k)
    bad += std::memcmp(&a[k], &b[k], sizeof(float)) != 0;
  return bad;
}

void check(const char *geometry, const Window &w, unsigned c, double density, bool spikes,
           std::mt19937 &rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), p(0.0f, 1.0f);
  std::vector<float> x(w.inSize()), taps(std::size_t(w.taps()) * c);
  for (float &v : x)
    v = p(rng) < density ? (spikes ? 1.0f : u(rng)) : 0.0f;
  for (float &v : taps)
    v = u(rng);
  const std::size_t outs = std::size_t(w.outPositions()) * c;
  std::vector<float> dense(outs, 0.0f), scattered(outs, 0.0f), windows(outs, NAN);
  std::vector<unsigned> idx(w.inSize() + popsnn::conv::windowEventsWords(w.inSize()));
  const unsigned count = popsnn::conv::nonzeroIndices(x.data(), w.inSize(), idx.data());
  popsnn::conv::gatherRow(w, x.data(), taps.data(), c, dense.data());
  popsnn::conv::scatterRow(w, x.data(), idx.data(), count, taps.data(), c, scattered.data());
  popsnn::conv::windowEventsRow(w, x.data(), idx.data(), count, taps.data(), c, windows.data(),
                                idx.data() + count);
  std::printf("scatter_%s_c%u_d%.2f_%s %u\n", geometry, c, density, spikes ? "spikes" : "values",
              mismatches(scattered, dense));
  std::printf("windows_%s_c%u_d%.2f_%s %u\n", geometry, c, density, spikes ? "spikes" : "values",
              mismatches(windows, dense));
  // The weight gradient by inputs, by positions and by taps against weightGradByInputs (dL/dI
  // [P, c], then the c zeros weightGradByTaps reads for terms that reach no output).
  std::vector<float> g(outs + c, 0.0f), byInputs(taps.size(), 0.0f), byPositions(taps.size(), 0.0f);
  std::vector<float> byTaps(taps.size(), 0.0f);
  for (std::size_t k = 0; k < outs; ++k)
    g[k] = p(rng) < 0.25 ? u(rng) : 0.0f;
  popsnn::conv::weightGradByInputs<popsnn::conv::ChannelsLast>(w, c, x.data(), idx.data(), count,
                                                               g.data(), nullptr, byInputs.data());
  popsnn::conv::weightGradByPositions(w, c, x.data(), idx.data(), count, g.data(),
                                      byPositions.data(), idx.data() + count);
  std::printf("weight_grad_%s_c%u_d%.2f_%s %u\n", geometry, c, density,
              spikes ? "spikes" : "values", mismatches(byPositions, byInputs));
  std::vector<unsigned> lists(popsnn::conv::tapListsWords(w, count));
  const bool took = popsnn::conv::weightGradByTaps(w, c, x.data(), idx.data(), count, g.data(),
                                                   unsigned(outs), byTaps.data(), lists.data());
  std::printf("weight_taps_%s_c%u_d%.2f_%s %u\n", geometry, c, density,
              spikes ? "spikes" : "values", took ? mismatches(byTaps, byInputs) : ~0u);
}

// dL/dx channels-last of one row from a 2 x 2 max pool's gradient [c, Q] (30% zeros) and
// argmax, by the two orders of the window runs.
void checkInputRuns(const char *geometry, const Window &w, unsigned c, std::mt19937 &rng) {
  using namespace popsnn::conv;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), p(0.0f, 1.0f);
  std::uniform_int_distribution<unsigned> corner(0, 3);
  const unsigned Q = w.outPositions() / 4, R = paddedRun(w);
  std::vector<float> weights(std::size_t(c) * w.taps()), grad(std::size_t(c) * Q);
  std::vector<unsigned> argmax(grad.size());
  for (float &v : weights)
    v = u(rng);
  for (std::size_t k = 0; k < grad.size(); ++k)
    grad[k] = p(rng) < 0.3f ? 0.0f : u(rng), argmax[k] = corner(rng);
  std::vector<float> wr(std::size_t(c) * w.kernelHeight * R);
  weightRuns(w, c, weights.data(), wr.data());
  std::vector<float> byPositions(w.inSize() + R, 0.0f), byRows(byPositions);
  std::vector<float> lists(gradRowFloats<ChannelsLast>(w, c));
  pooledPositions(w, c, grad.data(), argmax.data(), lists.data(),
                  [&](unsigned q, unsigned n, const float *coef, const unsigned *chan) {
                    addWindowRuns(w, c, q, n, coef, chan, wr.data(), byPositions.data());
                  });
  addListedRuns(w, c, pooledLists(w, c, grad.data(), argmax.data(), lists.data()), wr.data(),
                byRows.data());
  std::printf("input_runs_%s_c%u %u\n", geometry, c, mismatches(byRows, byPositions));
}

// weightGradByTaps refuses a row with an inf input (its zero rows would add inf x 0 = NaN
// where the other kernels add no term) and leaves gwT as it was: prints 0 if so.
void checkTapsRefuseInf(const Window &w) {
  const unsigned c = 16;
  std::vector<float> x(w.inSize(), 0.0f), g((w.outPositions() + 1) * c, 0.5f);
  x[5] = 1.0f, x[w.inSize() / 2] = INFINITY;
  std::vector<unsigned> idx(w.inSize()), lists;
  const unsigned count = popsnn::conv::nonzeroIndices(x.data(), w.inSize(), idx.data());
  lists.resize(popsnn::conv::tapListsWords(w, count));
  std::vector<float> gwT(std::size_t(w.taps()) * c, 0.0f);
  const bool took = popsnn::conv::weightGradByTaps(w, c, x.data(), idx.data(), count, g.data(),
                                                   w.outPositions() * c, gwT.data(), lists.data());
  unsigned changed = 0;
  for (float v : gwT)
    changed += v != 0.0f;
  std::printf("weight_taps_refuse_inf %u\n", unsigned(took) + changed);
}

} // namespace

int main() {
  std::mt19937 rng(7);
  struct Geometry {
    const char *name;
    Window w;
  };
  // Window: inChannels, inHeight, inWidth, kH, kW, strideY, strideX, padY, padX, outH, outW.
  const Geometry geometries[] = {
      {"csnn2", {12, 12, 12, 5, 5, 1, 1, 0, 0, 8, 8}},
      {"pad1", {3, 10, 9, 3, 3, 1, 1, 1, 1, 10, 9}},
      {"stride2pad1", {2, 11, 9, 3, 3, 2, 2, 1, 1, 6, 5}},
      {"stride21", {4, 9, 13, 3, 4, 2, 1, 0, 2, 4, 14}},
      {"whole", {16, 4, 4, 4, 4, 1, 1, 0, 0, 1, 1}}, // a readout: one position
  };
  for (const Geometry &g : geometries)
    for (unsigned c : {1u, 8u, 20u, 64u})
      for (double density : {0.04, 0.3})
        for (bool spikes : {true, false})
          check(g.name, g.w, c, density, spikes, rng);
  // Maps a 2 x 2 pool tiles, no column padding (the window runs' case).
  const Geometry pooled[] = {
      {"csnn2", {12, 12, 12, 5, 5, 1, 1, 0, 0, 8, 8}},
      {"pady1", {3, 10, 9, 3, 4, 1, 1, 1, 0, 10, 6}},
      {"stride2pady1", {2, 11, 13, 3, 3, 2, 2, 1, 0, 6, 6}},
      // Runs of one AVX-512 block (addRunsPair's two output rows at once): 64 floats, and 52
      // with a row stride of 2 and row padding.
      {"run64", {16, 8, 9, 3, 4, 1, 1, 1, 0, 8, 6}},
      {"run52stride2", {13, 12, 13, 3, 4, 2, 1, 1, 0, 6, 10}},
  };
  for (const Geometry &g : pooled)
    for (unsigned c : {1u, 8u, 20u, 64u})
      checkInputRuns(g.name, g.w, c, rng);
  checkTapsRefuseInf(geometries[0].w);
  return 0;
}
