#include "CycleEstimates.hpp"

#include <functional>
#include <map>
#include <stdexcept>

namespace popsnn {
namespace {

// An IPU worker does one 64-bit (2 x float32) multiply-accumulate per cycle at
// best; loads, branches and loop overheads make scalar code a few cycles per
// element. The figures below are coarse on purpose: they rank phases, they do
// not predict hardware to the cycle.
constexpr std::uint64_t kVertexOverhead = 20;
std::uint64_t vectorPass(unsigned n) { return 4 + (n + 1) / 2; } // one row op over n floats

// A pushing shard: one row of the next layer's width per spike (forward: W_next rows into
// the next layer's input; backward: dL/dI_next into dL/dW_next rows).
std::uint64_t pushCycles(const VertexWork &w) {
  return w.pushOutputs ? std::uint64_t(w.spikes) * vectorPass(w.pushOutputs) : 0;
}

using Estimator = std::function<std::uint64_t(const VertexWork &)>;

const std::map<std::string, Estimator> &table() {
  static const std::map<std::string, Estimator> estimators = {
      {"DirectCurrent",
       [](const VertexWork &w) {
         return kVertexOverhead +
                std::uint64_t(w.batch) * (std::uint64_t(w.inputs) * (2 + vectorPass(w.neurons)) +
                                          2 * vectorPass(w.neurons));
       }},
      {"LifForward",
       [](const VertexWork &w) {
         return kVertexOverhead +
                std::uint64_t(w.stepsPerCall) *
                    (std::uint64_t(w.partialSources) * vectorPass(w.batch * w.neurons) +
                     std::uint64_t(w.batch) *
                         (std::uint64_t(w.activeInputs) * vectorPass(w.neurons) +
                          16ull * w.neurons + 2ull * w.activeCandidates));
       }},
      {"LifBackward",
       [](const VertexWork &w) {
         return kVertexOverhead +
                std::uint64_t(w.stepsPerCall) * w.batch *
                    (std::uint64_t(w.activeInputs) * vectorPass(w.neurons) +
                     std::uint64_t(w.activeCandidates) * (6 + vectorPass(w.neurons)) +
                     12ull * w.neurons);
       }},
      {"PushSpikes",
       [](const VertexWork &w) {
         return kVertexOverhead + std::uint64_t(w.stepsPerCall) * w.batch * pushCycles(w);
       }},
      {"PushGrads",
       [](const VertexWork &w) {
         return kVertexOverhead + std::uint64_t(w.stepsPerCall) * w.batch * pushCycles(w);
       }},
      {"DirectWeightGrad",
       [](const VertexWork &w) {
         return kVertexOverhead + std::uint64_t(w.batch) * w.inputs * (2 + vectorPass(w.neurons));
       }},
      {"OutputLoss",
       [](const VertexWork &w) {
         return kVertexOverhead + 8ull * w.elements + 60ull * w.batch * w.neurons;
       }},
      {"LossSum", [](const VertexWork &w) { return kVertexOverhead + 2ull * w.elements; }},
      {"SgdStep", [](const VertexWork &w) { return kVertexOverhead + 4ull * w.elements; }},
      {"AdamStep", [](const VertexWork &w) { return kVertexOverhead + 14ull * w.elements; }},
      // Two loads, an add and a store per element pair.
      {"AccumulateGrad", [](const VertexWork &w) { return kVertexOverhead + 2ull * w.elements; }},
      // Sums the layer's N parts, writes the shard's n entries.
      {"LayerGradSum", [](const VertexWork &w) { return kVertexOverhead + w.elements; }},
  };
  return estimators;
}

} // namespace

std::uint64_t estimateCycles(const std::string &vertex, const VertexWork &work) {
  const auto &t = table();
  auto it = t.find(vertex);
  if (it == t.end())
    throw std::logic_error("popsnn: no cycle estimator registered for vertex " + vertex);
  return it->second(work);
}

} // namespace popsnn
