// The planner of a convolutional stage's ops on the tiles: a pure function of the stage and
// the target's geometry, like planNetwork (Plan.hpp). The stage's output channels are split
// into channel groups and its (step, sample) rows into row groups; each (group, rows) pair
// is one shard on a tile of its own, holding its rows' input, its channels' weights and
// every tensor its vertices (codelets/Conv.cpp) use. The bytes per tile are counted here
// and a stage that does not fit is refused before a graph is built.
#pragma once

#include <cstdint>
#include <vector>

#include "Plan.hpp"

namespace popsnn {

// A 2-D window: kernel, stride and padding (height, width).
struct Window2d {
  unsigned kernelH = 1, kernelW = 1, strideH = 1, strideW = 1, padH = 0, padW = 0;
  // The output size along height and width for an input of h x w.
  unsigned outH(unsigned h) const { return (h + 2 * padH - kernelH) / strideH + 1; }
  unsigned outW(unsigned w) const { return (w + 2 * padW - kernelW) / strideW + 1; }
};

struct PoolSpec {
  bool max = true; // MaxPool2d, else AvgPool2d (padding counts as zeros)
  Window2d window;
};

// The stage's neurons (Leaky; codes from VertexEnums.hpp), on the last map's entries.
struct ConvNeuronSpec {
  bool present = false; // without: the stage's current is its output
  unsigned reset = 0, rule = 0, surrogate = 0;
  float beta = 0, threshold = 1, surrogateParam = 0, ruleValue = 0;
};

// A stage Conv2d -> pools (on the convolution's output) -> neurons, as popsnn.conv writes it.
struct ConvStageSpec {
  unsigned rows = 0;  // (step, sample) rows: T x B
  unsigned steps = 1; // T: a shard holds whole samples (all their steps)
  ConvNeuronSpec neuron;
  unsigned inChannels = 0, inHeight = 0, inWidth = 0, outChannels = 0;
  Window2d conv;
  std::vector<PoolSpec> pools;
  bool inputGrad = false; // the backward also forms dL/dx (a stage after the first)
  // Direct input (the same every step): the convolution and pools run once per sample
  // (rows / steps rows), the neurons read that current every step, and the backward
  // takes dL/dI summed over the steps.
  bool direct = false;
  // dL/dU reaches the neurons from outside the stage (the loss on the output stage's
  // membranes). A hidden stage's is zero: not stored, not read.
  bool gradMembranes = true;
  unsigned convRows(unsigned r) const { return direct ? r / steps : r; }
};

// One map size per layer of the stage: [0] the input, [1] the convolution's output, then
// one per pool; the last is the stage's output (its neurons' [C_out, H, W]).
struct MapSize {
  unsigned h = 0, w = 0;
};
std::vector<MapSize> stageMapSizes(const ConvStageSpec &spec);

// The stage's first layer after the convolution is a 2 x 2 max pool at stride 2 tiling the
// convolution's map (the CSNN's): the forward then pools as it goes (the current is never
// stored) and the pool's backward leaves dL/dI channels-last for the convolution's.
bool pairsMaxPoolFirst(const ConvStageSpec &spec);

struct ConvShard {
  unsigned tile = 0, firstChannel = 0, channels = 0, firstRow = 0, rows = 0;
  unsigned channelGroup = 0, rowGroup = 0;
};

struct ConvPlan {
  unsigned channelGroups = 0, rowGroups = 0, groupChannels = 0, groupRows = 0;
  std::vector<MapSize> maps;
  std::vector<ConvShard> shards; // channel group major
  std::uint64_t tileBytes = 0;   // the largest shard's bytes (ConvPlan counts them)
  // The convolution's vertices per shard (forward, input and weight gradients): its rows
  // split over the tile's worker contexts (an IPU target; 1 on the cpu device, where a tile
  // is one thread), each worker with its own work; as many as fit the tile's memory.
  unsigned workers = 1;
  // The neurons' vertices per shard: its neurons split over the workers (an IPU target, when
  // the tile has room for the gathered columns the runtime rearranges around them).
  unsigned neuronWorkers = 1;
};

// ConvInputGrad's col rows: the positions per dense product, at most this many floats of
// work (48 KiB: L1/L2-sized on the host; one chunk of positions, not a whole map, on a tile).
constexpr unsigned INPUT_GRAD_WORK_FLOATS = 12288;
// (A tile's workers share it: INPUT_GRAD_WORK_FLOATS / workers each.)
unsigned inputGradChunk(const ConvStageSpec &spec, unsigned positions, unsigned workers = 1);
// Its work: the chunk's col rows, at least one col row and a position's non-zero entries.
std::size_t inputGradWorkFloats(const ConvStageSpec &spec, unsigned positions, unsigned channels,
                                unsigned workers = 1);
// One worker's work (floats), which ConvForward, ConvInputGrad and ConvWeightGrad take in
// turn: the largest of their three.
std::size_t convWorkFloats(const ConvStageSpec &spec, unsigned channels, unsigned workers);

// Bytes the shard's tensors take on its tile (4-byte floats and indices); rows of whole samples;
// `workers` workers, each with its own work.
std::uint64_t convShardBytes(const ConvStageSpec &spec, unsigned channels, unsigned rows,
                             unsigned channelGroups, unsigned rowGroups, unsigned workers = 1,
                             unsigned neuronWorkers = 1);

// Throws std::invalid_argument naming the fix for a stage that does not fit the tiles'
// memory (bytesPerTile; 0: no limit) or a window larger than its (padded) input.
ConvPlan planConvStage(const ConvStageSpec &spec, const TargetGeometry &target,
                       std::uint64_t bytesPerTile);

} // namespace popsnn
