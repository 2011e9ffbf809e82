// buildInputLists (host/src/InputList.cpp) against a plain loop over random batches: shapes
// whose rows are not whole blocks, chunks, capacities below and above the non-zeros, NaN,
// -0, and the same for byte batches (0..255). Prints "mismatches N"; built by
// tests/engine/test_input_list_unit.py.
#include "InputList.hpp"
#include "popsnn/VertexEnums.hpp"
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
using namespace popsnn;

// Mismatches between `out` and a plain loop over x's rows (chunk by chunk).
template <typename Element>
int compare(const std::vector<Element> &x, unsigned T, unsigned chunks, unsigned Bc, unsigned nIn,
            std::size_t cap, const InputLists &out) {
  int fails = 0;
  const unsigned B = chunks * Bc;
  std::size_t most = 0;
  for (unsigned m = 0; m < chunks; ++m) {
    std::size_t n = 0;
    bool ok = true;
    const int *list = out.lists.data() + m * (codes::inputListStarts(T, Bc) + cap);
    const float *vals = out.values.data() + m * cap;
    for (unsigned t = 0; t < T; ++t)
      for (unsigned b = 0; b < Bc; ++b) {
        const Element *row = x.data() + (std::size_t(t) * B + m * Bc + b) * nIn;
        unsigned r = t * Bc + b;
        if (std::size_t(list[r]) != std::min(n, cap))
          ok = false;
        for (unsigned i = 0; i < nIn; ++i)
          if (row[i] != 0) {
            const float v = float(row[i]);
            if (n < cap && (list[T * Bc + 1 + n] != int(i) ||
                            !(vals[n] == v || (std::isnan(vals[n]) && std::isnan(v)))))
              ok = false;
            ++n;
          }
      }
    if (std::size_t(list[T * Bc]) != std::min(n, cap))
      ok = false;
    most = std::max(most, n);
    if (!ok)
      ++fails;
  }
  return fails + (most != out.mostNeeded);
}

int main() {
  std::mt19937 rng(1);
  int fails = 0;
  for (int trial = 0; trial < 300; ++trial) {
    unsigned T = 1 + rng() % 5, chunks = 1 + rng() % 3, Bc = 1 + rng() % 4, nIn = 1 + rng() % 70;
    unsigned B = chunks * Bc;
    std::vector<float> x(std::size_t(T) * B * nIn, 0.0f);
    std::vector<std::uint8_t> bytes(x.size(), 0);
    std::size_t bad = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
      float &v = x[k];
      unsigned r = rng() % 100;
      if (r < 10) {
        v = float(rng() % 1000) / 100.0f - 5.0f;
        bytes[k] = std::uint8_t(r < 8 ? 1 : rng() % 256); // mostly spikes, some counts
      } else if (r == 10)
        v = -0.0f;
      else if (r == 11 && trial % 7 == 0) {
        v = NAN;
        ++bad;
      }
    }
    std::size_t cap = rng() % (x.size() + 1);
    InputLists out;
    buildInputLists(x.data(), T, chunks, Bc, nIn, cap, out);
    fails += (out.nonFinite != bad) + compare(x, T, chunks, Bc, nIn, cap, out);
    buildInputLists(bytes.data(), T, chunks, Bc, nIn, cap, out);
    fails += (out.nonFinite != 0) + compare(bytes, T, chunks, Bc, nIn, cap, out);
  }
  std::printf("mismatches %d\n", fails);
  return fails != 0;
}
