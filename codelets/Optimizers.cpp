// Optimiser steps on the tile that owns the parameters, in PyTorch's formulas
// and order of operations (torch.optim.SGD, Adam, AdamW; popsnn.optim mirrors them).
#include <poplar/Vertex.hpp>

#include <cmath>

using namespace poplar;

class SgdStep : public Vertex {
public:
  InOut<Vector<float>> param;
  Input<Vector<float>> grad;
  InOut<Vector<float>> momentumBuffer; // same size as param when momentum > 0
  InOut<unsigned> count;               // steps taken (0: the buffer starts as the gradient)
  float lr;
  float momentum;
  float oneMinusDampening; // 1 - dampening, rounded once from double as PyTorch does
  float weightDecay;
  unsigned nesterov;

  bool compute() {
    const bool first = *count == 0;
    for (unsigned k = 0; k < param.size(); ++k) {
      float g = grad[k];
      if (weightDecay != 0.0f)
        g = g + weightDecay * param[k];
      if (momentum != 0.0f) {
        float buf = first ? g : momentumBuffer[k] * momentum + oneMinusDampening * g;
        momentumBuffer[k] = buf;
        g = nesterov ? g + momentum * buf : buf;
      }
      param[k] -= lr * g;
    }
    *count = *count + 1;
    return true;
  }
};

class AdamStep : public Vertex {
public:
  InOut<Vector<float>> param;
  Input<Vector<float>> grad;
  InOut<Vector<float>> expAvg;
  InOut<Vector<float>> expAvgSq;
  InOut<unsigned> count;
  float lr;
  float beta1;
  float beta2;
  float oneMinusBeta1; // rounded once from double, as PyTorch does
  float oneMinusBeta2;
  float eps;
  float weightDecay;
  unsigned decoupled; // AdamW

  bool compute() {
    const unsigned step = *count + 1;
#ifdef __IPU__
    // The IPU has no double: bias corrections in float (1 - beta^t loses digits early on).
    using Real = float;
#else
    // Bias corrections in double as PyTorch computes them (Python floats).
    using Real = double;
#endif
    const Real stepSize = Real(lr) / (Real(1) - std::pow(Real(beta1), Real(step)));
    const float correction2 = float(std::sqrt(Real(1) - std::pow(Real(beta2), Real(step))));
    const float decay = float(Real(1) - Real(lr) * Real(weightDecay));
    for (unsigned k = 0; k < param.size(); ++k) {
      float g = grad[k];
      if (weightDecay != 0.0f) {
        if (decoupled)
          param[k] *= decay;
        else
          g = g + weightDecay * param[k];
      }
      const float m = expAvg[k] + oneMinusBeta1 * (g - expAvg[k]);
      const float v = expAvgSq[k] * beta2 + oneMinusBeta2 * g * g;
      expAvg[k] = m;
      expAvgSq[k] = v;
      const float denom = std::sqrt(v) / correction2 + eps;
      param[k] -= float(stepSize) * (m / denom);
    }
    *count = step;
    return true;
  }
};
