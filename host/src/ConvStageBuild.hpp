// The builder of one convolutional stage's graph objects (ConvPlan's shards, their tensors,
// vertices and exchanges), shared by the one-stage runner (ConvStage.cpp) and the network
// of stages (ConvNetwork.cpp): each builds its stages with buildConvStage and adds its own
// host streams and programs.
#pragma once

#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

#include <string>
#include <vector>

#include "ConvPlan.hpp"
#include "Exchange.hpp"

namespace popsnn {

// One shard's tensors, all on its tile. maps[k], grads[k]: layer k's output (1: the
// convolution, 2..: the pools) and dL/d of it; argmax[k] for a max pool's output.
struct ConvShardTensors {
  poplar::Tensor x, weights, bias, gradWB, gradInput;
  // Per worker (ConvPlan::workers): rows on the forward's dense path, dL/dI entries with
  // gradient, ConvInputGrad's rows on the dense product; the hosts sum them (readCounts).
  poplar::Tensor denseRows, activeGrads, inputDenseRows;
  std::vector<poplar::Tensor> work; // per worker: the forward's, then the backward's
  poplar::Tensor membranes, spikes, gradSpikes, gradMembranes; // the neurons'

  std::vector<poplar::Tensor> maps, grads, argmax;
};

struct ConvStageBuild {
  ConvStageBuild(const ConvStageSpec &sp, const ConvPlan &p, poplar::Graph &g)
      : spec(sp), plan(p), graph(g) {}
  const ConvStageSpec &spec;
  const ConvPlan &plan;
  poplar::Graph &graph;
  std::vector<float> activeInputs; // mean non-zero inputs per row, per shard (estimates)
  std::vector<float> activeGrads;  // mean non-zero dL/dI entries per row, per shard
  std::vector<ConvShardTensors> shards;
  poplar::Tensor xHost, weightHost, biasHost;
  std::vector<poplar::Tensor> gradWBSum, gradInputSum; // per channel group, per row group
  // Set before buildConvStage when the previous stage's shards hold this stage's rows on the
  // same tiles (ConvNetwork.cpp's sameShards): per shard, the previous stage's spikes as this
  // stage's input rows and its dL/dS as this stage's dL/dx share, read and written in place
  // instead of copied between the stages.
  std::vector<poplar::Tensor> linkedX, linkedGradInput;
  CopyList fanout; // one exchange phase (a Copy per piece would be a phase each)
  poplar::program::Sequence forward, backward;

  unsigned inSize() const { return spec.inChannels * spec.inHeight * spec.inWidth; }
  unsigned taps() const { return spec.inChannels * spec.conv.kernelH * spec.conv.kernelW; }
  unsigned positions(unsigned k) const { return plan.maps[k].h * plan.maps[k].w; }
  unsigned lastMap() const { return unsigned(plan.maps.size()) - 1; }
  // dL/dI of the convolution kept channels-last ([rows, P, c]) when a 2 x 2 max pool at
  // stride 2 tiling the map comes first (pairsMaxPoolFirst: the forward pools as it goes,
  // the pool's backward writes that layout), so the weight and input gradients read a
  // position's channels contiguously.
  bool gradChannelsLast() const { return pairsMaxPoolFirst(spec); }
  const char *gradLayout() const {
    return gradChannelsLast() ? "<popsnn::conv::ChannelsLast>" : "<popsnn::conv::Planar>";
  }

  poplar::Tensor var(const poplar::Type &type, std::size_t n, unsigned tile,
                     const std::string &name) {
    poplar::Tensor t = graph.addVariable(type, {n}, name);
    graph.setTileMapping(t, tile);
    return t;
  }
  void setWindow(poplar::VertexRef v, const Window2d &w, unsigned channels, MapSize in,
                 MapSize out) {
    const unsigned values[] = {channels,  in.h,   in.w,   w.kernelH, w.kernelW, w.strideH,
                               w.strideW, w.padH, w.padW, out.h,     out.w};
    const char *names[] = {"inChannels",  "inHeight",  "inWidth", "kernelHeight",
                           "kernelWidth", "strideY",   "strideX", "padY",
                           "padX",        "outHeight", "outWidth"};
    for (unsigned k = 0; k < 11; ++k)
      graph.setInitialValue(v[names[k]], values[k]);
  }
};

// The stage's graph: input, weights and their fan-out, the convolution, pools and neurons
// forward; with `backward`, the neurons' BPTT, the pools' and the convolution's backward and
// the gradients' sums over tiles. s.activeInputs / s.activeGrads (the estimates' activity
// per shard) must be set first.
// The sum of a per-worker count tensor read from the engine (its host read `handle`).
unsigned readCounts(poplar::Engine &engine, const std::string &handle, unsigned workers);

void buildConvStage(ConvStageBuild &s, bool backward);

// The host's row (t-major, t * B + b) of the tiles' sample-major row b * T + t.
std::size_t hostRow(const ConvStageSpec &spec, std::size_t row);
// Host array [rows (t-major), C, per] <-> one shard's block [its rows (sample-major), c, per].
std::vector<float> shardBlock(const ConvStageSpec &spec, const ConvShard &sh, const float *host,
                              unsigned channels, unsigned firstChannel, unsigned c,
                              std::size_t per);
void blockToHost(const ConvStageSpec &spec, const ConvShard &sh, const std::vector<float> &block,
                 unsigned channels, unsigned firstChannel, unsigned c, std::size_t per,
                 float *host);

} // namespace popsnn
