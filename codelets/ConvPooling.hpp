// The pooling kinds of the convolution vertices (Conv.cpp): PoolForward / PoolBackward's
// MaxPool and AvgPool, one map at a time, and ConvForward's two outputs (its current, or a
// 2 x 2 max pool of it taken as it is formed). Inline functions only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "ConvKernels.hpp"

namespace popsnn {
namespace conv {

// ConvForward's outputs from one row's sums acc [P, c]. CurrentOut: the current [c, P] (acc
// transposed, plus the bias). MaxPooledOut: a 2 x 2 max pool at stride 2 tiling the map
// (MaxPool::pairs) taken on the sums plus the bias, so the current is never stored: each
// window's maximum and argmax over the channels side by side (vectors along c), then the
// pooled map [c, Q] and its argmax transposed out; the same floats and argmax as the
// current followed by PoolForward<MaxPool>.
struct CurrentOut {
  static constexpr bool POOLED = false;
  static unsigned workFloats(const Window &, unsigned) { return 0; }
  static void write(const Window &w, unsigned c, const float *__restrict acc,
                    const float *__restrict bias, float *__restrict out, unsigned *, float *) {
    const unsigned P = w.outPositions();
    for (unsigned co = 0; co < c; ++co)
      for (unsigned p = 0; p < P; ++p)
        out[co * P + p] = acc[p * c + co] + bias[co];
  }
};
struct MaxPooledOut {
  static constexpr bool POOLED = true;
  static unsigned pooled(const Window &w) { return (w.outHeight / 2) * (w.outWidth / 2); }
  // [Q, c] maxima, then [Q, c] argmax.
  static unsigned workFloats(const Window &w, unsigned c) { return 2 * pooled(w) * c; }
  // The running first maximum of the window's entries so far (as MaxPool::keepFirstMax,
  // selects only), one lane or a vector of channels at a time.
  template <class V, class I> static void keep(V v, I k, V &best, I &at) {
    const auto greater = v > best;
    at = greater ? k : at;
    best = greater ? v : best;
  }
  static void write(const Window &w, unsigned c, const float *__restrict acc,
                    const float *__restrict bias, float *__restrict out,
                    unsigned *__restrict argmax, float *__restrict tmp) {
    using popsnn::dense::Lanes;
    using popsnn::dense::LANES;
    using popsnn::dense::loadLanes;
    typedef int Ints __attribute__((vector_size(4 * LANES)));
    const unsigned W = w.outWidth, Wo = W / 2, Q = pooled(w);
    float *__restrict best = tmp;
    int *__restrict at = reinterpret_cast<int *>(tmp + std::size_t(Q) * c);
    for (unsigned q = 0; q < Q; ++q) {
      const unsigned p0 = 2 * (q / Wo) * W + 2 * (q % Wo);
      const float *__restrict r[4] = {acc + std::size_t(p0) * c, acc + std::size_t(p0 + 1) * c,
                                      acc + std::size_t(p0 + W) * c,
                                      acc + std::size_t(p0 + W + 1) * c};
      unsigned co = 0;
      for (; co + LANES <= c; co += LANES) { // whole vectors of channels
        const Lanes b = loadLanes(bias + co);
        Lanes m = Lanes{} - INFINITY;
        Ints a = Ints{};
        for (int k = 0; k < 4; ++k)
          keep(loadLanes(r[k] + co) + b, Ints{} + k, m, a);
        popsnn::dense::storeLanes(best + q * c + co, m);
        __builtin_memcpy(at + q * c + co, &a, sizeof a);
      }
      for (; co < c; ++co) { // the rest, lane by lane
        float m = -INFINITY;
        int a = 0;
        for (int k = 0; k < 4; ++k)
          keep(r[k][co] + bias[co], k, m, a);
        best[q * c + co] = m, at[q * c + co] = a;
      }
    }
    transposeWords(Q, c, best, out);
    transposeWords(Q, c, reinterpret_cast<const float *>(at), reinterpret_cast<float *>(argmax));
  }
};

// The pooling kinds of PoolForward / PoolBackward (Conv.cpp), one map at a time; the
// backward writes every entry of its map's dL/dx.
// Max: each window's first maximum in row-major order (PyTorch's choice; padding never
// wins), its index in the window (kernel row * kW + column) kept for the backward, which
// routes the window's gradient to it.
struct MaxPool {
  static constexpr bool KEEPS_ARGMAX = true;
  // 2 x 2 windows at stride 2 without padding tiling the map (the CSNN's pools): each
  // window's four entries read directly and each gradient entry written once.
  static bool pairs(const Window &w) {
    return w.kernelHeight == 2 && w.kernelWidth == 2 && w.strideY == 2 && w.strideX == 2 &&
           w.padY == 0 && w.padX == 0 && w.inHeight == 2 * w.outHeight &&
           w.inWidth == 2 * w.outWidth;
  }
  // The running (first) maximum and its index: a later entry wins only when greater, as
  // in the general loop (without a branch: which entry wins is data, unpredictable).
  static void keepFirstMax(float v, unsigned k, float &best, unsigned &at) {
    const unsigned mask = 0u - unsigned(v > best);
    at = (at & ~mask) | (k & mask);
    best = v > best ? v : best;
  }
  static void forward(const Window &w, const float *__restrict x, float *__restrict y,
                      unsigned *__restrict argmax) {
    if (pairs(w)) {
      for (unsigned oy = 0; oy < w.outHeight; ++oy) {
        const float *__restrict r0 = x + 2 * oy * w.inWidth, *__restrict r1 = r0 + w.inWidth;
        for (unsigned ox = 0; ox < w.outWidth; ++ox) {
          float best = -INFINITY;
          unsigned at = 0;
          keepFirstMax(r0[2 * ox], 0, best, at);
          keepFirstMax(r0[2 * ox + 1], 1, best, at);
          keepFirstMax(r1[2 * ox], 2, best, at);
          keepFirstMax(r1[2 * ox + 1], 3, best, at);
          y[oy * w.outWidth + ox] = best;
          argmax[oy * w.outWidth + ox] = at;
        }
      }
      return;
    }
    for (unsigned oy = 0; oy < w.outHeight; ++oy) {
      // The window's rows and columns inside the map (padding never wins).
      const TapRange rowsIn(oy, w.kernelHeight, w.padY, w.strideY, w.inHeight);
      const int y0 = int(oy * w.strideY) - int(w.padY);
      for (unsigned ox = 0; ox < w.outWidth; ++ox) {
        const TapRange colsIn(ox, w.kernelWidth, w.padX, w.strideX, w.inWidth);
        const int x0 = int(ox * w.strideX) - int(w.padX);
        float best = -INFINITY;
        unsigned at = 0;
        for (unsigned i = rowsIn.lo; i < rowsIn.hi; ++i) {
          const float *__restrict row = x + unsigned(y0 + int(i)) * w.inWidth;
          for (unsigned j = colsIn.lo; j < colsIn.hi; ++j)
            keepFirstMax(row[x0 + int(j)], i * w.kernelWidth + j, best, at);
        }
        y[oy * w.outWidth + ox] = best;
        argmax[oy * w.outWidth + ox] = at;
      }
    }
  }
  // dL/dI channels-last [H * W, c] of one row from its c maps' pooled gradient [c, H_out *
  // W_out] and argmax, for 2 x 2 windows tiling the map (pairs): per window, each of its
  // four positions' c entries written once, the window's gradient where its argmax is
  // (as 0 + g: -0 gives +0, as the planar backward), zero elsewhere; no zeroing pass and
  // no scattered store per entry.
  static void backwardChannelsLast(const Window &w, unsigned c, const float *__restrict grad,
                                   const unsigned *__restrict argmax, float *__restrict gradInput) {
    const unsigned Q = w.outPositions(), W = w.inWidth;
    for (unsigned q = 0; q < Q; ++q) {
      const unsigned oy = q / w.outWidth, ox = q % w.outWidth;
      float *__restrict p0 = gradInput + std::size_t(2 * oy * W + 2 * ox) * c;
      float *__restrict p1 = p0 + c, *__restrict p2 = p0 + std::size_t(W) * c;
      float *__restrict p3 = p2 + c;
      for (unsigned co = 0; co < c; ++co) {
        const float g0 = grad[co * Q + q], g = g0 != 0.0f ? g0 : 0.0f;
        const unsigned at = argmax[co * Q + q];
        p0[co] = at == 0 ? g : 0.0f;
        p1[co] = at == 1 ? g : 0.0f;
        p2[co] = at == 2 ? g : 0.0f;
        p3[co] = at == 3 ? g : 0.0f;
      }
    }
  }
  // gradInput = each window's gradient at the entry its argmax names, zeros elsewhere.
  static void backward(const Window &w, const float *__restrict grad,
                       const unsigned *__restrict argmax, float *__restrict gradInput) {
    if (pairs(w)) {
      for (unsigned oy = 0; oy < w.outHeight; ++oy) {
        float *__restrict r0 = gradInput + 2 * oy * w.inWidth, *__restrict r1 = r0 + w.inWidth;
        for (unsigned ox = 0; ox < w.outWidth; ++ox) {
          const unsigned p = oy * w.outWidth + ox, at = argmax[p];
          const float g = grad[p] != 0.0f ? grad[p] : 0.0f; // as 0 + g: -0 gives +0
          r0[2 * ox] = at == 0 ? g : 0.0f;
          r0[2 * ox + 1] = at == 1 ? g : 0.0f;
          r1[2 * ox] = at == 2 ? g : 0.0f;
          r1[2 * ox + 1] = at == 3 ? g : 0.0f;
        }
      }
      return;
    }
    for (unsigned k = 0; k < w.inHeight * w.inWidth; ++k)
      gradInput[k] = 0.0f;
    for (unsigned p = 0; p < w.outPositions(); ++p) {
      const float g = grad[p];
      if (g == 0.0f)
        continue;
      const unsigned i = argmax[p] / w.kernelWidth, j = argmax[p] % w.kernelWidth;
      const int yy = Window::inIndex(p / w.outWidth, i, w.padY, w.strideY, w.inHeight);
      const int xx = Window::inIndex(p % w.outWidth, j, w.padX, w.strideX, w.inWidth);
      gradInput[unsigned(yy) * w.inWidth + unsigned(xx)] += g;
    }
  }
};

// Row r of a convolution's dL/dI in Layout's order. Planar: the grad field's row [c, P].
// ChannelsLast: the stage's first layer after the convolution is a 2 x 2 max pool tiling
// its map, whose backward is folded in here: grad is the pool's gradient [rows, c, Q] with
// its argmax, and the row [P, c] is formed in buf (MaxPool::backwardChannelsLast), so no
// dL/dI map is stored or exchanged between compute sets.
template <class Layout>
const float *gradRow(const Window &conv, unsigned c, const float *grad, const unsigned *argmax,
                     unsigned r, float *buf) {
  const unsigned P = conv.outPositions();
  if (!Layout::CHANNELS_LAST)
    return grad + std::size_t(r) * c * P;
  const Window pool{1, conv.outHeight,     conv.outWidth,    2, 2, 2, 2, 0,
                    0, conv.outHeight / 2, conv.outWidth / 2};
  const std::size_t at = std::size_t(r) * c * pool.outPositions();
  MaxPool::backwardChannelsLast(pool, c, grad + at, argmax + at, buf);
  return buf;
}
// The floats ConvInputRuns.hpp's pooledLists take: coef and chan [(Q + 1) c + 8] each, then
// start and count [P].
inline unsigned pooledListsFloats(const Window &conv, unsigned c) {
  return 2 * ((conv.outPositions() / 4 + 1) * c + 8) + 2 * conv.outPositions();
}
// The floats gradRow's buf (or pooledPositions' or pooledLists' lists) take: none planar.
template <class Layout> unsigned gradRowFloats(const Window &conv, unsigned c) {
  const unsigned lists = 4 * conv.outWidth * c + 2 * conv.outWidth;
  return Layout::CHANNELS_LAST
             ? std::max({conv.outPositions() * c, lists, pooledListsFloats(conv, c)})
             : 0u;
}

// With the 2 x 2 max pool folded (ChannelsLast), f(p, count, coef, chan) for each position p
// of the convolution's map with non-zero dL/dI entries, in position order, its entries in
// channel order: the calls nonzeroChannels makes over the row gradRow forms, without forming
// or scanning it. Per row of pooled windows (two rows of positions) each window's channels
// are routed to the position their argmax names (no branch per entry).
template <class F>
void pooledPositions(const Window &conv, unsigned c, const float *__restrict grad,
                     const unsigned *__restrict argmax, float *__restrict lists, F &&f) {
  const unsigned W = conv.outWidth, Wo = W / 2, Ho = conv.outHeight / 2, Q = Ho * Wo;
  float *__restrict coef = lists;                                              // [2 W, c]
  unsigned *__restrict chan = reinterpret_cast<unsigned *>(lists + 2 * W * c); // [2 W, c]
  unsigned *__restrict count = chan + 2 * W * c;                               // [2 W]
  for (unsigned py = 0; py < Ho; ++py) {
    for (unsigned l = 0; l < 2 * W; ++l)
      count[l] = 0;
    for (unsigned co = 0; co < c; ++co) {
      const float *__restrict g = grad + std::size_t(co) * Q + py * Wo;
      const unsigned *__restrict a = argmax + std::size_t(co) * Q + py * Wo;
      for (unsigned px = 0; px < Wo; ++px) {
        const unsigned l = (a[px] >> 1) * W + 2 * px + (a[px] & 1u), n = count[l];
        coef[l * c + n] = g[px], chan[l * c + n] = co;
        count[l] = n + (g[px] != 0.0f);
      }
    }
    for (unsigned l = 0; l < 2 * W; ++l)
      if (count[l])
        f(2 * py * W + l, count[l], coef + l * c, chan + l * c);
  }
}

// Average (padding counts as zeros, as PyTorch's default); the backward spreads a window's
// gradient evenly over it. No argmax.
struct AvgPool {
  static constexpr bool KEEPS_ARGMAX = false;
  static void forward(const Window &w, const float *__restrict x, float *__restrict y, unsigned *) {
    const float size = float(w.kernelHeight * w.kernelWidth);
    for (unsigned p = 0; p < w.outPositions(); ++p) {
      float sum = 0.0f;
      for (unsigned i = 0; i < w.kernelHeight; ++i)
        for (unsigned j = 0; j < w.kernelWidth; ++j) {
          const int yy = Window::inIndex(p / w.outWidth, i, w.padY, w.strideY, w.inHeight);
          const int xx = Window::inIndex(p % w.outWidth, j, w.padX, w.strideX, w.inWidth);
          if (yy >= 0 && xx >= 0)
            sum += x[unsigned(yy) * w.inWidth + unsigned(xx)];
        }
      y[p] = sum / size;
    }
  }
  static void backward(const Window &w, const float *__restrict grad, const unsigned *,
                       float *__restrict gradInput) {
    const float size = float(w.kernelHeight * w.kernelWidth);
    for (unsigned k = 0; k < w.inHeight * w.inWidth; ++k)
      gradInput[k] = 0.0f;
    for (unsigned p = 0; p < w.outPositions(); ++p) {
      const float share = grad[p] / size;
      if (share == 0.0f)
        continue;
      for (unsigned i = 0; i < w.kernelHeight; ++i)
        for (unsigned j = 0; j < w.kernelWidth; ++j) {
          const int yy = Window::inIndex(p / w.outWidth, i, w.padY, w.strideY, w.inHeight);
          const int xx = Window::inIndex(p % w.outWidth, j, w.padX, w.strideX, w.inWidth);
          if (yy >= 0 && xx >= 0)
            gradInput[unsigned(yy) * w.inWidth + unsigned(xx)] += share;
        }
    }
  }
};

} // namespace conv
} // namespace popsnn
