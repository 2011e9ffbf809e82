// The loss on the output layer's records, on one tile: value, dL/dS and dL/dU.
// Records arrive shard by shard ([shard][T][B][shard size]); samples weigh
// 1/valid (0 for the padding of a last, partial batch), so the loss is the
// mean over the valid samples and padding gets exactly zero gradient.
#include <poplar/Vertex.hpp>

#include <cmath>

#include "../include/popsnn/VertexEnums.hpp"

using namespace poplar;

namespace popsnn {
namespace loss {

// The losses OutputLoss is templated on. Each computes one sample's loss (times its weight w,
// label y), writes its gradients into the vertex's outputs and returns the weighted loss.
// `membranes`: it reads U and writes dL/dU (codes::usesMembranes).
// z is the vertex's scratch: [C] logits or counts, then [C] more.

// Spike counts per class (z[0..K)), then each output's count gradient spread over the steps.
template <class V> void countsPerClass(const V &v, unsigned b, float *z) {
  const unsigned block = v.numOutputs / v.numClasses;
  for (unsigned k = 0; k < v.numClasses; ++k)
    z[k] = 0.0f;
  for (unsigned c = 0; c < v.numOutputs; ++c) {
    const unsigned base = v.at(0, b, c), step = v.stepStride(c);
    float count = 0.0f;
    for (unsigned t = 0; t < v.numSteps; ++t)
      count += float(v.spikes[base + t * step]);
    z[c / block] += count;
  }
}
template <class V> void countGradsOverSteps(V &v, unsigned b, const float *z) {
  const unsigned block = v.numOutputs / v.numClasses;
  for (unsigned c = 0; c < v.numOutputs; ++c) {
    const unsigned base = v.at(0, b, c), step = v.stepStride(c);
    for (unsigned t = 0; t < v.numSteps; ++t)
      v.gradSpikes[base + t * step] = v.store(z[c / block]);
  }
}

struct CeCount { // cross-entropy of the spike counts per class
  static constexpr bool membranes = codes::usesMembranes(codes::CE_COUNT);
  template <class V> static float sample(V &v, unsigned b, unsigned y, float w, float *z) {
    countsPerClass(v, b, z);
    const float value = w * V::crossEntropy(z, v.numClasses, y);
    for (unsigned k = 0; k < v.numClasses; ++k)
      z[k] *= w;
    countGradsOverSteps(v, b, z);
    return value;
  }
};

struct MseCount { // squared error of the counts against on/off targets
  static constexpr bool membranes = codes::usesMembranes(codes::MSE_COUNT);
  template <class V> static float sample(V &v, unsigned b, unsigned y, float w, float *z) {
    const unsigned K = v.numClasses, T = v.numSteps;
    countsPerClass(v, b, z);
    float sq = 0.0f;
    for (unsigned k = 0; k < K; ++k) {
      const float diff = z[k] - (k == y ? v.onTarget : v.offTarget);
      sq += diff * diff;
      z[k] = w * diff * (2.0f / float(K * T));
    }
    countGradsOverSteps(v, b, z);
    return w * sq / float(K * T);
  }
};

struct CeRate { // cross-entropy of the spikes at each step, averaged over the steps
  static constexpr bool membranes = codes::usesMembranes(codes::CE_RATE);
  template <class V> static float sample(V &v, unsigned b, unsigned y, float w, float *z) {
    const unsigned T = v.numSteps, C = v.numOutputs;
    float total = 0.0f;
    for (unsigned t = 0; t < T; ++t) {
      for (unsigned c = 0; c < C; ++c)
        z[c] = float(v.spikes[v.at(t, b, c)]);
      total += w * V::crossEntropy(z, C, y) / float(T);
      for (unsigned c = 0; c < C; ++c)
        v.gradSpikes[v.at(t, b, c)] = v.store(z[c] * w / float(T));
    }
    return total;
  }
};

struct MseMembrane { // squared error of the membranes against on/off targets at every step
  static constexpr bool membranes = codes::usesMembranes(codes::MSE_MEMBRANE);
  template <class V> static float sample(V &v, unsigned b, unsigned y, float w, float *) {
    const unsigned T = v.numSteps, C = v.numOutputs;
    const float scale = 2.0f / float(T * C);
    float total = 0.0f;
    for (unsigned t = 0; t < T; ++t) {
      for (unsigned c = 0; c < C; ++c) {
        const float diff = float(v.membranes[v.at(t, b, c)]) - (c == y ? v.onTarget : v.offTarget);
        total += w * diff * diff / float(T * C);
        v.gradMembranes[v.at(t, b, c)] = v.store(w * diff * scale);
      }
    }
    return total;
  }
};

struct CeMaxMembrane { // cross-entropy of each output's peak membrane; gradient to its first peak
  static constexpr bool membranes = codes::usesMembranes(codes::CE_MAX_MEMBRANE);
  template <class V> static float sample(V &v, unsigned b, unsigned y, float w, float *z) {
    const unsigned T = v.numSteps, C = v.numOutputs;
    float *__restrict firstMax = z + C;
    for (unsigned c = 0; c < C; ++c) {
      unsigned best = 0;
      for (unsigned t = 1; t < T; ++t)
        if (float(v.membranes[v.at(t, b, c)]) > float(v.membranes[v.at(best, b, c)]))
          best = t;
      z[c] = float(v.membranes[v.at(best, b, c)]);
      firstMax[c] = float(best);
    }
    const float value = w * V::crossEntropy(z, C, y);
    for (unsigned c = 0; c < C; ++c)
      v.gradMembranes[v.at(unsigned(firstMax[c]), b, c)] = v.store(w * z[c]);
    return value;
  }
};

} // namespace loss
} // namespace popsnn

// The records and the gradients sent back are stored as `Stored` (float, or half:
// docs/numerics.md section 8); the loss and its gradient are computed in float, and a half
// form multiplies the gradient by the loss scale before storing it (half would flush small
// dL/dS to zero), rounding once. `Loss` is one of popsnn::loss's kinds.
template <class Stored, class Loss> class OutputLoss : public Vertex {
public:
  Input<Vector<Stored>> spikes;       // [T, B, C], shard-major
  Input<Vector<Stored>> membranes;    // [T, B, C], shard-major
  Input<Vector<int>> labels;          // [B]
  Input<Vector<float>> sampleWeights; // [B]
  Output<Vector<Stored>> gradSpikes;  // like spikes
  Output<Vector<Stored>> gradMembranes;
  Output<float> loss;
  InOut<Vector<float>> scratch; // [2 * C]
  // The loss scale (one float the host writes each step): one edge with half storage, none
  // in float (the gradient is stored as computed).
  Vector<Input<Vector<float>>> lossScale;

  unsigned numSteps;
  unsigned batch;
  unsigned numOutputs;
  unsigned numClasses;
  unsigned shardSize;
  float onTarget; // mse_count: target count of the label; mse_membrane: on target
  float offTarget;

  // A gradient entry as stored: times the loss scale where there is one, rounded once.
  Stored store(float g) const { return Stored(lossScale.size() ? g * lossScale[0][0] : g); }

  unsigned at(unsigned t, unsigned b, unsigned c) const {
    const unsigned first = (c / shardSize) * shardSize;
    const unsigned size = numOutputs - first < shardSize ? numOutputs - first : shardSize;
    return numSteps * batch * first + (t * batch + b) * size + (c - first);
  }
  // at(t, b, c) = at(0, b, c) + t * stepStride(c): the divisions once per output, not per step.
  unsigned stepStride(unsigned c) const {
    const unsigned first = (c / shardSize) * shardSize;
    return batch * (numOutputs - first < shardSize ? numOutputs - first : shardSize);
  }

  // Cross-entropy of logits z[0..K) for label y: returns -log softmax(z)[y] and
  // leaves softmax(z) - onehot(y) in z.
  static float crossEntropy(float *z, unsigned k, unsigned y) {
    float top = z[0];
    for (unsigned c = 1; c < k; ++c)
      top = z[c] > top ? z[c] : top;
    float sum = 0.0f;
    for (unsigned c = 0; c < k; ++c)
      sum += std::exp(z[c] - top);
    const float logSum = std::log(sum);
    const float value = -(z[y] - top - logSum);
    for (unsigned c = 0; c < k; ++c)
      z[c] = std::exp(z[c] - top - logSum);
    z[y] -= 1.0f;
    return value;
  }

  bool compute() {
    for (unsigned k = 0; k < numSteps * batch * numOutputs; ++k)
      gradSpikes[k] = Stored(0.0f);
    // A loss without a membrane term leaves dL/dU alone: the host sends it nowhere
    // (lossCopies) and the readout's copy keeps its zeros.
    if constexpr (Loss::membranes)
      for (unsigned k = 0; k < numSteps * batch * numOutputs; ++k)
        gradMembranes[k] = Stored(0.0f);
    float total = 0.0f;
    for (unsigned b = 0; b < batch; ++b) {
      const float w = sampleWeights[b];
      if (w != 0.0f)
        total += Loss::sample(*this, b, unsigned(labels[b]), w, &scratch[0]);
    }
    *loss = total;
    return true;
  }
};
template class OutputLoss<float, popsnn::loss::CeCount>;
template class OutputLoss<float, popsnn::loss::CeRate>;
template class OutputLoss<float, popsnn::loss::MseCount>;
template class OutputLoss<float, popsnn::loss::MseMembrane>;
template class OutputLoss<float, popsnn::loss::CeMaxMembrane>;
template class OutputLoss<half, popsnn::loss::CeCount>;
template class OutputLoss<half, popsnn::loss::CeRate>;
template class OutputLoss<half, popsnn::loss::MseCount>;
template class OutputLoss<half, popsnn::loss::MseMembrane>;
template class OutputLoss<half, popsnn::loss::CeMaxMembrane>;

// The loss of a batch whose samples were split over several OutputLoss vertices (one per
// group of samples, each on a tile of its own): the sum of their parts, in order.
class LossSum : public Vertex {
public:
  Input<Vector<float>> parts;
  Output<float> loss;

  bool compute() {
    float total = 0.0f;
    for (unsigned k = 0; k < parts.size(); ++k)
      total += parts[k];
    *loss = total;
    return true;
  }
};
