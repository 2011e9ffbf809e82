// 16 float lanes and a 16-bit lane mask, for kernels written once for AVX-512 and AVX2 + FMA
// (the whole-trace Leaky kernels, LeakyTrace.hpp): an AVX-512 vector with its mask register,
// or two AVX2 vectors with the mask in an integer. The same data layouts either way (a mask
// per 16 neurons), so the host and the vertices do not see which. Each operation is the
// AVX-512 intrinsic's, lane for lane; AVX2 has no masked arithmetic, so a mask becomes a lane
// vector where one is needed (and AMD's masked loads and stores are microcoded: the masked
// forms take them only for a partial vector). A compare's result is a Lanes: the mask
// register on AVX-512, on AVX2 the compare's all-ones / zero lanes themselves, made into bits
// (bitsOf) only where stored, so a spike's mask does not go to bits and back to a vector on
// the membrane's chain every step.
#pragma once

#if !defined(__IPU__) && !defined(POPSNN_PLAIN_LOOPS)
namespace popsnn {
// An empty asm that takes a native vector in a register, so that GCC keeps one load of it for
// several multiply-adds (it would fold a copy of the load into each).
template <class Vector> inline void keepInRegister(Vector &v) { asm("" : "+v"(v)); }
} // namespace popsnn
#endif

#if !defined(__IPU__) && !defined(POPSNN_PLAIN_LOOPS) &&                                           \
    (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)))
#define POPSNN_LANES16 1
#include <immintrin.h>

#include <type_traits>

namespace popsnn {
namespace lanes16 {

#ifdef __AVX512F__
using F = __m512;
using M = __mmask16;
// Vector registers the kernels may fill (accumulators, carries and broadcasts).
constexpr unsigned REGISTERS = 32;

inline F set1(float v) { return _mm512_set1_ps(v); }
inline F zero() { return _mm512_setzero_ps(); }
inline F load(const float *p) { return _mm512_load_ps(p); } // 64-byte aligned
inline void store(float *p, F v) { _mm512_store_ps(p, v); }
inline F loadMasked(M m, const float *p) { return _mm512_maskz_loadu_ps(m, p); }
inline void storeMasked(float *p, M m, F v) { _mm512_mask_storeu_ps(p, m, v); }
inline F add(F a, F b) { return _mm512_add_ps(a, b); }
inline F sub(F a, F b) { return _mm512_sub_ps(a, b); }
inline F mul(F a, F b) { return _mm512_mul_ps(a, b); }
inline F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
inline F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); } // c - a b
inline F abs(F a) { return _mm512_abs_ps(a); }
using Lanes = __mmask16;
inline Lanes noLanes() { return 0; }
inline Lanes lanesOf(M m) { return m; }
inline M bitsOf(Lanes l) { return l; }
inline Lanes greater(M m, F a, F b) { return _mm512_mask_cmp_ps_mask(m, a, b, _CMP_GT_OQ); }
inline F zeroOff(Lanes l, F a) { return _mm512_maskz_mov_ps(l, a); }         // lanes off l zero
inline F zeroOn(Lanes l, F a) { return _mm512_maskz_mov_ps(Lanes(~l), a); }  // lanes on l zero
inline F subOn(F a, Lanes l, F b) { return _mm512_mask_sub_ps(a, l, a, b); } // a - b on l
// a on the lanes of m where s != 0 (NaN included), else 0.
inline F onNonzero(M m, F s, F a) {
  return _mm512_maskz_mov_ps(_mm512_mask_cmp_ps_mask(m, s, zero(), _CMP_NEQ_UQ), a);
}
// 1/x (x >= 1) within an ulp: the 14-bit estimate and a Newton step; 0 for x = inf as the
// division gives (where the step alone makes inf x 0).
inline F reciprocal(F x, F one) {
  const F r = _mm512_rcp14_ps(x);
  const F refined = _mm512_fmadd_ps(r, _mm512_fnmadd_ps(x, r, one), r);
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, zero(), _CMP_NEQ_UQ), refined);
}
using popsnn::keepInRegister;
#else
struct F {
  __m256 lo, hi;
};
using M = unsigned short;
constexpr unsigned REGISTERS = 16 / 2; // 16 ymm registers, two per F

inline F set1(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
inline F zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline F load(const float *p) { return {_mm256_load_ps(p), _mm256_load_ps(p + 8)}; }
inline void store(float *p, F v) {
  _mm256_store_ps(p, v.lo);
  _mm256_store_ps(p + 8, v.hi);
}
// The lanes of 8 mask bits as all-ones / all-zero 32-bit lanes.
inline __m256i laneBits(unsigned bits) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int(bits)), bit), bit);
}
inline F loadMasked(M m, const float *p) {
  if (m == 0xffff)
    return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
  return {_mm256_maskload_ps(p, laneBits(m & 0xffu)), _mm256_maskload_ps(p + 8, laneBits(m >> 8))};
}
inline void storeMasked(float *p, M m, F v) {
  if (m == 0xffff) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
    return;
  }
  _mm256_maskstore_ps(p, laneBits(m & 0xffu), v.lo);
  _mm256_maskstore_ps(p + 8, laneBits(m >> 8), v.hi);
}
inline F add(F a, F b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline F sub(F a, F b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline F mul(F a, F b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline F fmadd(F a, F b, F c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline F fnmadd(F a, F b, F c) {
  return {_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)};
}
inline F abs(F a) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  return {_mm256_and_ps(a.lo, magnitude), _mm256_and_ps(a.hi, magnitude)};
}
// A compare's lanes, all ones or zero (the bits of a Lanes are its sign bits).
struct Lanes {
  __m256 lo, hi;
};
inline Lanes noLanes() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline Lanes lanesOf(M m) {
  return {_mm256_castsi256_ps(laneBits(m & 0xffu)), _mm256_castsi256_ps(laneBits(m >> 8))};
}
inline M bitsOf(Lanes l) {
  return M(unsigned(_mm256_movemask_ps(l.lo)) | unsigned(_mm256_movemask_ps(l.hi)) << 8);
}
inline Lanes greater(M m, F a, F b) {
  Lanes l = {_mm256_cmp_ps(a.lo, b.lo, _CMP_GT_OQ), _mm256_cmp_ps(a.hi, b.hi, _CMP_GT_OQ)};
  if (m != 0xffff) { // the last vector of a row only; constant elsewhere, so no test
    const Lanes on = lanesOf(m);
    l = {_mm256_and_ps(l.lo, on.lo), _mm256_and_ps(l.hi, on.hi)};
  }
  return l;
}
inline F zeroOff(Lanes l, F a) { return {_mm256_and_ps(l.lo, a.lo), _mm256_and_ps(l.hi, a.hi)}; }
inline F zeroOn(Lanes l, F a) {
  return {_mm256_andnot_ps(l.lo, a.lo), _mm256_andnot_ps(l.hi, a.hi)};
}
inline F subOn(F a, Lanes l, F b) { return sub(a, zeroOff(l, b)); } // a - 0 is a, bit for bit
// onNonzero's AVX2 form: the compare's lanes kept as a vector mask (the round trip through
// mask bits cost more than the product it guards in the backward's per-step epilogue).
inline F onNonzero(M m, F s, F a) {
  const __m256 z = _mm256_setzero_ps();
  __m256 lo = _mm256_cmp_ps(s.lo, z, _CMP_NEQ_UQ), hi = _mm256_cmp_ps(s.hi, z, _CMP_NEQ_UQ);
  if (m != 0xffff) {
    lo = _mm256_and_ps(lo, _mm256_castsi256_ps(laneBits(m & 0xffu)));
    hi = _mm256_and_ps(hi, _mm256_castsi256_ps(laneBits(m >> 8)));
  }
  return {_mm256_and_ps(lo, a.lo), _mm256_and_ps(hi, a.hi)};
}
// 1/x (x >= 1) within ~2 ulp: the 12-bit estimate (AVX-512's has 14) and a Newton step; 0
// for x = inf as the division gives. x is bounded to FLT_MAX first, whose estimate is 0 (the
// estimate flushes results below the smallest normal: x >= 8.5e37 gives 0), so the step
// makes 0 x 1, not inf x 0: one min, where a compare and a mask cost two. A NaN x stays NaN
// (min returns its second operand then).
inline __m256 reciprocal8(__m256 x, __m256 one) {
  const __m256 bounded = _mm256_min_ps(_mm256_set1_ps(3.40282347e38f), x);
  const __m256 r = _mm256_rcp_ps(bounded);
  return _mm256_fmadd_ps(r, _mm256_fnmadd_ps(bounded, r, one), r);
}
inline F reciprocal(F x, F one) { return {reciprocal8(x.lo, one.lo), reciprocal8(x.hi, one.hi)}; }
inline void keepInRegister(F &v) {
  popsnn::keepInRegister(v.lo);
  popsnn::keepInRegister(v.hi);
}
#endif

// All 16 lanes.
constexpr M ALL = M(0xffff);

} // namespace lanes16

namespace lif {

// block(V, true, j, mask) for the run-time V < FULL: a case per block size.
template <unsigned FULL, unsigned V = 0, class Block>
inline void maskedColumnBlock(unsigned vectors, Block &block, unsigned j, lanes16::M mask) {
  if constexpr (V < FULL) {
    if (vectors == V)
      block(std::integral_constant<unsigned, V>{}, std::true_type{}, j, mask);
    else
      maskedColumnBlock<FULL, V + 1>(vectors, block, j, mask);
  }
}

// The column blocks of a row of n columns: block(V, masked, j, mask) for whole blocks of
// FULL vectors of 16 columns from j (masked false, mask all ones), then for the rest: V
// whole vectors and a last one of 1..16 columns in `mask` (masked true); V and masked are
// std::integral_constant, so each block size is its own kernel. One loop for every row kernel.
template <unsigned FULL, class Block> inline void forColumnBlocks(unsigned n, Block block) {
  unsigned j = 0;
  for (; j + 16 * FULL <= n; j += 16 * FULL)
    block(std::integral_constant<unsigned, FULL>{}, std::false_type{}, j, lanes16::ALL);
  const unsigned rest = n - j;
  if (rest == 0)
    return;
  // (rest - 1) / 16 full vectors, then 1..16 masked columns.
  const auto mask = lanes16::M((1u << (rest - (rest - 1) / 16 * 16)) - 1u);
  maskedColumnBlock<FULL>((rest - 1) / 16, block, j, mask);
}

} // namespace lif
} // namespace popsnn
#endif
