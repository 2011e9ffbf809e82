// Row helpers of the backward vertices (LifBackward.cpp) that do not depend on the neuron's
// units: the downstream layers' dL/dI gathered and multiplied back through their weights,
// and the sums over an id buffer's spikes. Out of line where a call is a whole row's work,
// so they are compiled once, not once per vertex specialisation.
#pragma once

#include "../include/popsnn/VertexEnums.hpp"
#include "DenseKernels.hpp"
#include "Lanes16.hpp"
#include "LifCommon.hpp"
#include "StoredRows.hpp"

#define POPSNN_ONCE inline __attribute__((noinline))

namespace popsnn {
namespace backward_rows {

using namespace popsnn::codes;

inline float dot(const float *__restrict a, const float *__restrict b, unsigned n) {
  float s = 0.0f;
  for (unsigned j = 0; j < n; ++j)
    s += a[j] * b[j];
  return s;
}

// One (step, sample) row of the next layer's dL/dI, gathered from its shards' blocks
// (`rowsPerBlock` rows each, a shard's width per row) into g, zero-padded to
// pushWidth(nextLayerSize) so it lines up with the padded rows of W_next. G: the stored type
// (half storage: the values read as float, exactly).
template <class G>
POPSNN_ONCE void gatherNextGrad(const G *nextGrad, float *__restrict g, unsigned nextLayerSize,
                                unsigned nextShardSize, unsigned row, unsigned rowsPerBlock) {
  const unsigned P = pushWidth(nextLayerSize);
  for (unsigned c = 0; c < P; ++c)
    g[c] = 0.0f;
  for (unsigned first = 0; first < nextLayerSize; first += nextShardSize) {
    const unsigned size =
        nextLayerSize - first < nextShardSize ? nextLayerSize - first : nextShardSize;
    const G *__restrict block = &nextGrad[rowsPerBlock * first + row * size];
    for (unsigned c = 0; c < size; ++c)
      g[first + c] = block[c];
  }
}

// Fan-out blocks [n, n_k] (one per downstream shard k) -> [N_down, n] (float: half weights
// are held exactly).
template <class W>
POPSNN_ONCE void transposeFanout(const W *__restrict fanout, unsigned n, unsigned shardSize,
                                 unsigned layerSize, float *__restrict byDownstream) {
  for (unsigned first = 0; first < layerSize; first += shardSize) {
    const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
    const W *__restrict block = fanout + n * first;
    for (unsigned i = 0; i < n; ++i)
      for (unsigned k = 0; k < size; ++k)
        byDownstream[(first + k) * n + i] = block[i * size + k];
  }
}

// eps[j] += sum_k W_down[k, j] * dL/dI_down[b, k] over a downstream layer's neurons k, in
// order of k. `grads` holds one block per downstream shard k at rowsPerBlock * first_k,
// [rows, n_k]; `row` picks the (step, sample) or sample row within each block. Dense: on host
// CPUs a block of eps stays in vector registers while the shard's rows stream past it (eps
// read and written once per block, not once per row: the generic backward's next-layer term,
// 11% of a Synaptic DSNN step before); the rest of the columns one row at a time.
template <class G>
POPSNN_ONCE void fromFanoutDense(float *__restrict eps, unsigned n, const float *byDownstream,
                                 const G *grads, unsigned shardSize, unsigned layerSize,
                                 unsigned row, unsigned rowsPerBlock) {
  for (unsigned first = 0; first < layerSize; first += shardSize) {
    const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
    const G *__restrict g = grads + rowsPerBlock * first + row * size;
    const float *__restrict rows = byDownstream + first * n;
    unsigned j0 = 0;
#ifdef POPSNN_FLOATS16
    using lif::Floats16, lif::loadFloats16, lif::storeFloats16;
    constexpr unsigned V = lif::SPARSE_BLOCK_VECS;
    for (; j0 + 16 * V <= n; j0 += 16 * V) {
      Floats16 e[V];
#pragma GCC unroll 8
      for (unsigned v = 0; v < V; ++v)
        e[v] = loadFloats16(eps + j0 + 16 * v);
      for (unsigned k = 0; k < size; ++k) {
        const float gk = float(g[k]);
        const float *__restrict r = rows + k * n + j0;
#pragma GCC unroll 8
        for (unsigned v = 0; v < V; ++v)
          e[v] += gk * loadFloats16(r + 16 * v);
      }
#pragma GCC unroll 8
      for (unsigned v = 0; v < V; ++v)
        storeFloats16(eps + j0 + 16 * v, e[v]);
    }
#endif
    for (unsigned k = 0; k < size; ++k) {
      const float gk = float(g[k]);
      const float *__restrict r = rows + k * n;
      for (unsigned j = j0; j < n; ++j)
        eps[j] += gk * r[j];
    }
  }
}
// One step's product of every sample at once: out[b, j] = sum_k byDownstream[k, j] *
// grads[row0 + b, k] over the layer's shards (`grads`: a block [rowsPerBlock, n_k] per shard
// at rowsPerBlock * first_k), one blocked product per shard, so the [n_k, n] rows stream once
// per step, not once per sample as fromFanoutDense's do (docs/performance/dsnn-engine.md, issue
// 12).
POPSNN_ONCE void stepProduct(const float *grads, const float *byDownstream, unsigned n,
                             unsigned shardSize, unsigned layerSize, unsigned row0,
                             unsigned rowsPerBlock, unsigned batch, float *out) {
  for (unsigned first = 0; first < layerSize; first += shardSize) {
    const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
    dense::denseProduct(batch, n, size, grads + rowsPerBlock * first + row0 * size, size, 1,
                        byDownstream + first * n, n, out, n, first > 0);
  }
}
// An all-to-all layer's recurrent term of dL/dS[t], dL/dI[t+1] . V^T, of every sample at once
// (`grads`: this layer's dL/dI[t+1], a block [B, n_k] per shard).
POPSNN_ONCE void recurrentProduct(const float *grads, const float *byDownstream, unsigned n,
                                  unsigned shardSize, unsigned layerSize, unsigned batch,
                                  float *rec) {
  stepProduct(grads, byDownstream, n, shardSize, layerSize, 0, batch, batch, rec);
}

// A sparse rule: only for this step's gradient-trace entries (local ids; their masked
// surrogate is non-zero), one dot per entry.
POPSNN_ONCE void fromFanoutSparse(float *__restrict eps, unsigned n, const unsigned short *ids,
                                  unsigned entries, const float *fanout, const float *grads,
                                  unsigned shardSize, unsigned layerSize, unsigned row,
                                  unsigned rowsPerBlock) {
  for (unsigned k = 0; k < entries; ++k) {
    const unsigned j = unsigned(ids[k]);
    float sum = 0.0f;
    for (unsigned first = 0; first < layerSize; first += shardSize) {
      const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
      sum += dot(fanout + n * first + j * size, grads + rowsPerBlock * first + row * size, size);
    }
    eps[j] += sum;
  }
}

// Sets v[id - offset] = 0 for the spikes of an id buffer.
inline void zeroAtSpikes(const int *buf, unsigned offset, float *__restrict v) {
  for (int k = 0; k < buf[0]; ++k)
    v[unsigned(buf[BUFFER_HEADER + k]) - offset] = 0.0f;
}

// A learned constant's terms at step t beside the surrogate's (docs/numerics.md section 2),
// from dL/dU[t] (gU, before the input path gates it) and R[t] = S[t-1] (prevOwn, the ids of
// step t-1): dL/dbeta += dL/dU[t] (1 - R[t]) U[t-1] (the factor 1 - R[t] under the zero
// reset only; gradBeta null: beta not learned) and dL/dthreshold -= R[t] dL/dU[t]
// (gradThreshold null: not learned, or a reset without the threshold). keep: [n] scratch.
POPSNN_ONCE void learnedConstantGrads(const float *__restrict gU, const int *prevOwn,
                                      unsigned offset, unsigned n, bool zeroReset,
                                      const float *__restrict uPrev, float *__restrict keep,
                                      float *__restrict gradBeta, float *__restrict gradThreshold) {
  if (gradBeta) {
    for (unsigned j = 0; j < n; ++j)
      keep[j] = 1.0f;
    if (zeroReset)
      zeroAtSpikes(prevOwn, offset, keep);
    for (unsigned j = 0; j < n; ++j)
      gradBeta[j] += gU[j] * keep[j] * uPrev[j];
  }
  if (gradThreshold)
    for (int k = 0; k < prevOwn[0]; ++k) {
      const unsigned j = unsigned(prevOwn[BUFFER_HEADER + k]) - offset;
      gradThreshold[j] -= gU[j];
    }
}

// Every element of a vertex field (a Vector or one edge of a list) set to 0.
template <class V> inline void zeroAll(V &v) {
  for (unsigned k = 0; k < v.size(); ++k)
    v[k] = 0;
}

// A learned beta's gradient is zero where the clamp to [0, 1] is active (torch's clamp
// passes it on the closed interval).
inline void zeroWhereClamped(const float *beta, float *__restrict gradBeta, unsigned n) {
  for (unsigned j = 0; j < n; ++j)
    if (!(beta[j] >= 0.0f && beta[j] <= 1.0f))
      gradBeta[j] = 0.0f;
}

// rows[id] += dI for the spikes of an id buffer (weight gradients of spike inputs).
POPSNN_ONCE void addAtSpikeRows(const int *buf, const float *__restrict dI, unsigned n,
                                float *__restrict rows) {
  for (int k = 0; k < buf[0]; ++k) {
    float *__restrict row = &rows[unsigned(buf[BUFFER_HEADER + k]) * n];
    for (unsigned j = 0; j < n; ++j)
      row[j] += dI[j];
  }
}

// addAtSpikeRows on the columns `cols` only (the others' dI is 0).
POPSNN_ONCE void addAtSpikeCols(const int *buf, const float *__restrict dI, unsigned n,
                                const int *__restrict cols, unsigned count,
                                float *__restrict rows) {
  for (int k = 0; k < buf[0]; ++k) {
    float *__restrict row = &rows[unsigned(buf[BUFFER_HEADER + k]) * n];
    for (unsigned c = 0; c < count; ++c)
      row[cols[c]] += dI[cols[c]];
  }
}

// addAtSpikeRows, or addAtSpikeCols where few are live (LiveNeurons::fewForSpikeRows).
template <class Live>
inline void addAtSpikes(const int *buf, const float *__restrict dI, unsigned n, const Live &live,
                        float *__restrict rows) {
  if (live.fewForSpikeRows(n))
    addAtSpikeCols(buf, dI, n, live.ids, live.count, rows);
  else
    addAtSpikeRows(buf, dI, n, rows);
}

// A later sample's id buffer (header and first ids) and gradient-trace row (ids and values;
// none for a dense trace) into the cache: the backward reads what the forward wrote long ago.
inline void prefetchSample(const int *own, const void *ids, const void *vals) {
  __builtin_prefetch(own);
  __builtin_prefetch(own + 16);
  if (ids) {
    __builtin_prefetch(ids);
    __builtin_prefetch(vals);
  }
}

// synapticRow's entries: SUM adds dL/dI to the direct input's sum too (a template flag, not a
// null test per entry, and plain loops on restrict pointers: a lambda's captures lose them and
// the loop its vectors, 25% more CPU per Synaptic step, measured).
template <bool SUM, class C>
inline void synapticEntries(const C &c, unsigned n, const float *__restrict sg,
                            const float *__restrict eps, float *__restrict gU, float *__restrict gJ,
                            float *__restrict bias, float *__restrict sum) {
  for (unsigned j = 0; j < n; ++j) {
    const float u = lif::surrogateTimes(sg[j], eps[j]) + c.betaAt(j) * gU[j];
    const float d = u + c.alphaAt(j) * gJ[j];
    gU[j] = u;
    gJ[j] = d;
    bias[j] += d;
    if constexpr (SUM)
      sum[j] += d;
  }
}

// Synaptic's dense step after dL/dS (eps), nothing learned, no zero reset: LifBackward's
// membraneGrad, inputGrad and sums in one pass, the same operations per entry in the same
// order, so the surrogate row's stream from memory (long out of cache) overlaps them all.
// Returns dL/dI[t], the carried dL/dJ (gJ); also into `out` where given.
template <class C>
inline const float *synapticRow(const C &c, unsigned n, const float *__restrict sg,
                                const float *__restrict eps, float *__restrict gU,
                                float *__restrict gJ, float *__restrict bias, float *__restrict sum,
                                float *__restrict out) {
  if (sum)
    synapticEntries<true>(c, n, sg, eps, gU, gJ, bias, sum);
  else
    synapticEntries<false>(c, n, sg, eps, gU, gJ, bias, nullptr);
  for (unsigned j = 0; j < n && out; ++j)
    out[j] = gJ[j];
  return gJ;
}

POPSNN_ONCE void addTo(float *__restrict acc, const float *__restrict v, unsigned n) {
  for (unsigned j = 0; j < n; ++j)
    acc[j] += v[j];
}
POPSNN_ONCE void copyTo(float *__restrict out, const float *__restrict v, unsigned n) {
  stored::convertRow(v, out, n); // not a memcpy call: see convertRow
}

// A Leaky readout's step for every sample at once (LifBackward::outputStep): dL/dS (eps), the
// loss's dL/dU (gMem), the trace (sg) and the carry gU are [B, n] rows. dL/dU[t] into gU as
// membraneGrad computes it a sample at a time; it is dL/dI[t], copied to out (null: none) and
// summed into bias sample by sample, generic()'s order.
POPSNN_ONCE void leakOutputRows(const float *__restrict eps, const float *__restrict gMem,
                                const float *__restrict sg, float beta, unsigned batch, unsigned n,
                                float *__restrict gU, float *__restrict out,
                                float *__restrict bias) {
  const unsigned rows = batch * n;
  for (unsigned k = 0; k < rows; ++k)
    gU[k] = (lif::surrogateTimes(sg[k], eps[k]) + gMem[k]) + beta * gU[k];
  if (out)
    copyTo(out, gU, rows);
#ifdef POPSNN_LANES16
  if (n <= 16) { // a lane per neuron: each still adds the samples in order, without a store each
    using namespace lanes16;
    const M m = M((1u << n) - 1u);
    F acc = loadMasked(m, bias);
    for (unsigned k0 = 0; k0 < rows; k0 += n)
      acc = add(acc, loadMasked(m, gU + k0));
    return storeMasked(bias, m, acc);
  }
#endif
  for (unsigned k0 = 0; k0 < rows; k0 += n)
    for (unsigned j = 0; j < n; ++j)
      bias[j] += gU[k0 + j];
}
// Half storage: a row read as float, or stored rounded (StoredRows.hpp).
template <class T, class U>
inline void copyTo(T *__restrict out, const U *__restrict v, unsigned n) {
  stored::convertRow(v, out, n);
}

} // namespace backward_rows
} // namespace popsnn
