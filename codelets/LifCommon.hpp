// Device-side helpers shared by the LIF vertices (LifForward.cpp, LifBackward.cpp are
// separate translation units): the surrogate gradients, id-buffer copies, and the row
// layout of a pushing shard's next-layer weights. Inline functions only: no state.
#pragma once

#include <cmath>

#include "VertexEnums.hpp"

namespace popsnn {
namespace lif {

using namespace popsnn::codes;

// dS/dU as a function of x = U - threshold (SPEC section 1).
inline float fastSigmoid(float x, float k) {
  const float d = 1.0f + k * std::fabs(x);
  return 1.0f / (d * d);
}
inline float atanSurrogate(float x, float alpha) {
  const float z = 3.14159265358979323846f * alpha * x / 2.0f;
  return (alpha / 2.0f) / (1.0f + z * z);
}
inline float sigmoidSurrogate(float x, float k) {
  const float s = 0.5f * (1.0f + std::tanh(0.5f * k * x));
  return k * s * (1.0f - s);
}

inline float surrogateAt(unsigned kind, float param, float x) {
  switch (kind) {
  case FAST_SIGMOID:
    return fastSigmoid(x, param);
  case ATAN:
    return atanSurrogate(x, param);
  case SIGMOID:
    return sigmoidSurrogate(x, param);
  default:
    return 1.0f;
  }
}

// The surrogate of a row of membranes: the switch outside the loops, so each vectorises.
inline void surrogateRow(unsigned kind, float param, float threshold, const float *__restrict u,
                         float *__restrict sg, unsigned n) {
  switch (kind) {
  case FAST_SIGMOID:
    for (unsigned j = 0; j < n; ++j)
      sg[j] = fastSigmoid(u[j] - threshold, param);
    break;
  case ATAN:
    for (unsigned j = 0; j < n; ++j)
      sg[j] = atanSurrogate(u[j] - threshold, param);
    break;
  case SIGMOID:
    for (unsigned j = 0; j < n; ++j)
      sg[j] = sigmoidSurrogate(u[j] - threshold, param);
    break;
  default:
    for (unsigned j = 0; j < n; ++j)
      sg[j] = 1.0f;
  }
}

// Copies an id buffer (header and used entries), or writes an empty one.
inline void copyBuffer(const int *src, int *dst) {
  if (!src) {
    dst[0] = 0;
    dst[1] = 0;
    return;
  }
  const unsigned used = BUFFER_HEADER + unsigned(src[1]);
  for (unsigned k = 0; k < used; ++k)
    dst[k] = src[k];
}

// Blocks [n, n_k] (one per downstream shard k of a layer of `layerSize` neurons in shards
// of `shardSize`) <-> rows [n, pushWidth(layerSize)], zero-padded.
inline void blocksToRows(const float *blocks, unsigned n, unsigned shardSize,
                         unsigned layerSize, float *rows) {
  const unsigned P = pushWidth(layerSize);
  for (unsigned k = 0; k < n * P; ++k)
    rows[k] = 0.0f;
  for (unsigned first = 0; first < layerSize; first += shardSize) {
    const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
    const float *block = blocks + n * first;
    for (unsigned i = 0; i < n; ++i)
      for (unsigned k = 0; k < size; ++k)
        rows[i * P + first + k] = block[i * size + k];
  }
}
inline void rowsToBlocks(const float *rows, unsigned n, unsigned shardSize, unsigned layerSize,
                         float *blocks) {
  const unsigned P = pushWidth(layerSize);
  for (unsigned first = 0; first < layerSize; first += shardSize) {
    const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
    float *block = blocks + n * first;
    for (unsigned i = 0; i < n; ++i)
      for (unsigned k = 0; k < size; ++k)
        block[i * size + k] = rows[i * P + first + k];
  }
}

} // namespace lif
} // namespace popsnn
