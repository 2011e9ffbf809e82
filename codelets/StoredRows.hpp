// Row helpers over a stored type narrower than the arithmetic (half storage, docs/numerics.md
// section 8): values are read from storage, summed in float, and rounded once where they are
// stored again, the reference's rounding points. Templated on the stored type S (the
// codelets' `half`, or any type that converts to and from float), so the same loops serve
// the IPU build and the host's. Plain loops: the float32 vertices keep their vector kernels
// (SparseRows.hpp, DenseKernels.hpp); these carry the half path until it has its own.
#pragma once

namespace popsnn {
namespace stored {

// A value rounded to the stored type S and back: where the reference stores it (its
// `store`). The neuron units take it as their `Store` (Neurons.hpp's Exact for float).
template <class S> struct RoundTo {
  static float round(float x) { return float(S(x)); }
};

// A row of n stored values read as float, and a float row stored (rounded once).
template <class S> void loadRow(const S *__restrict src, float *__restrict dst, unsigned n) {
  for (unsigned j = 0; j < n; ++j)
    dst[j] = float(src[j]);
}
template <class S> void storeRow(const float *__restrict src, S *__restrict dst, unsigned n) {
  for (unsigned j = 0; j < n; ++j)
    dst[j] = S(src[j]);
}
// A float row rounded in place to the values S holds.
template <class S> void roundRow(float *__restrict row, unsigned n) {
  for (unsigned j = 0; j < n; ++j)
    row[j] = float(S(row[j]));
}

// Output columns summed at a time in a float block that stays in registers.
constexpr unsigned COLUMN_BLOCK = 16;

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
      for (unsigned k = 0; k < count; ++k) {
        const S *__restrict row = &w[idx[k] * n + j0];
        for (unsigned c = 0; c < cols; ++c)
          acc[c] += val[k] * float(row[c]);
      }
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
