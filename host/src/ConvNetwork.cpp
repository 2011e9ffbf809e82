#include "ConvNetwork.hpp"

#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "ConvStageBuild.hpp"
#include "Devices.hpp"

namespace popsnn {

using namespace poplar;
using namespace poplar::program;

namespace {

[[noreturn]] void invalid(const std::string &what) { throw std::invalid_argument(what); }

std::size_t outSize(const ConvStageSpec &s) {
  const MapSize m = stageMapSizes(s).back();
  return std::size_t(s.outChannels) * m.h * m.w;
}

// Every stage has neurons and the batch's shape; each takes the previous stage's output.
void checkSpec(const ConvNetworkSpec &spec) {
  if (spec.stages.empty())
    invalid("a convolutional network needs at least one stage");
  const ConvStageSpec &first = spec.stages[0];
  for (unsigned k = 0; k < spec.stages.size(); ++k) {
    const ConvStageSpec &s = spec.stages[k];
    const std::string name = "stage " + std::to_string(k);
    if (!s.neuron.present)
      invalid(name + " has no neurons; every stage of a network ends in Leaky neurons");
    if (s.rows != first.rows || s.steps != first.steps)
      invalid(name + " has " + std::to_string(s.rows) + " rows of " + std::to_string(s.steps) +
              " steps, stage 0 " + std::to_string(first.rows) + " of " +
              std::to_string(first.steps) + "; give every stage the same batch and steps");
    if (k && std::size_t(s.inChannels) * s.inHeight * s.inWidth != outSize(spec.stages[k - 1]))
      invalid(name + " takes " + std::to_string(s.inChannels * s.inHeight * s.inWidth) +
              " inputs per row, stage " + std::to_string(k - 1) + " gives " +
              std::to_string(outSize(spec.stages[k - 1])) + "; match the shapes");
  }
}

// Tiles per stage: on an IPU target a range of its own, in proportion to the bytes the
// whole stage takes on one tile (ConvPlan's count), so that the stages' fullest tiles come
// out alike; on the cpu device, where tiles are threads and memory is not enforced, every
// stage uses all of them.
std::vector<std::pair<unsigned, unsigned>> tileRanges(const ConvNetworkSpec &spec,
                                                      const TargetGeometry &target) {
  const unsigned n = unsigned(spec.stages.size());
  if (!target.ipu)
    return std::vector<std::pair<unsigned, unsigned>>(n, {0u, target.numTiles});
  if (target.numTiles < n)
    invalid("the target has " + std::to_string(target.numTiles) + " tiles for " +
            std::to_string(n) + " stages; give at least one tile per stage");
  std::vector<double> work;
  for (const ConvStageSpec &s : spec.stages)
    work.push_back(double(convShardBytes(s, s.outChannels, s.rows, 1, 1)));
  const double total = std::accumulate(work.begin(), work.end(), 0.0);
  std::vector<std::pair<unsigned, unsigned>> ranges;
  unsigned first = 0;
  for (unsigned k = 0; k < n; ++k) {
    const unsigned left = target.numTiles - first - (n - 1 - k); // one for each stage after
    unsigned tiles = k + 1 == n ? left : unsigned(work[k] / total * target.numTiles);
    tiles = std::clamp(tiles, 1u, left);
    ranges.push_back({first, tiles});
    first += tiles;
  }
  return ranges;
}

// Contiguous pieces copied between tensors, merged where a piece continues the last one.
struct PieceCopier {
  CopyList &copies;
  const Tensor *src = nullptr, *dst = nullptr;
  std::size_t srcLo = 0, dstLo = 0, length = 0;

  void add(const Tensor &s, std::size_t so, const Tensor &d, std::size_t dO, std::size_t n) {
    if (length && &s == src && &d == dst && so == srcLo + length && dO == dstLo + length) {
      length += n;
      return;
    }
    flush();
    src = &s, dst = &d, srcLo = so, dstLo = dO, length = n;
  }
  void flush() {
    if (length)
      copies.add(src->slice(srcLo, srcLo + length), dst->slice(dstLo, dstLo + length));
    length = 0;
  }
};

// The row group of a (sample-major) row: groups hold groupRows rows each, the last fewer.
unsigned rowGroupOf(const ConvPlan &plan, unsigned row) { return row / plan.groupRows; }

// Stage `prev`'s spikes (per shard [rows, c, P]) into `next`'s input rows [rows, C x P].
CopyList spikeCopies(const ConvStageBuild &prev, ConvStageBuild &next) {
  CopyList copies;
  PieceCopier c{copies};
  const unsigned P = prev.positions(prev.lastMap()), in = next.inSize();
  for (unsigned r = 0; r < prev.spec.rows; ++r)
    for (unsigned g = 0; g < prev.plan.channelGroups; ++g) {
      const unsigned i = g * prev.plan.rowGroups + rowGroupOf(prev.plan, r);
      const ConvShard &sh = prev.plan.shards[i];
      const std::size_t n = std::size_t(sh.channels) * P;
      c.add(prev.shards[i].spikes, (r - sh.firstRow) * n, next.xHost,
            std::size_t(r) * in + std::size_t(sh.firstChannel) * P, n);
    }
  c.flush();
  return copies;
}

// `next`'s dL/dx (summed per row group [rows, C x P]) onto `prev`'s shards as their dL/dS.
CopyList gradCopies(const ConvStageBuild &next, ConvStageBuild &prev) {
  CopyList copies;
  PieceCopier c{copies};
  const unsigned P = prev.positions(prev.lastMap()), in = next.inSize();
  for (unsigned i = 0; i < prev.plan.shards.size(); ++i) {
    const ConvShard &sh = prev.plan.shards[i];
    const std::size_t n = std::size_t(sh.channels) * P;
    for (unsigned r = sh.firstRow; r < sh.firstRow + sh.rows; ++r) {
      const unsigned q = rowGroupOf(next.plan, r);
      const std::size_t local = r - next.plan.shards[q].firstRow;
      c.add(next.gradInputSum[q], local * in + std::size_t(sh.firstChannel) * P,
            prev.shards[i].gradSpikes, (r - sh.firstRow) * n, n);
    }
  }
  c.flush();
  return copies;
}

// Whether stage `next`'s shards are stage `prev`'s rows on the same tiles, each with all
// channels: then prev's shard i's spikes [rows, C x P] are next's shard i's input rows and
// its dL/dS is next's shard i's dL/dx share, element for element, and neither needs a
// copy. So on the cpu device, where every stage splits the same rows over all the tiles
// (tileRanges; the CSNN's copies of ~22 and ~13 MB each way a step were ~4% of its step on
// one thread: docs/performance/csnn.md); not where the stages have tiles of their own (an
// IPU target), which the copies exchange.
bool sameShards(const ConvStageBuild &prev, const ConvPlan &next, const ConvStageSpec &spec) {
  if (prev.plan.channelGroups != 1 || next.channelGroups != 1 || spec.direct ||
      prev.plan.shards.size() != next.shards.size())
    return false;
  for (std::size_t i = 0; i < next.shards.size(); ++i) {
    const ConvShard &a = prev.plan.shards[i], &b = next.shards[i];
    if (a.tile != b.tile || a.firstRow != b.firstRow || a.rows != b.rows)
      return false;
  }
  return true;
}

} // namespace

struct ConvNetwork::Impl {
  ConvNetworkSpec spec;
  Device device;
  std::vector<ConvPlan> plans;
  std::unique_ptr<Graph> graph;
  std::vector<std::unique_ptr<ConvStageBuild>> stages;
  std::unique_ptr<Engine> engine;
  std::string codelets;

  ConvStageBuild &last() { return *stages.back(); }
  void build();
  void createStreams();
};

void ConvNetwork::Impl::build() {
  const Target &target = device.getTarget();
  const TargetGeometry geometry = geometryOf(target);
  const auto ranges = tileRanges(spec, geometry);
  graph = std::make_unique<Graph>(target);
  graph->addCodelets(StringRef(codelets));
  Sequence forward, backward;
  for (unsigned k = 0; k < spec.stages.size(); ++k) {
    ConvStageSpec &s = spec.stages[k];
    s.inputGrad = k > 0;
    s.gradMembranes = k + 1 == spec.stages.size(); // the loss reads the output's only
    TargetGeometry own = geometry;
    own.numTiles = ranges[k].second;
    plans.push_back(planConvStage(s, own, geometry.ipu ? target.getBytesPerTile() : 0));
    for (ConvShard &sh : plans.back().shards)
      sh.tile += ranges[k].first;
  }
  std::vector<bool> linked(spec.stages.size(), false); // stage k reads stage k - 1's in place
  for (unsigned k = 0; k < spec.stages.size(); ++k) {
    auto &b =
        stages.emplace_back(std::make_unique<ConvStageBuild>(spec.stages[k], plans[k], *graph));
    linked[k] = k && sameShards(*stages[k - 1], plans[k], spec.stages[k]);
    for (unsigned i = 0; linked[k] && i < plans[k].shards.size(); ++i) {
      b->linkedX.push_back(stages[k - 1]->shards[i].spikes);
      b->linkedGradInput.push_back(stages[k - 1]->shards[i].gradSpikes);
    }
    const float in = k < spec.inputActivity.size() ? spec.inputActivity[k] : 0.1f;
    const float grad = k < spec.gradActivity.size() ? spec.gradActivity[k] : 0.1f;
    for (const ConvShard &sh : plans[k].shards) {
      b->activeInputs.push_back(in * float(b->inSize()));
      b->activeGrads.push_back(grad * float(sh.channels * b->positions(1)));
    }
    buildConvStage(*b, true);
  }
  for (unsigned k = 0; k < stages.size(); ++k) {
    if (k && !linked[k])
      forward.add(spikeCopies(*stages[k - 1], *stages[k]).program());
    forward.add(stages[k]->fanout.program());
    forward.add(stages[k]->forward);
  }
  for (unsigned k = unsigned(stages.size()); k-- > 0;) {
    backward.add(stages[k]->backward);
    if (k && !linked[k])
      backward.add(gradCopies(*stages[k], *stages[k - 1]).program());
  }
  createStreams();
  engine = std::make_unique<Engine>(*graph, std::vector<Program>{forward, backward});
  engine->load(device);
}

void ConvNetwork::Impl::createStreams() {
  for (unsigned k = 0; k < stages.size(); ++k) {
    const ConvStageBuild &s = *stages[k];
    const std::string id = std::to_string(k);
    if (k == 0)
      graph->createHostWrite("x", s.xHost);
    graph->createHostWrite("weight" + id, s.weightHost);
    graph->createHostWrite("bias" + id, s.biasHost);
    for (unsigned g = 0; g < s.gradWBSum.size(); ++g)
      graph->createHostRead("grad_wb" + id + "_" + std::to_string(g), s.gradWBSum[g]);
    for (unsigned i = 0; i < s.shards.size(); ++i) {
      const std::string shard = id + "_" + std::to_string(i);
      graph->createHostRead("spikes" + shard, s.shards[i].spikes);
      graph->createHostRead("membranes" + shard, s.shards[i].membranes);
      graph->createHostRead("dense" + shard, s.shards[i].denseRows);
      graph->createHostRead("active" + shard, s.shards[i].activeGrads);
      if (s.spec.inputGrad)
        graph->createHostRead("input_dense" + shard, s.shards[i].inputDenseRows);
      if (k + 1 == stages.size()) {
        graph->createHostWrite("grad_out" + shard, s.shards[i].gradSpikes);
        graph->createHostWrite("grad_mem" + shard, s.shards[i].gradMembranes);
      }
    }
  }
}

ConvNetwork::ConvNetwork(const ConvNetworkSpec &spec, const DeviceSpec &deviceSpec)
    : impl_(std::make_unique<Impl>()) {
  checkSpec(spec);
  impl_->spec = spec;
  impl_->device = makeDevice(deviceSpec);
  impl_->codelets = codeletsPath(deviceSpec);
  impl_->build();
}

ConvNetwork::~ConvNetwork() = default;

const std::vector<ConvPlan> &ConvNetwork::plans() const { return impl_->plans; }

void ConvNetwork::setParams(unsigned stage, const float *weight, const float *bias) {
  const ConvStageBuild &s = *impl_->stages.at(stage);
  const unsigned C = s.spec.outChannels;
  const std::vector<float> zeros(C, 0.0f);
  const std::string id = std::to_string(stage);
  impl_->engine->writeTensor("weight" + id, weight, weight + std::size_t(C) * s.taps());
  const float *b = bias ? bias : zeros.data();
  impl_->engine->writeTensor("bias" + id, b, b + C);
}

ConvForwardResult ConvNetwork::forward(const float *x, bool recordAll) {
  Impl &m = *impl_;
  const ConvStageBuild &first = *m.stages[0];
  const ConvStageSpec &s0 = first.spec;
  if (s0.direct) { // [B, inputs]: one row per sample, as the tiles take it
    m.engine->writeTensor("x", x, x + std::size_t(s0.convRows(s0.rows)) * first.inSize());
  } else {
    std::vector<float> rows(std::size_t(s0.rows) * first.inSize());
    for (std::size_t r = 0; r < s0.rows; ++r)
      std::copy_n(x + hostRow(s0, r) * first.inSize(), first.inSize(),
                  rows.begin() + r * first.inSize());
    m.engine->writeTensor("x", rows.data(), rows.data() + rows.size());
  }
  m.engine->run(0);
  ConvForwardResult out;
  for (unsigned k = recordAll ? 0 : unsigned(m.stages.size()) - 1; k < m.stages.size(); ++k) {
    const ConvStageBuild &s = *m.stages[k];
    const unsigned P = s.positions(s.lastMap()), C = s.spec.outChannels;
    auto &spikes = out.spikes.emplace_back(std::size_t(s.spec.rows) * C * P);
    auto &membranes = out.membranes.emplace_back(spikes.size());
    unsigned dense = 0;
    for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
      const ConvShard &sh = s.plan.shards[i];
      const std::string shard = std::to_string(k) + "_" + std::to_string(i);
      std::vector<float> block(std::size_t(sh.rows) * sh.channels * P);
      m.engine->readTensor("spikes" + shard, block.data(), block.data() + block.size());
      blockToHost(s.spec, sh, block, C, sh.firstChannel, sh.channels, P, spikes.data());
      m.engine->readTensor("membranes" + shard, block.data(), block.data() + block.size());
      blockToHost(s.spec, sh, block, C, sh.firstChannel, sh.channels, P, membranes.data());
      dense += readCounts(*m.engine, "dense" + shard, s.plan.workers);
    }
    out.denseRows.push_back(dense);
  }
  return out;
}

ConvBackwardResult ConvNetwork::backward(const float *gradSpikes, const float *gradMembranes) {
  Impl &m = *impl_;
  ConvStageBuild &last = m.last();
  const unsigned P = last.positions(last.lastMap()), C = last.spec.outChannels;
  const std::vector<float> zeros(std::size_t(last.spec.rows) * C * P, 0.0f);
  const unsigned lastId = unsigned(m.stages.size()) - 1;
  for (unsigned i = 0; i < last.plan.shards.size(); ++i) {
    const ConvShard &sh = last.plan.shards[i];
    const std::string shard = std::to_string(lastId) + "_" + std::to_string(i);
    std::vector<float> b =
        shardBlock(last.spec, sh, gradSpikes, C, sh.firstChannel, sh.channels, P);
    m.engine->writeTensor("grad_out" + shard, b.data(), b.data() + b.size());
    b = shardBlock(last.spec, sh, gradMembranes ? gradMembranes : zeros.data(), C, sh.firstChannel,
                   sh.channels, P);
    m.engine->writeTensor("grad_mem" + shard, b.data(), b.data() + b.size());
  }
  m.engine->run(1);
  ConvBackwardResult out;
  for (unsigned k = 0; k < m.stages.size(); ++k) {
    const ConvStageBuild &s = *m.stages[k];
    const unsigned taps = s.taps(), c = s.spec.outChannels;
    auto &gw = out.gradWeight.emplace_back(std::size_t(c) * taps);
    auto &gb = out.gradBias.emplace_back(c);
    for (unsigned g = 0; g < s.plan.channelGroups; ++g) {
      const ConvShard &sh = s.plan.shards[g * s.plan.rowGroups];
      std::vector<float> wb(std::size_t(sh.channels) * taps + sh.channels);
      m.engine->readTensor("grad_wb" + std::to_string(k) + "_" + std::to_string(g), wb.data(),
                           wb.data() + wb.size());
      std::copy_n(wb.begin(), std::size_t(sh.channels) * taps,
                  gw.begin() + std::size_t(sh.firstChannel) * taps);
      std::copy_n(wb.end() - sh.channels, sh.channels, gb.begin() + sh.firstChannel);
    }
    unsigned active = 0, dense = 0;
    for (unsigned i = 0; i < s.plan.shards.size(); ++i) {
      const std::string shard = std::to_string(k) + "_" + std::to_string(i);
      active += readCounts(*m.engine, "active" + shard, s.plan.workers);
      if (s.spec.inputGrad)
        dense += readCounts(*m.engine, "input_dense" + shard, s.plan.workers);
    }
    out.activeGrads.push_back(active);
    out.inputGradDenseRows.push_back(dense);
  }
  return out;
}

std::map<std::string, double> ConvNetwork::estimate() const {
#ifndef POPSNN_USE_POPLAR_SDK
  const ProfileEstimate p = impl_->engine->getProfileEstimate();
  return {{"estimate_total_cycles", double(p.totalCycles)},
          {"estimate_compute_cycles", double(p.computeCycles)},
          {"estimate_exchange_cycles", double(p.exchangeCycles)},
          {"estimate_seconds", p.estimatedSeconds()},
          {"max_tile_bytes", double(p.maxTileBytes())}};
#else
  return {};
#endif
}

} // namespace popsnn
