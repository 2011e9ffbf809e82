// The compile-time units the LIF vertices are specialised on (docs/numerics.md has the
// equations): a neuron model, a reset, a surrogate gradient and a sparse rule, each a small
// type with inline functions. LifForward<Neuron, Reset, Rule> and LifBackward<Neuron, Reset,
// Trace> take them as template arguments; the surrogate picks its row kernel once per row
// (docs/architecture.md says why). Every per-element choice among them is made by the
// compiler, so the row loops have no branches on them.
// include/popsnn/VertexUnits.hpp names each unit for the host; docs/adding-a-neuron.md
// says what a new neuron model needs.
#pragma once

#include <cmath>

#include "../include/popsnn/VertexEnums.hpp"

namespace popsnn {

// A layer's neuron constants, as the vertices' fields hold them: `alpha` is Synaptic's and
// Alpha's second decay, `gain` Lapicque's input gain dt/C and Alpha's tau_alpha; a model
// ignores those it does not have. The row loops read them through `betaAt(j)` etc., so one
// loop serves both forms: one value per layer (NeuronConstants, the fast case) or beta, alpha
// and threshold one per neuron (NeuronConstantRows, docs/numerics.md §2), chosen once per
// vertex call.
struct NeuronConstants {
  static constexpr bool uniform = true; // nothing learned: those branches compile away
  float beta;
  float alpha;
  float gain;
  float threshold;
  float betaAt(unsigned) const { return beta; }
  float alphaAt(unsigned) const { return alpha; }
  float gainAt(unsigned) const { return gain; }
  float thresholdAt(unsigned) const { return threshold; }
};
struct NeuronConstantRows {
  static constexpr bool uniform = false;
  const float *__restrict beta; // clamped to [0, 1] where learned (as snnTorch)
  const float *__restrict alpha;
  const float *__restrict gain; // Alpha's tau_alpha per neuron, else the layer's one gain
  const float *__restrict threshold;
  float betaAt(unsigned j) const { return beta[j]; }
  float alphaAt(unsigned j) const { return alpha[j]; }
  float gainAt(unsigned j) const { return gain[j]; }
  float thresholdAt(unsigned j) const { return threshold[j]; }
};
// Alpha's factor from E + H to U, ln(alpha) / (ln(beta) - ln(alpha)) + 1 (the reference's
// _tau_alpha, in float32; the library's log may differ from NumPy's in the last bit).
inline float tauAlpha(float alpha, float beta) {
  const float logAlpha = std::log(alpha);
  return logAlpha / (std::log(beta) - logAlpha) + 1.0f;
}
// The rows of a layer's per-neuron constants into `rows` [2n]: beta clamped to [0, 1] as
// snnTorch uses a learned beta (a constant one already lies there), then the gain per neuron:
// with TauAlpha (Alpha), tau_alpha from alpha and the clamped beta, which a learned beta
// moves; else the layer's one `gain`.
template <bool TauAlpha>
inline NeuronConstantRows clampedRows(const float *beta, const float *alpha, float gain,
                                      const float *threshold, float *__restrict rows, unsigned n) {
  float *__restrict gains = rows + n;
  for (unsigned j = 0; j < n; ++j)
    rows[j] = beta[j] < 0.0f ? 0.0f : (beta[j] > 1.0f ? 1.0f : beta[j]);
  for (unsigned j = 0; j < n; ++j)
    gains[j] = TauAlpha ? tauAlpha(alpha[j], rows[j]) : gain;
  return {rows, alpha, gains, threshold};
}

// ---------------------------------------------------------------------------- resets
// The reset R = S[t-1] applied to a neuron's update `base` (snnTorch's forms).
struct ResetSubtract {
  static constexpr unsigned code = codes::RESET_SUBTRACT;
  static float apply(float base, float p, float threshold) { return base - p * threshold; }
};
struct ResetZero {
  static constexpr unsigned code = codes::RESET_ZERO;
  static float apply(float base, float p, float) { return (1.0f - p) * base; }
};
struct ResetNone {
  static constexpr unsigned code = codes::RESET_NONE;
  static float apply(float base, float, float) { return base; }
};

// ------------------------------------------------------------------------ surrogates
// dS/dU as a function of x = U - threshold, with the surrogate's one parameter.
struct FastSigmoid {
  static constexpr unsigned code = codes::FAST_SIGMOID;
  static float at(float x, float k) {
    const float d = 1.0f + k * std::fabs(x);
    return 1.0f / (d * d);
  }
};
struct Atan {
  static constexpr unsigned code = codes::ATAN;
  static float at(float x, float alpha) {
    const float z = 3.14159265358979323846f * alpha * x / 2.0f;
    return (alpha / 2.0f) / (1.0f + z * z);
  }
};
// k e^(-k|x|) / (1 + e^(-k|x|))^2: equal to k s (1 - s) with s = sigmoid(kx) (the function
// is even), but e^(-k|x|) <= 1 never overflows and keeps full precision far in the tails,
// where 1 - s rounds to 0 in float32.
struct Sigmoid {
  static constexpr unsigned code = codes::SIGMOID;
  static float at(float x, float k) {
    const float e = std::exp(-k * std::fabs(x));
    const float d = 1.0f + e;
    return k * e / (d * d);
  }
};
struct StraightThrough {
  static constexpr unsigned code = codes::STRAIGHT_THROUGH;
  static float at(float, float) { return 1.0f; }
};

// ---------------------------------------------------------------------- sparse rules
// The surrogate trace a rule leaves for the backward: every entry [T, B, n] (no rule), the
// gradient trace, only the entries whose masked surrogate is non-zero, compressed over all
// (step, sample) (VertexEnums.hpp), or, where the rule keeps so many entries that the
// compressed trace (8 bytes an entry) would outgrow the dense one (4), every entry with the
// masked surrogate (0 off the rule). The backward is specialised on it, not on the rule.
// `masked`: a rule zeroed some entries, so the backward must not recompute the surrogates.
struct DenseTrace {
  static constexpr bool sparse = false;
  static constexpr bool masked = false;
};
struct CompressedTrace {
  static constexpr bool sparse = true;
  static constexpr bool masked = true;
};
struct MaskedDenseTrace {
  static constexpr bool sparse = false;
  static constexpr bool masked = true;
};

// Which entries carry gradient: `keep(u, threshold, value)`; off it the surrogate is 0.
struct NoRule {
  static constexpr unsigned code = codes::RULE_NONE;
  using Trace = DenseTrace;
  static bool keep(float, float, float) { return true; }
};
struct Window { // |U - threshold| < b_th
  static constexpr unsigned code = codes::RULE_WINDOW;
  using Trace = CompressedTrace;
  static bool keep(float u, float threshold, float value) {
    return std::fabs(u - threshold) < value;
  }
};
struct OneSided { // U >= theta_grad
  static constexpr unsigned code = codes::RULE_ONE_SIDED;
  using Trace = CompressedTrace;
  static bool keep(float u, float, float value) { return u >= value; }
};
// The same rules with the dense layout of their masked surrogate (the plan picks it from the
// trace's expected fill, Plan.cpp).
struct WindowDense : Window {
  using Trace = MaskedDenseTrace;
};
struct OneSidedDense : OneSided {
  using Trace = MaskedDenseTrace;
};

// --------------------------------------------------------------------- neuron models
// Each model: `forwardRow<Reset>` (one sample's membrane update for n neurons, from this
// step's input current `in`, the recurrent term `rec`, the synaptic states `syn` (J, or
// Alpha's E) and `syn2` (Alpha's H) and the previous spikes `prev`), and what the backward
// needs:
//   states        the [B, n] state blocks it keeps: U, then J (Synaptic) or E and H (Alpha);
//                 its value is in include/popsnn/VertexUnits.hpp's table (the host sizes them)
//   synaptic      a current J with its own decay (Synaptic)
//   twoCurrents   Alpha's E and H, whose own backward (alphaInputGradRow) replaces the
//                 membrane's carry
//   recurrent     a term V.S[t-1] (+ b_V) from the layer's own spikes: ALL_TO_ALL (V [N, N]
//                 and b_V) or ONE_TO_ONE (V [n])
//   gatesInput    under the zero reset, (1 - R) multiplies the whole update, input included,
//                 so dL/dI is gated too (else only the leak path is)
//   scalesInput   dU[t]/dI[t] is inputGain(c, j), not 1 (Lapicque)
//   Store         forwardRow's rounding of a state a later term of the same step reads
//                 (Synaptic's J): Exact, or half storage's RoundTo<half> (StoredRows.hpp)
enum class Recurrence { NONE, ALL_TO_ALL, ONE_TO_ONE };

// float storage: values are kept as computed.
struct Exact {
  static float round(float x) { return x; }
};

// U[t] = beta U[t-1] + I[t] - R[t] threshold (zero reset: beta (1 - R) U[t-1] + I[t]).
struct Leaky {
  static constexpr unsigned code = codes::LEAKY;
  static constexpr bool synaptic = false, gatesInput = false, scalesInput = false;
  static constexpr bool twoCurrents = false;
  static constexpr unsigned states = 1;
  static constexpr Recurrence recurrence = Recurrence::NONE;
  template <class C> static float inputGain(const C &, unsigned) { return 1.0f; }
  template <class Reset, class Store = Exact, class C>
  static void forwardRow(const C &c, unsigned n, const float *in, const float *__restrict,
                         float *__restrict, float *__restrict, float *__restrict u,
                         const float *__restrict prev) {
    for (unsigned j = 0; j < n; ++j) {
      if constexpr (Reset::code == codes::RESET_ZERO)
        u[j] = c.betaAt(j) * (1.0f - prev[j]) * u[j] + in[j];
      else
        u[j] = Reset::apply(c.betaAt(j) * u[j] + in[j], prev[j], c.thresholdAt(j));
    }
  }
};

// J[t] = alpha J[t-1] + I[t]; U[t] = beta U[t-1] + J[t], reset applied to U's update.
struct Synaptic {
  static constexpr unsigned code = codes::SYNAPTIC;
  static constexpr bool synaptic = true, gatesInput = false, scalesInput = false;
  static constexpr bool twoCurrents = false;
  static constexpr unsigned states = 2;
  static constexpr Recurrence recurrence = Recurrence::NONE;
  template <class C> static float inputGain(const C &, unsigned) { return 1.0f; }
  template <class Reset, class Store = Exact, class C>
  static void forwardRow(const C &c, unsigned n, const float *in, const float *__restrict,
                         float *__restrict syn, float *__restrict, float *__restrict u,
                         const float *__restrict prev) {
    for (unsigned j = 0; j < n; ++j) // J is stored before U reads it (half: rounded)
      syn[j] = Store::round(c.alphaAt(j) * syn[j] + in[j]);
    for (unsigned j = 0; j < n; ++j)
      u[j] = Reset::apply(c.betaAt(j) * u[j] + syn[j], prev[j], c.thresholdAt(j));
  }
};

// U[t] = beta U[t-1] + I[t] + V S[t-1] (+ b_V) - R[t] threshold. snnTorch's zero reset
// zeroes the whole update, input included.
template <Recurrence R> struct RLeakyModel {
  static constexpr unsigned code =
      R == Recurrence::ALL_TO_ALL ? codes::RLEAKY_ALL_TO_ALL : codes::RLEAKY_ONE_TO_ONE;
  static constexpr bool synaptic = false, gatesInput = true, scalesInput = false;
  static constexpr bool twoCurrents = false;
  static constexpr unsigned states = 1;
  static constexpr Recurrence recurrence = R;
  template <class C> static float inputGain(const C &, unsigned) { return 1.0f; }
  template <class Reset, class Store = Exact, class C>
  static void forwardRow(const C &c, unsigned n, const float *in, const float *__restrict rec,
                         float *__restrict, float *__restrict, float *__restrict u,
                         const float *__restrict prev) {
    for (unsigned j = 0; j < n; ++j)
      u[j] = Reset::apply(c.betaAt(j) * u[j] + in[j] + rec[j], prev[j], c.thresholdAt(j));
  }
};
using RLeakyAllToAll = RLeakyModel<Recurrence::ALL_TO_ALL>;
using RLeakyOneToOne = RLeakyModel<Recurrence::ONE_TO_ONE>;

// Lapicque's RC membrane as snnTorch steps it (forward Euler, step dt):
// U[t] = (1 - dt/(RC)) U[t-1] + (dt/C) I[t], the reset applied to the whole update.
// beta holds 1 - dt/(RC), gain dt/C (python/popsnn/layers.py derives them).
struct Lapicque {
  static constexpr unsigned code = codes::LAPICQUE;
  static constexpr bool synaptic = false, gatesInput = true, scalesInput = true;
  static constexpr bool twoCurrents = false;
  static constexpr unsigned states = 1;
  static constexpr Recurrence recurrence = Recurrence::NONE;
  template <class C> static float inputGain(const C &c, unsigned j) { return c.gainAt(j); }
  template <class Reset, class Store = Exact, class C>
  static void forwardRow(const C &c, unsigned n, const float *in, const float *__restrict,
                         float *__restrict, float *__restrict, float *__restrict u,
                         const float *__restrict prev) {
    for (unsigned j = 0; j < n; ++j)
      u[j] = Reset::apply(c.betaAt(j) * u[j] + c.gainAt(j) * in[j], prev[j], c.thresholdAt(j));
  }
};

// snnTorch's Alpha: two currents fed the same input with opposite signs, the membrane their
// scaled sum (python/popsnn/layers.py; docs/numerics.md):
//   E'[t] = alpha E[t-1] + I[t],  H'[t] = beta H[t-1] - I[t],  U[t] = tau (E'[t] + H'[t])
// zero reset: E, H, U = (1 - R) E', (1 - R) H', (1 - R) U; subtract: E = E' - R threshold,
// H = (1 - R) H', U += R H[t-1]. U is not carried: E and H are the state (syn, syn2).
struct Alpha {
  static constexpr unsigned code = codes::ALPHA;
  static constexpr bool synaptic = false, gatesInput = true, scalesInput = false;
  static constexpr bool twoCurrents = true;
  static constexpr unsigned states = 3;
  static constexpr Recurrence recurrence = Recurrence::NONE;
  template <class C> static float inputGain(const C &, unsigned) { return 1.0f; }
  template <class Reset, class Store = Exact, class C>
  static void forwardRow(const C &c, unsigned n, const float *in, const float *__restrict,
                         float *__restrict e, float *__restrict h, float *__restrict u,
                         const float *__restrict prev) {
    for (unsigned j = 0; j < n; ++j) {
      const float ePre = c.alphaAt(j) * e[j] + in[j], hPre = c.betaAt(j) * h[j] - in[j];
      const float uPre = c.gainAt(j) * (ePre + hPre), keep = 1.0f - prev[j];
      if constexpr (Reset::code == codes::RESET_ZERO) {
        e[j] = keep * ePre;
        u[j] = keep * uPre;
        h[j] = keep * hPre;
      } else if constexpr (Reset::code == codes::RESET_SUBTRACT) {
        u[j] = uPre + prev[j] * h[j];
        e[j] = ePre - prev[j] * c.thresholdAt(j);
        h[j] = keep * hPre;
      } else {
        e[j] = ePre;
        h[j] = hPre;
        u[j] = uPre;
      }
    }
  }
  // One step of the backward from dL/dU[t] (gU, with no carry of its own), keep = 1 - R[t]:
  // gE and gH come in as dL/dE[t] and dL/dH[t] and leave as those of step t-1; dI = dL/dI[t],
  // gHPre = dL/dH'[t] (for a learned beta's gradient, betaGradRow).
  template <class Reset, class C>
  static void inputGradRow(const C &c, unsigned n, const float *__restrict gU,
                           const float *__restrict keep, float *__restrict gE, float *__restrict gH,
                           float *__restrict dI, float *__restrict gHPre) {
    for (unsigned j = 0; j < n; ++j)
      gHPre[j] = inputGradAt<Reset>(c, j, gU[j], keep[j], gE, gH, dI);
  }
  // inputGradRow for neuron j alone (the sparse backward visits its live neurons only);
  // returns dL/dH'[t] at j.
  template <class Reset, class C>
  static float inputGradAt(const C &c, unsigned j, float gUj, float keep, float *__restrict gE,
                           float *__restrict gH, float *__restrict dI) {
    const float fromU = c.gainAt(j) * gUj;
    float ePre, hPre;
    if constexpr (Reset::code == codes::RESET_ZERO) {
      ePre = keep * (fromU + gE[j]);
      hPre = keep * (fromU + gH[j]);
    } else if constexpr (Reset::code == codes::RESET_SUBTRACT) {
      ePre = fromU + gE[j];
      hPre = fromU + keep * gH[j];
    } else {
      ePre = fromU + gE[j];
      hPre = fromU + gH[j];
    }
    dI[j] = ePre - hPre;
    gE[j] = c.alphaAt(j) * ePre;
    gH[j] = c.betaAt(j) * hPre;
    // Subtract: U[t] = ... + R[t] H[t-1], so H[t-1] also gets R[t] dL/dU[t].
    if constexpr (Reset::code == codes::RESET_SUBTRACT)
      gH[j] = gH[j] + (1.0f - keep) * gUj;
    return hPre;
  }
  // A learned beta's terms at step t (the reference's _bptt_alpha): beta enters H' = beta
  // H[t-1] - I and tau_alpha = k, and k (E' + H') = U[t] (- R[t] H[t-1] under the subtract
  // reset), so dL/dbeta += dL/dH'[t] H[t-1] + dL/dU[t] (k (E' + H') / k) dk/dbeta, with
  // dk/dbeta = -ln(alpha) / ((ln(beta) - ln(alpha))^2 beta). hPrev = H[t-1] (null at t = 0).
  template <class Reset, class C>
  static void betaGradRow(const C &c, unsigned n, const float *__restrict gU,
                          const float *__restrict keep, const float *__restrict gHPre,
                          const float *__restrict u, const float *__restrict hPrev,
                          float *__restrict gradBeta) {
    for (unsigned j = 0; j < n; ++j)
      gradBeta[j] +=
          betaGradAt<Reset>(c, j, gU[j], keep[j], gHPre[j], u[j], hPrev ? hPrev[j] : 0.0f);
  }
  // betaGradRow's term for neuron j alone (the sparse backward's live neurons).
  template <class Reset, class C>
  static float betaGradAt(const C &c, unsigned j, float gUj, float keep, float gHPreJ, float uj,
                          float hPrevJ) {
    const float logAlpha = std::log(c.alphaAt(j)), beta = c.betaAt(j);
    const float gap = std::log(beta) - logAlpha;
    const float dTauDBeta = -logAlpha / (gap * gap * beta);
    float base = uj;
    if constexpr (Reset::code == codes::RESET_SUBTRACT)
      base = base - (1.0f - keep) * hPrevJ;
    return gHPreJ * hPrevJ + gUj * base / c.gainAt(j) * dTauDBeta;
  }
};

} // namespace popsnn
