// The event-driven convolution and weight gradient of one row by output positions (Conv.cpp's
// ConvForward and ConvWeightGrad): per output row and position, the non-zero inputs its
// windows read listed, then per position its sums (forward) or its dL/dI entries (weight
// gradient) held in registers over them. Inline functions only.
#pragma once

#include <cstddef>

#include "ConvKernels.hpp"

namespace popsnn {
namespace conv {

// The entries k < n whose key[k] - lo < span (unsigned: lo <= key < lo + span), in order:
// a[k] + shift into outA, b[k] into outB and, given c, c[k] into outC; returns their count.
// Without a branch per entry (which are in is data). n a multiple of 8 (keys padded with
// ~0u, never in): on AVX-512 hosts 16 at a time, compressed in a register and stored masked
// (nothing past the count: the scalar loop, ~9 instructions an entry, was ~25% of the CSNN
// step's samples there); on AVX2 hosts 8 at a time, packed by one permute
// (lif::packedLaneOrder) and stored whole (past the count only where later entries overwrite
// them).
inline unsigned listWithin(unsigned n, const unsigned *__restrict key, unsigned lo, unsigned span,
                           const int *__restrict a, int shift, const unsigned *__restrict b,
                           const unsigned *__restrict c, int *__restrict outA,
                           unsigned *__restrict outB, unsigned *__restrict outC) {
  unsigned m = 0, k = 0;
#ifdef POPSNN_SPARSE_ROWS_AVX512
  const __m512i low = _mm512_set1_epi32(int(lo)), last = _mm512_set1_epi32(int(span - 1));
  const __m512i add = _mm512_set1_epi32(shift);
  for (; k < n; k += 16) {
    const __mmask16 valid = n - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - k)) - 1u);
    const __m512i d = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(valid, key + k), low);
    const __mmask16 in = _mm512_mask_cmple_epu32_mask(valid, d, last);
    const auto words = [&](const void *p) { return _mm512_maskz_loadu_epi32(valid, p); };
    lif::storeCompressed(outA + m, in, _mm512_add_epi32(words(a + k), add));
    lif::storeCompressed(outB + m, in, words(b + k));
    if (c)
      lif::storeCompressed(outC + m, in, words(c + k));
    m += unsigned(__builtin_popcount(in));
  }
#elif defined(POPSNN_SPIKES_AVX2)
  const __m256i low = _mm256_set1_epi32(int(lo)), last = _mm256_set1_epi32(int(span - 1));
  const __m256i add = _mm256_set1_epi32(shift);
  const auto load = [](const void *p) {
    return _mm256_loadu_si256(static_cast<const __m256i *>(p));
  };
  const auto store = [](void *p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i *>(p), v); };
  for (; k + 8 <= n; k += 8) {
    const __m256i d = _mm256_sub_epi32(load(key + k), low);
    const __m256i in = _mm256_cmpeq_epi32(_mm256_min_epu32(d, last), d);
    const unsigned bits = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(in)));
    const __m256i order = lif::packedLaneOrder(bits);
    store(outA + m, _mm256_permutevar8x32_epi32(_mm256_add_epi32(load(a + k), add), order));
    store(outB + m, _mm256_permutevar8x32_epi32(load(b + k), order));
    if (c)
      store(outC + m, _mm256_permutevar8x32_epi32(load(c + k), order));
    m += unsigned(__builtin_popcount(bits));
  }
#endif
  for (; k < n; ++k) {
    outA[m] = a[k] + shift, outB[m] = b[k];
    if (c)
      outC[m] = c[k];
    m += key[k] - lo < span;
  }
  return m;
}

// Each of windowEvents' 9 lists holds `count` entries padded to whole vectors of 8.
inline unsigned windowEventsStride(unsigned count) { return (count + 7) / 8 * 8; }
inline unsigned windowEventsWords(unsigned count) { return 9 * windowEventsStride(count); }

// f(p, m, tap, val) for each output position p of one input row, in position order: the m
// non-zero inputs in its window as their reversed taps (reversedTap) and values, in idx's
// order (the row's `count` non-zero entries ascending), so per output and per tap the terms
// come in the orders of the scatter (scatterRow, weightGradByInputs) and of gatherRow. Per
// output row, the entries in the input rows its windows read are listed first, then per
// position those in its columns. buf: windowEventsWords(count).
template <class F>
inline void windowEvents(const Window &w, const float *__restrict x, const unsigned *__restrict idx,
                         unsigned count, unsigned *__restrict buf, F &&f) {
  const unsigned kH = w.kernelHeight, kW = w.kernelWidth, H = w.inHeight, W = w.inWidth;
  const unsigned S = windowEventsStride(count);
  // Per entry: its padded input row and column, its reversed tap at output (0, 0), its value.
  unsigned *__restrict ys = buf, *__restrict xs = buf + S, *__restrict val = buf + 3 * S;
  int *__restrict tap0 = reinterpret_cast<int *>(buf + 2 * S);
  // One output row's entries (tap at the row's column 0, column, value), one position's.
  int *__restrict rowTap = reinterpret_cast<int *>(buf + 4 * S);
  unsigned *__restrict rowX = buf + 5 * S, *__restrict rowVal = buf + 6 * S;
  int *__restrict posTap = reinterpret_cast<int *>(buf + 7 * S);
  unsigned *__restrict posVal = buf + 8 * S;
  for (unsigned q = count; q < S; ++q) // padding: never in a window, read as 0 otherwise
    ys[q] = ~0u, xs[q] = val[q] = 0u, tap0[q] = 0;
  for (unsigned q = 0; q < count; ++q) {
    const unsigned ci = idx[q] / (H * W), rest = idx[q] - ci * H * W, y = rest / W;
    ys[q] = y + w.padY, xs[q] = rest - y * W + w.padX;
    tap0[q] = int(((ci * kH + ys[q]) * kW) + kW - 1) - int(xs[q]);
    __builtin_memcpy(val + q, x + idx[q], sizeof(float));
  }
  for (unsigned oy = 0; oy < w.outHeight; ++oy) {
    const unsigned y0 = oy * w.strideY;
    const unsigned n =
        listWithin(S, ys, y0, kH, tap0, -int(y0 * kW), xs, val, rowTap, rowX, rowVal);
    const unsigned n8 = windowEventsStride(n);
    for (unsigned k = n; k < n8; ++k)
      rowX[k] = ~0u;
    for (unsigned ox = 0; ox < w.outWidth; ++ox) {
      const unsigned x0 = ox * w.strideX;
      const unsigned m =
          listWithin(n8, rowX, x0, kW, rowTap, int(x0), rowVal, nullptr, posTap, posVal, nullptr);
      f(oy * w.outWidth + ox, m, reinterpret_cast<const unsigned *>(posTap),
        reinterpret_cast<const float *>(posVal));
    }
  }
}

// acc [positions, c] = the kernel taps (reversed, [taps, c]) of x's `count` non-zero entries
// idx (one input row), position by position: its window's tap rows combined into its c sums
// held in registers (combineRows: one load per multiply-add, the sums stored once; scatterRow
// loads and stores them for every entry, ~50% of its time on that store). The same floats
// as scatterRow and gatherRow. buf: windowEventsWords(count).
inline void windowEventsRow(const Window &w, const float *__restrict x,
                            const unsigned *__restrict idx, unsigned count,
                            const float *__restrict taps, unsigned c, float *__restrict acc,
                            unsigned *__restrict buf) {
  windowEvents(w, x, idx, count, buf,
               [&](unsigned p, unsigned m, const unsigned *tap, const float *val) {
                 combineRows(c, m, val, tap, taps, c, acc + std::size_t(p) * c);
               });
}

// gwT [taps (reversed), c] += each non-zero input times dL/dI [P, c] of the outputs its taps
// reach, position by position: the position's c entries of dL/dI held in registers while its
// window's taps' rows are updated (a load and a store per multiply-add; weightGradByInputs
// also loads dL/dI for each). The same floats as weightGradByInputs (each tap's terms in
// position order, which is the input's order). buf: windowEventsWords(count).
inline void weightGradByPositions(const Window &w, unsigned c, const float *__restrict xr,
                                  const unsigned *__restrict idx, unsigned count,
                                  const float *__restrict g, float *__restrict gwT,
                                  unsigned *__restrict buf) {
  using popsnn::dense::Lanes;
  using popsnn::dense::LANES;
  using popsnn::dense::loadLanes;
  constexpr unsigned BLOCK_VECS = LANES >= 8 ? 64 / LANES : 4, BLOCK = BLOCK_VECS * LANES;
  windowEvents(w, xr, idx, count, buf,
               [&](unsigned p, unsigned m, const unsigned *tap, const float *val) {
                 const float *__restrict gp = g + std::size_t(p) * c;
                 unsigned k0 = 0;
                 for (; k0 + BLOCK <= c; k0 += BLOCK) { // a block of dL/dI in registers
                   Lanes gv[BLOCK_VECS];
                   for (unsigned v = 0; v < BLOCK_VECS; ++v)
                     gv[v] = loadLanes(gp + k0 + v * LANES);
                   for (unsigned e = 0; e < m; ++e) {
                     float *__restrict r = gwT + std::size_t(tap[e]) * c + k0;
                     for (unsigned v = 0; v < BLOCK_VECS; ++v)
                       popsnn::dense::storeLanes(r + v * LANES,
                                                 fusedAdd(loadLanes(r + v * LANES), val[e], gv[v]));
                   }
                 }
                 for (; k0 + LANES <= c; k0 += LANES) { // whole vectors of the rest
                   const Lanes gv = loadLanes(gp + k0);
                   for (unsigned e = 0; e < m; ++e) {
                     float *__restrict r = gwT + std::size_t(tap[e]) * c + k0;
                     popsnn::dense::storeLanes(r, fusedAdd(loadLanes(r), val[e], gv));
                   }
                 }
                 for (; k0 < c; ++k0) // fewer than a vector
                   for (unsigned e = 0; e < m; ++e) {
                     float *__restrict r = gwT + std::size_t(tap[e]) * c + k0;
                     *r = fusedAdd(*r, val[e], gp[k0]);
                   }
               });
}

} // namespace conv
} // namespace popsnn
