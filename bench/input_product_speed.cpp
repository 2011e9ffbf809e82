// The direct-current layer's two sparse products on one DSNN shard, as the engine's cpu
// device calls them (DirectCurrent's x.W, grouped; DirectWeightGrad's x^T.G over all inputs):
// x is a real image batch, W and G random; the caches are evicted between calls (the step
// runs other layers in between). Built with -DOLD_PRODUCTS='"path/InputProducts.hpp"' (another
// version of codelets/, e.g. `git archive main codelets include | tar -x -C /tmp/old`), it
// times that version's products too, in the same process, old-new and new-old in turns so
// that neither gains from the order (same code in both gave median ratios 0.98-0.99, minima
// 1.14-1.18 on a loaded VM: read the medians). Should GCC take the copies of a header for one
// (#pragma once: "popsnn has not been declared"), re-date the old copy (touch -d 2020-01-01).
//
// x: B x 784 floats from the bench's batch, e.g. (in bench/)
//   python -c "import common; common.images(128, 0)[0].reshape(128, -1).tofile('/tmp/x.f32')"
// build: c++ -std=c++17 -O2 -march=native -fno-math-errno -fno-trapping-math -Icodelets
//          [-DOLD_PRODUCTS=...] bench/input_product_speed.cpp -o /tmp/input_product_speed
// usage: input_product_speed X_FILE [NEURONS REPEATS BATCH]; prints per product (and version)
// the minimum and median thread CPU ms per call, and with OLD_PRODUCTS the ratios old / new
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h> // before the namespaced copy: its own include of it is then empty
#endif

#ifdef OLD_PRODUCTS
namespace old {
#include OLD_PRODUCTS
} // namespace old
#endif
#include "InputProducts.hpp"
#include "harness.hpp"

namespace {

using harness::median;

void summary(const char *name, const std::vector<double> &ms) {
  std::printf("%s min %.3f median %.3f ms\n", name, harness::least(ms), median(ms));
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s X_FILE [NEURONS REPEATS BATCH]\n", argv[0]);
    return 2;
  }
  const int neurons = argc > 2 ? std::atoi(argv[2]) : 500;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 50;
  const int batch = argc > 4 ? std::atoi(argv[4]) : 128;
  if (neurons < 1 || rounds < 1 || batch < 1) {
    std::fprintf(stderr, "%s: NEURONS, REPEATS and BATCH must be whole numbers of at least 1\n",
                 argv[0]);
    return 2;
  }
  const unsigned n = unsigned(neurons), repeats = unsigned(rounds), B = unsigned(batch), nIn = 784;
  std::vector<float> x(std::size_t(B) * nIn);
  FILE *f = std::fopen(argv[1], "rb");
  if (!f || std::fread(x.data(), sizeof(float), x.size(), f) != x.size()) {
    std::fprintf(stderr, "cannot read %u x %u floats from %s\n", B, nIn, argv[1]);
    return 1;
  }
  std::fclose(f);
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  std::vector<float> w(std::size_t(nIn) * n), g(std::size_t(B) * n);
  for (float &v : w)
    v = uniform(rng);
  for (float &v : g)
    v = uniform(rng);
  std::vector<float> current(std::size_t(B) * n), grad(std::size_t(nIn) * n);
  // The scratch as the host gives it on the cpu device (VertexWiring.cpp).
  std::vector<unsigned> idx(std::max(nIn, popsnn::lif::SPARSE_INPUT_GROUP * B));
  std::vector<float> val(std::max(std::size_t(popsnn::codes::SPARSE_GROUP) * nIn, idx.size()));
  auto run = [&](unsigned k) { // k: current, weight_grad (new; then old)
    switch (k) {
    case 0:
      return popsnn::lif::sparseInputProduct(x.data(), B, nIn, w.data(), n, idx.data(), val.data(),
                                             current.data(), true);
    case 1:
      return popsnn::lif::sparseInputTransposedProduct(x.data(), nIn, B, nIn, g.data(), n,
                                                       idx.data(), val.data(), grad.data());
#ifdef OLD_PRODUCTS
    case 2:
      return old::popsnn::lif::sparseInputProduct(x.data(), B, nIn, w.data(), n, idx.data(),
                                                  val.data(), current.data(), true);
    case 3:
      return old::popsnn::lif::sparseInputTransposedProduct(x.data(), nIn, B, nIn, g.data(), n,
                                                            idx.data(), val.data(), grad.data());
#endif
    }
  };
#ifdef OLD_PRODUCTS
  constexpr unsigned KINDS = 4;
#else
  constexpr unsigned KINDS = 2;
#endif
  const std::vector<std::vector<double>> ms = harness::alternatingKinds(KINDS, repeats, run);
  summary("current", ms[0]);
  summary("weight_grad", ms[1]);
  if (KINDS == 4) {
    summary("current_old", ms[2]);
    summary("weight_grad_old", ms[3]);
    std::printf("old/new median current %.2f weight_grad %.2f\n", median(ms[2]) / median(ms[0]),
                median(ms[3]) / median(ms[1]));
  }
  return 0;
}
