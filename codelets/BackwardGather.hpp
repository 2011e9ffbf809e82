// Weight-gradient and gather helpers of the backward vertices (LifBackward.cpp): the rows of
// dL/dW one (step, sample) adds at its non-zero inputs, and dL/dS at a sparse rule's entries
// from the next layer's gathered dL/dI. Free functions over plain pointers: no vertex state.
#pragma once

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
      : weights(weights), dI(dI), n(n), live(live), fewCols(live.sparseIn(n)) {}

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

// dL/dS at a sparse rule's gradient-trace entries from the next layer: one dot per entry of its
// padded row of W_next [n, P] with g, the (step, sample)'s dL/dI_next gathered and zero-padded
// to P = pushWidth(nextLayerSize).
inline void nextLayerDots(float *__restrict eps, const unsigned short *__restrict ids,
                          unsigned size, const float *weightsByOwn, const float *g, unsigned P) {
  for (unsigned k = 0; k < size; ++k)
    eps[ids[k]] = popsnn::lif::dotPadded(&weightsByOwn[unsigned(ids[k]) * P], g, P);
}

} // namespace backward_gather
} // namespace popsnn
