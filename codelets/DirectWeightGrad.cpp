// The weight gradient of a direct-current input layer, once per minibatch (the LIF backward,
// LifBackward.cpp, sums dL/dI over the steps for it).
#include <poplar/Vertex.hpp>

#include "OptimizerSteps.hpp"
#include "StoredRows.hpp"
#include "WeightGradRows.hpp"

#include <cstddef>
#include <type_traits>

using namespace poplar;
using namespace popsnn::lif;

// dL/dW = x^T . sum_t dL/dI for direct-current input, once per minibatch, each
// weight-gradient row written once. x is stored as `Stored` (float, or half: docs/numerics.md
// section 8); dL/dI and dL/dW are float32 sums either way.
template <class Stored> class DirectWeightGrad : public Vertex {
public:
  Input<Vector<Stored>> x;             // [B, xStride]
  Input<Vector<float>> currentGradSum; // [B, n]
  Output<Vector<float>> gradWeights;   // [numInputs, n]: inputs firstInput.. of x
  // For GROUP inputs at a time, the samples where each is non-zero: [GROUP, B].
  InOut<Vector<unsigned>> nzIndex;
  InOut<Vector<float>> nzValue;
  unsigned batch;
  unsigned numInputs;
  unsigned numNeurons;
  // The inputs of x this vertex covers (a shard's fan-in can be split over several
  // vertices, one per worker): x's row length and the first of them.
  unsigned xStride;
  unsigned firstInput;

  static constexpr unsigned GROUP = SPARSE_INPUT_GROUP; // x read a cache line at a time

  bool compute() {
    if constexpr (std::is_same_v<Stored, float>)
      computeFloat();
    else
      popsnn::stored::inputTransposedProduct(&x[firstInput], xStride, batch, numInputs,
                                             &currentGradSum[0], numNeurons, &gradWeights[0]);
    return true;
  }

private:
  // A member template: the half vertex's explicit instantiation leaves it out.
  template <class T = Stored> void computeFloat() {
    const WeightGradRows grad(&x[firstInput], xStride, batch, numInputs, &currentGradSum[0],
                              numNeurons, &nzIndex[0], &nzValue[0]);
    grad.rows(0, numInputs, &gradWeights[0]);
  }
};
template class DirectWeightGrad<float>;
template class DirectWeightGrad<half>;

// The training step's first-layer weights (float storage, the whole batch at once, on the cpu
// device: the plan's fusedWeightStep): dL/dW a group of FUSED_STEP_ROWS rows
// at a time into `rows`, and those weights stepped while the rows are in cache -- the gradient
// neither written out nor read back by a separate optimiser pass, which is bound by memory at
// small batches. The same sums as DirectWeightGrad and the same per-entry step as AdamStep and
// SgdStep (OptimizerSteps.hpp): the weights come out bit-identical. dL/dW itself is left
// unwritten: the gradients-only program (lossAndGrad) runs DirectWeightGrad instead.
class DirectWeightAdamStep : public Vertex {
public:
  Input<Vector<float>> x;              // [B, numInputs]
  Input<Vector<float>> currentGradSum; // [B, n]
  InOut<Vector<float>> rows;           // [FUSED_STEP_ROWS, n] scratch
  InOut<Vector<unsigned>> nzIndex;     // the sparse kernel's scratch, as DirectWeightGrad's
  InOut<Vector<float>> nzValue;
  unsigned batch;
  unsigned numInputs;
  unsigned numNeurons;
  // AdamStep's state and constants.
  InOut<Vector<float>> param;
  InOut<Vector<float>> expAvg;
  InOut<Vector<float>> expAvgSq;
  InOut<unsigned> count;
  Input<float> lr;
  float beta1;
  float beta2;
  float oneMinusBeta1;
  float oneMinusBeta2;
  float eps;
  float weightDecay;
  unsigned decoupled;

  bool compute() {
    const unsigned step = *count + 1;
    const popsnn::optim::AdamStep s = popsnn::optim::adamStep(
        *lr, beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, weightDecay, decoupled != 0, step);
    float *scratch = &rows[0];
    const WeightGradRows grad(&x[0], numInputs, batch, numInputs, &currentGradSum[0], numNeurons,
                              &nzIndex[0], &nzValue[0]);
    grad.byGroups(scratch, [&](std::size_t at, unsigned size) {
      popsnn::optim::adamEntries(s, &param[at], scratch, &expAvg[at], &expAvgSq[at], size);
    });
    *count = step;
    return true;
  }
};

class DirectWeightSgdStep : public Vertex {
public:
  Input<Vector<float>> x;              // [B, numInputs]
  Input<Vector<float>> currentGradSum; // [B, n]
  InOut<Vector<float>> rows;           // [FUSED_STEP_ROWS, n] scratch
  InOut<Vector<unsigned>> nzIndex;     // the sparse kernel's scratch, as DirectWeightGrad's
  InOut<Vector<float>> nzValue;
  unsigned batch;
  unsigned numInputs;
  unsigned numNeurons;
  // SgdStep's state and constants.
  InOut<Vector<float>> param;
  Vector<InOut<Vector<float>>> momentumBuffer; // with momentum: one edge, as param's size
  InOut<unsigned> count;
  Input<float> lr;
  float momentum;
  float oneMinusDampening;
  float weightDecay;
  unsigned nesterov;

  bool compute() {
    const popsnn::optim::SgdStep s =
        popsnn::optim::sgdStep(*lr, momentum, oneMinusDampening, weightDecay, nesterov, *count);
    float *buf = momentum != 0.0f ? &momentumBuffer[0][0] : nullptr;
    float *scratch = &rows[0];
    const WeightGradRows grad(&x[0], numInputs, batch, numInputs, &currentGradSum[0], numNeurons,
                              &nzIndex[0], &nzValue[0]);
    grad.byGroups(scratch, [&](std::size_t at, unsigned size) {
      popsnn::optim::sgdEntries(s, &param[at], scratch, buf ? buf + at : nullptr, size);
    });
    *count = *count + 1;
    return true;
  }
};
