// The planner: a pure function of the network and the target's geometry that decides
// how the network is laid out on the tiles -- shards per layer (tiles, neurons, buffer
// capacities), which layers push W.S sums instead of sending ids, the loss groups and
// the chunk of samples the tiles hold. No Graph is needed: the planner is tested alone
// (popsnn._core.plan), and the graph builder turns a Plan into tensors and vertices.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "popsnn/NetworkSpec.hpp"

namespace popsnn {

// What the planner needs to know of the device.
struct TargetGeometry {
  unsigned numTiles = 1;
  bool ipu = false;     // an IPU target (hardware or model), not the cpu device
  unsigned workers = 1; // worker contexts per tile
  // The codelets loaded run the whole-trace Leaky / Synaptic kernels (the cpu device with an
  // AVX-512 or AVX2 + FMA object: the LeakTraceKernels vertex says; see codes::leakTraceApplies).
  bool leakTrace = false;
};

// The choices the fit search makes (see Network.cpp): the schedule, how many shards
// fewer than tiles a layer gets (spread 1: as many as tiles), the batch's chunks.
struct Schedule {
  bool stepMajor = false;
  unsigned spread = 1;
  unsigned chunks = 1;
};

// P_BETA, P_THRESHOLD: a learned beta or threshold, one per neuron on the device (a layer's
// single value repeated on every neuron, its gradient summed over the layer).
enum ParamIndex {
  P_WEIGHT = 0,
  P_BIAS = 1,
  P_REC_WEIGHT = 2,
  P_REC_BIAS = 3,
  P_BETA = 4,
  P_THRESHOLD = 5,
  NUM_PARAMS = 6
};
const char *paramName(unsigned p); // PyTorch's: "weight", "bias", "recurrent_weight", ...
// A learned constant given once for the layer: the host holds 1 value, the device n per shard.
bool isLayerScalar(const LayerSpec &s, unsigned p);
// Parameter p (P_WEIGHT..) of a layer's public LayerParams.
std::vector<float> &paramValues(LayerParams &params, unsigned p);
const std::vector<float> &paramValues(const LayerParams &params, unsigned p);
// Whether a layer has parameter p, and its elements in PyTorch's layout.
bool layerHasParam(const LayerSpec &s, unsigned p);
std::size_t hostParamSize(const LayerSpec &s, unsigned p);
// Whether the optimiser keeps state slot 0 (SGD's momentum buffer, Adam's exp_avg) or
// 1 (Adam's exp_avg_sq).
bool hasOptimizerSlot(const OptimizerSpec &o, unsigned slot);

struct ShardPlan {
  unsigned tile = 0, first = 0, size = 0, capacity = 0;
  // A sparse rule: entries of the shard's gradient trace over all (step, sample) (0: none).
  unsigned traceCapacity = 0;
  // Spike ids its id trace holds over all (step, sample) (behind the starts and headers).
  unsigned spikeCapacity = 0;
  // LayerShape::gradList: the entries its dL/dI list holds over all (step, sample).
  unsigned gradListCapacity = 0;
};

// A layer's plan, without its shards (shared by the plan and the built layer).
struct LayerShape {
  LayerSpec spec;
  unsigned index = 0, shardSize = 0, stride = 0, inputMode = 0;
  // Ints of each shard's id trace (the same for every shard: it is exchanged whole).
  std::size_t idTraceSize = 0;
  bool a2a = false, o2o = false, isOutput = false;
  // push: the next layer is narrower than this one's id buffers, so each shard computes
  // its spikes' contribution W_next.S[t] to the next layer's input itself, and the next
  // layer's weight gradient on its neurons; those dense blocks cross tiles instead of the
  // id buffers (layer-major schedule only).
  bool push = false;
  // A sparse rule's masked surrogate kept as the compressed gradient trace (ids and values of
  // the entries inside the rule), or dense [T, B, n] where that would be as large (see
  // DENSE_TRACE_MIN_ACTIVITY).
  bool compressedTrace = false;
  // gradList: this layer's dL/dI reaches the layer before it as lists of the live neurons'
  // values (codes::gradListStarts), not dense [T, B, n] blocks: both layers keep compressed
  // traces (so only live neurons have a non-zero dL/dI, and the one before reads a row at a
  // time), layer-major, no all-to-all recurrence, no push, not the output layer (whose membrane
  // loss widens the live set beyond what the forward counts).
  bool gradList = false;
  // The whole-trace kernels take this layer (TargetGeometry::leakTrace and
  // codes::leakTraceApplies): its surrogate trace holds only the forward's spike masks.
  bool leakTrace = false;
  bool hasParam(unsigned p) const { return layerHasParam(spec, p); }
  // Elements of parameter p on a shard of n neurons (device layout [in, n] for weights).
  std::size_t paramSize(unsigned p, unsigned n) const;
};

struct LayerPlan : LayerShape {
  std::vector<ShardPlan> shards;
};

// The loss over groups of samples, one OutputLoss vertex each on a tile of its own.
struct LossGroup {
  unsigned first = 0, last = 0, tile = 0;
};

struct Plan {
  Schedule schedule;
  unsigned numTiles = 0, numOutputs = 0, numClasses = 0, outShardSize = 0, lossTile = 0;
  unsigned chunkBatch = 0; // samples the tiles hold at once (batch / chunks)
  // [T, B, N_in] input as a list (NetworkSpec::inputActivity): its entries per chunk of
  // samples; 0: the dense block.
  std::size_t inputListCapacity = 0;
  // The optimiser steps the first layer's weights a group of rows at a time as it computes
  // their gradient (DirectWeightAdamStep / DirectWeightSgdStep): direct input, float storage,
  // one chunk of the batch, on the cpu device. Elsewhere the gradient is written whole first:
  // half storage unscales it, chunks sum it, and an IPU splits the product over its workers
  // while one vertex owns the step counter. The training step then runs no DirectWeightGrad;
  // the gradients-only program still does.
  bool fusedWeightStep = false;
  std::vector<LayerPlan> layers;
  std::vector<LossGroup> lossGroups;
};

// Spike-buffer entries of a shard of `size` neurons at the given max activity.
unsigned bufferCapacity(unsigned size, float maxActivity);
// Gradient-trace entries of a shard of `size` neurons over `rows` (step, sample) rows at the
// given fraction of its entries (NetworkSpec::gradientTraceActivity()).
unsigned traceCapacity(unsigned size, unsigned rows, float activity);
// From this fraction of a layer's entries up, a sparse rule keeps its masked surrogate dense:
// a compressed entry costs 6 bytes (16-bit id and value) against a dense one's 4, so from 67%
// the compressed trace is the larger, and from about 45% one dot per entry is slower than the
// dense product (Finkbeiner & Neftci's fixed activity: every entry inside the rule).
constexpr float DENSE_TRACE_MIN_ACTIVITY = 0.45f;
// From this fraction of a layer's T x B x n entries live in its backward (an entry at that step
// or a later one, so the carry is non-zero) the compressed backward is slower than the dense
// one with the rule's mask: its cost is ~0.6 ms + 4.4 ms x live against the dense 2.3 ms at
// 784-200-200-10, T 25, B 32 (measured on the CPU runtime, docs/performance/sparse-backward.md).
constexpr float SPARSE_BACKWARD_MAX_LIVE = 0.35f;
// The compressed trace keeps 16-bit neuron ids: a shard wider than this keeps the dense layout.
constexpr unsigned MAX_TRACE_ID_SHARD = 65536;
// The layout of a layer's masked surrogate (pure): compressed for a sparse rule below
// DENSE_TRACE_MIN_ACTIVITY on shards whose ids fit 16 bits, else dense.
bool compressedTraceFor(SparseRule rule, float traceActivity, unsigned shardSize);
// NetworkSpec::sparseBackwardMaxLive, or SPARSE_BACKWARD_MAX_LIVE where it is 0.
float sparseBackwardLimit(const NetworkSpec &spec);
// Marks the sparse-rule layers whose measured live fraction (`layerLive`, per layer, 0 where
// not measured) exceeds sparseBackwardLimit as dense backward (LayerSpec::denseBackward, kept
// from then on); true if any layer changed.
bool chooseDenseBackward(const std::vector<double> &layerLive, NetworkSpec &spec);

// Throws std::invalid_argument when the schedule does not apply to the spec (chunks not
// dividing the batch); the spec must have been validated.
Plan planNetwork(const NetworkSpec &spec, const TargetGeometry &target, const Schedule &schedule);

} // namespace popsnn
