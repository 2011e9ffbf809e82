// Backward vertices: BPTT for one shard, one step (t = T-1 .. 0), every sample.
// The reset carries no gradient (SPEC section 1). Sparse work: weight gradients
// visit only the input ids that spiked; the gradient sent to a previous layer is
// computed only for its gradient candidates (all entries when it has no rule).
#include <poplar/Vertex.hpp>

#include "VertexEnums.hpp"

using namespace poplar;
using namespace popsnn::codes;

namespace {

inline float dot(const float *__restrict a, const float *__restrict b, unsigned n) {
  float s = 0.0f;
  for (unsigned j = 0; j < n; ++j)
    s += a[j] * b[j];
  return s;
}

} // namespace

// Puts the shard's id buffers of step t (for the next layer) and, for
// all-to-all RLeaky, of step t-1 (for its own recurrence) back on the exchange.
class PublishIds : public Vertex {
public:
  InOut<unsigned> step;      // counts 0..T-1; t = T-1-step
  Input<Vector<int>> idTrace; // [T, B, stride]
  Output<Vector<int>> outIds; // [B, stride]
  Output<Vector<int>> prevIds; // [B, stride] (or a 1-element dummy)
  unsigned batch;
  unsigned numSteps;
  unsigned stride;
  unsigned publishPrevious;

  bool compute() {
    const unsigned t = numSteps - 1 - *step;
    for (unsigned b = 0; b < batch; ++b) {
      const int *src = &idTrace[(t * batch + b) * stride];
      int *dst = &outIds[b * stride];
      const unsigned used = BUFFER_HEADER + unsigned(src[1]);
      for (unsigned k = 0; k < used; ++k)
        dst[k] = src[k];
      if (publishPrevious) {
        int *pdst = &prevIds[b * stride];
        if (t == 0) {
          pdst[0] = 0;
          pdst[1] = 0;
        } else {
          const int *psrc = &idTrace[((t - 1) * batch + b) * stride];
          const unsigned pused = BUFFER_HEADER + unsigned(psrc[1]);
          for (unsigned k = 0; k < pused; ++k)
            pdst[k] = psrc[k];
        }
      }
    }
    *step = (*step + 1 == numSteps) ? 0 : *step + 1;
    return true;
  }
};

class LifBackward : public Vertex {
public:
  InOut<unsigned> step;             // counts 0..T-1; t = T-1-step
  Input<Vector<float>> lossGradSpikes; // output layer: dL/dS [T, B, n]
  Input<Vector<float>> lossGradMem;    // output layer: dL/dU [T, B, n] (membrane losses)
  Input<Vector<float>> epsIn;       // hidden layer: dL/dS partials [numDst, B, n]
  Input<Vector<float>> recEpsIn;    // all-to-all: dL/dS[t] partials from step t+1 [numOwn, B, n]
  Input<Vector<float>> surrTrace;   // [T, B, n]
  Input<Vector<int>> idTrace;       // own buffers [T, B, stride]
  Input<Vector<int>> inIds;         // INPUT_SPIKE_IDS: previous layer's buffers of step t
  Input<Vector<float>> denseIn;     // INPUT_DENSE_STEPS: [T, B, nIn]
  Input<Vector<int>> recIds;        // all-to-all: own layer's buffers of step t-1 [numOwn, B, stride]
  Input<Vector<float>> weights;     // [nIn, n]
  Input<Vector<float>> recWeights;  // all-to-all [N, n]; one-to-one [n]
  InOut<Vector<float>> gradMem;     // dL/dU[t+1] carried [B, n]
  InOut<Vector<float>> gradSyn;     // dL/dJ[t+1] carried [B, n] (Synaptic)
  InOut<Vector<float>> gradWeights; // [nIn, n]
  InOut<Vector<float>> gradBias;    // [n]
  InOut<Vector<float>> gradRecWeights; // like recWeights
  InOut<Vector<float>> gradRecBias; // [n]
  InOut<Vector<float>> currentGradSum; // INPUT_DIRECT: sum_t dL/dI [B, n]
  Output<Vector<float>> epsOut;     // to the previous layer [B * N_prev], shard-major
  Output<Vector<float>> recEpsOut;  // all-to-all: to this layer for step t-1 [B * N], shard-major
  InOut<Vector<float>> scratch;     // [2n]
  // Dense partials (a previous layer without a sparse rule) run faster from weights laid
  // out by neuron: [n, nIn] (and [n, N] for V), rebuilt at the first backward step.
  InOut<Vector<float>> weightsByNeuron;
  InOut<Vector<float>> recWeightsByNeuron;

  unsigned batch;
  unsigned numNeurons;
  unsigned numSteps;
  unsigned numInputs;
  unsigned numSrc;
  unsigned inStride;
  unsigned numDst;
  unsigned numOwn;
  unsigned stride;
  unsigned offset;
  unsigned neuron;
  unsigned reset;
  unsigned inputMode;
  unsigned isOutput;
  unsigned prevDense;
  unsigned ownDense;
  unsigned prevShardSize;
  unsigned prevLayerSize;
  unsigned ownShardSize;
  unsigned ownLayerSize;
  float beta;
  float alpha;

  bool compute() {
    // Float members copied to locals (see LifForward).
    const float beta = this->beta, alpha = this->alpha;
    const unsigned t = numSteps - 1 - *step;
    const unsigned n = numNeurons;
    const unsigned bn = batch * n;
    if (t + 1 == numSteps) {
      if (inputMode == INPUT_SPIKE_IDS && prevDense)
        transpose(&weights[0], numInputs, &weightsByNeuron[0]);
      if (neuron == RLEAKY_ALL_TO_ALL && ownDense)
        transpose(&recWeights[0], ownLayerSize, &recWeightsByNeuron[0]);
      for (unsigned k = 0; k < bn; ++k)
        gradMem[k] = 0.0f;
      if (neuron == SYNAPTIC)
        for (unsigned k = 0; k < bn; ++k)
          gradSyn[k] = 0.0f;
      if (inputMode != INPUT_DIRECT) // DirectWeightGrad writes it whole
        for (unsigned k = 0; k < gradWeights.size(); ++k)
          gradWeights[k] = 0.0f;
      for (unsigned k = 0; k < n; ++k)
        gradBias[k] = 0.0f;
      if (neuron == RLEAKY_ALL_TO_ALL || neuron == RLEAKY_ONE_TO_ONE) {
        for (unsigned k = 0; k < gradRecWeights.size(); ++k)
          gradRecWeights[k] = 0.0f;
        for (unsigned k = 0; k < gradRecBias.size(); ++k)
          gradRecBias[k] = 0.0f;
      }
      if (inputMode == INPUT_DIRECT)
        for (unsigned k = 0; k < bn; ++k)
          currentGradSum[k] = 0.0f;
    }
    float *__restrict eps = &scratch[0];
    float *__restrict keep = &scratch[n];
    for (unsigned b = 0; b < batch; ++b) {
      float *__restrict gU = &gradMem[b * n];
      const float *__restrict sg = &surrTrace[(t * batch + b) * n];
      const int *own = &idTrace[(t * batch + b) * stride];
      // dL/dS[t]: from the loss or the next layer, plus the recurrent path.
      if (isOutput) {
        const float *__restrict g = &lossGradSpikes[(t * batch + b) * n];
        for (unsigned j = 0; j < n; ++j)
          eps[j] = g[j];
      } else {
        const float *__restrict g0 = &epsIn[b * n];
        for (unsigned j = 0; j < n; ++j)
          eps[j] = g0[j];
        for (unsigned d = 1; d < numDst; ++d) {
          const float *__restrict g = &epsIn[(d * batch + b) * n];
          for (unsigned j = 0; j < n; ++j)
            eps[j] += g[j];
        }
      }
      if (neuron == RLEAKY_ALL_TO_ALL && t + 1 < numSteps) {
        for (unsigned o = 0; o < numOwn; ++o) {
          const float *__restrict g = &recEpsIn[(o * batch + b) * n];
          for (unsigned j = 0; j < n; ++j)
            eps[j] += g[j];
        }
      } else if (neuron == RLEAKY_ONE_TO_ONE) {
        for (unsigned j = 0; j < n; ++j)
          eps[j] += recWeights[j] * gU[j];
      }
      const bool recurrent = neuron == RLEAKY_ALL_TO_ALL || neuron == RLEAKY_ONE_TO_ONE;
      // A zero reset cuts the leak path of neurons that spiked at t: U[t+1] starts from 0.
      // (RLeaky's carry is already gated: see below.)
      if (reset == RESET_ZERO && !recurrent)
        for (int k = 0; k < own[0]; ++k)
          gU[unsigned(own[BUFFER_HEADER + k]) - offset] = 0.0f;
      // dL/dU[t] = surrogate * dL/dS[t] (+ a membrane loss) + leak * dL/dU[t+1].
      // Entries off the sparse rule have surrogate exactly 0 and never read eps,
      // which is only written for gradient candidates.
      const float *__restrict gMem = isOutput ? &lossGradMem[(t * batch + b) * n] : nullptr;
      if (gMem) {
        for (unsigned j = 0; j < n; ++j)
          gU[j] = ((sg[j] != 0.0f ? sg[j] * eps[j] : 0.0f) + gMem[j]) + beta * gU[j];
      } else {
        for (unsigned j = 0; j < n; ++j)
          gU[j] = (sg[j] != 0.0f ? sg[j] * eps[j] : 0.0f) + beta * gU[j];
      }
      float *__restrict dI = eps; // eps is spent: reuse its storage for dL/dI[t]
      if (neuron == SYNAPTIC) {
        float *__restrict gJ = &gradSyn[b * n];
        if (reset == RESET_ZERO) {
          // U[t] = (1 - S[t-1]) (beta U[t-1] + J[t]): the reset also gates J's path.
          for (unsigned j = 0; j < n; ++j)
            keep[j] = 1.0f;
          if (t > 0) {
            const int *prevOwn = &idTrace[((t - 1) * batch + b) * stride];
            for (int k = 0; k < prevOwn[0]; ++k)
              keep[unsigned(prevOwn[BUFFER_HEADER + k]) - offset] = 0.0f;
          }
          for (unsigned j = 0; j < n; ++j)
            gJ[j] = keep[j] * gU[j] + alpha * gJ[j];
        } else {
          for (unsigned j = 0; j < n; ++j)
            gJ[j] = gU[j] + alpha * gJ[j];
        }
        for (unsigned j = 0; j < n; ++j)
          dI[j] = gJ[j];
      } else {
        if (recurrent && reset == RESET_ZERO) {
          // U[t] = (1 - S[t-1]) (beta U[t-1] + I[t] + V S[t-1] + b_V): carry and dL/dI are
          // the gradient of that bracket.
          if (t > 0) {
            const int *prevOwn = &idTrace[((t - 1) * batch + b) * stride];
            for (int k = 0; k < prevOwn[0]; ++k)
              gU[unsigned(prevOwn[BUFFER_HEADER + k]) - offset] = 0.0f;
          }
        }
        for (unsigned j = 0; j < n; ++j)
          dI[j] = gU[j];
      }
      float *__restrict gb = &gradBias[0];
      for (unsigned j = 0; j < n; ++j)
        gb[j] += dI[j];
      // Weight gradient: sparse in the input.
      if (inputMode == INPUT_DIRECT) {
        float *__restrict acc = &currentGradSum[b * n];
        for (unsigned j = 0; j < n; ++j)
          acc[j] += dI[j];
      } else if (inputMode == INPUT_DENSE_STEPS) {
        const float *__restrict xb = &denseIn[(t * batch + b) * numInputs];
        for (unsigned i = 0; i < numInputs; ++i) {
          const float xi = xb[i];
          if (xi == 0.0f)
            continue;
          float *__restrict row = &gradWeights[i * n];
          for (unsigned j = 0; j < n; ++j)
            row[j] += xi * dI[j];
        }
      } else {
        for (unsigned s = 0; s < numSrc; ++s) {
          const int *buf = &inIds[(s * batch + b) * inStride];
          for (int k = 0; k < buf[0]; ++k) {
            float *__restrict row = &gradWeights[unsigned(buf[BUFFER_HEADER + k]) * n];
            for (unsigned j = 0; j < n; ++j)
              row[j] += dI[j];
          }
        }
        // dL/dS of the previous layer at t, only where it can carry gradient.
        partials(inIds, numSrc, inStride, prevDense, prevShardSize, prevLayerSize, b, dI,
                 &weights[0], &weightsByNeuron[0], &epsOut[0]);
      }
      if (neuron == RLEAKY_ALL_TO_ALL) {
        float *__restrict gvb = &gradRecBias[0];
        for (unsigned j = 0; j < n; ++j)
          gvb[j] += dI[j];
        if (t > 0) {
          for (unsigned o = 0; o < numOwn; ++o) {
            const int *buf = &recIds[(o * batch + b) * stride];
            for (int k = 0; k < buf[0]; ++k) {
              float *__restrict row = &gradRecWeights[unsigned(buf[BUFFER_HEADER + k]) * n];
              for (unsigned j = 0; j < n; ++j)
                row[j] += dI[j];
            }
          }
          // dL/dS[t-1] of this layer through V, for the candidates of step t-1.
          partials(recIds, numOwn, stride, ownDense, ownShardSize, ownLayerSize, b, dI,
                   &recWeights[0], &recWeightsByNeuron[0], &recEpsOut[0]);
        }
      } else if (neuron == RLEAKY_ONE_TO_ONE && t > 0) {
        const int *prevOwn = &idTrace[((t - 1) * batch + b) * stride];
        for (int k = 0; k < prevOwn[0]; ++k) {
          const unsigned j = unsigned(prevOwn[BUFFER_HEADER + k]) - offset;
          gradRecWeights[j] += dI[j];
        }
      }
    }
    *step = (*step + 1 == numSteps) ? 0 : *step + 1;
    return true;
  }

private:
  // [rows, n] -> [n, rows].
  void transpose(const float *__restrict w, unsigned rows, float *__restrict byNeuron) const {
    const unsigned n = numNeurons;
    for (unsigned i = 0; i < rows; ++i)
      for (unsigned j = 0; j < n; ++j)
        byNeuron[j * rows + i] = w[i * n + j];
  }

  // out[i] = W[i, :] . dI for the neurons i of a layer (all of them when `dense`, else
  // the ids its buffers list), written shard-major for the exchange back to their tiles.
  // A buffer of shard s lists only ids of shard s, so its block is known without search.
  void partials(const Input<Vector<int>> &ids, unsigned numShards, unsigned idStride,
                unsigned dense, unsigned shardSize, unsigned layerSize, unsigned b,
                const float *__restrict dI, const float *__restrict w,
                const float *__restrict byNeuron, float *__restrict out) const {
    const unsigned n = numNeurons;
    for (unsigned s = 0; s < numShards; ++s) {
      const unsigned first = s * shardSize;
      const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
      float *__restrict block = out + batch * first + b * size;
      if (dense) {
        // Every entry: one contiguous multiply-add pass per neuron of this shard.
        for (unsigned i = 0; i < size; ++i)
          block[i] = 0.0f;
        for (unsigned j = 0; j < n; ++j) {
          const float g = dI[j];
          const float *__restrict row = byNeuron + j * layerSize + first;
          for (unsigned i = 0; i < size; ++i)
            block[i] += g * row[i];
        }
      } else {
        const int *buf = &ids[(s * batch + b) * idStride];
        for (int k = 0; k < buf[1]; ++k) {
          const unsigned i = unsigned(buf[BUFFER_HEADER + k]);
          block[i - first] = dot(w + i * n, dI, n);
        }
      }
    }
  }
};

// dL/dW = x^T . sum_t dL/dI for direct-current input, once per minibatch.
class DirectWeightGrad : public Vertex {
public:
  Input<Vector<float>> x;              // [B, nIn]
  Input<Vector<float>> currentGradSum; // [B, n]
  InOut<Vector<float>> gradWeights;    // [nIn, n]
  unsigned batch;
  unsigned numInputs;
  unsigned numNeurons;

  bool compute() {
    const unsigned n = numNeurons;
    for (unsigned k = 0; k < numInputs * n; ++k)
      gradWeights[k] = 0.0f;
    for (unsigned b = 0; b < batch; ++b) {
      const float *__restrict g = &currentGradSum[b * n];
      for (unsigned i = 0; i < numInputs; ++i) {
        const float xi = x[b * numInputs + i];
        if (xi == 0.0f)
          continue;
        float *__restrict row = &gradWeights[i * n];
        for (unsigned j = 0; j < n; ++j)
          row[j] += xi * g[j];
      }
    }
    return true;
  }
};
