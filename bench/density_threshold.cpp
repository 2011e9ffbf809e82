// The two kernels of the direct-current layer's products, timed on this machine at a range
// of input densities (driven by density_threshold.py, which compiles this file with the
// codelets' flags): the sparse row kernel, which pays per non-zero input, and the blocked
// dense product, which pays per entry. Both from codelets/, called as the DirectCurrent
// and DirectWeightGrad vertices call them.
//
// usage: density_threshold BATCH INPUTS NEURONS REPEATS DENSITY...
// prints one line per (product, density):
//   "product density sparse_median_ms dense_median_ms sparse_min_ms dense_min_ms max_diff"
// then the dense product on dense input on both threads, one shard of NEURONS each (as the
// engine's cpu device runs a layer of 2 x NEURONS: a shard per tile, a tile per thread):
//   "product_2threads min_ms_thread0 min_ms_thread1"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "DenseKernels.hpp"
#include "InputProducts.hpp"
#include "LifCommon.hpp"
#include "harness.hpp"

namespace {

using harness::Clock, harness::least, harness::median, harness::msSince;

// Each of two threads runs `repeats` calls of the dense product on its own shard (own
// weights, gradients and outputs; x shared, as the engine's shards share the input), at the
// same time: the minimum call time of each thread while the other one works.
void denseOnTwoThreads(unsigned B, unsigned nIn, unsigned n, unsigned repeats,
                       const std::vector<float> &x) {
  double currentMs[2], gradMs[2];
  auto shard = [&](unsigned t) {
    std::vector<float> w(std::size_t(nIn) * n, 0.5f), g(std::size_t(B) * n, 0.25f);
    std::vector<float> out(std::size_t(B) * n), grad(std::size_t(nIn) * n);
    std::vector<double> current, weightGrad;
    for (unsigned r = 0; r <= repeats; ++r) {
      auto t0 = Clock::now();
      popsnn::dense::denseProduct(B, n, nIn, x.data(), nIn, 1, w.data(), n, out.data(), n);
      const double c = msSince(t0);
      t0 = Clock::now();
      popsnn::dense::denseProduct(nIn, n, B, x.data(), 1, nIn, g.data(), n, grad.data(), n);
      if (r > 0) {
        current.push_back(c);
        weightGrad.push_back(msSince(t0));
      }
    }
    currentMs[t] = least(current);
    gradMs[t] = least(weightGrad);
  };
  std::thread other(shard, 1u);
  shard(0u);
  other.join();
  std::printf("current_2threads %.4f %.4f\n", currentMs[0], currentMs[1]);
  std::printf("weight_grad_2threads %.4f %.4f\n", gradMs[0], gradMs[1]);
}

float maxAbsDiff(const std::vector<float> &a, const std::vector<float> &b) {
  float worst = 0.0f;
  for (std::size_t k = 0; k < a.size(); ++k)
    worst = std::max(worst, std::abs(a[k] - b[k]));
  return worst;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s BATCH INPUTS NEURONS REPEATS DENSITY...\n", argv[0]);
    return 2;
  }
  const unsigned B = unsigned(std::atoi(argv[1])), nIn = unsigned(std::atoi(argv[2]));
  const unsigned n = unsigned(std::atoi(argv[3])), repeats = unsigned(std::atoi(argv[4]));
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> w(std::size_t(nIn) * n), g(std::size_t(B) * n), x(std::size_t(B) * nIn);
  for (float &v : w)
    v = uniform(rng) - 0.5f;
  for (float &v : g)
    v = uniform(rng) - 0.5f;
  std::vector<float> sparseOut(std::size_t(B) * n), denseOut(sparseOut.size());
  std::vector<float> sparseGrad(std::size_t(nIn) * n), denseGrad(sparseGrad.size());
  std::vector<unsigned> idx(std::max(nIn, popsnn::lif::SPARSE_INPUT_GROUP * B));
  std::vector<float> val(std::max(std::size_t(4) * nIn, idx.size())); // SPARSE_GROUP rows
  for (int arg = 5; arg < argc; ++arg) {
    const float density = float(std::atof(argv[arg]));
    for (float &v : x)
      v = uniform(rng) < density ? uniform(rng) : 0.0f;
    const std::function<void()> kernels[4] = {
        [&] {
          popsnn::lif::sparseInputProduct(x.data(), B, nIn, w.data(), n, idx.data(), val.data(),
                                          sparseOut.data(), true);
        },
        [&] {
          popsnn::dense::denseProduct(B, n, nIn, x.data(), nIn, 1, w.data(), n, denseOut.data(), n);
        },
        [&] {
          popsnn::lif::sparseInputTransposedProduct(x.data(), nIn, B, nIn, g.data(), n, idx.data(),
                                                    val.data(), sparseGrad.data());
        },
        [&] {
          popsnn::dense::denseProduct(nIn, n, B, x.data(), 1, nIn, g.data(), n, denseGrad.data(),
                                      n);
        }};
    // The kernels take turns, so that load from other processes falls on all alike.
    std::vector<double> ms[4];
    for (unsigned r = 0; r <= repeats; ++r)
      for (unsigned k = 0; k < 4; ++k) {
        const auto t0 = Clock::now();
        kernels[k]();
        if (r > 0) // the first round warms the caches
          ms[k].push_back(msSince(t0));
      }
    // The two kernels sum the same terms in the same order: a sanity check, not a test.
    const float diff = std::max(maxAbsDiff(sparseOut, denseOut), maxAbsDiff(sparseGrad, denseGrad));
    std::printf("current %.3f %.4f %.4f %.4f %.4f %.3g\n", density, median(ms[0]), median(ms[1]),
                least(ms[0]), least(ms[1]), diff);
    std::printf("weight_grad %.3f %.4f %.4f %.4f %.4f %.3g\n", density, median(ms[2]),
                median(ms[3]), least(ms[2]), least(ms[3]), diff);
    std::fflush(stdout);
  }
  for (float &v : x)
    v = uniform(rng);
  denseOnTwoThreads(B, nIn, n, repeats, x);
  return 0;
}
