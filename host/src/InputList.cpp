#include "InputList.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "popsnn/VertexEnums.hpp"

#if defined(__SSE2__) && !defined(POPSNN_PLAIN_LOOPS)
#include <emmintrin.h>
#endif

namespace popsnn {

namespace {

constexpr std::uint32_t ABS_BITS = 0x7fffffffu, EXPONENT = 0x7f800000u;
constexpr unsigned BLOCK = 16; // floats tested at once: a branch per block, not per float

std::uint32_t bitsOf(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// One row of nIn inputs: its non-zeros appended (up to the capacity), NaN and inf counted.
// -0 is not stored (it adds nothing), as the dense scan's `x != 0`.
struct RowScanner {
  int *ids;
  float *values;
  std::size_t capacity, used = 0, nonFinite = 0;

  void visit(unsigned i, float v) {
    if (v == 0.0f)
      return;
    if (used < capacity) {
      ids[used] = int(i);
      values[used] = v;
    }
    ++used;
  }

  // Whether x[0..BLOCK) holds anything but +-0 (NaN and inf too: their exponent bits are
  // set), then visited one by one: the block is read at the speed of a copy.
  static bool blockNeedsVisit(const float *x) {
#if defined(__SSE2__) && !defined(POPSNN_PLAIN_LOOPS)
    const __m128i abs = _mm_set1_epi32(int(ABS_BITS));
    __m128i any = _mm_setzero_si128();
    for (unsigned k = 0; k < BLOCK; k += 4)
      any = _mm_or_si128(any, _mm_and_si128(_mm_castps_si128(_mm_loadu_ps(x + k)), abs));
    return _mm_movemask_epi8(_mm_cmpeq_epi32(any, _mm_setzero_si128())) != 0xffff;
#else
    std::uint32_t any = 0;
    for (unsigned k = 0; k < BLOCK; ++k)
      any |= bitsOf(x[k]) & ABS_BITS;
    return any != 0;
#endif
  }

  void visitOneByOne(const float *x, unsigned first, unsigned last) {
    for (unsigned i = first; i < last; ++i) {
      nonFinite += (bitsOf(x[i]) & EXPONENT) == EXPONENT;
      visit(i, x[i]);
    }
  }

  void row(const float *x, unsigned nIn) {
    unsigned i = 0;
    for (; i + BLOCK <= nIn; i += BLOCK)
      if (blockNeedsVisit(x + i))
        visitOneByOne(x, i, i + BLOCK);
    visitOneByOne(x, i, nIn);
  }
};

} // namespace

void buildInputLists(const float *x, unsigned steps, unsigned chunks, unsigned chunkBatch,
                     unsigned nIn, std::size_t capacity, InputLists &out) {
  const unsigned rows = steps * chunkBatch;
  const std::size_t listSize = codes::inputListStarts(steps, chunkBatch) + capacity;
  out.lists.assign(chunks * listSize, 0);
  out.values.assign(chunks * capacity, 0.0f);
  out.mostNeeded = out.nonFinite = 0;
  for (unsigned m = 0; m < chunks; ++m) {
    int *starts = out.lists.data() + m * listSize;
    RowScanner scan{starts + rows + 1, out.values.data() + m * capacity, capacity};
    for (unsigned t = 0; t < steps; ++t)
      for (unsigned b = 0; b < chunkBatch; ++b) {
        starts[t * chunkBatch + b] = int(std::min(scan.used, capacity));
        const std::size_t sample = std::size_t(t) * chunks * chunkBatch + m * chunkBatch + b;
        scan.row(x + sample * nIn, nIn);
      }
    starts[rows] = int(std::min(scan.used, capacity));
    out.mostNeeded = std::max(out.mostNeeded, scan.used);
    out.nonFinite += scan.nonFinite;
  }
}

float grownInputActivity(std::size_t needed, std::size_t entries) {
  return float(std::min(1.0, 1.25 * double(needed) / double(entries)));
}

} // namespace popsnn
