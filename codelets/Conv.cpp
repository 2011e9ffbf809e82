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

#include "DenseKernels.hpp"

using namespace poplar;

namespace {

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
    if (shifted < 0 || shifted % int(stride))
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
template <class V> Window windowOf(const V &v) {
  return {v.inChannels, v.inHeight, v.inWidth, v.kernelHeight, v.kernelWidth, v.strideY,
          v.strideX,    v.padY,     v.padX,    v.outHeight,    v.outWidth};
}

// acc [positions, c] += every non-zero input's kernel taps (one input row).
void scatterRow(const Window &w, const float *__restrict x, const float *__restrict taps,
                unsigned c, float *__restrict acc) {
  const unsigned kH = w.kernelHeight, kW = w.kernelWidth;
  for (unsigned ci = 0; ci < w.inChannels; ++ci)
    for (unsigned y = 0; y < w.inHeight; ++y)
      for (unsigned xx = 0; xx < w.inWidth; ++xx) {
        const float v = x[(ci * w.inHeight + y) * w.inWidth + xx];
        if (v == 0.0f)
          continue;
        for (unsigned i = 0; i < kH; ++i) {
          const int oy = Window::outIndex(y, i, w.padY, w.strideY, w.outHeight);
          if (oy < 0)
            continue;
          for (unsigned j = 0; j < kW; ++j) {
            const int ox = Window::outIndex(xx, j, w.padX, w.strideX, w.outWidth);
            if (ox < 0)
              continue;
            const float *__restrict k = &taps[((ci * kH + i) * kW + j) * c];
            float *__restrict out = &acc[(unsigned(oy) * w.outWidth + unsigned(ox)) * c];
            for (unsigned co = 0; co < c; ++co)
              out[co] += v * k[co];
          }
        }
      }
}

// acc [positions, c] += every output position's window of the input (one input row).
void gatherRow(const Window &w, const float *__restrict x, const float *__restrict taps, unsigned c,
               float *__restrict acc) {
  const unsigned kH = w.kernelHeight, kW = w.kernelWidth;
  for (unsigned ci = 0; ci < w.inChannels; ++ci)
    for (unsigned i = 0; i < kH; ++i)
      for (unsigned j = 0; j < kW; ++j) {
        const float *__restrict k = &taps[((ci * kH + i) * kW + j) * c];
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
void windowRow(const Window &w, const float *__restrict xr, unsigned p, float *__restrict col) {
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
void addWindows(const Window &w, const float *__restrict col, unsigned p0, unsigned n,
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

// out[0, n) += g * row[0, n): contiguous, so it vectorises.
inline void axpy(unsigned n, float g, const float *__restrict row, float *__restrict out) {
  for (unsigned k = 0; k < n; ++k)
    out[k] += g * row[k];
}

// gw [c, taps] += each non-zero dL/dI entry times its window of the input: per output
// position with any gradient, its window as one row (windowRow), then one contiguous
// multiply-add of that row per non-zero entry.
void weightGradByGradients(const Window &w, unsigned c, const float *__restrict xr,
                           const float *__restrict gr, float *__restrict col,
                           float *__restrict gradW) {
  const unsigned taps = w.taps(), P = w.outPositions();
  for (unsigned p = 0; p < P; ++p) {
    bool filled = false;
    for (unsigned co = 0; co < c; ++co) {
      const float g = gr[co * P + p];
      if (g == 0.0f)
        continue;
      if (!filled)
        windowRow(w, xr, p, col);
      filled = true;
      axpy(taps, g, col, &gradW[co * taps]);
    }
  }
}

// gwT [taps, c] += each non-zero input times dL/dI of the outputs its taps reach, with
// dL/dI transposed to [P, c] (gT) first, so every product runs along the c channels.
void weightGradByInputs(const Window &w, unsigned c, const float *__restrict xr,
                        const float *__restrict gr, float *__restrict gT, float *__restrict gwT) {
  const unsigned P = w.outPositions();
  const unsigned kH = w.kernelHeight, kW = w.kernelWidth;
  for (unsigned co = 0; co < c; ++co)
    for (unsigned p = 0; p < P; ++p)
      gT[p * c + co] = gr[co * P + p];
  for (unsigned ci = 0; ci < w.inChannels; ++ci)
    for (unsigned y = 0; y < w.inHeight; ++y)
      for (unsigned xx = 0; xx < w.inWidth; ++xx) {
        const float v = xr[(ci * w.inHeight + y) * w.inWidth + xx];
        if (v == 0.0f)
          continue;
        for (unsigned i = 0; i < kH; ++i) {
          const int oy = Window::outIndex(y, i, w.padY, w.strideY, w.outHeight);
          if (oy < 0)
            continue;
          for (unsigned j = 0; j < kW; ++j) {
            const int ox = Window::outIndex(xx, j, w.padX, w.strideX, w.outWidth);
            if (ox < 0)
              continue;
            const unsigned p = unsigned(oy) * w.outWidth + unsigned(ox);
            axpy(c, v, &gT[p * c], &gwT[((ci * kH + i) * kW + j) * c]);
          }
        }
      }
}

// The fraction (per mille) of non-zero dL/dI entries from which ConvInputGrad runs the
// blocked dense product (col = dL/dI^T . W, then col2im) rather than one multiply-add of a
// weight row per non-zero entry. Measured with bench/csnn_steps.py (docs/convolution.md).
constexpr unsigned DENSE_INPUT_GRAD_MIN_PER_MILLE = 300;

} // namespace

// The current of `outChannels` output channels for `rows` (step, sample) rows.
class ConvForward : public Vertex {
public:
  Input<Vector<float>> x;        // [rows, C_in, H, W]
  Input<Vector<float>> weights;  // [c, C_in, kH, kW]
  Input<Vector<float>> bias;     // [c] (zeros without a bias)
  Output<Vector<float>> current; // [rows, c, H_out, W_out]
  // The taps transposed [C_in * kH * kW, c], then one row's sums [H_out * W_out, c].
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
        t[k * c + co] = weights[co * taps + k];
    float *__restrict acc = &work[taps * c];
    unsigned dense = 0;
    for (unsigned r = 0; r < rows; ++r) {
      const float *xr = &x[r * w.inSize()];
      for (unsigned k = 0; k < P * c; ++k)
        acc[k] = 0.0f;
      const bool gather =
          popsnn::dense::denseEnough(popsnn::dense::countNonzero(xr, 1, w.inSize(), w.inSize()),
                                     w.inSize(), popsnn::dense::DENSE_CURRENT_MIN_PER_MILLE);
      dense += gather;
      if (gather)
        gatherRow(w, xr, t, c, acc);
      else
        scatterRow(w, xr, t, c, acc);
      float *__restrict out = &current[r * c * P];
      for (unsigned co = 0; co < c; ++co)
        for (unsigned p = 0; p < P; ++p)
          out[co * P + p] = acc[p * c + co] + bias[co];
    }
    denseRows[0] = dense;
    return true;
  }
};

// dL/dW and dL/db of `outChannels` channels over `rows` rows: each row from dL/dI's non-zero
// entries or from the input's (spikes), whichever gives fewer products; the two sum each
// weight's terms in different orders (equal within float rounding).
class ConvWeightGrad : public Vertex {
public:
  Input<Vector<float>> x;               // [rows, C_in, H, W]
  Input<Vector<float>> grad;            // dL/dI [rows, c, H_out, W_out]
  Output<Vector<float>> gradWeights;    // [c, C_in, kH, kW]
  Output<Vector<float>> gradBias;       // [c]
  Output<Vector<unsigned>> activeGrads; // [1]: dL/dI entries that carried gradient
  // [taps, c] sums of the input-driven rows, [P, c] one row's dL/dI transposed, [taps] one
  // window of the input.
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
    for (unsigned k = 0; k < c * taps; ++k)
      gradWeights[k] = gwT[k] = 0.0f;
    for (unsigned co = 0; co < c; ++co)
      gradBias[co] = 0.0f;
    unsigned active = 0;
    bool byInputs = false;
    for (unsigned r = 0; r < rows; ++r) {
      const float *__restrict xr = &x[r * w.inSize()];
      const float *__restrict gr = &grad[r * c * P];
      const unsigned activeX = unsigned(popsnn::dense::countNonzero(xr, 1, w.inSize(), 0));
      unsigned activeG = 0;
      for (unsigned co = 0; co < c; ++co) {
        float sum = 0.0f;
        for (unsigned p = 0; p < P; ++p) {
          activeG += gr[co * P + p] != 0.0f;
          sum += gr[co * P + p];
        }
        gradBias[co] += sum;
      }
      active += activeG;
      if (!activeG)
        continue;
      // Each product g * x once either way: from dL/dI's non-zero entries (a window of
      // taps each) or from the input's (kernel area x channels each), whichever is fewer.
      if (std::uint64_t(activeG) * taps <=
          std::uint64_t(activeX) * w.kernelHeight * w.kernelWidth * c + std::uint64_t(P) * c) {
        weightGradByGradients(w, c, xr, gr, col, &gradWeights[0]);
      } else {
        weightGradByInputs(w, c, xr, gr, gT, gwT);
        byInputs = true;
      }
    }
    if (byInputs)
      for (unsigned co = 0; co < c; ++co)
        for (unsigned k = 0; k < taps; ++k)
          gradWeights[co * taps + k] += gwT[k * c + co];
    activeGrads[0] = active;
    return true;
  }
};

// This channel group's share of dL/dx, the transposed convolution: per row, when dL/dI is
// dense enough, col = dL/dI^T . W by the blocked dense product (positions in chunks of
// the work's size), else one weight row per non-zero entry into col; then each position's
// col row added back on its window (col2im). The shares of all channel groups are summed
// by SumParts.
class ConvInputGrad : public Vertex {
public:
  Input<Vector<float>> grad;          // dL/dI [rows, c, H_out, W_out]
  Input<Vector<float>> weights;       // [c, C_in, kH, kW]
  Output<Vector<float>> gradInput;    // [rows, C_in, H, W]
  InOut<Vector<float>> work;          // [chunk, taps]: col rows of `chunk` positions
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
    const unsigned chunk = std::max(1u, std::min(P, unsigned(work.size() / taps)));
    float *__restrict col = &work[0];
    for (unsigned k = 0; k < rows * w.inSize(); ++k)
      gradInput[k] = 0.0f;
    unsigned dense = 0;
    for (unsigned r = 0; r < rows; ++r) {
      const float *__restrict gr = &grad[r * c * P];
      float *__restrict dx = &gradInput[r * w.inSize()];
      const bool product = popsnn::dense::denseEnough(popsnn::dense::countNonzero(gr, 1, c * P, 0),
                                                      c * P, DENSE_INPUT_GRAD_MIN_PER_MILLE);
      dense += product;
      if (product) {
        for (unsigned p0 = 0; p0 < P; p0 += chunk) {
          const unsigned n = std::min(chunk, P - p0);
          popsnn::dense::denseProduct(n, taps, c, gr + p0, 1, P, &weights[0], taps, col, taps);
          addWindows(w, col, p0, n, dx);
        }
        continue;
      }
      for (unsigned p = 0; p < P; ++p) {
        bool filled = false;
        for (unsigned co = 0; co < c; ++co) {
          const float g = gr[co * P + p];
          if (g == 0.0f)
            continue;
          if (!filled)
            for (unsigned k = 0; k < taps; ++k)
              col[k] = 0.0f;
          filled = true;
          axpy(taps, g, &weights[co * taps], col);
        }
        if (filled)
          addWindows(w, col, p, 1, dx);
      }
    }
    denseRows[0] = dense;
    return true;
  }
};

// Max pooling of `rows x channels` maps: each window's first maximum in row-major order
// (PyTorch's choice; padding never wins), its index in the window kept for the backward.
class MaxPoolForward : public Vertex {
public:
  Input<Vector<float>> x;          // [maps, H, W]
  Output<Vector<float>> y;         // [maps, H_out, W_out]
  Output<Vector<unsigned>> argmax; // [maps, H_out, W_out]: kernel row * kW + column
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
      for (unsigned p = 0; p < P; ++p) {
        const unsigned oy = p / w.outWidth, ox = p % w.outWidth;
        float best = -INFINITY;
        unsigned at = 0;
        for (unsigned i = 0; i < w.kernelHeight; ++i)
          for (unsigned j = 0; j < w.kernelWidth; ++j) {
            const int yy = Window::inIndex(oy, i, w.padY, w.strideY, w.inHeight);
            const int xx = Window::inIndex(ox, j, w.padX, w.strideX, w.inWidth);
            const float v =
                yy < 0 || xx < 0 ? -INFINITY : x[m * in + unsigned(yy) * w.inWidth + unsigned(xx)];
            if (v > best) {
              best = v;
              at = i * w.kernelWidth + j;
            }
          }
        y[m * P + p] = best;
        argmax[m * P + p] = at;
      }
    return true;
  }
};

// dL/dx of max pooling: each window's gradient to the entry its argmax names.
class MaxPoolBackward : public Vertex {
public:
  Input<Vector<float>> grad;       // [maps, H_out, W_out]
  Input<Vector<unsigned>> argmax;  // [maps, H_out, W_out]
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
    for (unsigned k = 0; k < maps * in; ++k)
      gradInput[k] = 0.0f;
    for (unsigned m = 0; m < maps; ++m)
      for (unsigned p = 0; p < P; ++p) {
        const float g = grad[m * P + p];
        if (g == 0.0f)
          continue;
        const unsigned i = argmax[m * P + p] / w.kernelWidth, j = argmax[m * P + p] % w.kernelWidth;
        const int yy = Window::inIndex(p / w.outWidth, i, w.padY, w.strideY, w.inHeight);
        const int xx = Window::inIndex(p % w.outWidth, j, w.padX, w.strideX, w.inWidth);
        gradInput[m * in + unsigned(yy) * w.inWidth + unsigned(xx)] += g;
      }
    return true;
  }
};

// Average pooling (padding counts as zeros, as PyTorch's default) and its backward, which
// spreads a window's gradient evenly over it.
class AvgPoolForward : public Vertex {
public:
  Input<Vector<float>> x;  // [maps, H, W]
  Output<Vector<float>> y; // [maps, H_out, W_out]
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
    const float size = float(w.kernelHeight * w.kernelWidth);
    for (unsigned m = 0; m < maps; ++m)
      for (unsigned p = 0; p < P; ++p) {
        float sum = 0.0f;
        for (unsigned i = 0; i < w.kernelHeight; ++i)
          for (unsigned j = 0; j < w.kernelWidth; ++j) {
            const int yy = Window::inIndex(p / w.outWidth, i, w.padY, w.strideY, w.inHeight);
            const int xx = Window::inIndex(p % w.outWidth, j, w.padX, w.strideX, w.inWidth);
            if (yy >= 0 && xx >= 0)
              sum += x[m * in + unsigned(yy) * w.inWidth + unsigned(xx)];
          }
        y[m * P + p] = sum / size;
      }
    return true;
  }
};

class AvgPoolBackward : public Vertex {
public:
  Input<Vector<float>> grad;       // [maps, H_out, W_out]
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
    const float size = float(w.kernelHeight * w.kernelWidth);
    for (unsigned k = 0; k < maps * in; ++k)
      gradInput[k] = 0.0f;
    for (unsigned m = 0; m < maps; ++m)
      for (unsigned p = 0; p < P; ++p) {
        const float share = grad[m * P + p] / size;
        if (share == 0.0f)
          continue;
        for (unsigned i = 0; i < w.kernelHeight; ++i)
          for (unsigned j = 0; j < w.kernelWidth; ++j) {
            const int yy = Window::inIndex(p / w.outWidth, i, w.padY, w.strideY, w.inHeight);
            const int xx = Window::inIndex(p % w.outWidth, j, w.padX, w.strideX, w.inWidth);
            if (yy >= 0 && xx >= 0)
              gradInput[m * in + unsigned(yy) * w.inWidth + unsigned(xx)] += share;
          }
      }
    return true;
  }
};

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
