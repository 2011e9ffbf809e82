// Row helpers over a stored type narrower than the arithmetic (half storage, docs/numerics.md
// section 8): values are read from storage, summed in float, and rounded once where they are
// stored again, the reference's rounding points. Templated on the stored type S (the
// codelets' `half`, or any type that converts to and from float), so the same loops serve
// the IPU build and the host's. Plain loops, and on x86 hosts with F16C eight conversions at a
// time (GCC converts a _Float16 one at a time otherwise; vcvtps2ph rounds to nearest even, as
// the scalar conversion does): the float32 vertices keep their vector kernels (SparseRows.hpp,
// DenseKernels.hpp); these carry the half path until it has its own.
#pragma once

#include <type_traits>

#if !defined(__IPU__) && !defined(POPSNN_PLAIN_LOOPS) && defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define POPSNN_F16C_ROWS 1
#endif

namespace popsnn {
namespace stored {

// A value rounded to the stored type S and back: where the reference stores it (its
// `store`). The neuron units take it as their `Store` (Neurons.hpp's Exact for float).
template <class S> struct RoundTo {
  static float round(float x) { return float(S(x)); }
};

#ifdef POPSNN_F16C_ROWS
// 8 halves at p as floats, and 8 floats as halves at p (round to nearest even).
inline __m256 loadHalf8(const void *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i *>(p)));
}
inline void storeHalf8(void *p, __m256 v) {
  _mm_storeu_si128(static_cast<__m128i *>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
#endif
// S is IEEE binary16 (the codelets' half): the F16C paths apply.
template <class S> constexpr bool isHalf() { return sizeof(S) == 2; }

// n values converted from src's type to dst's: a stored row read as float (exact), or a float
// row stored (rounded once). One loop for both directions; F16C's 8 lanes where one side is
// half and the other float.
template <class From, class To>
void convertRow(const From *__restrict src, To *__restrict dst, unsigned n) {
  unsigned j = 0;
#if defined(POPSNN_F16C_ROWS) && defined(__AVX512F__)
  // float to float: GCC makes the loop a memcpy call, whose dispatch cost more than the copy
  // of a narrow layer's row (a readout's 5 floats, per step and sample: 1.2% of the DSNN step).
  if constexpr (std::is_same<From, float>::value && std::is_same<To, float>::value) {
    for (; j + 16 <= n; j += 16)
      _mm512_storeu_ps(dst + j, _mm512_loadu_ps(src + j));
    if (j < n) {
      const __mmask16 rest = __mmask16((1u << (n - j)) - 1u);
      _mm512_mask_storeu_ps(dst + j, rest, _mm512_maskz_loadu_ps(rest, src + j));
    }
    return;
  }
#endif
#ifdef POPSNN_F16C_ROWS
  if constexpr (isHalf<From>() != isHalf<To>()) {
    for (; j + 8 <= n; j += 8) {
      if constexpr (isHalf<From>())
        _mm256_storeu_ps(dst + j, loadHalf8(src + j));
      else
        storeHalf8(dst + j, _mm256_loadu_ps(src + j));
    }
  }
#endif
  for (; j < n; ++j)
    dst[j] = To(src[j]);
}
template <class S> void loadRow(const S *__restrict src, float *__restrict dst, unsigned n) {
  convertRow(src, dst, n);
}
template <class S> void storeRow(const float *__restrict src, S *__restrict dst, unsigned n) {
  convertRow(src, dst, n);
}
// A stored row of n values as float: the row itself (float storage), or read into tmp.
template <class S> const float *asFloat(const S *row, float *__restrict tmp, unsigned n) {
  if constexpr (isHalf<S>()) {
    loadRow(row, tmp, n);
    return tmp;
  } else {
    return row;
  }
}
// A float row rounded in place to the values S holds.
template <class S> void roundRow(float *__restrict row, unsigned n) {
  unsigned j = 0;
#ifdef POPSNN_F16C_ROWS
  if constexpr (isHalf<S>())
    for (; j + 8 <= n; j += 8)
      _mm256_storeu_ps(row + j, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(row + j),
                                                                _MM_FROUND_TO_NEAREST_INT)));
#endif
  for (; j < n; ++j)
    row[j] = float(S(row[j]));
}

// Output columns summed at a time in a float block that stays in registers.
constexpr unsigned COLUMN_BLOCK = 16;

// acc[c] = sum_k val[k] w[idx[k], j0 + c] for the cols <= COLUMN_BLOCK columns from j0, in
// increasing k (a full block of halves 8 lanes at a time, multiply-adds fused where the
// scalar loop's are, -ffp-contract=fast with FMA).
template <class S>
void blockSum(const S *__restrict w, const unsigned *__restrict idx, const float *__restrict val,
              unsigned count, unsigned n, unsigned j0, unsigned cols, float *__restrict acc) {
#ifdef POPSNN_F16C_ROWS
  if constexpr (isHalf<S>())
    if (cols == COLUMN_BLOCK) {
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
      for (unsigned k = 0; k < count; ++k) {
        const S *__restrict row = &w[idx[k] * n + j0];
        const __m256 v = _mm256_set1_ps(val[k]);
#ifdef __FMA__
        a0 = _mm256_fmadd_ps(v, loadHalf8(row), a0);
        a1 = _mm256_fmadd_ps(v, loadHalf8(row + 8), a1);
#else
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(v, loadHalf8(row)));
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(v, loadHalf8(row + 8)));
#endif
      }
      _mm256_storeu_ps(acc, a0);
      _mm256_storeu_ps(acc + 8, a1);
      return;
    }
#endif
  for (unsigned k = 0; k < count; ++k) {
    const S *__restrict row = &w[idx[k] * n + j0];
    for (unsigned c = 0; c < cols; ++c)
      acc[c] += val[k] * float(row[c]);
  }
}

// out[b, j] = S(sum_i x[b, i] w[i, j] + bias[j]) for x [batch, nIn], w [nIn, n] (one row per
// input), bias [n], all stored as S; the sum in float over each sample's non-zero inputs in
// increasing i, the bias added last, one rounding to S. idx, val: [nIn] scratch (a sample's
// non-zero inputs).
template <class S>
void inputProduct(const S *__restrict x, unsigned batch, unsigned nIn, const S *__restrict w,
                  const S *__restrict bias, unsigned n, unsigned *__restrict idx,
                  float *__restrict val, S *__restrict out) {
  for (unsigned b = 0; b < batch; ++b) {
    unsigned count = 0;
    for (unsigned i = 0; i < nIn; ++i) {
      const float xi = float(x[b * nIn + i]);
      idx[count] = i;
      val[count] = xi;
      count += xi != 0.0f;
    }
    for (unsigned j0 = 0; j0 < n; j0 += COLUMN_BLOCK) {
      const unsigned cols = n - j0 < COLUMN_BLOCK ? n - j0 : COLUMN_BLOCK;
      float acc[COLUMN_BLOCK] = {};
      blockSum(w, idx, val, count, n, j0, cols, acc);
      for (unsigned c = 0; c < cols; ++c)
        out[b * n + j0 + c] = S(acc[c] + float(bias[j0 + c]));
    }
  }
}

// out[i, j] = sum_b x[b * stride + i] g[b, j] for i < numInputs (x stored as S, g and out in
// float: a weight gradient is a float32 sum, never stored in half); samples where x is zero
// are skipped, the others added in increasing b.
template <class S>
void inputTransposedProduct(const S *__restrict x, unsigned stride, unsigned batch,
                            unsigned numInputs, const float *__restrict g, unsigned n,
                            float *__restrict out) {
  for (unsigned i = 0; i < numInputs; ++i) {
    float *__restrict row = &out[i * n];
    for (unsigned j = 0; j < n; ++j)
      row[j] = 0.0f;
    for (unsigned b = 0; b < batch; ++b) {
      const float xb = float(x[b * stride + i]);
      if (xb == 0.0f)
        continue;
      const float *__restrict gb = &g[b * n];
      for (unsigned j = 0; j < n; ++j)
        row[j] += xb * gb[j];
    }
  }
}

} // namespace stored
} // namespace popsnn
