// Forward vertices: one shard (a contiguous block of a layer's output neurons)
// on one tile, one time step, every sample of the batch.
#include <poplar/Vertex.hpp>

#include <cmath>

#include "DenseKernels.hpp"
#include "LifCommon.hpp"

using namespace poplar;
using namespace popsnn::codes;
using namespace popsnn::lif;

// I = x.W + b for direct-current input, once per minibatch (x is the same every step).
// By the measured density of x: the blocked dense product, or the sparse row kernel that
// skips zero inputs (image data is mostly zeros); the same sum per entry either way.
class DirectCurrent : public Vertex {
public:
  Input<Vector<float>> x;          // [B, nIn]
  Input<Vector<float>> weights;    // [nIn, n] (transposed: one contiguous row per input)
  Input<Vector<float>> bias;       // [n]
  Output<Vector<float>> current;   // [B, n]
  InOut<Vector<unsigned>> nzIndex; // [nIn]: a sample's non-zero inputs (sparse kernel)
  InOut<Vector<float>> nzValue;    // [nIn]
  unsigned batch;
  unsigned numInputs;
  unsigned numNeurons;

  bool compute() {
    const unsigned n = numNeurons;
    const float *__restrict xs = &x[0];
    float *__restrict out = &current[0];
    if (popsnn::dense::denseEnough(popsnn::dense::countNonzero(xs, batch, numInputs, numInputs),
                                   1ull * batch * numInputs,
                                   popsnn::dense::DENSE_CURRENT_MIN_PER_MILLE))
      popsnn::dense::denseProduct(batch, n, numInputs, xs, numInputs, 1, &weights[0], n, out, n);
    else
      sparseInputProduct(xs, batch, numInputs, &weights[0], n, &nzIndex[0], &nzValue[0], out);
    for (unsigned b = 0; b < batch; ++b)
      for (unsigned j = 0; j < n; ++j)
        out[b * n + j] += bias[j];
    return true;
  }
};

// One LIF step of a shard: synaptic input, membrane update, spike decision,
// surrogate trace, and the shard's spike-id buffer (spikes, then gradient
// candidates) for every sample.
class LifForward : public Vertex {
public:
  InOut<unsigned> step; // device-side step counter, wraps at numSteps
  // INPUT_DIRECT: x.W + b [B, n]. INPUT_PARTIAL_CURRENT: this step's sum of the partial
  // blocks [B, n] (written here, without the bias).
  InOut<Vector<float>> current;
  Input<Vector<float>> denseIn; // INPUT_DENSE_STEPS: [T, B, nIn]
  // INPUT_SPIKE_IDS: the previous layer's buffers, [numSrc, T, B, inStride] (layer-major
  // schedule: its whole traces) or [numSrc, B, inStride] (step-major: this step's).
  Input<Vector<int>> inIds;
  Input<Vector<float>> weights; // [nIn, n]
  Input<Vector<float>> bias;    // [n]
  Input<Vector<int>>
      recIds; // RLEAKY_ALL_TO_ALL: own layer's buffers of step t-1 [numOwn, B, stride]
  Input<Vector<float>> recWeights; // all-to-all: [N, n]; one-to-one: [n]
  Input<Vector<float>> recBias;    // all-to-all: [n]
  InOut<Vector<float>> mem;        // U [B, n]
  InOut<Vector<float>> syn;        // J [B, n] (Synaptic)
  InOut<Vector<float>> prevSpikes; // S[t-1] [B, n]
  InOut<Vector<float>> scratch;    // [3n]
  // The masked surrogate dS/dU kept for the backward. No sparse rule: dense, surrTrace
  // [T, B, n]. A sparse rule: only for the entries of the id buffer (spikes, then gradient
  // candidates), surrValues [T, B, slot] beside idTrace (slot = stride - BUFFER_HEADER),
  // so the trace shrinks with the buffers' capacity.
  InOut<Vector<float>> surrTrace;
  InOut<Vector<float>> surrValues;
  InOut<Vector<int>> idTrace;     // own buffers [T, B, stride]
  Output<Vector<int>> outIds;     // own buffers of this step [B, stride], when exchanged per step
  Output<Vector<int>> prevIds;    // step-major all-to-all: step t-1's, for the first backward step
  InOut<Vector<float>> recSpikes; // output layer: S [T, B, n]
  InOut<Vector<float>> recMem;    // output layer: U [T, B, n]
  InOut<Vector<unsigned>> overflow; // [OVERFLOW_FIELDS]
  // INPUT_PARTIAL_CURRENT: the previous layer's shards' W.S blocks, [numSrc, T, B, n].
  Input<Vector<float>> partialIn;
  // pushNext: this shard computes its spikes' contribution to the next layer's input,
  // from its copy of the next layer's weights on its neurons (blocks [n, n_k], one per
  // downstream shard k), into blocks [T, B, n_k]; only those blocks cross tiles.
  Input<Vector<float>> nextWeights;
  Output<Vector<float>> nextCurrent;
  // nextWeights by own neuron, rows padded to P = pushWidth(N_next) floats: [n, P], then
  // the [P] sums.
  InOut<Vector<float>> nextRows;

  unsigned batch;
  unsigned numNeurons;
  unsigned numSteps;
  unsigned numInputs;
  unsigned numSrc;
  unsigned inStride;
  unsigned numOwn;
  unsigned stride;
  unsigned offset;
  unsigned capacity;
  unsigned neuron;
  unsigned reset;
  unsigned surrogate;
  unsigned rule;
  unsigned inputMode;
  unsigned record;
  unsigned stepsPerCall;
  unsigned stepMajor;   // schedule: 0 layer-major, 1 step-major (see the graph builder)
  unsigned publishStep; // write outIds every step
  unsigned pushNext;
  unsigned nextShardSize;
  unsigned nextLayerSize;
  float beta;
  float alpha;
  float threshold;
  float surrogateParam;
  float ruleValue;

  bool compute() {
    // Float members copied to locals: stores through float pointers could alias them,
    // which would force reloads and block vectorisation.
    const float beta = this->beta, alpha = this->alpha, threshold = this->threshold;
    const float surrogateParam = this->surrogateParam, ruleValue = this->ruleValue;
    // Likewise the unsigned members that int stores (the id buffers) could alias.
    const unsigned capacity = this->capacity, offset = this->offset;
    // All steps in one call (a layer-major schedule), or one (an all-to-all recurrence
    // needs every shard's spikes of step t-1 before step t).
    for (unsigned call = 0; call < stepsPerCall; ++call)
      step1(*step, beta, alpha, threshold, surrogateParam, ruleValue, capacity, offset);
    return true;
  }

private:
  void step1(unsigned t, float beta, float alpha, float threshold, float surrogateParam,
             float ruleValue, unsigned capacity, unsigned offset) {
    const unsigned n = numNeurons;
    if (t == 0) {
      for (unsigned k = 0; k < OVERFLOW_FIELDS; ++k)
        overflow[k] = 0;
      for (unsigned k = 0; k < batch * n; ++k) {
        mem[k] = 0.0f;
        prevSpikes[k] = 0.0f;
      }
      if (neuron == SYNAPTIC)
        for (unsigned k = 0; k < batch * n; ++k)
          syn[k] = 0.0f;
      if (pushNext) // one contiguous, zero-padded row of next-layer weights per own neuron
        blocksToRows(&nextWeights[0], n, nextShardSize, nextLayerSize, &nextRows[0]);
    }
    const unsigned nextN = nextLayerSize, P = pushWidth(nextN);
    float *__restrict pushed = pushNext ? &nextRows[n * P] : nullptr;
    if (inputMode == INPUT_PARTIAL_CURRENT) {
      // The previous layer's W.S blocks of step t summed over its shards, a [B, n] row of
      // each at a time (for every entry the same order of additions as one sample at a time).
      float *__restrict sum = &current[0];
      const unsigned rows = batch * n;
      for (unsigned k = 0; k < rows; ++k)
        sum[k] = 0.0f;
      for (unsigned s = 0; s < numSrc; ++s) {
        const float *__restrict part = &partialIn[(s * numSteps + t) * rows];
        for (unsigned k = 0; k < rows; ++k)
          sum[k] += part[k];
      }
    }
    for (unsigned b = 0; b < batch; ++b) {
      // Synaptic input I[t] into scratch.
      const float *in = &scratch[0]; // may alias acc below: not restrict
      if (inputMode == INPUT_DIRECT) {
        in = &current[b * n];
      } else {
        float *__restrict acc = &scratch[0];
        for (unsigned j = 0; j < n; ++j)
          acc[j] = 0.0f;
        if (inputMode == INPUT_PARTIAL_CURRENT) {
          const float *__restrict sum = &current[b * n];
          for (unsigned j = 0; j < n; ++j)
            acc[j] += sum[j];
        } else if (inputMode == INPUT_DENSE_STEPS) {
          const float *__restrict xb = &denseIn[(t * batch + b) * numInputs];
          for (unsigned i = 0; i < numInputs; ++i) {
            const float xi = xb[i];
            if (xi == 0.0f)
              continue;
            const float *__restrict row = &weights[i * n];
            for (unsigned j = 0; j < n; ++j)
              acc[j] += xi * row[j];
          }
        } else {
          for (unsigned s = 0; s < numSrc; ++s) {
            const int *buf = &inIds[((stepMajor ? s : s * numSteps + t) * batch + b) * inStride];
            const int spikes = buf[0];
            for (int k = 0; k < spikes; ++k) {
              const float *__restrict row = &weights[unsigned(buf[BUFFER_HEADER + k]) * n];
              for (unsigned j = 0; j < n; ++j)
                acc[j] += row[j];
            }
          }
        }
        for (unsigned j = 0; j < n; ++j)
          acc[j] += bias[j];
      }
      float *__restrict u = &mem[b * n];
      float *__restrict prev = &prevSpikes[b * n];
      // RLeaky's recurrent term V.S[t-1] (+ b_V), kept apart to add in the reference's order.
      float *__restrict rec = &scratch[n];
      if (neuron == RLEAKY_ALL_TO_ALL) {
        // V.S[t-1] + b_V, summed over the spikes of every shard of this layer.
        for (unsigned j = 0; j < n; ++j)
          rec[j] = 0.0f;
        if (t > 0)
          for (unsigned s = 0; s < numOwn; ++s) {
            const int *buf = &recIds[(s * batch + b) * stride];
            for (int k = 0; k < buf[0]; ++k) {
              const float *__restrict row = &recWeights[unsigned(buf[BUFFER_HEADER + k]) * n];
              for (unsigned j = 0; j < n; ++j)
                rec[j] += row[j];
            }
          }
        for (unsigned j = 0; j < n; ++j)
          rec[j] = rec[j] + recBias[j];
      } else if (neuron == RLEAKY_ONE_TO_ONE) {
        for (unsigned j = 0; j < n; ++j)
          rec[j] = prev[j] * recWeights[j];
      }
      const bool recurrent = neuron == RLEAKY_ALL_TO_ALL || neuron == RLEAKY_ONE_TO_ONE;
#ifdef POPSNN_FUSED_LEAK_FORWARD
      const bool fusedLeak = neuron == LEAKY && surrogate != SIGMOID;
#else
      const bool fusedLeak = false;
#endif
      // Membrane update; the reset R[t] = S[t-1] is decided by the previous step.
      // One branch-free loop per (model, reset), so that the compiler vectorises it.
      if (neuron == SYNAPTIC) {
        float *__restrict jsyn = &syn[b * n];
        for (unsigned j = 0; j < n; ++j)
          jsyn[j] = alpha * jsyn[j] + in[j];
        if (reset == RESET_SUBTRACT)
          for (unsigned j = 0; j < n; ++j)
            u[j] = beta * u[j] + jsyn[j] - prev[j] * threshold;
        else if (reset == RESET_ZERO)
          for (unsigned j = 0; j < n; ++j)
            u[j] = (1.0f - prev[j]) * (beta * u[j] + jsyn[j]);
        else
          for (unsigned j = 0; j < n; ++j)
            u[j] = beta * u[j] + jsyn[j];
      } else if (recurrent) {
        // snnTorch's RLeaky zero reset zeroes the whole update, input included.
        if (reset == RESET_SUBTRACT)
          for (unsigned j = 0; j < n; ++j)
            u[j] = beta * u[j] + in[j] + rec[j] - prev[j] * threshold;
        else if (reset == RESET_ZERO)
          for (unsigned j = 0; j < n; ++j)
            u[j] = (1.0f - prev[j]) * (beta * u[j] + in[j] + rec[j]);
        else
          for (unsigned j = 0; j < n; ++j)
            u[j] = beta * u[j] + in[j] + rec[j];
      } else if (fusedLeak) {
        // below, with the surrogate and the spikes
      } else {
        if (reset == RESET_SUBTRACT)
          for (unsigned j = 0; j < n; ++j)
            u[j] = beta * u[j] + in[j] - prev[j] * threshold;
        else if (reset == RESET_ZERO)
          for (unsigned j = 0; j < n; ++j)
            u[j] = beta * (1.0f - prev[j]) * u[j] + in[j];
        else
          for (unsigned j = 0; j < n; ++j)
            u[j] = beta * u[j] + in[j];
      }
      // Masked surrogate dS/dU, kept for the backward.
      float *__restrict sg = rule == RULE_NONE ? &surrTrace[(t * batch + b) * n] : &scratch[2 * n];
      // Spikes and the id buffer: spikes first, then gradient candidates.
      int *buf = &idTrace[(t * batch + b) * stride];
      unsigned spikes = 0, needed = 0;
      int *__restrict ids = buf + BUFFER_HEADER;
      if (fusedLeak) {
#ifdef POPSNN_FUSED_LEAK_FORWARD
        // Membrane update (skipped above), surrogate, rule and spikes in one pass.
        needed = leakForwardRow(n, beta, threshold, reset, surrogate, surrogateParam, rule,
                                ruleValue, in, u, prev, sg, offset, ids, needed, capacity);
#endif
      } else {
        surrogateRow(surrogate, surrogateParam, threshold, u, sg, n);
        if (rule == RULE_WINDOW) {
          for (unsigned j = 0; j < n; ++j)
            sg[j] = std::fabs(u[j] - threshold) < ruleValue ? sg[j] : 0.0f;
        } else if (rule == RULE_ONE_SIDED) {
          for (unsigned j = 0; j < n; ++j)
            sg[j] = u[j] >= ruleValue ? sg[j] : 0.0f;
        }
        // Spikes are rare: decided many neurons at a time into bit masks, whose set bits
        // become ids (see appendSpikes).
        needed = appendSpikes(u, threshold, prev, n, offset, ids, needed, capacity);
      }
      if (pushed) {
        // W_next.S[t]: the rows of the stored spikes, PUSH_CHUNK columns at a time in
        // registers. (A buffer that overflowed fails the step: its sums are never used.)
        sumRows(ids, needed < capacity ? needed : capacity, offset, &nextRows[0], P, pushed);
        for (unsigned first = 0; first < nextN; first += nextShardSize) {
          const unsigned size = nextN - first < nextShardSize ? nextN - first : nextShardSize;
          float *__restrict out = &nextCurrent[numSteps * batch * first + (t * batch + b) * size];
          for (unsigned k = 0; k < size; ++k)
            out[k] = pushed[first + k];
        }
      }
      spikes = needed;
      if (rule != RULE_NONE) {
        // Gradient candidates (no spike, surrogate inside the rule), after the spikes.
        needed = appendCandidates(prev, sg, n, offset, ids, needed, capacity);
      }
      if (needed > capacity) {
        // Never truncate silently: the host reads these and refuses the result.
        if (overflow[OVERFLOWED] == 0)
          overflow[FIRST_STEP] = t + 1;
        overflow[OVERFLOWED] += 1;
        if (needed > overflow[MOST_NEEDED])
          overflow[MOST_NEEDED] = needed;
      }
      if (rule != RULE_NONE) {
        const unsigned stored = needed < capacity ? needed : capacity;
        float *__restrict vals = &surrValues[(t * batch + b) * (stride - BUFFER_HEADER)];
        for (unsigned k = 0; k < stored; ++k)
          vals[k] = sg[unsigned(buf[BUFFER_HEADER + k]) - offset];
      }
      buf[0] = int(spikes < capacity ? spikes : capacity);
      buf[1] = int(needed < capacity ? needed : capacity);
      if (publishStep)
        copyBuffer(buf, &outIds[b * stride]);
      if (stepMajor && neuron == RLEAKY_ALL_TO_ALL)
        copyBuffer(t > 0 ? &idTrace[((t - 1) * batch + b) * stride] : nullptr,
                   &prevIds[b * stride]);
      if (record) {
        float *__restrict rs = &recSpikes[(t * batch + b) * n];
        float *__restrict rm = &recMem[(t * batch + b) * n];
        for (unsigned j = 0; j < n; ++j) {
          rs[j] = prev[j];
          rm[j] = u[j];
        }
      }
    }
    *step = (t + 1 == numSteps) ? 0 : t + 1;
  }
};
