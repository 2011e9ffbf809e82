// One optimiser step's arithmetic per parameter entry, in PyTorch's formulas and order of
// operations (torch.optim.SGD, Adam, AdamW), written once for the vertices that step a whole
// parameter (Optimizers.cpp) and the one that steps the first layer's weights a group of rows
// at a time as it computes their gradient (DirectWeightGrad.cpp). Every entry's update reads
// only its own gradient and state, so a parameter stepped in pieces ends bit-identical.
#pragma once

#include <cmath>

namespace popsnn {
namespace optim {

// The constants of one SGD step.
struct SgdStep {
  float lr, momentum;
  float oneMinusDampening; // 1 - dampening, rounded once from double as PyTorch does
  float weightDecay;
  bool nesterov;
  bool first; // the step that starts the momentum buffer as the gradient
};

// The constants of the step after `taken` steps.
inline SgdStep sgdStep(float lr, float momentum, float oneMinusDampening, float weightDecay,
                       unsigned nesterov, unsigned taken) {
  return SgdStep{lr, momentum, oneMinusDampening, weightDecay, nesterov != 0, taken == 0};
}

// p -= lr * (the step's direction) over `size` entries; buf: the momentum buffer, or null
// without momentum.
inline void sgdEntries(const SgdStep &s, float *__restrict p, const float *__restrict g0,
                       float *__restrict buf, unsigned size) {
  // Members as locals: the loop vectorises.
  const float lr = s.lr, momentum = s.momentum, weightDecay = s.weightDecay;
  const float oneMinusDampening = s.oneMinusDampening;
  const bool nesterov = s.nesterov, first = s.first;
  for (unsigned k = 0; k < size; ++k) {
    float g = g0[k];
    if (weightDecay != 0.0f)
      g = g + weightDecay * p[k];
    if (buf) {
      const float b = first ? g : buf[k] * momentum + oneMinusDampening * g;
      buf[k] = b;
      g = nesterov ? g + momentum * b : b;
    }
    p[k] -= lr * g;
  }
}

// The constants of one Adam (AdamW: decoupled) step.
struct AdamStep {
  float stepSize, correction2, eps, beta2, oneMinusBeta1, oneMinusBeta2, weightDecay;
  float decay; // AdamW's 1 - lr * weightDecay
  bool decoupled;
};

// Step `step` (1, 2, ...)'s constants from the optimiser's.
inline AdamStep adamStep(float lr, float beta1, float beta2, float oneMinusBeta1,
                         float oneMinusBeta2, float eps, float weightDecay, bool decoupled,
                         unsigned step) {
#ifdef __IPU__
  // The IPU has no double: bias corrections in float (1 - beta^t loses digits early on).
  using Real = float;
#else
  // Bias corrections in double as PyTorch computes them (Python floats).
  using Real = double;
#endif
  const Real stepSize = Real(lr) / (Real(1) - std::pow(Real(beta1), Real(step)));
  AdamStep s;
  s.stepSize = float(stepSize);
  s.correction2 = float(std::sqrt(Real(1) - std::pow(Real(beta2), Real(step))));
  s.decay = float(Real(1) - Real(lr) * Real(weightDecay));
  s.eps = eps, s.beta2 = beta2, s.weightDecay = weightDecay;
  s.oneMinusBeta1 = oneMinusBeta1, s.oneMinusBeta2 = oneMinusBeta2;
  s.decoupled = decoupled;
  return s;
}

// Adam's update of `size` entries: p the parameters, g0 their gradient, m0 and v0 the first
// and second moments.
inline void adamEntries(const AdamStep &s, float *__restrict p, const float *__restrict g0,
                        float *__restrict m0, float *__restrict v0, unsigned size) {
  // Members as locals: the loop vectorises.
  const float step_size = s.stepSize, correction2 = s.correction2, eps = s.eps;
  const float weightDecay = s.weightDecay, beta2 = s.beta2, decay = s.decay;
  const float oneMinusBeta1 = s.oneMinusBeta1, oneMinusBeta2 = s.oneMinusBeta2;
  // Weight decay first, in its own pass, so the main loop has no branch.
  const bool coupledDecay = weightDecay != 0.0f && !s.decoupled;
  if (weightDecay != 0.0f && s.decoupled)
    for (unsigned k = 0; k < size; ++k)
      p[k] *= decay;
  for (unsigned k = 0; k < size; ++k) {
    const float g = coupledDecay ? g0[k] + weightDecay * p[k] : g0[k];
    const float m = m0[k] + oneMinusBeta1 * (g - m0[k]);
    const float v = v0[k] * beta2 + oneMinusBeta2 * g * g;
    m0[k] = m;
    v0[k] = v;
    const float denom = std::sqrt(v) / correction2 + eps;
    p[k] -= step_size * (m / denom);
  }
}

} // namespace optim
} // namespace popsnn
