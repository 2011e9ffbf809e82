// The sparse row kernels of the vertices: out = sum over listed rows of value x row, for
// the spike-id paths and the direct-current layer's products on sparse input (see
// DenseKernels.hpp for the dense ones), and the 16-float vector type they are written in.
// Inline functions only: no state.
#pragma once

#include <cstddef>
#include <type_traits>

#if !defined(__IPU__) && (defined(__AVX512F__) || defined(__SSE2__))
#include <immintrin.h>
#endif

#include "Lanes16.hpp" // forColumnBlocks

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
// The 16 lanes summed in _mm512_reduce_add_ps's tree (lane i + lane i + 8, then i + 4, then
// i + 2, then 0 + 1), so that every kind of host CPU gives the same bits; in turn, 16 adds
// waited on each other (perf: ~60% of dotPadded4 at a readout's P of 16).
inline float laneSum(const Floats16 &v) {
#if defined(__AVX__) || defined(__SSE2__)
#ifdef __AVX__
  const __m256 eight = _mm256_add_ps(v.part[0], v.part[1]);
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
#else
  const __m128 four =
      _mm_add_ps(_mm_add_ps(v.part[0], v.part[2]), _mm_add_ps(v.part[1], v.part[3]));
#endif
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
#else
  float l[16], four[4];
  __builtin_memcpy(l, &v, sizeof l);
  for (unsigned c = 0; c < 4; ++c)
    four[c] = (l[c] + l[c + 8]) + (l[c + 4] + l[c + 12]);
  return (four[0] + four[2]) + (four[1] + four[3]);
#endif
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
#ifndef __AVX512F__
inline void keepInRegister(Floats16 &v) { // part by part (on AVX-512 it is one register)
  for (NativeFloats &part : v.part)
    popsnn::keepInRegister(part);
}
#endif
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
// V vectors of 16 columns; out's block first read (`accumulate`) or taken as zero.
template <unsigned V, class Values>
inline void sparseRowBlock(const unsigned *__restrict idx, Values value, unsigned count,
                           const float *__restrict rows, unsigned rowStride, float *__restrict out,
                           bool accumulate) {
  Floats16 acc[V];
  for (unsigned c = 0; c < V; ++c)
    acc[c] = accumulate ? loadFloats16(out + 16 * c) : Floats16{};
  for (unsigned k = 0; k < count; ++k) {
    prefetchRowBlock<V>(idx, k, count, rows, rowStride);
    const float v = value(k);
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
template <unsigned V, class Values>
inline void sparseRowBlockMasked(const unsigned *__restrict idx, Values value, unsigned count,
                                 const float *__restrict rows, unsigned rowStride,
                                 float *__restrict out, bool accumulate, __mmask16 lastMask) {
  Floats16 acc[V + 1];
  for (unsigned c = 0; c < V; ++c)
    acc[c] = accumulate ? loadFloats16(out + 16 * c) : Floats16{};
  acc[V] = accumulate ? _mm512_maskz_loadu_ps(lastMask, out + 16 * V) : Floats16{};
  for (unsigned k = 0; k < count; ++k) {
    prefetchRowBlock<V + 1>(idx, k, count, rows, rowStride);
    const float v = value(k);
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

#ifdef POPSNN_SPARSE_ROWS_AVX512
// The lanes of v set in keep, packed in order and stored at out (masked: nothing written past
// them); returns their count. 32-bit words: ints, unsigneds or floats.
template <class Word> inline unsigned storeCompressed(Word *out, __mmask16 keep, __m512i v) {
  static_assert(sizeof(Word) == 4, "32-bit words");
  const unsigned found = unsigned(__builtin_popcount(keep));
  _mm512_mask_storeu_epi32(out, __mmask16((1u << found) - 1u),
                           _mm512_maskz_compress_epi32(keep, v));
  return found;
}
inline unsigned storeCompressed(float *out, __mmask16 keep, __m512 v) {
  return storeCompressed(out, keep, _mm512_castps_si512(v));
}

// The ids i0 + lane of the lanes set in nz, in order, stored at idx (masked: nothing written
// past them); returns their count. The one id compression of the non-zero listings (the
// convolution's nonzeroIndices, compressNonzeroUnion of InputProducts.hpp).
inline unsigned storeLaneIds(__mmask16 nz, unsigned i0, unsigned *__restrict idx) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return storeCompressed(idx, nz, _mm512_add_epi32(lane, _mm512_set1_epi32(int(i0))));
}
#endif

#if !defined(__IPU__) && !defined(POPSNN_PLAIN_LOOPS) && !defined(__AVX512F__) && defined(__AVX2__)
// AVX2 has no compress: for each 8-lane mask, the lanes of its set bits in order (a byte
// each), so one permute packs the listed ids (spikes, non-zero inputs) and one store writes
// them.
struct PackedLanes {
  unsigned long long of[256];
  constexpr PackedLanes() : of() {
    for (unsigned m = 0; m < 256; ++m) {
      unsigned k = 0;
      for (unsigned j = 0; j < 8; ++j)
        if (m >> j & 1u)
          of[m] |= static_cast<unsigned long long>(j) << (8 * k++);
    }
  }
};
inline constexpr PackedLanes PACKED_LANES{};

// The ids of 8 consecutive entries from `offset`, one per lane: a listing's first lanes.
inline __m256i firstLanes8(unsigned offset) {
  return _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                          _mm256_set1_epi32(int(offset)));
}

// The permutation that moves the set lanes of an 8-lane mask to the front, in order.
inline __m256i packedLaneOrder(unsigned bits) {
  return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(PACKED_LANES.of[bits])));
}
#endif

// A listed row's weight: the input's value, or 1 for a spike id (1 x r folds to r).
struct ListedValues {
  const float *__restrict val;
  float operator()(unsigned k) const { return val[k]; }
};
struct UnitValues {
  float operator()(unsigned) const { return 1.0f; }
};

// out[0..n) (+)= sum_k value(k) * rows[idx[k] * rowStride + (0..n)], k = 0..count in order,
// added to out's entries (`accumulate`) or to zero.
template <class Values>
inline void sparseRowSum(const unsigned *__restrict idx, Values value, unsigned count,
                         const float *__restrict rows, unsigned rowStride, float *__restrict out,
                         unsigned n, bool accumulate) {
#ifdef POPSNN_SPARSE_ROWS_AVX512
  forColumnBlocks<8>(n, [&](auto v, auto masked, unsigned j, __mmask16 mask) {
    constexpr unsigned V = decltype(v)::value;
    if constexpr (decltype(masked)::value)
      sparseRowBlockMasked<V>(idx, value, count, rows + j, rowStride, out + j, accumulate, mask);
    else
      sparseRowBlock<V>(idx, value, count, rows + j, rowStride, out + j, accumulate);
  });
#elif defined(POPSNN_FLOATS16)
  constexpr unsigned BLOCK = 16 * SPARSE_BLOCK_VECS;
  unsigned j = 0;
  for (; j + BLOCK <= n; j += BLOCK)
    sparseRowBlock<SPARSE_BLOCK_VECS>(idx, value, count, rows + j, rowStride, out + j, accumulate);
  // Whole vectors of the rest, then 0..15 columns one by one.
  switch ((n - j) / 16) {
    // clang-format off: a case per macro line
#define POPSNN_BLOCK(V)                                                                            \
  case V:                                                                                          \
    sparseRowBlock<V>(idx, value, count, rows + j, rowStride, out + j, accumulate);                \
    break;
    POPSNN_BLOCK(1)
    POPSNN_BLOCK(2) POPSNN_BLOCK(3) POPSNN_BLOCK(4) POPSNN_BLOCK(5) POPSNN_BLOCK(6) POPSNN_BLOCK(7)
#undef POPSNN_BLOCK
    default:
      break;
    // clang-format on
  }
  j += (n - j) / 16 * 16;
  for (unsigned c = j; c < n && !accumulate; ++c)
    out[c] = 0.0f;
  for (unsigned k = 0; k < count; ++k) {
    const float v = value(k);
    const float *__restrict row = rows + idx[k] * rowStride;
    for (unsigned c = j; c < n; ++c)
      out[c] += v * row[c];
  }
#else
  for (unsigned j = 0; j < n && !accumulate; ++j)
    out[j] = 0.0f;
  for (unsigned k = 0; k < count; ++k) {
    const float v = value(k);
    const float *__restrict row = rows + idx[k] * rowStride;
    for (unsigned j = 0; j < n; ++j)
      out[j] += v * row[j];
  }
#endif
}

#ifdef POPSNN_FLOATS16
// V vectors of 16 columns of two sums over one list: out0 (out1) = sum_k v0[k] (v1[k]) x row.
template <unsigned V>
inline void sparseRowPairBlock(const unsigned *__restrict idx, const float *__restrict v0,
                               const float *__restrict v1, unsigned count,
                               const float *__restrict rows, unsigned rowStride,
                               float *__restrict out0, float *__restrict out1) {
  Floats16 acc0[V], acc1[V];
  for (unsigned c = 0; c < V; ++c)
    acc0[c] = Floats16{}, acc1[c] = Floats16{};
  for (unsigned k = 0; k < count; ++k) {
    prefetchRowBlock<V>(idx, k, count, rows, rowStride);
    const float s0 = v0[k], s1 = v1[k];
    const float *__restrict row = rows + idx[k] * rowStride;
#pragma GCC unroll 8
    for (unsigned c = 0; c < V; ++c) {
      Floats16 r = loadFloats16(row + 16 * c);
      keepInRegister(r); // one load for both sums
      acc0[c] += s0 * r;
      acc1[c] += s1 * r;
    }
  }
  for (unsigned c = 0; c < V; ++c) {
    storeFloats16(out0 + 16 * c, acc0[c]);
    storeFloats16(out1 + 16 * c, acc1[c]);
  }
}

// Vectors of 16 columns per block of two sums: on AVX 2 x 3 x 2 accumulators, 12 of the 16
// ymm registers beside the two broadcasts and the loaded vector (SSE: 2 x 4 of 16 xmm).
constexpr unsigned SPARSE_PAIR_VECS = sizeof(NativeFloats) == 16 ? 1 : 3;

// Two rows of sums over one list, each as sparseRowSum's into zero (k in order per entry):
// out0[0..n) = sum_k v0[k] * rows[idx[k] * rowStride + (0..n)], out1 by v1. Each loaded block
// of a listed row serves both sums: half the loads per multiply-add of one row at a time.
// The rest after the whole blocks takes one block of as many vectors ending at column n: it
// overlaps the last block, whose columns it rewrites with the same sums (summed alike), where
// a scalar loop, or a block per vector, went over the list once more.
inline void sparseRowPairSum(const unsigned *__restrict idx, const float *__restrict v0,
                             const float *__restrict v1, unsigned count,
                             const float *__restrict rows, unsigned rowStride,
                             float *__restrict out0, float *__restrict out1, unsigned n) {
  constexpr unsigned V = SPARSE_PAIR_VECS;
  auto block = [&](auto vectors, unsigned j) {
    sparseRowPairBlock<decltype(vectors)::value>(idx, v0, v1, count, rows + j, rowStride, out0 + j,
                                                 out1 + j);
  };
  using One = std::integral_constant<unsigned, 1>;
  unsigned j = 0;
  for (; j + 16 * V <= n; j += 16 * V)
    block(std::integral_constant<unsigned, V>{}, j);
  if (j == n)
    return;
  if (j > 0) { // 1..V vectors ending at n
    const unsigned vectors = (n - j + 15) / 16;
    if (vectors == 1)
      block(One{}, n - 16);
    else if constexpr (V > 1) {
      if (vectors == 2)
        block(std::integral_constant<unsigned, 2>{}, n - 32);
      else
        block(std::integral_constant<unsigned, V>{}, n - 16 * V);
    }
    return;
  }
  for (; j + 16 <= n; j += 16) // n < 16 V: vector by vector, the last one ending at n
    block(One{}, j);
  if (n >= 16) {
    if (j < n)
      block(One{}, n - 16);
    return;
  }
  for (unsigned c = 0; c < n; ++c) // under one vector
    out0[c] = 0.0f, out1[c] = 0.0f;
  for (unsigned k = 0; k < count; ++k) {
    const float *__restrict row = rows + idx[k] * rowStride;
    for (unsigned c = 0; c < n; ++c) {
      out0[c] += v0[k] * row[c];
      out1[c] += v1[k] * row[c];
    }
  }
}
#endif

inline void sparseRowCombination(const unsigned *__restrict idx, const float *__restrict val,
                                 unsigned count, const float *__restrict rows, unsigned rowStride,
                                 float *__restrict out, unsigned n) {
  sparseRowSum(idx, ListedValues{val}, count, rows, rowStride, out, n, false);
}

} // namespace lif
} // namespace popsnn
