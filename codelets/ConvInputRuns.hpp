// The input gradient by window runs, ConvInputGrad's per-entry path when no column padding
// cuts a window (Conv.cpp): dL/dx is kept channels-last ([H, W, C_in]) so that a window's row
// (kW columns x C_in channels) is one contiguous run, and a position's non-zero dL/dI entries
// add their weights' matching rows (transposed to that order, zero-padded to whole vectors)
// onto it, with no col row and no scalar col2im. The padding adds zeros to the entries after
// a run (and past dL/dx's end into the run's padding). Inline functions only.
#pragma once

#include <cstddef>

#include "ConvPooling.hpp"

namespace popsnn {
namespace conv {

inline unsigned paddedRun(const Window &w) {
  using popsnn::dense::LANES;
  return (w.kernelWidth * w.inChannels + LANES - 1) / LANES * LANES;
}
// Work floats: the transposed weights [kH, c, paddedRun], then dL/dx channels-last and one
// run's padding.
inline unsigned windowRunsFloats(const Window &w, unsigned c) {
  return (c * w.kernelHeight + 1) * paddedRun(w) + w.inSize();
}

// wr [kH, c, paddedRun] = weights [c, C_in, kH, kW] as rows of (column, channel) runs, each
// kernel row's runs together (addListedRuns keeps one kernel row's in L1).
inline void weightRuns(const Window &w, unsigned c, const float *__restrict weights,
                       float *__restrict wr) {
  const unsigned kH = w.kernelHeight, kW = w.kernelWidth, cin = w.inChannels, R = paddedRun(w);
  for (unsigned co = 0; co < c; ++co)
    for (unsigned i = 0; i < kH; ++i) {
      float *__restrict run = wr + (i * c + co) * R;
      for (unsigned k = kW * cin; k < R; ++k)
        run[k] = 0.0f;
      for (unsigned j = 0; j < kW; ++j)
        for (unsigned ci = 0; ci < cin; ++ci)
          run[j * cin + ci] = weights[((co * cin + ci) * kH + i) * kW + j];
    }
}

// The run of dxT [H, W, C_in] that position p's kernel row i adds onto, or null when that
// row of its window is padding.
inline float *windowRun(const Window &w, unsigned p, unsigned i, float *dxT) {
  const unsigned y = (p / w.outWidth) * w.strideY + i - w.padY; // wraps when in the padding
  if (y >= w.inHeight)
    return nullptr;
  return dxT + (std::size_t(y) * w.inWidth + (p % w.outWidth) * w.strideX) * w.inChannels;
}

// dxT [H, W, C_in] += output position p's `count` non-zero entries (coef, channel idx)
// times their weight runs, one run per window row inside the map.
inline void addWindowRuns(const Window &w, unsigned c, unsigned p, unsigned count,
                          const float *__restrict coef, const unsigned *__restrict idx,
                          const float *__restrict wr, float *__restrict dxT) {
  const unsigned R = paddedRun(w);
  for (unsigned i = 0; i < w.kernelHeight; ++i)
    if (float *run = windowRun(w, p, i, dxT))
      combineRows<true>(R, count, coef, idx, wr + std::size_t(i) * c * R, R, run,
                        w.kernelWidth * w.inChannels);
}

// Every position's non-zero dL/dI entries of one row: count[p] entries from start[p] in coef
// (values) and chan (their weight runs' offsets in a kernel row's runs: channel x paddedRun,
// so that the multiply-add loops add an offset, with no multiply by the run per entry: the
// kernel took ~0.9x the samples in bench/conv_input_grad_speed.cpp).
struct PositionLists {
  const float *coef;
  const unsigned *chan, *start, *count;
};

// combineRows<true>(R, ..., keep) onto two runs at once (a, b: counts, coefficients, runs'
// offsets in rows):
// each run's sums in its own order (the same floats), the two runs' multiply-adds
// interleaved while both have entries. With R one block of 4 vectors (AVX-512's 64 floats,
// the CSNN's 60-float runs), one run's 4 sums wait on their last multiply-adds (4 cycles
// each, 2 a cycle possible): two runs' 8 keep both FMA units busy. The runs may overlap
// only in entries past `keep`, which each store rewrites as it finds them, so a is stored
// before b's lanes are loaded for its store (not restrict).
inline void addRunsPair(unsigned R, unsigned keep, const float *__restrict rows, unsigned na,
                        const float *__restrict ca, const unsigned *__restrict ia, float *a,
                        unsigned nb, const float *__restrict cb, const unsigned *__restrict ib,
                        float *b) {
  using popsnn::dense::Lanes;
  using popsnn::dense::LANES;
  using popsnn::dense::loadLanes;
  constexpr unsigned V = 64 / LANES;
  if (R != V * LANES) { // not one block: one run after the other
    combineRows<true>(R, na, ca, ia, rows, 1, a, keep);
    combineRows<true>(R, nb, cb, ib, rows, 1, b, keep);
    return;
  }
  Lanes sa[V], sb[V];
  for (unsigned v = 0; v < V; ++v)
    sa[v] = loadLanes(a + v * LANES), sb[v] = loadLanes(b + v * LANES);
  const unsigned both = std::min(na, nb);
  for (unsigned q = 0; q < both; ++q) {
    const float *__restrict ra = rows + ia[q];
    const float *__restrict rb = rows + ib[q];
    for (unsigned v = 0; v < V; ++v) {
      sa[v] = fusedAdd(sa[v], ca[q], loadLanes(ra + v * LANES));
      sb[v] = fusedAdd(sb[v], cb[q], loadLanes(rb + v * LANES));
    }
  }
  for (unsigned q = both; q < na; ++q)
    for (unsigned v = 0; v < V; ++v)
      sa[v] = fusedAdd(sa[v], ca[q], loadLanes(rows + ia[q] + v * LANES));
  for (unsigned q = both; q < nb; ++q)
    for (unsigned v = 0; v < V; ++v)
      sb[v] = fusedAdd(sb[v], cb[q], loadLanes(rows + ib[q] + v * LANES));
  const auto store = [&](float *out, const Lanes *sums) {
    for (unsigned v = 0; v < V; ++v) {
      const unsigned k = v * LANES;
      const Lanes x =
          k + LANES > keep ? keepBefore(sums[v], loadLanes(out + k), int(keep) - int(k)) : sums[v];
      popsnn::dense::storeLanes(out + k, x);
    }
  };
  store(a, sa);
  store(b, sb);
}

// addWindowRuns for every position of a row listed at once, kernel row by kernel row: one
// kernel row's runs (16 KB in the CSNN) stay in L1 while every position adds them, where
// position by position each position read all kH rows' runs (80 KB) from L2, one load per
// multiply-add, at L2's 32 bytes a cycle (bench/conv_input_grad_speed.cpp). Kernel rows last
// to first, so each dL/dx entry still takes its terms in position order: the same floats as
// addWindowRuns position by position. On AVX-512 hosts two output rows at once
// (addRunsPair): within one kernel row, output rows add onto different rows of dL/dx, so
// only a row's own positions need their order.
inline void addListedRuns(const Window &w, unsigned c, const PositionLists &l,
                          const float *__restrict wr, float *__restrict dxT) {
  const unsigned R = paddedRun(w), P = w.outPositions(), keep = w.kernelWidth * w.inChannels;
  const unsigned Wo = w.outWidth, pairs = popsnn::dense::LANES == 16 ? w.outHeight / 2 : 0u;
  const float *__restrict coef = l.coef;
  const unsigned *__restrict chan = l.chan, *__restrict start = l.start,
                             *__restrict count = l.count;
  const auto one = [&](const float *__restrict runs, unsigned i, unsigned p) {
    if (float *run = count[p] ? windowRun(w, p, i, dxT) : nullptr)
      combineRows<true>(R, count[p], coef + start[p], chan + start[p], runs, 1, run, keep);
  };
  for (unsigned i = w.kernelHeight; i-- > 0;) {
    const float *__restrict runs = wr + std::size_t(i) * c * R;
    for (unsigned pr = 0; pr < pairs; ++pr)
      for (unsigned p = 2 * pr * Wo; p < (2 * pr + 1) * Wo; ++p) {
        float *a = count[p] ? windowRun(w, p, i, dxT) : nullptr;
        float *b = count[p + Wo] ? windowRun(w, p + Wo, i, dxT) : nullptr;
        if (a && b)
          addRunsPair(R, keep, runs, count[p], coef + start[p], chan + start[p], a, count[p + Wo],
                      coef + start[p + Wo], chan + start[p + Wo], b);
        else
          one(runs, i, p), one(runs, i, p + Wo);
      }
    for (unsigned p = 2 * pairs * Wo; p < P; ++p)
      one(runs, i, p);
  }
}

// The channels k < c with a[k] == at and g[k] non-zero (NaN counts): g[k] into coef, k times
// `scale` into chan, in order (no branch per entry); returns their count. On AVX-512 hosts 16 at a
// time, compressed and stored masked (nothing past the count); on AVX2 hosts 8 at a time, packed by
// one permute and stored whole (up to 8 entries past the count).
inline unsigned channelsAt(unsigned c, const unsigned *__restrict a, unsigned at,
                           const float *__restrict g, unsigned scale, float *__restrict coef,
                           unsigned *__restrict chan) {
  unsigned n = 0, k = 0;
#ifdef POPSNN_SPARSE_ROWS_AVX512
  const __m512i want = _mm512_set1_epi32(int(at)), step = _mm512_set1_epi32(int(16 * scale));
  __m512i ids =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(int(scale)));
  for (; k + 16 <= c; k += 16) {
    const __m512 gv = _mm512_loadu_ps(g + k);
    const __mmask16 in =
        _mm512_mask_cmp_ps_mask(_mm512_cmpeq_epi32_mask(_mm512_loadu_si512(a + k), want), gv,
                                _mm512_setzero_ps(), _CMP_NEQ_UQ);
    lif::storeCompressed(coef + n, in, gv);
    n += lif::storeCompressed(chan + n, in, ids);
    ids = _mm512_add_epi32(ids, step);
  }
#elif defined(POPSNN_SPIKES_AVX2)
  const __m256i want = _mm256_set1_epi32(int(at)), eight = _mm256_set1_epi32(int(8 * scale));
  __m256i lane = _mm256_mullo_epi32(lif::firstLanes8(0), _mm256_set1_epi32(int(scale)));
  for (; k + 8 <= c; k += 8) {
    const __m256 gv = _mm256_loadu_ps(g + k);
    const __m256i ak = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(a + k));
    const __m256 in = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(ak, want)),
                                    _mm256_cmp_ps(gv, _mm256_setzero_ps(), _CMP_NEQ_UQ));
    const unsigned bits = unsigned(_mm256_movemask_ps(in));
    const __m256i order = lif::packedLaneOrder(bits);
    _mm256_storeu_ps(coef + n, _mm256_permutevar8x32_ps(gv, order));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(chan + n),
                        _mm256_permutevar8x32_epi32(lane, order));
    n += unsigned(__builtin_popcount(bits));
    lane = _mm256_add_epi32(lane, eight);
  }
#endif
  for (; k < c; ++k) {
    coef[n] = g[k], chan[n] = k * scale;
    n += a[k] == at && g[k] != 0.0f;
  }
  return n;
}

// With the 2 x 2 max pool folded (ChannelsLast), every position's non-zero dL/dI entries of
// one row listed from the pool's gradient [c, Q] and argmax: count[p] entries from start[p]
// in coef and chan, channels ascending (the entries pooledPositions gives). lists:
// pooledListsFloats (ConvPooling.hpp): coef and chan [(Q + 1) c + 8] each, then start and
// count [P]. The gradient and argmax are first transposed to [Q, c] into coef and chan from
// c + 8 on, so a window's channels are contiguous (compared 8 at a time); window q's lists
// end before (q + 1) c + 8, where its own transposed entries start, so nothing unread is
// overwritten.
inline PositionLists pooledLists(const Window &conv, unsigned c, const float *__restrict grad,
                                 const unsigned *__restrict argmax, float *__restrict lists) {
  const unsigned W = conv.outWidth, Wo = W / 2, Q = conv.outPositions() / 4;
  const std::size_t area = std::size_t(Q + 1) * c + 8;
  float *__restrict coef = lists;
  unsigned *__restrict chan = reinterpret_cast<unsigned *>(lists + area);
  unsigned *__restrict start = chan + area, *__restrict count = start + conv.outPositions();
  float *__restrict gT = coef + c + 8;
  unsigned *__restrict aT = chan + c + 8;
  transposeWords(c, Q, grad, gT);
  transposeWords(c, Q, reinterpret_cast<const float *>(argmax), reinterpret_cast<float *>(aT));
  unsigned used = 0;
  for (unsigned q = 0; q < Q; ++q)
    for (unsigned at = 0; at < 4; ++at) {
      const unsigned p = (2 * (q / Wo) + (at >> 1)) * W + 2 * (q % Wo) + (at & 1u);
      const unsigned n = channelsAt(c, aT + std::size_t(q) * c, at, gT + std::size_t(q) * c,
                                    paddedRun(conv), coef + used, chan + used);
      start[p] = used, count[p] = n, used += n;
    }
  return {coef, chan, start, count};
}

} // namespace conv
} // namespace popsnn
