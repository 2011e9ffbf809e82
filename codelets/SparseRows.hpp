// The sparse row kernels of the vertices: out = sum over listed rows of value x row, for
// the spike-id paths and the direct-current layer's products on sparse input (see
// DenseKernels.hpp for the dense ones), and the 16-float vector type they are written in.
// Inline functions only: no state.
#pragma once

#include <cstddef>

#if !defined(__IPU__) && defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace popsnn {
namespace lif {

// out[0..n) = sum_k val[k] * rows[idx[k] * rowStride + (0..n)], k = 0..count in order.
// A block of output columns stays in vector registers while every listed row streams past
// it: one load per multiply-add, and out is written once. Host CPUs only: 16 floats as one
// AVX-512 vector, or as 2 (AVX) or 4 (SSE) of the CPU's vectors (GCC keeps a plain 64-byte
// vector type in memory there, not in registers); plain loops get vectorised over k
// instead, with gathers. On AVX-512, masks for the last, partial vector of a row. The IPU
// build takes the plain loops (as does a host build with POPSNN_PLAIN_LOOPS, to test them).
#if !defined(__IPU__) && !defined(POPSNN_PLAIN_LOOPS)
#define POPSNN_FLOATS16 1
#ifdef __AVX512F__
typedef float Floats16 __attribute__((vector_size(64)));
typedef Floats16 NativeFloats;
inline float laneSum(Floats16 v) { return _mm512_reduce_add_ps(v); }
#else
#ifdef __AVX__
typedef float NativeFloats __attribute__((vector_size(32)));
#else
typedef float NativeFloats __attribute__((vector_size(16)));
#endif
constexpr unsigned NATIVE_PARTS = 64 / sizeof(NativeFloats);
struct Floats16 {
  NativeFloats part[NATIVE_PARTS];
};
inline Floats16 &operator+=(Floats16 &a, const Floats16 &b) {
  for (unsigned i = 0; i < NATIVE_PARTS; ++i)
    a.part[i] += b.part[i];
  return a;
}
inline Floats16 operator*(float s, const Floats16 &b) {
  Floats16 r;
  for (unsigned i = 0; i < NATIVE_PARTS; ++i)
    r.part[i] = s * b.part[i];
  return r;
}
inline Floats16 operator*(const Floats16 &a, const Floats16 &b) {
  Floats16 r;
  for (unsigned i = 0; i < NATIVE_PARTS; ++i)
    r.part[i] = a.part[i] * b.part[i];
  return r;
}
inline float laneSum(const Floats16 &v) {
  float lanes[16], sum = 0.0f;
  __builtin_memcpy(lanes, &v, sizeof lanes);
  for (unsigned c = 0; c < 16; ++c)
    sum += lanes[c];
  return sum;
}
#endif
// Part by part through an unaligned view, so that each part goes straight to a register.
typedef NativeFloats UnalignedFloats __attribute__((aligned(4), may_alias));
inline Floats16 loadFloats16(const float *p) {
  Floats16 v;
  constexpr unsigned parts = sizeof(Floats16) / sizeof(NativeFloats);
  for (unsigned i = 0; i < parts; ++i)
    reinterpret_cast<NativeFloats *>(&v)[i] =
        *reinterpret_cast<const UnalignedFloats *>(p + i * (16 / parts));
  return v;
}
inline void storeFloats16(float *p, const Floats16 &v) {
  constexpr unsigned parts = sizeof(Floats16) / sizeof(NativeFloats);
  for (unsigned i = 0; i < parts; ++i)
    *reinterpret_cast<UnalignedFloats *>(p + i * (16 / parts)) =
        reinterpret_cast<const NativeFloats *>(&v)[i];
}
// Vectors of 16 columns per block: as many accumulators as the registers hold.
#ifdef __AVX512F__
constexpr unsigned SPARSE_BLOCK_VECS = 8;
#else
constexpr unsigned SPARSE_BLOCK_VECS = 4;
#endif
// The listed rows fall at random (spike ids, non-zero inputs), so the hardware prefetcher
// cannot follow them: fetch the block of the row ROW_PREFETCH_AHEAD entries later early.
constexpr unsigned ROW_PREFETCH_AHEAD = 4;
template <unsigned V>
inline void prefetchRowBlock(const unsigned *__restrict idx, unsigned k, unsigned count,
                             const float *__restrict rows, unsigned rowStride) {
  if (k + ROW_PREFETCH_AHEAD < count) {
    const float *row = rows + idx[k + ROW_PREFETCH_AHEAD] * rowStride;
#pragma GCC unroll 8
    for (unsigned c = 0; c < V; ++c)
      __builtin_prefetch(row + 16 * c);
  }
}
// V vectors of 16 columns.
template <unsigned V>
inline void sparseRowBlock(const unsigned *__restrict idx, const float *__restrict val,
                           unsigned count, const float *__restrict rows, unsigned rowStride,
                           float *__restrict out) {
  Floats16 acc[V];
  for (unsigned c = 0; c < V; ++c)
    acc[c] = Floats16{};
  for (unsigned k = 0; k < count; ++k) {
    prefetchRowBlock<V>(idx, k, count, rows, rowStride);
    const float v = val[k];
    const float *__restrict row = rows + idx[k] * rowStride;
#pragma GCC unroll 8
    for (unsigned c = 0; c < V; ++c)
      acc[c] += v * loadFloats16(row + 16 * c);
  }
  for (unsigned c = 0; c < V; ++c)
    storeFloats16(out + 16 * c, acc[c]);
}
#endif

#if !defined(__IPU__) && !defined(POPSNN_PLAIN_LOOPS) && defined(__AVX512F__)
#define POPSNN_SPARSE_ROWS_AVX512 1
// V full vectors of 16 columns and a last one masked to `lastMask`.
template <unsigned V>
inline void sparseRowBlockMasked(const unsigned *__restrict idx, const float *__restrict val,
                                 unsigned count, const float *__restrict rows, unsigned rowStride,
                                 float *__restrict out, __mmask16 lastMask) {
  Floats16 acc[V + 1];
  for (unsigned c = 0; c <= V; ++c)
    acc[c] = Floats16{};
  for (unsigned k = 0; k < count; ++k) {
    prefetchRowBlock<V + 1>(idx, k, count, rows, rowStride);
    const float v = val[k];
    const float *__restrict row = rows + idx[k] * rowStride;
#pragma GCC unroll 8
    for (unsigned c = 0; c < V; ++c)
      acc[c] += v * loadFloats16(row + 16 * c);
    acc[V] =
        _mm512_fmadd_ps(_mm512_set1_ps(v), _mm512_maskz_loadu_ps(lastMask, row + 16 * V), acc[V]);
  }
#pragma GCC unroll 8
  for (unsigned c = 0; c < V; ++c)
    _mm512_storeu_ps(out + 16 * c, acc[c]);
  _mm512_mask_storeu_ps(out + 16 * V, lastMask, acc[V]);
}
#endif

inline void sparseRowCombination(const unsigned *__restrict idx, const float *__restrict val,
                                 unsigned count, const float *__restrict rows, unsigned rowStride,
                                 float *__restrict out, unsigned n) {
#ifdef POPSNN_SPARSE_ROWS_AVX512
  unsigned j = 0;
  for (; j + 128 <= n; j += 128)
    sparseRowBlock<8>(idx, val, count, rows + j, rowStride, out + j);
  const unsigned rest = n - j;
  if (rest == 0)
    return;
  // (rest - 1) / 16 full vectors, then 1..16 masked columns.
  const __mmask16 mask = __mmask16((1u << (rest - (rest - 1) / 16 * 16)) - 1u);
  switch ((rest - 1) / 16) {
    // clang-format off: a case per macro line
#define POPSNN_BLOCK(V)                                                                            \
  case V:                                                                                          \
    sparseRowBlockMasked<V>(idx, val, count, rows + j, rowStride, out + j, mask);                  \
    break;
    POPSNN_BLOCK(0)
    POPSNN_BLOCK(1) POPSNN_BLOCK(2) POPSNN_BLOCK(3) POPSNN_BLOCK(4) POPSNN_BLOCK(5) POPSNN_BLOCK(6)
        POPSNN_BLOCK(7)
#undef POPSNN_BLOCK
    // clang-format on
  }
#elif defined(POPSNN_FLOATS16)
  constexpr unsigned BLOCK = 16 * SPARSE_BLOCK_VECS;
  unsigned j = 0;
  for (; j + BLOCK <= n; j += BLOCK)
    sparseRowBlock<SPARSE_BLOCK_VECS>(idx, val, count, rows + j, rowStride, out + j);
  // Whole vectors of the rest, then 0..15 columns one by one.
  switch ((n - j) / 16) {
    // clang-format off: a case per macro line
#define POPSNN_BLOCK(V)                                                                            \
  case V:                                                                                          \
    sparseRowBlock<V>(idx, val, count, rows + j, rowStride, out + j);                              \
    break;
    POPSNN_BLOCK(1)
    POPSNN_BLOCK(2) POPSNN_BLOCK(3) POPSNN_BLOCK(4) POPSNN_BLOCK(5) POPSNN_BLOCK(6) POPSNN_BLOCK(7)
#undef POPSNN_BLOCK
    default:
      break;
    // clang-format on
  }
  j += (n - j) / 16 * 16;
  for (unsigned c = j; c < n; ++c)
    out[c] = 0.0f;
  for (unsigned k = 0; k < count; ++k) {
    const float v = val[k];
    const float *__restrict row = rows + idx[k] * rowStride;
    for (unsigned c = j; c < n; ++c)
      out[c] += v * row[c];
  }
#else
  for (unsigned j = 0; j < n; ++j)
    out[j] = 0.0f;
  for (unsigned k = 0; k < count; ++k) {
    const float v = val[k];
    const float *__restrict row = rows + idx[k] * rowStride;
    for (unsigned j = 0; j < n; ++j)
      out[j] += v * row[j];
  }
#endif
}

#ifdef POPSNN_SPARSE_ROWS_AVX512
// The non-zero entries of x[0..nIn) (NaN counts) as ids and values, in order; returns their
// count. 16 entries per compare, compressed in registers (a masked store of the used lanes:
// nothing written past the count).
inline unsigned compressNonzero(const float *__restrict x, unsigned nIn, unsigned *__restrict idx,
                                float *__restrict val) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  unsigned count = 0;
  for (unsigned i0 = 0; i0 < nIn; i0 += 16) {
    const unsigned rest = nIn - i0;
    const __mmask16 m = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i0);
    const __mmask16 nz = _mm512_mask_cmp_ps_mask(m, v, zero, _CMP_NEQ_UQ);
    if (nz == 0) // images' borders: whole blocks of zeros, at the same places in every row
      continue;
    const unsigned found = unsigned(__builtin_popcount(nz));
    const __mmask16 used = __mmask16((1u << found) - 1u);
    const __m512i ids = _mm512_add_epi32(lane, _mm512_set1_epi32(int(i0)));
    _mm512_mask_storeu_epi32(idx + count, used, _mm512_maskz_compress_epi32(nz, ids));
    _mm512_mask_storeu_ps(val + count, used, _mm512_maskz_compress_ps(nz, v));
    count += found;
  }
  return count;
}

// out[b, 0..n) = sum_i x[b, i] w[i, 0..n) over each sample's non-zero inputs (x [batch,
// nIn], w [nIn, n]), SPARSE_PRODUCT_COLUMNS columns of every sample at a time: that panel
// of w (nIn rows) stays in L2 while the samples pass, where a sample at a time streams all
// of w (past L2 for a wide shard) once per sample. Each sample's non-zero list is made again
// per panel (cheap: a compare and two compresses per 16 inputs). idx, val: [nIn] scratch.
constexpr unsigned SPARSE_PRODUCT_COLUMNS = 128;
inline void sparseInputProduct(const float *__restrict x, unsigned batch, unsigned nIn,
                               const float *__restrict w, unsigned n, unsigned *__restrict idx,
                               float *__restrict val, float *__restrict out) {
  for (unsigned j0 = 0; j0 < n; j0 += SPARSE_PRODUCT_COLUMNS) {
    const unsigned cols = n - j0 < SPARSE_PRODUCT_COLUMNS ? n - j0 : SPARSE_PRODUCT_COLUMNS;
    for (unsigned b = 0; b < batch; ++b) {
      const unsigned count = compressNonzero(x + b * nIn, nIn, idx, val);
      sparseRowCombination(idx, val, count, w + j0, n, out + b * n + j0, cols);
    }
  }
}
#else
// out[b, 0..n) = sum_i x[b, i] w[i, 0..n) over each sample's non-zero inputs (x [batch,
// nIn], w [nIn, n]): one sparse row combination per sample. idx, val: [nIn] scratch.
inline void sparseInputProduct(const float *__restrict x, unsigned batch, unsigned nIn,
                               const float *__restrict w, unsigned n, unsigned *__restrict idx,
                               float *__restrict val, float *__restrict out) {
  for (unsigned b = 0; b < batch; ++b) {
    const float *__restrict xb = x + b * nIn;
    unsigned count = 0;
    for (unsigned i = 0; i < nIn; ++i) { // branch-free: zeros fall at random
      idx[count] = i;
      val[count] = xb[i];
      count += xb[i] != 0.0f;
    }
    sparseRowCombination(idx, val, count, w, n, out + b * n, n);
  }
}
#endif

#ifdef POPSNN_SPARSE_ROWS_AVX512
// The samples b < batch where x[b * stride] is non-zero (NaN counts) as ids and values, in
// order; returns their count. 16 samples per gather (the scalar, branch-free loop cost
// ~3 cycles a sample and was half the weight gradient's time at MNIST's density); masked
// stores of the used lanes: nothing written past the count.
inline unsigned compressNonzeroColumn(const float *__restrict x, unsigned stride, unsigned batch,
                                      unsigned *__restrict idx, float *__restrict val) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i offsets = _mm512_mullo_epi32(lane, _mm512_set1_epi32(int(stride)));
  unsigned count = 0;
  for (unsigned b0 = 0; b0 < batch; b0 += 16) {
    const unsigned rest = batch - b0;
    const __mmask16 m = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1u);
    const __m512 v = _mm512_mask_i32gather_ps(zero, m, offsets, x + std::size_t(b0) * stride, 4);
    const __mmask16 nz = _mm512_mask_cmp_ps_mask(m, v, zero, _CMP_NEQ_UQ);
    if (nz == 0) // an image's border pixel: zero in every sample
      continue;
    const unsigned found = unsigned(__builtin_popcount(nz));
    const __mmask16 used = __mmask16((1u << found) - 1u);
    const __m512i ids = _mm512_add_epi32(lane, _mm512_set1_epi32(int(b0)));
    _mm512_mask_storeu_epi32(idx + count, used, _mm512_maskz_compress_epi32(nz, ids));
    _mm512_mask_storeu_ps(val + count, used, _mm512_maskz_compress_ps(nz, v));
    count += found;
  }
  return count;
}

// Two inputs' samples at once: the samples where x[b * stride] or x[b * stride + 1] is
// non-zero, with both values (one of them may be zero); returns their count.
inline unsigned compressNonzeroPair(const float *__restrict x, unsigned stride, unsigned batch,
                                    unsigned *__restrict idx, float *__restrict val0,
                                    float *__restrict val1) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i offsets = _mm512_mullo_epi32(lane, _mm512_set1_epi32(int(stride)));
  unsigned count = 0;
  for (unsigned b0 = 0; b0 < batch; b0 += 16) {
    const unsigned rest = batch - b0;
    const __mmask16 m = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1u);
    const float *xb = x + std::size_t(b0) * stride;
    const __m512 v0 = _mm512_mask_i32gather_ps(zero, m, offsets, xb, 4);
    const __m512 v1 = _mm512_mask_i32gather_ps(zero, m, offsets, xb + 1, 4);
    const __mmask16 nz = _mm512_mask_cmp_ps_mask(m, v0, zero, _CMP_NEQ_UQ) |
                         _mm512_mask_cmp_ps_mask(m, v1, zero, _CMP_NEQ_UQ);
    const unsigned found = unsigned(__builtin_popcount(nz));
    const __mmask16 used = __mmask16((1u << found) - 1u);
    const __m512i ids = _mm512_add_epi32(lane, _mm512_set1_epi32(int(b0)));
    _mm512_mask_storeu_epi32(idx + count, used, _mm512_maskz_compress_epi32(nz, ids));
    _mm512_mask_storeu_ps(val0 + count, used, _mm512_maskz_compress_ps(nz, v0));
    _mm512_mask_storeu_ps(val1 + count, used, _mm512_maskz_compress_ps(nz, v1));
    count += found;
  }
  return count;
}

// out0/out1[0..16 V) (+ a last vector masked to lastMask when MASKED) = sum over the listed
// rows of val0/val1[k] x row: each row's vectors are loaded once for both outputs (the
// rows come from L2: loads, not multiply-adds, bound the one-output kernel).
template <unsigned V, bool MASKED>
inline void sparseRowPairBlock(const unsigned *__restrict idx, const float *__restrict val0,
                               const float *__restrict val1, unsigned count,
                               const float *__restrict rows, unsigned rowStride,
                               float *__restrict out0, float *__restrict out1, __mmask16 lastMask) {
  constexpr unsigned W = V + (MASKED ? 1 : 0);
  __m512 acc0[W], acc1[W];
#pragma GCC unroll 9
  for (unsigned c = 0; c < W; ++c)
    acc0[c] = acc1[c] = _mm512_setzero_ps();
  for (unsigned k = 0; k < count; ++k) {
    prefetchRowBlock<W>(idx, k, count, rows, rowStride);
    const __m512 a = _mm512_set1_ps(val0[k]), b = _mm512_set1_ps(val1[k]);
    const float *__restrict row = rows + idx[k] * rowStride;
#pragma GCC unroll 9
    for (unsigned c = 0; c < W; ++c) {
      const __m512 r = MASKED && c == V ? _mm512_maskz_loadu_ps(lastMask, row + 16 * c)
                                        : _mm512_loadu_ps(row + 16 * c);
      acc0[c] = _mm512_fmadd_ps(a, r, acc0[c]);
      acc1[c] = _mm512_fmadd_ps(b, r, acc1[c]);
    }
  }
#pragma GCC unroll 9
  for (unsigned c = 0; c < W; ++c) {
    const __mmask16 m = MASKED && c == V ? lastMask : __mmask16(0xffff);
    _mm512_mask_storeu_ps(out0 + 16 * c, m, acc0[c]);
    _mm512_mask_storeu_ps(out1 + 16 * c, m, acc1[c]);
  }
}

// out0, out1[0..n) as sparseRowCombination, for two value lists over one list of rows.
inline void sparseRowPairCombination(const unsigned *__restrict idx, const float *__restrict val0,
                                     const float *__restrict val1, unsigned count,
                                     const float *__restrict rows, unsigned rowStride,
                                     float *__restrict out0, float *__restrict out1, unsigned n) {
  unsigned j = 0;
  for (; j + 128 <= n; j += 128)
    sparseRowPairBlock<8, false>(idx, val0, val1, count, rows + j, rowStride, out0 + j, out1 + j,
                                 __mmask16(0xffff));
  const unsigned rest = n - j;
  if (rest == 0)
    return;
  const __mmask16 mask = __mmask16((1u << (rest - (rest - 1) / 16 * 16)) - 1u);
  switch ((rest - 1) / 16) {
    // clang-format off: a case per macro line
#define POPSNN_BLOCK(V)                                                                    \
  case V:                                                                                  \
    sparseRowPairBlock<V, true>(idx, val0, val1, count, rows + j, rowStride, out0 + j,     \
                                out1 + j, mask);                                           \
    break;
    POPSNN_BLOCK(0) POPSNN_BLOCK(1) POPSNN_BLOCK(2) POPSNN_BLOCK(3)
    POPSNN_BLOCK(4) POPSNN_BLOCK(5) POPSNN_BLOCK(6) POPSNN_BLOCK(7)
#undef POPSNN_BLOCK
    // clang-format on
  }
}
#endif

// out[i, 0..n) = sum_b x[b, i] g[b, 0..n) over the samples where input i is non-zero, for
// the inputs i < numInputs of x (rows `stride` apart), g [batch, n]. The inputs are taken
// SPARSE_INPUT_GROUP at a time, so that x is read a cache line at a time; idx, val:
// [SPARSE_INPUT_GROUP * batch] scratch (each input's list of samples).
constexpr unsigned SPARSE_INPUT_GROUP = 16;
inline void sparseInputTransposedProduct(const float *__restrict x, unsigned stride, unsigned batch,
                                         unsigned numInputs, const float *__restrict g, unsigned n,
                                         unsigned *__restrict idx, float *__restrict val,
                                         float *__restrict out) {
#ifdef POPSNN_SPARSE_ROWS_AVX512
  // Two inputs at a time over the samples where either is non-zero (neighbouring pixels
  // are non-zero together), then a last one alone; the samples by gathers: consecutive
  // inputs read the same lines of x, from L1. val: [2 batch] scratch.
  unsigned i = 0;
  for (; i + 2 <= numInputs; i += 2) {
    const unsigned count = compressNonzeroPair(x + i, stride, batch, idx, val, val + batch);
    sparseRowPairCombination(idx, val, val + batch, count, g, n, out + std::size_t(i) * n,
                             out + std::size_t(i + 1) * n, n);
  }
  if (i < numInputs) {
    const unsigned count = compressNonzeroColumn(x + i, stride, batch, idx, val);
    sparseRowCombination(idx, val, count, g, n, out + std::size_t(i) * n, n);
  }
#else
  constexpr unsigned GROUP = SPARSE_INPUT_GROUP;
  for (unsigned i0 = 0; i0 < numInputs; i0 += GROUP) {
    const unsigned group = numInputs - i0 < GROUP ? numInputs - i0 : GROUP;
    unsigned count[GROUP] = {};
    // One input at a time, its count in a register (counts in an array, updated sample by
    // sample for every input, made each update wait on the last); the group's lines of x
    // stay in L1 over its inputs.
    for (unsigned c = 0; c < group; ++c) {
      unsigned found = 0;
      for (unsigned b = 0; b < batch; ++b) { // branch-free: zeros fall at random
        const float v = x[b * stride + i0 + c];
        idx[c * batch + found] = b;
        val[c * batch + found] = v;
        found += v != 0.0f;
      }
      count[c] = found;
    }
    for (unsigned c = 0; c < group; ++c)
      sparseRowCombination(&idx[c * batch], &val[c * batch], count[c], g, n, out + (i0 + c) * n, n);
  }
#endif
}

} // namespace lif
} // namespace popsnn
