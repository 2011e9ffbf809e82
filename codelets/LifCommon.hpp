// Device-side helpers shared by the LIF vertices (LifForward.cpp, LifBackward.cpp are
// separate translation units): id-buffer copies, and the row
// layout of a pushing shard's next-layer weights, the spike and candidate ids, the fused
// Leaky backward steps (the forward's: LeakForwardRow.hpp; the sparse row kernels:
// SparseRows.hpp). Inline functions only.
#pragma once

#include <cmath>
#if !defined(__IPU__) && (defined(__AVX512F__) || defined(__AVX2__))
#include <immintrin.h>
#endif

#include "../include/popsnn/VertexEnums.hpp"
#include "SparseRows.hpp"

namespace popsnn {
namespace lif {

using namespace popsnn::codes;

// Copies an id buffer (header and used entries), or writes an empty one.
// Row `row` (= t * B + b) of an id trace: its buffer, at the offset the trace's starts give.
inline const int *traceRowOf(const int *trace, unsigned row) { return trace + trace[row]; }

// Row `row` (= t * B + b) of a [T, B, N_in] input list (codes::inputListStarts): its non-zero
// inputs' ids and values.
struct InputRow {
  const int *ids;
  const float *values;
  unsigned size;
};
inline InputRow inputRowOf(const int *list, const float *values, unsigned rows, unsigned row) {
  const unsigned first = unsigned(list[row]);
  return {list + rows + 1 + first, values + first, unsigned(list[row + 1]) - first};
}

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
// Blocks stored as S (float, or half: the rows are float either way).
template <class S>
inline void blocksToRows(const S *blocks, unsigned n, unsigned shardSize, unsigned layerSize,
                         float *rows) {
  const unsigned P = pushWidth(layerSize);
  for (unsigned k = 0; k < n * P; ++k)
    rows[k] = 0.0f;
  for (unsigned first = 0; first < layerSize; first += shardSize) {
    const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
    const S *block = blocks + n * first;
    for (unsigned i = 0; i < n; ++i)
      for (unsigned k = 0; k < size; ++k)
        rows[i * P + first + k] = float(block[i * size + k]);
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

// The dot product of two rows padded to a multiple of PUSH_CHUNK (16) floats.
inline float dotPadded(const float *__restrict a, const float *__restrict b, unsigned P) {
#ifdef POPSNN_FLOATS16
  Floats16 acc = {};
  for (unsigned c0 = 0; c0 < P; c0 += 16)
    acc += loadFloats16(a + c0) * loadFloats16(b + c0);
  return laneSum(acc);
#else
  float sum = 0.0f;
  for (unsigned c = 0; c < P; ++c)
    sum += a[c] * b[c];
  return sum;
#endif
}

// out[0..P) = sum over the ids of rows[(id - offset) * P + (0..P)], rows padded to a
// multiple of PUSH_CHUNK (16): 16 columns at a time in a register.
inline void sumRows(const int *__restrict ids, unsigned count, unsigned offset,
                    const float *__restrict rows, unsigned P, float *__restrict out) {
  for (unsigned c0 = 0; c0 < P; c0 += 16) {
#ifdef POPSNN_FLOATS16
    // Two chains, so that the adds overlap.
    Floats16 acc0 = {}, acc1 = {};
    unsigned k = 0;
    for (; k + 2 <= count; k += 2) {
      acc0 += loadFloats16(rows + (unsigned(ids[k]) - offset) * P + c0);
      acc1 += loadFloats16(rows + (unsigned(ids[k + 1]) - offset) * P + c0);
    }
    if (k < count)
      acc0 += loadFloats16(rows + (unsigned(ids[k]) - offset) * P + c0);
    acc0 += acc1;
    storeFloats16(out + c0, acc0);
#else
    for (unsigned c = 0; c < 16; ++c)
      out[c0 + c] = 0.0f;
    for (unsigned k = 0; k < count; ++k)
      for (unsigned c = 0; c < 16; ++c)
        out[c0 + c] += rows[(unsigned(ids[k]) - offset) * P + c0 + c];
#endif
  }
}

// rows[(id - offset) * P + (0..P)] += g[0..P) for every id, rows padded to a multiple of
// PUSH_CHUNK (16). A spike costs one row update: for the narrow rows of a readout (P 16 or
// 32) g stays in registers, so each update is a load, an add and a store, with no loop over
// chunks (GCC reloaded g for every id: rows and g may alias for all it knows).
template <unsigned CHUNKS>
inline void addToRowsOf(const int *__restrict ids, unsigned count, unsigned offset,
                        const float *__restrict g, float *__restrict rows) {
#ifdef POPSNN_FLOATS16
  Floats16 gv[CHUNKS];
  for (unsigned c = 0; c < CHUNKS; ++c)
    gv[c] = loadFloats16(g + 16 * c);
  for (unsigned k = 0; k < count; ++k) {
    float *__restrict r = rows + (unsigned(ids[k]) - offset) * (16 * CHUNKS);
    for (unsigned c = 0; c < CHUNKS; ++c) {
      Floats16 v = loadFloats16(r + 16 * c);
      v += gv[c];
      storeFloats16(r + 16 * c, v);
    }
  }
#else
  for (unsigned k = 0; k < count; ++k) {
    float *__restrict r = rows + (unsigned(ids[k]) - offset) * (16 * CHUNKS);
    for (unsigned c = 0; c < 16 * CHUNKS; ++c)
      r[c] += g[c];
  }
#endif
}
inline void addToRows(const int *__restrict ids, unsigned count, unsigned offset,
                      const float *__restrict g, float *__restrict rows, unsigned P) {
  if (P == 16)
    return addToRowsOf<1>(ids, count, offset, g, rows);
  if (P == 32)
    return addToRowsOf<2>(ids, count, offset, g, rows);
  for (unsigned k = 0; k < count; ++k) {
    float *__restrict r = rows + (unsigned(ids[k]) - offset) * P;
    for (unsigned c = 0; c < P; ++c)
      r[c] += g[c];
  }
}

#ifdef POPSNN_SPARSE_ROWS_AVX512
// The spike decisions of the first min(rest, 16) neurons: prev[j] = U[j] > threshold (1 or
// 0), returned as a bit mask.
inline __mmask16 spikes16(const float *__restrict u, __m512 threshold, float *__restrict prev,
                          unsigned rest) {
  const __mmask16 m = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1u);
  const __mmask16 s =
      _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, u), threshold, _CMP_GT_OQ);
  _mm512_mask_storeu_ps(prev, m, _mm512_maskz_mov_ps(s, _mm512_set1_ps(1.0f)));
  return s;
}
#endif

// Spike decisions of up to 32 neurons: prev[j] = U[j] > threshold (1 or 0), and their bit
// mask (bit j), to visit only the spikes.
inline unsigned spikeBits(const float *__restrict u, float threshold, float *__restrict prev,
                          unsigned count) {
#ifdef POPSNN_SPARSE_ROWS_AVX512
  const __m512 th = _mm512_set1_ps(threshold);
  unsigned bits = 0;
  for (unsigned lo = 0; lo < count; lo += 16)
    bits |= unsigned(spikes16(u + lo, th, prev + lo, count - lo)) << lo;
  return bits;
#else
  unsigned bits = 0;
  for (unsigned j = 0; j < count; ++j) {
    const bool spike = u[j] > threshold;
    prev[j] = spike ? 1.0f : 0.0f;
    bits |= unsigned(spike) << j;
  }
  return bits;
#endif
}

// Appends the ids (offset + j) of the set bits of `bits` (neurons j0 + 0..31) to an id
// buffer of `capacity` entries holding `needed`; counts past the capacity (overflow is
// detected from the count, never dropped silently).
inline unsigned appendBits(unsigned bits, unsigned first, int *__restrict ids, unsigned needed,
                           unsigned capacity) {
  while (bits) {
    const unsigned j = first + unsigned(__builtin_ctz(bits));
    bits &= bits - 1;
    if (needed < capacity)
      ids[needed] = int(j);
    ++needed;
  }
  return needed;
}

#ifdef POPSNN_SPARSE_ROWS_AVX512
// The ids offset + 0..15 in a register.
inline __m512i firstLanes(unsigned offset) {
  return _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                          _mm512_set1_epi32(int(offset)));
}

// Appends the ids (in `lane`) of the set bits of a 16-neuron mask: compressed in a register
// and stored whole while 16 more fit (lanes past the count are overwritten later or
// unused), else bit by bit up to the capacity (appendBits).
inline unsigned appendMask16(__mmask16 s, __m512i lane, unsigned first, int *__restrict ids,
                             unsigned needed, unsigned capacity) {
  if (needed + 16 > capacity)
    return appendBits(s, first, ids, needed, capacity);
  _mm512_storeu_si512(ids + needed, _mm512_maskz_compress_epi32(s, lane));
  return needed + unsigned(__builtin_popcount(s));
}
#endif

// The row's non-zeros from x[j0] on, one at a time, after the `count` the lanes listed: the
// lane forms' rest (a last partial vector, or the capacity too near for a whole one).
inline unsigned appendNonzeroFrom(const float *__restrict x, unsigned j0, unsigned n, unsigned used,
                                  unsigned count, unsigned capacity, unsigned short *__restrict ids,
                                  float *__restrict vals) {
  for (unsigned j = j0; j < n; ++j)
    if (x[j] != 0.0f) {
      if (used + count < capacity) {
        ids[used + count] = static_cast<unsigned short>(j);
        vals[used + count] = x[j];
      }
      ++count;
    }
  return count;
}

#if !defined(__IPU__) && !defined(POPSNN_PLAIN_LOOPS) && !defined(__AVX512F__) && defined(__AVX2__)
#define POPSNN_SPIKES_AVX2 1

// Appends the ids (in `lane`) of the set bits of an 8-neuron mask: packed by PACKED_LANES and
// stored whole while 8 more fit (lanes past the count are overwritten later or unused), else
// bit by bit up to the capacity (appendBits).
inline unsigned appendMask8(unsigned bits, __m256i lane, unsigned first, int *__restrict ids,
                            unsigned needed, unsigned capacity) {
  if (needed + 8 > capacity)
    return appendBits(bits, first, ids, needed, capacity);
  _mm256_storeu_si256(reinterpret_cast<__m256i *>(ids + needed),
                      _mm256_permutevar8x32_epi32(lane, packedLaneOrder(bits)));
  return needed + unsigned(__builtin_popcount(bits));
}

// appendSpikes' AVX2 form: 8 neurons per compare; their ids packed by PACKED_LANES and stored
// whole while 8 more fit (lanes past the count are overwritten later or unused), else bit
// by bit (appendBits); the last n % 8 neurons as the plain loop does them.
inline unsigned appendSpikes8(const float *__restrict u, float threshold, float *__restrict prev,
                              unsigned n, unsigned offset, int *__restrict ids, unsigned needed,
                              unsigned capacity) {
  const __m256 th = _mm256_set1_ps(threshold), one = _mm256_set1_ps(1.0f);
  __m256i lane = firstLanes8(offset);
  const __m256i eight = _mm256_set1_epi32(8);
  unsigned j0 = 0;
  for (; j0 + 8 <= n; j0 += 8) {
    const __m256 s = _mm256_cmp_ps(_mm256_loadu_ps(u + j0), th, _CMP_GT_OQ);
    _mm256_storeu_ps(prev + j0, _mm256_and_ps(s, one));
    needed = appendMask8(unsigned(_mm256_movemask_ps(s)), lane, offset + j0, ids, needed, capacity);
    lane = _mm256_add_epi32(lane, eight);
  }
  if (j0 < n)
    needed = appendBits(spikeBits(u + j0, threshold, prev + j0, n - j0), offset + j0, ids, needed,
                        capacity);
  return needed;
}

// The non-zero entries of a row (x != 0, NaN included, as forEachNonzero), appended at `used`
// to 16-bit ids and float values of `capacity` entries; returns how many the row has, past the
// capacity only counted. 8 lanes per compare, packed by PACKED_LANES and stored whole while 8
// more fit: at a window rule's ~5-10% kept, a branch per entry mispredicted about half the time.
inline unsigned appendNonzero8(const float *__restrict x, unsigned n, unsigned used,
                               unsigned capacity, unsigned short *__restrict ids,
                               float *__restrict vals) {
  const __m256 zero = _mm256_setzero_ps();
  __m256i lane = firstLanes8(0);
  const __m256i eight = _mm256_set1_epi32(8);
  unsigned count = 0, j0 = 0;
  for (; j0 + 8 <= n && used + count + 8 <= capacity; j0 += 8) {
    const __m256 v = _mm256_loadu_ps(x + j0);
    const unsigned bits = unsigned(_mm256_movemask_ps(_mm256_cmp_ps(v, zero, _CMP_NEQ_UQ)));
    const __m256i order = packedLaneOrder(bits);
    _mm256_storeu_ps(vals + used + count, _mm256_permutevar8x32_ps(v, order));
    const __m256i id = _mm256_permutevar8x32_epi32(lane, order); // < 65,536: packs exactly
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(id, id), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(ids + used + count),
                     _mm256_castsi256_si128(packed));
    count += unsigned(__builtin_popcount(bits));
    lane = _mm256_add_epi32(lane, eight);
  }
  return appendNonzeroFrom(x, j0, n, used, count, capacity, ids, vals);
}
#endif

#ifdef POPSNN_SPARSE_ROWS_AVX512
// appendNonzero8's AVX-512 form: 16 lanes per compare, the values and their ids (narrowed to
// 16 bits) compressed in registers and stored masked, while 16 more fit; the same entries in
// the same order as forEachNonzero's walk, without its branch per entry.
inline unsigned appendNonzero16(const float *__restrict x, unsigned n, unsigned used,
                                unsigned capacity, unsigned short *__restrict ids,
                                float *__restrict vals) {
  const __m512 zero = _mm512_setzero_ps();
  __m512i lane = firstLanes(0);
  const __m512i sixteen = _mm512_set1_epi32(16);
  unsigned count = 0, j0 = 0;
  for (; j0 < n && used + count + 16 <= capacity; j0 += 16) {
    const unsigned rest = n - j0;
    const __mmask16 m = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j0);
    const __mmask16 nz = _mm512_mask_cmp_ps_mask(m, v, zero, _CMP_NEQ_UQ);
    const unsigned found = storeCompressed(vals + used + count, nz, v);
    _mm512_mask_cvtepi32_storeu_epi16(ids + used + count, __mmask16((1u << found) - 1u),
                                      _mm512_maskz_compress_epi32(nz, lane));
    count += found;
    lane = _mm512_add_epi32(lane, sixteen);
  }
  return appendNonzeroFrom(x, j0, n, used, count, capacity, ids, vals);
}
#endif

#if defined(POPSNN_SPARSE_ROWS_AVX512) || defined(POPSNN_SPIKES_AVX2)
// The gradient trace's row listing (LifForward's appendTrace) by lanes, where the build has it.
#define POPSNN_APPEND_NONZERO 1
inline unsigned appendNonzero(const float *__restrict x, unsigned n, unsigned used,
                              unsigned capacity, unsigned short *__restrict ids,
                              float *__restrict vals) {
#ifdef POPSNN_SPARSE_ROWS_AVX512
  return appendNonzero16(x, n, used, capacity, ids, vals);
#else
  return appendNonzero8(x, n, used, capacity, ids, vals);
#endif
}
#endif

// The spikes of a row: prev[j] = U[j] > threshold, ids of the spiking neurons appended.
// AVX-512: 16 neurons per compare, their ids compressed in a register and stored whole
// (lanes past the count are overwritten later or unused), so no branch per spike; AVX2: 8 at
// a time (appendSpikes8).
inline unsigned appendSpikes(const float *__restrict u, float threshold, float *__restrict prev,
                             unsigned n, unsigned offset, int *__restrict ids, unsigned needed,
                             unsigned capacity) {
#ifdef POPSNN_SPARSE_ROWS_AVX512
  const __m512 th = _mm512_set1_ps(threshold);
  __m512i lane = firstLanes(offset);
  const __m512i sixteen = _mm512_set1_epi32(16);
  for (unsigned j0 = 0; j0 < n; j0 += 16) {
    const __mmask16 s = spikes16(u + j0, th, prev + j0, n - j0);
    needed = appendMask16(s, lane, offset + j0, ids, needed, capacity);
    lane = _mm512_add_epi32(lane, sixteen);
  }
  return needed;
#elif defined(POPSNN_SPIKES_AVX2)
  return appendSpikes8(u, threshold, prev, n, offset, ids, needed, capacity);
#else
  for (unsigned j0 = 0; j0 < n; j0 += 32)
    needed = appendBits(spikeBits(u + j0, threshold, prev + j0, j0 + 32 < n ? 32 : n - j0),
                        offset + j0, ids, needed, capacity);
  return needed;
#endif
}

// appendSpikes with one threshold per neuron (docs/numerics.md §2): prev[j] = U[j] >
// threshold[j], 32 neurons' decisions at a time into a bit mask.
inline unsigned appendSpikesPerNeuron(const float *__restrict u, const float *__restrict threshold,
                                      float *__restrict prev, unsigned n, unsigned offset,
                                      int *__restrict ids, unsigned needed, unsigned capacity) {
  for (unsigned j0 = 0; j0 < n; j0 += 32) {
    const unsigned count = j0 + 32 < n ? 32 : n - j0;
    unsigned bits = 0;
    for (unsigned j = 0; j < count; ++j) {
      const bool spike = u[j0 + j] > threshold[j0 + j];
      prev[j0 + j] = spike ? 1.0f : 0.0f;
      bits |= unsigned(spike) << j;
    }
    needed = appendBits(bits, offset + j0, ids, needed, capacity);
  }
  return needed;
}

// The fused backward's decay: one per layer (a float) or one per neuron (a row of them, read
// with the neurons' other rows: docs/numerics.md section 2).
// surrogate * dL/dS where the surrogate is non-zero, else 0: a neuron far from threshold
// passes no gradient even where dL/dS is inf or NaN. Both values are read by the caller
// unconditionally: a read of dL/dS under the test keeps GCC from vectorising the loop on AVX2
// (Synaptic's backward row ran scalar, 25% of its step).
inline float surrogateTimes(float sg, float eps) {
  const float product = sg * eps;
  return sg != 0.0f ? product : 0.0f;
}

inline float decayAt(float beta, unsigned) { return beta; }
inline float decayAt(const float *beta, unsigned j) { return beta[j]; }
inline float decayFrom(float beta, unsigned) { return beta; }
inline const float *decayFrom(const float *beta, unsigned j) { return beta + j; }

#ifdef POPSNN_SPARSE_ROWS_AVX512
inline __m512 decayVector(float beta, unsigned, __mmask16) { return _mm512_set1_ps(beta); }
inline __m512 decayVector(const float *beta, unsigned o, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, beta + o);
}

// The backward step of one sample of a dense Leaky shard that feeds another layer, in one
// pass over its neurons (instead of one pass per quantity): dL/dS = sum_k g[k] W^T[k, :]
// (g: the next layer's dL/dI, W^T: its weights by downstream neuron, rows of stride n),
// gU = (sg != 0 ? sg dL/dS : 0) + beta gU, and gU added to acc (sum over steps, if given),
// copied to out (if given) and added to gb. V vectors of 16 neurons, the last masked. Beta:
// float or const float * (decayAt).
#define POPSNN_FUSED_LEAK_BACKWARD 1
template <unsigned V, class Beta>
inline void leakBackwardBlock(const float *__restrict g, unsigned K, const float *__restrict wT,
                              unsigned n, const float *__restrict sg, Beta beta,
                              float *__restrict gU, float *__restrict acc, float *__restrict out,
                              float *__restrict gb, __mmask16 lastMask) {
  __m512 e[V];
#pragma GCC unroll 8
  for (unsigned c = 0; c < V; ++c)
    e[c] = _mm512_setzero_ps();
  for (unsigned k = 0; k < K; ++k) {
    const __m512 gk = _mm512_set1_ps(g[k]);
    const float *__restrict row = wT + k * n;
#pragma GCC unroll 8
    for (unsigned c = 0; c < V; ++c)
      e[c] = _mm512_fmadd_ps(
          gk, _mm512_maskz_loadu_ps(c + 1 == V ? lastMask : __mmask16(0xffff), row + 16 * c), e[c]);
  }
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (unsigned c = 0; c < V; ++c) {
    const __mmask16 m = c + 1 == V ? lastMask : __mmask16(0xffff);
    const unsigned o = 16 * c;
    const __m512 b = decayVector(beta, o, m);
    const __m512 s = _mm512_maskz_loadu_ps(m, sg + o);
    const __mmask16 nz = _mm512_mask_cmp_ps_mask(m, s, zero, _CMP_NEQ_UQ);
    const __m512 u =
        _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m, gU + o), _mm512_maskz_mul_ps(nz, s, e[c]));
    _mm512_mask_storeu_ps(gU + o, m, u);
    if (acc)
      _mm512_mask_storeu_ps(acc + o, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + o), u));
    if (out)
      _mm512_mask_storeu_ps(out + o, m, u);
    _mm512_mask_storeu_ps(gb + o, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, gb + o), u));
  }
}
template <class Beta>
inline void leakBackwardRow(const float *__restrict g, unsigned K, const float *__restrict wT,
                            unsigned n, const float *__restrict sg, Beta beta, float *__restrict gU,
                            float *__restrict acc, float *__restrict out, float *__restrict gb) {
  unsigned j = 0;
  for (; j + 128 <= n; j += 128)
    leakBackwardBlock<8>(g, K, wT + j, n, sg + j, decayFrom(beta, j), gU + j,
                         acc ? acc + j : nullptr, out ? out + j : nullptr, gb + j,
                         __mmask16(0xffff));
  const unsigned rest = n - j;
  if (rest == 0)
    return;
  const __mmask16 mask = __mmask16((1u << (rest - (rest - 1) / 16 * 16)) - 1u);
  switch ((rest + 15) / 16) {
    // clang-format off: a case per macro line
#define POPSNN_BLOCK(V)                                                                    \
  case V:                                                                                  \
    leakBackwardBlock<V>(g, K, wT + j, n, sg + j, decayFrom(beta, j), gU + j,              \
                         acc ? acc + j : nullptr, out ? out + j : nullptr, gb + j, mask);  \
    break;
    POPSNN_BLOCK(1) POPSNN_BLOCK(2) POPSNN_BLOCK(3) POPSNN_BLOCK(4)
    POPSNN_BLOCK(5) POPSNN_BLOCK(6) POPSNN_BLOCK(7) POPSNN_BLOCK(8)
#undef POPSNN_BLOCK
    // clang-format on
  }
}
#elif defined(POPSNN_FLOATS16)
// The same fused backward step (see above) with the CPU's own vectors: V vectors of neurons
// at a time, the last few neurons one by one.
#define POPSNN_FUSED_LEAK_BACKWARD 1
constexpr unsigned NATIVE_LANES = sizeof(NativeFloats) / sizeof(float);
typedef int NativeInts __attribute__((vector_size(sizeof(NativeFloats))));
inline NativeFloats decayVector(float beta, unsigned) { return NativeFloats{} + beta; }
inline NativeFloats decayVector(const float *beta, unsigned o) {
  return *reinterpret_cast<const UnalignedFloats *>(beta + o);
}
template <unsigned V, class Beta>
inline void leakBackwardVectors(const float *__restrict g, unsigned K, const float *__restrict wT,
                                unsigned n, const float *__restrict sg, Beta beta,
                                float *__restrict gU, float *__restrict acc, float *__restrict out,
                                float *__restrict gb) {
  typedef UnalignedFloats F;
  NativeFloats e[V] = {};
  for (unsigned k = 0; k < K; ++k) {
    const float gk = g[k];
    const float *__restrict row = wT + k * n;
#pragma GCC unroll 8
    for (unsigned c = 0; c < V; ++c)
      e[c] += gk * *reinterpret_cast<const F *>(row + NATIVE_LANES * c);
  }
  const NativeFloats zero = {};
#pragma GCC unroll 8
  for (unsigned c = 0; c < V; ++c) {
    const unsigned o = NATIVE_LANES * c;
    const NativeFloats s = *reinterpret_cast<const F *>(sg + o);
    // s * e where the surrogate is non-zero (NaN counts), else 0, as the AVX-512 mask.
    const NativeFloats masked = (NativeFloats)((NativeInts)(s * e[c]) & (s != zero));
    const NativeFloats u = decayVector(beta, o) * *reinterpret_cast<const F *>(gU + o) + masked;
    *reinterpret_cast<F *>(gU + o) = u;
    if (acc)
      *reinterpret_cast<F *>(acc + o) = *reinterpret_cast<const F *>(acc + o) + u;
    if (out)
      *reinterpret_cast<F *>(out + o) = u;
    *reinterpret_cast<F *>(gb + o) = *reinterpret_cast<const F *>(gb + o) + u;
  }
}
template <class Beta>
inline void leakBackwardRow(const float *__restrict g, unsigned K, const float *__restrict wT,
                            unsigned n, const float *__restrict sg, Beta beta, float *__restrict gU,
                            float *__restrict acc, float *__restrict out, float *__restrict gb) {
  constexpr unsigned BLOCK = 8 * NATIVE_LANES;
  unsigned j = 0;
  for (; j + BLOCK <= n; j += BLOCK)
    leakBackwardVectors<8>(g, K, wT + j, n, sg + j, decayFrom(beta, j), gU + j,
                           acc ? acc + j : nullptr, out ? out + j : nullptr, gb + j);
  switch ((n - j) / NATIVE_LANES) {
    // clang-format off: a case per macro line
#define POPSNN_BLOCK(V)                                                                    \
  case V:                                                                                  \
    leakBackwardVectors<V>(g, K, wT + j, n, sg + j, decayFrom(beta, j), gU + j,            \
                           acc ? acc + j : nullptr, out ? out + j : nullptr, gb + j);      \
    break;
    POPSNN_BLOCK(1) POPSNN_BLOCK(2) POPSNN_BLOCK(3) POPSNN_BLOCK(4)
    POPSNN_BLOCK(5) POPSNN_BLOCK(6) POPSNN_BLOCK(7)
#undef POPSNN_BLOCK
    default:
      break;
    // clang-format on
  }
  for (j += (n - j) / NATIVE_LANES * NATIVE_LANES; j < n; ++j) {
    float e = 0.0f;
    for (unsigned k = 0; k < K; ++k)
      e += g[k] * wT[k * n + j];
    const float u = decayAt(beta, j) * gU[j] + surrogateTimes(sg[j], e);
    gU[j] = u;
    if (acc)
      acc[j] += u;
    if (out)
      out[j] = u;
    gb[j] += u;
  }
}
#endif

} // namespace lif
} // namespace popsnn
