// The whole-trace Leaky backward (AVX-512 and AVX2 + FMA host builds, written in the 16
// lanes of Lanes16.hpp): one sample's T steps of a block of
// neurons with dL/dU and sum_t dL/dI in vector registers, for a layer-major shard (all T
// steps in one vertex call) with direct-current input and no sparse rule, the DSNN's first
// layer. The per-step kernel (leakBackwardRow in LifCommon.hpp) sweeps all samples at each
// step, so dL/dU and sum_t dL/dI go to memory and back every step; here they are loaded
// once per sample and block. Synaptic takes the same kernels, forward and backward, with its
// current J as a second state (SYN: stepped and recomputed, dL/dJ carried beside dL/dU).
//
// The surrogate trace [T, B, n] (12.8 MB per training step for the DSNN at B 128, T 25) is
// not read: the block's membrane is recomputed from I (constant over the steps for direct
// input) into an L1-sized buffer with the forward's arithmetic (leakForwardRow's), so the
// spikes are the stored ones and the surrogate is its formula with the division replaced by
// a refined reciprocal (within an ulp, ~2 on AVX2: float tolerance, docs/numerics.md). Per entry
// the per-step kernel's arithmetic otherwise, in the same order over t; the bias gradient adds its
// terms in another order (per sample over t, then over samples). Two samples go through a block
// together, so each W row loaded serves both (the K-wide product dL/dS = W^T dL/dI of the next
// layer was ~57% of this kernel's time, the divisions most of the rest).
#pragma once

#include <cmath>
#include <cstddef>

#include "BackwardRows.hpp"
#include "LifCommon.hpp"

#ifdef POPSNN_LANES16
#define POPSNN_LEAK_TRACE 1

namespace popsnn {
namespace lif {

namespace v16 = lanes16;

// Vectors of 16 neurons per backward block (a pair of samples' 4 vectors each: 4 membrane
// chains in flight per recompute, each step waiting on the last spike); a block buffers the
// recomputed surrogates of up to codes::TRACE_MAX_STEPS steps (x 16 x 8 floats: 32 KiB).
// And per forward block: 4 chains again on AVX-512; 3 on AVX2, whose 16 registers 4 vectors'
// membranes, spike lanes and inputs overfill (the forward kernel ~1.3x faster at 3 than at 4).
// The backward's recompute in passes of 4 vectors on AVX-512, of 2 on AVX2 (at 4 its inputs
// and spike lanes went to the stack and back every step; 2 vectors are still 4 ymm chains).
constexpr unsigned TRACE_BACKWARD_VECS = 8;
constexpr unsigned TRACE_FORWARD_VECS = v16::REGISTERS < 32 ? 3 : 4;
constexpr unsigned RECOMPUTE_VECS = v16::REGISTERS < 32 ? 2 : 4;
// The widest next-layer row (padded) whose T steps a backward gathers at once per pair of
// samples (2 x TRACE_MAX_STEPS x 32 floats: 16 KiB), rather than once per block and step.
constexpr unsigned GATHER_ONCE_WIDTH = 32;

// Whether a shard's forward and backward take these kernels is codes::leakTraceApplies
// (VertexEnums.hpp, shared with the host, which sizes the trace by it): the forward then
// writes no surrogate trace (its memory stages the spike masks), so both vertices decide by
// that one rule (the host sets `record` and `isOutput` alike, `dense` for no rule).

// The next layer's dL/dI rows of (t, b) for leakBackwardBatch, slot 0 or 1 of a pair of
// samples: read in place when one downstream shard holds whole rows, else gathered from the
// shards' blocks -- all T steps of the pair at once when narrow (a readout: every block of
// the pair reads them again), else per (step, block) into two scratch rows.
struct PairGradRows {
  const float *grads;
  unsigned K, shardSize, T, batch;
  float *scratchRows; // [2, pushWidth(K)]
  alignas(64) float pairRows[2 * TRACE_MAX_STEPS * GATHER_ONCE_WIDTH];
  unsigned gathered; // the first sample of the pair in pairRows (batch: none)

  PairGradRows(const float *g, unsigned k, unsigned shard, unsigned steps, unsigned b, float *s)
      : grads(g), K(k), shardSize(shard), T(steps), batch(b), scratchRows(s), gathered(b) {}
  // Whether every row returned stays valid (in place, or the pair's gathered steps): not the
  // per-step scratch rows of a wide next layer.
  bool rowsHeld() const { return shardSize >= K || pushWidth(K) <= GATHER_ONCE_WIDTH; }
  const float *operator()(unsigned t, unsigned b, unsigned slot) {
    const unsigned P = pushWidth(K);
    if (shardSize >= K)
      return grads + (t * batch + b) * K;
    if (P > GATHER_ONCE_WIDTH) {
      backward_rows::gatherNextGrad(grads, scratchRows + slot * P, K, shardSize, t * batch + b,
                                    T * batch);
      return scratchRows + slot * P;
    }
    if (b - slot != gathered) {
      gathered = b - slot;
      for (unsigned u = 0; u < T; ++u)
        for (unsigned s = 0; s < 2 && gathered + s < batch; ++s)
          backward_rows::gatherNextGrad(grads, &pairRows[(2 * u + s) * P], K, shardSize,
                                        u * batch + gathered + s, T * batch);
    }
    return &pairRows[(2 * t + slot) * P];
  }
};

// alpha: Synaptic's current decay (the backward's SYN kernels; unused by Leaky's). atan's
// surrogate (param / 2) / (1 + z^2), z = pi param d / 2, is taken as 1 / (a + w^2) with
// a = 2 / param and w = sqrt(a) z = atanScale d: no multiplies by pi param / 2, 1/2 and
// param / 2 around the reciprocal (the recompute is bound by the multiply-add ports).
struct LeakVectors {
  v16::F beta, threshold, one, k, atanScale, atanOffset, alpha;
  LeakVectors(float b, float th, float param, float a = 0.0f)
      : beta(v16::set1(b)), threshold(v16::set1(th)), one(v16::set1(1.0f)), k(v16::set1(param)),
        atanScale(v16::set1(3.14159265358979323846f * std::sqrt(param / 2.0f))),
        atanOffset(v16::set1(2.0f / param)), alpha(v16::set1(a)) {}
};

// The surrogate at d = U - threshold, leakForwardRow's formula (not Sigmoid) rearranged, its
// division by a refined reciprocal (docs/numerics.md section 3: float tolerance, not bit for
// bit); a denominator that overflows gives 0, as the division does.
template <unsigned SURROGATE> inline v16::F leakSurrogate(v16::F d, const LeakVectors &c) {
  if constexpr (SURROGATE == FAST_SIGMOID) {
    const v16::F q = v16::fmadd(c.k, v16::abs(d), c.one);
    return v16::reciprocal(v16::mul(q, q), c.one);
  } else if constexpr (SURROGATE == ATAN) {
    const v16::F w = v16::mul(c.atanScale, d);
    return v16::reciprocal(v16::fmadd(w, w, c.atanOffset), c.one);
  } else {
    return c.one;
  }
}

// The membrane update of leakForwardRow: beta U + I, then the reset by S[t-1] (its lanes
// set in s). The subtract reset as a masked subtraction: a - 1 x threshold rounded once is
// a - threshold rounded once, bit for bit the fused form's, with the spike as a mask (no
// 0/1 vector to make each step) and an add in place of a multiply-add on the chain.
template <unsigned RESET>
inline v16::F leakUpdate(v16::F u, v16::F x, v16::Lanes s, const LeakVectors &c) {
  if constexpr (RESET == RESET_SUBTRACT) {
    return v16::subOn(v16::fmadd(c.beta, u, x), s, c.threshold);
  } else if constexpr (RESET == RESET_ZERO) { // beta (1 - S) is beta or +0 exactly
    return v16::fmadd(v16::zeroOn(s, c.beta), u, x);
  } else {
    return v16::fmadd(c.beta, u, x);
  }
}

// Synaptic's update (Synaptic::forwardRow, multiply-adds fused as GCC fuses that loop's):
// J = alpha J + I, then U from J as Leaky's from I; the zero reset zeroes the whole update.
template <unsigned RESET>
inline v16::F synapticUpdate(v16::F u, v16::F j, v16::Lanes s, const LeakVectors &c) {
  if constexpr (RESET == RESET_ZERO)
    return v16::zeroOn(s, v16::fmadd(c.beta, u, j));
  else
    return leakUpdate<RESET>(u, j, s, c);
}

// One step of the model's states from the input x: U (mem) alone, or SYN: J (cur), then U.
template <unsigned RESET, bool SYN>
inline void stateUpdate(v16::F &mem, v16::F &cur, v16::F x, v16::Lanes s, const LeakVectors &c) {
  if constexpr (SYN) {
    cur = v16::fmadd(c.alpha, cur, x);
    mem = synapticUpdate<RESET>(mem, cur, s, c);
  } else {
    mem = leakUpdate<RESET>(mem, x, s, c);
  }
}

inline v16::M laneMask(unsigned v, unsigned V, v16::M lastMask) {
  return v + 1 == V ? lastMask : v16::ALL;
}

// Forward, phase 1: T steps of V vectors of neurons (the last masked to lastMask) of one
// sample: I in x, from the zero state (all T steps are one call), the last step's U and S
// written to u and prev (SYN: J to j), so nothing zeroes them first; the spike mask of vector v at
// step t into masks[t * maskStep + v]. Phase 2 (the vertex) appends the ids in step order, as the
// id trace's rows are packed.
template <unsigned V, unsigned RESET, bool SYN>
inline void leakForwardSteps(const LeakVectors &c, unsigned T, const float *__restrict x,
                             float *__restrict u, float *__restrict j, float *__restrict prev,
                             unsigned short *__restrict masks, unsigned maskStep, v16::M lastMask) {
  v16::F in[V], mem[V], cur[V];
  v16::Lanes spk[V]; // S[t-1] (stored as 0 / 1)
#pragma GCC unroll 8
  for (unsigned v = 0; v < V; ++v) {
    in[v] = v16::loadMasked(laneMask(v, V, lastMask), x + 16 * v);
    mem[v] = cur[v] = v16::zero();
    spk[v] = v16::noLanes();
  }
  for (unsigned t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (unsigned v = 0; v < V; ++v) {
      stateUpdate<RESET, SYN>(mem[v], cur[v], in[v], spk[v], c);
      spk[v] = v16::greater(laneMask(v, V, lastMask), mem[v], c.threshold);
      masks[std::size_t(t) * maskStep + v] = v16::bitsOf(spk[v]);
    }
#pragma GCC unroll 8
  for (unsigned v = 0; v < V; ++v) {
    v16::storeMasked(u + 16 * v, laneMask(v, V, lastMask), mem[v]);
    if constexpr (SYN)
      v16::storeMasked(j + 16 * v, laneMask(v, V, lastMask), cur[v]);
    v16::storeMasked(prev + 16 * v, laneMask(v, V, lastMask), v16::zeroOff(spk[v], c.one));
  }
}

// Phase 1 over a row of n neurons: blocks of TRACE_FORWARD_VECS vectors, then the rest
// (forColumnBlocks).
template <unsigned RESET, bool SYN>
inline void leakForwardSample(const LeakVectors &c, unsigned T, unsigned n, const float *x,
                              float *u, float *cur, float *prev, unsigned short *masks,
                              unsigned maskStep) {
  forColumnBlocks<TRACE_FORWARD_VECS>(n, [&](auto v, auto masked, unsigned j, v16::M mask) {
    constexpr unsigned W = decltype(v)::value + decltype(masked)::value;
    leakForwardSteps<W, RESET, SYN>(c, T, x + j, u + j, SYN ? cur + j : nullptr, prev + j,
                                    masks + j / 16, maskStep, mask);
  });
}

// Phase 2: the ids (offset + j) of a row's spike masks (one per 16 neurons) appended to
// an id buffer of `capacity` entries, counted past it, as appendSpikes does.
inline unsigned appendMaskedIds(const unsigned short *__restrict masks, unsigned vectors,
                                unsigned offset, int *__restrict ids, unsigned capacity) {
  unsigned needed = 0;
#ifdef __AVX512F__
  __m512i lane = lif::firstLanes(offset);
  const __m512i sixteen = _mm512_set1_epi32(16);
  for (unsigned v = 0; v < vectors; ++v) {
    const v16::M s = masks[v];
    if (needed + 16 <= capacity) {
      _mm512_storeu_si512(ids + needed, _mm512_maskz_compress_epi32(s, lane));
      needed += unsigned(__builtin_popcount(s));
    } else {
      needed = appendBits(s, offset + 16 * v, ids, needed, capacity);
    }
    lane = _mm512_add_epi32(lane, sixteen);
  }
#else // AVX2 (POPSNN_LANES16 without AVX-512)
  // 8 ids packed per byte of a mask by a table, no branch on the bits: twice the bit loop's
  // speed at 2-20% spikes (its branches per spike and per word mispredict)
  __m256i lane = firstLanes8(offset);
  const __m256i eight = _mm256_set1_epi32(8);
  for (unsigned v = 0; v < vectors; ++v) {
    const unsigned s = masks[v];
    if (needed + 16 <= capacity) {
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(ids + needed),
                          _mm256_permutevar8x32_epi32(lane, packedLaneOrder(s & 0xffu)));
      needed += unsigned(__builtin_popcount(s & 0xffu));
      _mm256_storeu_si256(
          reinterpret_cast<__m256i *>(ids + needed),
          _mm256_permutevar8x32_epi32(_mm256_add_epi32(lane, eight), packedLaneOrder(s >> 8)));
      needed += unsigned(__builtin_popcount(s >> 8));
    } else {
      needed = appendBits(s, offset + 16 * v, ids, needed, capacity);
    }
    lane = _mm256_add_epi32(lane, _mm256_add_epi32(eight, eight));
  }
#endif
  return needed;
}

// The forward's surrogates of vectors [v0, v0 + W) of a block of V, steps 0..T-1, recomputed
// from I (x) and the zero state into sg[t * 16 V + 16 v], and the spikes of each step into
// spikes[t * V + v] (only the zero reset's backward reads them). SYN: Synaptic's two states.
template <unsigned W, unsigned V, unsigned RESET, unsigned SURROGATE, bool SYN>
inline void leakRecompute(const LeakVectors &c, unsigned T, const float *__restrict x, unsigned v0,
                          v16::M lastMask, float *__restrict sg, v16::M *__restrict spikes) {
  v16::F in[W], mem[W], cur[W];
  v16::Lanes spk[W];
#pragma GCC unroll 8
  for (unsigned w = 0; w < W; ++w) {
    in[w] = v16::loadMasked(laneMask(v0 + w, V, lastMask), x + 16 * (v0 + w));
    mem[w] = cur[w] = v16::zero();
    spk[w] = v16::noLanes();
  }
  for (unsigned t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (unsigned w = 0; w < W; ++w) {
      const unsigned v = v0 + w;
      stateUpdate<RESET, SYN>(mem[w], cur[w], in[w], spk[w], c);
      v16::store(sg + (t * V + v) * 16, leakSurrogate<SURROGATE>(v16::sub(mem[w], c.threshold), c));
      spk[w] = v16::greater(laneMask(v, V, lastMask), mem[w], c.threshold);
      if constexpr (RESET == RESET_ZERO)
        spikes[t * V + v] = v16::bitsOf(spk[w]);
    }
}

// Backward of a group of samples: the next layer's weights by downstream neuron (K rows of
// n, from this block's first neuron); dL/dI[t] of sample s written to
// out + t * outStep + s * n when out is given (the samples' rows of x, gU, acc lie n apart).
// rowsHeld: the gradRow given beside them keeps every row it returned valid (no per-step
// scratch), so the product may hold two steps' rows at once.
struct BackwardRows {
  const float *wT;
  unsigned n;
  unsigned K;
  float *out;
  unsigned outStep;
  bool rowsHeld = false;
};

// Vectors of a block for S samples at once: S x V accumulators, carries and sums stay in
// registers on AVX-512 (3 S V <= 24 of the 32); AVX2 takes them in passes (carryVectors).
template <unsigned S> constexpr unsigned blockVectors() { return TRACE_BACKWARD_VECS / S; }
// Vectors per pass of the product (its S x W accumulators, S broadcasts and a row vector)
// and of the carries (3 S W): a whole block on AVX-512; on AVX2 a block's passes take
// fewer, so that they stay in the 16 ymm registers.
template <unsigned S> constexpr unsigned productVectors() { return v16::REGISTERS / 2 / S; }
template <unsigned S> constexpr unsigned carryVectors() { return v16::REGISTERS / 4 / S; }
// Vectors per recompute pass: RECOMPUTE_VECS, a block of up to 4 in one on AVX-512, else halves.
template <unsigned V> constexpr unsigned recomputeVectors() {
  return V <= RECOMPUTE_VECS ? V : RECOMPUTE_VECS < 4 ? RECOMPUTE_VECS : (V + 1) / 2;
}

// f(V0, W) for the passes [V0, V0 + W) over V vectors, C at a time (both compile-time).
template <unsigned V, unsigned C, unsigned V0 = 0, class Fn> inline void forChunks(Fn &&f) {
  if constexpr (V0 < V) {
    f(std::integral_constant<unsigned, V0>{},
      std::integral_constant<unsigned, (V - V0 < C ? V - V0 : C)>{});
    forChunks<V, C, V0 + C>(f);
  }
}

// Steps t - u, u < U, of nextLayerProducts at once (g[u][s]: sample b + s's row at t - u): U x S
// x W accumulators, each W vector loaded once for the U S sums. Each sum adds its K terms in
// order, whatever U: the same floats.
template <unsigned U, unsigned S, unsigned V, unsigned V0, unsigned W>
inline void productPass(const float *const (&g)[U][S], unsigned t, const float *__restrict wT,
                        unsigned K, unsigned n, v16::M lastMask,
                        float (*sg)[TRACE_MAX_STEPS * 16 * V]) {
  v16::F sum[U][S][W];
#pragma GCC unroll 8
  for (unsigned u = 0; u < U; ++u)
#pragma GCC unroll 8
    for (unsigned s = 0; s < S; ++s)
#pragma GCC unroll 8
      for (unsigned w = 0; w < W; ++w)
        sum[u][s][w] = v16::zero();
  const float *__restrict row = wT + 16 * V0; // stepped by n: no k * n address per row
  for (unsigned k = 0; k < K; ++k, row += n) {
    v16::F gk[U][S];
#pragma GCC unroll 8
    for (unsigned u = 0; u < U; ++u)
#pragma GCC unroll 8
      for (unsigned s = 0; s < S; ++s)
        gk[u][s] = v16::set1(g[u][s][k]);
#pragma GCC unroll 8
    for (unsigned w = 0; w < W; ++w) {
      v16::F vw = v16::loadMasked(laneMask(V0 + w, V, lastMask), row + 16 * w);
      if constexpr (U * S > 1)   // in a register for the U S sums: GCC would fold a copy
        v16::keepInRegister(vw); // of the load into each multiply-add
#pragma GCC unroll 8
      for (unsigned u = 0; u < U; ++u)
#pragma GCC unroll 8
        for (unsigned s = 0; s < S; ++s)
          sum[u][s][w] = v16::fmadd(gk[u][s], vw, sum[u][s][w]);
    }
  }
#pragma GCC unroll 8
  for (unsigned u = 0; u < U; ++u)
#pragma GCC unroll 8
    for (unsigned s = 0; s < S; ++s)
#pragma GCC unroll 8
      for (unsigned w = 0; w < W; ++w) {
        float *p = sg[s] + ((t - u) * V + V0 + w) * 16;
        const v16::F sv = v16::load(p); // 0 where the surrogate is 0, even if the sum is inf
        v16::store(p,
                   v16::onNonzero(laneMask(V0 + w, V, lastMask), sv, v16::mul(sv, sum[u][s][w])));
      }
}

// For every step t: e[s] = sum_k g[s][k] W[k] over V vectors of a row of W (K rows n apart),
// each W vector loaded once for the S samples, multiplied into the surrogates sg[s] in place
// (zero where the surrogate is, whatever e is). All T steps before the carries' pass, so that
// pass makes no call: around one per step all 32 vector registers are the callee's, and the
// carries and sums went to the stack and back every step. Out of the caller's loop: inlined
// there, GCC spilled the broadcasts to the stack and reloaded them in every multiply-add.
// Two steps per pass where their 2 S W accumulators, 2 S broadcasts and a row vector fit the
// registers (AVX-512) and gradRow's rows stay valid (rowsHeld): S W accumulators alone are just
// the multiply-adds' latency times their ports, and each W vector then serves twice the sums.
template <unsigned S, unsigned V, unsigned V0, unsigned W, class GradRow>
__attribute__((noinline)) void
nextLayerProducts(GradRow &gradRow, unsigned T, unsigned b, const float *__restrict wT, unsigned K,
                  unsigned n, v16::M lastMask, float (*sg)[TRACE_MAX_STEPS * 16 * V],
                  bool rowsHeld) {
  constexpr unsigned U = 2 * S * W + 2 * S + 1 <= v16::REGISTERS ? 2 : 1;
  unsigned t = T;
  if constexpr (U > 1)
    for (; rowsHeld && t >= U; t -= U) {
      const float *g[U][S];
#pragma GCC unroll 8
      for (unsigned u = 0; u < U; ++u)
#pragma GCC unroll 8
        for (unsigned s = 0; s < S; ++s)
          g[u][s] = gradRow(t - 1 - u, b + s, s);
      productPass<U, S, V, V0, W>(g, t - 1, wT, K, n, lastMask, sg);
    }
  while (t-- > 0) {
    const float *g[1][S];
#pragma GCC unroll 8
    for (unsigned s = 0; s < S; ++s)
      g[0][s] = gradRow(t, b + s, s);
    productPass<1, S, V, V0, W>(g, t, wT, K, n, lastMask, sg);
  }
}

// The carries' pass of leakBackwardSteps over vectors [V0, V0 + W) of its block of V: the
// surrogate terms (sg: dL/dS already multiplied in) through dL/dU (and SYN's dL/dJ) from
// t = T-1 down; dL/dI to out, the carries to gU (gJ), the sums to acc and added to gb.
template <unsigned S, unsigned V, unsigned V0, unsigned W, unsigned RESET, bool SYN>
inline void leakCarries(const LeakVectors &c, unsigned T, const BackwardRows &in,
                        const float (*sg)[TRACE_MAX_STEPS * 16 * V],
                        const v16::M (*spikes)[TRACE_MAX_STEPS * V], float *__restrict gU,
                        float *__restrict gJ, float *__restrict acc, float *__restrict gb,
                        v16::M lastMask) {
  const unsigned n = in.n;
  // Locals, not reads through `in` and `c` after each store (which GCC must assume changed).
  float *__restrict const out = in.out;
  const std::size_t outStep = in.outStep;
  const v16::F beta = c.beta, alpha = c.alpha;
  v16::F carry[S][W], carryJ[S][W], sum[S][W];
#pragma GCC unroll 8
  for (unsigned s = 0; s < S; ++s)
#pragma GCC unroll 8
    for (unsigned w = 0; w < W; ++w)
      carry[s][w] = carryJ[s][w] = sum[s][w] = v16::zero();
  for (unsigned t = T; t-- > 0;)
#pragma GCC unroll 8
    for (unsigned s = 0; s < S; ++s)
#pragma GCC unroll 8
      for (unsigned w = 0; w < W; ++w) {
        const unsigned v = V0 + w;
        const v16::F term = v16::load(sg[s] + (t * V + v) * 16);
        if constexpr (RESET == RESET_ZERO) // a spike at t cuts the leak path
          carry[s][w] = v16::zeroOn(v16::lanesOf(spikes[s][t * V + v]), carry[s][w]);
        carry[s][w] = v16::fmadd(beta, carry[s][w], term);
        v16::F dI = carry[s][w];
        if constexpr (SYN) {
          if (RESET == RESET_ZERO && t > 0) // S[t-1] reset U[t]'s whole update, J's term too
            dI = v16::zeroOn(v16::lanesOf(spikes[s][(t - 1) * V + v]), dI);
          dI = carryJ[s][w] = v16::fmadd(alpha, carryJ[s][w], dI);
        }
        sum[s][w] = v16::add(sum[s][w], dI);
        if (out)
          v16::storeMasked(out + t * outStep + s * n + 16 * v, laneMask(v, V, lastMask), dI);
      }
#pragma GCC unroll 8
  for (unsigned s = 0; s < S; ++s)
#pragma GCC unroll 8
    for (unsigned w = 0; w < W; ++w) {
      const unsigned v = V0 + w;
      const v16::M m = laneMask(v, V, lastMask);
      v16::storeMasked(gU + s * n + 16 * v, m, carry[s][w]);
      if constexpr (SYN)
        v16::storeMasked(gJ + s * n + 16 * v, m, carryJ[s][w]);
      v16::storeMasked(acc + s * n + 16 * v, m, sum[s][w]);
      v16::storeMasked(gb + 16 * v, m, v16::add(v16::loadMasked(m, gb + 16 * v), sum[s][w]));
    }
}

// Backward: T steps, t = T-1 .. 0, of V vectors of neurons (the last masked to lastMask) of
// S samples b.., leakBackwardBlock's arithmetic on the recomputed surrogates: dL/dS = g . W^T,
// dL/dU = (sg != 0 ? sg dL/dS : 0) + beta dL/dU[t+1] (the carry cut at a spike under the
// zero reset; from zero at t = T-1, the last written to gU), summed over t (from t = T-1 down,
// in registers) into acc (written, so it needs no zeroing) and then added to gb (sample by
// sample, as one sample at a time would). Each row of W loaded in the product serves the S
// samples' (gradRow(t, b + s, s)) multiply-adds. SYN (Synaptic, the generic step's equations):
// dL/dI[t] is dL/dJ = dL/dU (zero reset: times 1 - S[t-1]) + alpha dL/dJ[t+1], carried (and
// written to gJ) as dL/dU, and it is what acc and out receive.
template <unsigned S, unsigned V, unsigned RESET, unsigned SURROGATE, bool SYN, class GradRow>
inline void leakBackwardSteps(const LeakVectors &c, unsigned T, const float *__restrict x,
                              unsigned b, GradRow gradRow, const BackwardRows &in,
                              float *__restrict gU, float *__restrict gJ, float *__restrict acc,
                              float *__restrict gb, v16::M lastMask) {
  alignas(64) float sg[S][TRACE_MAX_STEPS * 16 * V];
  v16::M spikes[S][TRACE_MAX_STEPS * V];
  const unsigned n = in.n;
  // Independent membrane chains per pass (each step waits on the last spike): RECOMPUTE_VECS.
  for (unsigned s = 0; s < S; ++s)
    forChunks<V, recomputeVectors<V>()>([&](auto v0, auto w) {
      leakRecompute<decltype(w)::value, V, RESET, SURROGATE, SYN>(c, T, x + s * n, v0, lastMask,
                                                                  sg[s], spikes[s]);
    });
  forChunks<V, productVectors<S>()>([&](auto v0, auto w) {
    nextLayerProducts<S, V, decltype(v0)::value, decltype(w)::value>(gradRow, T, b, in.wT, in.K, n,
                                                                     lastMask, sg, in.rowsHeld);
  });
  forChunks<V, carryVectors<S>()>([&](auto v0, auto w) {
    leakCarries<S, V, decltype(v0)::value, decltype(w)::value, RESET, SYN>(c, T, in, sg, spikes, gU,
                                                                           gJ, acc, gb, lastMask);
  });
}

// S samples from b: blocks of blockVectors<S>() vectors over a row of n neurons, then the
// rest (forColumnBlocks; x, gU, gJ, acc and out at sample b's row).
template <unsigned S, unsigned RESET, unsigned SURROGATE, bool SYN, class GradRow>
inline void leakBackwardGroup(const LeakVectors &c, unsigned T, const float *x, unsigned b,
                              GradRow gradRow, BackwardRows in, float *gU, float *gJ, float *acc,
                              float *gb) {
  const float *wT = in.wT;
  float *out = in.out;
  forColumnBlocks<blockVectors<S>()>(in.n, [&](auto v, auto masked, unsigned j, v16::M mask) {
    constexpr unsigned W = decltype(v)::value + decltype(masked)::value;
    BackwardRows block = in;
    block.wT = wT + j;
    block.out = out ? out + j : nullptr;
    leakBackwardSteps<S, W, RESET, SURROGATE, SYN>(c, T, x + j, b, gradRow, block, gU + j,
                                                   SYN ? gJ + j : nullptr, acc + j, gb + j, mask);
  });
}

// The backward of `batch` samples, rows n apart in x (I), gU, gJ (SYN), acc and out: pairs of
// samples (each W row loaded once for both), then an odd last one alone. gradRow(t, b, slot)
// gives sample b's dL/dI row of the next layer at step t (slot 0 or 1: where a gathered row
// may be kept while the other sample's is in use).
template <unsigned RESET, unsigned SURROGATE, bool SYN, class GradRow>
inline void leakBackwardBatch(const LeakVectors &c, unsigned T, unsigned batch, const float *x,
                              GradRow gradRow, BackwardRows in, float *gU, float *gJ, float *acc,
                              float *gb) {
  const std::size_t n = in.n;
  float *out = in.out;
  unsigned b = 0;
  for (; b < batch; b += 2) {
    in.out = out ? out + b * n : nullptr;
    float *gJb = SYN ? gJ + b * n : nullptr;
    if (b + 2 <= batch)
      leakBackwardGroup<2, RESET, SURROGATE, SYN>(c, T, x + b * n, b, gradRow, in, gU + b * n, gJb,
                                                  acc + b * n, gb);
    else
      leakBackwardGroup<1, RESET, SURROGATE, SYN>(c, T, x + b * n, b, gradRow, in, gU + b * n, gJb,
                                                  acc + b * n, gb);
  }
}

} // namespace lif
} // namespace popsnn
#endif
