// The event-driven weight gradient of one row tap by tap (Conv.cpp's ConvWeightGrad,
// channels-last dL/dI): per kernel row of an input channel, its taps' rows of gwT held in
// registers while the channel's non-zero inputs add their terms, each row loaded and stored
// once a row of input instead of once a term (weightGradByPositions loads and stores a gwT
// row per term: the CSNN's [300, 64] gwT is 77 KB, past an L1, and the store after each
// multiply-add was where perf annotate put that kernel's samples). Inline functions only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "ConvKernels.hpp"

namespace popsnn {
namespace conv {

// One row's non-zero inputs (ascending ids) decoded for weightGradByTaps:
//   rowStart [C_in (H + 1)]: per input channel and input row y <= H, its first entry on row y
//     or later (the entries of one channel ascend by row, so those whose row reaches an
//     output row for kernel row i are one range of them);
//   val [n]: the entries' values;
//   rowOff [kH][n], colOff [kW][n]: per kernel row (column) and entry, the offset in dL/dI
//     [P, c] of the output row (column) it reaches, or `zero` (>= P c: c zeros there);
//   off [kW][n]: per kernel column of one kernel row (tapOffsets) and entry, their sum or
//     zero: a tap's offset (side by side per entry, [n][kW], ran 1.3x slower); the decoding's
//     input rows and columns before that.
struct TapLists {
  unsigned n; // the entries' stride: count padded to 16
  unsigned *rowStart, *rowOff, *colOff, *off;
  float *val;
};
inline unsigned tapListsStride(unsigned count) { return (count + 15) / 16 * 16; }
inline unsigned tapListsWords(const Window &w, unsigned count) {
  const unsigned n = tapListsStride(count), kW = w.kernelWidth;
  return w.inChannels * (w.inHeight + 1) + n * (1 + w.kernelHeight + kW + std::max(kW, 2u));
}

// n / d for n < 2^22 without a division instruction (a variable divisor's took ~25 cycles a
// spike): the float quotient is within one of it, then corrected either way.
inline unsigned quotient(unsigned n, unsigned d, float inverse) {
  unsigned q = unsigned(float(n) * inverse);
  q -= q * d > n;
  q += (q + 1) * d <= n;
  return q;
}

// out[q] = the offset (scale per output) of the output that input index in[q] (along one
// axis) reaches at kernel offset k, or zero: at stride 1 without a branch per entry
// (Window::outIndex's branches mispredict on spikes).
inline void axisOffsets(unsigned count, const unsigned *__restrict in, unsigned k, unsigned pad,
                        unsigned stride, unsigned n, unsigned scale, unsigned zero,
                        unsigned *__restrict out) {
  if (stride == 1) {
    for (unsigned q = 0; q < count; ++q) {
      const unsigned o = in[q] + pad - k; // wraps past n when negative
      out[q] = o < n ? o * scale : zero;
    }
    return;
  }
  for (unsigned q = 0; q < count; ++q) {
    const int o = Window::outIndex(in[q], k, pad, stride, n);
    out[q] = o < 0 ? zero : unsigned(o) * scale;
  }
}

// x's `count` non-zero entries idx (ascending) decoded into buf (tapListsWords). Returns false
// if one is not finite: an inf input times a zero row adds NaN, where the other kernels add
// no term at all.
inline bool tapLists(const Window &w, unsigned c, const float *__restrict xr,
                     const unsigned *__restrict idx, unsigned count, unsigned zero,
                     unsigned *__restrict buf, TapLists &l) {
  const unsigned H = w.inHeight, W = w.inWidth, HW = H * W, table = w.inChannels * (H + 1);
  l.n = tapListsStride(count);
  l.rowStart = buf;
  l.val = reinterpret_cast<float *>(buf + table);
  l.rowOff = buf + table + l.n, l.colOff = l.rowOff + w.kernelHeight * l.n;
  l.off = l.colOff + w.kernelWidth * l.n;
  unsigned *__restrict ys = l.off, *__restrict xs = l.off + l.n; // until the offsets
  for (unsigned k = 0; k < table; ++k)
    l.rowStart[k] = 0;
  const float perPlane = 1.0f / float(HW), perRow = 1.0f / float(W);
  bool finite = true;
  for (unsigned q = 0; q < count; ++q) {
    const unsigned ci = quotient(idx[q], HW, perPlane), rest = idx[q] - ci * HW;
    const unsigned y = quotient(rest, W, perRow);
    ys[q] = y, xs[q] = rest - y * W;
    l.rowStart[ci * (H + 1) + y + 1] = q + 1; // the last entry of a row writes its end
    l.val[q] = xr[idx[q]];
    finite &= std::isfinite(l.val[q]);
  }
  for (unsigned k = 1; k < table; ++k) // rows without entries start where the last ended
    l.rowStart[k] = std::max(l.rowStart[k], l.rowStart[k - 1]);
  for (unsigned i = 0; i < w.kernelHeight; ++i)
    axisOffsets(count, ys, i, w.padY, w.strideY, w.outHeight, w.outWidth * c, zero,
                l.rowOff + i * l.n);
  for (unsigned j = 0; j < w.kernelWidth; ++j)
    axisOffsets(count, xs, j, w.padX, w.strideX, w.outWidth, c, zero, l.colOff + j * l.n);
  return finite;
}

// l.off = kernel row i's taps' offsets per entry: both in reach, or zero (>= P c, as is
// either's sum with zero). Vector loops; a min and an add per term in the product's loop
// cost more.
inline void tapOffsets(const Window &w, unsigned count, unsigned zero, unsigned i,
                       const TapLists &l) {
  const unsigned kW = w.kernelWidth, *__restrict r = l.rowOff + i * l.n;
  for (unsigned j = 0; j < kW; ++j) {
    unsigned *__restrict o = l.off + j * l.n;
    const unsigned *__restrict cj = l.colOff + j * l.n;
    for (unsigned q = 0; q < count; ++q)
      o[q] = std::min(r[q] + cj[q], zero);
  }
}

// rows[t][0, V LANES) += each entry s in [s0, s1) times dL/dI (g) at its offset for tap t
// (off[t n + s]), for t < G: G V sums in registers, one load per multiply-add. Entries that reach
// no output read the zero row: +-0 added to a sum that is never -0 (its gwT row starts at +0),
// the same floats as no term.
template <unsigned G, unsigned V>
inline void addTapGroup(const float *__restrict val, unsigned s0, unsigned s1,
                        const unsigned *__restrict off, unsigned n, const float *__restrict g,
                        float *__restrict const *rows) {
  using popsnn::dense::Lanes;
  using popsnn::dense::LANES;
  using popsnn::dense::loadLanes;
  Lanes acc[G][V];
  for (unsigned t = 0; t < G; ++t)
    for (unsigned v = 0; v < V; ++v)
      acc[t][v] = loadLanes(rows[t] + v * LANES);
  for (unsigned s = s0; s < s1; ++s) {
    const float a = val[s];
    for (unsigned t = 0; t < G; ++t) {
      const float *__restrict p = g + off[t * n + s];
      for (unsigned v = 0; v < V; ++v)
        acc[t][v] = fusedAdd(acc[t][v], a, loadLanes(p + v * LANES));
    }
  }
  for (unsigned t = 0; t < G; ++t)
    for (unsigned v = 0; v < V; ++v)
      popsnn::dense::storeLanes(rows[t] + v * LANES, acc[t][v]);
}

// The same for one channel (rows[t][0]): the channels past the last whole vector.
template <unsigned G>
inline void addTapGroupScalar(const float *__restrict val, unsigned s0, unsigned s1,
                              const unsigned *__restrict off, unsigned n, const float *__restrict g,
                              float *__restrict const *rows) {
  float acc[G];
  for (unsigned t = 0; t < G; ++t)
    acc[t] = rows[t][0];
  for (unsigned s = s0; s < s1; ++s)
    for (unsigned t = 0; t < G; ++t)
      acc[t] = fusedAdd(acc[t], val[s], g[off[t * n + s]]);
  for (unsigned t = 0; t < G; ++t)
    rows[t][0] = acc[t];
}

#if defined(POPSNN_FUSED_ADD) && defined(__AVX512F__)
// The same for the channels past the last whole vector at once, lanes m of one vector (the
// CSNN's first convolution has 12 channels: one pass over the entries instead of 12, each
// lane's terms in addTapGroupScalar's order, the same floats).
template <unsigned G>
inline void addTapGroupMasked(__mmask16 m, const float *__restrict val, unsigned s0, unsigned s1,
                              const unsigned *__restrict off, unsigned n, const float *__restrict g,
                              float *__restrict const *rows) {
  __m512 acc[G];
  for (unsigned t = 0; t < G; ++t)
    acc[t] = _mm512_maskz_loadu_ps(m, rows[t]);
  for (unsigned s = s0; s < s1; ++s) {
    const __m512 a = _mm512_set1_ps(val[s]);
    for (unsigned t = 0; t < G; ++t)
      acc[t] = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m, g + off[t * n + s]), acc[t]);
  }
  for (unsigned t = 0; t < G; ++t)
    _mm512_mask_storeu_ps(rows[t], m, acc[t]);
}
#endif

// f(j0, std::integral_constant<unsigned, G>) with G = n (1 <= n <= N).
template <unsigned N, class F> inline void tapGroup(unsigned n, unsigned j0, F &&f) {
  if constexpr (N > 1)
    if (n != N)
      return tapGroup<N - 1>(n, j0, f);
  f(j0, std::integral_constant<unsigned, N>());
}
// f(j0, std::integral_constant<unsigned, G>) for kW kernel columns in groups of at most GMAX,
// as even as possible (7 at most 5: 4 + 3).
template <unsigned GMAX, class F> inline void tapGroups(unsigned kW, F &&f) {
  for (unsigned j = 0; j < kW;) {
    const unsigned left = kW - j, groups = (left + GMAX - 1) / GMAX;
    const unsigned n = (left + groups - 1) / groups;
    tapGroup<GMAX>(n, j, f);
    j += n;
  }
}

// f(s0, s1, off, G, rows) per input channel and group of kernel columns of kernel row i:
// the channel's entries [s0, s1) whose row reaches an output row, the group's offsets
// (tapOffsets) and gwT rows (from channel k0).
template <unsigned GMAX, class F>
inline void forTapGroups(const Window &w, unsigned c, const TapLists &l, unsigned i, float *gwT,
                         unsigned k0, F &&f) {
  const unsigned H = w.inHeight, kH = w.kernelHeight, kW = w.kernelWidth;
  const int y0 = int(i) - int(w.padY); // the first input row kernel row i reaches from
  const int span = int((w.outHeight - 1) * w.strideY + 1); // input rows that reach outputs
  const unsigned lo = unsigned(std::min(std::max(y0, 0), int(H)));
  const unsigned hi = unsigned(std::min(std::max(y0 + span, 0), int(H)));
  for (unsigned ci = 0; ci < w.inChannels; ++ci) {
    const unsigned s0 = l.rowStart[ci * (H + 1) + lo], s1 = l.rowStart[ci * (H + 1) + hi];
    if (s0 == s1)
      continue;
    float *tapRow = gwT + std::size_t((ci * kH + i) * kW + kW - 1) * c + k0; // column 0's
    tapGroups<GMAX>(kW, [&](unsigned j0, auto group) {
      constexpr unsigned G = decltype(group)::value;
      float *rows[G];
      for (unsigned t = 0; t < G; ++t)
        rows[t] = tapRow - std::size_t(j0 + t) * c;
      f(s0, s1, l.off + j0 * l.n, group, rows);
    });
  }
}

// gwT [taps (reversed), c] += each non-zero input times dL/dI (g [P, c], channels-last) of
// the outputs its taps reach, tap by tap: per kernel row, block of channels and input
// channel, G kernel columns' gwT rows in registers while the entries whose row reaches add their
// terms (no branch per term). Each tap's terms in the input's order, as weightGradByInputs and
// weightGradByPositions: the same floats. g + zero: c zeros, zero >= P c. buf:
// tapListsWords(count). Returns false, having added nothing, if an input is not finite or the
// input holds 2^22 values or more (the caller takes another kernel).
inline bool weightGradByTaps(const Window &w, unsigned c, const float *__restrict xr,
                             const unsigned *__restrict idx, unsigned count,
                             const float *__restrict g, unsigned zero, float *__restrict gwT,
                             unsigned *__restrict buf) {
  using popsnn::dense::LANES;
  constexpr unsigned BLOCK_VECS = LANES >= 8 ? 64 / LANES : 4, BLOCK = BLOCK_VECS * LANES;
  // Sums in registers: up to 20 of 32 on AVX-512 (a 5-wide kernel row at once: the entries'
  // loop and its exit paid once a kernel row), 8 of 16 on AVX2 and SSE (8 FMA latencies).
  constexpr unsigned GMAX = LANES >= 16 ? 5 : LANES == 8 ? 1 : 2;
  TapLists l;
  if (w.inSize() >= 1u << 22 || !tapLists(w, c, xr, idx, count, zero, buf, l))
    return false; // past quotient's range, or an input that is not finite
  const float *val = l.val;
  for (unsigned i = 0; i < w.kernelHeight; ++i) {
    tapOffsets(w, count, zero, i, l);
    unsigned k0 = 0;
    for (; k0 + BLOCK <= c; k0 += BLOCK)
      forTapGroups<GMAX>(
          w, c, l, i, gwT, k0, [&](unsigned s0, unsigned s1, auto offs, auto group, auto rows) {
            addTapGroup<decltype(group)::value, BLOCK_VECS>(val, s0, s1, offs, l.n, g + k0, rows);
          });
    for (; k0 + LANES <= c; k0 += LANES)
      forTapGroups<GMAX>(
          w, c, l, i, gwT, k0, [&](unsigned s0, unsigned s1, auto offs, auto group, auto rows) {
            addTapGroup<decltype(group)::value, 1>(val, s0, s1, offs, l.n, g + k0, rows);
          });
#if defined(POPSNN_FUSED_ADD) && defined(__AVX512F__)
    if (k0 < c) {
      const __mmask16 m = __mmask16((1u << (c - k0)) - 1u);
      forTapGroups<GMAX>(
          w, c, l, i, gwT, k0, [&](unsigned s0, unsigned s1, auto offs, auto group, auto rows) {
            addTapGroupMasked<decltype(group)::value>(m, val, s0, s1, offs, l.n, g + k0, rows);
          });
      k0 = c;
    }
#endif
    for (; k0 < c; ++k0)
      forTapGroups<GMAX>(
          w, c, l, i, gwT, k0, [&](unsigned s0, unsigned s1, auto offs, auto group, auto rows) {
            addTapGroupScalar<decltype(group)::value>(val, s0, s1, offs, l.n, g + k0, rows);
          });
  }
  return true;
}

} // namespace conv
} // namespace popsnn
