#include "ConvStage.hpp"

#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

#include <algorithm>
#include <stdexcept>

#include "ConvStageBuild.hpp"
#include "Devices.hpp"

namespace popsnn {

using namespace poplar;
using namespace poplar::program;

namespace {

void createStreams(ConvStageBuild &s) {
  s.graph.createHostWrite("x", s.xHost);
  s.graph.createHostWrite("weight", s.weightHost);
  s.graph.createHostWrite("bias", s.biasHost);
  const bool neurons = s.spec.neuron.present;
  for (unsigned i = 0; i < s.shards.size(); ++i) {
    const std::string id = std::to_string(i);
    const ConvShardTensors &t = s.shards[i];
    s.graph.createHostRead("out" + id, neurons ? t.spikes : t.maps.back());
    if (neurons)
      s.graph.createHostRead("membranes" + id, t.membranes);
    s.graph.createHostRead("dense" + id, t.denseRows);
    if (!t.grads.empty()) {
      s.graph.createHostWrite("grad_out" + id, neurons ? t.gradSpikes : t.grads.back());
      if (neurons)
        s.graph.createHostWrite("grad_mem" + id, t.gradMembranes);
      s.graph.createHostRead("active" + id, t.activeGrads);
      if (s.spec.inputGrad)
        s.graph.createHostRead("input_dense" + id, t.inputDenseRows);
    }
  }
  for (unsigned g = 0; g < s.gradWBSum.size(); ++g)
    s.graph.createHostRead("grad_wb" + std::to_string(g), s.gradWBSum[g]);
  for (unsigned q = 0; q < s.gradInputSum.size(); ++q)
    s.graph.createHostRead("grad_x" + std::to_string(q), s.gradInputSum[q]);
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
void runBackward(const ConvStageBuild &s, Engine &engine, const float *gradOut,
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
    const std::string id = std::to_string(i);
    r.activeGrads += readCounts(engine, "active" + id, s.plan.workers);
    if (spec.inputGrad)
      r.inputGradDenseRows += readCounts(engine, "input_dense" + id, s.plan.workers);
  }
}

void readForward(const ConvStageBuild &s, Engine &engine, ConvStageResult &r) {
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
    r.denseRows += readCounts(engine, "dense" + id, s.plan.workers);
  }
}

// The input, sample-major rows, and the estimates' activities.
std::vector<float> sampleMajorInput(const ConvStageBuild &s, const float *x) {
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
  ConvStageBuild s(spec, result.plan, graph);
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
  buildConvStage(s, gradOut != nullptr);
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