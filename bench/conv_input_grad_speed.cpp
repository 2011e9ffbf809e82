// The input gradient of the CSNN's second convolution (12 x 12 x 12 input, 5 x 5 kernel, 64
// output channels, the folded 2 x 2 max pool) by window runs as ConvInputGrad<ChannelsLast>
// runs it: the row's positions listed at once and the runs added kernel row by kernel row
// (pooledLists, addListedRuns: codelets/ConvInputRuns.hpp), against position by position
// (pooledPositions, addWindowRuns: each position reads all kernel rows' runs), on the pool's
// real argmax, in calls of CHUNK rows with the caches evicted between calls, the two in
// turns. Checks that both give the same floats, then prints the minimum and median thread CPU
// ms over all rows and their ratios. The weights and the pool's gradient (all non-zero, as
// without a sparse rule) are random: the speed does not depend on their values.
//
// argmax: the pool's [T B, 64, 4, 4] window argmax (uint32), e.g. (in bench/)
//   python -c "import numpy as np, popsnn, common; from popsnn import conv_ops;
//   from popsnn.train_config import Config; net = Config(model='csnn', beta=0.5).network(784,
//   10); x, _ = common.images(128, 0); p = net.init_params(0); m = popsnn.Model(net,
//   device='reference', num_steps=25, batch_size=128, params=p); s =
//   np.asarray(m.record(x).spikes[0], np.float32).reshape(-1, 12, 12, 12); cur =
//   conv_ops.conv2d_forward(s, p[1]['weight'], p[1]['bias'], (1, 1), (0, 0));
//   conv_ops.max_pool_forward(cur, (2, 2), (2, 2), (0, 0))[1].astype(np.uint32)
//   .tofile('/tmp/argmax2')"
// build: c++ -std=c++17 -O3 -march=native -fno-math-errno -fno-trapping-math -Icodelets
//          bench/conv_input_grad_speed.cpp -o /tmp/conv_input_grad_speed   (-O3: as the codelets)
// usage: conv_input_grad_speed ARGMAX_FILE [CHUNK REPEATS]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "ConvInputRuns.hpp"
#include "harness.hpp"

using namespace popsnn::conv;

namespace {

struct Stage {
  Window w{12, 12, 12, 5, 5, 1, 1, 0, 0, 8, 8};
  unsigned c = 64;
  std::vector<float> weights, work;
  unsigned pooledRow() const { return c * w.outPositions() / 4; }
  // ConvInputGrad<ChannelsLast>::compute's window runs over `rows` rows (its work layout).
  template <bool BY_ROWS>
  void inputGrad(unsigned rows, const float *grad, const unsigned *argmax, float *gradInput) {
    const unsigned R = paddedRun(w), hw = w.inHeight * w.inWidth;
    // From a 64-byte boundary, as in the vertex (the runtime's variables start on one and
    // col is 48,000 bytes): at a vector's heap address the rows took up to ~1.2x as long.
    float *wr = work.data(), *dxT;
    wr += (64 - reinterpret_cast<std::uintptr_t>(wr) % 64) % 64 / sizeof(float);
    dxT = wr + c * w.kernelHeight * R;
    float *lists = dxT + w.inSize() + R;
    weightRuns(w, c, weights.data(), wr);
    for (unsigned r = 0; r < rows; ++r) {
      const std::size_t at = std::size_t(r) * pooledRow();
      std::fill(dxT, dxT + w.inSize() + R, 0.0f);
      if (BY_ROWS)
        addListedRuns(w, c, pooledLists(w, c, grad + at, argmax + at, lists), wr, dxT);
      else
        pooledPositions(w, c, grad + at, argmax + at, lists,
                        [&](unsigned p, unsigned n, const float *coef, const unsigned *chan) {
                          addWindowRuns(w, c, p, n, coef, chan, wr, dxT);
                        });
      transposeWords(hw, w.inChannels, dxT, gradInput + std::size_t(r) * w.inSize());
    }
  }
};

} // namespace

int main(int argc, char **argv) {
  harness::ChunkArgs args;
  if (!harness::parseChunkArgs(argc, argv, "ARGMAX_FILE", args))
    return 2;
  const unsigned chunk = args.chunk, repeats = args.repeats;
  Stage s;
  const std::vector<unsigned> argmax = harness::readValues<unsigned>(args.file);
  const unsigned rows = unsigned(argmax.size() / s.pooledRow());
  if (!rows) {
    std::fprintf(stderr, "%s: no rows of %u entries\n", args.file, s.pooledRow());
    return 2;
  }
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-0.06f, 0.06f), g(1e-4f, 1e-3f);
  s.weights.resize(std::size_t(s.c) * s.w.taps());
  for (float &v : s.weights)
    v = u(rng);
  std::vector<float> grad(argmax.size());
  for (float &v : grad)
    v = rng() % 2 ? g(rng) : -g(rng);
  s.work.resize((s.c * s.w.kernelHeight + 1) * paddedRun(s.w) + s.w.inSize() +
                gradRowFloats<ChannelsLast>(s.w, s.c) + 15);
  const std::size_t outs = std::size_t(rows) * s.w.inSize();
  std::vector<float> out[2] = {std::vector<float>(outs), std::vector<float>(outs)};
  const auto ms = harness::alternatingChunks(
      repeats, rows, chunk, [&](unsigned which, unsigned r0, unsigned n) { // 1: by kernel rows
        const std::size_t at = std::size_t(r0) * s.pooledRow();
        float *o = &out[which][std::size_t(r0) * s.w.inSize()];
        which ? s.inputGrad<true>(n, &grad[at], &argmax[at], o)
              : s.inputGrad<false>(n, &grad[at], &argmax[at], o);
      });
  const bool same = !std::memcmp(out[0].data(), out[1].data(), outs * sizeof(float));
  std::printf("%u rows, same floats: %s\n", rows, same ? "yes" : "NO");
  harness::printPair("positions", "rows", ms);
  return same ? 0 : 1;
}
