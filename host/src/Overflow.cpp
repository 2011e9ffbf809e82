#include "Overflow.hpp"

#include <algorithm>
#include <sstream>

#include "popsnn/VertexEnums.hpp"

namespace popsnn {

namespace {

void noteTraceOverflow(unsigned needed, unsigned capacity, bool spikes, const Layer &layer,
                       const Shard &sh, unsigned rows, unsigned numSteps, Overflow &worst) {
  if (needed <= capacity)
    return;
  if (!worst.any) {
    worst.layer = layer.index;
    worst.step = numSteps - 1;
    worst.needed = needed;
    worst.capacity = capacity;
    worst.count = 1;
    worst.trace = true;
    worst.spikes = spikes;
  }
  double &grow = spikes ? worst.spikeGrow : worst.traceGrow;
  grow = std::max(grow, needed / (double(rows) * sh.size));
  worst.any = true;
}

} // namespace

Overflow noOverflow(const NetworkSpec &spec) {
  Overflow none;
  none.grow = spec.maxActivity;
  none.traceGrow = spec.gradientTraceActivity();
  none.spikeGrow = spec.idTraceActivity();
  none.layerLive.assign(spec.layers.size(), 0.0);
  none.layerTrace.assign(spec.layers.size(), 0.0);
  return none;
}

void noteOverflow(const unsigned *o, const Layer &layer, const Shard &sh, unsigned rows,
                  unsigned numSteps, Overflow &worst) {
  if (o[codes::OVERFLOWED] != 0) {
    if (!worst.any || worst.trace || o[codes::MOST_NEEDED] > worst.needed) {
      worst.layer = layer.index;
      worst.step = o[codes::FIRST_STEP] - 1;
      worst.needed = o[codes::MOST_NEEDED];
      worst.capacity = sh.capacity;
      worst.count = o[codes::OVERFLOWED];
      worst.trace = false;
    }
    worst.any = true;
    worst.grow = std::max(worst.grow, double(o[codes::MOST_NEEDED]) / sh.size);
  }
  if (sh.traceCapacity != 0) {
    const double needed = o[codes::TRACE_NEEDED] / (double(rows) * sh.size);
    worst.traceNeeded = std::max(worst.traceNeeded, needed);
    if (layer.index < worst.layerTrace.size())
      worst.layerTrace[layer.index] = std::max(worst.layerTrace[layer.index], needed);
  }
  worst.spikesNeeded =
      std::max(worst.spikesNeeded, o[codes::SPIKES_NEEDED] / (double(rows) * sh.size));
  if (sh.traceCapacity != 0)
    noteTraceOverflow(o[codes::TRACE_NEEDED], sh.traceCapacity, false, layer, sh, rows, numSteps,
                      worst);
  noteTraceOverflow(o[codes::SPIKES_NEEDED], sh.spikeCapacity, true, layer, sh, rows, numSteps,
                    worst);
  const unsigned list = o[codes::GRAD_LIST_NEEDED];
  if (sh.traceCapacity != 0 && layer.index < worst.layerLive.size())
    worst.layerLive[layer.index] =
        std::max(worst.layerLive[layer.index], list / (double(rows) * layer.shardSize));
  if (layer.compressedTrace && layer.index > 0 && !layer.isOutput) // the layers that may send lists
    worst.listNeeded = std::max(worst.listNeeded, list / (double(rows) * layer.shardSize));
  if (sh.gradListCapacity != 0 && list > sh.gradListCapacity && !worst.listOverflow) {
    worst.listOverflow = true;
    worst.listLayer = layer.index;
    worst.listNeededEntries = list;
    worst.listCapacity = sh.gradListCapacity;
  }
}

std::string listOverflowMessage(const Overflow &worst, const NetworkSpec &spec) {
  std::ostringstream msg;
  msg << "dL/dI list overflow in layer " << worst.listLayer << ": its backward would need "
      << worst.listNeededEntries
      << " entries (live neurons over the steps) but a shard's list holds " << worst.listCapacity
      << "; nothing was updated. Raise grad_list_activity (now " << spec.gradListActivity
      << ", up to 1.0; 0: measured) or pass on_overflow='grow'";
  return msg.str();
}

std::string overflowMessage(const Overflow &worst, const NetworkSpec &spec) {
  std::ostringstream msg;
  if (worst.trace) {
    const char *option = worst.spikes ? "spike_activity" : "trace_activity";
    msg << (worst.spikes ? "id trace" : "gradient trace") << " overflow in layer " << worst.layer
        << ": over its " << spec.numSteps << " steps a shard needed " << worst.needed
        << (worst.spikes ? " spike ids"
                         : " entries (spikes + gradient candidates inside the sparse rule)")
        << " but holds " << worst.capacity << "; nothing was updated. Raise " << option << " (now "
        << (worst.spikes ? spec.idTraceActivity() : spec.gradientTraceActivity())
        << ", up to 1.0) or pass on_overflow='grow' to grow the trace and recompile";
  } else {
    msg << "spike buffer overflow in layer " << worst.layer << " at step " << worst.step
        << ": a buffer needed " << worst.needed << " entries (spikes) but holds " << worst.capacity
        << " (" << worst.count
        << " buffer(s) of that shard overflowed); nothing was updated. Raise max_activity "
        << "(now " << spec.maxActivity << ", up to 1.0) or pass on_overflow='grow' to grow "
        << "the buffers and recompile";
  }
  return msg.str();
}

void growFor(const Overflow &worst, NetworkSpec &spec) {
  // With headroom, so that a slowly rising activity does not recompile every step. Each
  // grows on its own (and the traces are kept apart from max_activity from now on): a
  // burst of spikes at one step sizes the per-step buffers, not the traces.
  const auto grown = [](double needed, float now) {
    return needed > now ? float(std::min(1.0, needed * ACTIVITY_HEADROOM)) : now;
  };
  spec.traceActivity = grown(worst.traceGrow, spec.gradientTraceActivity());
  spec.spikeActivity = grown(worst.spikeGrow, spec.idTraceActivity());
  spec.maxActivity = grown(worst.grow, spec.maxActivity);
  if (worst.listOverflow)
    spec.gradListActivity = grown(worst.listNeeded, spec.gradientListActivity());
}

float measuredListActivity(const Overflow &counted, unsigned entriesPerShard) {
  const double oneEntry = 1.0 / std::max(1u, entriesPerShard);
  return float(std::min(1.0, std::max(counted.listNeeded * ACTIVITY_HEADROOM, oneEntry)));
}

float measuredTraceActivity(const Overflow &counted, unsigned entriesPerShard) {
  const double oneEntry = 1.0 / std::max(1u, entriesPerShard);
  return float(std::min(1.0, std::max(counted.traceNeeded * ACTIVITY_HEADROOM, oneEntry)));
}

// At least the gradient trace's measuring size: a layer still silent on the first minibatch
// (an untrained net's deeper layers) would otherwise rebuild at each rise of its activity.
float measuredSpikeActivity(const Overflow &counted, const NetworkSpec &spec) {
  double measured = std::max(counted.spikesNeeded * ACTIVITY_HEADROOM,
                             double(NetworkSpec::TRACE_MEASURING_ACTIVITY));
  if (counted.spikeGrow <= spec.idTraceActivity()) // it fitted: never above what it ran with
    measured = std::min<double>(measured, spec.idTraceActivity());
  return float(std::min(1.0, measured));
}

// A measured trace once layers went dense (chooseDenseBackward): sized by the layers that keep
// the compressed trace, not by the dense ones' entries (their memory saved back); never grown.
static void shrinkTraceToCompressed(const Overflow &counted, unsigned entriesPerShard,
                                    NetworkSpec &spec) {
  Overflow kept = counted;
  kept.traceNeeded = 0;
  for (std::size_t l = 0; l < counted.layerTrace.size() && l < spec.layers.size(); ++l)
    if (!spec.layers[l].denseBackward)
      kept.traceNeeded = std::max(kept.traceNeeded, counted.layerTrace[l]);
  if (spec.traceActivity > 0.0f)
    spec.traceActivity = std::min(spec.traceActivity, measuredTraceActivity(kept, entriesPerShard));
}

Overflow readOverflow(poplar::Engine &engine, const NetworkSpec &spec, const Plan &plan,
                      const std::vector<Layer> &layers) {
  Overflow worst = noOverflow(spec);
  const unsigned chunks = plan.schedule.chunks;
  const unsigned rows = spec.numSteps * plan.chunkBatch;
  for (auto &layer : layers)
    for (unsigned k = 0; k < layer.shards.size(); ++k) {
      // One set of counters per chunk of samples (one without chunks).
      std::vector<unsigned> all(std::size_t(chunks) * codes::OVERFLOW_FIELDS);
      engine.readTensor("overflow" + std::to_string(layer.index) + "/" + std::to_string(k),
                        all.data(), all.data() + all.size());
      for (unsigned m = 0; m < chunks; ++m)
        noteOverflow(all.data() + std::size_t(m) * codes::OVERFLOW_FIELDS, layer, layer.shards[k],
                     rows, spec.numSteps, worst);
    }
  return worst;
}

bool resizeFor(const Overflow &worst, const Measured &measured, OverflowPolicy policy,
               unsigned entriesPerShard, NetworkSpec &spec, unsigned &listRebuilds) {
  // Unset dL/dI lists: sized by the first forward whose gradient trace held every entry (the
  // forward's counts are exact only then).
  const bool sizeLists = measured.lists && spec.gradListActivity == 0.0f &&
                         !measured.measuringTrace && !worst.any && worst.listNeeded > 0;
  // A complete trace's live counts: layers whose compressed backward would be the slower one
  // keep their masked surrogate dense from now on.
  const bool denser =
      !worst.any && !measured.measuringTrace && chooseDenseBackward(worst.layerLive, spec);
  // The id trace's first complete counts (no spike buffer overflowed: the id trace counts
  // past its end, and the gradient trace's overflow does not cut them): its size from now on.
  const bool idsCounted = measured.measuringSpikes && worst.grow <= spec.maxActivity;
  const float ids = idsCounted ? measuredSpikeActivity(worst, spec) : 0.0f;
  const bool fewerIds = ids > 0.0f && ids < spec.idTraceActivity();
  const auto keepIds = [&] { // counted as large as it ran: nothing to rebuild for it
    if (idsCounted)
      spec.spikeActivity = ids;
    return false;
  };
  if (!worst.any && !measured.measuringTrace && !worst.listOverflow && !sizeLists && !denser &&
      !fewerIds)
    return keepIds();
  const bool engineSized = worst.onlyEngineSized(spec, measured.trace, measured.spikes);
  if (measured.measuringTrace)
    spec.traceActivity = measuredTraceActivity(worst, entriesPerShard);
  if (sizeLists)
    spec.gradListActivity = measuredListActivity(worst, entriesPerShard);
  if (sizeLists && !worst.any && !measured.measuringTrace &&
      spec.gradListActivity >= DENSE_TRACE_MIN_ACTIVITY && !denser && !fewerIds)
    return keepIds(); // measured, and as dense as before: nothing to rebuild
  if (worst.any && policy == OverflowPolicy::Error && !engineSized)
    throw SpikeBufferOverflow(overflowMessage(worst, spec), worst.layer, worst.step, worst.needed,
                              worst.capacity);
  if (worst.listOverflow && policy == OverflowPolicy::Error && !measured.lists)
    throw SpikeBufferOverflow(listOverflowMessage(worst, spec), worst.listLayer, 0,
                              worst.listNeededEntries, worst.listCapacity);
  listRebuilds += sizeLists || worst.listOverflow;
  growFor(worst, spec);         // from the sizes counted with: it sets spikeActivity
  if (measured.measuringSpikes) // counted: its size; else as maxActivity, to count next time
    spec.spikeActivity = ids;
  if (denser && measured.trace) // after growFor: nothing overflowed, so it grew nothing
    shrinkTraceToCompressed(worst, entriesPerShard, spec);
  return true;
}

unsigned entriesPerShard(const NetworkSpec &spec, const Plan &plan) {
  unsigned size = 1;
  for (const auto &layer : plan.layers)
    size = std::max(size, layer.shardSize);
  return spec.numSteps * plan.chunkBatch * size;
}

} // namespace popsnn
