#include "VertexWiring.hpp"

#include <poplar/Target.hpp>

#include <algorithm>

#include "CycleEstimates.hpp"
#include "popsnn/VertexEnums.hpp"
#include "popsnn/VertexUnits.hpp"

namespace popsnn {

using namespace poplar;

// A model's code is its NeuronType; RLeaky's recurrence decides its unit.
unsigned neuronCode(const LayerSpec &s) {
  if (s.neuron == NeuronType::RLeaky && !s.allToAll)
    return codes::RLEAKY_ONE_TO_ONE;
  return unsigned(s.neuron);
}

namespace {

// Vertices of any kind: constant fields and cycle estimates.
struct Wiring {
  GraphBuild &b;
  template <typename T> void setField(VertexRef v, const char *field, T value) {
    b.graph->setInitialValue(v[field], value);
  }
  void setEstimate(VertexRef v, const std::string &name, const VertexWork &w) {
    b.graph->setPerfEstimate(v, estimateCycles(name, w));
  }
  // A field that only some layers have is a list of edges: the layer's tensor as its one
  // edge, or no edge where the layer has none (no placeholder tensor).
  void connectIf(VertexRef v, const char *field, const Tensor &t) {
    b.graph->setFieldSize(v[field], t.valid() ? 1 : 0);
    if (t.valid())
      b.graph->connect(v[field][0], t);
  }
};

// One shard's vertices: x.W (direct input), forward, backward, optimiser.
struct ShardWiring : Wiring {
  const Layer &layer;
  Shard &sh;
  const unsigned B, T, l;
  const LayerSpec &s;
  const unsigned nIn;
  const Layer *prev, *next;
  const unsigned numSrc, inStride, numOwn;
  const unsigned surrogate, rule, reset; // LayerSpec's enum orders match codes::'s
  const unsigned prevCap, ownCap, tile, n;
  const bool stepMajor;
  VertexWork work;

  // Inputs a (step, sample) row visits: every one of the dense block (its scan), or the
  // list's mean (its capacity over the rows).
  unsigned denseInputsPerRow() const {
    const std::size_t rows = std::size_t(T) * B, cap = b.plan.inputListCapacity;
    return cap ? unsigned((cap + rows - 1) / rows) : nIn;
  }

  ShardWiring(GraphBuild &build, const Layer &ly, Shard &shard)
      : Wiring{build}, layer(ly), sh(shard), B(build.batch()), T(build.steps()), l(ly.index),
        s(ly.spec), nIn(ly.spec.inputs), prev(l > 0 ? &build.layers[l - 1] : nullptr),
        next(l + 1 < build.layers.size() ? &build.layers[l + 1] : nullptr),
        numSrc(prev ? prev->shards.size() : 0), inStride(prev ? prev->stride : 0),
        numOwn(ly.shards.size()), surrogate(unsigned(s.surrogate)), rule(unsigned(s.sparseRule)),
        reset(unsigned(s.reset)), prevCap(prev ? prev->stride - codes::BUFFER_HEADER : 0),
        ownCap(ly.stride - codes::BUFFER_HEADER), tile(shard.tile), n(shard.size),
        stepMajor(build.stepMajor()) {
    work.batch = B;
    work.neurons = n;
    work.inputs = nIn;
    work.steps = T;
    work.activeInputs = layer.inputMode == codes::INPUT_SPIKE_IDS         ? numSrc * prevCap
                        : layer.inputMode == codes::INPUT_PARTIAL_CURRENT ? numSrc
                        : layer.inputMode == codes::INPUT_DENSE_STEPS     ? denseInputsPerRow()
                                                                          : 0;
    work.spikes = sh.capacity;
    work.pushOutputs = layer.push ? next->spec.outputs : 0;
    work.activeCandidates = sh.capacity + (layer.a2a ? numOwn * ownCap : 0);
    work.stepsPerCall = layer.a2a || stepMajor ? 1u : T;
    work.states = units::STATES[neuronCode(s)];
  }

  // The shard's geometry and neuron model: the same constants on its forward and
  // backward vertices.
  void setShardFields(VertexRef v) {
    setField(v, "batch", B);
    setField(v, "numNeurons", n);
    setField(v, "numSteps", T);
    setField(v, "numInputs", nIn);
    setField(v, "numSrc", numSrc);
    setField(v, "inStride", inStride);
    setField(v, "numOwn", numOwn);
    setField(v, "stride", layer.stride);
    setField(v, "offset", sh.first);
    setField(v, "inputMode", layer.inputMode);
    setField(v, "beta", s.beta);
    setField(v, "alpha", s.alpha);
    setField(v, "gain", s.gain);
    // Constants one per neuron (LayerSpec::perNeuron): their tensors, else the floats above.
    connectIf(v, "betas", sh.betas);
    connectIf(v, "alphas", sh.alphas);
    connectIf(v, "thresholds", sh.thresholds);
    connectIf(v, "clampedBeta", sh.clampedBeta);
  }

  // A learned constant's gradient: per neuron, or the part a layer-wide one sums.
  Tensor constantGrad(unsigned p) {
    if (!layer.hasParam(p))
      return Tensor();
    return isLayerScalar(s, p) ? sh.gradPart[p] : sh.grad[p];
  }

  void direct(ComputeSet csDirect, ComputeSet csDirectGrad) {
    // On an IPU a tile's vertices share its worker threads: x.W over one vertex per
    // worker, by samples (DirectCurrent) and by inputs (DirectWeightGrad); the same
    // arithmetic per entry either way. The cpu device runs a tile's vertices in turn:
    // one of each there.
    const unsigned workers = b.graph->getTarget().getTargetType() == TargetType::CPU
                                 ? 1u
                                 : std::max(1u, b.graph->getTarget().getNumWorkerContexts());
    const unsigned sampleParts = std::min(workers, B);
    for (unsigned part = 0; part < sampleParts; ++part) {
      const unsigned b0 = B * part / sampleParts, b1 = B * (part + 1) / sampleParts;
      VertexRef v = b.graph->addVertex(csDirect, units::directCurrent(b.storage()));
      b.graph->connect(v["x"], sh.xLocal.slice(std::size_t(b0) * nIn, std::size_t(b1) * nIn));
      b.graph->connect(v["weights"], sh.stored[P_WEIGHT]);
      b.graph->connect(v["bias"], sh.stored[P_BIAS]);
      b.graph->connect(v["current"], sh.current.slice(b0 * n, b1 * n));
      b.graph->connect(v["nzIndex"], b.var(UNSIGNED_INT, nIn, tile, "nz_index", int(l)));
      // A group of samples' values on the cpu device (codes::SPARSE_GROUP), one row on an
      // IPU's tile memory.
      const unsigned valueRows = workers == 1 ? codes::SPARSE_GROUP : 1u;
      b.graph->connect(v["nzValue"], b.var(FLOAT, valueRows * nIn, tile, "nz_value", int(l)));
      setField(v, "batch", b1 - b0);
      setField(v, "numInputs", nIn);
      setField(v, "numNeurons", n);
      b.graph->setTileMapping(v, tile);
      VertexWork dw = work;
      dw.batch = b1 - b0;
      setEstimate(v, units::directCurrent(b.storage()), dw);
    }
    const unsigned inputParts = std::min(workers, nIn);
    for (unsigned part = 0; part < inputParts; ++part) {
      const unsigned i0 = nIn * part / inputParts, i1 = nIn * (part + 1) / inputParts;
      VertexRef g = b.graph->addVertex(csDirectGrad, units::directWeightGrad(b.storage()));
      b.graph->connect(g["x"], sh.xLocal);
      b.graph->connect(g["currentGradSum"], sh.currentGradSum);
      b.graph->connect(g["gradWeights"],
                       sh.grad[P_WEIGHT].slice(std::size_t(i0) * n, std::size_t(i1) * n));
      // DirectWeightGrad::GROUP inputs' lists of samples.
      b.graph->connect(g["nzIndex"], b.var(UNSIGNED_INT, 16 * B, tile, "nz_samples", int(l)));
      b.graph->connect(g["nzValue"], b.var(FLOAT, 16 * B, tile, "nz_sample_values", int(l)));
      setField(g, "batch", B);
      setField(g, "numInputs", i1 - i0);
      setField(g, "numNeurons", n);
      setField(g, "xStride", nIn);
      setField(g, "firstInput", i0);
      b.graph->setTileMapping(g, tile);
      VertexWork gw = work;
      gw.inputs = i1 - i0;
      setEstimate(g, units::directWeightGrad(b.storage()), gw);
    }
  }

  void forward(ComputeSet csForward) {
    VertexRef v =
        b.graph->addVertex(csForward, units::lifForward(neuronCode(s), reset, rule,
                                                        layer.compressedTrace, b.storage()));
    const bool direct = layer.inputMode == codes::INPUT_DIRECT;
    b.graph->connect(v["step"], sh.stepForward[0]);
    connectIf(v, "current", sh.current);
    connectIf(v, "denseIn", layer.inputMode == codes::INPUT_DENSE_STEPS ? sh.xLocal : Tensor());
    connectIf(v, "inList", sh.xList);
    connectIf(v, "inValues", sh.xValues);
    connectIf(v, "inIds", sh.inRecv);
    connectIf(v, "partialIn", sh.partialRecv);
    // W.x is DirectCurrent's (direct input) or the previous layer's pushers' (pushed input).
    const bool weighs =
        layer.inputMode == codes::INPUT_DENSE_STEPS || layer.inputMode == codes::INPUT_SPIKE_IDS;
    connectIf(v, "weights", weighs ? sh.stored[P_WEIGHT] : Tensor());
    connectIf(v, "bias", direct ? Tensor() : sh.stored[P_BIAS]);
    connectIf(v, "recIds", sh.recRecv);
    connectIf(v, "recWeights", sh.stored[P_REC_WEIGHT]);
    connectIf(v, "recBias", sh.stored[P_REC_BIAS]);
    b.graph->connect(v["mem"], sh.mem);
    b.graph->connect(v["prevSpikes"], sh.prevSpikes);
    b.graph->connect(v["scratch"], sh.fwdScratch);
    b.graph->connect(v["surrogates"], sh.surrogates);
    connectIf(v, "gradStarts", sh.gradStarts);
    connectIf(v, "gradIds", sh.gradIds);
    b.graph->connect(v["idTrace"], sh.idTrace);
    connectIf(v, "outIds", sh.outIds);
    connectIf(v, "prevIds", sh.prevIds);
    connectIf(v, "recSpikes", sh.recSpikes);
    connectIf(v, "recMem", sh.recMem);
    b.graph->connect(v["overflow"], sh.overflow);
    connectIf(v, "memTrace", sh.memTrace);
    setShardFields(v);
    setField(v, "capacity", sh.capacity);
    setField(v, "traceCapacity", sh.traceCapacity);
    setField(v, "spikeCapacity", sh.spikeCapacity);
    setField(v, "surrogate", surrogate);
    setField(v, "stepsPerCall", layer.a2a || stepMajor ? 1u : T);
    setField(v, "stepMajor", unsigned(stepMajor));
    setField(v, "threshold", s.threshold);
    setField(v, "surrogateParam", s.surrogateParam);
    setField(v, "ruleValue", s.sparseValue);
    b.graph->setTileMapping(v, tile);
    VertexWork fw = work;
    if (layer.inputMode == codes::INPUT_PARTIAL_CURRENT) { // summed a [B, n] row at a time
      fw.activeInputs = 0;
      fw.partialSources = numSrc;
    }
    setEstimate(v, "LifForward", fw);
  }

  void backward(ComputeSet csBackward) {
    VertexRef v =
        b.graph->addVertex(csBackward, units::lifBackward(neuronCode(s), reset, rule,
                                                          layer.compressedTrace, b.storage()));
    const bool direct = layer.inputMode == codes::INPUT_DIRECT;
    b.graph->connect(v["step"], sh.stepBackward[0]);
    connectIf(v, "lossGradSpikes", sh.lossGradS);
    connectIf(v, "lossGradMem", sh.lossGradU);
    connectIf(v, "nextGrad", sh.nextGrad);
    connectIf(v, "nextGradList", sh.nextGradList);
    connectIf(v, "nextGradListIds", sh.nextGradListIds);
    connectIf(v, "nextGradListValues", sh.nextGradListValues);
    connectIf(v, "nextWeights", sh.nextWeights);
    connectIf(v, "nextWeightsT", sh.nextWeightsT);
    connectIf(v, "ownGrad", sh.ownGrad);
    connectIf(v, "ownWeights", sh.ownWeights);
    connectIf(v, "ownWeightsT", sh.ownWeightsT);
    b.graph->connect(v["surrogates"], sh.surrogates);
    connectIf(v, "current", direct ? sh.current : Tensor());
    connectIf(v, "gradStarts", sh.gradStarts);
    connectIf(v, "gradIds", sh.gradIds);
    b.graph->connect(v["idTrace"], sh.idTrace);
    connectIf(v, "inIds", sh.inRecv);
    connectIf(v, "denseIn", layer.inputMode == codes::INPUT_DENSE_STEPS ? sh.xLocal : Tensor());
    connectIf(v, "inList", sh.xList);
    connectIf(v, "inValues", sh.xValues);
    connectIf(v, "recIds", stepMajor ? sh.recRecv : sh.ownTraces);
    connectIf(v, "recWeights", sh.stored[P_REC_WEIGHT]);
    b.graph->connect(v["gradMem"], sh.gradMem);
    b.graph->connect(v["gradWeights"], sh.grad[P_WEIGHT]);
    b.graph->connect(v["gradBias"], sh.grad[P_BIAS]);
    connectIf(v, "gradRecWeights", sh.grad[P_REC_WEIGHT]);
    connectIf(v, "gradRecBias", sh.grad[P_REC_BIAS]);
    connectIf(v, "currentGradSum", sh.currentGradSum);
    connectIf(v, "gradOut", sh.gradOut);
    connectIf(v, "gradList", sh.gradList);
    connectIf(v, "gradListIds", sh.gradListIds);
    connectIf(v, "gradListValues", sh.gradListValues);
    connectIf(v, "gradStep", sh.gradStep);
    connectIf(v, "nextStep", sh.nextStep);
    // Step-major: the backward re-sends each step's ids (through the forward's buffers).
    connectIf(v, "outIds", stepMajor && next ? sh.outIds : Tensor());
    connectIf(v, "prevIds", sh.prevIds);
    b.graph->connect(v["scratch"], sh.bwdScratch);
    connectIf(v, "liveIds", sh.liveIds);
    connectIf(v, "memTrace", sh.memTrace);
    connectIf(v, "gradBeta", constantGrad(P_BETA));
    connectIf(v, "gradThreshold", constantGrad(P_THRESHOLD));
    setShardFields(v);
    setField(v, "stepsPerCall", layer.a2a || stepMajor ? 1u : T);
    setField(v, "stepMajor", unsigned(stepMajor));
    setField(v, "nextShardSize", next ? next->shardSize : 1u);
    setField(v, "nextLayerSize", next ? next->spec.outputs : 0u);
    setField(v, "ownShardSize", layer.shardSize);
    setField(v, "ownLayerSize", s.outputs);
    setField(v, "threshold", s.threshold);
    setField(v, "surrogate", surrogate);
    setField(v, "surrogateParam", s.surrogateParam);
    b.graph->setTileMapping(v, tile);
    VertexWork bw = work;
    if (layer.inputMode == codes::INPUT_PARTIAL_CURRENT) // its dL/dW comes from the pushers
      bw.activeInputs = 0;
    // dL/dS entries computed per (step, sample): all of the shard with a dense trace, else
    // its gradient trace's (its capacity spread over the rows).
    const unsigned candidates =
        !layer.compressedTrace
            ? n
            : (sh.traceCapacity + b.steps() * b.batch() - 1) / (b.steps() * b.batch());
    const bool nextList = next && next->gradList; // the dots by its lists (listDotCycles)
    bw.activeCandidates =
        (next && !nextList ? candidates * next->spec.outputs / std::max(1u, n) : 0) +
        (layer.a2a ? candidates * s.outputs / std::max(1u, n) : 0);
    if (nextList) {
      bw.listDots = candidates, bw.nextWidth = next->spec.outputs;
      bw.nextLive = unsigned(next->shards.size() * next->shards.front().gradListCapacity /
                             (std::size_t(b.steps()) * b.batch()));
    }
    setEstimate(v, "LifBackward", bw);
  }

  // A pushing shard's W_next.S sums (forward) and dL/dW_next (backward), once the layer's
  // forward or the next layer's backward is done: every step in one call.
  void push(ComputeSet csPush, ComputeSet csPushGrads) {
    VertexRef v = b.graph->addVertex(csPush, units::pushSpikes(b.storage()));
    b.graph->connect(v["idTrace"], sh.idTrace);
    b.graph->connect(v["nextWeights"], sh.nextWeights);
    b.graph->connect(v["nextCurrent"], sh.nextCurrent);
    b.graph->connect(v["nextRows"], sh.nextRows);
    VertexRef g = b.graph->addVertex(csPushGrads, units::pushGrads(b.storage()));
    b.graph->connect(g["idTrace"], sh.idTrace);
    b.graph->connect(g["nextGrad"], sh.nextGrad);
    b.graph->connect(g["nextGradWeights"], sh.nextGradWeights);
    b.graph->connect(g["nextGradRows"], sh.nextGradRows);
    VertexWork pw = work;
    pw.stepsPerCall = T;
    for (VertexRef p : {v, g}) {
      setField(p, "batch", B);
      setField(p, "numNeurons", n);
      setField(p, "numSteps", T);
      setField(p, "offset", sh.first);
      setField(p, "nextShardSize", next->shardSize);
      setField(p, "nextLayerSize", next->spec.outputs);
      b.graph->setTileMapping(p, tile);
    }
    setEstimate(v, units::pushSpikes(b.storage()), pw);
    setEstimate(g, units::pushGrads(b.storage()), pw);
  }

  // A learned constant given once per layer: the sum of every shard's part, on every shard.
  void reduceConstants(ComputeSet cs) {
    for (unsigned p : {P_BETA, P_THRESHOLD}) {
      if (!layer.hasParam(p) || !isLayerScalar(s, p))
        continue;
      VertexRef v = b.graph->addVertex(cs, "LayerGradSum");
      b.graph->connect(v["parts"], sh.gradParts[p]);
      b.graph->connect(v["total"], sh.grad[p]);
      b.graph->setTileMapping(v, tile);
      VertexWork w;
      w.elements = s.outputs + n;
      setEstimate(v, "LayerGradSum", w);
    }
  }

  // Half storage: the half copies of the parameters (start of the forward), and the
  // gradients divided by the loss scale with their non-finite entries counted (end of the
  // backward, before the host decides whether the optimiser runs).
  void halfStorage(ComputeSet csRound, ComputeSet csUnscale) {
    VertexRef u = b.graph->addVertex(csUnscale, "UnscaleGrads");
    unsigned edges = 0;
    VertexWork uw;
    for (unsigned p = 0; p < NUM_PARAMS; ++p)
      edges += layer.hasParam(p);
    b.graph->setFieldSize(u["grads"], edges);
    edges = 0;
    for (unsigned p = 0; p < NUM_PARAMS; ++p) {
      if (!layer.hasParam(p))
        continue;
      b.graph->connect(u["grads"][edges++], sh.grad[p]);
      uw.elements += sh.grad[p].numElements();
      VertexRef v = b.graph->addVertex(csRound, "RoundParams");
      b.graph->connect(v["param"], sh.param[p]);
      b.graph->connect(v["stored"], sh.stored[p]);
      b.graph->setTileMapping(v, tile);
      VertexWork rw;
      rw.elements = sh.param[p].numElements();
      setEstimate(v, "RoundParams", rw);
    }
    b.graph->connect(u["lossScale"], b.io.lossScale[tile]);
    b.graph->connect(u["nonFinite"], sh.nonFinite[0]);
    b.graph->setTileMapping(u, tile);
    setEstimate(u, "UnscaleGrads", uw);
  }

  void optimiser(ComputeSet csOptim) {
    const bool sgd = b.spec.optimizer.kind == OptimizerKind::SGD;
    for (unsigned p = 0; p < NUM_PARAMS; ++p) {
      if (!layer.hasParam(p))
        continue;
      const bool fused =
          p == P_WEIGHT && layer.inputMode == codes::INPUT_DIRECT && b.plan.fusedWeightStep;
      const char *name = fused ? (sgd ? "DirectWeightSgdStep" : "DirectWeightAdamStep")
                               : (sgd ? "SgdStep" : "AdamStep");
      VertexRef v = b.graph->addVertex(csOptim, name);
      if (fused)
        connectWeightGradInputs(v);
      else
        b.graph->connect(v["grad"], b.chunks() > 1 ? sh.gradTotal[p] : sh.grad[p]);
      b.graph->connect(v["param"], sh.param[p]);
      b.graph->connect(v["count"], sh.optCount[p][0]);
      b.graph->connect(v["lr"], b.io.learningRate[tile]);
      if (sgd)
        sgdState(v, p);
      else
        adamState(v, p);
      b.graph->setTileMapping(v, tile);
      VertexWork ow = work; // the fused vertex's product: as DirectWeightGrad's
      ow.elements = sh.param[p].numElements();
      setEstimate(v, name, ow);
    }
  }

  // The fused weight step's product: DirectWeightGrad's inputs, one vertex over the shard.
  void connectWeightGradInputs(VertexRef v) {
    const unsigned group = codes::FUSED_STEP_ROWS;
    b.graph->connect(v["x"], sh.xLocal);
    b.graph->connect(v["currentGradSum"], sh.currentGradSum);
    b.graph->connect(v["rows"], b.var(FLOAT, std::size_t(group) * n, tile, "step_rows", int(l)));
    b.graph->connect(v["nzIndex"], b.var(UNSIGNED_INT, 16 * B, tile, "step_samples", int(l)));
    b.graph->connect(v["nzValue"], b.var(FLOAT, 16 * B, tile, "step_sample_values", int(l)));
    setField(v, "batch", B);
    setField(v, "numInputs", nIn);
    setField(v, "numNeurons", n);
  }

  void sgdState(VertexRef v, unsigned p) {
    const OptimizerSpec &o = b.spec.optimizer;
    connectIf(v, "momentumBuffer", sh.opt1[p]);
    setField(v, "momentum", float(o.momentum));
    setField(v, "oneMinusDampening", float(1.0 - o.dampening));
    setField(v, "weightDecay", float(o.weightDecay));
    setField(v, "nesterov", unsigned(o.nesterov));
  }

  void adamState(VertexRef v, unsigned p) {
    const OptimizerSpec &o = b.spec.optimizer;
    b.graph->connect(v["expAvg"], sh.opt1[p]);
    b.graph->connect(v["expAvgSq"], sh.opt2[p]);
    setField(v, "beta1", float(o.beta1));
    setField(v, "beta2", float(o.beta2));
    setField(v, "oneMinusBeta1", float(1.0 - o.beta1));
    setField(v, "oneMinusBeta2", float(1.0 - o.beta2));
    setField(v, "eps", float(o.eps));
    setField(v, "weightDecay", float(o.weightDecay));
    setField(v, "decoupled", unsigned(o.kind == OptimizerKind::AdamW));
  }
};

// The loss over groups of samples (one OutputLoss vertex per group) and their sum.
struct LossWiring : Wiring {
  void addLossVertices(ComputeSet cs, ComputeSet csSum) {
    const HostTensors &io = b.io;
    const unsigned T = b.steps(), C = b.plan.numOutputs;
    const std::size_t record = std::size_t(T) * C;
    for (unsigned k = 0; k < b.plan.lossGroups.size(); ++k) {
      const LossGroup &g = b.plan.lossGroups[k];
      const unsigned Bg = g.last - g.first;
      const Tensor &lab = b.chunks() > 1 ? io.labelsChunk : io.labels;
      const Tensor &wts = b.chunks() > 1 ? io.weightsChunk : io.sampleWeights;
      VertexRef v = b.graph->addVertex(cs, units::outputLoss(b.storage(), lossCode()));
      b.graph->connect(v["spikes"], io.gatheredS.slice(record * g.first, record * g.last));
      b.graph->connect(v["membranes"], io.gatheredU.slice(record * g.first, record * g.last));
      b.graph->connect(v["labels"], lab.slice(g.first, g.last));
      b.graph->connect(v["sampleWeights"], wts.slice(g.first, g.last));
      b.graph->connect(v["gradSpikes"], io.gradS.slice(record * g.first, record * g.last));
      b.graph->connect(v["gradMembranes"], io.gradU.slice(record * g.first, record * g.last));
      b.graph->connect(v["loss"], b.plan.lossGroups.size() > 1 ? io.lossParts[k] : io.lossValue[0]);
      b.graph->connect(v["scratch"], io.lossScratch.slice(2 * C * k, 2 * C * (k + 1)));
      // Half storage: dL/dS and dL/dU stored times the loss scale; float: as computed.
      connectIf(v, "lossScale", b.half() ? io.lossScale.slice(g.tile, g.tile + 1) : Tensor());
      setLossFields(v, Bg);
      b.graph->setTileMapping(v, g.tile);
    }
    if (b.plan.lossGroups.size() > 1) {
      VertexRef v = b.graph->addVertex(csSum, "LossSum");
      b.graph->connect(v["parts"], io.lossPartsLocal);
      b.graph->connect(v["loss"], io.lossValue[0]);
      b.graph->setTileMapping(v, b.plan.lossTile);
      VertexWork w;
      w.elements = b.plan.lossGroups.size();
      setEstimate(v, "LossSum", w);
    }
  }

  unsigned lossCode() const {
    static_assert(unsigned(LossKind::CeMaxMembrane) == codes::CE_MAX_MEMBRANE &&
                      unsigned(LossKind::MseCount) == codes::MSE_COUNT,
                  "LossKind's order is codes::Loss's (units::LOSSES)");
    return unsigned(b.spec.loss.kind);
  }

  void setLossFields(VertexRef v, unsigned B) {
    const unsigned T = b.steps();
    const LossSpec &ls = b.spec.loss;
    float on = ls.onTarget, off = ls.offTarget;
    if (ls.kind == LossKind::MseCount) {
      // Target spike counts as popsnn.losses.mse_count_loss (snnTorch): int() truncation,
      // times the population per class.
      const unsigned C = b.plan.numOutputs, K = b.plan.numClasses;
      const double perClass = K != C ? double(C) / K : 1.0;
      on = float(int(T * double(ls.correctRate) * perClass));
      off = float(int(T * double(ls.incorrectRate) * perClass));
    }
    setField(v, "numSteps", T);
    setField(v, "batch", B);
    setField(v, "numOutputs", b.plan.numOutputs);
    setField(v, "numClasses", b.plan.numClasses);
    setField(v, "shardSize", b.plan.outShardSize);
    setField(v, "onTarget", on);
    setField(v, "offTarget", off);
    VertexWork w;
    w.batch = B;
    w.neurons = b.plan.numOutputs;
    w.elements = T * B * b.plan.numOutputs;
    setEstimate(v, "OutputLoss", w); // one estimate for every stored type and kind
  }
};

// Chunks: the first chunk's gradients (and loss) are copied into the totals, the others'
// added by AccumulateGrad vertices on the owning tiles.
CopyList addChunkAccumulation(GraphBuild &b, ComputeSet csAccum) {
  CopyList firstChunkGrads;
  Wiring w{b};
  auto accumulate = [&](const Tensor &total, const Tensor &part, unsigned tile) {
    VertexRef v = b.graph->addVertex(csAccum, "AccumulateGrad");
    b.graph->connect(v["total"], total);
    b.graph->connect(v["part"], part);
    b.graph->setTileMapping(v, tile);
    VertexWork work;
    work.elements = total.numElements();
    w.setEstimate(v, "AccumulateGrad", work);
    firstChunkGrads.add(part, total);
  };
  for (auto &layer : b.layers)
    for (auto &sh : layer.shards)
      for (unsigned p = 0; p < NUM_PARAMS; ++p)
        if (layer.hasParam(p))
          accumulate(sh.gradTotal[p], sh.grad[p], sh.tile);
  accumulate(b.io.lossTotal, b.io.lossValue, b.plan.lossTile);
  return firstChunkGrads;
}

} // namespace

CopyList addVertices(GraphBuild &b, ComputeSets &cs) {
  Graph &graph = *b.graph;
  cs.direct = graph.addComputeSet("direct_current");
  cs.directGrad = graph.addComputeSet("direct_weight_grad");
  cs.loss = graph.addComputeSet("loss");
  cs.optimiser = graph.addComputeSet("optimiser");
  cs.accumulate = graph.addComputeSet("accumulate_chunk_gradients");
  cs.reduceConstants = graph.addComputeSet("reduce_constant_gradients");
  if (b.half()) {
    cs.roundParams = graph.addComputeSet("round_params_to_half");
    cs.unscale = graph.addComputeSet("unscale_gradients");
  }
  for (auto &layer : b.layers) {
    const std::string tag = "layer" + std::to_string(layer.index);
    cs.forward.push_back(graph.addComputeSet(tag + "/forward"));
    cs.backward.push_back(graph.addComputeSet(tag + "/backward"));
    cs.push.emplace_back();
    cs.pushGrads.emplace_back();
    if (layer.push) {
      cs.push.back() = graph.addComputeSet(tag + "/push");
      cs.pushGrads.back() = graph.addComputeSet(tag + "/push_grads");
    }
    for (Shard &sh : layer.shards) {
      ShardWiring wire(b, layer, sh);
      if (layer.inputMode == codes::INPUT_DIRECT)
        wire.direct(cs.direct, cs.directGrad);
      wire.forward(cs.forward.back());
      wire.backward(cs.backward.back());
      if (layer.push)
        wire.push(cs.push.back(), cs.pushGrads.back());
      wire.reduceConstants(cs.reduceConstants);
      if (b.half())
        wire.halfStorage(cs.roundParams, cs.unscale);
      wire.optimiser(cs.optimiser);
    }
  }
  // The groups' loss parts are summed beside the output layer's first backward phase.
  LossWiring{b}.addLossVertices(cs.loss, cs.backward.back());
  return b.chunks() > 1 ? addChunkAccumulation(b, cs.accumulate) : CopyList{};
}

} // namespace popsnn
