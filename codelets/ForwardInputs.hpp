// A forward step's synaptic input rows, summed in float from what the layer reads, stored as
// S (float, or half: docs/numerics.md section 8): the direct current's partial blocks, dense
// or listed per-step input, spike ids, and RLeaky's all-to-all recurrent term.
#pragma once

#include <type_traits>

#include "../include/popsnn/VertexEnums.hpp"
#include "LifCommon.hpp"
#include "SparseBackward.hpp" // forEachNonzero

// Included by LifForward.cpp alone: internal linkage, as the helpers had there, which lets the
// compiler specialise its out-of-line copies (the float code is the same as before).
namespace {

using popsnn::codes::BUFFER_HEADER;
using popsnn::lif::forEachNonzero;
using popsnn::lif::InputRow;

// Each is a whole row's work: kept out of line, compiled once per stored type.
#define POPSNN_ONCE __attribute__((noinline))

// sumPartials' tiled bias: the most floats it holds.
constexpr unsigned BIAS_TILE = 1024;

// The previous layer's W.S blocks of step t summed over its shards, a [B, n] row of each
// at a time (for every entry the same order of additions as one sample at a time). The
// helpers below take the stored type S of what they read (float, or half: summed in float).
// Float: with `bias` ([n]), I = sum + b into sum, as inputFromPartials adds it after the sum.
template <class S>
POPSNN_ONCE void sumPartials(const S *partialIn, unsigned numSrc, unsigned numSteps, unsigned t,
                             unsigned rows, S *__restrict sum, const S *__restrict bias = nullptr,
                             unsigned n = 0) {
  if constexpr (std::is_same<S, float>::value) {
    for (unsigned k = 0; k < rows; ++k)
      sum[k] = 0.0f;
    for (unsigned s = 0; s < numSrc; ++s) {
      const float *__restrict part = &partialIn[(s * numSteps + t) * rows];
      for (unsigned k = 0; k < rows; ++k)
        sum[k] += part[k];
    }
    // rows = B n. The bias tiled over 16 samples (whole vectors and whole samples) where that
    // fits: the adds vectorise, where a loop over a sample's n (5 in a readout shard) did not.
    alignas(64) float tiled[BIAS_TILE];
    const bool tile = 16 * n <= BIAS_TILE;
    const unsigned period = tile ? 16 * n : n;
    for (unsigned b = 0; bias && tile && b < 16; ++b)
      for (unsigned j = 0; j < n; ++j)
        tiled[b * n + j] = bias[j];
    const float *__restrict pattern = tile ? tiled : bias;
    for (unsigned k0 = 0; bias && k0 < rows; k0 += period) {
      // A row pointer: GCC left sum[k0 + k] scalar (the unsigned index may wrap).
      float *__restrict row = sum + k0;
      const unsigned len = rows - k0 < period ? rows - k0 : period;
      for (unsigned k = 0; k < len; ++k)
        row[k] += pattern[k];
    }
  } else { // a float sum per entry in the same order, stored once
    for (unsigned k = 0; k < rows; ++k) {
      float acc = 0.0f;
      for (unsigned s = 0; s < numSrc; ++s)
        acc += float(partialIn[(s * numSteps + t) * rows + k]);
      sum[k] = S(acc);
    }
  }
}

// One sample's synaptic input I[t] = W.x[t] + b (dense steps: zero inputs skipped) or the
// sum over the previous layer's spike ids, into acc.
template <class S>
POPSNN_ONCE void inputFromDense(const S *__restrict xb, unsigned numInputs, const S *weights,
                                const S *__restrict bias, unsigned n, float *__restrict acc) {
  for (unsigned j = 0; j < n; ++j)
    acc[j] = 0.0f;
  auto add = [&](unsigned i, float xi) {
    const S *__restrict row = &weights[i * n];
    for (unsigned j = 0; j < n; ++j)
      acc[j] += xi * row[j];
  };
  if constexpr (std::is_same<S, float>::value)
    forEachNonzero(xb, numInputs, add);
  else
    for (unsigned i = 0; i < numInputs; ++i)
      if (float(xb[i]) != 0.0f)
        add(i, float(xb[i]));
  for (unsigned j = 0; j < n; ++j)
    acc[j] += bias[j];
}
// As inputFromDense, from the host's list of the row's non-zero inputs: no scan of N_in floats.
// Float rows: column blocks held in registers while the listed rows stream past (the same
// sums in the same order as a pass per input, which loaded and stored acc for every input).
template <class S>
POPSNN_ONCE void inputFromList(const InputRow in, const S *weights, const S *__restrict bias,
                               unsigned n, float *__restrict acc) {
  if constexpr (std::is_same<S, float>::value) {
    popsnn::lif::sparseRowSum(reinterpret_cast<const unsigned *>(in.ids),
                              popsnn::lif::ListedValues{in.values}, in.size, weights, n, acc, n,
                              false);
  } else {
    for (unsigned j = 0; j < n; ++j)
      acc[j] = 0.0f;
    for (unsigned k = 0; k < in.size; ++k) { // the dense scan's order: bit-identical sums
      const float xi = in.values[k];
      const S *__restrict row = &weights[unsigned(in.ids[k]) * n];
      for (unsigned j = 0; j < n; ++j)
        acc[j] += xi * row[j];
    }
  }
  for (unsigned j = 0; j < n; ++j)
    acc[j] += bias[j];
}
// Source shard s's id buffer for this (step, sample) is at ids + s * srcStride.
// bufferOf(s): source shard s's buffer of this (step, sample). Float rows as inputFromList's.
template <class BufferOf, class S>
void inputFromIds(BufferOf bufferOf, unsigned numSrc, const S *weights, const S *__restrict bias,
                  unsigned n, float *__restrict acc) {
  for (unsigned j = 0; j < n; ++j)
    acc[j] = 0.0f;
  for (unsigned s = 0; s < numSrc; ++s) {
    const int *buf = bufferOf(s);
    const int spikes = buf[0];
    if constexpr (std::is_same<S, float>::value) {
      popsnn::lif::sparseRowSum(reinterpret_cast<const unsigned *>(buf + BUFFER_HEADER),
                                popsnn::lif::UnitValues{}, unsigned(spikes), weights, n, acc, n,
                                true);
    } else {
      for (int k = 0; k < spikes; ++k) {
        const S *__restrict row = &weights[unsigned(buf[BUFFER_HEADER + k]) * n];
        for (unsigned j = 0; j < n; ++j)
          acc[j] += row[j];
      }
    }
  }
  for (unsigned j = 0; j < n; ++j)
    acc[j] += bias[j];
}
template <class S>
POPSNN_ONCE void inputFromPartials(const S *__restrict sum, const S *__restrict bias, unsigned n,
                                   float *__restrict acc) {
  for (unsigned j = 0; j < n; ++j)
    acc[j] = 0.0f;
  for (unsigned j = 0; j < n; ++j)
    acc[j] += sum[j];
  for (unsigned j = 0; j < n; ++j)
    acc[j] += bias[j];
}

// RLeaky all-to-all's V.S[t-1] + b_V, summed over the spikes of every shard of this layer
// (kept apart from I[t] to add in the reference's order). Float rows on host CPUs: a block of
// rec in vector registers while the spikes' rows stream past (one load per vector, where a
// pass per spike loaded and stored rec too: 26% of an RLeaky DSNN step), the same sums in the
// same order; the rest of the columns, and half rows, a pass per spike.
template <class S>
POPSNN_ONCE void recurrentAllToAll(const int *recIds, unsigned numOwn, unsigned batch, unsigned b,
                                   unsigned stride, bool first, const S *recWeights,
                                   const S *__restrict recBias, unsigned n, float *__restrict rec) {
  unsigned j0 = 0;
#ifdef POPSNN_FLOATS16
  using popsnn::lif::Floats16, popsnn::lif::loadFloats16, popsnn::lif::storeFloats16;
  constexpr unsigned V = popsnn::lif::SPARSE_BLOCK_VECS;
  if constexpr (std::is_same<S, float>::value)
    for (; j0 + 16 * V <= n; j0 += 16 * V) {
      Floats16 acc[V];
#pragma GCC unroll 8
      for (unsigned v = 0; v < V; ++v)
        acc[v] = Floats16{};
      for (unsigned s = 0; s < numOwn && !first; ++s) {
        const int *buf = &recIds[(s * batch + b) * stride];
        for (int k = 0; k < buf[0]; ++k) {
          if (k + 4 < buf[0]) // rows fall at random: the hardware prefetcher cannot follow
            for (unsigned v = 0; v < V; ++v)
              __builtin_prefetch(
                  &recWeights[unsigned(buf[BUFFER_HEADER + k + 4]) * n + j0 + 16 * v]);
          const float *__restrict row = &recWeights[unsigned(buf[BUFFER_HEADER + k]) * n + j0];
#pragma GCC unroll 8
          for (unsigned v = 0; v < V; ++v)
            acc[v] += loadFloats16(row + 16 * v);
        }
      }
#pragma GCC unroll 8
      for (unsigned v = 0; v < V; ++v) {
        acc[v] += loadFloats16(&recBias[j0 + 16 * v]);
        storeFloats16(rec + j0 + 16 * v, acc[v]);
      }
    }
#endif
  for (unsigned j = j0; j < n; ++j)
    rec[j] = 0.0f;
  if (!first)
    for (unsigned s = 0; s < numOwn; ++s) {
      const int *buf = &recIds[(s * batch + b) * stride];
      for (int k = 0; k < buf[0]; ++k) {
        const S *__restrict row = &recWeights[unsigned(buf[BUFFER_HEADER + k]) * n];
        for (unsigned j = j0; j < n; ++j)
          rec[j] += row[j];
      }
    }
  for (unsigned j = j0; j < n; ++j)
    rec[j] = rec[j] + recBias[j];
}

#undef POPSNN_ONCE

} // namespace
