// The convolution vertices of a convolutional stage (docs/convolution.md): the stage's
// current from its input, event-driven (the kernel scattered for each non-zero input) or
// dense (each output position's window gathered) as the input's density decides; the weight
// gradient from dL/dI's or the input's non-zero entries (the fewer); the input gradient by a
// blocked dense product or per non-zero dL/dI entry, as dL/dI's density decides; max pooling
// with the argmax kept for the backward, average pooling; sums of partial results over tiles.
//
// Arrays are row-major: input [rows, C_in, H, W], current [rows, c, H_out, W_out] with c the
// vertex's output channels, weights PyTorch's [c, C_in, kH, kW]. Every output entry sums its
// terms in (input channel, kernel row, kernel column) order on both convolution paths, so the
// event and dense paths give the same floats.
#include <poplar/Vertex.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ConvEvents.hpp"
#include "ConvInputRuns.hpp"
#include "ConvKernels.hpp"
#include "ConvPooling.hpp"
#include "ConvWeightTaps.hpp"

using namespace poplar;
using namespace popsnn::conv;

// The current of `outChannels` output channels for `rows` (step, sample) rows; Out
// (ConvPooling.hpp) CurrentOut stores it, MaxPooledOut stores only its 2 x 2 max pool.
template <class Out> class ConvForward : public Vertex {
public:
  Input<Vector<float>> x;          // [rows, C_in, H, W]
  Input<Vector<float>> weights;    // [c, C_in, kH, kW]
  Input<Vector<float>> bias;       // [c] (zeros without a bias)
  Output<Vector<float>> current;   // [rows, c, H_out, W_out] (pooled: [rows, c, Q])
  Output<Vector<unsigned>> argmax; // pooled: [rows, c, Q]; else empty
  // The taps transposed [C_in * kH * kW (columns reversed: reversedTap), c], one row's sums [H_out
  // * W_out, c], Out's own (Out::workFloats), then the row's non-zero input positions [C_in * H
  // * W] and, where the rest of the work holds them, windowEventsRow's lists.
  InOut<Vector<float>> work;
  Output<Vector<unsigned>> denseRows; // [1]: rows that took the dense path
  unsigned rows;
  unsigned outChannels;
  unsigned inChannels;
  unsigned inHeight;
  unsigned inWidth;
  unsigned kernelHeight;
  unsigned kernelWidth;
  unsigned strideY;
  unsigned strideX;
  unsigned padY;
  unsigned padX;
  unsigned outHeight;
  unsigned outWidth;

  bool compute() {
    const Window w = windowOf(*this);
    const unsigned c = outChannels, taps = w.taps(), P = w.outPositions();
    float *__restrict t = &work[0];
    for (unsigned co = 0; co < c; ++co)
      for (unsigned k = 0; k < taps; ++k)
        t[reversedTap(w, k) * c + co] = weights[co * taps + k];
    float *__restrict acc = &work[taps * c];
    float *__restrict outWork = &work[(taps + P) * c];
    const unsigned listed = (taps + P) * c + Out::workFloats(w, c);
    unsigned *__restrict idx = reinterpret_cast<unsigned *>(&work[listed]);
    const unsigned room = unsigned(work.size()) - listed; // for idx and the lists
    unsigned dense = 0;
    for (unsigned r = 0; r < rows; ++r) {
      const float *xr = &x[r * w.inSize()];
      const unsigned count = nonzeroIndices(xr, w.inSize(), idx);
      const bool gather =
          popsnn::dense::denseEnough(count, w.inSize(), popsnn::dense::DENSE_CURRENT_MIN_PER_MILLE);
      dense += gather;
      if (!gather && count + windowEventsWords(count) <= room) {
        windowEventsRow(w, xr, idx, count, t, c, acc, idx + count);
      } else {
        for (unsigned k = 0; k < P * c; ++k)
          acc[k] = 0.0f;
        if (gather)
          gatherRow(w, xr, t, c, acc);
        else
          scatterRow(w, xr, idx, count, t, c, acc);
      }
      const unsigned n = c * (Out::POOLED ? MaxPooledOut::pooled(w) : P);
      Out::write(w, c, acc, &bias[0], &current[r * n], Out::POOLED ? &argmax[r * n] : nullptr,
                 outWork);
    }
    denseRows[0] = dense;
    return true;
  }
};

template class ConvForward<popsnn::conv::CurrentOut>;
template class ConvForward<popsnn::conv::MaxPooledOut>;

// dL/dW and dL/db of `outChannels` channels over `rows` rows: each row from dL/dI's non-zero
// entries or from the input's (spikes), whichever gives fewer products; the two sum each
// weight's terms in different orders (equal within float rounding). Layout: dL/dI's
// (ConvKernels.hpp: Planar, or ChannelsLast as a 2 x 2 max pool's backward leaves it).
template <class Layout> class ConvWeightGrad : public Vertex {
public:
  Input<Vector<float>> x;               // [rows, C_in, H, W]
  Input<Vector<float>> grad;            // dL/dI [rows, c, H_out, W_out] (or gradRow's pooled)
  Input<Vector<unsigned>> argmax;       // ChannelsLast: the pool's [rows, c, Q]; else empty
  Output<Vector<float>> gradWeights;    // [c, C_in, kH, kW]
  Output<Vector<float>> gradBias;       // [c]
  Output<Vector<unsigned>> activeGrads; // [1]: dL/dI entries that carried gradient
  // [taps (reversedTap), c] sums of the input-driven rows, [P, c] one row's dL/dI transposed
  // (channels-last: weightGradByTaps' or weightGradByPositions' lists), [taps] one window of
  // the input, [C_in * H * W] the row's non-zero input positions, [2 c] one position's non-zero
  // dL/dI entries and their channels, then gradRow's [P, c] and, where the work holds them,
  // that row from the next 64-byte boundary (AVX-512 loads across two cache lines cost more)
  // followed by the c zeros weightGradByTaps reads for terms that reach no output.
  InOut<Vector<float>> work;
  unsigned rows;
  unsigned outChannels;
  unsigned inChannels;
  unsigned inHeight;
  unsigned inWidth;
  unsigned kernelHeight;
  unsigned kernelWidth;
  unsigned strideY;
  unsigned strideX;
  unsigned padY;
  unsigned padX;
  unsigned outHeight;
  unsigned outWidth;

  bool compute() {
    const Window w = windowOf(*this);
    const unsigned c = outChannels, taps = w.taps(), P = w.outPositions();
    float *__restrict gwT = &work[0];
    float *__restrict gT = &work[taps * c];
    float *__restrict col = &work[taps * c + P * c];
    unsigned *__restrict idx = reinterpret_cast<unsigned *>(col + taps);
    float *__restrict coef = col + taps + w.inSize();
    unsigned *__restrict chan = reinterpret_cast<unsigned *>(coef + c);
    const unsigned rowFloats = gradRowFloats<Layout>(w, c);
    float *__restrict rowBuf = coef + 2 * c;
    const bool byTaps = Layout::CHANNELS_LAST && alignedRow(rowBuf, rowFloats + c);
    if (byTaps)
      for (unsigned co = 0; co < c; ++co)
        rowBuf[rowFloats + co] = 0.0f;
    const unsigned *am = Layout::CHANNELS_LAST && argmax.size() ? &argmax[0] : nullptr;
    for (unsigned k = 0; k < c * taps; ++k)
      gradWeights[k] = gwT[k] = 0.0f;
    for (unsigned co = 0; co < c; ++co)
      gradBias[co] = 0.0f;
    unsigned active = 0;
    bool byInputs = false;
    unsigned *__restrict tapIds = taps <= w.inSize() ? idx : nullptr; // room for a window's
    const auto byGradients = [&](unsigned activeG, unsigned activeX) {
      // Each product g * x once either way: from dL/dI's non-zero entries (a window of
      // taps each) or from the input's (kernel area x channels each), whichever costs less;
      // a product by gradients costs about twice one by inputs (its multiply-adds store
      // into [c, taps] rows, not one cached block; ConvKernels.hpp).
      return GRADIENT_PRODUCT_COST * activeG * taps <=
             std::uint64_t(activeX) * w.kernelHeight * w.kernelWidth * c + std::uint64_t(P) * c;
    };
    for (unsigned r = 0; r < rows; ++r) {
      const float *__restrict xr = &x[r * w.inSize()];
      if (Layout::CHANNELS_LAST &&
          pooledRow(w, c, r, xr, am, col, gT, rowBuf, idx, tapIds, active, byGradients))
        continue;
      const float *__restrict gr = gradRow<Layout>(w, c, &grad[0], am, r, rowBuf);
      const unsigned activeG =
          Layout::CHANNELS_LAST ? biasSumsChannelsLast(c, P, gr, gT) : biasSumsPlanar(c, P, gr);
      active += activeG;
      if (!activeG) // a row the sparse rule masked whole: its inputs are not listed either
        continue;
      const unsigned activeX = nonzeroIndices(xr, w.inSize(), idx);
      if (byGradients(activeG, activeX)) {
        weightGradByGradients<Layout>(w, c, xr, gr, col, coef, chan, &gradWeights[0], tapIds);
        continue;
      }
      byInputs = true;
      // Channels-last, gT is free: by taps or by positions where it holds the lists (the same
      // floats; by taps fewer loads and stores of gwT rows, none of an input that is not finite).
      if (byTaps && tapListsWords(w, activeX) <= P * c &&
          weightGradByTaps(w, c, xr, idx, activeX, gr, rowFloats, gwT,
                           reinterpret_cast<unsigned *>(gT)))
        continue;
      if (Layout::CHANNELS_LAST && windowEventsWords(activeX) <= P * c)
        weightGradByPositions(w, c, xr, idx, activeX, gr, gwT, reinterpret_cast<unsigned *>(gT));
      else
        weightGradByInputs<Layout>(w, c, xr, idx, activeX, gr, gT, gwT);
    }
    if (byInputs)
      for (unsigned co = 0; co < c; ++co)
        for (unsigned k = 0; k < taps; ++k)
          gradWeights[co * taps + k] += gwT[reversedTap(w, k) * c + co];
    activeGrads[0] = active;
    return true;
  }

private:
  // Moves row on to the next 64-byte boundary if the work holds `floats` from there.
  bool alignedRow(float *__restrict &row, unsigned floats) {
    const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(row);
    float *moved = row + (64 - at % 64) % 64 / sizeof(float);
    if (at % sizeof(float) || moved + floats > &work[0] + work.size())
      return false;
    row = moved;
    return true;
  }
  // A row of the pool's gradient (ChannelsLast) that is empty, or cheaper by gradients (a
  // rule's sparse rows), done here from the pool's gradient: positions listed by
  // pooledPositions (no dL/dI row formed, no scan of its P x c entries), the bias sums
  // taken from the lists in position order (the same floats as over the formed row: the
  // zeros skipped add +-0 to a sum that is never -0). Returns false for the other rows.
  template <class Choice>
  bool pooledRow(const Window &w, unsigned c, unsigned r, const float *__restrict xr,
                 const unsigned *am, float *__restrict col, float *__restrict sums,
                 float *__restrict lists, unsigned *__restrict idx, unsigned *__restrict tapIds,
                 unsigned &active, Choice byGradients) {
    const unsigned Q = w.outPositions() / 4;
    const float *__restrict pg = &grad[std::size_t(r) * c * Q];
    const unsigned activeG = unsigned(popsnn::dense::countNonzero(pg, 1, c * Q, 0));
    if (!activeG)
      return true;
    const unsigned activeX = nonzeroIndices(xr, w.inSize(), idx);
    if (!byGradients(activeG, activeX))
      return false;
    active += activeG;
    for (unsigned co = 0; co < c; ++co)
      sums[co] = 0.0f;
    float *__restrict gradW = &gradWeights[0];
    // Few input spikes (the CSNN's ~70 of 1,728): each window's taps found among them
    // (SpikeTaps, after the sums in sums' [P, c]) instead of copying its taps' inputs.
    SpikeTaps spikes;
    const bool listed = activeX <= w.taps() && c + 5 * activeX <= w.outPositions() * c;
    if (listed)
      spikes = SpikeTaps(w, xr, idx, activeX, reinterpret_cast<unsigned *>(sums + c));
    pooledPositions(w, c, pg, am + std::size_t(r) * c * Q, lists,
                    [&](unsigned p, unsigned count, const float *coef, const unsigned *chan) {
                      for (unsigned q = 0; q < count; ++q)
                        sums[chan[q]] += coef[q];
                      if (listed)
                        spikes.products(w, p, count, coef, chan, gradW);
                      else
                        gradientProducts(w, xr, p, count, coef, chan, col, gradW, tapIds);
                    });
    for (unsigned co = 0; co < c; ++co)
      gradBias[co] += sums[co];
    return true;
  }
  // gradBias += the row's dL/dI summed over positions (each channel's sum in position
  // order, as the reference); returns the row's non-zero entries.
  unsigned biasSumsPlanar(unsigned c, unsigned P, const float *__restrict gr) {
    unsigned count = 0;
    for (unsigned co = 0; co < c; ++co) {
      float sum = 0.0f;
      for (unsigned p = 0; p < P; ++p) {
        count += gr[co * P + p] != 0.0f;
        sum += gr[co * P + p];
      }
      gradBias[co] += sum;
    }
    return count;
  }
  // The same over [P, c]: the channels' sums side by side in sums ([c] of the work, free
  // without a transpose), each still in position order, so the same floats as planar. A
  // vector of channels' sums held in a register over the positions: GCC built the loop with
  // the count in it from 16 scalar loads a vector (~13 ms of a 220 ms CSNN step on AVX-512).
  unsigned biasSumsChannelsLast(unsigned c, unsigned P, const float *__restrict gr,
                                float *__restrict sums) {
    using popsnn::dense::Lanes;
    using popsnn::dense::LANES;
    unsigned co = 0;
    for (; co + LANES <= c; co += LANES) {
      Lanes sum = Lanes{};
      for (unsigned p = 0; p < P; ++p)
        sum += popsnn::dense::loadLanes(gr + std::size_t(p) * c + co);
      popsnn::dense::storeLanes(sums + co, sum);
    }
#if defined(__AVX512F__) && !defined(POPSNN_PLAIN_LOOPS) && !defined(__IPU__)
    if (co < c) { // the rest in one masked vector, each sum in position order as below (the
                  // first convolution's 12 channels one at a time took ~5.6x as long)
      const __mmask16 in = __mmask16((1u << (c - co)) - 1u);
      __m512 sum = _mm512_setzero_ps();
      for (unsigned p = 0; p < P; ++p)
        sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(in, gr + std::size_t(p) * c + co));
      _mm512_mask_storeu_ps(sums + co, in, sum);
      co = c;
    }
#endif
    for (; co < c; ++co) {
      float sum = 0.0f;
      for (unsigned p = 0; p < P; ++p)
        sum += gr[std::size_t(p) * c + co];
      sums[co] = sum;
    }
    for (co = 0; co < c; ++co)
      gradBias[co] += sums[co];
    return unsigned(popsnn::dense::countNonzero(gr, 1, P * c, 0));
  }
};

template class ConvWeightGrad<popsnn::conv::Planar>;
template class ConvWeightGrad<popsnn::conv::ChannelsLast>;

// This channel group's share of dL/dx, the transposed convolution: per row, when dL/dI is
// dense enough, col = dL/dI^T . W by the blocked dense product (positions in chunks of
// the work's size), then each position's col row added back on its window (col2im); else
// per output position its non-zero entries' weight rows combined, by window runs into a
// channels-last dL/dx when no column padding cuts a window (ConvInputRuns.hpp; after a
// folded max pool the row's positions listed at once, then kernel row by kernel row), else
// into one col row and col2im. The shares of all channel groups are summed by SumParts.
template <class Layout> class ConvInputGrad : public Vertex {
public:
  Input<Vector<float>> grad;       // dL/dI [rows, c, H_out, W_out] (or gradRow's pooled)
  Input<Vector<unsigned>> argmax;  // ChannelsLast: the pool's [rows, c, Q]; else empty
  Input<Vector<float>> weights;    // [c, C_in, kH, kW]
  Output<Vector<float>> gradInput; // [rows, C_in, H, W]
  // [chunk, taps]: col rows of `chunk` positions (at least taps + 2 c: one col row, then
  // one position's non-zero coefficients and channels); then, without column padding,
  // windowRunsFloats for the window runs; gradRow's [P, c] (or a row's lists) last
  InOut<Vector<float>> work;
  Output<Vector<unsigned>> denseRows; // [1]: rows that took the dense product
  unsigned rows;
  unsigned outChannels;
  unsigned inChannels;
  unsigned inHeight;
  unsigned inWidth;
  unsigned kernelHeight;
  unsigned kernelWidth;
  unsigned strideY;
  unsigned strideX;
  unsigned padY;
  unsigned padX;
  unsigned outHeight;
  unsigned outWidth;

  bool compute() {
    const Window w = windowOf(*this);
    const unsigned c = outChannels, taps = w.taps(), P = w.outPositions();
    const bool runs = w.padX == 0;
    const unsigned rowFloats = gradRowFloats<Layout>(w, c);
    const unsigned colFloats =
        unsigned(work.size()) - (runs ? windowRunsFloats(w, c) : 0u) - rowFloats;
    float *__restrict rowBuf = &work[0] + (work.size() - rowFloats);
    const unsigned chunk = std::max(1u, std::min(P, colFloats / taps));
    float *__restrict col = &work[0];
    float *__restrict wr = col + colFloats;
    float *__restrict dxT = wr + c * w.kernelHeight * paddedRun(w);
    if (runs)
      weightRuns(w, c, &weights[0], wr);
    // One window covering the whole input (a Linear stage, the CSNN's readout): a row's
    // col row is its dL/dx, so consecutive rows taking the product are one product
    // written in place (no col2im, no zeroing: the per-row product was one position).
    const bool whole =
        P == 1 && w.padY == 0 && runs && w.inHeight == w.kernelHeight && w.inWidth == w.kernelWidth;
    const unsigned *am = Layout::CHANNELS_LAST && argmax.size() ? &argmax[0] : nullptr;
    // A row's entries in grad (ChannelsLast: the pool's, one per window and channel, each
    // at one entry of dL/dI, so their non-zero count is dL/dI's).
    const unsigned entries = Layout::CHANNELS_LAST ? c * P / 4 : c * P;
    const auto takesProduct = [&](unsigned r) {
      return popsnn::dense::denseEnough(
          popsnn::dense::countNonzero(&grad[r * entries], 1, entries, 0), c * P,
          runs ? RUNS_DENSE_INPUT_GRAD_MIN_PER_MILLE : DENSE_INPUT_GRAD_MIN_PER_MILLE);
    };
    unsigned dense = 0;
    for (unsigned r = 0; r < rows; ++r) {
      float *__restrict dx = &gradInput[r * w.inSize()];
      const bool product = takesProduct(r);
      if (product && whole) { // whole: one position, planar
        unsigned end = r + 1;
        while (end < rows && takesProduct(end))
          ++end;
        popsnn::dense::denseProduct(end - r, taps, c, &grad[r * c], c, 1u, &weights[0], taps, dx,
                                    taps);
        dense += end - r, r = end - 1;
        continue;
      }
      dense += product;
      if (product || !runs) // these add onto dx (col2im); the window runs write all of it
        for (unsigned k = 0; k < w.inSize(); ++k)
          dx[k] = 0.0f;
      if (product) {
        const float *__restrict gr = gradRow<Layout>(w, c, &grad[0], am, r, rowBuf);
        for (unsigned p0 = 0; p0 < P; p0 += chunk) {
          const unsigned n = std::min(chunk, P - p0);
          popsnn::dense::denseProduct(n, taps, c, Layout::channels(gr, c, P, p0),
                                      Layout::positionStride(c, P), Layout::channelStride(c, P),
                                      &weights[0], taps, col, taps);
          addWindows(w, col, p0, n, dx);
        }
        continue;
      }
      entriesRow(w, c, r, am, rowBuf, col, wr, dxT, dx);
    }
    denseRows[0] = dense;
    return true;
  }

private:
  // Row r by its non-zero entries: by window runs into dxT, then transposed into dx, or
  // (column padding) each position's col row added back on its window in dx, zeroed.
  void entriesRow(const Window &w, unsigned c, unsigned r, const unsigned *am,
                  float *__restrict rowBuf, float *__restrict col, const float *__restrict wr,
                  float *__restrict dxT, float *__restrict dx) {
    const unsigned P = w.outPositions(), taps = w.taps();
    const bool runs = w.padX == 0;
    const unsigned entries = Layout::CHANNELS_LAST ? c * P / 4 : c * P;
    if (runs)
      for (unsigned k = 0; k < w.inSize() + paddedRun(w); ++k)
        dxT[k] = 0.0f;
    if (Layout::CHANNELS_LAST && runs) {
      // The row's lists from the pool's gradient (no dL/dI row formed), then the runs
      // kernel row by kernel row.
      addListedRuns(w, c, pooledLists(w, c, &grad[r * entries], am + r * entries, rowBuf), wr, dxT);
    } else {
      // Per position, its non-zero entries (coefficients and channels), then their weight
      // rows combined.
      const auto position = [&](unsigned p, unsigned count, const float *__restrict coef,
                                const unsigned *__restrict idx) {
        if (runs)
          return addWindowRuns(w, c, p, count, coef, idx, wr, dxT);
        combineRows(taps, count, coef, idx, &weights[0], taps, col);
        addWindows(w, col, p, 1, dx);
      };
      if (Layout::CHANNELS_LAST) // listed from the pool's gradient, no dL/dI row formed
        pooledPositions(w, c, &grad[r * entries], am + r * entries, rowBuf, position);
      else
        planarPositions(c, P, &grad[r * entries], col + taps, position);
    }
    if (runs) // channels-last back to [C_in, H, W] (8 x 8 blocks on AVX2: the scalar loop
              // was ~10% of the vertex under perf)
      transposeWords(w.inHeight * w.inWidth, w.inChannels, dxT, dx);
  }

  // f(p, count, coef, chan) for each position p with non-zero entries of a planar row.
  template <class F>
  static void planarPositions(unsigned c, unsigned P, const float *__restrict gr,
                              float *__restrict coef, F &&f) {
    unsigned *__restrict idx = reinterpret_cast<unsigned *>(coef + c);
    for (unsigned p = 0; p < P; ++p)
      if (const unsigned count = nonzeroChannels<Layout>(gr, c, P, p, coef, idx))
        f(p, count, coef, idx);
  }
};

template class ConvInputGrad<popsnn::conv::Planar>;
template class ConvInputGrad<popsnn::conv::ChannelsLast>;

// Pooling of `maps` maps (rows x channels) by Kind (ConvKernels.hpp: MaxPool keeps each
// window's argmax for the backward, AvgPool needs none and is given an empty argmax).
template <class Kind> class PoolForward : public Vertex {
public:
  Input<Vector<float>> x;          // [maps, H, W]
  Output<Vector<float>> y;         // [maps, H_out, W_out]
  Output<Vector<unsigned>> argmax; // [maps, H_out, W_out] (MaxPool), else empty
  unsigned maps;
  // The window (inChannels unused: 1).
  unsigned inChannels;
  unsigned inHeight;
  unsigned inWidth;
  unsigned kernelHeight;
  unsigned kernelWidth;
  unsigned strideY;
  unsigned strideX;
  unsigned padY;
  unsigned padX;
  unsigned outHeight;
  unsigned outWidth;

  bool compute() {
    const Window w = windowOf(*this);
    const unsigned in = w.inHeight * w.inWidth, P = w.outPositions();
    for (unsigned m = 0; m < maps; ++m)
      Kind::forward(w, &x[m * in], &y[m * P], Kind::KEEPS_ARGMAX ? &argmax[m * P] : nullptr);
    return true;
  }
};

// dL/dx of pooling, `maps` planar maps [maps, H, W] one at a time: Kind routes each window's
// gradient (MaxPool: to its argmax). A 2 x 2 max pool tiling the convolution's map right
// after it has no pass of its own: ConvWeightGrad and ConvInputGrad<ChannelsLast> read its
// gradient and argmax (ConvPooling.hpp).
template <class Kind> class PoolBackward : public Vertex {
public:
  Input<Vector<float>> grad;       // [maps, H_out, W_out]
  Input<Vector<unsigned>> argmax;  // [maps, H_out, W_out] (MaxPool), else empty
  Output<Vector<float>> gradInput; // [maps, H, W]
  unsigned maps;
  unsigned inChannels;
  unsigned inHeight;
  unsigned inWidth;
  unsigned kernelHeight;
  unsigned kernelWidth;
  unsigned strideY;
  unsigned strideX;
  unsigned padY;
  unsigned padX;
  unsigned outHeight;
  unsigned outWidth;

  bool compute() {
    const Window w = windowOf(*this);
    const unsigned in = w.inHeight * w.inWidth, P = w.outPositions();
    for (unsigned m = 0; m < maps; ++m)
      Kind::backward(w, &grad[m * P], Kind::KEEPS_ARGMAX ? &argmax[m * P] : nullptr,
                     &gradInput[m * in]);
    return true;
  }
};

template class PoolForward<popsnn::conv::MaxPool>;
template class PoolForward<popsnn::conv::AvgPool>;
template class PoolBackward<popsnn::conv::MaxPool>;
template class PoolBackward<popsnn::conv::AvgPool>;

// out = the sum of `parts` equal blocks (partial results of several tiles), in block order.
class SumParts : public Vertex {
public:
  Input<Vector<float>> parts; // [numParts, n]
  Output<Vector<float>> out;  // [n]
  unsigned numParts;

  bool compute() {
    const unsigned n = out.size();
    for (unsigned k = 0; k < n; ++k)
      out[k] = parts[k];
    for (unsigned s = 1; s < numParts; ++s)
      for (unsigned k = 0; k < n; ++k)
        out[k] += parts[s * n + k];
    return true;
  }
};
