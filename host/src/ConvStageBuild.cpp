#include "ConvStageBuild.hpp"

#include <algorithm>
#include <numeric>

#include "CycleEstimates.hpp"
#include "popsnn/VertexUnits.hpp"

namespace popsnn {

using namespace poplar;
using namespace poplar::program;

namespace {

unsigned ceilDiv(unsigned a, unsigned b) { return (a + b - 1) / b; }

// The pooling vertex `name` (PoolForward, PoolBackward) of the pool's kind.
std::string poolVertex(const char *name, const PoolSpec &p) {
  return std::string(name) + (p.max ? "<popsnn::conv::MaxPool>" : "<popsnn::conv::AvgPool>");
}

// The first of worker k's rows when `rows` rows are split over `workers` (k = workers: the end).
std::size_t workerRow(unsigned rows, unsigned k, unsigned workers) {
  return std::size_t(rows) * k / workers;
}

// Shard i's ConvForward vertices: its rows split over the tile's workers (ConvPlan::workers),
// each with its own work; `out` the current or (the pool fused) the pooled map and `argmax`.
void addForwardWorkers(ConvStageBuild &s, unsigned i, ComputeSet conv, const Tensor &out,
                       const Tensor &argmax) {
  const ConvStageSpec &spec = s.spec;
  const ConvShard &sh = s.plan.shards[i];
  ConvShardTensors &t = s.shards[i];
  const bool fused = pairsMaxPoolFirst(spec);
  const unsigned rows = spec.convRows(sh.rows), workers = s.plan.workers;
  const std::string name =
      fused ? "ConvForward<popsnn::conv::MaxPooledOut>" : "ConvForward<popsnn::conv::CurrentOut>";
  const std::size_t outRow = out.numElements() / rows;
  for (unsigned k = 0; k < workers; ++k) {
    const std::size_t lo = workerRow(rows, k, workers), hi = workerRow(rows, k + 1, workers);
    VertexRef v = s.graph.addVertex(conv, name);
    const std::pair<const char *, Tensor> fields[] = {
        {"x", t.x.slice(lo * s.inSize(), hi * s.inSize())},
        {"weights", t.weights},
        {"bias", t.bias},
        {"argmax", fused ? argmax.slice(lo * outRow, hi * outRow) : argmax},
        {"current", out.slice(lo * outRow, hi * outRow)},
        {"work", t.work[k]},
        {"denseRows", t.denseRows.slice(k, k + 1)}};
    for (const auto &[field, tensor] : fields)
      s.graph.connect(v[field], tensor);
    s.graph.setInitialValue(v["rows"], unsigned(hi - lo));
    s.graph.setInitialValue(v["outChannels"], sh.channels);
    s.setWindow(v, spec.conv, spec.inChannels, s.plan.maps[0], s.plan.maps[1]);
    VertexWork w;
    w.batch = unsigned(hi - lo), w.neurons = sh.channels, w.inputs = s.taps();
    w.elements = s.inSize(), w.positions = s.positions(1);
    w.kernelArea = spec.conv.kernelH * spec.conv.kernelW;
    w.activeInputs = unsigned(s.activeInputs[i] + 0.5f);
    s.graph.setPerfEstimate(v, estimateCycles(name, w));
    s.graph.setTileMapping(v, sh.tile);
  }
}

// The host-facing input, weights and bias, each shard's share on a tile, and the fan-out
// of them to every shard that needs them (row groups share weights, channel groups input).
void createInputs(ConvStageBuild &s) {
  const ConvStageSpec &spec = s.spec;
  const bool linked = !s.linkedX.empty();
  s.xHost = linked ? concat(s.linkedX)
                   : s.graph.addVariable(FLOAT,
                                         {std::size_t(spec.convRows(spec.rows)) * s.inSize()}, "x");
  s.weightHost = s.graph.addVariable(FLOAT, {std::size_t(spec.outChannels) * s.taps()}, "weight");
  s.biasHost = s.graph.addVariable(FLOAT, {std::size_t(spec.outChannels)}, "bias");
  for (const ConvShard &sh : s.plan.shards) {
    ConvShardTensors &t = s.shards.emplace_back();
    const std::size_t first = spec.convRows(sh.firstRow), rows = spec.convRows(sh.rows);
    const Tensor xRows = s.xHost.slice(first * s.inSize(), (first + rows) * s.inSize());
    const Tensor w = s.weightHost.slice(std::size_t(sh.firstChannel) * s.taps(),
                                        std::size_t(sh.firstChannel + sh.channels) * s.taps());
    const Tensor b = s.biasHost.slice(sh.firstChannel, sh.firstChannel + sh.channels);
    if (sh.channelGroup == 0 && !linked) // linked rows are on this tile already
      s.graph.setTileMapping(xRows, sh.tile);
    if (sh.rowGroup == 0) {
      s.graph.setTileMapping(w, sh.tile);
      s.graph.setTileMapping(b, sh.tile);
    }
    t.x = sh.channelGroup == 0 ? xRows : s.var(FLOAT, xRows.numElements(), sh.tile, "x_local");
    t.weights = sh.rowGroup == 0 ? w : s.var(FLOAT, w.numElements(), sh.tile, "w_local");
    t.bias = sh.rowGroup == 0 ? b : s.var(FLOAT, b.numElements(), sh.tile, "b_local");
    if (sh.channelGroup)
      s.fanout.add(xRows, t.x);
    if (sh.rowGroup) {
      s.fanout.add(w, t.weights);
      s.fanout.add(b, t.bias);
    }
  }
}

// The convolution, then each pool, on every shard.
void addForward(ConvStageBuild &s) {
  const ConvStageSpec &spec = s.spec;
  ComputeSet conv = s.graph.addComputeSet("conv_forward");
  // With the first pool fused into the convolution (pairsMaxPoolFirst), the current is never
  // stored: ConvForward writes that pool's output and argmax.
  const bool fused = pairsMaxPoolFirst(spec);
  const unsigned firstPool = fused ? 1 : 0;
  std::vector<ComputeSet> pools;
  for (unsigned k = firstPool; k < spec.pools.size(); ++k)
    pools.push_back(s.graph.addComputeSet("pool_forward" + std::to_string(k)));
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    const ConvShard &sh = s.plan.shards[i];
    ConvShardTensors &t = s.shards[i];
    const unsigned c = sh.channels, tile = sh.tile, rows = spec.convRows(sh.rows);
    t.maps.resize(s.plan.maps.size());
    t.argmax.resize(s.plan.maps.size());
    const std::size_t pooled = fused ? std::size_t(rows) * c * s.positions(2) : 0;
    t.maps[1] = s.var(FLOAT, fused ? 0 : std::size_t(rows) * c * s.positions(1), tile, "current");
    if (fused) {
      t.maps[2] = s.var(FLOAT, pooled, tile, "pooled");
      t.argmax[2] = s.var(UNSIGNED_INT, pooled, tile, "argmax");
    }
    const unsigned workers = s.plan.workers;
    for (unsigned k = 0; k < workers; ++k)
      t.work.push_back(s.var(FLOAT, convWorkFloats(spec, c, workers), tile, "conv_work"));
    t.denseRows = s.var(UNSIGNED_INT, workers, tile, "dense_rows");
    addForwardWorkers(s, i, conv, fused ? t.maps[2] : t.maps[1],
                      fused ? t.argmax[2] : s.var(UNSIGNED_INT, 0, tile, "no_argmax"));
    for (unsigned k = firstPool; k < spec.pools.size(); ++k) {
      const PoolSpec &p = spec.pools[k];
      const unsigned m = k + 2;
      t.maps[m] = s.var(FLOAT, std::size_t(rows) * c * s.positions(m), tile, "pooled");
      VertexRef pv = s.graph.addVertex(pools[k - firstPool], poolVertex("PoolForward", p));
      s.graph.connect(pv["x"], t.maps[m - 1]);
      s.graph.connect(pv["y"], t.maps[m]);
      // An average pool keeps no argmax: its field takes an empty tensor.
      t.argmax[m] = s.var(UNSIGNED_INT, p.max ? t.maps[m].numElements() : 0, tile, "argmax");
      s.graph.connect(pv["argmax"], t.argmax[m]);
      s.graph.setInitialValue(pv["maps"], rows * c);
      s.setWindow(pv, p.window, 1, s.plan.maps[m - 1], s.plan.maps[m]);
      VertexWork pw;
      pw.batch = rows, pw.neurons = c, pw.positions = s.positions(m);
      pw.kernelArea = p.window.kernelH * p.window.kernelW;
      s.graph.setPerfEstimate(pv, estimateCycles(poolVertex("PoolForward", p), pw));
      s.graph.setTileMapping(pv, tile);
    }
  }
  s.forward.add(Execute(conv));
  for (const ComputeSet &cs : pools)
    s.forward.add(Execute(cs));
}

// dL/d of every map after the input, on every shard.
void createMapGrads(ConvStageBuild &s) {
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    ConvShardTensors &t = s.shards[i];
    t.grads.resize(s.plan.maps.size());
    const ConvShard &sh = s.plan.shards[i];
    // With the first pool fused (gradChannelsLast) the gradient vertices form the
    // convolution's dL/dI row by row from the pool's: not stored.
    for (unsigned m = 1; m <= s.lastMap(); ++m)
      t.grads[m] = s.var(FLOAT,
                         m == 1 && s.gradChannelsLast()
                             ? 0
                             : std::size_t(s.spec.convRows(sh.rows)) * sh.channels * s.positions(m),
                         sh.tile, "map_grad");
  }
}

// dL/d of each pool's input, last pool first, on every shard.
void addPoolBackward(ConvStageBuild &s) {
  const ConvStageSpec &spec = s.spec;
  // The first pool's backward, fused, runs inside the gradient vertices (gradRow).
  for (unsigned m = s.lastMap(); m >= (s.gradChannelsLast() ? 3u : 2u); --m) {
    const PoolSpec &p = spec.pools[m - 2];
    ComputeSet cs = s.graph.addComputeSet("pool_backward" + std::to_string(m - 2));
    for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
      const ConvShard &sh = s.plan.shards[i];
      ConvShardTensors &t = s.shards[i];
      const std::string name = poolVertex("PoolBackward", p);
      VertexRef v = s.graph.addVertex(cs, name);
      s.graph.connect(v["grad"], t.grads[m]);
      s.graph.connect(v["gradInput"], t.grads[m - 1]);
      s.graph.connect(v["argmax"], t.argmax[m]);
      s.graph.setInitialValue(v["maps"], spec.convRows(sh.rows) * sh.channels);
      s.setWindow(v, p.window, 1, s.plan.maps[m - 1], s.plan.maps[m]);
      VertexWork w;
      w.batch = spec.convRows(sh.rows), w.neurons = sh.channels, w.positions = s.positions(m);
      w.kernelArea = p.window.kernelH * p.window.kernelW;
      s.graph.setPerfEstimate(v, estimateCycles(name, w));
      s.graph.setTileMapping(v, sh.tile);
    }
    s.backward.add(Execute(cs));
  }
}

// `out` (mapped slice by slice) = the sum of the `parts` of equal length, slice s of it on
// tiles[s]: each tile receives its slice of every part and sums them (SumParts).
void addSum(ConvStageBuild &s, const std::vector<Tensor> &parts, const std::vector<unsigned> &tiles,
            Tensor out, ComputeSet cs, CopyList &copies) {
  const std::size_t n = out.numElements(), slice = ceilDiv(unsigned(n), unsigned(tiles.size()));
  for (unsigned k = 0; k < tiles.size() && k * slice < n; ++k) {
    const std::size_t lo = k * slice, hi = std::min(n, lo + slice);
    Tensor gathered = s.var(FLOAT, parts.size() * (hi - lo), tiles[k], "sum_parts");
    for (unsigned q = 0; q < parts.size(); ++q)
      copies.add(parts[q].slice(lo, hi), gathered.slice(q * (hi - lo), (q + 1) * (hi - lo)));
    s.graph.setTileMapping(out.slice(lo, hi), tiles[k]);
    VertexRef v = s.graph.addVertex(cs, "SumParts");
    s.graph.connect(v["parts"], gathered);
    s.graph.connect(v["out"], out.slice(lo, hi));
    s.graph.setInitialValue(v["numParts"], unsigned(parts.size()));
    VertexWork w;
    w.elements = unsigned(gathered.numElements());
    s.graph.setPerfEstimate(v, estimateCycles("SumParts", w));
    s.graph.setTileMapping(v, tiles[k]);
  }
}

// Shard i's gradient vertex `kind` (ConvWeightGrad, ConvInputGrad) of worker k's rows `lo` to
// `hi`, on that worker's work, with the fields the two share set.
VertexRef addGradWorker(ConvStageBuild &s, unsigned i, ComputeSet cs, const std::string &kind,
                        unsigned k, std::size_t lo, std::size_t hi) {
  const ConvStageSpec &spec = s.spec;
  const ConvShard &sh = s.plan.shards[i];
  ConvShardTensors &t = s.shards[i];
  // Fused, the pool's gradient and argmax: the vertex forms each row of dL/dI (gradRow).
  const bool fused = s.gradChannelsLast();
  const Tensor grad = t.grads[fused ? 2 : 1];
  const std::size_t gradRow = grad.numElements() / spec.convRows(sh.rows);
  const std::string name = kind + s.gradLayout();
  VertexRef v = s.graph.addVertex(cs, name);
  s.graph.connect(v["grad"], grad.slice(lo * gradRow, hi * gradRow));
  s.graph.connect(v["argmax"], fused ? t.argmax[2].slice(lo * gradRow, hi * gradRow)
                                     : s.var(UNSIGNED_INT, 0, sh.tile, "no_argmax"));
  s.graph.connect(v["work"], t.work[k]);
  s.graph.setInitialValue(v["rows"], unsigned(hi - lo));
  s.graph.setInitialValue(v["outChannels"], sh.channels);
  s.setWindow(v, spec.conv, spec.inChannels, s.plan.maps[0], s.plan.maps[1]);
  s.graph.setTileMapping(v, sh.tile);
  VertexWork w;
  w.batch = unsigned(hi - lo), w.neurons = sh.channels, w.inputs = s.taps();
  w.elements = s.inSize(), w.positions = s.positions(1);
  w.activeCandidates = unsigned(s.activeGrads[i] + 0.5f);
  w.activeInputs = unsigned(s.activeInputs[i] + 0.5f);
  w.kernelArea = spec.conv.kernelH * spec.conv.kernelW;
  s.graph.setPerfEstimate(v, estimateCycles(name, w));
  return v;
}

// Input gradients, then weight and bias gradients, on every shard over dL/dI's non-zero
// entries, each shard's rows split over its tile's workers (the two in turn on the workers'
// work); with several workers each weight gradient is a partial sum, summed on the tile.
void addGradVertices(ConvStageBuild &s) {
  const ConvStageSpec &spec = s.spec;
  ComputeSet inputCs = s.graph.addComputeSet("conv_input_grads");
  ComputeSet weightCs = s.graph.addComputeSet("conv_weight_grads");
  ComputeSet partsCs = s.graph.addComputeSet("conv_weight_grad_parts");
  const unsigned workers = s.plan.workers;
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    const ConvShard &sh = s.plan.shards[i];
    ConvShardTensors &t = s.shards[i];
    const unsigned c = sh.channels, rows = spec.convRows(sh.rows);
    const std::size_t wb = std::size_t(c) * s.taps() + c;
    t.gradWB = s.var(FLOAT, wb, sh.tile, "grad_wb");
    const Tensor parts =
        workers > 1 ? s.var(FLOAT, workers * wb, sh.tile, "grad_wb_parts") : t.gradWB;
    t.activeGrads = s.var(UNSIGNED_INT, workers, sh.tile, "active_grads");
    t.inputDenseRows = s.var(UNSIGNED_INT, workers, sh.tile, "input_grad_dense_rows");
    if (spec.inputGrad)
      t.gradInput = s.linkedGradInput.empty()
                        ? s.var(FLOAT, t.x.numElements(), sh.tile, "grad_input_share")
                        : s.linkedGradInput[i];
    for (unsigned k = 0; k < workers; ++k) {
      const std::size_t lo = workerRow(rows, k, workers), hi = workerRow(rows, k + 1, workers);
      const Tensor part = parts.slice(k * wb, (k + 1) * wb);
      VertexRef v = addGradWorker(s, i, weightCs, "ConvWeightGrad", k, lo, hi);
      s.graph.connect(v["x"], t.x.slice(lo * s.inSize(), hi * s.inSize()));
      s.graph.connect(v["gradWeights"], part.slice(0, wb - c));
      s.graph.connect(v["gradBias"], part.slice(wb - c, wb));
      s.graph.connect(v["activeGrads"], t.activeGrads.slice(k, k + 1));
      if (!spec.inputGrad)
        continue;
      VertexRef g = addGradWorker(s, i, inputCs, "ConvInputGrad", k, lo, hi);
      s.graph.connect(g["weights"], t.weights);
      s.graph.connect(g["gradInput"], t.gradInput.slice(lo * s.inSize(), hi * s.inSize()));
      s.graph.connect(g["denseRows"], t.inputDenseRows.slice(k, k + 1));
    }
    if (workers > 1) {
      VertexRef v = s.graph.addVertex(partsCs, "SumParts");
      s.graph.connect(v["parts"], parts);
      s.graph.connect(v["out"], t.gradWB);
      s.graph.setInitialValue(v["numParts"], workers);
      VertexWork w;
      w.elements = unsigned(parts.numElements());
      s.graph.setPerfEstimate(v, estimateCycles("SumParts", w));
      s.graph.setTileMapping(v, sh.tile);
    }
  }
  if (spec.inputGrad)
    s.backward.add(Execute(inputCs));
  s.backward.add(Execute(weightCs));
  if (workers > 1)
    s.backward.add(Execute(partsCs));
}

// The gradients' sums: dL/dW and dL/db over the row groups, dL/dx over the channel groups.
void addGradSums(ConvStageBuild &s) {
  const ConvPlan &plan = s.plan;
  ComputeSet cs = s.graph.addComputeSet("conv_grad_sums");
  CopyList copies;
  auto shardAt = [&](unsigned g, unsigned q) { return g * plan.rowGroups + q; };
  for (unsigned g = 0; g < plan.channelGroups; ++g) {
    if (plan.rowGroups == 1) {
      s.gradWBSum.push_back(s.shards[shardAt(g, 0)].gradWB);
      continue;
    }
    std::vector<Tensor> parts;
    std::vector<unsigned> tiles;
    for (unsigned q = 0; q < plan.rowGroups; ++q) {
      parts.push_back(s.shards[shardAt(g, q)].gradWB);
      tiles.push_back(plan.shards[shardAt(g, q)].tile);
    }
    s.gradWBSum.push_back(s.graph.addVariable(FLOAT, {parts[0].numElements()}, "grad_wb_sum"));
    addSum(s, parts, tiles, s.gradWBSum.back(), cs, copies);
  }
  for (unsigned q = 0; s.spec.inputGrad && q < plan.rowGroups; ++q) {
    if (plan.channelGroups == 1) {
      s.gradInputSum.push_back(s.shards[shardAt(0, q)].gradInput);
      continue;
    }
    std::vector<Tensor> parts;
    std::vector<unsigned> tiles;
    for (unsigned g = 0; g < plan.channelGroups; ++g) {
      parts.push_back(s.shards[shardAt(g, q)].gradInput);
      tiles.push_back(plan.shards[shardAt(g, q)].tile);
    }
    s.gradInputSum.push_back(s.graph.addVariable(FLOAT, {parts[0].numElements()}, "grad_x_sum"));
    addSum(s, parts, tiles, s.gradInputSum.back(), cs, copies);
  }
  s.backward.add(copies.program());
  s.backward.add(Execute(cs));
}

// Columns [lo, hi) of a [rows, n] tensor, flattened (contiguous when they are all n columns:
// otherwise the runtime gathers and scatters them around the compute set, as Poplar does).
Tensor columns(const Tensor &t, std::size_t rows, std::size_t lo, std::size_t hi) {
  const std::size_t n = t.numElements() / rows;
  return lo == 0 && hi == n ? t : t.reshape({rows, n}).slice({0, lo}, {rows, hi}).flatten();
}

// Shard i's neuron vertices (the forward into fwd, the backward into bwd when there is
// one), its neurons split over ConvPlan::neuronWorkers workers: each neuron's steps are
// independent of the others'.
void addNeuronWorkers(ConvStageBuild &s, unsigned i, ComputeSet fwd, ComputeSet *bwd) {
  const ConvNeuronSpec &nu = s.spec.neuron;
  const ConvShard &sh = s.plan.shards[i];
  ConvShardTensors &t = s.shards[i];
  const unsigned n = sh.channels * s.positions(s.lastMap()), samples = sh.rows / s.spec.steps;
  const unsigned workers = s.plan.neuronWorkers;
  const std::string reset = units::RESETS[nu.reset];
  const std::size_t currentRows = s.spec.direct ? samples : sh.rows;
  for (unsigned k = 0; k < workers; ++k) {
    const std::size_t lo = workerRow(n, k, workers), hi = workerRow(n, k + 1, workers);
    const unsigned m = unsigned(hi - lo);
    VertexRef v = s.graph.addVertex(fwd, "ConvNeuronForward<" + reset + ">");
    s.graph.connect(v["current"], columns(t.maps.back(), currentRows, lo, hi));
    s.graph.connect(v["membranes"], columns(t.membranes, sh.rows, lo, hi));
    s.graph.connect(v["spikes"], columns(t.spikes, sh.rows, lo, hi));
    s.graph.connect(v["state"], s.var(FLOAT, 2 * m, sh.tile, "neuron_state"));
    std::vector<VertexRef> vertices{v};
    if (bwd) {
      VertexRef g = s.graph.addVertex(*bwd, "ConvNeuronBackward<" + reset + "," +
                                                units::RULES[nu.rule] + ">");
      s.graph.connect(g["membranes"], columns(t.membranes, sh.rows, lo, hi));
      s.graph.connect(g["gradSpikes"], columns(t.gradSpikes, sh.rows, lo, hi));
      s.graph.connect(g["gradMembranes"], s.spec.gradMembranes
                                              ? columns(t.gradMembranes, sh.rows, lo, hi)
                                              : t.gradMembranes);
      s.graph.connect(g["gradCurrent"], columns(t.grads.back(), currentRows, lo, hi));
      s.graph.connect(g["carry"], s.var(FLOAT, m, sh.tile, "grad_carry"));
      s.graph.setInitialValue(g["surrogate"], nu.surrogate);
      s.graph.setInitialValue(g["surrogateParam"], nu.surrogateParam);
      s.graph.setInitialValue(g["ruleValue"], nu.ruleValue);
      vertices.push_back(g);
    }
    VertexWork w;
    w.batch = samples, w.neurons = m, w.steps = s.spec.steps;
    for (VertexRef u : vertices) {
      s.graph.setInitialValue(u["samples"], samples);
      s.graph.setInitialValue(u["steps"], s.spec.steps);
      s.graph.setInitialValue(u["neurons"], m);
      s.graph.setInitialValue(u["constantCurrent"], s.spec.direct ? 1u : 0u);
      s.graph.setInitialValue(u["beta"], nu.beta);
      s.graph.setInitialValue(u["threshold"], nu.threshold);
      s.graph.setTileMapping(u, sh.tile);
    }
    s.graph.setPerfEstimate(v, estimateCycles("ConvNeuronForward", w));
    if (bwd)
      s.graph.setPerfEstimate(vertices[1], estimateCycles("ConvNeuronBackward", w));
  }
}

// The neurons on each shard's last map: forward, and (with a backward) their BPTT into the
// last map's gradient, which the pools and the convolution's backward then read.
void addNeurons(ConvStageBuild &s, bool backward) {
  ComputeSet fwd = s.graph.addComputeSet("conv_neurons");
  ComputeSet bwd = s.graph.addComputeSet("conv_neurons_backward");
  const unsigned P = s.positions(s.lastMap());
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    const ConvShard &sh = s.plan.shards[i];
    ConvShardTensors &t = s.shards[i];
    const std::size_t size = std::size_t(sh.rows) * sh.channels * P;
    t.membranes = s.var(FLOAT, size, sh.tile, "membranes");
    t.spikes = s.var(FLOAT, size, sh.tile, "spikes");
    if (backward) {
      t.gradSpikes = s.var(FLOAT, size, sh.tile, "grad_spikes");
      // Without dL/dU from outside the field takes an empty tensor.
      t.gradMembranes = s.var(FLOAT, s.spec.gradMembranes ? size : 0, sh.tile, "grad_membranes");
    }
    addNeuronWorkers(s, i, fwd, backward ? &bwd : nullptr);
  }
  s.forward.add(Execute(fwd));
  if (backward)
    s.backward.add(Execute(bwd));
}

} // namespace

void buildConvStage(ConvStageBuild &s, bool backward) {
  createInputs(s);
  addForward(s);
  if (backward)
    createMapGrads(s);
  if (s.spec.neuron.present) // its backward first: it writes the last map's gradient
    addNeurons(s, backward);
  if (backward) {
    addPoolBackward(s);
    addGradVertices(s);
    addGradSums(s);
  }
}

unsigned readCounts(Engine &engine, const std::string &handle, unsigned workers) {
  std::vector<unsigned> counts(workers);
  engine.readTensor(handle, counts.data(), counts.data() + counts.size());
  return std::accumulate(counts.begin(), counts.end(), 0u);
}

std::size_t hostRow(const ConvStageSpec &spec, std::size_t row) {
  const std::size_t samples = spec.rows / spec.steps;
  return (row % spec.steps) * samples + row / spec.steps;
}

std::vector<float> shardBlock(const ConvStageSpec &spec, const ConvShard &sh, const float *host,
                              unsigned channels, unsigned firstChannel, unsigned c,
                              std::size_t per) {
  std::vector<float> block(std::size_t(sh.rows) * c * per);
  for (unsigned r = 0; r < sh.rows; ++r)
    std::copy_n(host + (hostRow(spec, sh.firstRow + r) * channels + firstChannel) * per, c * per,
                block.begin() + std::size_t(r) * c * per);
  return block;
}
void blockToHost(const ConvStageSpec &spec, const ConvShard &sh, const std::vector<float> &block,
                 unsigned channels, unsigned firstChannel, unsigned c, std::size_t per,
                 float *host) {
  for (unsigned r = 0; r < sh.rows; ++r)
    std::copy_n(block.begin() + std::size_t(r) * c * per, c * per,
                host + (hostRow(spec, sh.firstRow + r) * channels + firstChannel) * per);
}

} // namespace popsnn
