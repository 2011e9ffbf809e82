// The codelets' input-layer and push kernels against plain double-precision loops, on shapes
// with ragged edges (odd input counts, batches and widths that are no multiple of a vector,
// x rows longer than the inputs used). Built by test_kernel_units.py once per instruction
// set; prints one line per check: its name and the largest relative error.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "DenseKernels.hpp"
#include "LifCommon.hpp"

namespace {

std::mt19937 rng(7);

float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

// Image-like rows: runs of non-zero entries (neighbours non-zero together), or scattered.
std::vector<float> sparseInput(unsigned rows, unsigned cols, float density, bool runs) {
  std::vector<float> x(std::size_t(rows) * cols, 0.0f);
  for (unsigned r = 0; r < rows; ++r)
    for (unsigned c = 0; c < cols; ++c) {
      const bool on = runs ? std::sin(0.37f * float(c) + float(r)) > 1.0f - 2.0f * density
                           : uniform(0.0f, 1.0f) < density;
      x[std::size_t(r) * cols + c] = on ? uniform(0.1f, 1.0f) : 0.0f;
    }
  return x;
}

void report(const char *name, const std::vector<double> &want, const float *got) {
  double worst = 0.0, scale = 1e-30;
  for (double w : want)
    scale = std::fmax(scale, std::fabs(w));
  for (std::size_t k = 0; k < want.size(); ++k)
    worst = std::fmax(worst, std::fabs(want[k] - double(got[k])) / scale);
  std::printf("%s %.3g\n", name, worst);
}

void weightGrad(unsigned batch, unsigned nIn, unsigned stride, unsigned n, float density,
                bool runs) {
  const std::vector<float> x = sparseInput(batch, stride, density, runs);
  std::vector<float> g(std::size_t(batch) * n), out(std::size_t(nIn) * n, -1.0f);
  for (float &v : g)
    v = uniform(-1.0f, 1.0f);
  std::vector<unsigned> idx(popsnn::lif::SPARSE_INPUT_GROUP * batch);
  std::vector<float> val(idx.size());
  popsnn::lif::sparseInputTransposedProduct(x.data(), stride, batch, nIn, g.data(), n, idx.data(),
                                            val.data(), out.data());
  std::vector<double> want(out.size(), 0.0);
  for (unsigned i = 0; i < nIn; ++i)
    for (unsigned b = 0; b < batch; ++b)
      for (unsigned j = 0; j < n; ++j)
        want[std::size_t(i) * n + j] += double(x[std::size_t(b) * stride + i]) * g[b * n + j];
  char name[96];
  std::snprintf(name, sizeof name, "weight_grad_B%u_in%u_n%u_%s", batch, nIn, n,
                runs ? "runs" : "scattered");
  report(name, want, out.data());
}

void current(unsigned batch, unsigned nIn, unsigned n, float density) {
  const std::vector<float> x = sparseInput(batch, nIn, density, true);
  std::vector<float> w(std::size_t(nIn) * n), out(std::size_t(batch) * n, -1.0f);
  for (float &v : w)
    v = uniform(-1.0f, 1.0f);
  std::vector<unsigned> idx(nIn);
  std::vector<float> val(nIn);
  popsnn::lif::sparseInputProduct(x.data(), batch, nIn, w.data(), n, idx.data(), val.data(),
                                  out.data());
  std::vector<double> want(out.size(), 0.0);
  for (unsigned b = 0; b < batch; ++b)
    for (unsigned i = 0; i < nIn; ++i)
      for (unsigned j = 0; j < n; ++j)
        want[std::size_t(b) * n + j] += double(x[std::size_t(b) * nIn + i]) * w[i * n + j];
  char name[64];
  std::snprintf(name, sizeof name, "current_B%u_in%u_n%u", batch, nIn, n);
  report(name, want, out.data());
}

// The blocked dense product c = a.b, a row-major [M, K] (x.W, as DirectCurrent) or the
// transpose of a [K, M] slice of rows `stride` long (x^T.G, as DirectWeightGrad). Shapes
// with several k blocks and a short last one, full and ragged panels (so the next panel is
// fetched ahead, or not) and remainders of rows; c starts as garbage, which must not leak.
void dense(unsigned M, unsigned N, unsigned K, bool transposed) {
  const unsigned stride = transposed ? M + 3 : K;
  const std::vector<float> a = sparseInput(transposed ? K : M, stride, 0.7f, false);
  std::vector<float> b(std::size_t(K) * N), c(std::size_t(M) * N, -1.0f);
  for (float &v : b)
    v = uniform(-1.0f, 1.0f);
  const unsigned aRow = transposed ? 1 : stride, aCol = transposed ? stride : 1;
  popsnn::dense::denseProduct(M, N, K, a.data(), aRow, aCol, b.data(), N, c.data(), N);
  std::vector<double> want(c.size(), 0.0);
  for (unsigned i = 0; i < M; ++i)
    for (unsigned k = 0; k < K; ++k)
      for (unsigned j = 0; j < N; ++j)
        want[std::size_t(i) * N + j] += double(a[i * aRow + k * aCol]) * b[std::size_t(k) * N + j];
  char name[64];
  std::snprintf(name, sizeof name, "dense_M%u_N%u_K%u_%s", M, N, K, transposed ? "xTG" : "xW");
  report(name, want, c.data());
}

// PushGrads' row updates: rows[id - offset] += g for every id, ids repeated across calls.
void addToRows(unsigned P) {
  const unsigned n = 45, offset = 1000, calls = 20;
  std::vector<float> rows(std::size_t(n) * P + P, 0.0f), g(P);
  std::vector<double> want(std::size_t(n) * P, 0.0);
  for (unsigned call = 0; call < calls; ++call) {
    for (float &v : g)
      v = uniform(-1.0f, 1.0f);
    std::vector<int> ids;
    for (unsigned j = 0; j < n; ++j)
      if (uniform(0.0f, 1.0f) < 0.3f)
        ids.push_back(int(offset + j));
    popsnn::lif::addToRows(ids.data(), unsigned(ids.size()), offset, g.data(), rows.data(), P);
    for (int id : ids)
      for (unsigned c = 0; c < P; ++c)
        want[std::size_t(unsigned(id) - offset) * P + c] += g[c];
  }
  char name[32];
  std::snprintf(name, sizeof name, "add_to_rows_P%u", P);
  report(name, want, rows.data());
}

} // namespace

int main() {
  for (bool runs : {true, false}) {
    weightGrad(37, 301, 310, 150, 0.2f, runs); // odd inputs, a last partial vector
    weightGrad(128, 64, 64, 128, 0.05f, runs); // whole blocks only
    weightGrad(3, 5, 9, 7, 0.6f, runs);        // fewer samples than a gather
  }
  current(37, 301, 150, 0.2f);
  current(16, 40, 200, 0.5f);
  for (bool transposed : {false, true}) {
    dense(37, 150, 600, transposed); // 3 k blocks (on AVX-512 the last short), ragged panel
    dense(50, 128, 130, transposed); // full panels only: each fetches the next ahead
    dense(5, 7, 3, transposed);      // under one register tile every way
  }
  for (unsigned P : {16u, 32u, 48u})
    addToRows(P);
  return 0;
}
