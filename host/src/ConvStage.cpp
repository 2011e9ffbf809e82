#include "ConvStage.hpp"

#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

#include <algorithm>
#include <stdexcept>

#include "CycleEstimates.hpp"
#include "Devices.hpp"
#include "Exchange.hpp"
#include "popsnn/VertexUnits.hpp"

namespace popsnn {

using namespace poplar;
using namespace poplar::program;

namespace {

unsigned ceilDiv(unsigned a, unsigned b) { return (a + b - 1) / b; }

// One shard's tensors, all on its tile. maps[k], grads[k]: layer k's output (1: the
// convolution, 2..: the pools) and dL/d of it; argmax[k] for a max pool's output.
struct ShardTensors {
  Tensor x, weights, bias, work, denseRows, activeGrads, gradWB, gradInput;
  Tensor membranes, spikes, state, gradSpikes, gradMembranes; // the neurons'

  std::vector<Tensor> maps, grads, argmax;
};

struct StageBuild {
  StageBuild(const ConvStageSpec &sp, const ConvPlan &p, Graph &g) : spec(sp), plan(p), graph(g) {}
  const ConvStageSpec &spec;
  const ConvPlan &plan;
  Graph &graph;
  std::vector<float> activeInputs; // mean non-zero inputs per row, per shard (estimates)
  std::vector<float> activeGrads;  // mean non-zero dL/dI entries per row, per shard
  std::vector<ShardTensors> shards;
  Tensor xHost, weightHost, biasHost;
  std::vector<Tensor> gradWBSum, gradInputSum; // per channel group, per row group
  CopyList fanout; // one exchange phase (a Copy per piece would be a phase each)
  Sequence forward, backward;

  unsigned inSize() const { return spec.inChannels * spec.inHeight * spec.inWidth; }
  unsigned taps() const { return spec.inChannels * spec.conv.kernelH * spec.conv.kernelW; }
  unsigned positions(unsigned k) const { return plan.maps[k].h * plan.maps[k].w; }
  unsigned lastMap() const { return unsigned(plan.maps.size()) - 1; }

  Tensor var(const Type &type, std::size_t n, unsigned tile, const std::string &name) {
    Tensor t = graph.addVariable(type, {n}, name);
    graph.setTileMapping(t, tile);
    return t;
  }
  void setWindow(VertexRef v, const Window2d &w, unsigned channels, MapSize in, MapSize out) {
    const unsigned values[] = {channels,  in.h,   in.w,   w.kernelH, w.kernelW, w.strideH,
                               w.strideW, w.padH, w.padW, out.h,     out.w};
    const char *names[] = {"inChannels",  "inHeight",  "inWidth", "kernelHeight",
                           "kernelWidth", "strideY",   "strideX", "padY",
                           "padX",        "outHeight", "outWidth"};
    for (unsigned k = 0; k < 11; ++k)
      graph.setInitialValue(v[names[k]], values[k]);
  }
};

// The host-facing input, weights and bias, each shard's share on a tile, and the fan-out
// of them to every shard that needs them (row groups share weights, channel groups input).
void createInputs(StageBuild &s) {
  const ConvStageSpec &spec = s.spec;
  s.xHost = s.graph.addVariable(FLOAT, {std::size_t(spec.rows) * s.inSize()}, "x");
  s.weightHost = s.graph.addVariable(FLOAT, {std::size_t(spec.outChannels) * s.taps()}, "weight");
  s.biasHost = s.graph.addVariable(FLOAT, {std::size_t(spec.outChannels)}, "bias");
  for (const ConvShard &sh : s.plan.shards) {
    ShardTensors &t = s.shards.emplace_back();
    const Tensor xRows = s.xHost.slice(std::size_t(sh.firstRow) * s.inSize(),
                                       std::size_t(sh.firstRow + sh.rows) * s.inSize());
    const Tensor w = s.weightHost.slice(std::size_t(sh.firstChannel) * s.taps(),
                                        std::size_t(sh.firstChannel + sh.channels) * s.taps());
    const Tensor b = s.biasHost.slice(sh.firstChannel, sh.firstChannel + sh.channels);
    if (sh.channelGroup == 0)
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
void addForward(StageBuild &s) {
  const ConvStageSpec &spec = s.spec;
  ComputeSet conv = s.graph.addComputeSet("conv_forward");
  std::vector<ComputeSet> pools;
  for (unsigned k = 0; k < spec.pools.size(); ++k)
    pools.push_back(s.graph.addComputeSet("pool_forward" + std::to_string(k)));
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    const ConvShard &sh = s.plan.shards[i];
    ShardTensors &t = s.shards[i];
    const unsigned c = sh.channels, tile = sh.tile;
    t.maps.resize(s.plan.maps.size());
    t.argmax.resize(s.plan.maps.size());
    t.maps[1] = s.var(FLOAT, std::size_t(sh.rows) * c * s.positions(1), tile, "conv_current");
    t.work = s.var(FLOAT, std::size_t(s.taps() + s.positions(1)) * c, tile, "conv_work");
    t.denseRows = s.var(UNSIGNED_INT, 1, tile, "dense_rows");
    VertexRef v = s.graph.addVertex(conv, "ConvForward");
    const std::pair<const char *, Tensor> fields[] = {{"x", t.x},       {"weights", t.weights},
                                                      {"bias", t.bias}, {"current", t.maps[1]},
                                                      {"work", t.work}, {"denseRows", t.denseRows}};
    for (const auto &[field, tensor] : fields)
      s.graph.connect(v[field], tensor);
    s.graph.setInitialValue(v["rows"], sh.rows);
    s.graph.setInitialValue(v["outChannels"], c);
    s.setWindow(v, spec.conv, spec.inChannels, s.plan.maps[0], s.plan.maps[1]);
    VertexWork w;
    w.batch = sh.rows, w.neurons = c, w.inputs = s.taps(), w.elements = s.inSize();
    w.positions = s.positions(1), w.kernelArea = spec.conv.kernelH * spec.conv.kernelW;
    w.activeInputs = unsigned(s.activeInputs[i] + 0.5f);
    s.graph.setPerfEstimate(v, estimateCycles("ConvForward", w));
    s.graph.setTileMapping(v, tile);
    for (unsigned k = 0; k < spec.pools.size(); ++k) {
      const PoolSpec &p = spec.pools[k];
      const unsigned m = k + 2;
      t.maps[m] = s.var(FLOAT, std::size_t(sh.rows) * c * s.positions(m), tile, "pooled");
      VertexRef pv = s.graph.addVertex(pools[k], p.max ? "MaxPoolForward" : "AvgPoolForward");
      s.graph.connect(pv["x"], t.maps[m - 1]);
      s.graph.connect(pv["y"], t.maps[m]);
      if (p.max) {
        t.argmax[m] = s.var(UNSIGNED_INT, t.maps[m].numElements(), tile, "argmax");
        s.graph.connect(pv["argmax"], t.argmax[m]);
      }
      s.graph.setInitialValue(pv["maps"], sh.rows * c);
      s.setWindow(pv, p.window, 1, s.plan.maps[m - 1], s.plan.maps[m]);
      VertexWork pw;
      pw.batch = sh.rows, pw.neurons = c, pw.positions = s.positions(m);
      pw.kernelArea = p.window.kernelH * p.window.kernelW;
      s.graph.setPerfEstimate(pv, estimateCycles(p.max ? "MaxPoolForward" : "AvgPoolForward", pw));
      s.graph.setTileMapping(pv, tile);
    }
  }
  s.forward.add(Execute(conv));
  for (const ComputeSet &cs : pools)
    s.forward.add(Execute(cs));
}

// dL/d of every map after the input, on every shard.
void createMapGrads(StageBuild &s) {
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    ShardTensors &t = s.shards[i];
    t.grads.resize(s.plan.maps.size());
    for (unsigned m = 1; m <= s.lastMap(); ++m)
      t.grads[m] = s.var(FLOAT, t.maps[m].numElements(), s.plan.shards[i].tile, "map_grad");
  }
}

// dL/d of each pool's input, last pool first, on every shard.
void addPoolBackward(StageBuild &s) {
  const ConvStageSpec &spec = s.spec;
  for (unsigned m = s.lastMap(); m >= 2; --m) {
    const PoolSpec &p = spec.pools[m - 2];
    ComputeSet cs = s.graph.addComputeSet("pool_backward" + std::to_string(m - 2));
    for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
      const ConvShard &sh = s.plan.shards[i];
      ShardTensors &t = s.shards[i];
      VertexRef v = s.graph.addVertex(cs, p.max ? "MaxPoolBackward" : "AvgPoolBackward");
      s.graph.connect(v["grad"], t.grads[m]);
      s.graph.connect(v["gradInput"], t.grads[m - 1]);
      if (p.max)
        s.graph.connect(v["argmax"], t.argmax[m]);
      s.graph.setInitialValue(v["maps"], sh.rows * sh.channels);
      s.setWindow(v, p.window, 1, s.plan.maps[m - 1], s.plan.maps[m]);
      VertexWork w;
      w.batch = sh.rows, w.neurons = sh.channels, w.positions = s.positions(m);
      w.kernelArea = p.window.kernelH * p.window.kernelW;
      s.graph.setPerfEstimate(v, estimateCycles(p.max ? "MaxPoolBackward" : "AvgPoolBackward", w));
      s.graph.setTileMapping(v, sh.tile);
    }
    s.backward.add(Execute(cs));
  }
}

// `out` (mapped slice by slice) = the sum of the `parts` of equal length, slice s of it on
// tiles[s]: each tile receives its slice of every part and sums them (SumParts).
void addSum(StageBuild &s, const std::vector<Tensor> &parts, const std::vector<unsigned> &tiles,
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

// Weight, bias and input gradients on every shard over dL/dI's non-zero entries.
void addGradVertices(StageBuild &s, ComputeSet cs) {
  const ConvStageSpec &spec = s.spec;
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    const ConvShard &sh = s.plan.shards[i];
    ShardTensors &t = s.shards[i];
    const unsigned c = sh.channels;
    t.gradWB = s.var(FLOAT, std::size_t(c) * s.taps() + c, sh.tile, "grad_wb");
    t.activeGrads = s.var(UNSIGNED_INT, 1, sh.tile, "active_grads");
    VertexWork w;
    w.batch = sh.rows, w.neurons = c, w.inputs = s.taps(), w.elements = s.inSize();
    w.positions = s.positions(1), w.activeCandidates = unsigned(s.activeGrads[i] + 0.5f);
    VertexRef v = s.graph.addVertex(cs, "ConvWeightGrad");
    s.graph.connect(v["x"], t.x);
    s.graph.connect(v["grad"], t.grads[1]);
    s.graph.connect(v["gradWeights"], t.gradWB.slice(0, std::size_t(c) * s.taps()));
    s.graph.connect(v["gradBias"],
                    t.gradWB.slice(std::size_t(c) * s.taps(), t.gradWB.numElements()));
    s.graph.connect(v["activeGrads"], t.activeGrads);
    std::vector<VertexRef> vertices{v};
    if (spec.inputGrad) {
      t.gradInput = s.var(FLOAT, t.x.numElements(), sh.tile, "grad_input_share");
      VertexRef g = s.graph.addVertex(cs, "ConvInputGrad");
      s.graph.connect(g["grad"], t.grads[1]);
      s.graph.connect(g["weights"], t.weights);
      s.graph.connect(g["gradInput"], t.gradInput);
      vertices.push_back(g);
    }
    for (VertexRef u : vertices) {
      s.graph.setInitialValue(u["rows"], sh.rows);
      s.graph.setInitialValue(u["outChannels"], c);
      s.setWindow(u, spec.conv, spec.inChannels, s.plan.maps[0], s.plan.maps[1]);
      s.graph.setTileMapping(u, sh.tile);
    }
    s.graph.setPerfEstimate(v, estimateCycles("ConvWeightGrad", w));
    if (spec.inputGrad)
      s.graph.setPerfEstimate(vertices[1], estimateCycles("ConvInputGrad", w));
  }
}

// The gradients' sums: dL/dW and dL/db over the row groups, dL/dx over the channel groups.
void addGradSums(StageBuild &s) {
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

// The neurons on each shard's last map: forward, and (with a backward) their BPTT into the
// last map's gradient, which the pools and the convolution's backward then read.
void addNeurons(StageBuild &s, bool backward) {
  const ConvNeuronSpec &nu = s.spec.neuron;
  const unsigned P = s.positions(s.lastMap());
  ComputeSet fwd = s.graph.addComputeSet("conv_neurons");
  ComputeSet bwd = s.graph.addComputeSet("conv_neurons_backward");
  const std::string reset = units::RESETS[nu.reset];
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    const ConvShard &sh = s.plan.shards[i];
    ShardTensors &t = s.shards[i];
    const unsigned n = sh.channels * P, samples = sh.rows / s.spec.steps;
    const std::size_t size = std::size_t(sh.rows) * n;
    t.membranes = s.var(FLOAT, size, sh.tile, "membranes");
    t.spikes = s.var(FLOAT, size, sh.tile, "spikes");
    t.state = s.var(FLOAT, 2 * n, sh.tile, "neuron_state");
    VertexRef v = s.graph.addVertex(fwd, "ConvNeuronForward<" + reset + ">");
    s.graph.connect(v["current"], t.maps.back());
    s.graph.connect(v["membranes"], t.membranes);
    s.graph.connect(v["spikes"], t.spikes);
    s.graph.connect(v["state"], t.state);
    std::vector<VertexRef> vertices{v};
    if (backward) {
      t.gradSpikes = s.var(FLOAT, size, sh.tile, "grad_spikes");
      t.gradMembranes = s.var(FLOAT, size, sh.tile, "grad_membranes");
      VertexRef g =
          s.graph.addVertex(bwd, "ConvNeuronBackward<" + reset + "," + units::RULES[nu.rule] + ">");
      s.graph.connect(g["membranes"], t.membranes);
      s.graph.connect(g["gradSpikes"], t.gradSpikes);
      s.graph.connect(g["gradMembranes"], t.gradMembranes);
      s.graph.connect(g["gradCurrent"], t.grads.back());
      s.graph.setInitialValue(g["surrogate"], nu.surrogate);
      s.graph.setInitialValue(g["surrogateParam"], nu.surrogateParam);
      s.graph.setInitialValue(g["ruleValue"], nu.ruleValue);
      vertices.push_back(g);
    }
    VertexWork w;
    w.batch = samples, w.neurons = n, w.steps = s.spec.steps;
    for (VertexRef u : vertices) {
      s.graph.setInitialValue(u["samples"], samples);
      s.graph.setInitialValue(u["steps"], s.spec.steps);
      s.graph.setInitialValue(u["neurons"], n);
      s.graph.setInitialValue(u["beta"], nu.beta);
      s.graph.setInitialValue(u["threshold"], nu.threshold);
      s.graph.setTileMapping(u, sh.tile);
    }
    s.graph.setPerfEstimate(v, estimateCycles("ConvNeuronForward", w));
    if (backward)
      s.graph.setPerfEstimate(vertices[1], estimateCycles("ConvNeuronBackward", w));
  }
  s.forward.add(Execute(fwd));
  if (backward)
    s.backward.add(Execute(bwd));
}

void createStreams(StageBuild &s) {
  s.graph.createHostWrite("x", s.xHost);
  s.graph.createHostWrite("weight", s.weightHost);
  s.graph.createHostWrite("bias", s.biasHost);
  const bool neurons = s.spec.neuron.present;
  for (unsigned i = 0; i < s.shards.size(); ++i) {
    const std::string id = std::to_string(i);
    const ShardTensors &t = s.shards[i];
    s.graph.createHostRead("out" + id, neurons ? t.spikes : t.maps.back());
    if (neurons)
      s.graph.createHostRead("membranes" + id, t.membranes);
    s.graph.createHostRead("dense" + id, t.denseRows);
    if (!t.grads.empty()) {
      s.graph.createHostWrite("grad_out" + id, neurons ? t.gradSpikes : t.grads.back());
      if (neurons)
        s.graph.createHostWrite("grad_mem" + id, t.gradMembranes);
      s.graph.createHostRead("active" + id, t.activeGrads);
    }
  }
  for (unsigned g = 0; g < s.gradWBSum.size(); ++g)
    s.graph.createHostRead("grad_wb" + std::to_string(g), s.gradWBSum[g]);
  for (unsigned q = 0; q < s.gradInputSum.size(); ++q)
    s.graph.createHostRead("grad_x" + std::to_string(q), s.gradInputSum[q]);
}

// The host's row (t-major, t * B + b) of the tiles' sample-major row b * T + t.
std::size_t hostRow(const ConvStageSpec &spec, std::size_t row) {
  const std::size_t samples = spec.rows / spec.steps;
  return (row % spec.steps) * samples + row / spec.steps;
}

// Host array [rows (t-major), C, per] <-> one shard's block [its rows (sample-major), c, per].
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

// Mean non-zero entries per row of each shard's rows and channels of an array [rows, C, P].
std::vector<float> activity(const ConvStageSpec &spec, const ConvPlan &plan, const float *a,
                            unsigned channels, unsigned perChannel, bool byChannel) {
  std::vector<float> out;
  for (const ConvShard &sh : plan.shards) {
    const unsigned c0 = byChannel ? sh.firstChannel : 0;
    const unsigned c = byChannel ? sh.channels : channels;
    const std::vector<float> block = shardBlock(spec, sh, a, channels, c0, c, perChannel);
    const auto count = std::count_if(block.begin(), block.end(), [](float v) { return v != 0; });
    out.push_back(float(count) / float(sh.rows));
  }
  return out;
}

// The gradients of the stage's output split over the shards, and the run of the backward.
void runBackward(const StageBuild &s, Engine &engine, const float *gradOut,
                 const float *gradMembranes, ConvStageResult &r) {
  const ConvStageSpec &spec = s.spec;
  const unsigned P = s.positions(s.lastMap()), C = spec.outChannels;
  const std::vector<float> zeros(std::size_t(spec.rows) * C * P, 0.0f);
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    const ConvShard &sh = s.plan.shards[i];
    const std::string id = std::to_string(i);
    std::vector<float> b = shardBlock(spec, sh, gradOut, C, sh.firstChannel, sh.channels, P);
    engine.writeTensor("grad_out" + id, b.data(), b.data() + b.size());
    if (spec.neuron.present) {
      b = shardBlock(spec, sh, gradMembranes ? gradMembranes : zeros.data(), C, sh.firstChannel,
                     sh.channels, P);
      engine.writeTensor("grad_mem" + id, b.data(), b.data() + b.size());
    }
  }
  engine.run(1);
  const unsigned taps = s.taps();
  r.gradWeight.resize(std::size_t(C) * taps);
  r.gradBias.resize(C);
  for (unsigned g = 0; g < s.plan.channelGroups; ++g) {
    const ConvShard &sh = s.plan.shards[g * s.plan.rowGroups];
    std::vector<float> wb(std::size_t(sh.channels) * taps + sh.channels);
    engine.readTensor("grad_wb" + std::to_string(g), wb.data(), wb.data() + wb.size());
    std::copy_n(wb.begin(), std::size_t(sh.channels) * taps,
                r.gradWeight.begin() + std::size_t(sh.firstChannel) * taps);
    std::copy_n(wb.end() - sh.channels, sh.channels, r.gradBias.begin() + sh.firstChannel);
  }
  if (spec.inputGrad) {
    r.gradInput.resize(std::size_t(spec.rows) * s.inSize());
    for (unsigned q = 0; q < s.plan.rowGroups; ++q) {
      const ConvShard &sh = s.plan.shards[q];
      std::vector<float> block(std::size_t(sh.rows) * s.inSize());
      engine.readTensor("grad_x" + std::to_string(q), block.data(), block.data() + block.size());
      blockToHost(spec, sh, block, 1, 0, 1, s.inSize(), r.gradInput.data());
    }
  }
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    unsigned active = 0;
    engine.readTensor("active" + std::to_string(i), &active, &active + 1);
    r.activeGrads += active;
  }
}

void readForward(const StageBuild &s, Engine &engine, ConvStageResult &r) {
  const ConvStageSpec &spec = s.spec;
  const unsigned P = s.positions(s.lastMap()), C = spec.outChannels;
  r.output.resize(std::size_t(spec.rows) * C * P);
  if (spec.neuron.present)
    r.membranes.resize(r.output.size());
  for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
    const ConvShard &sh = s.plan.shards[i];
    const std::string id = std::to_string(i);
    std::vector<float> block(std::size_t(sh.rows) * sh.channels * P);
    engine.readTensor("out" + id, block.data(), block.data() + block.size());
    blockToHost(spec, sh, block, C, sh.firstChannel, sh.channels, P, r.output.data());
    if (spec.neuron.present) {
      engine.readTensor("membranes" + id, block.data(), block.data() + block.size());
      blockToHost(spec, sh, block, C, sh.firstChannel, sh.channels, P, r.membranes.data());
    }
    unsigned dense = 0;
    engine.readTensor("dense" + id, &dense, &dense + 1);
    r.denseRows += dense;
  }
}

// The input, sample-major rows, and the estimates' activities.
std::vector<float> sampleMajorInput(const StageBuild &s, const float *x) {
  std::vector<float> out(std::size_t(s.spec.rows) * s.inSize());
  for (std::size_t r = 0; r < s.spec.rows; ++r)
    std::copy_n(x + hostRow(s.spec, r) * s.inSize(), s.inSize(), out.begin() + r * s.inSize());
  return out;
}

} // namespace

ConvStageResult runConvStage(const ConvStageSpec &spec, const DeviceSpec &deviceSpec,
                             const float *x, const float *weight, const float *bias,
                             const float *gradOut, const float *gradMembranes) {
  Device device = makeDevice(deviceSpec);
  const Target &target = device.getTarget();
  ConvStageResult result;
  const bool ipu = target.getTargetType() != TargetType::CPU;
  result.plan = planConvStage(spec, geometryOf(target), ipu ? target.getBytesPerTile() : 0);
  Graph graph(target);
  graph.addCodelets(StringRef(codeletsPath(deviceSpec)));
  StageBuild s(spec, result.plan, graph);
  const unsigned lastP = s.positions(s.lastMap());
  s.activeInputs =
      activity(spec, result.plan, x, spec.inChannels, spec.inHeight * spec.inWidth, false);
  s.activeGrads.assign(result.plan.shards.size(), 0.0f);
  // Estimates: dL/dI is as dense as the output's gradient (a sparse rule thins it further),
  // each entry reaching the convolution once per max pool, kernel-area times per average.
  if (gradOut)
    s.activeGrads = activity(spec, result.plan, gradOut, spec.outChannels, lastP, true);
  for (const PoolSpec &p : spec.pools)
    for (float &a : s.activeGrads)
      a *= p.max ? 1.0f : float(p.window.kernelH * p.window.kernelW);
  createInputs(s);
  addForward(s);
  if (gradOut)
    createMapGrads(s);
  if (spec.neuron.present) // its backward first: it writes the last map's gradient
    addNeurons(s, gradOut != nullptr);
  if (gradOut) {
    addPoolBackward(s);
    ComputeSet grads = graph.addComputeSet("conv_grads");
    addGradVertices(s, grads);
    s.backward.add(Execute(grads));
    addGradSums(s);
  }
  createStreams(s);
  Engine engine(graph, {Sequence{s.fanout.program(), s.forward}, s.backward});
  engine.load(device);
  const std::vector<float> xRows = sampleMajorInput(s, x);
  const std::vector<float> zeros(spec.outChannels, 0.0f);
  engine.writeTensor("x", xRows.data(), xRows.data() + xRows.size());
  engine.writeTensor("weight", weight, weight + std::size_t(spec.outChannels) * s.taps());
  const float *b = bias ? bias : zeros.data();
  engine.writeTensor("bias", b, b + spec.outChannels);
  engine.run(0);
  readForward(s, engine, result);
  if (gradOut)
    runBackward(s, engine, gradOut, gradMembranes, result);
#ifndef POPSNN_USE_POPLAR_SDK
  const ProfileEstimate p = engine.getProfileEstimate();
  result.estimate = {{"estimate_total_cycles", double(p.totalCycles)},
                     {"estimate_compute_cycles", double(p.computeCycles)},
                     {"estimate_exchange_cycles", double(p.exchangeCycles)},
                     {"estimate_seconds", p.estimatedSeconds()},
                     {"max_tile_bytes", double(p.maxTileBytes())}};
#endif
  return result;
}

} // namespace popsnn
