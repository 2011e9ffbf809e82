// The graph builder: a NetworkSpec -> one Poplar graph, its programs and its
// engine. Ordinary Poplar user code (only Poplar's public API), so the same
// source builds against Graphcore's SDK.
//
// Mapping (SPEC section 2): every layer is sharded by output neuron over the
// tiles; a shard keeps its neurons' whole fan-in (weight columns, stored
// transposed as [in, shard] so one input's row is contiguous), optimiser state
// and traces: its id buffers [T, B, stride] and the masked surrogate, dense
// [T, B, n] without a sparse rule, else only beside the buffers' entries
// ([T, B, capacity]). Crossing tiles: the batch, spike-id buffers (forward; and
// again in the backward, for the sparse weight gradients), each shard's dL/dI[t]
// [B, n] (backward), the output records, and once per forward pass a copy of each
// layer's weights onto the tiles of the layer feeding it ("fan-out"), from which
// those tiles compute their own dL/dS -- only for their id buffers' entries when a
// sparse rule is on.
// A layer narrower than its input layer's id buffers (e.g. a 10-class readout after
// 1000 hidden neurons) is not sent ids: the input layer's shards "push" instead --
// each adds the fan-out rows of its spikes into W.S[t] blocks [T, B, n_k] (forward)
// and accumulates that layer's dL/dW on its own neurons (backward), and those dense
// blocks cross tiles (layer-major schedule; see Layer::push).
//
// Programs: 0 forward, 1 loss + backward + optimiser, 2 loss + backward
// (gradients only). Layer-major: one layer's T steps run in one compute phase
// (its vertices loop over the steps with device-side step counters), then its
// whole id trace (forward) or dL/dI (backward) goes to the next layer in one
// exchange -- a handful of fat phases per training step. A layer with an
// all-to-all recurrence needs every shard's spikes of step t-1 before step t:
// it runs its steps one per phase in a Repeat, with an exchange in between.
//
// Planning (plan(), build()): layer-major, else step-major; within each, every layer spread
// over all tiles, else over fewer. In the layer-major schedule a wide layer feeding a much
// narrower one (at most 32 neurons, 16 times fewer: 1000 -> 10) gets shards just wide
// enough to push to it, and the narrow layer tiles after the pusher's. If no such mapping fits the tiles' memory, the batch runs in
// chunks of samples (2, 3, 4, ... chunks dividing the batch): the graph is built for one
// chunk, and the programs run every chunk's forward (and backward) pass in turn, copying
// its slice of the batch onto the first layer's tiles; the weight gradients (and the loss,
// a weighted sum over samples) are summed over the chunks (AccumulateGrad), then the
// optimiser steps once. Programs then: 0 forward of every chunk, 1 forward + backward of
// every chunk, 2 the optimiser step. Seed 000's DSNN at batch 128 on one Mk2 runs so.
//
// IPU targets only (the cpu device runs a tile's vertices one after the other, so there it
// is one vertex each): x.W and its weight gradient run as one vertex per worker of a tile
// (by samples, by inputs), and on a target with many tiles the loss runs as one vertex per
// group of samples, each group on a tile of its own (its records gathered there, its
// gradients scattered back from there), the groups' parts summed by LossSum.
#include "popsnn/Network.hpp"

#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "CycleEstimates.hpp"
#include "VertexEnums.hpp"

namespace popsnn {

using namespace poplar;
using namespace poplar::program;

namespace {

std::string str(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

[[noreturn]] void invalid(const std::string &what) { throw std::invalid_argument(what); }

unsigned ceilDiv(unsigned a, unsigned b) { return (a + b - 1) / b; }

} // namespace

void NetworkSpec::validate() const {
  if (layers.empty())
    invalid("NetworkSpec.layers is empty; give at least one layer");
  if (batchSize == 0)
    invalid("NetworkSpec.batchSize must be >= 1, got 0");
  if (numSteps == 0)
    invalid("NetworkSpec.numSteps must be >= 1, got 0");
  if (!(maxActivity > 0.0f && maxActivity <= 1.0f))
    invalid("NetworkSpec.maxActivity must lie in (0, 1], got " + str(maxActivity));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerSpec &s = layers[l];
    const std::string at = "layer " + std::to_string(l) + ": ";
    if (s.inputs == 0 || s.outputs == 0)
      invalid(at + "inputs and outputs must be >= 1, got " + std::to_string(s.inputs) + " and " +
              std::to_string(s.outputs));
    if (l > 0 && s.inputs != layers[l - 1].outputs)
      invalid(at + "inputs=" + std::to_string(s.inputs) + " does not match the previous layer's " +
              "outputs=" + std::to_string(layers[l - 1].outputs));
    if (!(s.beta >= 0.0f && s.beta <= 1.0f))
      invalid(at + "beta must lie in [0, 1], got " + str(s.beta));
    if (!(s.alpha >= 0.0f && s.alpha <= 1.0f))
      invalid(at + "alpha must lie in [0, 1], got " + str(s.alpha));
    if (!(s.threshold > 0.0f) || !std::isfinite(s.threshold))
      invalid(at + "threshold must be a finite number > 0, got " + str(s.threshold));
    if (s.sparseRule == SparseRule::Window && !(s.sparseValue > 0.0f))
      invalid(at + "the window rule's b_th must be > 0, got " + str(s.sparseValue));
    if (s.sparseRule == SparseRule::OneSided && !(s.sparseValue < s.threshold))
      invalid(at + "the one-sided rule's theta_grad must be below the threshold " +
              str(s.threshold) + ", got " + str(s.sparseValue));
  }
  const unsigned C = layers.back().outputs;
  const unsigned K = loss.numClasses ? loss.numClasses : C;
  if (C % K)
    invalid("loss.numClasses=" + std::to_string(K) + " does not divide the " + std::to_string(C) +
            " outputs; a population code needs a multiple of the number of classes");
  if (K != C && (loss.kind == LossKind::CeRate || loss.kind == LossKind::MseMembrane ||
                 loss.kind == LossKind::CeMaxMembrane))
    invalid("this loss has no population code: numClasses must equal the " + std::to_string(C) +
            " outputs, got " + std::to_string(K));
}

// ---------------------------------------------------------------------------

namespace {

struct Shard {
  unsigned tile = 0, first = 0, size = 0, capacity = 0;
  // Parameters, their gradients and optimiser state: index P_WEIGHT.. below.
  Tensor param[4], grad[4], opt1[4], opt2[4], optCount[4];
  Tensor mem, syn, prevSpikes, fwdScratch, surrTrace, idTrace, outIds, overflow;  // outIds: a2a
  Tensor surrValues; // a sparse rule: the surrogate per id-buffer entry, instead of surrTrace
  Tensor stepForward, stepBackward;
  Tensor xLocal, current, currentGradSum;
  // inRecv: the previous layer's traces; recRecv: own ids of step t-1 (a2a forward);
  // ownTraces: own traces (a2a backward).
  Tensor inRecv, recRecv, ownTraces, prevIds; // prevIds: step-major a2a
  Tensor gradMem, gradSyn, bwdScratch, gradOut, gradStep;
  // Copies of the weights of the layer this shard feeds (and of V), on this shard's neurons.
  Tensor nextGrad, nextWeights, nextWeightsT, ownGrad, ownWeights, ownWeightsT;
  Tensor recSpikes, recMem, lossGradS, lossGradU;
  // The batch split into sample chunks: gradients summed over the chunks, and every chunk's
  // overflow counters.
  Tensor gradTotal[4], overflowAll;
  // A layer that pushes (see Layer::push): its W_next.S blocks and W_next rows, dL/dW_next;
  // the layer it feeds: the received blocks.
  Tensor nextCurrent, nextRows, nextGradRows, nextGradWeights, partialRecv;
};
enum ParamIndex { P_WEIGHT = 0, P_BIAS = 1, P_REC_WEIGHT = 2, P_REC_BIAS = 3 };

struct Layer {
  LayerSpec spec;
  unsigned index = 0, shardSize = 0, stride = 0, inputMode = 0;
  bool a2a = false, o2o = false, isOutput = false;
  // push: the next layer is narrower than this one's id buffers, so each shard computes
  // its spikes' contribution W_next.S[t] to the next layer's input itself, and the next
  // layer's weight gradient on its neurons; those dense blocks cross tiles instead of the
  // id buffers (layer-major schedule only).
  bool push = false;
  std::vector<Shard> shards;
  bool hasParam(unsigned p) const {
    return p == P_WEIGHT || (p == P_BIAS && spec.bias) || (p == P_REC_WEIGHT && (a2a || o2o)) ||
           (p == P_REC_BIAS && a2a);
  }
};

unsigned neuronCode(const LayerSpec &s) {
  if (s.neuron == NeuronType::Synaptic)
    return codes::SYNAPTIC;
  if (s.neuron == NeuronType::RLeaky)
    return s.allToAll ? codes::RLEAKY_ALL_TO_ALL : codes::RLEAKY_ONE_TO_ONE;
  return codes::LEAKY;
}

const char *layerKind(const LayerSpec &s) {
  switch (s.neuron) {
  case NeuronType::Synaptic:
    return "Synaptic";
  case NeuronType::RLeaky:
    return "RLeaky";
  default:
    return "Leaky";
  }
}

} // namespace

class Network::Impl {
public:
  Impl(const NetworkSpec &s, const DeviceSpec &d, OverflowPolicy p)
      : spec(s), deviceSpec(d), policy(p) {
    spec.validate();
    build();
  }

  NetworkSpec spec;
  DeviceSpec deviceSpec;
  OverflowPolicy policy;

  Device device;
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Engine> engine;
  std::vector<Layer> layers;
  unsigned numTiles = 0, numOutputs = 0, numClasses = 0, outShardSize = 0, lossTile = 0;
  std::uint64_t optimizerSteps = 0;
  bool stepMajor = false; // the schedule build() settled on
  // The batch runs in `chunks` chunks of `chunkBatch` samples one after the other when the
  // whole batch does not fit the tiles (gradients summed over the chunks before the update).
  // Every per-sample tensor on the tiles holds one chunk; 1: the whole batch at once.
  unsigned chunks = 1, chunkBatch = 0;
  // Bytes of popsnn's tensors per tile and layer, for the does-not-fit error.
  std::vector<std::vector<std::uint64_t>> tileLayerBytes;

  Tensor xHost, labels, sampleWeights, lossValue, gatheredS, gatheredU, gradS, gradU, lossScratch;
  // Chunked: the loss vertex's chunk of labels and weights, the loss and the output spikes
  // of the whole batch.
  Tensor labelsChunk, weightsChunk, lossTotal, spikesAll;
  // The loss over groups of samples, one OutputLoss vertex each on a tile of its own (IPU
  // targets with many tiles; else one group on lossTile): the gathered records, their
  // gradients, labels and weights are [group][...] blocks, each on its group's tile, laid
  // out within a block as one group-sized batch. lossParts: each group's part of the loss,
  // summed (LossSum) into lossValue on lossTile.
  struct LossGroup {
    unsigned first = 0, last = 0, tile = 0;
  };
  std::vector<LossGroup> lossGroups;
  Tensor lossParts, lossPartsLocal;
  // The optimiser's learning rate: device state, one float on every tile (element i on tile
  // i) that the optimiser vertices read; the host writes it (setLearningRate) -- a schedule
  // changes it between steps without a recompile.
  Tensor learningRate;

  // -- building ---------------------------------------------------------------

  Device makeDevice() {
    const std::string &type = deviceSpec.type;
    if (type == "cpu")
      return Device::createCPUDevice();
    if (type == "ipu-model") {
      IPUModel model("ipu2");
      model.numIPUs = deviceSpec.numIPUs;
      if (deviceSpec.tilesPerIPU)
        model.tilesPerIPU = deviceSpec.tilesPerIPU;
      if (deviceSpec.memoryBytesPerTile)
        model.memoryBytesPerTile = deviceSpec.memoryBytesPerTile;
      return model.createDevice();
    }
    if (type == "ipu") {
      auto manager = DeviceManager::createDeviceManager();
      for (auto &candidate : manager.getDevices(TargetType::IPU, deviceSpec.numIPUs)) {
        if (candidate.attach())
          return std::move(candidate);
      }
      throw std::runtime_error("device 'ipu': no IPU with " + std::to_string(deviceSpec.numIPUs) +
                               " IPU(s) could be attached on this machine; use device "
                               "'ipu-model' (IPU geometry on the CPU) or 'cpu'");
    }
    invalid("device type must be 'cpu', 'ipu-model' or 'ipu', got '" + type + "'");
  }

  std::string codeletsPath() const {
    if (!deviceSpec.codeletsPath.empty())
      return deviceSpec.codeletsPath;
    if (const char *env = std::getenv("POPSNN_CODELETS"))
      return env;
    throw std::runtime_error("popsnn: no codelet object given: set DeviceSpec.codeletsPath to "
                             "the installed popsnn_codelets.gp (CMake: ${POPSNN_CODELETS}) or "
                             "the POPSNN_CODELETS environment variable");
  }

  Tensor var(const Type &type, std::size_t n, unsigned tile, const std::string &name,
             int layer = -1) {
    Tensor t = graph->addVariable(type, {n}, name);
    graph->setTileMapping(t, tile);
    if (layer >= 0)
      tileLayerBytes[tile][layer] += n * graph->getTarget().getTypeSize(type);
    return t;
  }
  Tensor zeros(const Type &type, std::size_t n, unsigned tile, const std::string &name,
               int layer = -1) {
    Tensor t = var(type, n, tile, name, layer);
    if (type == FLOAT)
      graph->setInitialValue(t, 0.0f);
    else if (type == INT)
      graph->setInitialValue(t, 0);
    else
      graph->setInitialValue(t, 0u);
    return t;
  }

  // Unused fields of a general vertex are connected to a 1-element placeholder.
  std::map<std::pair<unsigned, std::string>, Tensor> dummies;
  unsigned dummyCount = 0;
  Tensor dummyIn(const Type &type, unsigned tile) {
    auto key = std::make_pair(tile, type.toString());
    auto it = dummies.find(key);
    if (it != dummies.end())
      return it->second;
    Tensor t = zeros(type, 1, tile, "unused");
    dummies[key] = t;
    return t;
  }
  Tensor dummyOut(const Type &type, unsigned tile) {
    return zeros(type, 1, tile, "unused_out" + std::to_string(dummyCount++));
  }
  static Tensor orElse(const Tensor &t, const Tensor &fallback) { return t.valid() ? t : fallback; }

  // Spike-buffer entries of a shard of `size` neurons.
  unsigned capacityOf(unsigned size) const {
    return std::min<unsigned>(
        size, std::max(1u, unsigned(std::ceil(double(spec.maxActivity) * size))));
  }
  // A layer at most this wide, with an input layer 16 times wider, is pushed to.
  static constexpr unsigned kNarrowLayer = 32;

  void plan(unsigned spread) {
    const Target &target = device.getTarget();
    numTiles = target.getNumTiles();
    const unsigned L = spec.layers.size();
    tileLayerBytes.assign(numTiles, std::vector<std::uint64_t>(L + 1, 0));
    layers.clear();
    for (unsigned l = 0; l < L; ++l) {
      Layer layer;
      layer.spec = spec.layers[l];
      layer.index = l;
      layer.a2a = layer.spec.neuron == NeuronType::RLeaky && layer.spec.allToAll;
      layer.o2o = layer.spec.neuron == NeuronType::RLeaky && !layer.spec.allToAll;
      layer.isOutput = l + 1 == L;
      layer.inputMode = l > 0 ? codes::INPUT_SPIKE_IDS
                        : spec.input == InputMode::Direct ? codes::INPUT_DIRECT
                                                          : codes::INPUT_DENSE_STEPS;
      const unsigned N = layer.spec.outputs;
      // Spread every layer over all tiles (spread = 1): layers run one after the other,
      // so each phase gets the whole machine.
      layer.shardSize = ceilDiv(N, std::max(1u, std::min(N, numTiles) / spread));
      // A wide layer feeding a much narrower one (a readout: 1000 -> 10) in the layer-major
      // schedule: shards just wide enough that the narrow layer is pushed W.S sums (see
      // Layer::push) rather than sent every shard's ids -- on many tiles, tiny shards would
      // leave each of its few tiles N ids to receive and sum per (step, sample).
      if (!stepMajor && l + 1 < L) {
        const unsigned nextN = spec.layers[l + 1].outputs;
        if (nextN <= kNarrowLayer && N >= 16 * nextN)
          for (unsigned size = layer.shardSize; size <= N; ++size)
            if (codes::BUFFER_HEADER + capacityOf(size) >= nextN) {
              layer.shardSize = size;
              break;
            }
      }
      const unsigned numShards = ceilDiv(N, layer.shardSize);
      unsigned maxCapacity = 1;
      for (unsigned k = 0; k < numShards; ++k) {
        Shard sh;
        sh.tile = k;
        sh.first = k * layer.shardSize;
        sh.size = std::min(layer.shardSize, N - sh.first);
        sh.capacity = capacityOf(sh.size);
        maxCapacity = std::max(maxCapacity, sh.capacity);
        layer.shards.push_back(sh);
      }
      layer.stride = codes::BUFFER_HEADER + maxCapacity;
      layers.push_back(std::move(layer));
    }
    for (unsigned l = 0; l + 1 < L; ++l) {
      // Per (step, sample) and receiving shard: n_k floats instead of a whole id buffer.
      layers[l].push = !stepMajor && layers[l + 1].spec.outputs <= layers[l].stride;
      if (layers[l].push) {
        layers[l + 1].inputMode = codes::INPUT_PARTIAL_CURRENT;
        // The pushed-to layer's shards on the tiles after the pusher's where there is room:
        // a tile then holds one shard's blocks of partial sums, not those beside the pusher's.
        const unsigned offset = layers[l].shards.back().tile + 1;
        if (offset + layers[l + 1].shards.size() <= numTiles)
          for (Shard &sh : layers[l + 1].shards)
            sh.tile += offset;
      }
    }
    numOutputs = spec.layers.back().outputs;
    numClasses = spec.loss.numClasses ? spec.loss.numClasses : numOutputs;
    outShardSize = layers.back().shardSize;
  }

  void checkMemory() {
    const Target &target = device.getTarget();
    if (target.getTargetType() == TargetType::CPU) // no memory limit per tile
      return;
    const std::uint64_t available = target.getBytesPerTile();
    for (unsigned tile = 0; tile < numTiles; ++tile) {
      std::uint64_t total = 0;
      unsigned worst = 0;
      for (unsigned l = 0; l < tileLayerBytes[tile].size(); ++l) {
        total += tileLayerBytes[tile][l];
        if (tileLayerBytes[tile][l] > tileLayerBytes[tile][worst])
          worst = l;
      }
      if (total > available) {
        std::ostringstream msg;
        msg << "the network does not fit: tile " << tile << " needs " << total
            << " bytes for popsnn's tensors but has " << available << " bytes; ";
        if (worst < layers.size())
          msg << "layer " << worst << " (" << layerKind(layers[worst].spec) << ", "
              << layers[worst].spec.inputs << " -> " << layers[worst].spec.outputs
              << " neurons, " << layers[worst].shardSize << " per tile) takes "
              << tileLayerBytes[tile][worst] << " of them";
        else
          msg << "the loss and the output records take " << tileLayerBytes[tile][worst];
        msg << ". Fix: more tiles (tiles_per_ipu, num_ipus: " << numTiles
            << " now), a smaller batch (" << spec.batchSize << ") or fewer steps ("
            << spec.numSteps << "), or a lower max_activity (" << spec.maxActivity << ")";
        throw NetworkDoesNotFit(msg.str());
      }
    }
  }

  void setEstimate(VertexRef v, const std::string &name, const VertexWork &w) {
    graph->setPerfEstimate(v, estimateCycles(name, w));
  }

  template <typename T> void setField(VertexRef v, const char *field, T value) {
    graph->setInitialValue(v[field], value);
  }

  void createShardTensors(Layer &layer) {
    const unsigned B = chunkBatch, T = spec.numSteps;
    const unsigned l = layer.index;
    const unsigned nIn = layer.spec.inputs, N = layer.spec.outputs;
    const std::string base = "layer" + std::to_string(l) + "/shard";
    for (unsigned k = 0; k < layer.shards.size(); ++k) {
      Shard &sh = layer.shards[k];
      const unsigned n = sh.size, tile = sh.tile;
      const std::string name = base + std::to_string(k) + "/";
      const int L = int(l);
      auto paramSize = [&](unsigned p) -> std::size_t {
        switch (p) {
        case P_WEIGHT:
          return std::size_t(nIn) * n;
        case P_REC_WEIGHT:
          return layer.a2a ? std::size_t(N) * n : n;
        default:
          return n;
        }
      };
      const char *pname[4] = {"weight", "bias", "recurrent_weight", "recurrent_bias"};
      for (unsigned p = 0; p < 4; ++p) {
        // The bias always exists on the device (zero and never updated without one).
        if (!layer.hasParam(p) && p != P_BIAS)
          continue;
        sh.param[p] = zeros(FLOAT, paramSize(p), tile, name + pname[p], L);
        sh.grad[p] = zeros(FLOAT, paramSize(p), tile, name + "grad_" + pname[p], L);
        if (!layer.hasParam(p))
          continue;
        const OptimizerSpec &o = spec.optimizer;
        const bool sgd = o.kind == OptimizerKind::SGD;
        if (!sgd || o.momentum != 0.0)
          sh.opt1[p] = zeros(FLOAT, paramSize(p), tile, name + "opt1_" + pname[p], L);
        if (!sgd)
          sh.opt2[p] = zeros(FLOAT, paramSize(p), tile, name + "opt2_" + pname[p], L);
        sh.optCount[p] = zeros(UNSIGNED_INT, 1, tile, name + "count_" + pname[p], L);
        if (chunks > 1)
          sh.gradTotal[p] = zeros(FLOAT, paramSize(p), tile, name + "grad_total_" + pname[p], L);
      }
      sh.mem = zeros(FLOAT, B * n, tile, name + "mem", L);
      if (layer.spec.neuron == NeuronType::Synaptic) {
        sh.syn = zeros(FLOAT, B * n, tile, name + "syn", L);
        sh.gradSyn = zeros(FLOAT, B * n, tile, name + "grad_syn", L);
      }
      sh.prevSpikes = zeros(FLOAT, B * n, tile, name + "prev_spikes", L);
      sh.fwdScratch = zeros(FLOAT, 3 * n, tile, name + "fwd_scratch", L);
      sh.bwdScratch = zeros(FLOAT,
                            2 * n + (l + 1 < layers.size()
                                         ? codes::pushWidth(layers[l + 1].spec.outputs)
                                         : 0),
                            tile, name + "bwd_scratch", L);
      // The surrogate kept for the backward: dense without a sparse rule (every entry carries
      // gradient), else only beside the id buffers' entries (spikes, gradient candidates).
      if (layer.spec.sparseRule == SparseRule::None)
        sh.surrTrace = zeros(FLOAT, std::size_t(T) * B * n, tile, name + "surrogate_trace", L);
      else
        sh.surrValues = zeros(FLOAT, std::size_t(T) * B * (layer.stride - codes::BUFFER_HEADER),
                              tile, name + "surrogate_values", L);
      sh.idTrace = zeros(INT, std::size_t(T) * B * layer.stride, tile, name + "id_trace", L);
      const bool feedsNext = l + 1 < layers.size();
      if (layer.a2a || (stepMajor && feedsNext))
        sh.outIds = zeros(INT, B * layer.stride, tile, name + "ids", L);
      if (layer.a2a && stepMajor)
        sh.prevIds = zeros(INT, B * layer.stride, tile, name + "prev_ids", L);
      sh.overflow = zeros(UNSIGNED_INT, codes::OVERFLOW_FIELDS, tile, name + "overflow", L);
      if (chunks > 1)
        sh.overflowAll = zeros(UNSIGNED_INT, chunks * codes::OVERFLOW_FIELDS, tile,
                               name + "overflow_all", L);
      sh.stepForward = zeros(UNSIGNED_INT, 1, tile, name + "step_forward", L);
      sh.stepBackward = zeros(UNSIGNED_INT, 1, tile, name + "step_backward", L);
      sh.gradMem = zeros(FLOAT, B * n, tile, name + "grad_mem", L);
      if (layer.inputMode == codes::INPUT_DIRECT) {
        sh.xLocal = zeros(FLOAT, std::size_t(B) * nIn, tile, name + "x", L);
        sh.current = zeros(FLOAT, B * n, tile, name + "current", L);
        sh.currentGradSum = zeros(FLOAT, B * n, tile, name + "current_grad_sum", L);
      } else if (layer.inputMode == codes::INPUT_DENSE_STEPS) {
        sh.xLocal = zeros(FLOAT, std::size_t(T) * B * nIn, tile, name + "x", L);
      } else if (layer.inputMode == codes::INPUT_PARTIAL_CURRENT) {
        sh.current = zeros(FLOAT, B * n, tile, name + "partial_sum", L);
        sh.partialRecv = zeros(FLOAT, layers[l - 1].shards.size() * std::size_t(T) * B * n, tile,
                               name + "partial_current", L);
      } else {
        const Layer &prev = layers[l - 1];
        sh.inRecv = zeros(INT, prev.shards.size() * (stepMajor ? 1 : T) * B * prev.stride, tile,
                          name + "in_ids", L);
      }
      if (layer.push) {
        const std::size_t nextN = layers[l + 1].spec.outputs;
        sh.nextCurrent = zeros(FLOAT, std::size_t(T) * B * nextN, tile, name + "next_current", L);
        const std::size_t rows = (n + 1) * codes::pushWidth(nextN);
        sh.nextRows = zeros(FLOAT, rows, tile, name + "next_rows", L);
        sh.nextGradRows = zeros(FLOAT, rows, tile, name + "next_grad_rows", L);
        sh.nextGradWeights = zeros(FLOAT, n * nextN, tile, name + "next_grad_weights", L);
      }
      const bool dense = layer.spec.sparseRule == SparseRule::None;
      if (l > 0)
        sh.gradOut =
            zeros(FLOAT, std::size_t(stepMajor ? 1 : T) * B * n, tile, name + "grad_out", L);
      if (layer.a2a) {
        sh.recRecv = zeros(INT, layer.shards.size() * B * layer.stride, tile, name + "rec_ids", L);
        if (!stepMajor)
          sh.ownTraces =
              zeros(INT, layer.shards.size() * T * B * layer.stride, tile, name + "own_ids", L);
        sh.gradStep = zeros(FLOAT, std::size_t(B) * n, tile, name + "grad_step", L);
        sh.ownGrad = zeros(FLOAT, std::size_t(B) * N, tile, name + "own_grad", L);
        sh.ownWeights = zeros(FLOAT, std::size_t(n) * N, tile, name + "own_weights", L);
        if (dense)
          sh.ownWeightsT = zeros(FLOAT, std::size_t(n) * N, tile, name + "own_weights_t", L);
      }
      if (!layer.isOutput) {
        const unsigned nextN = layers[l + 1].spec.outputs;
        sh.nextGrad = zeros(FLOAT, std::size_t(stepMajor ? 1 : T) * B * nextN, tile,
                            name + "next_grad", L);
        sh.nextWeights = zeros(FLOAT, std::size_t(n) * nextN, tile, name + "next_weights", L);
        // Dense: [N_next, n]; a sparse rule: padded rows [n, P] (see LifBackward).
        sh.nextWeightsT = zeros(FLOAT, std::size_t(n) * (dense ? nextN : codes::pushWidth(nextN)),
                                tile, name + "next_weights_t", L);
      } else {
        sh.recSpikes = zeros(FLOAT, std::size_t(T) * B * n, tile, name + "out_spikes", L);
        sh.recMem = zeros(FLOAT, std::size_t(T) * B * n, tile, name + "out_mem", L);
        sh.lossGradS = zeros(FLOAT, std::size_t(T) * B * n, tile, name + "loss_grad_spikes", L);
        sh.lossGradU = zeros(FLOAT, std::size_t(T) * B * n, tile, name + "loss_grad_mem", L);
      }
    }
  }

  // Copy programs made of many contiguous pieces, as one exchange phase.
  struct CopyList {
    std::vector<Tensor> src, dst;
    void add(const Tensor &s, const Tensor &d) {
      src.push_back(s);
      dst.push_back(d);
    }
    // One Copy per element type (a concatenation holds one type).
    Program program() const {
      Sequence seq;
      std::vector<bool> done(src.size(), false);
      for (std::size_t i = 0; i < src.size(); ++i) {
        if (done[i])
          continue;
        std::vector<Tensor> s, d;
        for (std::size_t j = i; j < src.size(); ++j)
          if (!done[j] && src[j].elementType() == src[i].elementType()) {
            s.push_back(src[j]);
            d.push_back(dst[j]);
            done[j] = true;
          }
        seq.add(Copy(concat(s), concat(d)));
      }
      return seq;
    }
  };

  // Every shard of `from`: its whole id trace into slot s of `to`'s shards' inRecv (or
  // ownTraces), or (recurrentStep) its buffers of this step into slot s of recRecv.
  // Step-major, `recurrentStep` and `previous` pick this step's buffers (outIds) or the
  // previous step's (prevIds) into recRecv.
  CopyList idCopies(const Layer &from, const Layer &to, bool recurrentStep, bool ownTraces,
                    bool previous = false) {
    CopyList c;
    const unsigned B = chunkBatch, T = spec.numSteps;
    const bool oneStep = recurrentStep || stepMajor;
    const std::size_t slot = std::size_t(oneStep ? 1 : T) * B * from.stride;
    for (const Shard &dst : to.shards)
      for (unsigned s = 0; s < from.shards.size(); ++s) {
        const Shard &src = from.shards[s];
        const Tensor &data = previous ? src.prevIds : oneStep ? src.outIds : src.idTrace;
        const Tensor &into = recurrentStep ? dst.recRecv : ownTraces ? dst.ownTraces : dst.inRecv;
        c.add(data, into.slice(s * slot, (s + 1) * slot));
      }
    return c;
  }

  // Every shard's dL/dI into block k of `to`'s shards' nextGrad ([T, B, n_k], whole
  // backward pass), or of ownGrad ([B, n_k], this step: the recurrence).
  CopyList gradCopies(const Layer &from, const Layer &to, bool recurrentStep) {
    CopyList c;
    const std::size_t rows =
        std::size_t(recurrentStep || stepMajor ? 1 : spec.numSteps) * chunkBatch;
    for (const Shard &src : from.shards)
      for (const Shard &dst : to.shards) {
        const Tensor &into = recurrentStep ? dst.ownGrad : dst.nextGrad;
        c.add(recurrentStep ? src.gradStep : src.gradOut,
              into.slice(rows * src.first, rows * (src.first + src.size)));
      }
    return c;
  }

  // The rows of `from`'s weights (or V) that belong to each shard of `to`, into that
  // shard's fan-out copy: [n_d, n_k] blocks, contiguous on both sides.
  CopyList fanoutCopies(const Layer &from, const Layer &to, bool recurrent) {
    CopyList c;
    for (const Shard &src : from.shards) {
      const Tensor &w = recurrent ? src.param[P_REC_WEIGHT] : src.param[P_WEIGHT];
      for (const Shard &dst : to.shards) {
        const Tensor &into = recurrent ? dst.ownWeights : dst.nextWeights;
        c.add(w.slice(std::size_t(dst.first) * src.size,
                      std::size_t(dst.first + dst.size) * src.size),
              into.slice(std::size_t(dst.size) * src.first,
                         std::size_t(dst.size) * (src.first + src.size)));
      }
    }
    return c;
  }

  // Every shard of a pushing layer `from`: its W_next.S blocks [T, B, n_k] into slot s of
  // the receiving shards' partialRecv.
  CopyList partialCopies(const Layer &from, const Layer &to) {
    CopyList c;
    const std::size_t rows = std::size_t(spec.numSteps) * chunkBatch;
    for (const Shard &dst : to.shards)
      for (unsigned s = 0; s < from.shards.size(); ++s)
        c.add(from.shards[s].nextCurrent.slice(rows * dst.first, rows * (dst.first + dst.size)),
              dst.partialRecv.slice(s * rows * dst.size, (s + 1) * rows * dst.size));
    return c;
  }

  // The reverse of fanoutCopies(to, from): a pushing layer's dL/dW_next blocks into the
  // weight gradients of the layer it feeds.
  CopyList pushedGradCopies(const Layer &from, const Layer &to) {
    CopyList c;
    for (const Shard &dst : to.shards)
      for (const Shard &src : from.shards)
        c.add(src.nextGradWeights.slice(std::size_t(src.size) * dst.first,
                                        std::size_t(src.size) * (dst.first + dst.size)),
              dst.grad[P_WEIGHT].slice(std::size_t(src.first) * dst.size,
                                       std::size_t(src.first + src.size) * dst.size));
    return c;
  }

  // Schedules, fastest first. Layer-major: a layer runs all T steps, then sends its whole
  // trace on; few, fat phases, but a tile holds T steps of its input layer's id buffers.
  // Step-major (SPEC's "per step t, per layer"): a BSP round per layer and step; tiles hold
  // one step of their inputs and the backward re-sends each step's ids.
  // Within a schedule: spread every layer over as many tiles as it has neurons (up to all);
  // if that does not fit, halve the tiles per layer until it does (a receiving tile holds
  // the buffers of every shard of the previous layer, so tiny shards cost memory too).
  // Last resort, when no schedule and spread fits the whole batch: run the batch in chunks
  // of samples (2, 3, 4, ... chunks, dividing the batch), one after the other, each chunk a
  // whole forward and backward pass on per-sample tensors of one chunk's size; the weight
  // gradients are summed over the chunks and the optimiser steps once. The result is the
  // whole batch's (the loss is a weighted sum over samples), in float32 sums of another order.
  void build() {
    device = makeDevice();
    stepMajorError.clear();
    const unsigned B = spec.batchSize;
    if (fits(1))
      return;
    // One sample at a time needs the least memory: if that does not fit, no chunking does,
    // and a network that can never fit fails after two searches, not one per chunk count.
    if (B > 1 && fits(B)) {
      for (unsigned numChunks = 2; numChunks < B; ++numChunks) // the fewest chunks that fit
        if (B % numChunks == 0 && fits(numChunks))
          return;
      if (!fits(B))
        throw std::logic_error("popsnn: a mapping that fitted does not fit any more");
      return;
    }
    throw NetworkDoesNotFit(stepMajorError + " (with a step-major schedule; fewer, larger "
                                             "shards per layer do not fit either, nor the "
                                             "batch run in chunks of down to 1 sample)");
  }

  // Builds the first schedule and spread that fit with the batch in `numChunks` chunks;
  // false if none does.
  std::string stepMajorError; // the whole batch's, step-major, all tiles: for the error
  bool fits(unsigned numChunks) {
    for (bool major : {false, true})
      for (unsigned spread = 1;; spread *= 2) {
        try {
          stepMajor = major;
          chunks = numChunks;
          chunkBatch = spec.batchSize / numChunks;
          buildGraph(spread);
          return true;
        } catch (const NetworkDoesNotFit &e) {
          if (major && numChunks == 1 && stepMajorError.empty())
            stepMajorError = e.what();
          bool fewest = true;
          for (const auto &layer : layers)
            fewest = fewest && layer.shards.size() == 1;
          if (fewest)
            break;
        }
      }
    return false;
  }

  void buildGraph(unsigned spread) {
    engine.reset();
    dummies.clear();
    graph = std::make_unique<Graph>(device.getTarget());
    const std::string codelets = codeletsPath();
    graph->addCodelets(StringRef(codelets));
    plan(spread);
    const unsigned B = spec.batchSize, T = spec.numSteps;
    const unsigned L = layers.size();
    for (auto &layer : layers)
      createShardTensors(layer);

    // Host-facing tensors and the loss on the last tile, the one with the fewest shards.
    lossTile = numTiles - 1;
    const unsigned nIn0 = spec.layers[0].inputs;
    const std::size_t xSize =
        std::size_t(spec.input == InputMode::Direct ? 1 : T) * B * nIn0;
    const int lossTag = int(L);
    // The batch lands spread over all tiles, so that its broadcast to the first layer's
    // tiles is sent by many tiles, not queued behind one.
    xHost = graph->addVariable(FLOAT, {xSize}, "x");
    {
      const std::size_t chunk = (xSize + numTiles - 1) / numTiles;
      Graph::TileToTensorMapping mapping(numTiles);
      for (unsigned tile = 0; tile < numTiles && tile * chunk < xSize; ++tile) {
        const std::size_t end = std::min(xSize, (tile + 1) * chunk);
        mapping[tile].push_back(Interval(tile * chunk, end));
        tileLayerBytes[tile][lossTag] += (end - tile * chunk) * sizeof(float);
      }
      graph->setTileMapping(xHost, mapping);
      graph->setInitialValue(xHost, 0.0f);
    }
    learningRate = graph->addVariable(FLOAT, {numTiles}, "learning_rate");
    for (unsigned tile = 0; tile < numTiles; ++tile) {
      graph->setTileMapping(learningRate[tile], tile);
      tileLayerBytes[tile][lossTag] += sizeof(float);
    }
    graph->setInitialValue(learningRate, float(spec.optimizer.lr));
    const unsigned Bc = chunkBatch;
    const std::size_t outSize = std::size_t(T) * Bc * numOutputs;
    {
      // A group per 16 tiles, up to one per sample; tiles from the last one down.
      const bool ipu = graph->getTarget().getTargetType() != TargetType::CPU;
      const unsigned numGroups = ipu ? std::min(Bc, std::max(1u, numTiles / 16)) : 1u;
      lossGroups.clear();
      for (unsigned g = 0; g < numGroups; ++g)
        lossGroups.push_back({Bc * g / numGroups, Bc * (g + 1) / numGroups, lossTile - g});
    }
    // A tensor of `perSample` elements per sample of a chunk (per entry of `perGroup`),
    // each group's block on its tile.
    auto grouped = [&](const Type &type, std::size_t perSample, std::size_t perGroup,
                       const std::string &name) {
      const std::size_t size = perSample * Bc + perGroup * lossGroups.size();
      Tensor t = graph->addVariable(type, {size}, name);
      std::size_t at = 0;
      for (const LossGroup &g : lossGroups) {
        const std::size_t n = perSample * (g.last - g.first) + perGroup;
        graph->setTileMapping(t.slice(at, at + n), g.tile);
        tileLayerBytes[g.tile][lossTag] += n * graph->getTarget().getTypeSize(type);
        at += n;
      }
      if (type == FLOAT)
        graph->setInitialValue(t, 0.0f);
      else
        graph->setInitialValue(t, 0);
      return t;
    };
    // Unchunked, the host writes labels and weights straight into the groups' blocks.
    labels = chunks > 1 ? zeros(INT, B, lossTile, "labels", lossTag)
                        : grouped(INT, 1, 0, "labels");
    sampleWeights = chunks > 1 ? zeros(FLOAT, B, lossTile, "sample_weights", lossTag)
                               : grouped(FLOAT, 1, 0, "sample_weights");
    lossValue = zeros(FLOAT, 1, lossTile, "loss", lossTag);
    if (chunks > 1) {
      labelsChunk = grouped(INT, 1, 0, "labels_chunk");
      weightsChunk = grouped(FLOAT, 1, 0, "sample_weights_chunk");
      lossTotal = zeros(FLOAT, 1, lossTile, "loss_total", lossTag);
      spikesAll = zeros(FLOAT, outSize * chunks, lossTile, "spikes_all", lossTag);
    }
    const std::size_t record = std::size_t(T) * numOutputs; // per sample
    gatheredS = grouped(FLOAT, record, 0, "gathered_spikes");
    gatheredU = grouped(FLOAT, record, 0, "gathered_mem");
    gradS = grouped(FLOAT, record, 0, "loss_grad_spikes");
    gradU = grouped(FLOAT, record, 0, "loss_grad_mem");
    lossScratch = grouped(FLOAT, 0, 2 * numOutputs, "loss_scratch");
    if (lossGroups.size() > 1) {
      lossParts = grouped(FLOAT, 0, 1, "loss_parts");
      lossPartsLocal = zeros(FLOAT, lossGroups.size(), lossTile, "loss_parts_local", lossTag);
    }
    checkMemory();

    graph->createHostWrite("x", xHost);
    graph->createHostWrite("labels", labels);
    graph->createHostWrite("learning_rate", learningRate);
    graph->createHostWrite("sample_weights", sampleWeights);
    graph->createHostRead("loss", chunks > 1 ? lossTotal : lossValue);
    graph->createHostRead("spikes", chunks > 1 ? spikesAll : gatheredS);

    // ---- compute sets
    ComputeSet csDirect = graph->addComputeSet("direct_current");
    ComputeSet csDirectGrad = graph->addComputeSet("direct_weight_grad");
    ComputeSet csLoss = graph->addComputeSet("loss");
    ComputeSet csOptim = graph->addComputeSet("optimiser");
    ComputeSet csAccum = graph->addComputeSet("accumulate_chunk_gradients");
    std::vector<ComputeSet> csForward, csBackward;
    for (auto &layer : layers) {
      const std::string tag = "layer" + std::to_string(layer.index);
      csForward.push_back(graph->addComputeSet(tag + "/forward"));
      csBackward.push_back(graph->addComputeSet(tag + "/backward"));
      addLayerVertices(layer, csDirect, csForward.back(), csBackward.back(), csDirectGrad,
                       csOptim);
    }
    // The groups' loss parts are summed beside the output layer's first backward phase.
    addLossVertex(csLoss, csBackward.back());
    // Chunks: the first chunk's gradients (and loss) are copied into the totals, the others'
    // added by AccumulateGrad vertices on the owning tiles.
    CopyList firstChunkGrads;
    if (chunks > 1) {
      auto accumulate = [&](const Tensor &total, const Tensor &part, unsigned tile) {
        VertexRef v = graph->addVertex(csAccum, "AccumulateGrad");
        graph->connect(v["total"], total);
        graph->connect(v["part"], part);
        graph->setTileMapping(v, tile);
        VertexWork w;
        w.elements = total.numElements();
        setEstimate(v, "AccumulateGrad", w);
        firstChunkGrads.add(part, total);
      };
      for (auto &layer : layers)
        for (auto &sh : layer.shards)
          for (unsigned p = 0; p < 4; ++p)
            if (layer.hasParam(p))
              accumulate(sh.gradTotal[p], sh.grad[p], sh.tile);
      accumulate(lossTotal, lossValue, lossTile);
    }

    // ---- exchanges
    // The batch onto the first layer's tiles, chunk by chunk: x is [B, N] (direct) or
    // [T, B, N], a chunk's samples one contiguous run per step.
    auto xCopyOf = [&](unsigned m) {
      CopyList c;
      const std::size_t row = std::size_t(nIn0) * Bc;
      const unsigned pieces = spec.input == InputMode::Direct ? 1 : T;
      for (const Shard &sh : layers[0].shards) {
        if (chunks == 1) {
          c.add(xHost, sh.xLocal);
          continue;
        }
        for (unsigned t = 0; t < pieces; ++t) {
          const std::size_t from = (std::size_t(t) * chunks + m) * row;
          c.add(xHost.slice(from, from + row), sh.xLocal.slice(t * row, (t + 1) * row));
        }
      }
      return c;
    };
    CopyList fanout;
    for (unsigned l = 0; l < L; ++l) {
      std::vector<CopyList> parts;
      if (layers[l].a2a)
        parts.push_back(fanoutCopies(layers[l], layers[l], true));
      if (l > 0)
        parts.push_back(fanoutCopies(layers[l], layers[l - 1], false));
      for (auto &c : parts) {
        fanout.src.insert(fanout.src.end(), c.src.begin(), c.src.end());
        fanout.dst.insert(fanout.dst.end(), c.dst.begin(), c.dst.end());
      }
    }
    CopyList gather, scatterGrad;
    if (lossGroups.size() == 1) {
      for (const Shard &sh : layers.back().shards) {
        const std::size_t lo = std::size_t(T) * Bc * sh.first,
                          hi = lo + std::size_t(T) * Bc * sh.size;
        gather.add(sh.recSpikes, gatheredS.slice(lo, hi));
        gather.add(sh.recMem, gatheredU.slice(lo, hi));
        scatterGrad.add(gradS.slice(lo, hi), sh.lossGradS);
        scatterGrad.add(gradU.slice(lo, hi), sh.lossGradU);
      }
    } else {
      // Group g's samples of step t: one run of a shard's [T, Bc, n] record, into the
      // group's block laid out [shard][T][Bg][n].
      for (const LossGroup &g : lossGroups) {
        const std::size_t Bg = g.last - g.first, base = record * g.first;
        for (const Shard &sh : layers.back().shards)
          for (unsigned t = 0; t < T; ++t) {
            const std::size_t from = (std::size_t(t) * Bc + g.first) * sh.size;
            const std::size_t to = base + std::size_t(T) * Bg * sh.first + t * Bg * sh.size;
            const std::size_t len = Bg * sh.size;
            gather.add(sh.recSpikes.slice(from, from + len), gatheredS.slice(to, to + len));
            gather.add(sh.recMem.slice(from, from + len), gatheredU.slice(to, to + len));
            scatterGrad.add(gradS.slice(to, to + len), sh.lossGradS.slice(from, from + len));
            scatterGrad.add(gradU.slice(to, to + len), sh.lossGradU.slice(from, from + len));
          }
      }
      scatterGrad.add(lossParts, lossPartsLocal);
    }

    // ---- programs: one exchange phase after each compute phase, its copies merged.
    auto merged = [](std::vector<CopyList> lists) {
      CopyList all;
      for (auto &c : lists) {
        all.src.insert(all.src.end(), c.src.begin(), c.src.end());
        all.dst.insert(all.dst.end(), c.dst.begin(), c.dst.end());
      }
      return all.program();
    };
    // One forward pass over the samples on the tiles (the whole batch, or a chunk), after
    // the batch's copy onto the first layer's tiles.
    Sequence forward;
    if (spec.input == InputMode::Direct)
      forward.add(Execute(csDirect));
    if (stepMajor) {
      Sequence oneStep;
      for (unsigned l = 0; l < L; ++l) {
        oneStep.add(Execute(csForward[l]));
        std::vector<CopyList> out;
        if (l + 1 < L)
          out.push_back(idCopies(layers[l], layers[l + 1], false, false));
        if (layers[l].a2a)
          out.push_back(idCopies(layers[l], layers[l], true, false));
        oneStep.add(merged(out));
      }
      forward.add(Repeat(T, oneStep));
    } else {
      for (unsigned l = 0; l < L; ++l) {
        if (layers[l].a2a) {
          forward.add(Repeat(T, Sequence{Execute(csForward[l]),
                                         idCopies(layers[l], layers[l], true, false).program()}));
        } else {
          forward.add(Execute(csForward[l]));
        }
        std::vector<CopyList> out;
        if (layers[l].push)
          out.push_back(partialCopies(layers[l], layers[l + 1]));
        else if (l + 1 < L)
          out.push_back(idCopies(layers[l], layers[l + 1], false, false));
        if (layers[l].a2a)
          out.push_back(idCopies(layers[l], layers[l], false, true));
        forward.add(merged(out));
      }
    }
    forward.add(gather.program());

    Sequence backward;
    backward.add(Execute(csLoss));
    backward.add(scatterGrad.program());
    if (stepMajor) {
      // Each step starts with the id buffers its layers need (step t for the layer fed,
      // t-1 for a recurrence), left there by the previous step's vertices or the forward.
      Sequence oneStep;
      std::vector<CopyList> ids;
      for (unsigned l = 0; l < L; ++l) {
        if (l + 1 < L)
          ids.push_back(idCopies(layers[l], layers[l + 1], false, false));
        if (layers[l].a2a)
          ids.push_back(idCopies(layers[l], layers[l], true, false, true));
      }
      oneStep.add(merged(ids));
      for (unsigned l = L; l-- > 0;) {
        oneStep.add(Execute(csBackward[l]));
        std::vector<CopyList> grads;
        if (l > 0)
          grads.push_back(gradCopies(layers[l], layers[l - 1], false));
        if (layers[l].a2a)
          grads.push_back(gradCopies(layers[l], layers[l], true));
        oneStep.add(merged(grads));
      }
      backward.add(Repeat(T, oneStep));
    } else {
      for (unsigned l = L; l-- > 0;) {
        if (layers[l].a2a) {
          backward.add(Repeat(T, Sequence{Execute(csBackward[l]),
                                          gradCopies(layers[l], layers[l], true).program()}));
        } else {
          backward.add(Execute(csBackward[l]));
        }
        std::vector<CopyList> out;
        if (layers[l].push)
          out.push_back(pushedGradCopies(layers[l], layers[l + 1]));
        if (l > 0)
          out.push_back(gradCopies(layers[l], layers[l - 1], false));
        backward.add(merged(out));
      }
    }
    if (spec.input == InputMode::Direct)
      backward.add(Execute(csDirectGrad));
    // The weights onto the tiles that use them beside their owners' (pushing layers in the
    // forward, dL/dS in the backward) with the first (chunk of the) batch: unchanged until
    // the optimiser step.
    auto xIn = [&](unsigned m) {
      return m == 0 ? merged({fanout, xCopyOf(0)}) : xCopyOf(m).program();
    };
    std::vector<Program> programs;
    if (chunks == 1) {
      // 0 forward, 1 loss + backward + optimiser, 2 loss + backward.
      programs = {Sequence{xIn(0), forward}, Sequence{backward, Execute(csOptim)}, backward};
    } else {
      // 0 forward of every chunk, 1 forward + backward of every chunk (the gradients summed),
      // 2 the optimiser step.
      Sequence forwardAll, gradientsAll;
      for (unsigned m = 0; m < chunks; ++m) {
        CopyList keep; // the chunk's output spikes and overflow counters, on their tiles
        keep.add(gatheredS, spikesAll.slice(m * outSize, (m + 1) * outSize));
        for (auto &layer : layers)
          for (auto &sh : layer.shards)
            keep.add(sh.overflow, sh.overflowAll.slice(m * codes::OVERFLOW_FIELDS,
                                                       (m + 1) * codes::OVERFLOW_FIELDS));
        Sequence chunkForward{xIn(m), forward, keep.program()};
        CopyList chunkLabels;
        chunkLabels.add(labels.slice(m * Bc, (m + 1) * Bc), labelsChunk);
        chunkLabels.add(sampleWeights.slice(m * Bc, (m + 1) * Bc), weightsChunk);
        forwardAll.add(chunkForward);
        gradientsAll.add(chunkForward);
        gradientsAll.add(chunkLabels.program());
        gradientsAll.add(backward);
        gradientsAll.add(m == 0 ? firstChunkGrads.program() : Program(Execute(csAccum)));
      }
      programs = {forwardAll, gradientsAll, Sequence{Execute(csOptim)}};
    }

    // ---- host access to parameters, gradients, optimiser state, overflow counters
    for (auto &layer : layers)
      for (unsigned k = 0; k < layer.shards.size(); ++k) {
        Shard &sh = layer.shards[k];
        const std::string id = std::to_string(layer.index) + "/" + std::to_string(k);
        graph->createHostRead("overflow" + id, chunks > 1 ? sh.overflowAll : sh.overflow);
        for (unsigned p = 0; p < 4; ++p) {
          if (!layer.hasParam(p))
            continue;
          const std::string pid = id + "/" + std::to_string(p);
          graph->createHostRead("param_r" + pid, sh.param[p]);
          graph->createHostWrite("param_w" + pid, sh.param[p]);
          graph->createHostRead("grad" + pid, chunks > 1 ? sh.gradTotal[p] : sh.grad[p]);
          if (sh.opt1[p].valid()) {
            graph->createHostRead("opt1_r" + pid, sh.opt1[p]);
            graph->createHostWrite("opt1_w" + pid, sh.opt1[p]);
          }
          if (sh.opt2[p].valid()) {
            graph->createHostRead("opt2_r" + pid, sh.opt2[p]);
            graph->createHostWrite("opt2_w" + pid, sh.opt2[p]);
          }
          graph->createHostRead("count_r" + pid, sh.optCount[p]);
          graph->createHostWrite("count_w" + pid, sh.optCount[p]);
        }
      }

    try {
      engine = std::make_unique<Engine>(*graph, programs);
    } catch (const graph_memory_allocation_error &e) {
      // Vertex state and exchange buffers come on top of the tensors checkMemory() counts.
      throw NetworkDoesNotFit(std::string("the network does not fit: ") + e.what() +
                              ". Fix: more tiles (tiles_per_ipu, num_ipus), a smaller batch (" +
                              std::to_string(spec.batchSize) + ") or fewer steps (" +
                              std::to_string(spec.numSteps) + "), or a lower max_activity");
    }
    engine->load(device);
    writeLearningRate();
  }

  // spec.optimizer.lr onto every tile (float, as the optimiser vertices compute with it).
  void writeLearningRate() {
    std::vector<float> values(numTiles, float(spec.optimizer.lr));
    engine->writeTensor("learning_rate", values.data(), values.data() + values.size());
  }

  void setLearningRate(double lr) {
    if (!std::isfinite(lr) || lr < 0)
      invalid("the learning rate must be a finite number >= 0, got " + str(lr));
    spec.optimizer.lr = lr;
    writeLearningRate();
  }

  void addLayerVertices(Layer &layer, ComputeSet csDirect, ComputeSet csForward,
                        ComputeSet csBackward, ComputeSet csDirectGrad, ComputeSet csOptim) {
    const unsigned B = chunkBatch, T = spec.numSteps;
    const unsigned l = layer.index, L = layers.size();
    const LayerSpec &s = layer.spec;
    const unsigned nIn = s.inputs;
    const Layer *prev = l > 0 ? &layers[l - 1] : nullptr;
    const Layer *next = l + 1 < L ? &layers[l + 1] : nullptr;
    const unsigned numSrc = prev ? prev->shards.size() : 0;
    const unsigned inStride = prev ? prev->stride : 0;
    const unsigned numOwn = layer.shards.size();
    const unsigned surrogate = unsigned(s.surrogate); // enum orders match codes::Surrogate
    const unsigned rule = unsigned(s.sparseRule);     // and codes::Rule
    const unsigned reset = unsigned(s.reset);         // and codes::Reset
    const unsigned prevCap = prev ? prev->stride - codes::BUFFER_HEADER : 0;
    const unsigned ownCap = layer.stride - codes::BUFFER_HEADER;

    for (Shard &sh : layer.shards) {
      const unsigned tile = sh.tile, n = sh.size;
      const Tensor fIn = dummyIn(FLOAT, tile), iIn = dummyIn(INT, tile);
      // The shard's geometry and neuron model: the same constants on its forward and
      // backward vertices.
      auto setShardFields = [&](VertexRef v) {
        setField(v, "pushNext", unsigned(layer.push));
        setField(v, "batch", B);
        setField(v, "numNeurons", n);
        setField(v, "numSteps", T);
        setField(v, "numInputs", nIn);
        setField(v, "numSrc", numSrc);
        setField(v, "inStride", inStride);
        setField(v, "numOwn", numOwn);
        setField(v, "stride", layer.stride);
        setField(v, "offset", sh.first);
        setField(v, "neuron", neuronCode(s));
        setField(v, "reset", reset);
        setField(v, "inputMode", layer.inputMode);
      };
      VertexWork work;
      work.batch = B;
      work.neurons = n;
      work.inputs = nIn;
      work.steps = T;
      work.activeInputs = layer.inputMode == codes::INPUT_SPIKE_IDS         ? numSrc * prevCap
                          : layer.inputMode == codes::INPUT_PARTIAL_CURRENT ? numSrc
                          : layer.inputMode == codes::INPUT_DENSE_STEPS     ? nIn
                                                                            : 0;
      work.spikes = sh.capacity;
      work.pushOutputs = layer.push ? next->spec.outputs : 0;
      work.activeCandidates = sh.capacity + (layer.a2a ? numOwn * ownCap : 0);
      work.stepsPerCall = layer.a2a || stepMajor ? 1u : T;

      if (layer.inputMode == codes::INPUT_DIRECT) {
        // On an IPU a tile's vertices share its worker threads: x.W over one vertex per
        // worker, by samples (DirectCurrent) and by inputs (DirectWeightGrad); the same
        // arithmetic per entry either way. The cpu device runs a tile's vertices in turn:
        // one of each there.
        const unsigned workers =
            graph->getTarget().getTargetType() == TargetType::CPU
                ? 1u
                : std::max(1u, graph->getTarget().getNumWorkerContexts());
        const unsigned sampleParts = std::min(workers, B);
        for (unsigned part = 0; part < sampleParts; ++part) {
          const unsigned b0 = B * part / sampleParts, b1 = B * (part + 1) / sampleParts;
          VertexRef v = graph->addVertex(csDirect, "DirectCurrent");
          graph->connect(v["x"], sh.xLocal.slice(std::size_t(b0) * nIn, std::size_t(b1) * nIn));
          graph->connect(v["weights"], sh.param[P_WEIGHT]);
          graph->connect(v["bias"], sh.param[P_BIAS]);
          graph->connect(v["current"], sh.current.slice(b0 * n, b1 * n));
          graph->connect(v["nzIndex"], var(UNSIGNED_INT, nIn, tile, "nz_index", int(l)));
          graph->connect(v["nzValue"], var(FLOAT, nIn, tile, "nz_value", int(l)));
          setField(v, "batch", b1 - b0);
          setField(v, "numInputs", nIn);
          setField(v, "numNeurons", n);
          graph->setTileMapping(v, tile);
          VertexWork dw = work;
          dw.batch = b1 - b0;
          setEstimate(v, "DirectCurrent", dw);
        }
        const unsigned inputParts = std::min(workers, nIn);
        for (unsigned part = 0; part < inputParts; ++part) {
          const unsigned i0 = nIn * part / inputParts, i1 = nIn * (part + 1) / inputParts;
          VertexRef g = graph->addVertex(csDirectGrad, "DirectWeightGrad");
          graph->connect(g["x"], sh.xLocal);
          graph->connect(g["currentGradSum"], sh.currentGradSum);
          graph->connect(g["gradWeights"],
                         sh.grad[P_WEIGHT].slice(std::size_t(i0) * n, std::size_t(i1) * n));
          // DirectWeightGrad::GROUP inputs' lists of samples.
          graph->connect(g["nzIndex"], var(UNSIGNED_INT, 16 * B, tile, "nz_samples", int(l)));
          graph->connect(g["nzValue"], var(FLOAT, 16 * B, tile, "nz_sample_values", int(l)));
          setField(g, "batch", B);
          setField(g, "numInputs", i1 - i0);
          setField(g, "numNeurons", n);
          setField(g, "xStride", nIn);
          setField(g, "firstInput", i0);
          graph->setTileMapping(g, tile);
          VertexWork gw = work;
          gw.inputs = i1 - i0;
          setEstimate(g, "DirectWeightGrad", gw);
        }
      }

      // Forward.
      {
        VertexRef v = graph->addVertex(csForward, "LifForward");
        graph->connect(v["step"], sh.stepForward[0]);
        graph->connect(v["current"], orElse(sh.current, dummyOut(FLOAT, tile)));
        graph->connect(v["denseIn"],
                       layer.inputMode == codes::INPUT_DENSE_STEPS ? sh.xLocal : fIn);
        graph->connect(v["inIds"], orElse(sh.inRecv, iIn));
        graph->connect(v["weights"], sh.param[P_WEIGHT]);
        graph->connect(v["bias"], sh.param[P_BIAS]);
        graph->connect(v["recIds"], orElse(sh.recRecv, iIn));
        graph->connect(v["recWeights"], orElse(sh.param[P_REC_WEIGHT], fIn));
        graph->connect(v["recBias"], orElse(sh.param[P_REC_BIAS], fIn));
        graph->connect(v["mem"], sh.mem);
        graph->connect(v["syn"], orElse(sh.syn, dummyOut(FLOAT, tile)));
        graph->connect(v["prevSpikes"], sh.prevSpikes);
        graph->connect(v["scratch"], sh.fwdScratch);
        graph->connect(v["surrTrace"], orElse(sh.surrTrace, dummyOut(FLOAT, tile)));
        graph->connect(v["surrValues"], orElse(sh.surrValues, dummyOut(FLOAT, tile)));
        graph->connect(v["idTrace"], sh.idTrace);
        graph->connect(v["outIds"], orElse(sh.outIds, dummyOut(INT, tile)));
        graph->connect(v["prevIds"], orElse(sh.prevIds, dummyOut(INT, tile)));
        graph->connect(v["recSpikes"], orElse(sh.recSpikes, dummyOut(FLOAT, tile)));
        graph->connect(v["recMem"], orElse(sh.recMem, dummyOut(FLOAT, tile)));
        graph->connect(v["overflow"], sh.overflow);
        graph->connect(v["partialIn"], orElse(sh.partialRecv, fIn));
        graph->connect(v["nextWeights"], layer.push ? sh.nextWeights : fIn);
        graph->connect(v["nextCurrent"], orElse(sh.nextCurrent, dummyOut(FLOAT, tile)));
        graph->connect(v["nextRows"], orElse(sh.nextRows, dummyOut(FLOAT, tile)));
        setShardFields(v);
        setField(v, "nextShardSize", next ? next->shardSize : 1u);
        setField(v, "nextLayerSize", next ? next->spec.outputs : 0u);
        setField(v, "capacity", sh.capacity);
        setField(v, "surrogate", surrogate);
        setField(v, "rule", rule);
        setField(v, "record", unsigned(layer.isOutput));
        setField(v, "stepsPerCall", layer.a2a || stepMajor ? 1u : T);
        setField(v, "stepMajor", unsigned(stepMajor));
        setField(v, "publishStep", unsigned(sh.outIds.valid()));
        setField(v, "beta", s.beta);
        setField(v, "alpha", s.alpha);
        setField(v, "threshold", s.threshold);
        setField(v, "surrogateParam", s.surrogateParam);
        setField(v, "ruleValue", s.sparseValue);
        graph->setTileMapping(v, tile);
        VertexWork fw = work;
        if (layer.inputMode == codes::INPUT_PARTIAL_CURRENT) { // summed a [B, n] row at a time
          fw.activeInputs = 0;
          fw.partialSources = numSrc;
        }
        setEstimate(v, "LifForward", fw);
      }

      // Backward.
      {
        VertexRef v = graph->addVertex(csBackward, "LifBackward");
        graph->connect(v["step"], sh.stepBackward[0]);
        graph->connect(v["lossGradSpikes"], orElse(sh.lossGradS, fIn));
        graph->connect(v["lossGradMem"], orElse(sh.lossGradU, fIn));
        graph->connect(v["nextGrad"], orElse(sh.nextGrad, fIn));
        graph->connect(v["nextWeights"], orElse(sh.nextWeights, fIn));
        graph->connect(v["nextWeightsT"], orElse(sh.nextWeightsT, dummyOut(FLOAT, tile)));
        graph->connect(v["ownGrad"], orElse(sh.ownGrad, fIn));
        graph->connect(v["ownWeights"], orElse(sh.ownWeights, fIn));
        graph->connect(v["ownWeightsT"], orElse(sh.ownWeightsT, dummyOut(FLOAT, tile)));
        graph->connect(v["surrTrace"], orElse(sh.surrTrace, fIn));
        graph->connect(v["surrValues"], orElse(sh.surrValues, fIn));
        graph->connect(v["idTrace"], sh.idTrace);
        graph->connect(v["inIds"], orElse(sh.inRecv, iIn));
        graph->connect(v["denseIn"],
                       layer.inputMode == codes::INPUT_DENSE_STEPS ? sh.xLocal : fIn);
        graph->connect(v["recIds"], orElse(stepMajor ? sh.recRecv : sh.ownTraces, iIn));
        graph->connect(v["weights"], sh.param[P_WEIGHT]);
        graph->connect(v["recWeights"], orElse(sh.param[P_REC_WEIGHT], fIn));
        graph->connect(v["gradMem"], sh.gradMem);
        graph->connect(v["gradSyn"], orElse(sh.gradSyn, dummyOut(FLOAT, tile)));
        graph->connect(v["gradWeights"], sh.grad[P_WEIGHT]);
        graph->connect(v["gradBias"], sh.grad[P_BIAS]);
        graph->connect(v["gradRecWeights"],
                       orElse(sh.grad[P_REC_WEIGHT], dummyOut(FLOAT, tile)));
        graph->connect(v["gradRecBias"], orElse(sh.grad[P_REC_BIAS], dummyOut(FLOAT, tile)));
        graph->connect(v["currentGradSum"], orElse(sh.currentGradSum, dummyOut(FLOAT, tile)));
        graph->connect(v["gradOut"], orElse(sh.gradOut, dummyOut(FLOAT, tile)));
        graph->connect(v["gradStep"], orElse(sh.gradStep, dummyOut(FLOAT, tile)));
        // Step-major: the backward re-sends each step's ids (through the forward's buffers).
        graph->connect(v["outIds"], stepMajor && next ? sh.outIds : dummyOut(INT, tile));
        graph->connect(v["prevIds"], orElse(sh.prevIds, dummyOut(INT, tile)));
        graph->connect(v["scratch"], sh.bwdScratch);
        graph->connect(v["nextGradWeights"],
                       orElse(sh.nextGradWeights, dummyOut(FLOAT, tile)));
        graph->connect(v["nextGradRows"], orElse(sh.nextGradRows, dummyOut(FLOAT, tile)));
        setShardFields(v);
        setField(v, "isOutput", unsigned(layer.isOutput));
        setField(v, "dense", unsigned(s.sparseRule == SparseRule::None));
        setField(v, "publishGrad", unsigned(sh.gradOut.valid()));
        setField(v, "stepsPerCall", layer.a2a || stepMajor ? 1u : T);
        setField(v, "stepMajor", unsigned(stepMajor));
        setField(v, "publishIds", unsigned(stepMajor && next != nullptr));
        setField(v, "nextShardSize", next ? next->shardSize : 1u);
        setField(v, "nextLayerSize", next ? next->spec.outputs : 0u);
        setField(v, "ownShardSize", layer.shardSize);
        setField(v, "ownLayerSize", s.outputs);
        setField(v, "beta", s.beta);
        setField(v, "alpha", s.alpha);
        graph->setTileMapping(v, tile);
        VertexWork bw = work;
        if (layer.inputMode == codes::INPUT_PARTIAL_CURRENT) // its dL/dW comes from the pushers
          bw.activeInputs = 0;
        // dL/dS entries computed: all of the shard without a rule, else its candidates.
        const unsigned candidates = s.sparseRule == SparseRule::None ? n : sh.capacity;
        bw.activeCandidates = (next ? candidates * next->spec.outputs / std::max(1u, n) : 0) +
                              (layer.a2a ? candidates * s.outputs / std::max(1u, n) : 0);
        setEstimate(v, "LifBackward", bw);
      }

      // Optimiser.
      const OptimizerSpec &o = spec.optimizer;
      for (unsigned p = 0; p < 4; ++p) {
        if (!layer.hasParam(p))
          continue;
        VertexWork ow;
        ow.elements = sh.param[p].numElements();
        if (o.kind == OptimizerKind::SGD) {
          VertexRef v = graph->addVertex(csOptim, "SgdStep");
          graph->connect(v["param"], sh.param[p]);
          graph->connect(v["grad"], chunks > 1 ? sh.gradTotal[p] : sh.grad[p]);
          graph->connect(v["momentumBuffer"], orElse(sh.opt1[p], dummyOut(FLOAT, tile)));
          graph->connect(v["count"], sh.optCount[p][0]);
          graph->connect(v["lr"], learningRate[tile]);
          setField(v, "momentum", float(o.momentum));
          setField(v, "oneMinusDampening", float(1.0 - o.dampening));
          setField(v, "weightDecay", float(o.weightDecay));
          setField(v, "nesterov", unsigned(o.nesterov));
          graph->setTileMapping(v, tile);
          setEstimate(v, "SgdStep", ow);
        } else {
          VertexRef v = graph->addVertex(csOptim, "AdamStep");
          graph->connect(v["param"], sh.param[p]);
          graph->connect(v["grad"], chunks > 1 ? sh.gradTotal[p] : sh.grad[p]);
          graph->connect(v["expAvg"], sh.opt1[p]);
          graph->connect(v["expAvgSq"], sh.opt2[p]);
          graph->connect(v["count"], sh.optCount[p][0]);
          graph->connect(v["lr"], learningRate[tile]);
          setField(v, "beta1", float(o.beta1));
          setField(v, "beta2", float(o.beta2));
          setField(v, "oneMinusBeta1", float(1.0 - o.beta1));
          setField(v, "oneMinusBeta2", float(1.0 - o.beta2));
          setField(v, "eps", float(o.eps));
          setField(v, "weightDecay", float(o.weightDecay));
          setField(v, "decoupled", unsigned(o.kind == OptimizerKind::AdamW));
          graph->setTileMapping(v, tile);
          setEstimate(v, "AdamStep", ow);
        }
      }
    }
  }

  void addLossVertex(ComputeSet cs, ComputeSet csSum) {
    const unsigned T = spec.numSteps;
    const std::size_t record = std::size_t(T) * numOutputs;
    for (unsigned k = 0; k < lossGroups.size(); ++k) {
      const LossGroup &g = lossGroups[k];
      const unsigned Bg = g.last - g.first;
      const Tensor &lab = chunks > 1 ? labelsChunk : labels;
      const Tensor &wts = chunks > 1 ? weightsChunk : sampleWeights;
      VertexRef v = graph->addVertex(cs, "OutputLoss");
      graph->connect(v["spikes"], gatheredS.slice(record * g.first, record * g.last));
      graph->connect(v["membranes"], gatheredU.slice(record * g.first, record * g.last));
      graph->connect(v["labels"], lab.slice(g.first, g.last));
      graph->connect(v["sampleWeights"], wts.slice(g.first, g.last));
      graph->connect(v["gradSpikes"], gradS.slice(record * g.first, record * g.last));
      graph->connect(v["gradMembranes"], gradU.slice(record * g.first, record * g.last));
      graph->connect(v["loss"], lossGroups.size() > 1 ? lossParts[k] : lossValue[0]);
      graph->connect(v["scratch"],
                     lossScratch.slice(2 * numOutputs * k, 2 * numOutputs * (k + 1)));
      setLossFields(v, Bg);
      graph->setTileMapping(v, g.tile);
    }
    if (lossGroups.size() > 1) {
      VertexRef v = graph->addVertex(csSum, "LossSum");
      graph->connect(v["parts"], lossPartsLocal);
      graph->connect(v["loss"], lossValue[0]);
      graph->setTileMapping(v, lossTile);
      VertexWork w;
      w.elements = lossGroups.size();
      setEstimate(v, "LossSum", w);
    }
  }

  void setLossFields(VertexRef v, unsigned B) {
    const unsigned T = spec.numSteps;
    const LossSpec &ls = spec.loss;
    float on = ls.onTarget, off = ls.offTarget;
    if (ls.kind == LossKind::MseCount) {
      // Target spike counts as popsnn.losses.mse_count_loss (snnTorch): int() truncation,
      // times the population per class.
      const double perClass = numClasses != numOutputs ? double(numOutputs) / numClasses : 1.0;
      on = float(int(T * double(ls.correctRate) * perClass));
      off = float(int(T * double(ls.incorrectRate) * perClass));
    }
    setField(v, "kind", unsigned(ls.kind)); // LossKind's order matches codes::Loss
    setField(v, "numSteps", T);
    setField(v, "batch", B);
    setField(v, "numOutputs", numOutputs);
    setField(v, "numClasses", numClasses);
    setField(v, "shardSize", outShardSize);
    setField(v, "onTarget", on);
    setField(v, "offTarget", off);
    VertexWork w;
    w.batch = B;
    w.neurons = numOutputs;
    w.elements = T * B * numOutputs;
    setEstimate(v, "OutputLoss", w);
  }

  // -- running ----------------------------------------------------------------

  void writeInputs(const float *x, const int *labelsIn, unsigned valid) {
    const unsigned B = spec.batchSize;
    if (valid == 0 || valid > B)
      invalid("validSamples must lie in [1, " + std::to_string(B) + "], got " +
              std::to_string(valid));
    engine->writeTensor("x", x, x + xHost.numElements());
    if (labelsIn) {
      std::vector<int> lab(B, 0);
      std::vector<float> w(B, 0.0f);
      for (unsigned b = 0; b < valid; ++b) {
        if (labelsIn[b] < 0 || unsigned(labelsIn[b]) >= numClasses)
          invalid("label " + std::to_string(labelsIn[b]) + " of sample " + std::to_string(b) +
                  " is outside [0, " + std::to_string(numClasses) + ")");
        lab[b] = labelsIn[b];
        w[b] = 1.0f / float(valid);
      }
      engine->writeTensor("labels", lab.data(), lab.data() + B);
      engine->writeTensor("sample_weights", w.data(), w.data() + B);
    }
  }

  // Throws SpikeBufferOverflow (policy Error) or returns true after growing the
  // buffers (policy Grow: the caller redoes the step).
  bool checkOverflow() {
    struct Worst {
      unsigned layer = 0, step = 0, needed = 0, capacity = 0, count = 0;
    } worst;
    bool overflowed = false;
    std::vector<unsigned> neededFraction(layers.size(), 0);
    double grow = spec.maxActivity;
    for (auto &layer : layers)
      for (unsigned k = 0; k < layer.shards.size(); ++k) {
        // One set of counters per chunk of samples (one without chunks).
        std::vector<unsigned> all(std::size_t(chunks) * codes::OVERFLOW_FIELDS);
        engine->readTensor("overflow" + std::to_string(layer.index) + "/" + std::to_string(k),
                           all.data(), all.data() + all.size());
        for (unsigned m = 0; m < chunks; ++m) {
          const unsigned *o = all.data() + std::size_t(m) * codes::OVERFLOW_FIELDS;
          if (o[codes::OVERFLOWED] == 0)
            continue;
          const Shard &sh = layer.shards[k];
          if (!overflowed || o[codes::MOST_NEEDED] > worst.needed) {
            worst = {layer.index, o[codes::FIRST_STEP] - 1, o[codes::MOST_NEEDED], sh.capacity,
                     o[codes::OVERFLOWED]};
          }
          overflowed = true;
          grow = std::max(grow, double(o[codes::MOST_NEEDED]) / sh.size);
        }
      }
    if (!overflowed)
      return false;
    if (policy == OverflowPolicy::Error) {
      std::ostringstream msg;
      msg << "spike buffer overflow in layer " << worst.layer << " at step " << worst.step
          << ": a buffer needed " << worst.needed << " entries (spikes + gradient candidates) "
          << "but holds " << worst.capacity << " (" << worst.count
          << " buffer(s) of that shard overflowed); nothing was updated. Raise max_activity "
          << "(now " << spec.maxActivity << ", up to 1.0) or pass on_overflow='grow' to grow "
          << "the buffers and recompile";
      throw SpikeBufferOverflow(msg.str(), worst.layer, worst.step, worst.needed, worst.capacity);
    }
    // Grow with headroom, so that a slowly rising activity does not recompile every step.
    const float newActivity = float(std::min(1.0, grow * 1.25));
    auto params = readParams();
    auto state = readOptimizerState();
    spec.maxActivity = std::max(newActivity, spec.maxActivity);
    engine.reset();
    graph.reset();
    dummies.clear();
    build();
    writeParams(params);
    writeOptimizerState(state);
    return true;
  }

  void runForward(const float *x, const int *labelsIn, unsigned valid) {
    for (;;) {
      writeInputs(x, labelsIn, valid);
      engine->run(0);
      if (!checkOverflow())
        return;
    }
  }

  // Loss and gradients of a batch, then (update) the optimiser step. Overflow is checked
  // before anything is updated: after the forward pass, or (chunks) after every chunk's
  // forward and backward, which only write gradients.
  void runGradients(const float *x, const int *labelsIn, unsigned valid, bool update) {
    if (chunks == 1) {
      runForward(x, labelsIn, valid);
      if (chunks == 1) { // a grown rebuild may have chunked the batch
        engine->run(update ? 1 : 2);
        return;
      }
    }
    for (;;) {
      writeInputs(x, labelsIn, valid);
      engine->run(1);
      if (!checkOverflow())
        break;
    }
    if (chunks == 1) { // grown and rebuilt unchunked: the chunked programs are gone
      runGradients(x, labelsIn, valid, update);
      return;
    }
    if (update)
      engine->run(2);
  }

  void readSpikes(float *out) {
    const unsigned B = spec.batchSize, Bc = chunkBatch, T = spec.numSteps, C = numOutputs;
    // Per chunk of samples (the whole batch without chunks) and loss group, shard-major
    // [T, Bg, n] blocks.
    std::vector<float> shardMajor(std::size_t(T) * B * C);
    engine->readTensor("spikes", shardMajor.data(), shardMajor.data() + shardMajor.size());
    for (unsigned m = 0; m < chunks; ++m)
      for (const LossGroup &g : lossGroups) {
        const unsigned Bg = g.last - g.first;
        const float *block = shardMajor.data() + std::size_t(T) * C * (std::size_t(m) * Bc + g.first);
        for (const Shard &sh : layers.back().shards) {
          const float *src = block + std::size_t(T) * Bg * sh.first;
          for (unsigned t = 0; t < T; ++t)
            for (unsigned b = 0; b < Bg; ++b)
              for (unsigned j = 0; j < sh.size; ++j)
                out[(std::size_t(t) * B + m * Bc + g.first + b) * C + sh.first + j] =
                    src[(std::size_t(t) * Bg + b) * sh.size + j];
        }
      }
  }

  float readLoss() {
    float v = 0;
    engine->readTensor("loss", &v, &v + 1);
    return v;
  }

  // Device layout <-> PyTorch layout.
  std::size_t hostSize(const Layer &layer, unsigned p) const {
    const unsigned N = layer.spec.outputs;
    if (p == P_WEIGHT)
      return std::size_t(N) * layer.spec.inputs;
    if (p == P_REC_WEIGHT && layer.a2a)
      return std::size_t(N) * N;
    return N;
  }
  bool isMatrix(const Layer &layer, unsigned p) const {
    return p == P_WEIGHT || (p == P_REC_WEIGHT && layer.a2a);
  }

  void readParam(const std::string &prefix, const Layer &layer, unsigned p,
                 std::vector<float> &out) {
    out.assign(hostSize(layer, p), 0.0f);
    const unsigned N = layer.spec.outputs;
    const unsigned rows = p == P_WEIGHT ? layer.spec.inputs : N; // device rows of a matrix
    for (unsigned k = 0; k < layer.shards.size(); ++k) {
      const Shard &sh = layer.shards[k];
      std::vector<float> buf(isMatrix(layer, p) ? std::size_t(rows) * sh.size : sh.size);
      engine->readTensor(prefix + std::to_string(layer.index) + "/" + std::to_string(k) + "/" +
                             std::to_string(p),
                         buf.data(), buf.data() + buf.size());
      if (isMatrix(layer, p)) {
        for (unsigned i = 0; i < rows; ++i)
          for (unsigned j = 0; j < sh.size; ++j)
            out[std::size_t(sh.first + j) * rows + i] = buf[std::size_t(i) * sh.size + j];
      } else {
        std::copy(buf.begin(), buf.end(), out.begin() + sh.first);
      }
    }
  }

  void writeParam(const std::string &prefix, const Layer &layer, unsigned p,
                  const std::vector<float> &in, const char *what) {
    if (in.size() != hostSize(layer, p))
      invalid(std::string(what) + " of layer " + std::to_string(layer.index) + " has " +
              std::to_string(in.size()) + " values, expected " +
              std::to_string(hostSize(layer, p)));
    const unsigned N = layer.spec.outputs;
    const unsigned rows = p == P_WEIGHT ? layer.spec.inputs : N;
    for (unsigned k = 0; k < layer.shards.size(); ++k) {
      const Shard &sh = layer.shards[k];
      std::vector<float> buf(isMatrix(layer, p) ? std::size_t(rows) * sh.size : sh.size);
      if (isMatrix(layer, p)) {
        for (unsigned i = 0; i < rows; ++i)
          for (unsigned j = 0; j < sh.size; ++j)
            buf[std::size_t(i) * sh.size + j] = in[std::size_t(sh.first + j) * rows + i];
      } else {
        std::copy(in.begin() + sh.first, in.begin() + sh.first + sh.size, buf.begin());
      }
      engine->writeTensor(prefix + std::to_string(layer.index) + "/" + std::to_string(k) + "/" +
                              std::to_string(p),
                          buf.data(), buf.data() + buf.size());
    }
  }

  static std::vector<float> &member(LayerParams &lp, unsigned p) {
    switch (p) {
    case P_WEIGHT:
      return lp.weight;
    case P_BIAS:
      return lp.bias;
    case P_REC_WEIGHT:
      return lp.recurrentWeight;
    default:
      return lp.recurrentBias;
    }
  }
  static const char *memberName(unsigned p) {
    static const char *names[4] = {"weight", "bias", "recurrent_weight", "recurrent_bias"};
    return names[p];
  }

  std::vector<LayerParams> readParams(const std::string &prefix = "param_r") {
    std::vector<LayerParams> out(layers.size());
    for (auto &layer : layers)
      for (unsigned p = 0; p < 4; ++p)
        if (layer.hasParam(p))
          readParam(prefix, layer, p, member(out[layer.index], p));
    return out;
  }

  void writeParams(const std::vector<LayerParams> &params) {
    if (params.size() != layers.size())
      invalid("params has " + std::to_string(params.size()) + " layer(s), the network has " +
              std::to_string(layers.size()));
    for (auto &layer : layers)
      for (unsigned p = 0; p < 4; ++p) {
        auto &values = member(const_cast<LayerParams &>(params[layer.index]), p);
        if (layer.hasParam(p))
          writeParam("param_w", layer, p, values, memberName(p));
        else if (!values.empty())
          invalid(std::string(memberName(p)) + " given for layer " +
                  std::to_string(layer.index) + ", which has none");
      }
  }

  OptimizerState readOptimizerState() {
    OptimizerState st;
    st.layers.resize(layers.size());
    for (auto &layer : layers)
      for (unsigned p = 0; p < 4; ++p) {
        if (!layer.hasParam(p))
          continue;
        const Shard &sh = layer.shards[0];
        unsigned count = 0;
        engine->readTensor("count_r" + std::to_string(layer.index) + "/0/" + std::to_string(p),
                           &count, &count + 1);
        st.steps = count;
        if (sh.opt1[p].valid())
          readParam("opt1_r", layer, p, member(st.layers[layer.index].first, p));
        if (sh.opt2[p].valid())
          readParam("opt2_r", layer, p, member(st.layers[layer.index].second, p));
      }
    return st;
  }

  void writeOptimizerState(const OptimizerState &st) {
    if (st.layers.size() != layers.size())
      invalid("optimiser state has " + std::to_string(st.layers.size()) +
              " layer(s), the network has " + std::to_string(layers.size()));
    for (auto &layer : layers)
      for (unsigned p = 0; p < 4; ++p) {
        if (!layer.hasParam(p))
          continue;
        const Shard &sh0 = layer.shards[0];
        auto &first = member(const_cast<LayerParams &>(st.layers[layer.index].first), p);
        auto &second = member(const_cast<LayerParams &>(st.layers[layer.index].second), p);
        if (sh0.opt1[p].valid()) {
          if (first.empty())
            writeParam("opt1_w", layer, p, std::vector<float>(hostSize(layer, p), 0.0f), "");
          else
            writeParam("opt1_w", layer, p, first, "optimiser state");
        }
        if (sh0.opt2[p].valid()) {
          if (second.empty())
            writeParam("opt2_w", layer, p, std::vector<float>(hostSize(layer, p), 0.0f), "");
          else
            writeParam("opt2_w", layer, p, second, "optimiser state");
        }
        for (unsigned k = 0; k < layer.shards.size(); ++k) {
          const unsigned count = st.steps;
          engine->writeTensor("count_w" + std::to_string(layer.index) + "/" + std::to_string(k) +
                                  "/" + std::to_string(p),
                              &count, &count + 1);
        }
      }
  }
};

// ---------------------------------------------------------------------------

Network::Network(const NetworkSpec &spec, const DeviceSpec &device, OverflowPolicy onOverflow)
    : impl_(std::make_unique<Impl>(spec, device, onOverflow)) {}

Network::~Network() = default;

const NetworkSpec &Network::spec() const { return impl_->spec; }

float Network::trainStep(const float *x, const int *labels, unsigned validSamples,
                         float *outSpikes) {
  if (!labels)
    invalid("trainStep needs labels");
  impl_->runGradients(x, labels, validSamples, true);
  if (outSpikes)
    impl_->readSpikes(outSpikes);
  return impl_->readLoss();
}

float Network::lossAndGrad(const float *x, const int *labels, unsigned validSamples,
                           std::vector<LayerParams> &grads, float *outSpikes) {
  if (!labels)
    invalid("lossAndGrad needs labels");
  impl_->runGradients(x, labels, validSamples, false);
  grads = impl_->readParams("grad");
  if (outSpikes)
    impl_->readSpikes(outSpikes);
  return impl_->readLoss();
}

void Network::infer(const float *x, float *outSpikes) {
  impl_->runForward(x, nullptr, impl_->spec.batchSize);
  if (outSpikes)
    impl_->readSpikes(outSpikes);
}

void Network::setLearningRate(double lr) { impl_->setLearningRate(lr); }
double Network::learningRate() const { return impl_->spec.optimizer.lr; }

std::vector<LayerParams> Network::getParams() { return impl_->readParams(); }
void Network::setParams(const std::vector<LayerParams> &params) { impl_->writeParams(params); }
OptimizerState Network::getOptimizerState() { return impl_->readOptimizerState(); }
void Network::setOptimizerState(const OptimizerState &state) {
  impl_->writeOptimizerState(state);
}

std::map<std::string, double> Network::profileEstimate() const {
#ifdef POPSNN_USE_POPLAR_SDK
  // Graphcore's SDK reports through its profiler (POPLAR_ENGINE_OPTIONS, PopVision).
  return {};
#else
  // popsnn runtime extension: the cost model's totals.
  const ProfileEstimate p = impl_->engine->getProfileEstimate();
  return {{"estimate_total_cycles", double(p.totalCycles)},
          {"estimate_compute_cycles", double(p.computeCycles)},
          {"estimate_exchange_cycles", double(p.exchangeCycles)},
          {"estimate_sync_cycles", double(p.syncCycles)},
          {"estimate_seconds", p.estimatedSeconds()},
          {"estimate_exchange_bytes_within_ipu", double(p.exchangeBytesWithinIPU)},
          {"estimate_exchange_bytes_between_ipus", double(p.exchangeBytesBetweenIPUs)},
          {"estimate_host_bytes", double(p.hostBytes)},
          {"estimate_syncs", double(p.syncs)},
          {"runs", double(p.runs)},
          {"max_tile_bytes", double(p.maxTileBytes())},
          {"tile_clock_hz", p.tileClockFrequency}};
#endif
}

std::string Network::profileSummary() const {
#ifdef POPSNN_USE_POPLAR_SDK
  return "Graphcore's SDK: profile with POPLAR_ENGINE_OPTIONS and PopVision";
#else
  std::ostringstream out;
  impl_->engine->printProfileSummary(out);
  return out.str();
#endif
}

std::map<std::string, double> Network::layout() const {
  std::map<std::string, double> out;
  out["tiles"] = impl_->numTiles;
  out["max_activity"] = impl_->spec.maxActivity;
  out["step_major"] = impl_->stepMajor; // schedule: 1 step-major, 0 layer-major
  // The batch run in chunks of samples, one after the other (1: all at once).
  out["sample_chunks"] = impl_->chunks;
  out["chunk_batch"] = impl_->chunkBatch;
  for (const auto &layer : impl_->layers) {
    const std::string l = "layer" + std::to_string(layer.index) + "_";
    out[l + "shards"] = layer.shards.size();
    out[l + "shard_size"] = layer.shardSize;
    out[l + "buffer_capacity"] = layer.stride - codes::BUFFER_HEADER;
    out[l + "pushes"] = layer.push; // 1: sends W_next.S sums to the next layer, not ids
    // What the forward keeps for this layer's backward, over its shards: the surrogate
    // (dense [T, B, n], or per id-buffer entry with a sparse rule) and the id buffers.
    double surrogate = 0, ids = 0;
    for (const auto &sh : layer.shards) {
      surrogate += double((sh.surrTrace.valid() ? sh.surrTrace : sh.surrValues).numElements()) *
                   sizeof(float);
      ids += double(sh.idTrace.numElements()) * sizeof(int);
    }
    out[l + "surrogate_trace_bytes"] = surrogate;
    out[l + "id_trace_bytes"] = ids;
    out[l + "trace_bytes"] = surrogate + ids;
  }
  return out;
}

} // namespace popsnn
