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
constexpr unsigned BLOCK = 16;      // floats tested at once
constexpr unsigned BYTE_BLOCK = 32; // bytes tested at once

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

  void append(unsigned i, float v) {
    if (used < capacity) {
      ids[used] = int(i);
      values[used] = v;
    }
    ++used;
  }

  void visitOneByOne(const float *x, unsigned first, unsigned last) {
    for (unsigned i = first; i < last; ++i) {
      nonFinite += (bitsOf(x[i]) & EXPONENT) == EXPONENT;
      if (x[i] != 0.0f)
        append(i, x[i]);
    }
  }

#if defined(__SSE2__) && !defined(POPSNN_PLAIN_LOOPS)
  // x[first .. first + BLOCK): bit k of `nonzero` set where x[first + k] is not +-0 (NaN and
  // inf too: their exponent bits are set), of `nonFinite` where it is NaN or inf. Only the
  // set bits are visited: a row of spike events has one or two per block that has any.
  void visitBlock(const float *x, unsigned first) {
    const __m128i abs = _mm_set1_epi32(int(ABS_BITS)), exponent = _mm_set1_epi32(int(EXPONENT));
    __m128i v[BLOCK / 4], any = _mm_setzero_si128();
    for (unsigned k = 0; k < BLOCK / 4; ++k) {
      v[k] = _mm_and_si128(_mm_castps_si128(_mm_loadu_ps(x + first + 4 * k)), abs);
      any = _mm_or_si128(any, v[k]);
    }
    if (_mm_movemask_epi8(_mm_cmpeq_epi32(any, _mm_setzero_si128())) == 0xffff)
      return; // most blocks: a branch per block, not per float
    unsigned zero = 0, inf = 0;
    for (unsigned k = 0; k < BLOCK / 4; ++k) {
      const __m128i e = _mm_and_si128(v[k], exponent);
      zero |=
          unsigned(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v[k], _mm_setzero_si128()))))
          << (4 * k);
      inf |= unsigned(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(e, exponent)))) << (4 * k);
    }
    nonFinite += unsigned(__builtin_popcount(inf));
    for (unsigned nonzero = ~zero & 0xffffu; nonzero != 0; nonzero &= nonzero - 1) {
      const unsigned i = first + unsigned(__builtin_ctz(nonzero));
      append(i, x[i]);
    }
  }
#else
  // A block of +-0 only is passed over with a branch per block, not per float.
  void visitBlock(const float *x, unsigned first) {
    std::uint32_t any = 0;
    for (unsigned k = 0; k < BLOCK; ++k)
      any |= bitsOf(x[first + k]) & ABS_BITS;
    if (any != 0)
      visitOneByOne(x, first, first + BLOCK);
  }
#endif

  void visitOneByOne(const std::uint8_t *x, unsigned first, unsigned last) {
    for (unsigned i = first; i < last; ++i)
      if (x[i] != 0)
        append(i, float(x[i]));
  }

#if defined(__SSE2__) && !defined(POPSNN_PLAIN_LOOPS)
  // x[first .. first + BYTE_BLOCK): one branch for a block of zeros, then its non-zeros by bit.
  void visitBlock(const std::uint8_t *x, unsigned first) {
    const __m128i zero = _mm_setzero_si128();
    const __m128i low = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x + first));
    const __m128i high = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x + first + 16));
    if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_or_si128(low, high), zero)) == 0xffff)
      return;
    const unsigned zeros = unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(low, zero))) |
                           unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(high, zero))) << 16;
    for (unsigned nonzero = ~zeros; nonzero != 0; nonzero &= nonzero - 1) {
      const unsigned i = first + unsigned(__builtin_ctz(nonzero));
      append(i, float(x[i]));
    }
  }
#else
  void visitBlock(const std::uint8_t *x, unsigned first) {
    std::uint64_t words[BYTE_BLOCK / 8];
    std::memcpy(words, x + first, sizeof words);
    std::uint64_t any = 0;
    for (std::uint64_t w : words)
      any |= w;
    if (any != 0)
      visitOneByOne(x, first, first + BYTE_BLOCK);
  }
#endif

  // A row of floats or bytes: whole blocks tested at once, the rest one by one.
  template <typename Element> void row(const Element *x, unsigned nIn) {
    constexpr unsigned block = sizeof(Element) == 1 ? BYTE_BLOCK : BLOCK;
    unsigned i = 0;
    for (; i + block <= nIn; i += block)
      visitBlock(x, i);
    visitOneByOne(x, i, nIn);
  }
};

template <typename Element>
void listChunks(const Element *x, unsigned steps, unsigned chunks, unsigned chunkBatch,
                unsigned nIn, std::size_t capacity, InputLists &out) {
  const unsigned rows = steps * chunkBatch;
  const std::size_t listSize = codes::inputListStarts(steps, chunkBatch) + capacity;
  // Every start is written; entries past a chunk's last start are never read (no clearing).
  out.lists.resize(chunks * listSize);
  out.values.resize(chunks * capacity);
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

} // namespace

void buildInputLists(const float *x, unsigned steps, unsigned chunks, unsigned chunkBatch,
                     unsigned nIn, std::size_t capacity, InputLists &out) {
  listChunks(x, steps, chunks, chunkBatch, nIn, capacity, out);
}

void buildInputLists(const std::uint8_t *x, unsigned steps, unsigned chunks, unsigned chunkBatch,
                     unsigned nIn, std::size_t capacity, InputLists &out) {
  listChunks(x, steps, chunks, chunkBatch, nIn, capacity, out);
}

float grownInputActivity(std::size_t needed, std::size_t entries) {
  return float(std::min(1.0, 1.25 * double(needed) / double(entries)));
}

} // namespace popsnn
