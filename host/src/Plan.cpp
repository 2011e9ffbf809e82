#include "Plan.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "popsnn/VertexEnums.hpp"

namespace popsnn {

namespace {

unsigned ceilDiv(unsigned a, unsigned b) { return (a + b - 1) / b; }

// A layer at most this wide, with an input layer 16 times wider, is pushed to.
constexpr unsigned kNarrowLayer = 32;

// `firstTile`: where the layer's shards start; they wrap past the last tile.
LayerPlan planLayer(const NetworkSpec &spec, unsigned l, const TargetGeometry &target,
                    const Schedule &schedule, unsigned firstTile) {
  const unsigned L = spec.layers.size();
  LayerPlan layer;
  layer.spec = spec.layers[l];
  layer.index = l;
  layer.a2a = layer.spec.neuron == NeuronType::RLeaky && layer.spec.allToAll;
  layer.o2o = layer.spec.neuron == NeuronType::RLeaky && !layer.spec.allToAll;
  layer.isOutput = l + 1 == L;
  layer.inputMode = l > 0                             ? codes::INPUT_SPIKE_IDS
                    : spec.input == InputMode::Direct ? codes::INPUT_DIRECT
                                                      : codes::INPUT_DENSE_STEPS;
  const unsigned N = layer.spec.outputs;
  // Spread every layer over all tiles (spread = 1): layers run one after the other,
  // so each phase gets the whole machine.
  layer.shardSize = ceilDiv(N, std::max(1u, std::min(N, target.numTiles) / schedule.spread));
  // A wide layer feeding a much narrower one (a readout: 1000 -> 10) in the layer-major
  // schedule: shards just wide enough that the narrow layer is pushed W.S sums (see
  // LayerShape::push) rather than sent every shard's ids -- on many tiles, tiny shards
  // would leave each of its few tiles N ids to receive and sum per (step, sample).
  if (!schedule.stepMajor && l + 1 < L) {
    const unsigned nextN = spec.layers[l + 1].outputs;
    if (nextN <= kNarrowLayer && N >= 16 * nextN)
      for (unsigned size = layer.shardSize; size <= N; ++size)
        if (codes::BUFFER_HEADER + bufferCapacity(size, spec.maxActivity) >= nextN) {
          layer.shardSize = size;
          break;
        }
  }
  const unsigned numShards = ceilDiv(N, layer.shardSize);
  unsigned maxCapacity = 1;
  for (unsigned k = 0; k < numShards; ++k) {
    ShardPlan sh;
    sh.tile = (firstTile + k) % target.numTiles;
    sh.first = k * layer.shardSize;
    sh.size = std::min(layer.shardSize, N - sh.first);
    sh.capacity = bufferCapacity(sh.size, spec.maxActivity);
    maxCapacity = std::max(maxCapacity, sh.capacity);
    layer.shards.push_back(sh);
  }
  layer.stride = codes::BUFFER_HEADER + maxCapacity;
  return layer;
}

} // namespace

const char *paramName(unsigned p) {
  static const char *names[NUM_PARAMS] = {"weight",         "bias", "recurrent_weight",
                                          "recurrent_bias", "beta", "threshold"};
  return names[p];
}

std::vector<float> &paramValues(LayerParams &lp, unsigned p) {
  switch (p) {
  case P_WEIGHT:
    return lp.weight;
  case P_BIAS:
    return lp.bias;
  case P_REC_WEIGHT:
    return lp.recurrentWeight;
  case P_REC_BIAS:
    return lp.recurrentBias;
  case P_BETA:
    return lp.beta;
  default:
    return lp.threshold;
  }
}
const std::vector<float> &paramValues(const LayerParams &lp, unsigned p) {
  return paramValues(const_cast<LayerParams &>(lp), p);
}

bool layerHasParam(const LayerSpec &s, unsigned p) {
  const bool recurrent = s.neuron == NeuronType::RLeaky;
  return p == P_WEIGHT || (p == P_BIAS && s.bias) || (p == P_REC_WEIGHT && recurrent) ||
         (p == P_REC_BIAS && recurrent && s.allToAll) || (p == P_BETA && s.learnBeta) ||
         (p == P_THRESHOLD && s.learnThreshold);
}

bool isLayerScalar(const LayerSpec &s, unsigned p) {
  return (p == P_BETA && s.betas.empty()) || (p == P_THRESHOLD && s.thresholds.empty());
}

std::size_t hostParamSize(const LayerSpec &s, unsigned p) {
  if (p == P_WEIGHT)
    return std::size_t(s.outputs) * s.inputs;
  if (p == P_REC_WEIGHT && s.neuron == NeuronType::RLeaky && s.allToAll)
    return std::size_t(s.outputs) * s.outputs;
  return isLayerScalar(s, p) ? 1 : s.outputs;
}

bool hasOptimizerSlot(const OptimizerSpec &o, unsigned slot) {
  const bool sgd = o.kind == OptimizerKind::SGD;
  return slot == 0 ? !sgd || o.momentum != 0.0 : !sgd;
}

std::size_t LayerShape::paramSize(unsigned p, unsigned n) const {
  switch (p) {
  case P_WEIGHT:
    return std::size_t(spec.inputs) * n;
  case P_REC_WEIGHT:
    return a2a ? std::size_t(spec.outputs) * n : n;
  default:
    return n;
  }
}

bool compressedTraceFor(SparseRule rule, float traceActivity, unsigned shardSize) {
  return rule != SparseRule::None && traceActivity < DENSE_TRACE_MIN_ACTIVITY &&
         shardSize <= MAX_TRACE_ID_SHARD;
}

float sparseBackwardLimit(const NetworkSpec &spec) {
  return spec.sparseBackwardMaxLive > 0.0f ? spec.sparseBackwardMaxLive : SPARSE_BACKWARD_MAX_LIVE;
}

bool chooseDenseBackward(const std::vector<double> &layerLive, NetworkSpec &spec) {
  const float limit = sparseBackwardLimit(spec);
  bool changed = false;
  for (std::size_t l = 0; l < spec.layers.size() && l < layerLive.size(); ++l) {
    LayerSpec &s = spec.layers[l];
    if (s.sparseRule == SparseRule::None || s.denseBackward || layerLive[l] <= 0.0)
      continue; // no rule, dense already (nothing counted), or a dense trace (nothing counted)
    s.liveFraction = float(layerLive[l]);
    if (layerLive[l] > limit) {
      s.denseBackward = true;
      changed = true;
    }
  }
  return changed;
}

unsigned traceCapacity(unsigned size, unsigned rows, float activity) {
  const double entries = std::ceil(double(activity) * size * rows);
  return unsigned(std::min<double>(double(size) * rows, std::max(1.0, entries)));
}

unsigned bufferCapacity(unsigned size, float maxActivity) {
  return std::min<unsigned>(size, std::max(1u, unsigned(std::ceil(double(maxActivity) * size))));
}

Plan planNetwork(const NetworkSpec &spec, const TargetGeometry &target, const Schedule &schedule) {
  if (schedule.chunks == 0 || spec.batchSize % schedule.chunks)
    throw std::invalid_argument("a plan's chunks must divide the batch of " +
                                std::to_string(spec.batchSize) + ", got " +
                                std::to_string(schedule.chunks));
  if (target.numTiles == 0 || schedule.spread == 0)
    throw std::invalid_argument("a plan needs at least one tile and a spread >= 1");
  Plan plan;
  plan.schedule = schedule;
  plan.numTiles = target.numTiles;
  plan.chunkBatch = spec.batchSize / schedule.chunks;
  const unsigned L = spec.layers.size();
  const unsigned rows = spec.numSteps * plan.chunkBatch;
  if (spec.input == InputMode::PerStep && spec.inputActivity > 0.0f &&
      spec.inputActivity < DENSE_TRACE_MIN_ACTIVITY)
    plan.inputListCapacity = std::max<std::size_t>(
        1, std::size_t(std::ceil(double(spec.inputActivity) * rows * spec.layers[0].inputs)));
  // Layers narrower than the machine are packed one after another over the tiles (and
  // IPUs) instead of all starting at tile 0: the tiles after a wide layer's hold the next
  // layer (a readout it pushes sums to), and deep stacks of narrow layers spread their
  // memory over every IPU rather than piling onto the first tiles.
  unsigned nextTile = 0;
  for (unsigned l = 0; l < L; ++l) {
    LayerPlan &layer = plan.layers.emplace_back(planLayer(spec, l, target, schedule, nextTile));
    nextTile = (nextTile + unsigned(layer.shards.size())) % target.numTiles;
    unsigned spikes = 0;
    // Half storage keeps a sparse rule's masked surrogate dense: the compressed trace (and
    // the dL/dI lists that follow it) have no half form yet.
    layer.compressedTrace =
        !spec.halfStorage && !layer.spec.denseBackward &&
        compressedTraceFor(layer.spec.sparseRule, spec.gradientTraceActivity(), layer.shardSize);
    for (ShardPlan &sh : layer.shards) {
      if (layer.compressedTrace)
        sh.traceCapacity = traceCapacity(sh.size, rows, spec.gradientTraceActivity());
      sh.spikeCapacity = traceCapacity(sh.size, rows, spec.idTraceActivity());
      spikes = std::max(spikes, sh.spikeCapacity);
    }
    layer.idTraceSize = std::size_t(codes::traceStarts(spec.numSteps, plan.chunkBatch)) +
                        std::size_t(rows) * codes::BUFFER_HEADER + spikes;
  }
  plan.fusedWeightStep =
      spec.input == InputMode::Direct && !spec.halfStorage && schedule.chunks == 1 && !target.ipu;
  std::vector<LayerPlan> &layers = plan.layers;
  for (unsigned l = 0; l + 1 < L; ++l) {
    // Per (step, sample) and receiving shard: n_k floats instead of a whole id buffer.
    layers[l].push = !schedule.stepMajor && layers[l + 1].spec.outputs <= layers[l].stride;
    if (layers[l].push)
      layers[l + 1].inputMode = codes::INPUT_PARTIAL_CURRENT;
  }
  for (LayerPlan &layer : layers) // the same rule the vertices apply, on what they are given
    layer.leakTrace =
        target.leakTrace && !spec.halfStorage && !layer.spec.perNeuron() &&
        (layer.spec.neuron == NeuronType::Leaky || layer.spec.neuron == NeuronType::Synaptic) &&
        codes::leakTraceApplies(layer.inputMode, unsigned(layer.spec.sparseRule),
                                unsigned(layer.spec.surrogate), layer.isOutput,
                                layer.a2a ? 1u : spec.numSteps, spec.numSteps, schedule.stepMajor);
  const float listActivity = spec.gradientListActivity();
  for (unsigned l = 1; l < L; ++l) {
    LayerPlan &layer = layers[l];
    const LayerPlan &prev = layers[l - 1];
    layer.gradList = !schedule.stepMajor && listActivity < DENSE_TRACE_MIN_ACTIVITY &&
                     layer.compressedTrace && prev.compressedTrace && !layer.isOutput &&
                     !layer.a2a && !prev.a2a && !prev.push;
    for (ShardPlan &sh : layer.shards) // one capacity for every shard: the lists line up
      sh.gradListCapacity = layer.gradList ? traceCapacity(layer.shardSize, rows, listActivity) : 0;
  }
  plan.numOutputs = spec.layers.back().outputs;
  plan.numClasses = spec.loss.numClasses ? spec.loss.numClasses : plan.numOutputs;
  plan.outShardSize = layers.back().shardSize;
  // Host-facing tensors and the loss on the last tile, the one with the fewest shards; on
  // an IPU a loss group per 16 tiles, up to one per sample, tiles from the last one down.
  plan.lossTile = target.numTiles - 1;
  const unsigned Bc = plan.chunkBatch;
  const unsigned numGroups = target.ipu ? std::min(Bc, std::max(1u, target.numTiles / 16)) : 1u;
  for (unsigned g = 0; g < numGroups; ++g)
    plan.lossGroups.push_back({Bc * g / numGroups, Bc * (g + 1) / numGroups, plan.lossTile - g});
  return plan;
}

} // namespace popsnn
