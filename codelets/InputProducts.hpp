// The direct-current input layer's two sparse products (DirectCurrent's x.W, DirectWeightGrad's
// x^T.G) over the non-zero entries of x, by the row kernels of SparseRows.hpp; on AVX-512
// hosts a group of SPARSE_GROUP rows (samples, or inputs) at a time over the union of their
// non-zero entries, on AVX2 hosts a pair, so that each row of the other operand read from L2
// serves the group.
#pragma once

#include "../include/popsnn/VertexEnums.hpp"
#include "SparseRows.hpp"

namespace popsnn {
namespace lif {

// The weight gradient's scratch: idx and val of SPARSE_INPUT_GROUP * batch entries (its
// lists of samples; the current's scratch is given at sparseInputProduct).
constexpr unsigned SPARSE_INPUT_GROUP = 16;

// The positions k < count of x's non-zero entries (x[k * stride]) into idx, their values into
// val; returns how many. Branch-free: zeros fall at random.
inline unsigned listNonzero(const float *__restrict x, unsigned stride, unsigned count,
                            unsigned *__restrict idx, float *__restrict val) {
  unsigned found = 0;
  for (unsigned k = 0; k < count; ++k) {
    const float v = x[k * stride];
    idx[found] = k;
    val[found] = v;
    found += v != 0.0f;
  }
  return found;
}

#ifdef POPSNN_SPARSE_ROWS_AVX512
// R rows of `length` entries, 16 at a time (load(r, i0, m): entries i0.. of row r, lanes off
// m zero): the positions where any row is non-zero (NaN counts) as ids, in order, and each
// row's values at them into val + r * valStride (zeros included); returns their count, and
// the rows' own non-zero entries in `entries`. Compressed in registers (masked stores of the
// used lanes: nothing written past the count). The row and column forms below differ only
// in the load: contiguous, or a gather of x's column.
template <unsigned R, class Load>
inline unsigned compressNonzeroUnion(unsigned length, Load load, unsigned *__restrict idx,
                                     float *__restrict val, unsigned valStride, unsigned &entries) {
  const __m512 zero = _mm512_setzero_ps();
  unsigned count = 0;
  entries = 0;
  for (unsigned i0 = 0; i0 < length; i0 += 16) {
    const unsigned rest = length - i0;
    const __mmask16 m = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1u);
    __m512 v[R];
    __mmask16 nz = 0;
#pragma GCC unroll 4
    for (unsigned r = 0; r < R; ++r) {
      v[r] = load(r, i0, m);
      const __mmask16 own = _mm512_mask_cmp_ps_mask(m, v[r], zero, _CMP_NEQ_UQ);
      entries += unsigned(__builtin_popcount(own));
      nz |= own;
    }
    if (nz == 0) // images' borders: zero in every row of the group
      continue;
    const unsigned found = storeLaneIds(nz, i0, idx + count);
    const __mmask16 used = __mmask16((1u << found) - 1u);
#pragma GCC unroll 4
    for (unsigned r = 0; r < R; ++r)
      _mm512_mask_storeu_ps(val + std::size_t(r) * valStride + count, used,
                            _mm512_maskz_compress_ps(nz, v[r]));
    count += found;
  }
  return count;
}

// R samples' rows of x (nIn apart) at once: the inputs where any of them is non-zero, each
// sample's values at them into val + r * nIn (compressNonzeroUnion).
template <unsigned R>
inline unsigned compressNonzeroRows(const float *__restrict x, unsigned nIn,
                                    unsigned *__restrict idx, float *__restrict val,
                                    unsigned &entries) {
  auto load = [x, nIn](unsigned r, unsigned i0, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, x + std::size_t(r) * nIn + i0);
  };
  return compressNonzeroUnion<R>(nIn, load, idx, val, nIn, entries);
}

// R inputs at once, x[b * stride + r]: the samples b < batch where any is non-zero, each
// input's values into val + r * batch, 16 samples per gather (the scalar, branch-free loop
// cost ~3 cycles a sample and was half the weight gradient's time at MNIST's density).
template <unsigned R>
inline unsigned compressNonzeroColumns(const float *__restrict x, unsigned stride, unsigned batch,
                                       unsigned *__restrict idx, float *__restrict val,
                                       unsigned &entries) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i offsets = _mm512_mullo_epi32(lane, _mm512_set1_epi32(int(stride)));
  auto load = [x, stride, offsets](unsigned r, unsigned b0, __mmask16 m) {
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, offsets,
                                    x + std::size_t(b0) * stride + r, 4);
  };
  return compressNonzeroUnion<R>(batch, load, idx, val, batch, entries);
}

// One column's non-zero entries alone (the group form for R = 1).
inline unsigned compressNonzeroColumn(const float *__restrict x, unsigned stride, unsigned batch,
                                      unsigned *__restrict idx, float *__restrict val) {
  unsigned entries;
  return compressNonzeroColumns<1>(x, stride, batch, idx, val, entries);
}

// out + r * outStride, r < R: [0..16 V) (+ a last vector masked to lastMask when MASKED) =
// sum over the listed rows of (val + r * valStride)[k] x row, k in order: each row's vectors
// loaded once for the R outputs (R x (V + MASKED) accumulators: at most 24 registers).
template <unsigned R, unsigned V, bool MASKED>
inline void sparseRowGroupBlock(const unsigned *__restrict idx, const float *__restrict val,
                                unsigned valStride, unsigned count, const float *__restrict rows,
                                unsigned rowStride, float *__restrict out, unsigned outStride,
                                __mmask16 lastMask) {
  constexpr unsigned W = V + (MASKED ? 1 : 0);
  __m512 acc[R][W];
#pragma GCC unroll 4
  for (unsigned r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (unsigned c = 0; c < W; ++c)
      acc[r][c] = _mm512_setzero_ps();
  for (unsigned k = 0; k < count; ++k) {
    prefetchRowBlock<W>(idx, k, count, rows, rowStride);
    __m512 a[R];
#pragma GCC unroll 4
    for (unsigned r = 0; r < R; ++r)
      a[r] = _mm512_set1_ps(val[std::size_t(r) * valStride + k]);
    const float *__restrict row = rows + std::size_t(idx[k]) * rowStride;
#pragma GCC unroll 8
    for (unsigned c = 0; c < W; ++c) {
      __m512 w = MASKED && c == V ? _mm512_maskz_loadu_ps(lastMask, row + 16 * c)
                                  : _mm512_loadu_ps(row + 16 * c);
      keepInRegister(w); // one load for the R multiply-adds
#pragma GCC unroll 4
      for (unsigned r = 0; r < R; ++r)
        acc[r][c] = _mm512_fmadd_ps(a[r], w, acc[r][c]);
    }
  }
#pragma GCC unroll 4
  for (unsigned r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (unsigned c = 0; c < W; ++c)
      _mm512_mask_storeu_ps(out + std::size_t(r) * outStride + 16 * c,
                            MASKED && c == V ? lastMask : __mmask16(0xffff), acc[r][c]);
}

// A group of SPARSE_GROUP rows over the union of their non-zero entries, when the rows' own
// entries fill at least SPARSE_GROUP_MIN_FILL per cent of the group's union x SPARSE_GROUP
// multiply-adds (else row by row). The loads, not the multiply-adds, bound the row kernel,
// so the zero terms cost less than the loads shared: measured one DSNN shard's products
// (B 128, 784 inputs, 500 neurons, 1 thread, caches flushed between calls) on the bench's
// MNIST batch, where neighbouring images and pixels are non-zero together (fill 50% for
// x.W, 67% for x^T.G): x.W 0.67 -> 0.43-0.48 ms, x^T.G 0.53 -> 0.48 ms; on scattered random
// entries the group and the rows ran within 10% of each other at a fill of 29-39%.
// GROUP_COLUMNS columns per block: 4 x 6 accumulators.
// SPARSE_PRODUCT_COLUMNS: x.W's panels (sparseInputProduct).
constexpr unsigned ROW_GROUP = codes::SPARSE_GROUP;
constexpr unsigned GROUP_COLUMNS = 96, SPARSE_GROUP_MIN_FILL = 35, SPARSE_PRODUCT_COLUMNS = 192;

// out + r * outStride, r < ROW_GROUP: [0..cols) as sparseRowCombination of each row's values.
inline void sparseRowGroupCombination(const unsigned *__restrict idx, const float *__restrict val,
                                      unsigned valStride, unsigned count,
                                      const float *__restrict rows, unsigned rowStride,
                                      float *__restrict out, unsigned outStride, unsigned cols) {
  forColumnBlocks<GROUP_COLUMNS / 16>(cols, [&](auto v, auto masked, unsigned j, __mmask16 mask) {
    sparseRowGroupBlock<ROW_GROUP, decltype(v)::value, decltype(masked)::value>(
        idx, val, valStride, count, rows + j, rowStride, out + j, outStride, mask);
  });
}

#define POPSNN_ROW_GROUPS 1
#elif defined(POPSNN_FLOATS16) && defined(__AVX2__)
#define POPSNN_ROW_GROUPS 1
// AVX2: pairs of rows over the union of their non-zero entries (AVX-512's groups of four
// hold 4 x 3 accumulators + 4 broadcasts, more than AVX2's 16 ymm registers), where their own
// entries fill SPARSE_GROUP_MIN_FILL per cent of it: on the bench's MNIST batch (fill 66%) a
// threshold of 0-60 ran alike and 70 sent most pairs back to rows (0.96x); scattered random
// entries (fill 51-55% at densities 0.05-0.19) ran 0.87x of rows as pairs. x.W's panels of 512
// columns: one at a DSNN shard's 500, where panels of 192 ran as fast on MNIST but their lists,
// made again per panel, made scattered input 0.76-0.90x of main's rows
// (docs/performance/dsnn-engine.md).
constexpr unsigned ROW_GROUP = 2;
constexpr unsigned SPARSE_GROUP_MIN_FILL = 60, SPARSE_PRODUCT_COLUMNS = 512;

// As AVX-512's compressNonzeroRows: R samples' rows of x (nIn apart), the inputs where any is
// non-zero as ids, each row's values at them into val + r * nIn; returns their count, the
// rows' own non-zero entries (NaN counts) in `entries`. Whole vectors are stored: their
// lanes past the count lie before the row's end, so nothing is overwritten that counts.
template <unsigned R>
inline unsigned compressNonzeroRows(const float *__restrict x, unsigned nIn,
                                    unsigned *__restrict idx, float *__restrict val,
                                    unsigned &entries) {
  unsigned count = 0, i0 = 0;
  entries = 0;
  for (; i0 + 8 <= nIn; i0 += 8) {
    __m256 v[R];
    unsigned nz = 0;
#pragma GCC unroll 4
    for (unsigned r = 0; r < R; ++r) {
      v[r] = _mm256_loadu_ps(x + std::size_t(r) * nIn + i0);
      const unsigned own =
          unsigned(_mm256_movemask_ps(_mm256_cmp_ps(v[r], _mm256_setzero_ps(), _CMP_NEQ_UQ)));
      entries += unsigned(__builtin_popcount(own));
      nz |= own;
    }
    if (nz == 0) // images' borders: zero in every row
      continue;
    const __m256i ids = packedLaneOrder(nz); // AVX2 has no compress
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(idx + count),
                        _mm256_permutevar8x32_epi32(firstLanes8(i0), ids));
#pragma GCC unroll 4
    for (unsigned r = 0; r < R; ++r)
      _mm256_storeu_ps(val + std::size_t(r) * nIn + count, _mm256_permutevar8x32_ps(v[r], ids));
    count += unsigned(__builtin_popcount(nz));
  }
  for (; i0 < nIn; ++i0) { // the last, partial vector entry by entry (branch-free)
    unsigned any = 0;
    for (unsigned r = 0; r < R; ++r) {
      const float p = x[std::size_t(r) * nIn + i0];
      val[std::size_t(r) * nIn + count] = p;
      entries += p != 0.0f;
      any |= p != 0.0f;
    }
    idx[count] = i0;
    count += any;
  }
  return count;
}

// out and out + outStride: [0..cols) as sparseRowCombination of each row's values.
inline void sparseRowGroupCombination(const unsigned *__restrict idx, const float *__restrict val,
                                      unsigned valStride, unsigned count,
                                      const float *__restrict rows, unsigned rowStride,
                                      float *__restrict out, unsigned outStride, unsigned cols) {
  sparseRowPairSum(idx, val, val + valStride, count, rows, rowStride, out, out + outStride, cols);
}
#endif

#ifdef POPSNN_ROW_GROUPS
inline bool groupPays(unsigned entries, unsigned unionCount) {
  return 100ull * entries >= 1ull * SPARSE_GROUP_MIN_FILL * ROW_GROUP * unionCount;
}

// One row's non-zero entries alone (the group form for R = 1).
inline unsigned compressNonzero(const float *__restrict x, unsigned nIn, unsigned *__restrict idx,
                                float *__restrict val) {
  unsigned entries;
  return compressNonzeroRows<1>(x, nIn, idx, val, entries);
}

// Output rows r < numRows of out (outStride apart) = sum over a list of x's non-zero entries
// of value x a row of `rows`, cols columns: ROW_GROUP output rows at a time over the union
// of their lists when `grouped` and the group pays, else row by row. listUnion(r0, entries)
// lists the union of rows r0.. (the values valStride apart) and returns its count, the rows'
// own entries in `entries`; listOwn(r) lists row r's own entries and returns their count.
template <class ListUnion, class ListOwn>
inline void sparseRowsByGroups(unsigned numRows, bool grouped, ListUnion listUnion, ListOwn listOwn,
                               const unsigned *__restrict idx, const float *__restrict val,
                               unsigned valStride, const float *__restrict rows, unsigned rowStride,
                               float *__restrict out, unsigned outStride, unsigned cols) {
  constexpr unsigned R = ROW_GROUP;
  unsigned r0 = 0;
  for (; grouped && r0 + R <= numRows; r0 += R) {
    unsigned entries = 0;
    const unsigned count = listUnion(r0, entries);
    if (groupPays(entries, count)) {
      sparseRowGroupCombination(idx, val, valStride, count, rows, rowStride,
                                out + std::size_t(r0) * outStride, outStride, cols);
      continue;
    }
    for (unsigned r = r0; r < r0 + R; ++r)
      sparseRowCombination(idx, val, listOwn(r), rows, rowStride, out + std::size_t(r) * outStride,
                           cols);
  }
  for (; r0 < numRows; ++r0)
    sparseRowCombination(idx, val, listOwn(r0), rows, rowStride, out + std::size_t(r0) * outStride,
                         cols);
}

// out[b, 0..n) = sum_i x[b, i] w[i, 0..n) over the non-zero inputs (x [batch, nIn], w [nIn,
// n]), SPARSE_PRODUCT_COLUMNS columns of every sample at a time: that panel of w stays in
// L2 (AVX-512 hosts' 1 MiB) while the samples pass. The lists are made again per panel (a compare
// and a few compresses per vector of inputs). idx: [nIn], val: [nIn] scratch, or [SPARSE_GROUP *
// nIn] for `grouped` (groups of samples).
inline void sparseInputProduct(const float *__restrict x, unsigned batch, unsigned nIn,
                               const float *__restrict w, unsigned n, unsigned *__restrict idx,
                               float *__restrict val, float *__restrict out, bool grouped) {
  for (unsigned j0 = 0; j0 < n; j0 += SPARSE_PRODUCT_COLUMNS) {
    const unsigned cols = n - j0 < SPARSE_PRODUCT_COLUMNS ? n - j0 : SPARSE_PRODUCT_COLUMNS;
    sparseRowsByGroups(
        batch, grouped,
        [&](unsigned b, unsigned &entries) {
          return compressNonzeroRows<ROW_GROUP>(x + std::size_t(b) * nIn, nIn, idx, val, entries);
        },
        [&](unsigned b) { return compressNonzero(x + std::size_t(b) * nIn, nIn, idx, val); }, idx,
        val, nIn, w + j0, n, out + j0, n, cols);
  }
}
#else
// out[b, 0..n) = sum_i x[b, i] w[i, 0..n) over each sample's non-zero inputs (x [batch,
// nIn], w [nIn, n]): one sparse row combination per sample. idx, val: [nIn] scratch.
inline void sparseInputProduct(const float *__restrict x, unsigned batch, unsigned nIn,
                               const float *__restrict w, unsigned n, unsigned *__restrict idx,
                               float *__restrict val, float *__restrict out, bool = false) {
  for (unsigned b = 0; b < batch; ++b) {
    const unsigned count = listNonzero(x + b * nIn, 1, nIn, idx, val);
    sparseRowCombination(idx, val, count, w, n, out + b * n, n);
  }
}
#endif

// out[i, 0..n) = sum_b x[b, i] g[b, 0..n) over the samples where input i is non-zero, for
// the inputs i < numInputs of x (rows `stride` apart), g [batch, n]. idx, val:
// [SPARSE_INPUT_GROUP * batch] scratch (each input's list of samples).
inline void sparseInputTransposedProduct(const float *__restrict x, unsigned stride, unsigned batch,
                                         unsigned numInputs, const float *__restrict g, unsigned n,
                                         unsigned *__restrict idx, float *__restrict val,
                                         float *__restrict out) {
#ifdef POPSNN_SPARSE_ROWS_AVX512
  // ROW_GROUP inputs at a time over the samples where any is non-zero (neighbouring
  // pixels are non-zero together), the samples by gathers (consecutive inputs read the same
  // lines of x, from L1); the last inputs one by one.
  sparseRowsByGroups(
      numInputs, true,
      [&](unsigned i, unsigned &entries) {
        return compressNonzeroColumns<ROW_GROUP>(x + i, stride, batch, idx, val, entries);
      },
      [&](unsigned i) { return compressNonzeroColumn(x + i, stride, batch, idx, val); }, idx, val,
      batch, g, n, out, n, n);
#elif defined(POPSNN_FLOATS16)
  // Two inputs at a time over the samples where either is non-zero (neighbouring pixels are
  // non-zero together): each loaded row of g serves both inputs' sums, where one input at a
  // time was bound by the loads of g from L2 (1.13-1.19x on MNIST's x at B 128, n 500-1,000:
  // docs/performance/dsnn-engine.md). Consecutive pairs read the same lines of x, from L1.
  unsigned i = 0;
  for (; i + 2 <= numInputs; i += 2) {
    float *v0 = val, *v1 = val + batch;
    unsigned found = 0;
    for (unsigned b = 0; b < batch; ++b) { // branch-free: zeros fall at random
      const float p = x[b * stride + i], q = x[b * stride + i + 1];
      idx[found] = b;
      v0[found] = p;
      v1[found] = q;
      found += (p != 0.0f) | (q != 0.0f);
    }
    sparseRowPairSum(idx, v0, v1, found, g, n, out + std::size_t(i) * n,
                     out + std::size_t(i + 1) * n, n);
  }
  if (i < numInputs) { // the last, odd input alone
    const unsigned found = listNonzero(x + i, stride, batch, idx, val);
    sparseRowCombination(idx, val, found, g, n, out + std::size_t(i) * n, n);
  }
#else
  constexpr unsigned GROUP = SPARSE_INPUT_GROUP;
  for (unsigned i0 = 0; i0 < numInputs; i0 += GROUP) {
    const unsigned group = numInputs - i0 < GROUP ? numInputs - i0 : GROUP;
    unsigned count[GROUP] = {};
    // One input at a time, its count in a register (counts in an array, updated sample by
    // sample for every input, made each update wait on the last); the group's lines of x
    // stay in L1 over its inputs.
    for (unsigned c = 0; c < group; ++c)
      count[c] = listNonzero(x + i0 + c, stride, batch, &idx[c * batch], &val[c * batch]);
    for (unsigned c = 0; c < group; ++c)
      sparseRowCombination(&idx[c * batch], &val[c * batch], count[c], g, n, out + (i0 + c) * n, n);
  }
#endif
}

} // namespace lif
} // namespace popsnn
