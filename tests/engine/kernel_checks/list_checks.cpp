// The codelets' listings against plain loops: the forward's spike ids (appendSpikes), the
// gradient trace's row of non-zero surrogates (appendNonzero: ids and values, NaN listed, -0
// not), the whole-trace forward's ids from spike masks (appendMaskedIds) and the convolution's
// non-zero inputs (conv::nonzeroIndices); counts past the capacity, and nothing written past
// it. Built by test_kernel_units.py once per instruction set; prints one line per check: its
// name and the largest relative error (a wrong id, value or count: 1 or more).
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "ConvKernels.hpp"
#include "LeakyTrace.hpp"
#include "LifCommon.hpp"
#include "report.hpp"

namespace {

std::mt19937 rng(11);

float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

std::vector<float> sparseInput(unsigned cols, float density) {
  std::vector<float> x(cols, 0.0f);
  for (float &v : x)
    v = uniform(0.0f, 1.0f) < density ? uniform(0.1f, 1.0f) : 0.0f;
  return x;
}

#ifdef POPSNN_APPEND_NONZERO
// A row of masked surrogates listed at `used` into a trace of `capacity` entries: the ids and
// values stored, the count (past the capacity too), and the entries before `used` and past
// the capacity untouched.
void traceList(unsigned n, float density, unsigned used, unsigned capacity) {
  std::vector<float> x = sparseInput(n, density);
  if (n > 20)
    x[3] = NAN, x[9] = -0.0f, x[20] = -0.5f;
  std::vector<unsigned short> ids(capacity + 16, 7);
  std::vector<float> vals(capacity + 16, -2.0f);
  const unsigned count =
      popsnn::lif::appendNonzero(x.data(), n, used, capacity, ids.data(), vals.data());
  std::vector<double> want; // per slot: id and value (NaN compared as its id only), then count
  std::vector<float> got;
  unsigned found = 0;
  for (unsigned j = 0; j < n; ++j)
    if (x[j] != 0.0f && used + found++ < capacity) {
      const unsigned k = used + found - 1;
      want.push_back(double(j)), got.push_back(float(ids[k]));
      want.push_back(std::isnan(x[j]) ? 0.0 : double(x[j]));
      got.push_back(std::isnan(x[j]) ? (std::isnan(vals[k]) ? 0.0f : 1.0f) : vals[k]);
    }
  want.push_back(double(found)), got.push_back(float(count));
  for (unsigned k = 0; k < capacity + 16; ++k) // untouched before the row and past the capacity
    if (k < used || k >= capacity)             // (lanes past the row's count may be written)
      want.push_back(0.0), got.push_back(ids[k] == 7 && vals[k] == -2.0f ? 0.0f : 1.0f);
  char name[48];
  std::snprintf(name, sizeof name, "trace_list_n%u_used%u_cap%u", n, used, capacity);
  report(name, want, got.data());
}
#endif

#ifdef POPSNN_LEAK_TRACE
// The whole-trace forward's id listing from spike masks (appendMaskedIds): the count and the
// stored ids against a plain loop; nothing written past `capacity`, the rest only counted.
void maskedIds(unsigned n, float density, unsigned capacity) {
  const unsigned offset = 300, vectors = (n + 15) / 16;
  std::vector<unsigned short> masks(vectors, 0);
  std::vector<double> want;
  unsigned spikes = 0;
  for (unsigned j = 0; j < n; ++j)
    if (uniform(0.0f, 1.0f) < density) {
      masks[j / 16] = (unsigned short)(masks[j / 16] | 1u << (j % 16));
      if (spikes++ < capacity)
        want.push_back(double(offset + j));
    }
  std::vector<int> ids(capacity + 16, -1);
  const unsigned count =
      popsnn::lif::appendMaskedIds(masks.data(), vectors, offset, ids.data(), capacity);
  std::vector<float> got;
  for (unsigned k = 0; k < want.size(); ++k)
    got.push_back(float(ids[k]));
  want.push_back(double(spikes));
  got.push_back(float(count));
  for (unsigned k = capacity; k < capacity + 16; ++k) { // untouched past the capacity
    want.push_back(-1.0);
    got.push_back(float(ids[k]));
  }
  char name[48];
  std::snprintf(name, sizeof name, "leak_trace_masked_ids_n%u_cap%u", n, capacity);
  report(name, want, got.data());
}
#endif

// The forward's spike listing (appendSpikes): prev and the count and ids against a plain
// loop, a threshold some entries equal, ids past `capacity` only counted.
void spikeList(unsigned n, unsigned capacity) {
  const unsigned offset = 300, start = 2;
  std::vector<float> u(n), prev(n, -1.0f);
  for (float &v : u)
    v = uniform(0.0f, 1.0f) < 0.1f ? 0.5f : uniform(0.0f, 1.0f);
  std::vector<int> ids(capacity, -1);
  const unsigned count = popsnn::lif::appendSpikes(u.data(), 0.5f, prev.data(), n, offset,
                                                   ids.data(), start, capacity);
  std::vector<double> want; // the stored ids, the count, prev
  std::vector<float> got;
  unsigned spikes = 0;
  for (unsigned j = 0; j < n; ++j)
    if (u[j] > 0.5f && start + spikes++ < capacity)
      want.push_back(double(offset + j));
  for (unsigned k = start; k < capacity && got.size() < want.size(); ++k)
    got.push_back(k < count ? float(ids[k]) : -1.0f);
  want.push_back(double(start + spikes));
  got.push_back(float(count));
  for (unsigned j = 0; j < n; ++j) {
    want.push_back(u[j] > 0.5f ? 1.0 : 0.0);
    got.push_back(prev[j]);
  }
  char name[40];
  std::snprintf(name, sizeof name, "spike_list_n%u_cap%u", n, capacity);
  report(name, want, got.data());
}

// The convolution's non-zero listing (conv::nonzeroIndices): the count and ids against a plain
// loop, with a NaN (listed) and a -0 (not listed) among the entries.
void nonzeroList(unsigned n, float density) {
  std::vector<float> x = sparseInput(n, density);
  if (n > 9)
    x[3] = NAN, x[9] = -0.0f;
  std::vector<unsigned> idx(n, ~0u);
  const unsigned count = popsnn::conv::nonzeroIndices(x.data(), n, idx.data());
  std::vector<double> want;
  std::vector<float> got;
  for (unsigned k = 0; k < n; ++k)
    if (!(x[k] == 0.0f))
      want.push_back(double(k)), got.push_back(got.size() < count ? float(idx[got.size()]) : -1.0f);
  want.push_back(double(want.size()));
  got.push_back(float(count));
  char name[40];
  std::snprintf(name, sizeof name, "nonzero_list_n%u", n);
  report(name, want, got.data());
}

} // namespace

int main() {
  spikeList(1000, 1100);    // whole vectors, every id stored whole
  spikeList(203, 30);       // the capacity reached mid-row: the rest counted, a ragged tail
  spikeList(5, 8);          // under one vector
  nonzeroList(1728, 0.04f); // the CSNN's second stage input: whole vectors only
  nonzeroList(203, 0.5f);   // a ragged tail
  nonzeroList(5, 1.0f);     // under one vector
#ifdef POPSNN_APPEND_NONZERO
  traceList(200, 0.05f, 13, 4000); // a window rule's row: whole vectors, after earlier rows
  traceList(203, 0.5f, 0, 60);     // the capacity reached mid-row: the rest counted
  traceList(37, 1.0f, 5, 30);      // every entry, a ragged tail, the capacity under 16 ahead
#endif
#ifdef POPSNN_LEAK_TRACE
  maskedIds(1000, 0.05f, 1100); // whole masks, every id stored by the table
  maskedIds(203, 0.3f, 30);     // the capacity reached mid-row: the rest counted
  maskedIds(5, 1.0f, 8);        // under one mask
#endif
  return 0;
}
