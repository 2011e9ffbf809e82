// Kernels of the sparse backward (LifBackward.cpp): finding the few non-zero inputs of a
// row without a branch per input, and publishing a shard's dL/dI row in one pass.
// Inline functions only: no state.
#pragma once

#include "../include/popsnn/VertexEnums.hpp"

#if !defined(__IPU__) && !defined(POPSNN_PLAIN_LOOPS) && defined(__SSE2__)
#include <immintrin.h>
#define POPSNN_NONZERO_BITS 1
#endif

namespace popsnn {
namespace lif {

#ifdef POPSNN_NONZERO_BITS
// Bit c set iff x[c] != 0 (NaN counts, -0 does not: the same test as `x != 0.0f`), for 16
// floats: one compare per vector instead of a branch per float, which mispredicts at random
// on spike inputs.
inline unsigned nonzeroBits16(const float *x) {
#if defined(__AVX512F__)
  return unsigned(_mm512_cmp_ps_mask(_mm512_loadu_ps(x), _mm512_setzero_ps(), _CMP_NEQ_UQ));
#elif defined(__AVX__)
  const __m256 z = _mm256_setzero_ps();
  const unsigned lo =
      unsigned(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x), z, _CMP_NEQ_UQ)));
  const unsigned hi =
      unsigned(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + 8), z, _CMP_NEQ_UQ)));
  return lo | hi << 8;
#else
  const __m128 z = _mm_setzero_ps();
  unsigned bits = 0;
  for (unsigned q = 0; q < 4; ++q)
    bits |= unsigned(_mm_movemask_ps(_mm_cmpneq_ps(_mm_loadu_ps(x + 4 * q), z))) << (4 * q);
  return bits;
#endif
}
#endif

// Calls f(i, x[i]) for every i < n with x[i] != 0, in increasing i. Spike inputs (latency
// or rate coded) are mostly zeros: 16 floats are ruled out per compare.
template <class F> inline void forEachNonzero(const float *__restrict x, unsigned n, F &&f) {
  unsigned i = 0;
#ifdef POPSNN_NONZERO_BITS
  for (; i + 16 <= n; i += 16)
    for (unsigned bits = nonzeroBits16(x + i); bits; bits &= bits - 1) {
      const unsigned c = i + unsigned(__builtin_ctz(bits));
      f(c, x[c]);
    }
#endif
  for (; i < n; ++i)
    if (x[i] != 0.0f)
      f(i, x[i]);
}
// The same over a row stored narrower than float (half storage), read one value at a time.
template <class S, class F> inline void forEachNonzero(const S *__restrict x, unsigned n, F &&f) {
  for (unsigned i = 0; i < n; ++i)
    if (const float v = float(x[i]); v != 0.0f)
      f(i, v);
}

// dL/dI[t] = gU (after the carry and the entries of the id buffer) copied out (if another layer
// reads it), added to the bias gradient and (direct input) to the sum over steps, in one pass.
inline void publishCarry(const float *__restrict gU, unsigned n, float *__restrict out,
                         float *__restrict gb, float *__restrict acc) {
  if (out && acc) {
    for (unsigned j = 0; j < n; ++j) {
      out[j] = gU[j];
      gb[j] += gU[j];
      acc[j] += gU[j];
    }
  } else if (out) {
    for (unsigned j = 0; j < n; ++j) {
      out[j] = gU[j];
      gb[j] += gU[j];
    }
  } else if (acc) {
    for (unsigned j = 0; j < n; ++j) {
      gb[j] += gU[j];
      acc[j] += gU[j];
    }
  } else {
    for (unsigned j = 0; j < n; ++j)
      gb[j] += gU[j];
  }
}

// The neurons of one sample whose dL/dU carry can be non-zero: those with a gradient-trace
// entry at this step or a later one (the backward runs t = T-1 .. 0). Every other carry is
// exactly 0, so the carry's decay, dL/dI and the weight-gradient rows need only these.
// `all`: not tracked (every neuron). `all` is a full word, not a bool: with 3 padding bytes the
// compiler copied the struct (returned by joinLive every (t, b)) as two overlapping 8-byte moves,
// and the reloads stalled on store forwarding (perf: ~25% of the sparse backward's body at B_th
// 0.001, seed-003 setting).
struct LiveNeurons {
  const int *ids = nullptr;
  unsigned count = 0;
  unsigned all = 1;
  // Every pass over them has two forms: an indexed loop over the live ids, or one vector pass
  // over the whole shard of n (the others' values are 0: the same sums). "Few" is where the
  // indexed loop is faster, a fraction of n measured per kind of pass (bench/live_threshold.cpp;
  // docs/performance/sparse-backward.md, AVX2): one row of n in cache (the carry, dL/dI and its
  // sums, zeroing);
  bool fewForRow(unsigned n) const { return few(ROW_PASS, n); }
  // the weight gradient's rows at an input's non-zeros, row += x_i dL/dI (rows out of cache);
  bool fewForInputRows(unsigned n) const { return few(INPUT_ROWS, n); }
  // the same at an id buffer's spikes, row += dL/dI (addAtSpikes).
  bool fewForSpikeRows(unsigned n) const { return few(SPIKE_ROWS, n); }

private:
  static constexpr unsigned ROW_PASS = 8, INPUT_ROWS = 8, SPIKE_ROWS = 8; // below 1 / these
  bool few(unsigned fraction, unsigned n) const { return !all && fraction * count < n; }
};

// The carry's decay over the live neurons (the others' carries are 0).
inline void decayLive(float *__restrict gU, unsigned n, const LiveNeurons &live, float beta) {
  if (!live.fewForRow(n))
    for (unsigned j = 0; j < n; ++j)
      gU[j] = beta * gU[j];
  else
    for (unsigned k = 0; k < live.count; ++k)
      gU[live.ids[k]] = beta * gU[live.ids[k]];
}

// publishCarry over the live neurons only: dL/dI[t] written whole (0 off the live neurons),
// added to the bias gradient and (direct input) to the sum over steps.
inline void publishLive(const float *__restrict gU, unsigned n, const LiveNeurons &live,
                        float *__restrict out, float *__restrict gb, float *__restrict acc) {
  if (!live.fewForRow(n))
    return publishCarry(gU, n, out, gb, acc);
  const int *__restrict ids = live.ids;
  const unsigned count = live.count;
  if (out) {
    for (unsigned j = 0; j < n; ++j)
      out[j] = 0.0f;
    for (unsigned k = 0; k < count; ++k)
      out[ids[k]] = gU[ids[k]];
  }
  for (unsigned k = 0; k < count; ++k)
    gb[ids[k]] += gU[ids[k]];
  if (acc)
    for (unsigned k = 0; k < count; ++k)
      acc[ids[k]] += gU[ids[k]];
}

// Adds the neurons of one step's gradient-trace entries (and, at the output, those with a
// membrane-loss gradient) to a sample's live list: list = [count, ids[n], flags] (flags: n bytes,
// liveFlags; bit 1 in the list). The list only grows over the backward's steps.
inline unsigned char *liveFlags(int *list, unsigned n) {
  // Bytes, not ints: each entry reads its neuron's flag at random, every sample's once per step,
  // so fewer lines stay in cache (perf, hidden 200, B 256: the compressed backward's costliest
  // instruction waited on that load).
  return reinterpret_cast<unsigned char *>(list + 1 + n);
}
inline LiveNeurons joinLive(int *__restrict list, unsigned n,
                            const unsigned short *__restrict entryIds, unsigned entries,
                            const float *__restrict gMem) {
  int *__restrict ids = list + 1;
  unsigned char *__restrict inList = liveFlags(list, n);
  unsigned count = unsigned(list[0]);
  const auto join = [&](unsigned j) {
    if (!(inList[j] & 1)) {
      inList[j] |= 1;
      ids[count++] = int(j);
    }
  };
  // The entries without a branch on the flag (which one is new is random: perf showed the
  // mispredictions): the id is always written at the end, and counted only if new. The slot
  // past the end exists while count < n; once every neuron is live nothing is new.
  for (unsigned k = 0; k < entries && count < n; ++k) {
    const unsigned j = entryIds[k];
    const int isNew = ~inList[j] & 1;
    inList[j] |= 1;
    ids[count] = int(j);
    count += unsigned(isNew);
  }
  for (unsigned j = 0; gMem && count < n && j < n; ++j)
    if (gMem[j] != 0.0f)
      join(j);
  list[0] = int(count);
  return LiveNeurons{ids, count, 0};
}

// Adds `mark` to the flags of an id buffer's spikes (none if buf is null).
inline void markSpikes(const int *buf, unsigned offset, unsigned char *__restrict flags, int mark) {
  for (int k = 0; buf && k < buf[0]; ++k)
    flags[unsigned(buf[codes::BUFFER_HEADER + k]) - offset] += (unsigned char)mark;
}

// v[j] = 0 at the live neurons (every neuron where most are live).
inline void zeroAtLive(float *__restrict v, unsigned n, const LiveNeurons &live) {
  if (!live.fewForRow(n))
    for (unsigned j = 0; j < n; ++j)
      v[j] = 0.0f;
  else
    for (unsigned k = 0; k < live.count; ++k)
      v[live.ids[k]] = 0.0f;
}

// LifBackward's membraneGrad over a sample's live neurons: the carry dL/dU[t+1] decays
// (Alpha: none, its U is no state), then the gradient trace's entries of (t, b) add
// surrogate * dL/dS[t]; a learned threshold (gradThreshold) gets -surrogate * dL/dS[t].
template <class Neuron, class C>
inline void liveMembraneGrad(const C &c, unsigned n, const unsigned short *ids, const float *vals,
                             unsigned size, const float *__restrict eps,
                             const float *__restrict gMem, float *__restrict gU,
                             const LiveNeurons &live, float *__restrict gradThreshold) {
  for (unsigned k = 0; k < live.count && (Neuron::twoCurrents || gMem || !C::uniform); ++k) {
    const unsigned j = unsigned(live.ids[k]);
    const float leak = Neuron::twoCurrents ? 0.0f : c.betaAt(j);
    gU[j] = (gMem ? gMem[j] : 0.0f) + leak * gU[j];
  }
  if constexpr (C::uniform && !Neuron::twoCurrents)
    if (!gMem)
      decayLive(gU, n, live, c.beta);
  for (unsigned k = 0; k < size; ++k) {
    const unsigned j = unsigned(ids[k]);
    gU[j] += vals[k] * eps[j];
    if (gradThreshold)
      gradThreshold[j] -= vals[k] * eps[j];
  }
}

// The gradient trace's entries of row (t, b): its ids and values.
struct TraceRow {
  const unsigned short *ids;
  const float *vals;
  unsigned size;
};
inline TraceRow gradTraceRow(const int *starts, const unsigned short *ids, const float *vals,
                             unsigned row) {
  const unsigned first = unsigned(starts[row]);
  return {ids + first, vals + first, unsigned(starts[row + 1]) - first};
}

// dL/dI as a list (LayerShape::gradList), a shard's rows in the backward's order (row k =
// (T-1-t) B + b): rows + 1 starts, the live neurons' 16-bit ids beside their values (every other
// dL/dI is 0), so what crosses tiles follows the live neurons, not T x B x n. The forward counted
// what it needs (codes::GRAD_LIST_NEEDED) and the host grew it before this backward; a full list
// still never writes past its end.
struct GradList {
  int *starts;
  unsigned short *ids;
  float *values;
};
inline void appendGradList(const float *__restrict dI, const LiveNeurons &live, GradList list,
                           unsigned k, unsigned capacity) {
  if (k == 0)
    list.starts[0] = 0;
  const unsigned used = unsigned(list.starts[k]);
  unsigned c = 0;
  for (; c < live.count && used + c < capacity; ++c) {
    list.ids[used + c] = static_cast<unsigned short>(live.ids[c]);
    list.values[used + c] = dI[live.ids[c]];
  }
  list.starts[k + 1] = int(used + c);
}

// A sample with nothing live at row (t, b): no gradient-trace entry at t or later (its live list,
// [count, ...] as joinLive keeps it, is still empty, and the row has no entry). Every carry,
// dL/dI and weight-gradient term of the row is then exactly 0, so the backward skips the row:
// only its dL/dI rows are written (an empty list row, or zeros where dL/dI is sent dense).
inline bool deadRow(const int *liveList, const int *starts, unsigned row) {
  return liveList[0] == 0 && starts[row + 1] == starts[row];
}
inline void emptyGradListRow(GradList list, unsigned k) {
  if (k == 0)
    list.starts[0] = 0;
  list.starts[k + 1] = list.starts[k];
}
// LifBackward's row (t, b) skipped where it is dead (not the output layer, whose membrane
// losses join the live list, nor a learned constant; the caller rules out the all-to-all
// recurrence, whose dL/dI[t] row the next step reads): true if skipped. V: the vertex.
template <class V> inline bool skipDeadRow(V &v, unsigned t, unsigned b) {
  const unsigned n = v.numNeurons, row = t * v.batch + b;
  if (v.lossGradSpikes.size() || v.gradBeta.size() || v.gradThreshold.size() ||
      !deadRow(&v.liveIds[0][b * (2 * n + 1)], &v.gradStarts[0][0], row))
    return false;
  if (v.gradList.size())
    emptyGradListRow({&v.gradList[0][0], &v.gradListIds[0][0], &v.gradListValues[0][0]},
                     (v.numSteps - 1 - t) * v.batch + b);
  if (v.gradOut.size()) // dL/dI sent dense: its row is 0
    for (unsigned j = 0, first = (v.stepMajor ? b : row) * n; j < n; ++j)
      v.gradOut[0][first + j] = 0.0f;
  return true;
}

// Row k of the next layer's dL/dI from its shards' lists (appendGradList, one after the other;
// `allValues` = their capacities together), into g zero-padded to pushWidth(nextLayerSize), as
// gatherNextGrad does from dense blocks.
inline void gatherNextList(const int *starts, const unsigned short *ids, const float *values,
                           float *__restrict g, unsigned nextLayerSize, unsigned nextShardSize,
                           unsigned rows, unsigned k, unsigned allValues) {
  const unsigned capacity = allValues / ((nextLayerSize + nextShardSize - 1) / nextShardSize);
  for (unsigned c = 0; c < codes::pushWidth(nextLayerSize); ++c)
    g[c] = 0.0f;
  for (unsigned first = 0, s = 0; first < nextLayerSize; first += nextShardSize, ++s) {
    const int *__restrict start = starts + s * (rows + 1);
    const unsigned short *__restrict id = ids + s * capacity;
    const float *__restrict vals = values + s * capacity;
    for (int e = start[k]; e < start[k + 1]; ++e)
      g[first + unsigned(id[e])] = vals[e];
  }
}

// What a shard's dL/dI list will need (appendGradList): per sample, the neurons with a
// gradient-trace entry at step t or later (the backward's live list at t), summed over (t, b).
// The forward counts it once its gradient trace is complete; flags: n floats of scratch.
inline unsigned liveRowsNeeded(const int *starts, const unsigned short *ids, unsigned steps,
                               unsigned batch, unsigned n, float *__restrict flags) {
  unsigned total = 0;
  for (unsigned b = 0; b < batch; ++b) {
    for (unsigned j = 0; j < n; ++j)
      flags[j] = 0.0f;
    unsigned live = 0;
    for (unsigned t = steps; t-- > 0;) {
      const unsigned row = t * batch + b;
#ifndef __IPU__
      // A sample's rows are `batch` rows apart, each out of cache: the starts of one 8 steps
      // ahead, the ids of one 4 ahead (perf: this count waited on memory, not on its adds).
      if (t >= 8)
        __builtin_prefetch(starts + row - 8 * batch);
      if (t >= 4)
        __builtin_prefetch(ids + starts[row - 4 * batch]);
#endif
      for (int e = starts[row]; e < starts[row + 1]; ++e) { // no branch: entries are random
        live += flags[ids[e]] == 0.0f;
        flags[ids[e]] = 1.0f;
      }
      total += live;
    }
  }
  return total;
}

} // namespace lif
} // namespace popsnn
