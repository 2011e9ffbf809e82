// One graph build: a Plan turned into a Poplar graph's tensors (this header), exchanges
// (Exchange.hpp), vertices (VertexWiring.hpp) and programs (Programs.hpp). Each of those
// rooms reads the plan and the tensors made before it; Network.cpp runs them in order.
#pragma once

#include <poplar/Graph.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "Plan.hpp"
#include "popsnn/VertexEnums.hpp"

namespace popsnn {

// A shard's tensors on its tile.
struct Shard : ShardPlan {
  // Parameters, their gradients and optimiser state: index P_WEIGHT.. (Plan.hpp).
  poplar::Tensor param[NUM_PARAMS], grad[NUM_PARAMS], opt1[NUM_PARAMS], opt2[NUM_PARAMS],
      optCount[NUM_PARAMS];
  // The parameters as the vertices read them: param itself (float storage), or its copy
  // rounded to half at the start of every forward pass (RoundParams), param staying the
  // float32 master the optimiser updates. nonFinite: half storage, the shard's count of
  // non-finite gradient entries (UnscaleGrads), read by the host before the optimiser runs.
  poplar::Tensor stored[NUM_PARAMS], nonFinite;
  // outIds: a2a, or step-major feeding a layer.
  // mem, gradMem: the neuron's state U (then Synaptic's J) [B, n] each, and its gradient.
  poplar::Tensor mem, prevSpikes, fwdScratch, idTrace, outIds, overflow;
  // The surrogate kept for the backward: every entry [T, B, n] without a sparse rule, else
  // the gradient trace's masked surrogate values beside gradStarts and gradIds, its row starts and
  // 16-bit ids (see codes::traceStarts; a sparse rule only).
  poplar::Tensor surrogates, gradStarts, gradIds;
  poplar::Tensor stepForward, stepBackward;
  // xList, xValues: [T, B, N_in] input as a list (Plan::inputListCapacity), else xLocal.
  poplar::Tensor xLocal, xList, xValues, current, currentGradSum;
  // inRecv: the previous layer's traces; recRecv: own ids of step t-1 (a2a forward);
  // ownTraces: own traces (a2a backward).
  poplar::Tensor inRecv, recRecv, ownTraces, prevIds; // prevIds: step-major a2a
  poplar::Tensor gradMem, bwdScratch, gradOut, gradStep;
  // The cpu device, a dense float trace feeding a layer, not Leaky (its fused kernels read
  // the next layer's rows themselves): the next layer's term of dL/dS of one step [B, n].
  poplar::Tensor nextStep;
  // LayerShape::gradList: dL/dI as a list (codes::gradListStarts starts, 16-bit ids, values); on
  // the layer before, every shard's lists one after the other.
  poplar::Tensor gradList, gradListIds, gradListValues, nextGradList, nextGradListIds,
      nextGradListValues;
  // A compressed trace on a shard feeding another layer: per sample, the neurons whose
  // carry can be non-zero (LifBackward's live list), [B, 1 + 2n].
  poplar::Tensor liveIds;
  // Copies of the weights of the layer this shard feeds (and of V), on this shard's neurons.
  poplar::Tensor nextGrad, nextWeights, nextWeightsT, ownGrad, ownWeights, ownWeightsT;
  poplar::Tensor recSpikes, recMem, lossGradS, lossGradU;
  // The batch split into sample chunks: gradients summed over the chunks, and every chunk's
  // overflow counters and (direct input) sum_t dL/dI, for the input gradient.
  poplar::Tensor gradTotal[NUM_PARAMS], overflowAll, currentGradSumAll;
  // [T, B, N_in] input with NetworkSpec::inputGrad (first layer): dL/dI of every step
  // [T, B, n] (layer-major: gradOut itself) and, chunked, every chunk's.
  poplar::Tensor inputGradSteps, inputGradAll;
  // A layer that pushes (LayerShape::push): its W_next.S blocks and W_next rows, dL/dW_next;
  // the layer it feeds: the received blocks.
  poplar::Tensor nextCurrent, nextRows, nextGradRows, nextGradWeights, partialRecv;
  // LayerSpec::perNeuron: the constants one per neuron [n] (a learned one is param[P_BETA] or
  // param[P_THRESHOLD]), beta clamped to [0, 1] as the vertices use it, and a learned beta's
  // membrane trace U [T, B, n]. A learned constant given once for the layer: the backward's
  // per-neuron gradient (gradPart), summed over the layer into grad on every shard.
  // gradParts: every shard's gradPart, gathered on this tile [N].
  poplar::Tensor betas, alphas, thresholds, clampedBeta, memTrace, gradPart[NUM_PARAMS],
      gradParts[NUM_PARAMS];
};

struct Layer : LayerShape {
  std::vector<Shard> shards;
};

// The layer's neuron model as the vertices name it (codes::Neuron; VertexWiring.cpp).
unsigned neuronCode(const LayerSpec &s);

// The tensors outside the layers: the batch, labels, loss and output records, and the
// learning rate (one float per tile, written by the host: a schedule needs no recompile).
struct HostTensors {
  // x dense, or (Plan::inputListCapacity) xList and xValues: one list per chunk of samples.
  poplar::Tensor x, xList, xValues, labels, sampleWeights, lossValue, gatheredS, gatheredU, gradS,
      gradU, lossScratch, learningRate;
  // Half storage: the loss scale, one float per tile, written by the host (setLossScale).
  poplar::Tensor lossScale;
  // Chunked: the loss vertex's chunk of labels and weights, the loss and the output spikes
  // of the whole batch.
  poplar::Tensor labelsChunk, weightsChunk, lossTotal, spikesAll;
  // Each loss group's part of the loss, summed (LossSum) into lossValue on the loss tile.
  poplar::Tensor lossParts, lossPartsLocal;
};

struct GraphBuild {
  // target null: a counting build, which makes no graph and no tensors (every Tensor stays
  // invalid) and only counts the bytes per tile and layer -- the plan's memory.
  GraphBuild(const NetworkSpec &spec, Plan plan, const poplar::Target *target);

  const NetworkSpec &spec;
  Plan plan;
  std::unique_ptr<poplar::Graph> graph;
  std::vector<Layer> layers;
  HostTensors io;
  // Bytes of popsnn's tensors per tile and layer (index L: the loss and host tensors).
  std::vector<std::vector<std::uint64_t>> tileLayerBytes;

  unsigned batch() const { return plan.chunkBatch; } // samples on the tiles at once
  unsigned steps() const { return spec.numSteps; }
  unsigned chunks() const { return plan.schedule.chunks; }
  bool stepMajor() const { return plan.schedule.stepMajor; }
  // The type the vertices store weights, states, traces and exchanged values in.
  bool half() const { return spec.halfStorage; }
  codes::Storage storage() const { return half() ? codes::STORE_HALF : codes::STORE_FLOAT; }
  const poplar::Type &stored() const { return half() ? poplar::HALF : poplar::FLOAT; }
  unsigned hostTag() const { return layers.size(); } // tileLayerBytes' loss/host column

  poplar::Tensor var(const poplar::Type &type, std::size_t n, unsigned tile,
                     const std::string &name, int layer = -1);
  poplar::Tensor zeros(const poplar::Type &type, std::size_t n, unsigned tile,
                       const std::string &name, int layer = -1);
  poplar::Tensor constant(const std::vector<float> &values, unsigned tile, const std::string &name,
                          int layer);

  std::size_t typeSize(const poplar::Type &type) const;

  // Throws NetworkDoesNotFit naming the tile and the layer that takes most of it.
  void checkMemory(const poplar::Target &target) const;
};

// ShardTensors.cpp: every shard's tensors, and the host-facing ones.
void createShardTensors(GraphBuild &b, Layer &layer);
void createHostTensors(GraphBuild &b);
// The plan's memory: bytes of popsnn's tensors per tile and layer (index L: the loss and
// host tensors), the same count a graph build makes, without a Graph.
GraphBuild countTensorBytes(const NetworkSpec &spec, const Plan &plan);

} // namespace popsnn
