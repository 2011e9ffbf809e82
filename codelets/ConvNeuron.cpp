// The Leaky neurons of a convolutional stage (docs/numerics.md sections 2-4), on the current
// the convolution vertices (Conv.cpp) leave: one shard's channels x positions for its
// samples, every step. The membrane update is Neurons.hpp's Leaky::forwardRow (the linear
// layers' unit); the backward is BPTT through the leak, dL/dS reaching U only through the
// surrogate masked by the sparse rule, so dL/dI is zero outside the rule's entries and the
// convolution's backward skips those.
//
// Rows are sample-major here: row b * T + t holds sample b's step t (a shard holds whole
// samples, so each neuron's steps are on one tile). With `constantCurrent` (direct input:
// the first stage's current is the same every step) the current has one row per sample,
// computed once, and the backward leaves dL/dI summed over the steps, which is all the
// convolution's (linear) backward needs.
#include <poplar/Vertex.hpp>

#include "Neurons.hpp"

using namespace poplar;

// U[t] (before its reset) and S[t] = H(U[t] - threshold) of every neuron, all steps.
template <class Reset> class ConvNeuronForward : public Vertex {
public:
  Input<Vector<float>> current;    // [samples * T, n], [samples, n] with constantCurrent
  Output<Vector<float>> membranes; // [samples * T, n]
  Output<Vector<float>> spikes;    // [samples * T, n]
  InOut<Vector<float>> state;      // [2 n]: U and S[t-1] of one sample
  unsigned samples;
  unsigned steps;
  unsigned neurons;
  unsigned constantCurrent;
  float beta;
  float threshold;

  // The fields are read into locals and the arrays taken as restrict pointers: stores
  // through the fields' pointers may alias the vertex's own fields to the compiler, which
  // then reloaded the threshold each entry and kept the spike loop scalar, with a branch on
  // the spike (mispredicted at spike densities): ~80% of the vertex (perf annotate).
  bool compute() {
    const unsigned n = neurons, T = steps;
    const float thr = threshold;
    popsnn::NeuronConstants c{};
    c.beta = beta;
    c.threshold = thr;
    float *__restrict u = &state[0];
    float *__restrict prev = &state[n];
    const float *cur = &current[0];
    float *__restrict mem = &membranes[0];
    float *__restrict spk = &spikes[0];
    for (unsigned b = 0; b < samples; ++b) {
      for (unsigned j = 0; j < 2 * n; ++j)
        u[j] = 0.0f; // U and S[t-1] (prev follows u in the state)
      for (unsigned t = 0; t < T; ++t) {
        const unsigned row = (b * T + t) * n;
        const unsigned in = constantCurrent ? b * n : row;
        popsnn::Leaky::forwardRow<Reset>(c, n, cur + in, nullptr, nullptr, nullptr, u, prev);
        float *__restrict m = mem + row;
        float *__restrict sp = spk + row;
        for (unsigned j = 0; j < n; ++j) {
          const float v = u[j], fired = v > thr ? 1.0f : 0.0f;
          m[j] = v;
          prev[j] = fired;
          sp[j] = fired;
        }
      }
    }
    return true;
  }
};

// dL/dI[t] = dL/dU[t] = dS/dU[t] dL/dS[t] + dL/dU[t] (given) + beta dL/dU[t+1] (times
// 1 - R[t+1] under the zero reset), dS/dU the surrogate where the rule keeps the entry;
// with constantCurrent, sum_t dL/dI[t] per sample.
template <class Reset, class Rule> class ConvNeuronBackward : public Vertex {
public:
  Input<Vector<float>> membranes;     // [samples * T, n]
  Input<Vector<float>> gradSpikes;    // dL/dS [samples * T, n]
  Input<Vector<float>> gradMembranes; // dL/dU from outside [samples * T, n], or empty: none
  Output<Vector<float>> gradCurrent;  // dL/dI [samples * T, n], [samples, n] summed
  InOut<Vector<float>> carry;         // [n]: dL/dU[t+1]
  unsigned samples;
  unsigned steps;
  unsigned neurons;
  unsigned constantCurrent;
  float beta;
  float threshold;
  unsigned surrogate; // codes::Surrogate
  float surrogateParam;
  float ruleValue; // the window's b_th or the one-sided rule's theta_grad

  bool compute() {
    // A hidden stage has no dL/dU from outside: not read (a quarter of the traffic).
    return gradMembranes.size() ? bySurrogate<true>() : bySurrogate<false>();
  }

private:
  // The surrogate chosen once per compute, not per entry (a switch in the loop keeps it
  // from vectorising).
  template <bool FROM_OUTSIDE> bool bySurrogate() {
    switch (surrogate) {
    case popsnn::codes::FAST_SIGMOID:
      return rows<popsnn::FastSigmoid, FROM_OUTSIDE>();
    case popsnn::codes::ATAN:
      return rows<popsnn::Atan, FROM_OUTSIDE>();
    case popsnn::codes::SIGMOID:
      return rows<popsnn::Sigmoid, FROM_OUTSIDE>();
    default:
      return rows<popsnn::StraightThrough, FROM_OUTSIDE>();
    }
  }
  // Fields into locals and restrict pointers, one loop per kind of step (the last step, a
  // sum over steps or not): the compiler reloaded the fields each entry (a store might
  // alias them) and kept the loop scalar (perf annotate).
  template <class Surrogate, bool FROM_OUTSIDE> bool rows() {
    const unsigned n = neurons, T = steps;
    float *__restrict next = &carry[0];
    const float *mem = &membranes[0];
    const float *gs = &gradSpikes[0];
    const float *gm = FROM_OUTSIDE ? &gradMembranes[0] : nullptr;
    float *gc = &gradCurrent[0];
    for (unsigned b = 0; b < samples; ++b)
      for (unsigned t = T; t-- > 0;) {
        const unsigned row = (b * T + t) * n;
        float *out = gc + (constantCurrent ? b * n : row);
        const bool first = t + 1 == T, sum = constantCurrent && !first;
        const float *m = mem + row, *g = gs + row, *e = FROM_OUTSIDE ? gm + row : nullptr;
        if (first)
          step<Surrogate, FROM_OUTSIDE, true, false>(n, m, g, e, next, out);
        else if (sum)
          step<Surrogate, FROM_OUTSIDE, false, true>(n, m, g, e, next, out);
        else
          step<Surrogate, FROM_OUTSIDE, false, false>(n, m, g, e, next, out);
      }
    return true;
  }
  // One step's n entries: dL/dI = dS/dU dL/dS (+ dL/dU from outside) (+ beta dL/dU[t+1]
  // unless FIRST, the last step), into out (SUM: added to it), and into next.
  template <class Surrogate, bool FROM_OUTSIDE, bool FIRST, bool SUM>
  void step(unsigned n, const float *__restrict m, const float *__restrict g,
            const float *__restrict e, float *__restrict next, float *__restrict out) const {
    const float thr = threshold, bt = beta, param = surrogateParam, rule = ruleValue;
    for (unsigned j = 0; j < n; ++j) {
      const float u = m[j];
      // The surrogate computed everywhere and selected: a branch on the rule's
      // (data-dependent) choice mispredicts.
      const float s = Surrogate::at(u - thr, param);
      const float dsdu = Rule::keep(u, thr, rule) ? s : 0.0f;
      // + 0 without dL/dU from outside: the same floats as adding its zeros.
      float d = dsdu * g[j] + (FROM_OUTSIDE ? e[j] : 0.0f);
      if (!FIRST) {
        // 1 - R[t+1] = (U[t] <= threshold): the zero reset cuts the leak path.
        const float c = bt * next[j];
        d += Reset::code == popsnn::codes::RESET_ZERO ? (u <= thr ? c : 0.0f) : c;
      }
      next[j] = d;
      out[j] = SUM ? out[j] + d : d;
    }
  }
};

template class ConvNeuronForward<popsnn::ResetSubtract>;
template class ConvNeuronForward<popsnn::ResetZero>;
template class ConvNeuronForward<popsnn::ResetNone>;
template class ConvNeuronBackward<popsnn::ResetSubtract, popsnn::NoRule>;
template class ConvNeuronBackward<popsnn::ResetSubtract, popsnn::Window>;
template class ConvNeuronBackward<popsnn::ResetSubtract, popsnn::OneSided>;
template class ConvNeuronBackward<popsnn::ResetZero, popsnn::NoRule>;
template class ConvNeuronBackward<popsnn::ResetZero, popsnn::Window>;
template class ConvNeuronBackward<popsnn::ResetZero, popsnn::OneSided>;
template class ConvNeuronBackward<popsnn::ResetNone, popsnn::NoRule>;
template class ConvNeuronBackward<popsnn::ResetNone, popsnn::Window>;
template class ConvNeuronBackward<popsnn::ResetNone, popsnn::OneSided>;
