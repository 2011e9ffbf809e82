// The codelets' input-layer, forward row-sum, push, backward-row and whole-trace
// Leaky backward kernels against plain double-precision loops, on shapes with ragged edges (odd
// input counts, batches and widths that are no multiple of a vector, x rows longer than the inputs
// used). Built by test_kernel_units.py once per instruction set; prints one line per check: its
// name and the largest relative error.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "BackwardRows.hpp"
#include "DenseKernels.hpp"
#include "InputProducts.hpp"
#include "LeakForwardRow.hpp"
#include "LeakyTrace.hpp"
#include "LifCommon.hpp"
#include "OptimizerSteps.hpp"
#include "WeightGradRows.hpp"
#include "report.hpp"

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

// x.W by the row kernel; `grouped`: by groups of samples where they pay (AVX-512 builds).
void current(unsigned batch, unsigned nIn, unsigned n, float density, bool runs, bool grouped) {
  const std::vector<float> x = sparseInput(batch, nIn, density, runs);
  std::vector<float> w(std::size_t(nIn) * n), out(std::size_t(batch) * n, -1.0f);
  for (float &v : w)
    v = uniform(-1.0f, 1.0f);
  std::vector<unsigned> idx(nIn);
  std::vector<float> val(4 * std::size_t(nIn)); // a group of 4 samples' values (AVX-512)
  popsnn::lif::sparseInputProduct(x.data(), batch, nIn, w.data(), n, idx.data(), val.data(),
                                  out.data(), grouped);
  std::vector<double> want(out.size(), 0.0);
  for (unsigned b = 0; b < batch; ++b)
    for (unsigned i = 0; i < nIn; ++i)
      for (unsigned j = 0; j < n; ++j)
        want[std::size_t(b) * n + j] += double(x[std::size_t(b) * nIn + i]) * w[i * n + j];
  char name[96];
  std::snprintf(name, sizeof name, "current_B%u_in%u_n%u_%s_%s", batch, nIn, n,
                runs ? "runs" : "scattered", grouped ? "grouped" : "rows");
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

// The forward's listed-row sums (LifForward's input from spike ids or the host's input list):
// out (+)= sum over listed rows of value x row, values or unit (spike ids), added to out's
// entries or to zero; widths of whole blocks, a masked rest, or under one vector.
void rowSums(unsigned n, unsigned count, bool unit, bool accumulate) {
  const unsigned rowsIn = 300;
  std::vector<float> rows(std::size_t(rowsIn) * n), val(count), out(n);
  for (float &v : rows)
    v = uniform(-1.0f, 1.0f);
  for (float &v : val)
    v = uniform(0.1f, 1.0f);
  for (float &v : out)
    v = uniform(-1.0f, 1.0f);
  std::vector<unsigned> idx(count);
  for (unsigned &i : idx)
    i = unsigned(uniform(0.0f, float(rowsIn) - 0.5f));
  std::vector<double> want(n, 0.0);
  for (unsigned j = 0; j < n && accumulate; ++j)
    want[j] = out[j];
  for (unsigned k = 0; k < count; ++k)
    for (unsigned j = 0; j < n; ++j)
      want[j] += (unit ? 1.0 : double(val[k])) * rows[std::size_t(idx[k]) * n + j];
  if (unit)
    popsnn::lif::sparseRowSum(idx.data(), popsnn::lif::UnitValues{}, count, rows.data(), n,
                              out.data(), n, accumulate);
  else
    popsnn::lif::sparseRowSum(idx.data(), popsnn::lif::ListedValues{val.data()}, count, rows.data(),
                              n, out.data(), n, accumulate);
  char name[64];
  std::snprintf(name, sizeof name, "row_sum_n%u_k%u_%s_%s", n, count, unit ? "unit" : "values",
                accumulate ? "added" : "zero");
  report(name, want, out.data());
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

// A weight gradient's rows at an id buffer's spikes, live columns only (addAtSpikeCols): column
// counts above 256, few and many spikes, none live.
void spikeCols(unsigned n, unsigned nIn, unsigned count, unsigned spikes) {
  std::vector<float> rows(std::size_t(nIn) * n), dI(n);
  for (float &v : rows)
    v = uniform(-1.0f, 1.0f);
  for (float &v : dI)
    v = uniform(-1.0f, 1.0f);
  std::vector<double> want(rows.begin(), rows.end());
  std::vector<int> cols, buf(popsnn::codes::BUFFER_HEADER + spikes, 0);
  for (unsigned c = 0; c < count; ++c) // distinct columns, not in order
    cols.push_back(int((c * 7919u) % n));
  buf[0] = int(spikes);
  for (unsigned k = 0; k < spikes; ++k)
    buf[popsnn::codes::BUFFER_HEADER + k] = int((k * 31u + 3u) % nIn);
  for (unsigned k = 0; k < spikes; ++k)
    for (int c : cols)
      want[std::size_t(buf[popsnn::codes::BUFFER_HEADER + k]) * n + unsigned(c)] += dI[unsigned(c)];
  popsnn::backward_rows::addAtSpikeCols(buf.data(), dI.data(), n, cols.data(), count, rows.data());
  char name[64];
  std::snprintf(name, sizeof name, "spike_cols_n%u_count%u_spikes%u", n, count, spikes);
  report(name, want, rows.data());
}

// The generic backward's next-layer term, eps += dL/dI_next . W_next^T over the shards'
// blocks of dL/dI (eps starts non-zero), and the all-to-all recurrent product of every
// sample at once (BackwardRows.hpp; it overwrites rec): shards of two sizes, widths with
// register blocks and ragged columns, or under one block.
void fanoutRows(unsigned batch, unsigned n, unsigned layer, unsigned shard) {
  std::vector<float> wT(std::size_t(layer) * n), grads(std::size_t(batch) * layer);
  std::vector<float> eps(std::size_t(batch) * n), rec(eps.size(), -1.0f);
  for (auto *v : {&wT, &grads, &eps})
    for (float &x : *v)
      x = uniform(-1.0f, 1.0f);
  std::vector<double> want(eps.size()), wantRec(eps.size(), 0.0);
  for (unsigned b = 0; b < batch; ++b)
    for (unsigned j = 0; j < n; ++j) {
      for (unsigned first = 0; first < layer; first += shard) {
        const unsigned size = layer - first < shard ? layer - first : shard;
        for (unsigned k = 0; k < size; ++k)
          wantRec[b * n + j] +=
              double(grads[batch * first + b * size + k]) * wT[(first + k) * n + j];
      }
      want[b * n + j] = eps[b * n + j] + wantRec[b * n + j];
    }
  for (unsigned b = 0; b < batch; ++b)
    popsnn::backward_rows::fromFanoutDense(&eps[b * n], n, wT.data(), grads.data(), shard, layer, b,
                                           batch);
  popsnn::backward_rows::recurrentProduct(grads.data(), wT.data(), n, shard, layer, batch,
                                          rec.data());
  char name[64];
  std::snprintf(name, sizeof name, "fanout_dense_B%u_n%u_N%u_%u", batch, n, layer, shard);
  report(name, want, eps.data());
  std::snprintf(name, sizeof name, "recurrent_product_B%u_n%u_N%u_%u", batch, n, layer, shard);
  report(name, wantRec, rec.data());
  // One step's rows of a layer-major trace: the last `rows` of the batch's rows (row0 > 0,
  // rowsPerBlock > rows), as LifBackward's stepProduct reads the next layer's blocks.
  const unsigned rows = batch - batch / 2, row0 = batch / 2;
  std::vector<float> step(std::size_t(rows) * n, -1.0f);
  popsnn::backward_rows::stepProduct(grads.data(), wT.data(), n, shard, layer, row0, batch, rows,
                                     step.data());
  std::snprintf(name, sizeof name, "step_product_B%u_n%u_N%u_%u", batch, n, layer, shard);
  report(name, std::vector<double>(wantRec.begin() + std::size_t(row0) * n, wantRec.end()),
         step.data());
}

#ifdef POPSNN_LEAK_TRACE
// The whole-trace Leaky backward (LeakyTrace.hpp: pairs of samples, an odd last one, blocks
// ending in partial vectors) against the BPTT of docs/numerics.md in double: the forward's
// membrane in float with the kernel's fused operations (so the spikes are the same), the
// surrogate and everything after it in double. The bias gradient starts non-zero (it is
// added to); the carries' and sums' memory holds garbage (the kernel starts them at zero at
// t = T-1 and writes them whole, so the vertex zeroes nothing first). SYN: Synaptic's (J = alpha J
// + I drives U; dL/dJ carried, the zero reset gating it by 1 - S[t-1]).
template <unsigned RESET, unsigned SURROGATE, bool SYN = false>
void leakTrace(unsigned batch, unsigned n, unsigned K, unsigned T, const char *what,
               bool rowsHeld) {
  using namespace popsnn::lif;
  // atan's at param 3: at 2 its rearranged form (LeakVectors) has the division form's roundings.
  const float beta = 0.9f, alpha = 0.8f, th = 1.0f, param = SURROGATE == ATAN ? 3.0f : 5.0f;
  const std::size_t rows = std::size_t(batch) * n;
  std::vector<float> x(rows), wT(std::size_t(K) * n), g(std::size_t(T) * batch * K);
  std::vector<float> gU(rows), gJ(rows), acc(rows), gb(n), out(T * rows, -1.0f);
  for (float &v : x)
    v = uniform(-0.2f, SYN ? 0.25f : 0.6f); // J sums ~1 / (1 - alpha) steps of I
  for (std::vector<float> *values : {&wT, &g, &gU, &gJ, &acc, &gb})
    for (float &v : *values)
      v = uniform(-1.0f, 1.0f);
  std::vector<double> wantOut(out.size()), wantU(rows), wantJ(rows), wantAcc(rows),
      wantB(gb.begin(), gb.end());
  for (unsigned b = 0; b < batch; ++b)
    for (unsigned j = 0; j < n; ++j) {
      const std::size_t r = std::size_t(b) * n + j;
      std::vector<double> sg(T);
      std::vector<bool> spike(T);
      float u = 0.0f, p = 0.0f, cur = 0.0f;
      for (unsigned t = 0; t < T; ++t) {
        cur = SYN ? std::fma(alpha, cur, x[r]) : x[r];
        u = RESET == RESET_SUBTRACT      ? std::fma(-p, th, std::fma(beta, u, cur))
            : RESET == RESET_ZERO && SYN ? (1.0f - p) * std::fma(beta, u, cur)
            : RESET == RESET_ZERO        ? std::fma(beta * (1.0f - p), u, cur)
                                         : std::fma(beta, u, cur);
        const double d = double(u) - th, z = M_PI * param * d / 2.0;
        sg[t] = SURROGATE == FAST_SIGMOID
                    ? 1.0 / ((param * std::fabs(d) + 1.0) * (param * std::fabs(d) + 1.0))
                : SURROGATE == ATAN ? param / 2.0 / (1.0 + z * z)
                                    : 1.0;
        spike[t] = u > th;
        p = spike[t] ? 1.0f : 0.0f;
      }
      double carry = 0.0, carryJ = 0.0, sum = 0.0;
      for (unsigned t = T; t-- > 0;) {
        double e = 0.0;
        for (unsigned k = 0; k < K; ++k)
          e += double(g[(std::size_t(t) * batch + b) * K + k]) * wT[std::size_t(k) * n + j];
        if (RESET == RESET_ZERO && spike[t])
          carry = 0.0;
        carry = sg[t] * e + beta * carry;
        const bool gated = RESET == RESET_ZERO && t > 0 && spike[t - 1];
        carryJ = (gated ? 0.0 : carry) + alpha * carryJ;
        const double dI = SYN ? carryJ : carry;
        sum += dI;
        wantOut[t * rows + r] = dI;
      }
      wantU[r] = carry;
      wantJ[r] = SYN ? carryJ : gJ[r]; // gJ untouched without SYN
      wantAcc[r] = sum;
      wantB[j] += sum;
    }
  auto gradRow = [&](unsigned t, unsigned b, unsigned) -> const float * {
    return g.data() + (std::size_t(t) * batch + b) * K;
  };
  const LeakVectors c(beta, th, param, alpha);
  leakBackwardBatch<RESET, SURROGATE, SYN>(
      c, T, batch, x.data(), gradRow,
      BackwardRows{wT.data(), n, K, out.data(), unsigned(rows), rowsHeld}, gU.data(),
      SYN ? gJ.data() : nullptr, acc.data(), gb.data());
  const std::pair<const std::vector<double> *, const float *> results[] = {{&wantOut, out.data()},
                                                                           {&wantU, gU.data()},
                                                                           {&wantAcc, acc.data()},
                                                                           {&wantB, gb.data()},
                                                                           {&wantJ, gJ.data()}};
  const char *parts[] = {"grad_out", "grad_mem", "grad_sum", "grad_bias", "grad_current"};
  for (unsigned k = 0; k < (SYN ? 5u : 4u); ++k) {
    char name[96];
    std::snprintf(name, sizeof name, "leak_trace_%s_B%u_n%u_K%u_%s", what, batch, n, K, parts[k]);
    report(name, *results[k].first, results[k].second);
  }
}

// The surrogates' reciprocal (lanes16::reciprocal) of denominators from 1 to past overflow:
// 1/x within float tolerance, 0 where 1/x is below the smallest normal float or x is inf (the
// division's 0), no NaN (the last entry counts them).
void surrogateReciprocal() {
  namespace v16 = popsnn::lanes16;
  alignas(64) float x[32], r[32];
  for (unsigned k = 0; k < 32; ++k)
    x[k] = k < 24 ? std::pow(7.3f, float(k)) : k < 30 ? 3.4e38f - float(k - 24) * 4e37f : INFINITY;
  v16::store(r, v16::reciprocal(v16::load(x), v16::set1(1.0f)));
  v16::store(r + 16, v16::reciprocal(v16::load(x + 16), v16::set1(1.0f)));
  std::vector<double> want;
  std::vector<float> got;
  unsigned nans = 0;
  for (unsigned k = 0; k < 32; ++k) { // relative to 1/x: scaled by x (inf: the value itself)
    const bool tiny = 1.0 / x[k] < 1.17549435e-38;
    want.push_back(tiny ? 0.0 : 1.0);
    got.push_back(tiny ? r[k] : float(double(r[k]) * x[k]));
    nans += std::isnan(r[k]) ? 1 : 0;
  }
  want.push_back(0.0);
  got.push_back(float(nans));
  report("leak_trace_surrogate_reciprocal", want, got.data());
}

#endif

} // namespace

#ifdef POPSNN_FUSED_LEAK_FORWARD
// The fused Leaky forward row (membrane, masked surrogate, spikes and their ids in one pass)
// against the formulas in double precision; a wrong spike, id or count reports error 1.
void fusedForward(unsigned n, unsigned reset, unsigned surrogate, unsigned rule, unsigned capacity,
                  const char *name) {
  const float beta = 0.9f, threshold = 1.0f, param = 2.0f, ruleValue = 0.3f;
  std::vector<float> u(n), in(n), prev(n), sg(n);
  for (unsigned j = 0; j < n; ++j) {
    u[j] = uniform(-0.5f, 1.5f);
    in[j] = uniform(-0.3f, 0.7f);
    prev[j] = uniform(0.0f, 1.0f) < 0.25f ? 1.0f : 0.0f;
  }
  const std::vector<float> u0 = u, p0 = prev;
  std::vector<int> ids(capacity + 8, -1);
  const unsigned count = popsnn::lif::leakForwardRow(
      n, beta, threshold, reset, surrogate, param, rule, ruleValue, in.data(), u.data(),
      prev.data(), sg.data(), 100, ids.data(), 0, capacity);
  std::vector<double> wantU(n), wantSg(n);
  bool exact = true;
  unsigned spikes = 0;
  for (unsigned j = 0; j < n; ++j) {
    double un = double(beta) * u0[j] + in[j];
    if (reset == popsnn::codes::RESET_SUBTRACT)
      un -= p0[j] * threshold;
    else if (reset == popsnn::codes::RESET_ZERO)
      un = double(beta) * (1.0 - p0[j]) * u0[j] + in[j];
    const double d = double(u[j]) - threshold; // the kernel's own U: its decisions follow it
    double s = 1.0;
    if (surrogate == popsnn::codes::FAST_SIGMOID)
      s = 1.0 / ((1.0 + param * std::fabs(d)) * (1.0 + param * std::fabs(d)));
    else if (surrogate == popsnn::codes::ATAN)
      s = (param / 2.0) / (1.0 + std::pow(3.14159265358979323846 * param * d / 2.0, 2));
    if ((rule == popsnn::codes::RULE_WINDOW && !(std::fabs(d) < ruleValue)) ||
        (rule == popsnn::codes::RULE_ONE_SIDED && !(u[j] >= ruleValue)))
      s = 0.0;
    wantU[j] = un;
    wantSg[j] = s;
    const bool spike = u[j] > threshold;
    exact = exact && prev[j] == (spike ? 1.0f : 0.0f);
    if (spike && spikes < capacity)
      exact = exact && ids[spikes] == int(100 + j);
    spikes += spike;
  }
  exact = exact && count == spikes && ids[capacity] == -1; // nothing past the capacity
  double worst = 0.0;
  for (const auto *pair : {&wantU, &wantSg}) {
    double scale = 1e-30;
    for (double w : *pair)
      scale = std::fmax(scale, std::fabs(w));
    const float *got = pair == &wantU ? u.data() : sg.data();
    for (unsigned j = 0; j < n; ++j)
      worst = std::fmax(worst, std::fabs((*pair)[j] - double(got[j])) / scale);
  }
  std::printf("fused_forward_%s %.3g\n", name, exact ? worst : 1.0);
}
#endif

// The first layer's weights stepped a group of rows at a time as their gradient is computed
// (DirectWeightAdamStep / SgdStep) against the gradient written whole, then stepped: three steps
// each from the same start, Adam (with coupled weight decay) or SGD (momentum, Nesterov). The
// same sums and per-entry arithmetic: prints the largest relative difference, which must be 0.
void fusedStep(unsigned batch, unsigned nIn, unsigned n, float density, bool sgd) {
  const std::vector<float> x = sparseInput(batch, nIn, density, true);
  std::vector<float> g(std::size_t(batch) * n), grad(std::size_t(nIn) * n);
  std::vector<float> rows(std::size_t(popsnn::codes::FUSED_STEP_ROWS) * n);
  for (float &v : g)
    v = uniform(-1.0f, 1.0f);
  std::vector<unsigned> idx(popsnn::lif::SPARSE_INPUT_GROUP * batch);
  std::vector<float> val(idx.size());
  const popsnn::lif::WeightGradRows rowsOf(x.data(), nIn, batch, nIn, g.data(), n, idx.data(),
                                           val.data());
  std::vector<float> start(grad.size());
  for (float &v : start)
    v = uniform(-0.1f, 0.1f);
  std::vector<float> whole = start, fused = start, m1(grad.size()), v1(grad.size()),
                     m2(grad.size()), v2(grad.size());
  for (unsigned step = 1; step <= 3; ++step) {
    rowsOf.rows(0, nIn, grad.data());
    if (sgd) {
      const popsnn::optim::SgdStep s{0.05f, 0.9f, 1.0f, 0.01f, true, step == 1};
      popsnn::optim::sgdEntries(s, whole.data(), grad.data(), m1.data(), unsigned(grad.size()));
      rowsOf.byGroups(rows.data(), [&](std::size_t at, unsigned size) {
        popsnn::optim::sgdEntries(s, &fused[at], rows.data(), &m2[at], size);
      });
    } else {
      const popsnn::optim::AdamStep s = popsnn::optim::adamStep(
          1e-3f, 0.9f, 0.999f, float(1.0 - 0.9), float(1.0 - 0.999), 1e-8f, 0.01f, false, step);
      popsnn::optim::adamEntries(s, whole.data(), grad.data(), m1.data(), v1.data(),
                                 unsigned(grad.size()));
      rowsOf.byGroups(rows.data(), [&](std::size_t at, unsigned size) {
        popsnn::optim::adamEntries(s, &fused[at], rows.data(), &m2[at], &v2[at], size);
      });
    }
  }
  char name[80];
  std::snprintf(name, sizeof name, "fused_step_%s_%u_%u_%u_%s", sgd ? "sgd" : "adam", batch, nIn, n,
                rowsOf.dense ? "dense" : "sparse");
  report(name, std::vector<double>(whole.begin(), whole.end()), fused.data());
}

int main() {
  for (bool runs : {true, false}) {
    weightGrad(37, 301, 310, 150, 0.2f, runs); // odd inputs, a last partial vector
    weightGrad(128, 64, 64, 128, 0.05f, runs); // whole blocks only
    weightGrad(3, 5, 9, 7, 0.6f, runs);        // fewer samples than a gather
    weightGrad(16, 40, 40, 90, 0.5f, runs);    // a last block of 5 vectors and a masked one
    weightGrad(16, 40, 40, 40, 0.5f, runs);    // AVX2 pairs: under a block, vector by vector
  }
  // Groups of 4 samples (AVX2: 2): a last partial group (37), blocks of 96 columns and a masked
  // rest (AVX2: pairs' blocks of 48, the rest as a block ending at the last column);
  // image-like runs at 0.5 fill a group's union past SPARSE_GROUP_MIN_FILL (the groups run),
  // scattered entries at 0.05 do not (each sample's own list runs).
  for (bool grouped : {true, false}) {
    current(37, 301, 150, 0.2f, true, grouped);
    current(16, 40, 200, 0.5f, true, grouped);
    current(21, 300, 500, 0.05f, false, grouped);
    current(16, 40, 282, 0.5f, true, grouped); // a panel of 90 columns: 5 vectors + 10
    current(9, 44, 40, 0.5f, true, grouped);   // AVX2 pairs: 3 vectors, the last overlapping
    current(12, 40, 530, 0.5f, true, grouped); // AVX2: two panels, the second of 18 columns
  }
  for (bool transposed : {false, true}) {
    dense(37, 150, 600, transposed); // 3 k blocks (on AVX-512 the last short), ragged panel
    dense(50, 128, 130, transposed); // full panels only: each fetches the next ahead
    dense(5, 7, 3, transposed);      // under one register tile every way
  }
  for (bool unit : {true, false})
    for (bool accumulate : {true, false}) {
      rowSums(200, 37, unit, accumulate); // a block of 8 vectors, 4 more and 8 masked columns
      rowSums(10, 9, unit, accumulate);   // a readout: one partial vector
      rowSums(128, 0, unit, accumulate);  // no listed rows
    }
  for (unsigned P : {16u, 32u, 48u})
    addToRows(P);
  spikeCols(1100, 90, 300, 40);  // more columns than a chunk of 256
  spikeCols(500, 40, 19, 3);     // hidden 1,000's shard at window 0.05: ~4% live
  spikeCols(100, 30, 0, 5);      // no live column
  fanoutRows(37, 300, 230, 120); // two shard sizes, register blocks and 44 ragged columns
  fanoutRows(8, 128, 10, 10);    // one shard, whole blocks only
  fanoutRows(3, 77, 5, 2);       // under one block, shards of 2 and a last of 1
  for (bool sgd : {false, true}) {
    fusedStep(8, 100, 70, 0.2f, sgd);  // sparse: 6 groups of 16 and a last of 4, ragged rows
    fusedStep(5, 37, 150, 0.9f, sgd);  // dense: 2 groups and a last of 5
    fusedStep(1, 784, 40, 0.19f, sgd); // one sample, MNIST's inputs
  }
#ifdef POPSNN_FUSED_LEAK_FORWARD
  {
    using namespace popsnn::codes;
    fusedForward(1000, RESET_SUBTRACT, FAST_SIGMOID, RULE_NONE, 2000, "subtract_fast"); // whole
    fusedForward(13, RESET_ZERO, ATAN, RULE_WINDOW, 64, "zero_atan_window");        // a masked tail
    fusedForward(37, RESET_NONE, STRAIGHT_THROUGH, RULE_ONE_SIDED, 3, "none_cap3"); // capacity
  }
#endif
#ifdef POPSNN_LEAK_TRACE
  // Rows held (the product two steps a pass on AVX-512: T 25 pairs and a last step, T 64 pairs
  // only) and not (one step a pass).
  leakTrace<popsnn::codes::RESET_SUBTRACT, popsnn::codes::FAST_SIGMOID>(
      5, 200, 10, 25, "subtract_fast_sigmoid", true);
  leakTrace<popsnn::codes::RESET_ZERO, popsnn::codes::ATAN>(4, 37, 3, 9, "zero_atan", false);
  leakTrace<popsnn::codes::RESET_NONE, popsnn::codes::STRAIGHT_THROUGH>(3, 130, 16, 64,
                                                                        "none_straight", true);
  using popsnn::codes::ATAN, popsnn::codes::FAST_SIGMOID, popsnn::codes::STRAIGHT_THROUGH;
  leakTrace<popsnn::codes::RESET_SUBTRACT, FAST_SIGMOID, true>(5, 200, 10, 25, "syn_subtract",
                                                               false);
  leakTrace<popsnn::codes::RESET_ZERO, ATAN, true>(4, 37, 3, 9, "syn_zero_atan", true);
  leakTrace<popsnn::codes::RESET_NONE, STRAIGHT_THROUGH, true>(3, 130, 16, 64, "syn_none", false);
  surrogateReciprocal();
#endif
  return 0;
}
