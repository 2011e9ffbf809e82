// The weight gradient of the CSNN's second convolution (12 x 12 x 12 spikes, 5 x 5 kernel, 64
// output channels, the folded 2 x 2 max pool) by inputs as ConvWeightGrad<ChannelsLast> runs
// it: each row's dL/dI formed from the pool's gradient and real argmax (gradRow), its spikes
// listed, then by output positions (weightGradByPositions, codelets/ConvEvents.hpp: a gwT row
// loaded and stored per term) against tap by tap (weightGradByTaps, ConvWeightTaps.hpp: a gwT
// row in registers over the tap's terms), on the bench's real spikes, in calls of CHUNK rows
// with the caches evicted between calls, the two in turns. Checks that both give the same
// floats, then prints the minimum and median thread CPU ms over all rows and their ratios. The
// pool's gradient (all non-zero, as without a sparse rule) is random.
//
// x: the stage's input spikes [T B, 12, 12, 12] (bench/conv_forward_speed.cpp's /tmp/x2);
// argmax: the pool's [T B, 64, 4, 4] argmax (bench/conv_input_grad_speed.cpp's /tmp/argmax2).
// build: c++ -std=c++17 -O3 -march=native -fno-math-errno -fno-trapping-math -Icodelets
//          bench/conv_weight_grad_speed.cpp -o /tmp/conv_weight_grad_speed   (-O3: as the codelets)
// usage: conv_weight_grad_speed X_FILE ARGMAX_FILE [CHUNK REPEATS]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "ConvEvents.hpp"
#include "ConvPooling.hpp"
#include "ConvWeightTaps.hpp"
#include "harness.hpp"

using namespace popsnn::conv;

namespace {

struct Stage {
  Window w{12, 12, 12, 5, 5, 1, 1, 0, 0, 8, 8};
  unsigned c = 64;
  std::vector<float> work;
  float *aligned = nullptr; // work from a 64-byte boundary, as the engine allocates it
  unsigned pooledRow() const { return c * w.outPositions() / 4; }
  unsigned rowFloats() const { return gradRowFloats<ChannelsLast>(w, c); }
  void size() {
    const unsigned P = w.outPositions();
    work.assign(std::size_t(w.taps() + P) * c + w.inSize() + rowFloats() + c + 16, 0.0f);
    aligned = harness::aligned64(work.data());
  }
  // ConvWeightGrad<ChannelsLast>::compute's rows by inputs (its gwT, its lists in gT).
  template <bool TAPS>
  void weightGrad(unsigned rows, const float *x, const float *grad, const unsigned *argmax,
                  float *gwT) {
    const unsigned P = w.outPositions();
    unsigned *lists = reinterpret_cast<unsigned *>(aligned);
    unsigned *idx = lists + P * c;
    float *rowBuf = reinterpret_cast<float *>(idx + w.inSize());
    for (unsigned r = 0; r < rows; ++r) {
      const float *xr = x + std::size_t(r) * w.inSize();
      const float *gr = gradRow<ChannelsLast>(w, c, grad, argmax, r, rowBuf);
      const unsigned count = nonzeroIndices(xr, w.inSize(), idx);
      if (!TAPS || tapListsWords(w, count) > P * c ||
          !weightGradByTaps(w, c, xr, idx, count, gr, rowFloats(), gwT, lists))
        weightGradByPositions(w, c, xr, idx, count, gr, gwT, lists);
    }
  }
};

} // namespace

int main(int argc, char **argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: %s X_FILE ARGMAX_FILE [CHUNK REPEATS]\n", argv[0]);
    return 2;
  }
  harness::ChunkArgs args;
  char *rest[] = {argv[0], argv[2], argc > 3 ? argv[3] : nullptr, argc > 4 ? argv[4] : nullptr};
  if (!harness::parseChunkArgs(std::min(argc - 1, 4), rest, "ARGMAX_FILE", args))
    return 2;
  Stage s;
  const std::vector<float> x = harness::readValues<float>(argv[1]);
  const std::vector<unsigned> argmax = harness::readValues<unsigned>(args.file);
  const unsigned rows = unsigned(std::min(x.size() / s.w.inSize(), argmax.size() / s.pooledRow()));
  if (!rows) {
    std::fprintf(stderr, "no rows of %u spikes and %u argmax\n", s.w.inSize(), s.pooledRow());
    return 2;
  }
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> g(1e-4f, 1e-3f);
  std::vector<float> grad(std::size_t(rows) * s.pooledRow());
  for (float &v : grad)
    v = rng() % 2 ? g(rng) : -g(rng);
  s.size();
  const std::size_t taps = std::size_t(s.w.taps()) * s.c;
  std::vector<float> gwT[2] = {std::vector<float>(taps + 16), std::vector<float>(taps + 16)};
  float *sums[2] = {harness::aligned64(gwT[0].data()), harness::aligned64(gwT[1].data())};
  const auto ms = harness::alternatingChunks(
      args.repeats, rows, args.chunk, [&](unsigned which, unsigned r0, unsigned n) { // 1: taps
        const float *xr = &x[std::size_t(r0) * s.w.inSize()];
        const float *gr = &grad[std::size_t(r0) * s.pooledRow()];
        const unsigned *am = &argmax[std::size_t(r0) * s.pooledRow()];
        if (r0 == 0)
          std::fill(sums[which], sums[which] + taps, 0.0f);
        which ? s.weightGrad<true>(n, xr, gr, am, sums[which])
              : s.weightGrad<false>(n, xr, gr, am, sums[which]);
      });
  const bool same = !std::memcmp(sums[0], sums[1], taps * sizeof(float));
  std::printf("%u rows, same floats: %s\n", rows, same ? "yes" : "NO");
  harness::printPair("positions", "taps", ms);
  return same ? 0 : 1;
}
