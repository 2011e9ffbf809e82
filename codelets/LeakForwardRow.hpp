// The fused forward step of a row of Leaky neurons (LifForward.cpp): membrane update, masked
// surrogate and spikes in one vector pass, where the portable path makes three (forwardRow,
// surrogateRow, spikesOf). AVX-512 and AVX2 + FMA forms; POPSNN_FUSED_LEAK_FORWARD says
// whether this build has one. Inline functions only.
#pragma once

#include "LifCommon.hpp"

namespace popsnn {
namespace lif {

#ifdef POPSNN_SPARSE_ROWS_AVX512
// One step of a row of Leaky neurons in one pass: the membrane update (as the plain loops
// compute it, multiply-adds fused the same way), the masked surrogate into sg, and the
// spikes (prev, ids appended as appendSpikes). Not for the sigmoid surrogate (exp).
#define POPSNN_FUSED_LEAK_FORWARD 1
inline unsigned leakForwardRow(unsigned n, float beta, float threshold, unsigned reset,
                               unsigned surrogate, float param, unsigned rule, float ruleValue,
                               const float *__restrict in, float *__restrict u,
                               float *__restrict prev, float *__restrict sg, unsigned offset,
                               int *__restrict ids, unsigned needed, unsigned capacity) {
  const __m512 b = _mm512_set1_ps(beta), th = _mm512_set1_ps(threshold);
  const __m512 one = _mm512_set1_ps(1.0f), k = _mm512_set1_ps(param);
  const __m512 scale = _mm512_set1_ps(3.14159265358979323846f * param);
  const __m512 half = _mm512_set1_ps(2.0f), halfParam = _mm512_set1_ps(param / 2.0f);
  const __m512 rv = _mm512_set1_ps(ruleValue);
  const __m512 absMask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  __m512i lane = firstLanes(offset);
  const __m512i sixteen = _mm512_set1_epi32(16);
  for (unsigned j0 = 0; j0 < n; j0 += 16) {
    const unsigned rest = n - j0;
    const __mmask16 m = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1u);
    const __m512 uo = _mm512_maskz_loadu_ps(m, u + j0);
    const __m512 x = _mm512_maskz_loadu_ps(m, in + j0);
    const __m512 p = _mm512_maskz_loadu_ps(m, prev + j0);
    __m512 un;
    if (reset == RESET_SUBTRACT)
      un = _mm512_fnmadd_ps(p, th, _mm512_fmadd_ps(b, uo, x));
    else if (reset == RESET_ZERO)
      un = _mm512_fmadd_ps(_mm512_mul_ps(b, _mm512_sub_ps(one, p)), uo, x);
    else
      un = _mm512_fmadd_ps(b, uo, x);
    _mm512_mask_storeu_ps(u + j0, m, un);
    const __m512 d = _mm512_sub_ps(un, th);
    __m512 s;
    if (surrogate == FAST_SIGMOID) {
      const __m512 q = _mm512_fmadd_ps(k, _mm512_and_ps(d, absMask), one);
      s = _mm512_div_ps(one, _mm512_mul_ps(q, q));
    } else if (surrogate == ATAN) {
      const __m512 z = _mm512_div_ps(_mm512_mul_ps(scale, d), half);
      s = _mm512_div_ps(halfParam, _mm512_fmadd_ps(z, z, one));
    } else {
      s = one;
    }
    if (rule == RULE_WINDOW)
      s = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(_mm512_and_ps(d, absMask), rv, _CMP_LT_OQ), s);
    else if (rule == RULE_ONE_SIDED)
      s = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(un, rv, _CMP_GE_OQ), s);
    _mm512_mask_storeu_ps(sg + j0, m, s);
    const __mmask16 spikes = _mm512_mask_cmp_ps_mask(m, un, th, _CMP_GT_OQ);
    _mm512_mask_storeu_ps(prev + j0, m, _mm512_maskz_mov_ps(spikes, one));
    needed = appendMask16(spikes, lane, offset + j0, ids, needed, capacity);
    lane = _mm512_add_epi32(lane, sixteen);
  }
  return needed;
}
#endif

#if defined(POPSNN_SPIKES_AVX2) && defined(__FMA__)
// leakForwardRow's AVX2 form (8 lanes): one pass over U for the update, the masked surrogate
// and the spikes, where three passes (forwardRow, surrogateRow, spikesOf) took ~22% of a DSNN
// step's CPU time on an AVX2 machine. The last partial vector runs on a zero-padded copy:
// AMD's masked stores (vmaskmovps) are microcoded: with them the step was slower than the
// three passes.
#define POPSNN_FUSED_LEAK_FORWARD 1
inline unsigned leakForwardRow(unsigned n, float beta, float threshold, unsigned reset,
                               unsigned surrogate, float param, unsigned rule, float ruleValue,
                               const float *__restrict in, float *__restrict u,
                               float *__restrict prev, float *__restrict sg, unsigned offset,
                               int *__restrict ids, unsigned needed, unsigned capacity) {
  const __m256 b = _mm256_set1_ps(beta), th = _mm256_set1_ps(threshold);
  const __m256 one = _mm256_set1_ps(1.0f), k = _mm256_set1_ps(param);
  const __m256 scale = _mm256_set1_ps(3.14159265358979323846f * param);
  const __m256 two = _mm256_set1_ps(2.0f), halfParam = _mm256_set1_ps(param / 2.0f);
  const __m256 rv = _mm256_set1_ps(ruleValue);
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  // 8 neurons: U, S and the masked surrogate updated in place; returns the spikes' bit mask.
  const auto eight = [&](float *__restrict uj, const float *__restrict xj, float *__restrict pj,
                         float *__restrict sj) {
    const __m256 uo = _mm256_loadu_ps(uj), x = _mm256_loadu_ps(xj), p = _mm256_loadu_ps(pj);
    __m256 un;
    if (reset == RESET_SUBTRACT)
      un = _mm256_fnmadd_ps(p, th, _mm256_fmadd_ps(b, uo, x));
    else if (reset == RESET_ZERO)
      un = _mm256_fmadd_ps(_mm256_mul_ps(b, _mm256_sub_ps(one, p)), uo, x);
    else
      un = _mm256_fmadd_ps(b, uo, x);
    _mm256_storeu_ps(uj, un);
    const __m256 d = _mm256_sub_ps(un, th);
    __m256 sv = one;
    if (surrogate == FAST_SIGMOID) {
      const __m256 q = _mm256_fmadd_ps(k, _mm256_and_ps(d, absMask), one);
      sv = _mm256_div_ps(one, _mm256_mul_ps(q, q));
    } else if (surrogate == ATAN) {
      const __m256 z = _mm256_div_ps(_mm256_mul_ps(scale, d), two);
      sv = _mm256_div_ps(halfParam, _mm256_fmadd_ps(z, z, one));
    }
    if (rule == RULE_WINDOW)
      sv = _mm256_and_ps(_mm256_cmp_ps(_mm256_and_ps(d, absMask), rv, _CMP_LT_OQ), sv);
    else if (rule == RULE_ONE_SIDED)
      sv = _mm256_and_ps(_mm256_cmp_ps(un, rv, _CMP_GE_OQ), sv);
    _mm256_storeu_ps(sj, sv);
    const __m256 spikes = _mm256_cmp_ps(un, th, _CMP_GT_OQ);
    _mm256_storeu_ps(pj, _mm256_and_ps(spikes, one));
    return unsigned(_mm256_movemask_ps(spikes));
  };
  __m256i lane = firstLanes8(offset);
  const __m256i eightLanes = _mm256_set1_epi32(8);
  unsigned j0 = 0;
  for (; j0 + 8 <= n; j0 += 8) {
    const unsigned bits = eight(u + j0, in + j0, prev + j0, sg + j0);
    needed = appendMask8(bits, lane, offset + j0, ids, needed, capacity);
    lane = _mm256_add_epi32(lane, eightLanes);
  }
  if (j0 < n) {
    // The padded copy filled by masked loads (cheap on AMD, unlike masked stores): filled
    // float by float, its wide loads in `eight` waited on failed store forwarding (perf: the
    // tail of a 100-neuron row took ~10% of this kernel).
    const unsigned rest = n - j0;
    const __m256i keep =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(int(rest)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    alignas(32) float ut[8], xt[8], pt[8], st[8];
    _mm256_store_ps(ut, _mm256_maskload_ps(u + j0, keep));
    _mm256_store_ps(xt, _mm256_maskload_ps(in + j0, keep));
    _mm256_store_ps(pt, _mm256_maskload_ps(prev + j0, keep));
    const unsigned bits = eight(ut, xt, pt, st) & ((1u << rest) - 1u);
    for (unsigned j = 0; j < rest; ++j) {
      u[j0 + j] = ut[j];
      prev[j0 + j] = pt[j];
      sg[j0 + j] = st[j];
    }
    needed = appendMask8(bits, lane, offset + j0, ids, needed, capacity);
  }
  return needed;
}
#endif

#ifdef POPSNN_FUSED_LEAK_FORWARD
// Neurons of one leakForwardSamples pass at most: its ids on the stack.
constexpr unsigned SAMPLE_BLOCK_NEURONS = 1024;

// leakForwardRow over every sample of a step at once: in, u, prev and sg are [batch, n], so a
// block of whole samples is one row of their neurons. For a narrow layer (a readout of 5 neurons
// a shard) a call per sample cost more than its neurons; each neuron's update is its own, so the
// floats are a call per sample's. Then `sample(b, ids, count)` gets sample b's spikes, ids
// offset + j ascending (as leakForwardRow appends them). n <= SAMPLE_BLOCK_NEURONS.
template <class PerSample>
inline void leakForwardSamples(unsigned batch, unsigned n, float beta, float threshold,
                               unsigned reset, unsigned surrogate, float param, unsigned rule,
                               float ruleValue, const float *in, float *u, float *prev, float *sg,
                               unsigned offset, PerSample sample) {
  alignas(64) int ids[SAMPLE_BLOCK_NEURONS + 16]; // room for a whole vector's store past the end
  const unsigned perBlock = SAMPLE_BLOCK_NEURONS / n;
  for (unsigned b0 = 0; b0 < batch; b0 += perBlock) {
    const unsigned b1 = batch - b0 < perBlock ? batch : b0 + perBlock, k0 = b0 * n;
    const unsigned count =
        leakForwardRow((b1 - b0) * n, beta, threshold, reset, surrogate, param, rule, ruleValue,
                       in + k0, u + k0, prev + k0, sg + k0, 0, ids, 0, SAMPLE_BLOCK_NEURONS + 16);
    unsigned k = 0;
    for (unsigned b = b0; b < b1; ++b) { // the block's ids are (b - b0) n + j: split by sample
      const unsigned first = (b - b0) * n, end = first + n, from = k;
      for (; k < count && unsigned(ids[k]) < end; ++k)
        ids[k] += int(offset) - int(first);
      sample(b, ids + from, k - from);
    }
  }
}
#endif

} // namespace lif
} // namespace popsnn
