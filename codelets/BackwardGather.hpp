// Weight-gradient and gather helpers of the backward vertices (LifBackward.cpp): the rows of
// dL/dW one (step, sample) adds at its non-zero inputs, and dL/dS at a sparse rule's entries
// from the next layer's gathered dL/dI. Free functions over plain pointers: no vertex state.
#pragma once

#include <cstdint>

#include "../include/popsnn/VertexEnums.hpp"
#include "BackwardRows.hpp"
#include "LifCommon.hpp"
#include "SparseBackward.hpp"

namespace popsnn {
namespace backward_gather {

using popsnn::lif::LiveNeurons;

// The rows of dL/dW [nIn, n] one (step, sample) adds: row i += x_i dL/dI over its non-zero
// inputs x_i; dL/dI is 0 off the live neurons, so where those are few only their columns.
struct WeightGradRows {
  float *weights; // [nIn, n]
  const float *dI;
  unsigned n;
  const LiveNeurons &live;
  bool fewCols;
  WeightGradRows(float *weights, const float *dI, unsigned n, const LiveNeurons &live)
      : weights(weights), dI(dI), n(n), live(live), fewCols(live.fewForInputRows(n)) {}

  bool none() const { return !live.all && live.count == 0; } // nothing to add
  void addRow(unsigned i, float xi) const {
    float *__restrict row = &weights[i * n];
    const float *__restrict d = dI;
    if (fewCols)
      for (unsigned k = 0; k < live.count; ++k)
        row[live.ids[k]] += xi * d[live.ids[k]];
    else
      for (unsigned j = 0; j < n; ++j)
        row[j] += xi * d[j];
  }
  // The input as a list of its non-zeros (INPUT_DENSE_STEPS with inList).
  void addList(const popsnn::lif::InputRow &in) const {
    for (unsigned k = 0; k < in.size; ++k)
      addRow(unsigned(in.ids[k]), in.values[k]);
  }
  // The input as a dense row (S: its stored type).
  template <class S> void addDense(const S *x, unsigned numInputs) const {
    popsnn::lif::forEachNonzero(x, numInputs, [&](unsigned i, float xi) { addRow(i, xi); });
  }
  // The input as an id buffer of spikes (x_i = 1).
  void addSpikes(const int *buf) const {
    popsnn::backward_rows::addAtSpikes(buf, dI, n, live, weights);
  }
};

// A one-to-one recurrence's weights: v[j] += dI[j] at the spikes of an id buffer.
inline void addAtSpikeIds(const int *buf, unsigned offset, const float *__restrict dI,
                          float *__restrict v) {
  for (int k = 0; k < buf[0]; ++k) {
    const unsigned j = unsigned(buf[codes::BUFFER_HEADER + k]) - offset;
    v[j] += dI[j];
  }
}

// The dot of two rows padded to a multiple of 16 floats in four independent sums: with one,
// each multiply-add waits for the one before (perf annotate: nextLayerDots ran at the add's
// latency, four times below its loads' rate).
inline float dotPadded4(const float *__restrict a, const float *__restrict b, unsigned P) {
#ifdef POPSNN_FLOATS16
  using popsnn::lif::Floats16;
  using popsnn::lif::loadFloats16;
  Floats16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
  unsigned c = 0;
  for (; c + 64 <= P; c += 64) {
    s0 += loadFloats16(a + c) * loadFloats16(b + c);
    s1 += loadFloats16(a + c + 16) * loadFloats16(b + c + 16);
    s2 += loadFloats16(a + c + 32) * loadFloats16(b + c + 32);
    s3 += loadFloats16(a + c + 48) * loadFloats16(b + c + 48);
  }
  for (; c < P; c += 16)
    s0 += loadFloats16(a + c) * loadFloats16(b + c);
  s0 += s1;
  s2 += s3;
  s0 += s2;
  return popsnn::lif::laneSum(s0);
#else
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  for (unsigned c = 0; c < P; c += 4) { // P: a multiple of 16
    s0 += a[c] * b[c];
    s1 += a[c + 1] * b[c + 1];
    s2 += a[c + 2] * b[c + 2];
    s3 += a[c + 3] * b[c + 3];
  }
  return (s0 + s1) + (s2 + s3);
#endif
}

// dL/dS at a sparse rule's gradient-trace entries from the next layer: one dot per entry of its
// padded row of W_next [n, P] with g, the (step, sample)'s dL/dI_next gathered and zero-padded
// to P = pushWidth(nextLayerSize).
inline void nextLayerDots(float *__restrict eps, const unsigned short *__restrict ids,
                          unsigned size, const float *weightsByOwn, const float *g, unsigned P) {
  for (unsigned k = 0; k < size; ++k)
    eps[ids[k]] = dotPadded4(&weightsByOwn[unsigned(ids[k]) * P], g, P);
}

// One (step, sample) row of the next layer's dL/dI as its shards' lists (appendGradList, one
// after the other, each `capacity` entries): shard s's slice holds its live neurons' ids (local
// to the shard) and values; every other dL/dI_next is 0.
struct NextListRow {
  const int *starts; // per shard: rows + 1 starts
  const unsigned short *ids;
  const float *values;
  unsigned rows, capacity, layerSize, shardSize, k; // k: the row, in the backward's order

  const int *startsOf(unsigned s) const { return starts + s * (rows + 1); }
  unsigned count() const { // the row's live neurons over all shards
    unsigned m = 0;
    for (unsigned s = 0; s * shardSize < layerSize; ++s)
      m += unsigned(startsOf(s)[k + 1] - startsOf(s)[k]);
    return m;
  }
};
inline NextListRow nextListRow(const int *starts, const unsigned short *ids, const float *values,
                               unsigned layerSize, unsigned shardSize, unsigned rows, unsigned k,
                               unsigned allValues) {
  const unsigned shards = (layerSize + shardSize - 1) / shardSize;
  return {starts, ids, values, rows, allValues / shards, layerSize, shardSize, k};
}

// The list dots or the gathered row, by what each costs per (step, sample) row with `entries`
// dots and `live` neurons in the next layer's list: the list dots one indexed load and product
// per live neuron per entry; the gathered row zeroes P floats and scatters the live ones once,
// then one contiguous dot of P per entry. In units of about 0.04 ns (P 208: a dot 11 ns),
// fitted to bench/next_list_threshold.cpp's A/B on an AVX-512 CPU.
constexpr unsigned LIST_DOT_PER_LIVE = 10, LIST_DOT_PER_ENTRY = 64;
constexpr unsigned GATHER_PER_ROW = 512, GATHER_PER_LIVE = 10;
inline bool listDotsApply(unsigned entries, unsigned live, unsigned P) {
  return std::uint64_t(entries) * (LIST_DOT_PER_LIVE * live + LIST_DOT_PER_ENTRY) <=
         GATHER_PER_ROW + GATHER_PER_LIVE * std::uint64_t(live) + std::uint64_t(entries) * P;
}

// nextLayerDots over the next layer's live neurons only: eps[j] = sum over the row's list
// entries m of W_next[j, m] dL/dI_next[m] (weightsByOwn: row j padded to P), no gathered row.
// Four partial sums per entry: the products are independent, the adds need not wait in turn.
inline void nextListDots(float *__restrict eps, const unsigned short *__restrict ids, unsigned size,
                         const float *weightsByOwn, unsigned P, const NextListRow &row) {
  for (unsigned k = 0; k < size; ++k) {
    const float *__restrict w = &weightsByOwn[unsigned(ids[k]) * P];
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    for (unsigned first = 0, s = 0; first < row.layerSize; first += row.shardSize, ++s) {
      const int *start = row.startsOf(s);
      const unsigned short *__restrict id = row.ids + s * row.capacity;
      const float *__restrict v = row.values + s * row.capacity;
      const float *__restrict ws = w + first;
      int e = start[row.k];
      const int end = start[row.k + 1];
      for (; e + 4 <= end; e += 4) {
        s0 += ws[id[e]] * v[e];
        s1 += ws[id[e + 1]] * v[e + 1];
        s2 += ws[id[e + 2]] * v[e + 2];
        s3 += ws[id[e + 3]] * v[e + 3];
      }
      for (; e < end; ++e)
        s0 += ws[id[e]] * v[e];
    }
    eps[ids[k]] = (s0 + s1) + (s2 + s3);
  }
}

} // namespace backward_gather
} // namespace popsnn
