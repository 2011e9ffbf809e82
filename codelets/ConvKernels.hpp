// The kernels of the convolution vertices (Conv.cpp): window geometry, the event-driven
// and gathered convolution of one row, im2col / col2im of one position, and the weight and
// input gradients' inner products. Inline functions only (no state, no allocation).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "DenseKernels.hpp"
#include "LifCommon.hpp"
#include "SparseRows.hpp"

namespace popsnn {
namespace conv {

// The window geometry every convolution vertex carries (as fields) and reads once.
struct Window {
  unsigned inChannels, inHeight, inWidth, kernelHeight, kernelWidth;
  unsigned strideY, strideX, padY, padX, outHeight, outWidth;
  unsigned inSize() const { return inChannels * inHeight * inWidth; }
  unsigned outPositions() const { return outHeight * outWidth; }
  unsigned taps() const { return inChannels * kernelHeight * kernelWidth; }
  // The output index along one axis that kernel offset k reads input index i into, or -1.
  static int outIndex(unsigned i, unsigned k, unsigned pad, unsigned stride, unsigned n) {
    const int shifted = int(i) + int(pad) - int(k);
    if (shifted < 0)
      return -1;
    if (stride == 1) // the common case, without an integer division per tap
      return shifted < int(n) ? shifted : -1;
    if (shifted % int(stride))
      return -1;
    const int o = shifted / int(stride);
    return o < int(n) ? o : -1;
  }
  // The input index along one axis that output o and kernel offset k read, or -1 (padding).
  static int inIndex(unsigned o, unsigned k, unsigned pad, unsigned stride, unsigned n) {
    const int i = int(o * stride + k) - int(pad);
    return i >= 0 && i < int(n) ? i : -1;
  }
};

// The kernel offsets [lo, hi) along one axis whose input index o * stride + k - pad falls
// inside [0, n): contiguous, so a window's row is one run of inputs.
struct TapRange {
  unsigned lo, hi;
  TapRange(unsigned o, unsigned kernel, unsigned pad, unsigned stride, unsigned n) {
    const int first = int(o * stride) - int(pad); // the input index of offset 0
    lo = first < 0 ? unsigned(-first) : 0u;
    const int room = int(n) - first;
    hi = room <= 0 ? 0u : std::min(kernel, unsigned(room));
    if (hi < lo)
      hi = lo;
  }
};

// The window of a vertex with the window fields below (inChannels .. outWidth).
template <class V> inline Window windowOf(const V &v) {
  return {v.inChannels, v.inHeight, v.inWidth, v.kernelHeight, v.kernelWidth, v.strideY,
          v.strideX,    v.padY,     v.padX,    v.outHeight,    v.outWidth};
}

// The positions of x's non-zero entries (NaN counts), in order, into idx (without a branch
// per entry: at spike densities which entries are zero is unpredictable); returns their
// count. On AVX-512 hosts 16 entries at a time, their ids compressed in a register and
// stored masked (nothing written past the count): the scalar loop, a load, compare, store
// and add per entry, was ~15% of ConvForward's and ConvWeightGrad's time on the CSNN's
// second convolution (perf annotate; its 1,728 inputs are 4% non-zero). On AVX2 hosts 8 at
// a time, their ids packed by one permute (lif::packedLaneOrder) and stored whole: the 8 stored
// entries end at idx + k + 8 <= idx + n, past the count only where later ids overwrite them.
inline unsigned nonzeroIndices(const float *__restrict x, unsigned n, unsigned *__restrict idx) {
  unsigned count = 0, k = 0;
#ifdef POPSNN_SPARSE_ROWS_AVX512
  const __m512 zero = _mm512_setzero_ps();
  for (; k + 16 <= n; k += 16) {
    const __mmask16 nz = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + k), zero, _CMP_NEQ_UQ);
    count += lif::storeLaneIds(nz, k, idx + count);
  }
#elif defined(POPSNN_SPIKES_AVX2)
  const __m256 zero = _mm256_setzero_ps();
  const __m256i eight = _mm256_set1_epi32(8);
  __m256i lane = lif::firstLanes8(0);
  for (; k + 8 <= n; k += 8) {
    const unsigned bits =
        unsigned(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + k), zero, _CMP_NEQ_UQ)));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(idx + count),
                        _mm256_permutevar8x32_epi32(lane, lif::packedLaneOrder(bits)));
    count += unsigned(__builtin_popcount(bits));
    lane = _mm256_add_epi32(lane, eight);
  }
#endif
  for (; k < n; ++k) {
    idx[count] = k;
    count += x[k] != 0.0f;
  }
  return count;
}

// The layouts of a row of dL/dI: Planar [c, P] (the maps' own), ChannelsLast [P, c] (what a
// 2 x 2 max pool's backward writes for the convolution's backward: a position's channels
// contiguous, so listing them and the products along the channels read no stride).
struct Planar {
  static constexpr bool CHANNELS_LAST = false;
  // Where position p's channel 0 is, and the steps between its channels and positions.
  static const float *channels(const float *gr, unsigned, unsigned, unsigned p) { return gr + p; }
  static unsigned channelStride(unsigned, unsigned P) { return P; }
  static unsigned positionStride(unsigned, unsigned) { return 1u; }
};
struct ChannelsLast {
  static constexpr bool CHANNELS_LAST = true;
  static const float *channels(const float *gr, unsigned c, unsigned, unsigned p) {
    return gr + std::size_t(p) * c;
  }
  static unsigned channelStride(unsigned, unsigned) { return 1u; }
  static unsigned positionStride(unsigned c, unsigned) { return c; }
};

// The c channels of one position of dL/dI (g, `stride` apart) that are non-zero: values into
// coef, channels into chan, in channel order (no branch per entry); returns their count.
inline unsigned nonzeroChannels(const float *__restrict g, unsigned stride, unsigned c,
                                float *__restrict coef, unsigned *__restrict chan) {
  unsigned count = 0;
  for (unsigned co = 0; co < c; ++co) {
    const float v = g[std::size_t(co) * stride];
    coef[count] = v, chan[count] = co;
    count += v != 0.0f;
  }
  return count;
}
template <class Layout>
inline unsigned nonzeroChannels(const float *__restrict gr, unsigned c, unsigned P, unsigned p,
                                float *__restrict coef, unsigned *__restrict chan) {
  return nonzeroChannels(Layout::channels(gr, c, P, p), Layout::channelStride(c, P), c, coef, chan);
}

// An input row's entry k as (channel, row, column).
struct InputAt {
  unsigned ci, y, x;
  InputAt(const Window &w, unsigned k)
      : ci(k / (w.inHeight * w.inWidth)), y(k / w.inWidth % w.inHeight), x(k % w.inWidth) {}
};

// The event-driven kernels keep the taps [taps, c] with each kernel row's columns reversed
// (tap (ci, i, kW - 1 - j)), so that one input entry's taps along a kernel row, which reach
// consecutive outputs at stride 1, are one contiguous run of rows on both sides.
inline unsigned reversedTap(const Window &w, unsigned ci, unsigned i, unsigned j) {
  return (ci * w.kernelHeight + i) * w.kernelWidth + (w.kernelWidth - 1 - j);
}
inline unsigned reversedTap(const Window &w, unsigned k) { // k = (ci * kH + i) * kW + j
  const unsigned j = k % w.kernelWidth;
  return k + w.kernelWidth - 1 - 2 * j;
}

// f(tap, p, n) for each kernel row of input entry k that reaches outputs: reversed taps tap ..
// tap + n - 1 reach output positions p .. p + n - 1 (n = 1 per tap at column stride > 1).
// The loop over one non-zero input's outputs, shared by the event-driven convolution and the
// input-driven weight gradient; each output gets one term per input entry either way, so
// the runs change no sum's order.
template <class F> inline void forEachRunReached(const Window &w, unsigned k, F &&f) {
  const unsigned kH = w.kernelHeight, kW = w.kernelWidth;
  const InputAt at(w, k);
  for (unsigned i = 0; i < kH; ++i) {
    const int oy = Window::outIndex(at.y, i, w.padY, w.strideY, w.outHeight);
    if (oy < 0)
      continue;
    const unsigned row = unsigned(oy) * w.outWidth;
    if (w.strideX == 1) { // output column sx - j for kernel column j
      const int sx = int(at.x) + int(w.padX);
      const int lo = std::max(0, sx - int(w.outWidth) + 1), hi = std::min(int(kW) - 1, sx);
      if (lo <= hi)
        f(reversedTap(w, at.ci, i, unsigned(hi)), row + unsigned(sx - hi), unsigned(hi - lo + 1));
      continue;
    }
    for (unsigned j = 0; j < kW; ++j) {
      const int ox = Window::outIndex(at.x, j, w.padX, w.strideX, w.outWidth);
      if (ox >= 0)
        f(reversedTap(w, at.ci, i, j), row + unsigned(ox), 1u);
    }
  }
}

// out[0, n) += g * row[0, n): contiguous, so it vectorises.
inline void axpy(unsigned n, float g, const float *__restrict row, float *__restrict out) {
  for (unsigned k = 0; k < n; ++k)
    out[k] += g * row[k];
}

// acc [positions, c] += the kernel taps (reversed, [taps, c]) of x's `count` non-zero entries
// idx (one input row), a kernel row's run of taps at a time.
inline void scatterRow(const Window &w, const float *__restrict x, const unsigned *__restrict idx,
                       unsigned count, const float *__restrict taps, unsigned c,
                       float *__restrict acc) {
  for (unsigned q = 0; q < count; ++q) {
    const float v = x[idx[q]];
    forEachRunReached(w, idx[q], [&](unsigned tap, unsigned p, unsigned n) {
      axpy(n * c, v, &taps[tap * c], &acc[p * c]);
    });
  }
}

// acc [positions, c] += every output position's window of the input (one input row); taps
// reversed as scatterRow's.
inline void gatherRow(const Window &w, const float *__restrict x, const float *__restrict taps,
                      unsigned c, float *__restrict acc) {
  const unsigned kH = w.kernelHeight, kW = w.kernelWidth;
  for (unsigned ci = 0; ci < w.inChannels; ++ci)
    for (unsigned i = 0; i < kH; ++i)
      for (unsigned j = 0; j < kW; ++j) {
        const float *__restrict k = &taps[reversedTap(w, ci, i, j) * c];
        for (unsigned oy = 0; oy < w.outHeight; ++oy) {
          const int y = Window::inIndex(oy, i, w.padY, w.strideY, w.inHeight);
          if (y < 0)
            continue;
          for (unsigned ox = 0; ox < w.outWidth; ++ox) {
            const int xx = Window::inIndex(ox, j, w.padX, w.strideX, w.inWidth);
            if (xx < 0)
              continue;
            const float v = x[(ci * w.inHeight + unsigned(y)) * w.inWidth + unsigned(xx)];
            float *__restrict out = &acc[(oy * w.outWidth + ox) * c];
            for (unsigned co = 0; co < c; ++co)
              out[co] += v * k[co];
          }
        }
      }
}

// The input window of output position p as one row of taps (im2col), zeros for padding.
inline void windowRow(const Window &w, const float *__restrict xr, unsigned p,
                      float *__restrict col) {
  const unsigned kH = w.kernelHeight, kW = w.kernelWidth;
  const unsigned oy = p / w.outWidth, ox = p % w.outWidth;
  const TapRange rowsIn(oy, kH, w.padY, w.strideY, w.inHeight);
  const TapRange colsIn(ox, kW, w.padX, w.strideX, w.inWidth);
  const int y0 = int(oy * w.strideY) - int(w.padY);
  const int x0 = int(ox * w.strideX) - int(w.padX);
  for (unsigned k = 0; k < w.taps(); ++k)
    col[k] = 0.0f;
  for (unsigned ci = 0; ci < w.inChannels; ++ci)
    for (unsigned i = rowsIn.lo; i < rowsIn.hi; ++i) {
      const float *__restrict xrow = &xr[(ci * w.inHeight + unsigned(y0 + int(i))) * w.inWidth];
      float *__restrict out = &col[(ci * kH + i) * kW];
      for (unsigned j = colsIn.lo; j < colsIn.hi; ++j)
        out[j] = xrow[x0 + int(j)];
    }
}

// dx += the rows of col [n positions from p0, taps] put back on their windows (col2im).
inline void addWindows(const Window &w, const float *__restrict col, unsigned p0, unsigned n,
                       float *__restrict dx) {
  const unsigned kH = w.kernelHeight, kW = w.kernelWidth, taps = w.taps();
  for (unsigned q = 0; q < n; ++q) {
    const unsigned p = p0 + q, oy = p / w.outWidth, ox = p % w.outWidth;
    const TapRange rowsIn(oy, kH, w.padY, w.strideY, w.inHeight);
    const TapRange colsIn(ox, kW, w.padX, w.strideX, w.inWidth);
    const int y0 = int(oy * w.strideY) - int(w.padY);
    const int x0 = int(ox * w.strideX) - int(w.padX);
    for (unsigned ci = 0; ci < w.inChannels; ++ci)
      for (unsigned i = rowsIn.lo; i < rowsIn.hi; ++i) {
        float *__restrict d = &dx[(ci * w.inHeight + unsigned(y0 + int(i))) * w.inWidth];
        const float *__restrict cr = &col[q * taps + (ci * kH + i) * kW];
        for (unsigned j = colsIn.lo; j < colsIn.hi; ++j)
          d[x0 + int(j)] += cr[j];
      }
  }
}

// v with its lanes from `first` on taken from old (lanes before it kept): a vector store
// that must not change the entries past a run (a padded weight's 0 times an inf
// coefficient is NaN).
inline popsnn::dense::Lanes keepBefore(popsnn::dense::Lanes v, popsnn::dense::Lanes old,
                                       int first) {
  using popsnn::dense::LANES;
  typedef int Ints __attribute__((vector_size(4 * LANES)));
  Ints lane;
  for (unsigned l = 0; l < LANES; ++l)
    lane[l] = int(l);
  return lane < first ? v : old;
}

// transposeWords' 8 x 8 blocks need only AVX2's shuffles, so AVX-512 hosts take them too
// (POPSNN_SPIKES_AVX2 is AVX2-only hosts').
#if !defined(__IPU__) && !defined(POPSNN_PLAIN_LOOPS) && defined(__AVX2__)
#define POPSNN_CONV_BLOCKS_AVX2 1
#endif
#ifdef POPSNN_CONV_BLOCKS_AVX2
// transposeWords' 8 x 8 block: dst[j * ldd + i] = src[i * lds + j] for i, j < 8.
inline void transposeWords8(const float *__restrict src, unsigned lds, float *__restrict dst,
                            unsigned ldd) {
  __m256 r[8], t[8];
  for (unsigned i = 0; i < 8; ++i)
    r[i] = _mm256_loadu_ps(src + std::size_t(i) * lds);
  for (unsigned i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (unsigned i = 0; i < 8; i += 4) { // rows i .. i + 3, columns (0, 4), (1, 5), ...
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (unsigned j = 0; j < 4; ++j) {
    _mm256_storeu_ps(dst + std::size_t(j) * ldd, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
    _mm256_storeu_ps(dst + std::size_t(j + 4) * ldd, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
  }
}
#endif
// dst [c, Q] = src [Q, c] (32-bit words, moved as they are: floats, or argmax indices). On AVX2
// and AVX-512 hosts 8 x 8 blocks through registers: the scalar loop's 2 x Q x c loads and
// stores were ~15% of the event-driven ConvForward on the CSNN's second convolution (perf,
// bench/conv_forward_speed.cpp).
inline void transposeWords(unsigned Q, unsigned c, const float *__restrict src,
                           float *__restrict dst) {
  unsigned q0 = 0;
#ifdef POPSNN_CONV_BLOCKS_AVX2
  for (; q0 + 8 <= Q; q0 += 8)
    for (unsigned co = 0; co + 8 <= c; co += 8)
      transposeWords8(src + std::size_t(q0) * c + co, c, dst + std::size_t(co) * Q + q0, Q);
  const unsigned vectors = c / 8 * 8; // the rest of the channels below, for these rows
  for (unsigned co = vectors; co < c; ++co)
    for (unsigned q = 0; q < q0; ++q)
      dst[co * Q + q] = src[q * c + co];
#endif
  for (unsigned co = 0; co < c; ++co)
    for (unsigned q = q0; q < Q; ++q)
      dst[co * Q + q] = src[q * c + co];
}

// acc + a * b, fused wherever the target has FMA (not in the plain loops, the IPU build's):
// what the other kernels' loops are contracted to. GCC's Zen tuning (-march=native on this
// machine) splits a multiply-add whose sum a loop carries in a register (combineRows' rest of
// fewer than 64 floats) into a multiply and an add, which round differently; this keeps every
// path's sums the same floats. The vector and the scalar form follow the one guard.
#if defined(__FMA__) && !defined(__IPU__) && !defined(POPSNN_PLAIN_LOOPS)
#define POPSNN_FUSED_ADD 1
#endif
inline popsnn::dense::Lanes fusedAdd(popsnn::dense::Lanes acc, float a, popsnn::dense::Lanes b) {
#if defined(POPSNN_FUSED_ADD) && defined(__AVX512F__)
  return _mm512_fmadd_ps(_mm512_set1_ps(a), b, acc);
#elif defined(POPSNN_FUSED_ADD) && defined(__AVX2__)
  return _mm256_fmadd_ps(_mm256_set1_ps(a), b, acc);
#else
  return acc + a * b;
#endif
}
inline float fusedAdd(float acc, float a, float b) {
#ifdef POPSNN_FUSED_ADD
  return __builtin_fmaf(a, b, acc);
#else
  return acc + a * b;
#endif
}

// out[0, n) = sum_k coef[k] * rows[idx[k] * ld + (0, n)] (ADD: out +=): a few rows of a
// matrix combined, a block of 64 floats of out held in registers while every row streams
// past (one load per multiply-add; an axpy per row would also load and store out each
// time). On AVX2 that is 8 accumulators: with 4, each row's multiply-adds waited on the
// last row's (the CSNN step took 1.03x the CPU time; docs/performance/csnn.md). With ADD, out's
// entries from `keep` on (rows zero-padded past a run) are left as they were.
template <bool ADD = false>
inline void combineRows(unsigned n, unsigned count, const float *__restrict coef,
                        const unsigned *__restrict idx, const float *__restrict rows, unsigned ld,
                        float *__restrict out, unsigned keep = ~0u) {
  using popsnn::dense::Lanes;
  using popsnn::dense::LANES;
  using popsnn::dense::loadLanes;
  constexpr unsigned BLOCK_VECS = LANES >= 8 ? 64 / LANES : 4, BLOCK = BLOCK_VECS * LANES;
  // Stores one vector at k, its lanes past `keep` as they were.
  auto store = [&](unsigned k, Lanes v) {
    if (ADD && k + LANES > keep)
      v = keepBefore(v, loadLanes(out + k), int(keep) - int(k));
    popsnn::dense::storeLanes(out + k, v);
  };
  unsigned k0 = 0;
  for (; k0 + BLOCK <= n; k0 += BLOCK) {
    Lanes acc[BLOCK_VECS];
    for (unsigned v = 0; v < BLOCK_VECS; ++v)
      acc[v] = ADD ? loadLanes(out + k0 + v * LANES) : Lanes{};
    for (unsigned q = 0; q < count; ++q) {
      const float *__restrict r = rows + std::size_t(idx[q]) * ld + k0;
      for (unsigned v = 0; v < BLOCK_VECS; ++v)
        acc[v] = fusedAdd(acc[v], coef[q], loadLanes(r + v * LANES));
    }
    for (unsigned v = 0; v < BLOCK_VECS; ++v)
      store(k0 + v * LANES, acc[v]);
  }
  for (; k0 + LANES <= n; k0 += LANES) { // whole vectors of the rest
    Lanes acc = ADD ? loadLanes(out + k0) : Lanes{};
    for (unsigned q = 0; q < count; ++q)
      acc = fusedAdd(acc, coef[q], loadLanes(rows + std::size_t(idx[q]) * ld + k0));
    store(k0, acc);
  }
  const unsigned end = ADD ? std::min(n, keep) : n;
#if defined(POPSNN_FUSED_ADD) && defined(__AVX512F__)
  // Fewer than a vector (the CSNN's first convolution has 12 channels, its readout 10) in
  // one masked vector, each lane's sum in the loop's order below (the same floats): that
  // loop's load, multiply-add and store per float were ~14% of the event-driven forward.
  if (k0 < end) {
    const __mmask16 m = __mmask16((1u << (end - k0)) - 1u);
    __m512 acc = ADD ? _mm512_maskz_loadu_ps(m, out + k0) : _mm512_setzero_ps();
    for (unsigned q = 0; q < count; ++q)
      acc = _mm512_fmadd_ps(_mm512_set1_ps(coef[q]),
                            _mm512_maskz_loadu_ps(m, rows + std::size_t(idx[q]) * ld + k0), acc);
    _mm512_mask_storeu_ps(out + k0, m, acc);
  }
  return;
#endif
  for (unsigned k = k0; k < end; ++k) // fewer than a vector: row by row, no gathers
    out[k] = ADD ? out[k] : 0.0f;
  for (unsigned q = 0; q < count; ++q)
    for (unsigned k = k0; k < end; ++k)
      out[k] = fusedAdd(out[k], coef[q], rows[std::size_t(idx[q]) * ld + k]);
}

// gw [c, taps] += each non-zero dL/dI entry times its window of the input: per output
// position, its non-zero entries listed (coef, chan; without a branch per entry: which are
// zero is data), then, if any, its window as one row (windowRow) and per entry either one
// contiguous multiply-add of that row or, when the window holds few non-zero inputs (spikes:
// ~12 of the CSNN's 300 taps), those alone (listed into tapIds, `taps` entries, or null:
// always the row). A rule's sparse rows take this path: over the whole row they ran at
// ~1 GMAC per CPU second, most of the multiply-adds by zero inputs. Zero inputs add +-0
// either way (the same floats; an inf entry times a zero input is skipped, as by inputs).
// One position's part of the above: its `count` entries (coef, chan) times its window.
inline void gradientProducts(const Window &w, const float *__restrict xr, unsigned p,
                             unsigned count, const float *__restrict coef,
                             const unsigned *__restrict chan, float *__restrict col,
                             float *__restrict gradW, unsigned *__restrict tapIds) {
  const unsigned taps = w.taps();
  windowRow(w, xr, p, col);
  const unsigned nx = tapIds ? nonzeroIndices(col, taps, tapIds) : taps;
  if (8 * nx > taps) { // a vector multiply-add of 16 taps costs ~2 indexed ones
    for (unsigned q = 0; q < count; ++q)
      axpy(taps, coef[q], col, &gradW[chan[q] * taps]);
    return;
  }
  for (unsigned q = 0; q < count; ++q) {
    float *__restrict g = &gradW[chan[q] * taps];
    const float v = coef[q];
    for (unsigned k = 0; k < nx; ++k)
      g[tapIds[k]] += v * col[tapIds[k]];
  }
}

// A row's non-zero inputs (ids, count) decoded once into channel, row and column (3 x count
// unsigned at buf; then 2 x count for one window's list), so that a window's non-zero taps
// are found among them (count checks, no branch per entry) instead of copying the window's
// inputs (windowRow: a scalar loop, ~25% of ConvWeightGrad under a rule). In tap order
// (the ids ascend), so the products add in gradientProducts' order.
struct SpikeTaps {
  const float *xr = nullptr;
  const unsigned *idx = nullptr;
  unsigned count = 0;
  unsigned *ch = nullptr, *yy = nullptr, *xx = nullptr, *tap = nullptr;
  float *val = nullptr;
  SpikeTaps() = default;
  SpikeTaps(const Window &w, const float *x, const unsigned *ids, unsigned n, unsigned *buf)
      : xr(x), idx(ids), count(n), ch(buf), yy(buf + n), xx(buf + 2 * n), tap(buf + 3 * n),
        val(reinterpret_cast<float *>(buf + 4 * n)) {
    const unsigned HW = w.inHeight * w.inWidth;
    for (unsigned q = 0; q < n; ++q) {
      const unsigned c = ids[q] / HW, rest = ids[q] - c * HW, y = rest / w.inWidth;
      ch[q] = c, yy[q] = y, xx[q] = rest - y * w.inWidth;
    }
  }
  // gradW [c, taps] += each of position p's entries (coef, chan) times its window's spikes.
  void products(const Window &w, unsigned p, unsigned n, const float *__restrict coef,
                const unsigned *__restrict chan, float *__restrict gradW) const {
    const unsigned kH = w.kernelHeight, kW = w.kernelWidth, taps = w.taps();
    const int y0 = int((p / w.outWidth) * w.strideY) - int(w.padY);
    const int x0 = int((p % w.outWidth) * w.strideX) - int(w.padX);
    unsigned nx = 0;
    for (unsigned q = 0; q < count; ++q) {
      const unsigned dy = unsigned(int(yy[q]) - y0), dx = unsigned(int(xx[q]) - x0);
      tap[nx] = (ch[q] * kH + dy) * kW + dx;
      val[nx] = xr[idx[q]];
      nx += dy < kH && dx < kW;
    }
    for (unsigned e = 0; e < n; ++e) {
      float *__restrict g = &gradW[chan[e] * taps];
      const float v = coef[e];
      for (unsigned k = 0; k < nx; ++k)
        g[tap[k]] += v * val[k];
    }
  }
};

template <class Layout>
inline void weightGradByGradients(const Window &w, unsigned c, const float *__restrict xr,
                                  const float *__restrict gr, float *__restrict col,
                                  float *__restrict coef, unsigned *__restrict chan,
                                  float *__restrict gradW, unsigned *__restrict tapIds) {
  const unsigned P = w.outPositions();
  for (unsigned p = 0; p < P; ++p) {
    const unsigned count = nonzeroChannels<Layout>(gr, c, P, p, coef, chan);
    if (count)
      gradientProducts(w, xr, p, count, coef, chan, col, gradW, tapIds);
  }
}

// ConvWeightGrad's cost of a product by gradients relative to one by inputs. On the CSNN's
// second convolution under a window rule (perf, bench/csnn_steps.py 10 128 window:0.5;
// docs/convolution.md) rows by gradients ran at about 0.22 ns a product, rows by inputs
// at 0.15 with their overheads; with 1 the rule's sparse rows took the slower path and the
// weight gradient cost twice the dense one's, with 2 less than it.
constexpr std::uint64_t GRADIENT_PRODUCT_COST = 2;

// gwT [taps (reversed), c] += each non-zero input times dL/dI of the outputs its taps reach, with
// dL/dI as [P, c] (planar dL/dI transposed into gT first; channels-last read as it is), so
// every product runs along the c channels.
template <class Layout>
inline void weightGradByInputs(const Window &w, unsigned c, const float *__restrict xr,
                               const unsigned *__restrict idx, unsigned count,
                               const float *__restrict gr, float *__restrict gT,
                               float *__restrict gwT) {
  const unsigned P = w.outPositions();
  const float *__restrict g = gr;
  if (!Layout::CHANNELS_LAST) {
    for (unsigned co = 0; co < c; ++co)
      for (unsigned p = 0; p < P; ++p)
        gT[p * c + co] = gr[co * P + p];
    g = gT;
  }
  for (unsigned q = 0; q < count; ++q) {
    const float v = xr[idx[q]];
    forEachRunReached(w, idx[q], [&](unsigned tap, unsigned p, unsigned n) {
      axpy(n * c, v, &g[p * c], &gwT[tap * c]);
    });
  }
}

// The fraction (per mille) of non-zero dL/dI entries from which ConvInputGrad runs the
// blocked dense product (col = dL/dI^T . W, then col2im) rather than its per-entry path,
// measured (bench/csnn_threshold.py under perf, the CSNN's second convolution without its
// pool, CPU time per row; docs/convolution.md). By col rows (column padding): 30%. By window
// runs on AVX-512 hosts: runs 12 / 18 / 25 / 37 / 59 us at 10 / 25 / 40 / 60 / 100%, the
// product 30-36 us at any density, so 50%. On AVX2 hosts the product (8-lane tiles) ran
// 16-21 us at any density and the runs 14-16 / 18-23 / 22 / 27 / 36 us at 5 / 10 / 20 / 30
// / 40%, so 30% there too. After a 2 x 2 max pool dL/dI is at most 25% non-zero, so the
// runs always (the product took the CSNN step to 1.38x the CPU time on AVX2).
constexpr unsigned DENSE_INPUT_GRAD_MIN_PER_MILLE = 300;
#if defined(__AVX512F__) || defined(__IPU__) || defined(POPSNN_PLAIN_LOOPS)
constexpr unsigned RUNS_DENSE_INPUT_GRAD_MIN_PER_MILLE = 500;
#else
constexpr unsigned RUNS_DENSE_INPUT_GRAD_MIN_PER_MILLE = DENSE_INPUT_GRAD_MIN_PER_MILLE;
#endif

} // namespace conv
} // namespace popsnn
