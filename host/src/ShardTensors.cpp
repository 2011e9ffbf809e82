// Every shard's tensors on its tile, and the host-facing tensors (GraphBuild.hpp). The sizes
// follow from the plan alone; each tensor's bytes are counted per tile and layer for the
// does-not-fit error.
#include <poplar/Target.hpp>

#include <algorithm>

#include "GraphBuild.hpp"
#include "popsnn/VertexEnums.hpp"
#include "popsnn/VertexUnits.hpp"

namespace popsnn {

using namespace poplar;

namespace {

// One shard's tensors, in groups: parameters and optimiser state, neuron state and traces,
// its input, and what it shares with its neighbours (the layers before and after, itself).
struct ShardTensorMaker {
  GraphBuild &b;
  const Layer &layer;
  Shard &sh;
  const std::string name;
  const unsigned B, T, l, n, tile, nIn, N;
  const bool stepMajor;
  const std::vector<Layer> &layers;
  const int L;

  ShardTensorMaker(GraphBuild &build, const Layer &ly, Shard &shard, unsigned k)
      : b(build), layer(ly), sh(shard),
        name("layer" + std::to_string(ly.index) + "/shard" + std::to_string(k) + "/"),
        B(build.batch()), T(build.steps()), l(ly.index), n(shard.size), tile(shard.tile),
        nIn(ly.spec.inputs), N(ly.spec.outputs), stepMajor(build.stepMajor()), layers(build.layers),
        L(int(ly.index)) {}

  void params() {
    for (unsigned p = 0; p < NUM_PARAMS; ++p) {
      // The bias always exists on the device (zero and never updated without one).
      if (!layer.hasParam(p) && p != P_BIAS)
        continue;
      sh.param[p] = b.zeros(FLOAT, layer.paramSize(p, n), tile, name + paramName(p), L);
      // Half storage: the vertices read a copy rounded to half; param is the float32 master.
      sh.stored[p] =
          b.half() ? b.zeros(HALF, layer.paramSize(p, n), tile, name + "stored_" + paramName(p), L)
                   : sh.param[p];
      sh.grad[p] = b.zeros(FLOAT, layer.paramSize(p, n), tile, name + "grad_" + paramName(p), L);
      if (!layer.hasParam(p))
        continue;
      const OptimizerSpec &o = b.spec.optimizer;
      if (hasOptimizerSlot(o, 0))
        sh.opt1[p] = b.zeros(FLOAT, layer.paramSize(p, n), tile, name + "opt1_" + paramName(p), L);
      if (hasOptimizerSlot(o, 1))
        sh.opt2[p] = b.zeros(FLOAT, layer.paramSize(p, n), tile, name + "opt2_" + paramName(p), L);
      sh.optCount[p] = b.zeros(UNSIGNED_INT, 1, tile, name + "count_" + paramName(p), L);
      if (b.chunks() > 1)
        sh.gradTotal[p] =
            b.zeros(FLOAT, layer.paramSize(p, n), tile, name + "grad_total_" + paramName(p), L);
    }
  }

  // LayerSpec::perNeuron: the constants the vertices read per neuron (GraphBuild.hpp).
  void constants() {
    const LayerSpec &s = layer.spec;
    if (!s.perNeuron())
      return;
    const bool alpha = s.neuron == NeuronType::Alpha;
    auto perNeuron = [&](const std::vector<float> &values, float scalar, const char *what) {
      std::vector<float> v(n, scalar);
      if (!values.empty())
        std::copy(values.begin() + sh.first, values.begin() + sh.first + n, v.begin());
      return b.constant(v, tile, name + what, L);
    };
    sh.betas = s.learnBeta ? sh.param[P_BETA] : perNeuron(s.betas, s.beta, "betas");
    sh.alphas = perNeuron(s.alphas, s.alpha, "alphas"); // a gain stays one per layer
    sh.thresholds = s.learnThreshold ? sh.param[P_THRESHOLD]
                                     : perNeuron(s.thresholds, s.threshold, "thresholds");
    sh.clampedBeta = b.zeros(FLOAT, 2 * n, tile, name + "clamped_beta", L); // and the gains
    if (s.learnBeta) // U, and Alpha's H (its beta's gradient needs H[t-1])
      sh.memTrace =
          b.zeros(FLOAT, std::size_t(alpha ? 2 : 1) * T * B * n, tile, name + "mem_trace", L);
    for (unsigned p : {P_BETA, P_THRESHOLD})
      if (layer.hasParam(p) && isLayerScalar(s, p)) {
        sh.gradPart[p] = b.zeros(FLOAT, n, tile, name + "grad_part_" + paramName(p), L);
        sh.gradParts[p] = b.zeros(FLOAT, N, tile, name + "grad_parts_" + paramName(p), L);
      }
  }

  void state() {
    // The neuron's state and its carried gradient: U, then Synaptic's J or Alpha's E and H.
    // S: what the vertices store (states, traces, exchanged values; numerics.md section 8).
    const Type &S = b.stored();
    const unsigned stateVars = units::STATES[neuronCode(layer.spec)];
    sh.mem = b.zeros(S, stateVars * B * n, tile, name + "mem", L);
    sh.gradMem = b.zeros(FLOAT, stateVars * B * n, tile, name + "grad_mem", L);
    sh.prevSpikes = b.zeros(FLOAT, B * n, tile, name + "prev_spikes", L);
    sh.fwdScratch = b.zeros(FLOAT, codes::forwardScratch(n, stateVars, b.storage()), tile,
                            name + "fwd_scratch", L);
    // eps, keep, then two gathered rows of the next layer's dL/dI (a pair of samples,
    // LeakyTrace.hpp) or Alpha's dL/dH' (n).
    const unsigned P = l + 1 < layers.size() ? codes::pushWidth(layers[l + 1].spec.outputs) : 0;
    sh.bwdScratch = b.zeros(FLOAT, codes::backwardScratch(n, P, stateVars, b.storage()), tile,
                            name + "bwd_scratch", L);
    // The surrogate kept for the backward: dense without a sparse rule (every entry carries
    // gradient) or where the rule keeps most entries (masked: 0 off the rule), else the
    // gradient trace, sized by activity over all (step, sample): its starts, its 16-bit ids
    // (a shard has at most MAX_TRACE_ID_SHARD neurons, Plan.hpp) and its values (surrogates).
    if (!layer.compressedTrace) { // the whole-trace kernels stage their spike masks in it
      const std::size_t size =
          layer.leakTrace ? codes::leakMaskFloats(T, B, n) : std::size_t(T) * B * n;
      sh.surrogates = b.zeros(S, size, tile, name + "surrogate_trace", L);
    } else {
      sh.gradStarts = b.zeros(INT, codes::traceStarts(T, B), tile, name + "grad_starts", L);
      sh.gradIds = b.zeros(UNSIGNED_SHORT, sh.traceCapacity, tile, name + "grad_ids", L);
      sh.surrogates = b.zeros(FLOAT, sh.traceCapacity, tile, name + "grad_values", L);
    }
    sh.idTrace = b.zeros(INT, layer.idTraceSize, tile, name + "id_trace", L);
    if (layer.compressedTrace) // the backward's live neurons per sample (LifBackward)
      sh.liveIds = b.zeros(INT, B * (2 * n + 1), tile, name + "live_ids", L);
    const bool feedsNext = l + 1 < layers.size();
    if (layer.a2a || (stepMajor && feedsNext))
      sh.outIds = b.zeros(INT, B * layer.stride, tile, name + "ids", L);
    if (layer.a2a && stepMajor)
      sh.prevIds = b.zeros(INT, B * layer.stride, tile, name + "prev_ids", L);
    sh.overflow = b.zeros(UNSIGNED_INT, codes::OVERFLOW_FIELDS, tile, name + "overflow", L);
    if (b.chunks() > 1)
      sh.overflowAll = b.zeros(UNSIGNED_INT, b.chunks() * codes::OVERFLOW_FIELDS, tile,
                               name + "overflow_all", L);
    sh.stepForward = b.zeros(UNSIGNED_INT, 1, tile, name + "step_forward", L);
    sh.stepBackward = b.zeros(UNSIGNED_INT, 1, tile, name + "step_backward", L);
    if (b.half())
      sh.nonFinite = b.zeros(UNSIGNED_INT, 1, tile, name + "non_finite", L);
  }

  void input() {
    const Type &S = b.stored();
    if (layer.inputMode == codes::INPUT_DIRECT) {
      sh.xLocal = b.zeros(S, std::size_t(B) * nIn, tile, name + "x", L);
      sh.current = b.zeros(S, B * n, tile, name + "current", L);
      sh.currentGradSum = b.zeros(FLOAT, B * n, tile, name + "current_grad_sum", L);
      if (b.chunks() > 1) // every chunk's, read by the host for the input gradient
        sh.currentGradSumAll =
            b.zeros(FLOAT, b.chunks() * B * n, tile, name + "current_grad_sum_all", L);
    } else if (layer.inputMode == codes::INPUT_DENSE_STEPS && b.plan.inputListCapacity) {
      sh.xList = b.zeros(INT, codes::inputListStarts(T, B) + b.plan.inputListCapacity, tile,
                         name + "x_list", L);
      sh.xValues = b.zeros(FLOAT, b.plan.inputListCapacity, tile, name + "x_values", L);
    } else if (layer.inputMode == codes::INPUT_DENSE_STEPS) {
      sh.xLocal = b.zeros(FLOAT, std::size_t(T) * B * nIn, tile, name + "x", L);
    } else if (layer.inputMode == codes::INPUT_PARTIAL_CURRENT) {
      sh.current = b.zeros(S, B * n, tile, name + "partial_sum", L);
      sh.partialRecv = b.zeros(S, layers[l - 1].shards.size() * std::size_t(T) * B * n, tile,
                               name + "partial_current", L);
    } else {
      const Layer &prev = layers[l - 1];
      const std::size_t slot = stepMajor ? std::size_t(B) * prev.stride : prev.idTraceSize;
      sh.inRecv = b.zeros(INT, prev.shards.size() * slot, tile, name + "in_ids", L);
    }
  }

  void neighbours() {
    const Type &S = b.stored();
    if (layer.push) {
      const std::size_t nextN = layers[l + 1].spec.outputs;
      sh.nextCurrent = b.zeros(S, std::size_t(T) * B * nextN, tile, name + "next_current", L);
      const std::size_t rows = (n + 1) * codes::pushWidth(nextN);
      sh.nextRows = b.zeros(FLOAT, rows, tile, name + "next_rows", L);
      sh.nextGradRows = b.zeros(FLOAT, rows, tile, name + "next_grad_rows", L);
      sh.nextGradWeights = b.zeros(FLOAT, n * nextN, tile, name + "next_grad_weights", L);
    }
    const bool dense = !layer.compressedTrace; // every entry's surrogate, masked or not
    const bool keepsInputGrad = l == 0 && b.spec.inputGrad && b.spec.input == InputMode::PerStep;
    if (layer.gradList) { // dL/dI as a list (LayerShape::gradList), instead of gradOut
      sh.gradList = b.zeros(INT, codes::gradListStarts(T, B), tile, name + "grad_list", L);
      sh.gradListIds =
          b.zeros(UNSIGNED_SHORT, sh.gradListCapacity, tile, name + "grad_list_ids", L);
      sh.gradListValues = b.zeros(FLOAT, sh.gradListCapacity, tile, name + "grad_list_values", L);
    }
    if ((l > 0 && !layer.gradList) || keepsInputGrad)
      sh.gradOut = b.zeros(S, std::size_t(stepMajor ? 1 : T) * B * n, tile, name + "grad_out", L);
    if (keepsInputGrad) { // dL/dI of every step (and chunk), for the input gradient
      const std::size_t steps = std::size_t(T) * B * n;
      sh.inputGradSteps =
          stepMajor ? b.zeros(FLOAT, steps, tile, name + "input_grad_steps", L) : sh.gradOut;
      if (b.chunks() > 1)
        sh.inputGradAll = b.zeros(FLOAT, b.chunks() * steps, tile, name + "input_grad_all", L);
    }
    if (layer.a2a) {
      sh.recRecv = b.zeros(INT, layer.shards.size() * B * layer.stride, tile, name + "rec_ids", L);
      if (!stepMajor)
        sh.ownTraces =
            b.zeros(INT, layer.shards.size() * layer.idTraceSize, tile, name + "own_ids", L);
      sh.gradStep = b.zeros(FLOAT, std::size_t(B) * n, tile, name + "grad_step", L);
      sh.ownGrad = b.zeros(FLOAT, std::size_t(B) * N, tile, name + "own_grad", L);
      sh.ownWeights = b.zeros(FLOAT, std::size_t(n) * N, tile, name + "own_weights", L);
      if (dense)
        sh.ownWeightsT = b.zeros(FLOAT, std::size_t(n) * N, tile, name + "own_weights_t", L);
    }
    if (!layer.isOutput && b.plan.layers[l + 1].gradList) { // every shard's list
      const LayerPlan &next = b.plan.layers[l + 1];
      const std::size_t cap = next.shards.front().gradListCapacity;
      sh.nextGradList = b.zeros(INT, next.shards.size() * codes::gradListStarts(T, B), tile,
                                name + "next_grad_list", L);
      sh.nextGradListIds =
          b.zeros(UNSIGNED_SHORT, next.shards.size() * cap, tile, name + "next_grad_list_ids", L);
      sh.nextGradListValues =
          b.zeros(FLOAT, next.shards.size() * cap, tile, name + "next_grad_list_values", L);
    }
    if (!layer.isOutput) {
      const unsigned nextN = layers[l + 1].spec.outputs;
      if (!b.plan.layers[l + 1].gradList)
        sh.nextGrad =
            b.zeros(S, std::size_t(stepMajor ? 1 : T) * B * nextN, tile, name + "next_grad", L);
      sh.nextWeights = b.zeros(S, std::size_t(n) * nextN, tile, name + "next_weights", L);
      // Dense: [N_next, n]; a sparse rule: padded rows [n, P] (see LifBackward).
      sh.nextWeightsT = b.zeros(FLOAT, std::size_t(n) * (dense ? nextN : codes::pushWidth(nextN)),
                                tile, name + "next_weights_t", L);
      // One product per step for every sample (LifBackward's stepProduct): [B, n] more on the
      // cpu device, none on an IPU's tiles (the counting build plans IPU memory).
      const bool cpu = b.graph && b.graph->getTarget().getTargetType() == TargetType::CPU;
      if (cpu && dense && !b.half() && sh.nextGrad.valid() && !layer.leakTrace &&
          layer.spec.neuron != NeuronType::Leaky)
        sh.nextStep = b.zeros(FLOAT, std::size_t(B) * n, tile, name + "next_step", L);
    } else {
      sh.recSpikes = b.zeros(S, std::size_t(T) * B * n, tile, name + "out_spikes", L);
      sh.recMem = b.zeros(S, std::size_t(T) * B * n, tile, name + "out_mem", L);
      sh.lossGradS = b.zeros(S, std::size_t(T) * B * n, tile, name + "loss_grad_spikes", L);
      sh.lossGradU = b.zeros(S, std::size_t(T) * B * n, tile, name + "loss_grad_mem", L);
    }
  }
};

} // namespace

void createShardTensors(GraphBuild &b, Layer &layer) {
  for (unsigned k = 0; k < layer.shards.size(); ++k) {
    ShardTensorMaker make(b, layer, layer.shards[k], k);
    make.params();
    make.constants();
    make.state();
    make.input();
    make.neighbours();
  }
}

namespace {

// A tensor of `perSample` elements per sample of a chunk (plus `perGroup` per loss group),
// each loss group's block on its tile, laid out within a block as one group-sized batch.
Tensor grouped(GraphBuild &b, const Type &type, std::size_t perSample, std::size_t perGroup,
               const std::string &name) {
  const std::vector<LossGroup> &groups = b.plan.lossGroups;
  for (const LossGroup &g : groups)
    b.tileLayerBytes[g.tile][b.hostTag()] +=
        (perSample * (g.last - g.first) + perGroup) * b.typeSize(type);
  if (!b.graph)
    return Tensor();
  const std::size_t size = perSample * b.batch() + perGroup * groups.size();
  Tensor t = b.graph->addVariable(type, {size}, name);
  std::size_t at = 0;
  for (const LossGroup &g : groups) {
    const std::size_t n = perSample * (g.last - g.first) + perGroup;
    b.graph->setTileMapping(t.slice(at, at + n), g.tile);
    at += n;
  }
  if (type == FLOAT)
    b.graph->setInitialValue(t, 0.0f);
  else
    b.graph->setInitialValue(t, 0);
  return t;
}

// The batch lands spread over all tiles, so that its broadcast to the first layer's
// tiles is sent by many tiles, not queued behind one; the learning rate one float per tile.
Tensor spreadOverTiles(GraphBuild &b, const Type &type, std::size_t size, const char *name) {
  const unsigned numTiles = b.plan.numTiles, tag = b.hostTag();
  const std::size_t chunk = (size + numTiles - 1) / numTiles;
  Graph::TileToTensorMapping mapping(numTiles);
  for (unsigned tile = 0; tile < numTiles && tile * chunk < size; ++tile) {
    const std::size_t end = std::min(size, (tile + 1) * chunk);
    mapping[tile].push_back(Interval(tile * chunk, end));
    b.tileLayerBytes[tile][tag] += (end - tile * chunk) * b.typeSize(type);
  }
  if (!b.graph)
    return Tensor();
  Tensor t = b.graph->addVariable(type, {size}, name);
  b.graph->setTileMapping(t, mapping);
  if (type == INT)
    b.graph->setInitialValue(t, 0);
  else
    b.graph->setInitialValue(t, 0.0f);
  return t;
}

void createInputTensors(GraphBuild &b) {
  const unsigned numTiles = b.plan.numTiles, tag = b.hostTag();
  HostTensors &io = b.io;
  if (const std::size_t cap = b.plan.inputListCapacity) { // one list per chunk of samples
    const std::size_t lists = b.chunks();
    io.xList = spreadOverTiles(b, INT, lists * (codes::inputListStarts(b.steps(), b.batch()) + cap),
                               "x_list");
    io.xValues = spreadOverTiles(b, FLOAT, lists * cap, "x_values");
  } else {
    io.x = spreadOverTiles(b, b.stored(),
                           std::size_t(b.spec.input == InputMode::Direct ? 1 : b.steps()) *
                               b.spec.batchSize * b.spec.layers[0].inputs,
                           "x");
  }
  for (unsigned tile = 0; tile < numTiles; ++tile) // the learning rate (and loss scale)
    b.tileLayerBytes[tile][tag] += sizeof(float) * (b.half() ? 2 : 1);
  if (!b.graph)
    return;
  io.learningRate = b.graph->addVariable(FLOAT, {numTiles}, "learning_rate");
  for (unsigned tile = 0; tile < numTiles; ++tile)
    b.graph->setTileMapping(io.learningRate[tile], tile);
  b.graph->setInitialValue(io.learningRate, float(b.spec.optimizer.lr));
  if (!b.half())
    return;
  io.lossScale = b.graph->addVariable(FLOAT, {numTiles}, "loss_scale");
  for (unsigned tile = 0; tile < numTiles; ++tile)
    b.graph->setTileMapping(io.lossScale[tile], tile);
  b.graph->setInitialValue(io.lossScale, 1.0f);
}

} // namespace

void createHostTensors(GraphBuild &b) {
  createInputTensors(b);
  HostTensors &io = b.io;
  const unsigned lossTile = b.plan.lossTile, B = b.spec.batchSize;
  const int tag = int(b.hostTag());
  const bool chunked = b.chunks() > 1;
  // Unchunked, the host writes labels and weights straight into the groups' blocks.
  io.labels = chunked ? b.zeros(INT, B, lossTile, "labels", tag) : grouped(b, INT, 1, 0, "labels");
  io.sampleWeights = chunked ? b.zeros(FLOAT, B, lossTile, "sample_weights", tag)
                             : grouped(b, FLOAT, 1, 0, "sample_weights");
  io.lossValue = b.zeros(FLOAT, 1, lossTile, "loss", tag);
  const std::size_t outSize = std::size_t(b.steps()) * b.batch() * b.plan.numOutputs;
  if (chunked) {
    io.labelsChunk = grouped(b, INT, 1, 0, "labels_chunk");
    io.weightsChunk = grouped(b, FLOAT, 1, 0, "sample_weights_chunk");
    io.lossTotal = b.zeros(FLOAT, 1, lossTile, "loss_total", tag);
    io.spikesAll = b.zeros(FLOAT, outSize * b.chunks(), lossTile, "spikes_all", tag);
  }
  const std::size_t record = std::size_t(b.steps()) * b.plan.numOutputs; // per sample
  const Type &S = b.stored(); // the output layer's records and their gradients
  io.gatheredS = grouped(b, S, record, 0, "gathered_spikes");
  io.gatheredU = grouped(b, S, record, 0, "gathered_mem");
  io.gradS = grouped(b, S, record, 0, "loss_grad_spikes");
  io.gradU = grouped(b, S, record, 0, "loss_grad_mem");
  io.lossScratch = grouped(b, FLOAT, 0, 2 * b.plan.numOutputs, "loss_scratch");
  if (b.plan.lossGroups.size() > 1) {
    io.lossParts = grouped(b, FLOAT, 0, 1, "loss_parts");
    io.lossPartsLocal = b.zeros(FLOAT, b.plan.lossGroups.size(), lossTile, "loss_parts_local", tag);
  }
}

GraphBuild countTensorBytes(const NetworkSpec &spec, const Plan &plan) {
  GraphBuild b(spec, plan, nullptr);
  for (auto &layer : b.layers)
    createShardTensors(b, layer);
  createHostTensors(b);
  return b;
}

} // namespace popsnn
