// Optimiser steps on the tile that owns the parameters, in PyTorch's formulas
// and order of operations (torch.optim.SGD, Adam, AdamW; popsnn.optim mirrors them; the
// arithmetic per entry in OptimizerSteps.hpp).
// The learning rate is device state, not a vertex constant: `lr` reads a one-float
// tensor on the vertex's tile that the host writes between steps (a schedule costs
// a small host write, no recompile).
#include <poplar/Vertex.hpp>

#include "OptimizerSteps.hpp"

#include <cmath>

using namespace poplar;

class SgdStep : public Vertex {
public:
  InOut<Vector<float>> param;
  Input<Vector<float>> grad;
  Vector<InOut<Vector<float>>> momentumBuffer; // with momentum: one edge, as param's size
  InOut<unsigned> count;                       // steps taken (0: the buffer starts as the gradient)
  Input<float> lr;                             // written by the host (Network::setLearningRate)
  float momentum;
  float oneMinusDampening; // 1 - dampening, rounded once from double as PyTorch does
  float weightDecay;
  unsigned nesterov;

  bool compute() {
    const popsnn::optim::SgdStep s =
        popsnn::optim::sgdStep(*lr, momentum, oneMinusDampening, weightDecay, nesterov, *count);
    float *buf = momentum != 0.0f ? &momentumBuffer[0][0] : nullptr;
    popsnn::optim::sgdEntries(s, &param[0], &grad[0], buf, param.size());
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
  Input<float> lr; // written by the host (Network::setLearningRate)
  float beta1;
  float beta2;
  float oneMinusBeta1; // rounded once from double, as PyTorch does
  float oneMinusBeta2;
  float eps;
  float weightDecay;
  unsigned decoupled; // AdamW

  bool compute() {
    const unsigned step = *count + 1;
    const popsnn::optim::AdamStep s = popsnn::optim::adamStep(
        *lr, beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, weightDecay, decoupled != 0, step);
    popsnn::optim::adamEntries(s, &param[0], &grad[0], &expAvg[0], &expAvgSq[0], param.size());
    *count = step;
    return true;
  }
};

// Gradient accumulation over the chunks of samples of a batch that does not fit the tiles
// at once (Network.cpp: the batch split into sample chunks): total += part.
class AccumulateGrad : public Vertex {
public:
  InOut<Vector<float>> total;
  Input<Vector<float>> part;

  bool compute() {
    float *__restrict t = &total[0];
    const float *__restrict p = &part[0];
    const unsigned size = total.size();
    for (unsigned k = 0; k < size; ++k)
      t[k] += p[k];
    return true;
  }
};

// A learned constant given once per layer (one beta or threshold for all its neurons): its
// gradient, the sum of the per-neuron parts of every shard (gathered onto this tile), written
// to each of this shard's entries so that every shard's copy takes the same optimiser step.
class LayerGradSum : public Vertex {
public:
  Input<Vector<float>> parts;  // [N]: every shard's per-neuron gradient
  Output<Vector<float>> total; // [n]

  bool compute() {
    float sum = 0.0f;
    for (unsigned k = 0; k < parts.size(); ++k)
      sum += parts[k];
    for (unsigned k = 0; k < total.size(); ++k)
      total[k] = sum;
    return true;
  }
};

// Half storage (docs/numerics.md section 8): the float32 master weights rounded to the half
// copy the forward and backward read, once per forward pass (round to nearest even, the
// reference's rounding), so an optimiser step below half's spacing still moves the master.
class RoundParams : public Vertex {
public:
  Input<Vector<float>> param;
  Output<Vector<half>> stored;

  bool compute() {
    const unsigned size = param.size();
    for (unsigned k = 0; k < size; ++k)
      stored[k] = half(param[k]);
    return true;
  }
};

// Half storage: a shard's gradients, carried times the loss scale from the loss on, divided
// by it (as the reference divides its float32 gradients) and counted where not finite -- the
// host reads the count before the optimiser runs and skips a step that has any.
class UnscaleGrads : public Vertex {
public:
  Vector<InOut<Vector<float>>> grads; // one edge per parameter of the shard
  Input<float> lossScale;             // written by the host (Network::setLossScale)
  Output<unsigned> nonFinite;

  bool compute() {
    const float scale = *lossScale;
    unsigned bad = 0;
    for (unsigned e = 0; e < grads.size(); ++e) {
      float *__restrict g = &grads[e][0];
      const unsigned size = grads[e].size();
      for (unsigned k = 0; k < size; ++k) {
        const float v = g[k] / scale;
        bad += std::isfinite(v) ? 0u : 1u;
        g[k] = v;
      }
    }
    *nonFinite = bad;
    return true;
  }
};
