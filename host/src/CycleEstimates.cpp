#include "CycleEstimates.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>

namespace popsnn {
namespace {

// An IPU worker does one 64-bit (2 x float32) multiply-accumulate per cycle at
// best; loads, branches and loop overheads make scalar code a few cycles per
// element. The figures below are coarse on purpose: they rank phases, they do
// not predict hardware to the cycle. Each state block beyond U (Synaptic's J, Alpha's E and H)
// adds a decay, an add and a store per neuron to the forward, and its carried gradient a few
// more to the backward.
constexpr std::uint64_t kVertexOverhead = 20;
std::uint64_t vectorPass(unsigned n) { return 4 + (n + 1) / 2; } // one row op over n floats
// The same row op reading n halves (4 per 64-bit load, the IPU's half rate) into float sums.
std::uint64_t halfVectorPass(unsigned n) { return 4 + (n + 3) / 4; }

// x.W + b: every input of each sample checked, then
// one row op per input (the blocked product or the sparse kernel's rows), and the bias and
// store per output; `pass` is the row op at the stored type's rate.
std::uint64_t directCurrentCycles(const VertexWork &w, std::uint64_t (*pass)(unsigned)) {
  return kVertexOverhead +
         std::uint64_t(w.batch) *
             (std::uint64_t(w.inputs) * (2 + pass(w.neurons)) + 2 * pass(w.neurons));
}
// x^T.dL/dI: a row op over the float dL/dI rows per (input, sample), whatever x is stored as
// (dL/dI and dL/dW are float32 sums); a half x only halves the loads of x itself.
std::uint64_t directWeightGradCycles(const VertexWork &w) {
  return kVertexOverhead + std::uint64_t(w.batch) * w.inputs * (2 + vectorPass(w.neurons));
}

// A pushing shard: one row of the next layer's width per spike (forward: W_next rows into
// the next layer's input; backward: dL/dI_next into dL/dW_next rows).
std::uint64_t pushCycles(const VertexWork &w) {
  return w.pushOutputs ? std::uint64_t(w.spikes) * vectorPass(w.pushOutputs) : 0;
}

std::uint64_t pushStepsCycles(const VertexWork &w) {
  return kVertexOverhead + std::uint64_t(w.stepsPerCall) * w.batch * pushCycles(w);
}

// The convolution's current: per row the cheaper of the event path (every non-zero input
// scatters its kernel taps, activeInputs of them) and the dense gather (every tap at every
// position), the choice the vertex makes by density; one pass over `neurons` channels each.
// `outPerEntry` half-cycles per conv output entry for the row's output: 4 (the current
// transposed, plus the bias), or 5 with a 2 x 2 max pool taken on float pairs (bias, compare,
// two selects) and the pooled map and argmax transposed out.
std::uint64_t convForwardCycles(const VertexWork &w, std::uint64_t outPerEntry) {
  const std::uint64_t events = std::uint64_t(w.activeInputs) * w.kernelArea;
  const std::uint64_t gathers = std::uint64_t(w.positions) * w.inputs;
  return kVertexOverhead +
         std::uint64_t(w.batch) *
             (2ull * w.elements + std::min(events, gathers) * vectorPass(w.neurons) +
              outPerEntry * w.positions * w.neurons / 2);
}
std::uint64_t convCurrentCycles(const VertexWork &w) { return convForwardCycles(w, 4); }
std::uint64_t convPooledCycles(const VertexWork &w) { return convForwardCycles(w, 5); }

// The input gradient's per-entry path by window runs: per row dL/dI's entries counted and
// gathered per position, each non-zero entry one pass over its window's taps (kH runs of
// float pairs), dL/dx zeroed and transposed from channels-last; the weights transposed to
// runs once.
std::uint64_t convInputGradCycles(const VertexWork &w) {
  return kVertexOverhead + 2ull * w.neurons * w.inputs +
         std::uint64_t(w.batch) *
             (2ull * w.positions * w.neurons +
              std::uint64_t(w.activeCandidates) * vectorPass(w.inputs) + 3ull * w.elements);
}

// The weight gradient, each row by dL/dI's non-zero entries (a window row of taps each) or by
// the input's (a kernel row's run of kW x c floats each; charged per tap), as the vertex
// chooses (a product by gradients weighed at twice one by inputs); per row the input listed
// and dL/dI's bias sums and count, on float pairs along the channels when dL/dI is
// channels-last, else per entry and after a transpose (3 cycles an entry).
std::uint64_t convWeightGradCycles(const VertexWork &w, std::uint64_t perEntryHalves) {
  const std::uint64_t byGrads = 2ull * w.activeCandidates * vectorPass(w.inputs);
  const std::uint64_t byInputs =
      std::uint64_t(w.activeInputs) * w.kernelArea * vectorPass(w.neurons);
  return kVertexOverhead + std::uint64_t(w.batch) * (perEntryHalves * w.positions * w.neurons / 2 +
                                                     w.elements + std::min(byGrads, byInputs));
}
std::uint64_t convWeightGradPlanarCycles(const VertexWork &w) { return convWeightGradCycles(w, 6); }
// ChannelsLast: each row of dL/dI first formed from the fused 2 x 2 max pool's gradient
// (zeroed in float pairs, one store per pooled entry).
std::uint64_t pooledRowCycles(const VertexWork &w) {
  return std::uint64_t(w.batch) * w.neurons * w.positions * 3 / 2;
}
std::uint64_t convWeightGradChannelsLastCycles(const VertexWork &w) {
  return convWeightGradCycles(w, 1) + pooledRowCycles(w);
}
// The input gradient with the pool folded lists a row's entries from the pool's gradient
// (a quarter of the positions; ~3 cycles an entry: its argmax, the route, the append)
// instead of scanning dL/dI's row (charged at 2 an entry above).
std::uint64_t convInputGradChannelsLastCycles(const VertexWork &w) {
  return convInputGradCycles(w) - 2ull * w.batch * w.positions * w.neurons +
         3ull * w.batch * w.positions * w.neurons / 4;
}

// A pool over `batch` rows of `neurons` maps: every window entry once.
std::uint64_t poolCycles(const VertexWork &w) {
  return kVertexOverhead +
         std::uint64_t(w.batch) * w.neurons * w.positions * (2ull + 2ull * w.kernelArea);
}

// LifBackward's dots at its entries from the next layer's dL/dI list, per (sample, step): over
// the list's entries (an indexed load and a multiply-add each, ~2 cycles) or over the row
// gathered from it (zeroed, scattered, then a row op per dot), the cheaper, as the vertex picks.
std::uint64_t listDotCycles(const VertexWork &w) {
  if (w.listDots == 0)
    return 0;
  const unsigned P = (w.nextWidth + 15) / 16 * 16;
  const std::uint64_t byList = std::uint64_t(w.listDots) * (4 + 2ull * w.nextLive);
  const std::uint64_t byRow =
      vectorPass(P) + 2ull * w.nextLive + std::uint64_t(w.listDots) * (6 + vectorPass(P));
  return std::min(byList, byRow);
}

using Estimator = std::function<std::uint64_t(const VertexWork &)>;

const std::map<std::string, Estimator> &table() {
  static const std::map<std::string, Estimator> estimators = {
      {"DirectCurrent<float>",
       [](const VertexWork &w) { return directCurrentCycles(w, vectorPass); }},
      {"DirectCurrent<half>",
       [](const VertexWork &w) { return directCurrentCycles(w, halfVectorPass); }},
      {"LifForward",
       [](const VertexWork &w) {
         return kVertexOverhead +
                std::uint64_t(w.stepsPerCall) *
                    (std::uint64_t(w.partialSources) * vectorPass(w.batch * w.neurons) +
                     std::uint64_t(w.batch) *
                         (std::uint64_t(w.activeInputs) * vectorPass(w.neurons) +
                          (16ull + 4ull * (w.states - 1)) * w.neurons + 2ull * w.activeCandidates));
       }},
      {"LifBackward",
       [](const VertexWork &w) {
         return kVertexOverhead +
                std::uint64_t(w.stepsPerCall) * w.batch *
                    (std::uint64_t(w.activeInputs) * vectorPass(w.neurons) +
                     std::uint64_t(w.activeCandidates) * (6 + vectorPass(w.neurons)) +
                     listDotCycles(w) + (12ull + 6ull * (w.states - 1)) * w.neurons);
       }},
      // The row sums are float rows whatever the blocks are stored as: the same estimate.
      {"PushSpikes<float>", pushStepsCycles},
      {"PushSpikes<half>", pushStepsCycles},
      {"PushGrads<float>", pushStepsCycles},
      {"PushGrads<half>", pushStepsCycles},
      {"DirectWeightGrad<float>", directWeightGradCycles},
      {"DirectWeightGrad<half>", directWeightGradCycles},
      {"OutputLoss",
       [](const VertexWork &w) {
         return kVertexOverhead + 8ull * w.elements + 60ull * w.batch * w.neurons;
       }},
      {"LeakTraceKernels", [](const VertexWork &) { return kVertexOverhead; }},
      {"LossSum", [](const VertexWork &w) { return kVertexOverhead + 2ull * w.elements; }},
      {"SgdStep", [](const VertexWork &w) { return kVertexOverhead + 4ull * w.elements; }},
      {"AdamStep", [](const VertexWork &w) { return kVertexOverhead + 14ull * w.elements; }},
      // The first layer's weights stepped as their gradient is computed: both passes' work.
      {"DirectWeightSgdStep",
       [](const VertexWork &w) { return directWeightGradCycles(w) + 4ull * w.elements; }},
      {"DirectWeightAdamStep",
       [](const VertexWork &w) { return directWeightGradCycles(w) + 14ull * w.elements; }},
      {"ConvForward<popsnn::conv::CurrentOut>", convCurrentCycles},
      {"ConvForward<popsnn::conv::MaxPooledOut>", convPooledCycles},
      {"ConvWeightGrad<popsnn::conv::Planar>", convWeightGradPlanarCycles},
      {"ConvWeightGrad<popsnn::conv::ChannelsLast>", convWeightGradChannelsLastCycles},
      {"ConvInputGrad<popsnn::conv::Planar>", convInputGradCycles},
      {"ConvInputGrad<popsnn::conv::ChannelsLast>", convInputGradChannelsLastCycles},
      {"PoolForward<popsnn::conv::MaxPool>", poolCycles},
      {"PoolBackward<popsnn::conv::MaxPool>", poolCycles},
      {"PoolForward<popsnn::conv::AvgPool>", poolCycles},
      {"PoolBackward<popsnn::conv::AvgPool>", poolCycles},
      // Per neuron and step: the update and threshold (forward); the surrogate, its mask and
      // the leak path (backward).
      {"ConvNeuronForward",
       [](const VertexWork &w) {
         return kVertexOverhead + std::uint64_t(w.batch) * w.steps * (6ull * w.neurons);
       }},
      {"ConvNeuronBackward",
       [](const VertexWork &w) {
         return kVertexOverhead + std::uint64_t(w.batch) * w.steps * (16ull * w.neurons);
       }},
      {"SumParts", [](const VertexWork &w) { return kVertexOverhead + 2ull * w.elements; }},
      // Two loads, an add and a store per element pair.
      {"AccumulateGrad", [](const VertexWork &w) { return kVertexOverhead + 2ull * w.elements; }},
      // Sums the layer's N parts, writes the shard's n entries.
      {"LayerGradSum", [](const VertexWork &w) { return kVertexOverhead + w.elements; }},
      // Half storage: a float load, a conversion and a half store per weight; a divide, a
      // finiteness test and a store per gradient entry.
      {"RoundParams", [](const VertexWork &w) { return kVertexOverhead + 2ull * w.elements; }},
      {"UnscaleGrads", [](const VertexWork &w) { return kVertexOverhead + 4ull * w.elements; }},
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
