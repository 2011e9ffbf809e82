// The event-driven forward of the CSNN's second convolution (12 x 12 x 12 spikes, 5 x 5
// kernel, 64 output channels, the fused 2 x 2 max pool) as ConvForward<MaxPooledOut> runs it,
// by output positions (windowEventsRow, codelets/ConvEvents.hpp) and by scatter (scatterRow),
// on the bench's real spikes, in calls of CHUNK rows with the caches evicted between calls
// (the step runs other vertices in between), the two in turns so that neither gains from the
// order. Checks that both give the same floats and argmax, then prints the minimum and
// median thread CPU ms over all rows and their ratios. The weights are random (the speed
// does not depend on them).
//
// x: the stage's input spikes [T B, 12, 12, 12] from the reference, e.g. (in bench/)
//   python -c "import numpy as np, popsnn, common; from popsnn.train_config import Config;
//   net = Config(model='csnn', beta=0.5).network(784, 10); x, _ = common.images(128, 0);
//   m = popsnn.Model(net, device='reference', num_steps=25, batch_size=128,
//   params=net.init_params(0)); np.asarray(m.record(x).spikes[0], np.float32).tofile('/tmp/x2')"
// build: c++ -std=c++17 -O3 -march=native -fno-math-errno -fno-trapping-math -Icodelets
//          bench/conv_forward_speed.cpp -o /tmp/conv_forward_speed    (-O3: as the codelets)
// usage: conv_forward_speed X_FILE [CHUNK REPEATS]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "ConvEvents.hpp"
#include "ConvPooling.hpp"
#include "harness.hpp"

using namespace popsnn::conv;

namespace {

struct Stage {
  Window w{12, 12, 12, 5, 5, 1, 1, 0, 0, 8, 8};
  unsigned c = 64;
  std::vector<float> weights, bias, work;
  unsigned pooledRow() const { return c * MaxPooledOut::pooled(w); }
  // ConvForward<MaxPooledOut>::compute's event path over `rows` rows (its work layout).
  template <bool WINDOWS>
  void forward(unsigned rows, const float *x, float *out, unsigned *argmax) {
    const unsigned taps = w.taps(), P = w.outPositions();
    float *t = work.data(), *acc = t + taps * c, *outWork = acc + P * c;
    unsigned *idx = reinterpret_cast<unsigned *>(outWork + MaxPooledOut::workFloats(w, c));
    for (unsigned co = 0; co < c; ++co)
      for (unsigned k = 0; k < taps; ++k)
        t[reversedTap(w, k) * c + co] = weights[co * taps + k];
    for (unsigned r = 0; r < rows; ++r) {
      const float *xr = x + std::size_t(r) * w.inSize();
      const unsigned count = nonzeroIndices(xr, w.inSize(), idx);
      if (WINDOWS) {
        windowEventsRow(w, xr, idx, count, t, c, acc, idx + count);
      } else {
        std::fill(acc, acc + P * c, 0.0f);
        scatterRow(w, xr, idx, count, t, c, acc);
      }
      const std::size_t at = std::size_t(r) * pooledRow();
      MaxPooledOut::write(w, c, acc, bias.data(), out + at, argmax + at, outWork);
    }
  }
};

} // namespace

int main(int argc, char **argv) {
  harness::ChunkArgs args;
  if (!harness::parseChunkArgs(argc, argv, "X_FILE", args))
    return 2;
  const unsigned chunk = args.chunk, repeats = args.repeats;
  Stage s;
  const std::vector<float> x = harness::readValues<float>(args.file);
  const unsigned rows = unsigned(x.size() / s.w.inSize());
  if (!rows) {
    std::fprintf(stderr, "%s: no rows of %u floats\n", args.file, s.w.inSize());
    return 2;
  }
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-0.06f, 0.06f);
  s.weights.resize(std::size_t(s.c) * s.w.taps());
  s.bias.resize(s.c);
  for (float &v : s.weights)
    v = u(rng);
  for (float &v : s.bias)
    v = u(rng);
  const unsigned listed = s.w.inSize() + windowEventsWords(s.w.inSize());
  s.work.resize((s.w.taps() + s.w.outPositions()) * s.c + MaxPooledOut::workFloats(s.w, s.c) +
                listed);
  const std::size_t outs = std::size_t(rows) * s.pooledRow();
  std::vector<float> out[2] = {std::vector<float>(outs), std::vector<float>(outs)};
  std::vector<unsigned> argmax[2] = {std::vector<unsigned>(outs), std::vector<unsigned>(outs)};
  const auto ms = harness::alternatingChunks(
      repeats, rows, chunk, [&](unsigned which, unsigned r0, unsigned n) { // 1: by windows
        const float *xr = &x[std::size_t(r0) * s.w.inSize()];
        float *o = &out[which][std::size_t(r0) * s.pooledRow()];
        unsigned *a = &argmax[which][std::size_t(r0) * s.pooledRow()];
        which ? s.forward<true>(n, xr, o, a) : s.forward<false>(n, xr, o, a);
      });
  const bool same =
      !std::memcmp(out[0].data(), out[1].data(), outs * sizeof(float)) && argmax[0] == argmax[1];
  std::printf("%u rows, same floats and argmax: %s\n", rows, same ? "yes" : "NO");
  harness::printPair("scatter", "windows", ms);
  return same ? 0 : 1;
}
