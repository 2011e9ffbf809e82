// LifBackward's step from dL/dU[t] to dL/dI[t] through each neuron model's input path (the
// synaptic current, Alpha's two currents, a gain), apart so the vertex's file keeps to its size.
#pragma once

#include "BackwardRows.hpp"
#include "LifCommon.hpp"
#include "Neurons.hpp"
#include "StoredRows.hpp"

namespace popsnn {
namespace lif {

// dL/dI[t] from dL/dU[t] (gU) through the model's input path into dI (Synaptic: dL/dJ); returned.
template <class Neuron, class Reset, class V, class C>
const float *lifInputGrad(V &v, unsigned t, unsigned b, const C &c, float *__restrict gU,
                          float *__restrict dI) {
  using namespace popsnn::backward_rows;
  using namespace popsnn::codes;
  using popsnn::stored::asFloat;
  const unsigned n = v.numNeurons;
  const int *prevOwn = t > 0 ? v.ownBuffer(t - 1, b) : nullptr;
  if constexpr (Neuron::twoCurrents || Neuron::synaptic) {
    // keep = 1 - R[t]: it resets Alpha's currents; under the zero reset it gates Synaptic's J
    // path too (U[t] = (1 - S[t-1]) (beta U[t-1] + J[t])).
    float *__restrict keep = &v.scratch[n];
    for (unsigned j = 0; j < n && (Neuron::twoCurrents || v.zeroReset); ++j)
      keep[j] = 1.0f;
    if (prevOwn && (Neuron::twoCurrents || v.zeroReset))
      zeroAtSpikes(prevOwn, v.offset, keep);
    if constexpr (Neuron::synaptic) {
      float *__restrict gJ = &v.gradMem[(v.batch + b) * n];
      for (unsigned j = 0; j < n; ++j)
        gJ[j] = (v.zeroReset ? keep[j] * gU[j] : gU[j]) + c.alphaAt(j) * gJ[j];
      return gJ;
    } else {
      float *__restrict gE = &v.gradMem[(v.batch + b) * n], *__restrict gHPre = &v.scratch[2 * n];
      if (!C::uniform && v.learnsThreshold() && Reset::code == RESET_SUBTRACT && prevOwn)
        learnedConstantGrads(gE, prevOwn, v.offset, n, false, nullptr, nullptr, nullptr,
                             &v.gradThreshold[0][0]); // E[t] = E'[t] - R[t] threshold
      Neuron::template inputGradRow<Reset>(c, n, gU, keep, gE, &v.gradMem[(2 * v.batch + b) * n],
                                           dI, gHPre);
      if (!C::uniform && v.learnsBeta()) // U[t], and H[t-1] after the U trace
        Neuron::template betaGradRow<Reset>(
            c, n, gU, keep, gHPre, asFloat(&v.memTrace[0][(t * v.batch + b) * n], v.traceRows(), n),
            t > 0 ? asFloat(&v.memTrace[0][((v.numSteps + t - 1) * v.batch + b) * n],
                            v.traceRows() + n, n)
                  : nullptr,
            &v.gradBeta[0][0]);
    }
    return dI;
  }
  // U[t] = (1 - S[t-1]) (beta U[t-1] + input terms): carry and dL/dI are the gradient of
  // that bracket.
  if (v.zeroReset && Neuron::gatesInput && prevOwn)
    zeroAtSpikes(prevOwn, v.offset, gU);
  if constexpr (Neuron::scalesInput) {
    for (unsigned j = 0; j < n; ++j)
      dI[j] = Neuron::inputGain(c, j) * gU[j];
  } else {
    copyTo(dI, gU, n);
  }
  return dI;
}

} // namespace lif
} // namespace popsnn
