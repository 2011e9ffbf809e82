// A blocked, vectorised dense matrix product for vertices whose operand is dense, and the
// density test that decides when to use it (see DirectCurrent and DirectWeightGrad).
//
//   c[i * ldc + j] = sum_{k < K} a(i, k) * b[k * ldb + j]   for i < M, j < N,
//   a(i, k) = a[i * aRow + k * aCol]   (row-major x, or a transposed slice of it)
//
// Structure (the classic blocked product, as in poplin's AMP convolutions in spirit): a
// register tile of TILE_ROWS rows x TILE_COLS columns of c stays in vector registers while
// one block of KC terms of k streams past it: per k, TILE_VECS vector loads of b, TILE_ROWS
// broadcasts of a, TILE_ROWS x TILE_VECS fused multiply-adds. Blocks of ROW_BLOCK rows and
// KC terms keep the a block in L2 and the b panel (KC x TILE_COLS) in L1 while the tiles
// of a row block sweep over it. Inline functions only: no state, no allocation (one
// KC x TILE_COLS panel on the stack, for the ragged last columns).
//
// Every entry of c is summed over k in increasing order, one multiply-add per term, the
// same order as the sparse row kernel (sparseRowCombination), which only skips x == 0.
#pragma once

namespace popsnn {
namespace dense {

// Vector width (floats) and register tile per target. GCC/Clang vector types, so the same
// code compiles for the host CPU (and for the IPU, whose worker has 64-bit float2 registers;
// POPSNN_PLAIN_LOOPS gives a host build the IPU's shapes, to test them).
#if defined(__IPU__) || defined(POPSNN_PLAIN_LOOPS)
constexpr unsigned LANES = 2;
constexpr unsigned TILE_ROWS = 4, TILE_VECS = 2;
constexpr unsigned KC = 64;
#elif defined(__AVX512F__)
constexpr unsigned LANES = 16; // 32 registers: 12 x 2 accumulators, 2 of b, 1 of a
constexpr unsigned TILE_ROWS = 12, TILE_VECS = 2;
constexpr unsigned KC = 256;
#elif defined(__AVX__)
constexpr unsigned LANES = 8; // 16 registers: 6 x 2 accumulators, 2 of b, 1 of a
constexpr unsigned TILE_ROWS = 6, TILE_VECS = 2;
constexpr unsigned KC = 256;
#else
constexpr unsigned LANES = 4; // SSE: 16 registers, as AVX
constexpr unsigned TILE_ROWS = 6, TILE_VECS = 2;
constexpr unsigned KC = 256;
#endif
constexpr unsigned TILE_COLS = TILE_VECS * LANES;
constexpr unsigned ROW_BLOCK = 16 * TILE_ROWS;

typedef float Lanes __attribute__((vector_size(4 * LANES)));

inline Lanes loadLanes(const float *p) {
  Lanes v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void storeLanes(float *p, Lanes v) { __builtin_memcpy(p, &v, sizeof v); }

// The first TILE_COLS floats of a panel row into the cache (a row may straddle one more
// line than it fills).
inline void prefetchPanelRow(const float *row) {
  for (unsigned c = 0; c < TILE_COLS; c += 16)
    __builtin_prefetch(row + c);
  __builtin_prefetch(row + TILE_COLS - 1);
}

// One register tile: c[R x cols] (+)= a(R x kc) . panel(kc x TILE_COLS), panel rows
// `panelStride` apart; the first k block writes c (`accumulate` false), later ones add.
// PREFETCH: also fetches the next panel's rows (`next`, same stride) as k goes. b is read
// once per minibatch, so from memory, and the first tile of each panel waited for its rows,
// a row of b apart (docs/performance/dsnn-engine.md: x.W of a shard on a cold cache ~17% faster
// with it).
template <unsigned R, bool PREFETCH = false>
inline void productTile(unsigned kc, const float *__restrict a, unsigned aRow, unsigned aCol,
                        const float *__restrict panel, unsigned panelStride, float *__restrict c,
                        unsigned ldc, unsigned cols, bool accumulate, const float *next = nullptr) {
  Lanes acc[R][TILE_VECS];
  if (!accumulate) {
    for (unsigned r = 0; r < R; ++r)
      for (unsigned v = 0; v < TILE_VECS; ++v)
        acc[r][v] = Lanes{};
  } else if (cols == TILE_COLS) {
    for (unsigned r = 0; r < R; ++r)
      for (unsigned v = 0; v < TILE_VECS; ++v)
        acc[r][v] = loadLanes(c + r * ldc + v * LANES);
  } else {
    for (unsigned r = 0; r < R; ++r) {
      float row[TILE_COLS] = {};
      __builtin_memcpy(row, c + r * ldc, cols * sizeof(float));
      for (unsigned v = 0; v < TILE_VECS; ++v)
        acc[r][v] = loadLanes(row + v * LANES);
    }
  }
  for (unsigned k = 0; k < kc; ++k) {
    if constexpr (PREFETCH)
      prefetchPanelRow(next + k * panelStride);
    Lanes b[TILE_VECS];
#pragma GCC unroll 4
    for (unsigned v = 0; v < TILE_VECS; ++v)
      b[v] = loadLanes(panel + k * panelStride + v * LANES);
    const float *__restrict ak = a + k * aCol;
#pragma GCC unroll 16
    for (unsigned r = 0; r < R; ++r) {
      const float x = ak[r * aRow];
#pragma GCC unroll 4
      for (unsigned v = 0; v < TILE_VECS; ++v)
        acc[r][v] += x * b[v];
    }
  }
  if (cols == TILE_COLS) {
    for (unsigned r = 0; r < R; ++r)
      for (unsigned v = 0; v < TILE_VECS; ++v)
        storeLanes(c + r * ldc + v * LANES, acc[r][v]);
  } else {
    for (unsigned r = 0; r < R; ++r) {
      float row[TILE_COLS];
      for (unsigned v = 0; v < TILE_VECS; ++v)
        storeLanes(row + v * LANES, acc[r][v]);
      __builtin_memcpy(c + r * ldc, row, cols * sizeof(float));
    }
  }
}

// The tiles of rows [0, rows) against one panel: full tiles, then one of the rest. The
// first full tile also fetches the next panel (`next`, if any) into the cache.
inline void productRows(unsigned rows, unsigned kc, const float *a, unsigned aRow, unsigned aCol,
                        const float *panel, unsigned panelStride, float *c, unsigned ldc,
                        unsigned cols, bool accumulate, const float *next) {
  unsigned i = 0;
  if (next && rows >= TILE_ROWS) {
    productTile<TILE_ROWS, true>(kc, a, aRow, aCol, panel, panelStride, c, ldc, cols, accumulate,
                                 next);
    i = TILE_ROWS;
  }
  for (; i + TILE_ROWS <= rows; i += TILE_ROWS)
    productTile<TILE_ROWS>(kc, a + i * aRow, aRow, aCol, panel, panelStride, c + i * ldc, ldc, cols,
                           accumulate);
  const float *ar = a + i * aRow;
  float *cr = c + i * ldc;
  switch (rows - i) {
    // clang-format off: a case per macro line
#define POPSNN_TILE(R)                                                                     \
  case R:                                                                                  \
    productTile<R>(kc, ar, aRow, aCol, panel, panelStride, cr, ldc, cols, accumulate);     \
    break;
    POPSNN_TILE(1) POPSNN_TILE(2) POPSNN_TILE(3) POPSNN_TILE(4) POPSNN_TILE(5)
    POPSNN_TILE(6) POPSNN_TILE(7) POPSNN_TILE(8) POPSNN_TILE(9) POPSNN_TILE(10)
    POPSNN_TILE(11)
#undef POPSNN_TILE
    default:
      break;
    // clang-format on
  }
  static_assert(TILE_ROWS <= 12, "productRows handles remainders of up to 11 rows");
}

// c = a . b, as at the top of this file (c += a . b when `accumulate`: a product summed
// over blocks of k held apart). c must not overlap a or b.
inline void denseProduct(unsigned M, unsigned N, unsigned K, const float *a, unsigned aRow,
                         unsigned aCol, const float *b, unsigned ldb, float *c, unsigned ldc,
                         bool accumulate = false) {
  if (K == 0 && accumulate)
    return;
  if (K == 0) { // no terms: c = 0
    for (unsigned i = 0; i < M; ++i)
      for (unsigned j = 0; j < N; ++j)
        c[i * ldc + j] = 0.0f;
    return;
  }
  float ragged[KC * TILE_COLS]; // the last, partial panel, zero-padded to TILE_COLS
  for (unsigned k0 = 0; k0 < K; k0 += KC) {
    const unsigned kc = K - k0 < KC ? K - k0 : KC;
    for (unsigned i0 = 0; i0 < M; i0 += ROW_BLOCK) {
      const unsigned rows = M - i0 < ROW_BLOCK ? M - i0 : ROW_BLOCK;
      const float *ab = a + i0 * aRow + k0 * aCol;
      float *cb = c + i0 * ldc;
      for (unsigned j0 = 0; j0 < N; j0 += TILE_COLS) {
        const unsigned cols = N - j0 < TILE_COLS ? N - j0 : TILE_COLS;
        const float *panel = b + k0 * ldb + j0;
        unsigned panelStride = ldb;
        if (cols < TILE_COLS) {
          for (unsigned k = 0; k < kc; ++k)
            for (unsigned j = 0; j < TILE_COLS; ++j)
              ragged[k * TILE_COLS + j] = j < cols ? panel[k * ldb + j] : 0.0f;
          panel = ragged;
          panelStride = TILE_COLS;
        }
        // The next panel of this k block (b rows `ldb` apart), fetched while this one runs;
        // none before a ragged panel (copied above) nor after the last.
        const float *next = j0 + 2 * TILE_COLS <= N ? b + k0 * ldb + j0 + TILE_COLS : nullptr;
        productRows(rows, kc, ab, aRow, aCol, panel, panelStride, cb + j0, ldc, cols,
                    accumulate || k0 > 0, next);
      }
    }
  }
}

// The dense product pays for every entry, the sparse row kernel only for the non-zero
// ones, at a lower rate per entry: the dense one is as fast or faster from these fractions
// (per mille) of non-zero inputs up. Measured with bench/density_threshold.py on this
// project's machines (results and method in docs/performance/dsnn-engine.md; re-run it elsewhere).
// The weight gradient's sparse kernel differs per instruction set, and so does its threshold: the
// plain loops (IPU) list one input at a time (measured with that kernel on AVX2); other hosts off
// AVX-512 take two inputs at a time, each loaded row of the [B, n] operand, which stays in L2,
// serving both (measured on AVX2); on AVX-512 SPARSE_GROUP inputs share each loaded row (over the
// samples where any is non-zero), which pays on images, whose neighbouring pixels are non-zero
// together, less on the script's scattered entries.
constexpr unsigned DENSE_CURRENT_MIN_PER_MILLE = 300;
#if defined(__IPU__) || defined(POPSNN_PLAIN_LOOPS)
constexpr unsigned DENSE_WEIGHT_GRAD_MIN_PER_MILLE = 500;
#elif defined(__AVX512F__)
constexpr unsigned DENSE_WEIGHT_GRAD_MIN_PER_MILLE = 350;
#else
constexpr unsigned DENSE_WEIGHT_GRAD_MIN_PER_MILLE = 400;
#endif

// The non-zero entries of rows x cols floats, rows `stride` apart.
inline unsigned long long countNonzero(const float *__restrict x, unsigned rows, unsigned cols,
                                       unsigned stride) {
  unsigned long long count = 0;
  for (unsigned r = 0; r < rows; ++r) {
    unsigned inRow = 0;
    for (unsigned c = 0; c < cols; ++c)
      inRow += x[r * stride + c] != 0.0f;
    count += inRow;
  }
  return count;
}

// Whether `nonzero` of `total` entries reach `perMille` (one of the thresholds above).
inline bool denseEnough(unsigned long long nonzero, unsigned long long total, unsigned perMille) {
  return nonzero * 1000ull >= total * perMille;
}

} // namespace dense
} // namespace popsnn
