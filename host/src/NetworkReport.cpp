// Network's reports: the cost model's estimate, the runtime's summary, the plan's layout.
#include <sstream>

#include "NetworkImpl.hpp"
#include "Programs.hpp"

namespace popsnn {

std::map<std::string, double> Network::profileEstimate() const {
  CallGuard guard(impl_->busy);
#ifdef POPSNN_USE_POPLAR_SDK
  // Graphcore's SDK reports through its profiler (POPLAR_ENGINE_OPTIONS, PopVision).
  return {};
#else
  // popsnn runtime extension: the cost model's totals, each program's measured CPU time.
  const ProfileEstimate p = impl_->engine->getProfileEstimate();
  return withProgramTimes(
      *impl_->engine, {{"estimate_total_cycles", double(p.totalCycles)},
                       {"estimate_compute_cycles", double(p.computeCycles)},
                       {"estimate_exchange_cycles", double(p.exchangeCycles)},
                       {"estimate_sync_cycles", double(p.syncCycles)},
                       {"estimate_seconds", p.estimatedSeconds()},
                       {"estimate_exchange_bytes_within_ipu", double(p.exchangeBytesWithinIPU)},
                       {"estimate_exchange_bytes_between_ipus", double(p.exchangeBytesBetweenIPUs)},
                       {"estimate_host_bytes", double(p.hostBytes)},
                       {"estimate_syncs", double(p.syncs)},
                       {"runs", double(p.runs)},
                       {"max_tile_bytes", double(p.maxTileBytes())},
                       {"tile_clock_hz", p.tileClockFrequency}});
#endif
}

std::string Network::profileSummary() const {
  CallGuard guard(impl_->busy);
#ifdef POPSNN_USE_POPLAR_SDK
  return "Graphcore's SDK: profile with POPLAR_ENGINE_OPTIONS and PopVision";
#else
  std::ostringstream out;
  impl_->engine->printProfileSummary(out);
  return out.str();
#endif
}

std::map<std::string, double> Network::layout() const {
  CallGuard guard(impl_->busy);
  const Plan &plan = impl_->plan();
  std::map<std::string, double> out;
  out["tiles"] = plan.numTiles;
  out["max_activity"] = impl_->spec.maxActivity;
  out["trace_activity"] = impl_->spec.gradientTraceActivity();
  out["spike_activity"] = impl_->spec.idTraceActivity();
  // The input's list of non-zeros: entries per chunk (0: dense), its fraction, its grows.
  out["input_list_capacity"] = double(plan.inputListCapacity);
  out["input_activity"] = impl_->spec.inputActivity;
  out["input_list_grows"] = impl_->inputListGrows;
  // dL/dI lists (LayerShape::gradList): their fraction of T x B x n (1: dense), rebuilds.
  out["grad_list_activity"] = impl_->spec.gradientListActivity();
  out["grad_list_rebuilds"] = impl_->gradListGrows;
  out["sparse_backward_max_live"] = sparseBackwardLimit(impl_->spec); // above it: dense
  out["step_major"] = plan.schedule.stepMajor; // schedule: 1 step-major, 0 layer-major
  // The batch run in chunks of samples, one after the other (1: all at once).
  out["sample_chunks"] = plan.schedule.chunks;
  out["chunk_batch"] = plan.chunkBatch;
  // popsnn's tensors over all tiles, as the plan counts them (half storage: 2 bytes a value).
  double tensorBytes = 0;
  for (const auto &tile : impl_->built->tileLayerBytes)
    for (std::uint64_t bytes : tile)
      tensorBytes += double(bytes);
  out["tensor_bytes"] = tensorBytes;
  const double stored = impl_->spec.halfStorage ? 2.0 : 4.0;
  for (const auto &layer : impl_->layers()) {
    const std::string l = "layer" + std::to_string(layer.index) + "_";
    out[l + "shards"] = layer.shards.size();
    out[l + "shard_size"] = layer.shardSize;
    out[l + "buffer_capacity"] = layer.stride - codes::BUFFER_HEADER;
    out[l + "pushes"] = layer.push; // 1: sends W_next.S sums to the next layer, not ids
    // What the forward keeps for this layer's backward, over its shards: the surrogate
    // (dense [T, B, n], or the gradient trace's values with a sparse rule) and the ids (the
    // spike buffers, and the gradient trace's starts and ids).
    double surrogate = 0, ids = 0;
    for (const auto &sh : layer.shards) {
      surrogate += double(sh.surrogates.numElements()) * stored;
      ids += double(sh.idTrace.numElements()) * sizeof(int);
      if (sh.gradStarts.valid())
        ids += double(sh.gradStarts.numElements()) * sizeof(int) +
               double(sh.gradIds.numElements()) * sizeof(unsigned short);
    }
    out[l + "trace_capacity"] = layer.shards.front().traceCapacity;
    out[l + "compressed_trace"] = layer.compressedTrace; // 0: surrogate dense (masked by a rule)
    out[l + "leak_trace"] = layer.leakTrace; // 1: the surrogate trace holds spike masks alone
    out[l + "dense_backward"] = layer.spec.denseBackward; // the engine's: too live for the lists
    out[l + "live_fraction"] = impl_->spec.layers[layer.index].liveFraction; // last counted
    out[l + "spike_capacity"] = layer.shards.front().spikeCapacity;
    out[l + "grad_list_capacity"] = layer.shards.front().gradListCapacity; // 0: dense dL/dI
    out[l + "surrogate_trace_bytes"] = surrogate;
    out[l + "id_trace_bytes"] = ids;
    out[l + "trace_bytes"] = surrogate + ids;
  }
  return out;
}

} // namespace popsnn
