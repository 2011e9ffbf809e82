// The loss on the output layer's records, on one tile: value, dL/dS and dL/dU.
// Records arrive shard by shard ([shard][T][B][shard size]); samples weigh
// 1/valid (0 for the padding of a last, partial batch), so the loss is the
// mean over the valid samples and padding gets exactly zero gradient.
#include <poplar/Vertex.hpp>

#include <cmath>

#include "../include/popsnn/VertexEnums.hpp"

using namespace poplar;
using namespace popsnn::codes;

// The records and the gradients sent back are stored as `Stored` (float, or half:
// docs/numerics.md section 8); the loss and its gradient are computed in float, and a half
// form multiplies the gradient by the loss scale before storing it (half would flush small
// dL/dS to zero), rounding once.
template <class Stored> class OutputLoss : public Vertex {
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

  unsigned kind;
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
    const unsigned T = numSteps, C = numOutputs, K = numClasses;
    const unsigned block = C / K;
    for (unsigned k = 0; k < T * batch * C; ++k) {
      gradSpikes[k] = Stored(0.0f);
      gradMembranes[k] = Stored(0.0f);
    }
    float total = 0.0f;
    float *__restrict z = &scratch[0];
    for (unsigned b = 0; b < batch; ++b) {
      const float w = sampleWeights[b];
      if (w == 0.0f)
        continue;
      const unsigned y = unsigned(labels[b]);
      if (kind == CE_COUNT || kind == MSE_COUNT) {
        for (unsigned k = 0; k < K; ++k)
          z[k] = 0.0f;
        for (unsigned c = 0; c < C; ++c) {
          const unsigned base = at(0, b, c), step = stepStride(c);
          float count = 0.0f;
          for (unsigned t = 0; t < T; ++t)
            count += float(spikes[base + t * step]);
          z[c / block] += count;
        }
        if (kind == CE_COUNT) {
          total += w * crossEntropy(z, K, y);
          for (unsigned k = 0; k < K; ++k)
            z[k] *= w;
        } else {
          float sq = 0.0f;
          for (unsigned k = 0; k < K; ++k) {
            const float diff = z[k] - (k == y ? onTarget : offTarget);
            sq += diff * diff;
            z[k] = w * diff * (2.0f / float(K * T));
          }
          total += w * sq / float(K * T);
        }
        for (unsigned c = 0; c < C; ++c) {
          const unsigned base = at(0, b, c), step = stepStride(c);
          for (unsigned t = 0; t < T; ++t)
            gradSpikes[base + t * step] = store(z[c / block]);
        }
      } else if (kind == CE_RATE) {
        for (unsigned t = 0; t < T; ++t) {
          for (unsigned c = 0; c < C; ++c)
            z[c] = float(spikes[at(t, b, c)]);
          total += w * crossEntropy(z, C, y) / float(T);
          for (unsigned c = 0; c < C; ++c)
            gradSpikes[at(t, b, c)] = store(z[c] * w / float(T));
        }
      } else if (kind == MSE_MEMBRANE) {
        const float scale = 2.0f / float(T * C);
        for (unsigned t = 0; t < T; ++t) {
          for (unsigned c = 0; c < C; ++c) {
            const float diff = float(membranes[at(t, b, c)]) - (c == y ? onTarget : offTarget);
            total += w * diff * diff / float(T * C);
            gradMembranes[at(t, b, c)] = store(w * diff * scale);
          }
        }
      } else { // CE_MAX_MEMBRANE: the gradient goes to the first step at the maximum
        float *__restrict firstMax = &scratch[C];
        for (unsigned c = 0; c < C; ++c) {
          unsigned best = 0;
          for (unsigned t = 1; t < T; ++t)
            if (float(membranes[at(t, b, c)]) > float(membranes[at(best, b, c)]))
              best = t;
          z[c] = float(membranes[at(best, b, c)]);
          firstMax[c] = float(best);
        }
        total += w * crossEntropy(z, C, y);
        for (unsigned c = 0; c < C; ++c)
          gradMembranes[at(unsigned(firstMax[c]), b, c)] = store(w * z[c]);
      }
    }
    *loss = total;
    return true;
  }
};
template class OutputLoss<float>;
template class OutputLoss<half>;

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
