#include "HalfStorage.hpp"

namespace popsnn {

namespace {

// The host compiler's IEEE binary16 (GCC >= 12 and Clang on x86-64), the layout of a HALF
// tensor; float -> _Float16 rounds to nearest even, as the device's conversions do.
using HostHalf = _Float16;

} // namespace

void writeStored(poplar::Engine &engine, const std::string &handle, const float *values,
                 std::size_t n, bool half) {
  if (!half) {
    engine.writeTensor(handle, values, values + n);
    return;
  }
  std::vector<HostHalf> h(values, values + n);
  engine.writeTensor(handle, h.data(), h.data() + n);
}

void readStored(poplar::Engine &engine, const std::string &handle, float *values, std::size_t n,
                bool half) {
  if (!half) {
    engine.readTensor(handle, values, values + n);
    return;
  }
  std::vector<HostHalf> h(n);
  engine.readTensor(handle, h.data(), h.data() + n);
  for (std::size_t i = 0; i < n; ++i)
    values[i] = float(h[i]);
}

std::size_t readNonFinite(poplar::Engine &engine, const std::vector<Layer> &layers) {
  std::size_t total = 0;
  for (const Layer &layer : layers)
    for (std::size_t k = 0; k < layer.shards.size(); ++k) {
      unsigned count = 0;
      engine.readTensor("non_finite" + std::to_string(layer.index) + "/" + std::to_string(k),
                        &count, &count + 1);
      total += count;
    }
  return total;
}

} // namespace popsnn
