#include "ConvPlan.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace popsnn {

namespace {

unsigned ceilDiv(unsigned a, unsigned b) { return (a + b - 1) / b; }

void checkWindow(const char *layer, const Window2d &w, const MapSize &in) {
  if (!w.kernelH || !w.kernelW || !w.strideH || !w.strideW)
    throw std::invalid_argument(std::string(layer) + ": kernel and stride must be >= 1");
  if (in.h + 2 * w.padH < w.kernelH || in.w + 2 * w.padW < w.kernelW)
    throw std::invalid_argument(std::string(layer) + ": kernel " + std::to_string(w.kernelH) + "x" +
                                std::to_string(w.kernelW) + " is larger than its padded " +
                                "input " + std::to_string(in.h + 2 * w.padH) + "x" +
                                std::to_string(in.w + 2 * w.padW) + "; use a smaller kernel");
}

} // namespace

unsigned inputGradChunk(const ConvStageSpec &spec, unsigned positions, unsigned workers) {
  const unsigned taps = spec.inChannels * spec.conv.kernelH * spec.conv.kernelW;
  const unsigned floats = INPUT_GRAD_WORK_FLOATS / std::max(1u, workers);
  return std::max(1u, std::min(positions, floats / std::max(1u, taps)));
}

std::size_t inputGradWorkFloats(const ConvStageSpec &spec, unsigned positions, unsigned channels,
                                unsigned workers) {
  const std::size_t taps = std::size_t(spec.inChannels) * spec.conv.kernelH * spec.conv.kernelW;
  const std::size_t col =
      std::max(inputGradChunk(spec, positions, workers) * taps, taps + 2 * channels);
  if (spec.conv.padW) // no window runs (codelets/ConvInputRuns.hpp's windowRunsFloats)
    return col;
  // A run padded to whole vectors of any target (at most 16 floats), so the codelets' own
  // rounding never needs more.
  const std::size_t run = (std::size_t(spec.conv.kernelW) * spec.inChannels + 15) / 16 * 16;
  const std::size_t in = std::size_t(spec.inChannels) * spec.inHeight * spec.inWidth;
  return col + (std::size_t(channels) * spec.conv.kernelH + 1) * run + in;
}

std::size_t convWorkFloats(const ConvStageSpec &spec, unsigned channels, unsigned workers) {
  const std::vector<MapSize> maps = stageMapSizes(spec);
  const std::size_t c = channels, P = std::size_t(maps[1].h) * maps[1].w;
  const std::size_t inSize = std::size_t(spec.inChannels) * spec.inHeight * spec.inWidth;
  const std::size_t taps = std::size_t(spec.inChannels) * spec.conv.kernelH * spec.conv.kernelW;
  // The forward: taps transposed, one row's sums, its input listed (and with the pool fused,
  // one row's pooled maxima and argmax, [Q, c] each). The weight gradient: [taps, c], [P, c],
  // one window, a position's entries.
  const std::size_t forward =
      taps * c + P * c + inSize + (pairsMaxPoolFirst(spec) ? 2 * c * maps[2].h * maps[2].w : 0);
  // With the pool fused, both gradients also form a row of dL/dI [P, c] from the pool's
  // gradient and argmax (no dL/dI map is stored).
  // Or the pooled positions' lists (codelets/ConvPooling.hpp's gradRowFloats: a pooled row's
  // [2 W, c] slots, or the input gradient's whole row of lists, pooledListsFloats).
  const std::size_t lists =
      std::max(4 * std::size_t(maps[1].w) * c + 2 * maps[1].w, 2 * ((P / 4 + 1) * c + 8) + 2 * P);
  const std::size_t row = pairsMaxPoolFirst(spec) ? std::max(P * c, lists) : 0;
  // The weight gradient's row from a 64-byte boundary and c zeros after it (its products tap
  // by tap: codelets/ConvWeightTaps.hpp).
  const std::size_t weightGrad =
      taps * c + P * c + taps + inSize + 2 * c + row + (row ? c + 15 : 0);
  const std::size_t inputGrad =
      spec.inputGrad ? inputGradWorkFloats(spec, unsigned(P), channels, workers) + row : 0;
  return std::max({forward, weightGrad, inputGrad});
}

std::vector<MapSize> stageMapSizes(const ConvStageSpec &spec) {
  std::vector<MapSize> maps{{spec.inHeight, spec.inWidth}};
  checkWindow("Conv2d", spec.conv, maps.back());
  maps.push_back({spec.conv.outH(spec.inHeight), spec.conv.outW(spec.inWidth)});
  for (const PoolSpec &p : spec.pools) {
    checkWindow(p.max ? "MaxPool2d" : "AvgPool2d", p.window, maps.back());
    maps.push_back({p.window.outH(maps.back().h), p.window.outW(maps.back().w)});
  }
  return maps;
}

bool pairsMaxPoolFirst(const ConvStageSpec &spec) {
  if (spec.pools.empty() || !spec.pools[0].max)
    return false;
  const Window2d &w = spec.pools[0].window;
  const std::vector<MapSize> maps = stageMapSizes(spec);
  return w.kernelH == 2 && w.kernelW == 2 && w.strideH == 2 && w.strideW == 2 && !w.padH &&
         !w.padW && maps[1].h == 2 * maps[2].h && maps[1].w == 2 * maps[2].w;
}

std::uint64_t convShardBytes(const ConvStageSpec &spec, unsigned channels, unsigned rows,
                             unsigned channelGroups, unsigned rowGroups, unsigned workers,
                             unsigned neuronWorkers) {
  const std::vector<MapSize> maps = stageMapSizes(spec);
  const std::uint64_t c = channels, r = rows, rc = spec.convRows(rows);
  const std::uint64_t inSize = std::uint64_t(spec.inChannels) * spec.inHeight * spec.inWidth;
  const std::uint64_t taps = std::uint64_t(spec.inChannels) * spec.conv.kernelH * spec.conv.kernelW;
  const std::uint64_t convOut = std::uint64_t(maps[1].h) * maps[1].w;
  // Input, weights, bias; per worker its counters (three) and its work, which the forward,
  // the input gradient and the weight gradient take in turn (convWorkFloats), and with
  // several workers their weight gradients' partial sums.
  const bool fused = pairsMaxPoolFirst(spec);
  std::uint64_t floats = rc * inSize + c * taps + c +
                         workers * (3 + convWorkFloats(spec, channels, workers)) +
                         (workers > 1 ? workers * (c * taps + c) : 0);
  // Every map after the input: its forward values and its gradient; max pools their argmax.
  // Fused, the convolution's output has neither (its rows are formed in the work).
  for (std::size_t k = 1; k < maps.size(); ++k) {
    const std::uint64_t map = rc * c * maps[k].h * maps[k].w;
    floats += (k == 1 && fused ? 0 : 2) * map + (k >= 2 && spec.pools[k - 2].max ? map : 0);
  }
  // The neurons: membranes, spikes, dL/dS, dL/dU of the last map's entries; state.
  if (spec.neuron.present) {
    const std::uint64_t last = r * c * maps.back().h * maps.back().w;
    const unsigned fields = spec.gradMembranes ? 4 : 3;
    floats += fields * last + 3 * last / std::max(1u, spec.steps);
    // Split over workers, a worker's columns of the last map are not contiguous: the
    // runtime gathers the forward's 3 and the backward's 3-4 fields around the compute sets.
    if (neuronWorkers > 1)
      floats += (3 + fields) * last;
  }
  // Weight and bias gradients, and this tile's slice of their sum over the row groups.
  floats += (c * taps + c) * (1 + (rowGroups > 1 ? 2 : 0));
  // This tile's share of dL/dx and its slice of the sum over the channel groups.
  if (spec.inputGrad)
    floats +=
        rc * inSize + (channelGroups > 1 ? rc * inSize + ceilDiv(rc * inSize, channelGroups) : 0);
  return 4 * floats;
}

namespace {

// Channel groups `groups`, the tiles left over taking the rows (every tile busy): kept in
// `plan` when it has fewer bytes on its fullest tile than the plan's so far. Channel groups
// each need all their rows' input, row groups all their channels' weights: which is larger
// depends on the stage.
void considerSplit(const ConvStageSpec &spec, unsigned tiles, unsigned groups, ConvPlan &plan) {
  const unsigned groupChannels = ceilDiv(spec.outChannels, groups);
  const unsigned channelGroups = ceilDiv(spec.outChannels, groupChannels);
  if (channelGroups != groups)
    return; // the same split as a smaller count
  const unsigned samples = spec.rows / spec.steps;
  const unsigned groupRows =
      spec.steps * ceilDiv(samples, std::max(1u, std::min(samples, tiles / groups)));
  const unsigned rowGroups = ceilDiv(spec.rows, groupRows);
  const std::uint64_t bytes =
      convShardBytes(spec, groupChannels, groupRows, channelGroups, rowGroups);
  if (plan.channelGroups && bytes >= plan.tileBytes)
    return;
  plan.groupChannels = groupChannels, plan.channelGroups = channelGroups;
  plan.groupRows = groupRows, plan.rowGroups = rowGroups, plan.tileBytes = bytes;
}

} // namespace

ConvPlan planConvStage(const ConvStageSpec &spec, const TargetGeometry &target,
                       std::uint64_t bytesPerTile) {
  if (!spec.rows || !spec.inChannels || !spec.outChannels || !spec.inHeight || !spec.inWidth)
    throw std::invalid_argument("a convolutional stage needs rows, channels and an input map");
  if (!target.numTiles)
    throw std::invalid_argument("a plan needs at least one tile");
  if (!spec.steps || spec.rows % spec.steps)
    throw std::invalid_argument("a convolutional stage's rows (" + std::to_string(spec.rows) +
                                ") must be whole samples of " + std::to_string(spec.steps) +
                                " steps");
  ConvPlan plan;
  plan.maps = stageMapSizes(spec);
  for (unsigned groups = 1; groups <= std::min(spec.outChannels, target.numTiles); ++groups)
    considerSplit(spec, target.numTiles, groups, plan);
  // Then as many workers as the tile has (an IPU) and a shard has rows, fewer while their
  // work does not fit.
  const unsigned most = target.ipu ? std::min(target.workers, spec.convRows(plan.groupRows)) : 1u;
  for (unsigned workers = std::max(1u, most); workers > 1; --workers) {
    const std::uint64_t bytes = convShardBytes(spec, plan.groupChannels, plan.groupRows,
                                               plan.channelGroups, plan.rowGroups, workers);
    if (!bytesPerTile || bytes <= bytesPerTile) {
      plan.workers = workers, plan.tileBytes = bytes;
      break;
    }
  }
  const std::uint64_t neurons =
      std::uint64_t(plan.groupChannels) * plan.maps.back().h * plan.maps.back().w;
  if (target.ipu && spec.neuron.present && neurons > 1) {
    const unsigned split = unsigned(std::min<std::uint64_t>(target.workers, neurons));
    const std::uint64_t bytes =
        convShardBytes(spec, plan.groupChannels, plan.groupRows, plan.channelGroups, plan.rowGroups,
                       plan.workers, split);
    if (split > 1 && (!bytesPerTile || bytes <= bytesPerTile))
      plan.neuronWorkers = split, plan.tileBytes = bytes;
  }
  if (bytesPerTile && plan.tileBytes > bytesPerTile)
    throw std::invalid_argument("the convolutional stage needs " + std::to_string(plan.tileBytes) +
                                " bytes on a tile (" + std::to_string(plan.groupChannels) +
                                " channels x " + std::to_string(plan.groupRows) +
                                " rows), the target has " + std::to_string(bytesPerTile) +
                                "; use more tiles (tiles_per_ipu, num_ipus) or a smaller batch");
  for (unsigned g = 0; g < plan.channelGroups; ++g)
    for (unsigned q = 0; q < plan.rowGroups; ++q) {
      ConvShard sh;
      sh.channelGroup = g;
      sh.rowGroup = q;
      sh.tile = g * plan.rowGroups + q;
      sh.firstChannel = g * plan.groupChannels;
      sh.channels = std::min(plan.groupChannels, spec.outChannels - sh.firstChannel);
      sh.firstRow = q * plan.groupRows;
      sh.rows = std::min(plan.groupRows, spec.rows - sh.firstRow);
      plan.shards.push_back(sh);
    }
  return plan;
}

} // namespace popsnn
