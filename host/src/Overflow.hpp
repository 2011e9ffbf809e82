// What a step's overflow counters say (codes::OverflowField, per shard and chunk): which
// buffer or trace did not fit, the message naming the fix, and how much to grow. Pure
// functions of the counters and the spec: Network.cpp reads the counters and rebuilds.
#pragma once

#include <string>
#include <vector>

#include <poplar/Engine.hpp>

#include "GraphBuild.hpp"
#include "popsnn/Network.hpp"
#include "popsnn/NetworkSpec.hpp"

namespace popsnn {

struct Overflow {
  unsigned layer = 0, step = 0, needed = 0, capacity = 0, count = 0;
  bool any = false;
  double grow = 0; // the largest fraction of a shard's neurons a buffer needed
  // A trace that overflowed (its layer, needed and capacity above when no spike buffer
  // did): the gradient trace, or the id trace over all steps (`spikes`); and the largest
  // fraction of a shard's T x B x n entries each needed.
  bool trace = false, spikes = false;
  double traceGrow = 0, spikeGrow = 0;
  // The largest fraction of a shard's T x B x n entries a gradient trace needed, overflowed
  // or not (what a measured trace is sized by), and likewise the id trace's spike ids.
  double traceNeeded = 0, spikesNeeded = 0;
  // The dL/dI lists (LayerShape::gradList) as the forward counted them: the largest fraction of
  // a shard's T x B x n entries any compressed-trace shard's list needs (a hidden layer after
  // the first; a list or not), and
  // the first list that needs more than it holds (its layer, needed and capacity).
  double listNeeded = 0;
  // Per layer: the largest fraction of a compressed-trace shard's T x B x n entries live in its
  // backward (an entry at that step or a later one: the carry is non-zero), as the forward
  // counted them; 0 where the layer keeps its surrogate dense. Exact when no trace overflowed.
  std::vector<double> layerLive;
  // Per layer: traceNeeded of its compressed-trace shards (0 where dense), so the shared trace
  // capacity can follow the layers that keep the compressed trace.
  std::vector<double> layerTrace;
  bool listOverflow = false;
  unsigned listLayer = 0, listNeededEntries = 0, listCapacity = 0;
  // Nothing overflowed but what the engine sized (`gradient`: the gradient trace, `ids`: the
  // id trace), which grows whatever the policy: no spike buffer, no size the user set.
  bool onlyEngineSized(const NetworkSpec &spec, bool gradient, bool ids) const {
    return grow <= spec.maxActivity && (gradient || traceGrow <= spec.gradientTraceActivity()) &&
           (ids || spikeGrow <= spec.idTraceActivity());
  }
};

// No overflow yet: the spec's sizes as the fractions to grow from.
Overflow noOverflow(const NetworkSpec &spec);
// One chunk's counters `o` of shard `sh` (of `rows` = T x chunk batch rows), into `worst`.
void noteOverflow(const unsigned *o, const Layer &layer, const Shard &sh, unsigned rows,
                  unsigned numSteps, Overflow &worst);
// One line naming what did not fit and the fix (a dL/dI list: listOverflowMessage).
std::string overflowMessage(const Overflow &worst, const NetworkSpec &spec);
std::string listOverflowMessage(const Overflow &worst, const NetworkSpec &spec);
// The spec's buffers and traces grown with headroom for what was needed, each on its own.
void growFor(const Overflow &worst, NetworkSpec &spec);
// Headroom over the measured or needed activity a trace or buffer is sized with.
constexpr double ACTIVITY_HEADROOM = 1.25;
// The worst overflow over every shard and chunk, from the device's counters.
Overflow readOverflow(poplar::Engine &engine, const NetworkSpec &spec, const Plan &plan,
                      const std::vector<Layer> &layers);

// Which sizes the engine measures (a user's size overflows as the policy says, the engine's
// grows): the gradient trace and the id trace still to measure, the gradient trace's, the
// dL/dI lists' and the id trace's.
struct Measured {
  bool measuringTrace = false, trace = false, lists = false, measuringSpikes = false,
       spikes = false;
};
// What a forward's counts need (Network::checkOverflow): false, nothing; else the spec's sizes
// grown or measured (the caller rebuilds and redoes the step; listRebuilds counts those for the
// dL/dI lists). Throws SpikeBufferOverflow under the Error policy for a size the user set.
bool resizeFor(const Overflow &worst, const Measured &measured, OverflowPolicy policy,
               unsigned entriesPerShard, NetworkSpec &spec, unsigned &listRebuilds);

// The largest shard's T x chunk-batch x n entries.
unsigned entriesPerShard(const NetworkSpec &spec, const Plan &plan);

// A measured gradient trace (spec.traceActivity 0): its activity from the first minibatch's
// counts, with headroom, at least one entry's worth (0 means "not measured yet").
float measuredTraceActivity(const Overflow &counted, unsigned entriesPerShard);
// A measured id trace (spec.spikeActivity 0): likewise, at least TRACE_MEASURING_ACTIVITY and,
// where it fitted, never above the size it was counted with.
float measuredSpikeActivity(const Overflow &counted, const NetworkSpec &spec);
// A measured dL/dI list (spec.gradListActivity 0): likewise, from the forward's counts.
float measuredListActivity(const Overflow &counted, unsigned entriesPerShard);

} // namespace popsnn
