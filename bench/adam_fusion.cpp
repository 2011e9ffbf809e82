// What fusing the optimiser into the first layer's weight-gradient write would save (issue 12,
// small batches): DirectWeightGrad's sparse x^T.G (codelets/InputProducts.hpp) over the
// DSNN's 784 x 1000 weights, then AdamStep's loop (codelets/Optimizers.cpp, PyTorch's order
// of operations) over the whole gradient -- G written to memory and read back -- against the
// same two per group of SPARSE_INPUT_GROUP inputs, the group's gradient rows in an L1 buffer.
// At batch 1-8 both are bound by memory (7 streams of 3.1 MB for Adam), so the fused form
// saves G's write and its read back. The caches are evicted before each call (between two
// training steps the forward and backward pass over ~40 MB).
//
// build: c++ -std=c++17 -O3 -march=native -fno-math-errno -Icodelets
//          bench/adam_fusion.cpp -o /tmp/adam_fusion
// usage: adam_fusion BATCH REPEATS   (x: each entry non-zero with probability 0.19, as MNIST)
// prints "batch separate_min_ms fused_min_ms max_abs_diff" (the two forms' parameters after
// REPEATS steps each from the same start: identical arithmetic, so the difference is 0).
#include "InputProducts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

namespace {

constexpr unsigned INPUTS = 784, NEURONS = 1000;

struct AdamState {
  std::vector<float> param, expAvg, expAvgSq;
  explicit AdamState(std::size_t size) : param(size, 0.01f), expAvg(size), expAvgSq(size) {}
};

// AdamStep's loop (float storage, no weight decay), step `step` of PyTorch's Adam at lr 1e-3.
void adamRows(float *__restrict p, const float *__restrict g0, float *__restrict m0,
              float *__restrict v0, std::size_t size, unsigned step) {
  const double stepSize = 1e-3 / (1.0 - std::pow(0.9, step));
  const float correction2 = float(std::sqrt(1.0 - std::pow(0.999, step)));
  const float step_size = float(stepSize), eps = 1e-8f, beta2 = 0.999f;
  const float oneMinusBeta1 = float(1.0 - 0.9), oneMinusBeta2 = float(1.0 - 0.999);
  for (std::size_t k = 0; k < size; ++k) {
    const float g = g0[k];
    const float m = m0[k] + oneMinusBeta1 * (g - m0[k]);
    const float v = v0[k] * beta2 + oneMinusBeta2 * g * g;
    m0[k] = m;
    v0[k] = v;
    const float denom = std::sqrt(v) / correction2 + eps;
    p[k] -= step_size * (m / denom);
  }
}

struct Problem {
  unsigned batch;
  std::vector<float> x, gradSum, grad, rows;
  std::vector<unsigned> idx;
  std::vector<float> val;
  explicit Problem(unsigned b)
      : batch(b), x(std::size_t(b) * INPUTS), gradSum(std::size_t(b) * NEURONS),
        grad(std::size_t(INPUTS) * NEURONS),
        rows(std::size_t(popsnn::lif::SPARSE_INPUT_GROUP) * NEURONS),
        idx(popsnn::lif::SPARSE_INPUT_GROUP * b), val(popsnn::lif::SPARSE_INPUT_GROUP * b) {
    std::mt19937 rng(0);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (float &e : x)
      e = u(rng) < 0.19f ? u(rng) : 0.0f;
    for (float &e : gradSum)
      e = u(rng) - 0.5f;
  }
};

void separate(Problem &q, AdamState &s, unsigned step) {
  popsnn::lif::sparseInputTransposedProduct(q.x.data(), INPUTS, q.batch, INPUTS, q.gradSum.data(),
                                            NEURONS, q.idx.data(), q.val.data(), q.grad.data());
  adamRows(s.param.data(), q.grad.data(), s.expAvg.data(), s.expAvgSq.data(), q.grad.size(), step);
}

void fused(Problem &q, AdamState &s, unsigned step) {
  constexpr unsigned GROUP = popsnn::lif::SPARSE_INPUT_GROUP;
  for (unsigned i0 = 0; i0 < INPUTS; i0 += GROUP) {
    const unsigned group = std::min(GROUP, INPUTS - i0);
    popsnn::lif::sparseInputTransposedProduct(q.x.data() + i0, INPUTS, q.batch, group,
                                              q.gradSum.data(), NEURONS, q.idx.data(), q.val.data(),
                                              q.rows.data());
    const std::size_t at = std::size_t(i0) * NEURONS;
    adamRows(&s.param[at], q.rows.data(), &s.expAvg[at], &s.expAvgSq[at],
             std::size_t(group) * NEURONS, step);
  }
}

void evictCaches() {
  static std::vector<char> junk(64 << 20);
  for (std::size_t k = 0; k < junk.size(); k += 64)
    junk[k] = char(junk[k] + 1);
}

template <class Run> double minMs(unsigned repeats, Run run) {
  double best = 1e30;
  for (unsigned r = 1; r <= repeats; ++r) {
    evictCaches();
    const std::clock_t c0 = std::clock();
    run(r);
    best = std::min(best, 1e3 * double(std::clock() - c0) / CLOCKS_PER_SEC);
  }
  return best;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: adam_fusion BATCH REPEATS\n");
    return 2;
  }
  const unsigned batch = unsigned(std::atoi(argv[1])), repeats = unsigned(std::atoi(argv[2]));
  if (batch == 0 || repeats == 0) {
    std::fprintf(stderr, "adam_fusion: BATCH and REPEATS must be positive\n");
    return 2;
  }
  Problem q(batch);
  const std::size_t size = std::size_t(INPUTS) * NEURONS;
  AdamState a(size), b(size);
  const double sep = minMs(repeats, [&](unsigned r) { separate(q, a, r); });
  const double fus = minMs(repeats, [&](unsigned r) { fused(q, b, r); });
  float diff = 0.0f;
  for (std::size_t k = 0; k < size; ++k)
    diff = std::max(diff, std::fabs(a.param[k] - b.param[k]));
  std::printf("%u %.3f %.3f %g\n", batch, sep, fus, double(diff));
  return 0;
}
