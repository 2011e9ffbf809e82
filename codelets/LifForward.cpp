// Forward vertices: one shard (a contiguous block of a layer's output neurons)
// on one tile, one time step, every sample of the batch.
#include <poplar/Vertex.hpp>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "DenseKernels.hpp"
#include "ForwardInputs.hpp"
#include "InputProducts.hpp"
#include "LeakForwardRow.hpp"
#include "LeakyTrace.hpp"
#include "LifCommon.hpp"
#include "Neurons.hpp"
#include "SparseBackward.hpp" // forEachNonzero
#include "StoredRows.hpp"

using namespace poplar;
using namespace popsnn::codes;
using namespace popsnn::lif;

// I = x.W + b for direct-current input, once per minibatch (x is the same every step), with
// x, W, b and I stored as `Stored` (float, or half: docs/numerics.md section 8).
// float: by the measured density of x, the blocked dense product, or the sparse row kernel
// that skips zero inputs (image data is mostly zeros); the same sum per entry either way.
// half: a float sum over each sample's non-zero inputs, rounded once to half when stored.
template <class Stored> class DirectCurrent : public Vertex {
public:
  Input<Vector<Stored>> x;         // [B, nIn]
  Input<Vector<Stored>> weights;   // [nIn, n] (transposed: one contiguous row per input)
  Input<Vector<Stored>> bias;      // [n]
  Output<Vector<Stored>> current;  // [B, n]
  InOut<Vector<unsigned>> nzIndex; // [nIn]: a sample's non-zero inputs (sparse kernel)
  InOut<Vector<float>> nzValue;    // [nIn]; [SPARSE_GROUP * nIn] on the cpu device (groups)
  unsigned batch;
  unsigned numInputs;
  unsigned numNeurons;

  bool compute() {
    if constexpr (std::is_same_v<Stored, float>)
      computeFloat();
    else
      popsnn::stored::inputProduct(&x[0], batch, numInputs, &weights[0], &bias[0], numNeurons,
                                   &nzIndex[0], &nzValue[0], &current[0]);
    return true;
  }

private:
  // A member template: the half vertex's explicit instantiation leaves it out.
  template <class T = Stored> void computeFloat() {
    const unsigned n = numNeurons;
    const float *__restrict xs = &x[0];
    float *__restrict out = &current[0];
    if (popsnn::dense::denseEnough(popsnn::dense::countNonzero(xs, batch, numInputs, numInputs),
                                   1ull * batch * numInputs,
                                   popsnn::dense::DENSE_CURRENT_MIN_PER_MILLE))
      popsnn::dense::denseProduct(batch, n, numInputs, xs, numInputs, 1, &weights[0], n, out, n);
    else
      sparseInputProduct(xs, batch, numInputs, &weights[0], n, &nzIndex[0], &nzValue[0], out,
                         nzValue.size() >= SPARSE_GROUP * numInputs);
    // A row pointer: GCC left out[b * n + j] scalar (the unsigned index may wrap).
    const float *__restrict biasRow = &bias[0];
    for (unsigned b = 0; b < batch; ++b) {
      float *__restrict row = out + b * n;
      for (unsigned j = 0; j < n; ++j)
        row[j] += biasRow[j];
    }
  }
};
template class DirectCurrent<float>;
template class DirectCurrent<half>;

namespace {

// The parts of a forward step that do not depend on the neuron's units: compiled once,
// not once per vertex specialisation (kept out of line: each is a whole row's work).
#define ONCE __attribute__((noinline))

// The masked surrogate of a row of membranes: 0 off the sparse rule, one branch-free loop
// per (surrogate, rule) unit pair.
template <class Surrogate, class Rule, class C>
void surrogateRow(float param, const C &c, float ruleValue, const float *__restrict u,
                  float *__restrict sg, unsigned n) {
  for (unsigned j = 0; j < n; ++j) {
    const float s = Surrogate::at(u[j] - c.thresholdAt(j), param);
    sg[j] = Rule::keep(u[j], c.thresholdAt(j), ruleValue) ? s : 0.0f;
  }
}
// Picks the surrogate's row kernel once per row (the rule is the vertex's unit): the choice
// stays out of the loops (docs/architecture.md says why the surrogate is not a template
// argument of the vertex).
template <class Rule, class C>
ONCE void surrogateRow(unsigned surrogate, float param, const C &c, float ruleValue,
                       const float *__restrict u, float *__restrict sg, unsigned n) {
  switch (surrogate) {
  case FAST_SIGMOID:
    return surrogateRow<popsnn::FastSigmoid, Rule>(param, c, ruleValue, u, sg, n);
  case ATAN:
    return surrogateRow<popsnn::Atan, Rule>(param, c, ruleValue, u, sg, n);
  case SIGMOID:
    return surrogateRow<popsnn::Sigmoid, Rule>(param, c, ruleValue, u, sg, n);
  default:
    return surrogateRow<popsnn::StraightThrough, Rule>(param, c, ruleValue, u, sg, n);
  }
}

ONCE unsigned spikesOf(const float *__restrict u, const popsnn::NeuronConstants &c,
                       float *__restrict prev, unsigned n, unsigned offset, int *__restrict ids,
                       unsigned capacity) {
  return appendSpikes(u, c.threshold, prev, n, offset, ids, 0, capacity);
}
ONCE unsigned spikesOf(const float *__restrict u, const popsnn::NeuronConstantRows &c,
                       float *__restrict prev, unsigned n, unsigned offset, int *__restrict ids,
                       unsigned capacity) {
  return appendSpikesPerNeuron(u, c.threshold, prev, n, offset, ids, 0, capacity);
}
// The entries of a row whose masked surrogate is non-zero (spikes inside the rule and
// gradient candidates), appended to a gradient trace of `capacity` entries holding `used`;
// returns how many the row has. Past the capacity they are only counted: the host reads
// the count, so nothing is dropped silently.
// Values stored as S (half: the row is rounded already).
template <class S>
ONCE unsigned appendTrace(const float *__restrict sg, unsigned n, unsigned used, unsigned capacity,
                          unsigned short *__restrict ids, S *__restrict vals) {
#ifdef POPSNN_APPEND_NONZERO
  if constexpr (std::is_same<S, float>::value)
    return appendNonzero(sg, n, used, capacity, ids, vals);
#endif
  unsigned count = 0;
  forEachNonzero(sg, n, [&](unsigned j, float v) {
    if (used + count < capacity) {
      ids[used + count] = static_cast<unsigned short>(j); // a shard has <= 65,536 (Plan.hpp)
      vals[used + count] = S(v);
    }
    ++count;
  });
  return count;
}

} // namespace

// Whether this object has the whole-trace Leaky / Synaptic kernels (LeakyTrace.hpp: AVX-512
// host builds): the host runs it once on the cpu device before planning, since it sizes the
// surrogate trace of the layers those kernels take for their spike masks alone.
class LeakTraceKernels : public Vertex {
public:
  Output<Vector<unsigned>> present; // [1]

  bool compute() {
#ifdef POPSNN_LEAK_TRACE
    present[0] = 1;
#else
    present[0] = 0;
#endif
    return true;
  }
};

// One LIF step of a shard: synaptic input, membrane update, spike decision, surrogate
// trace (dense, or the gradient trace of a sparse rule) and the shard's spike-id buffer,
// next in its id trace, for every sample. Specialised on the layer's neuron model, reset
// and sparse rule (codelets/Neurons.hpp); its surrogate picks a row kernel once per row.
// S is the type the states, traces, parameters and exchanged values are stored in (float, or
// half: docs/numerics.md section 8); the update runs in float either way.
template <class Neuron, class Reset, class Rule, class S> class LifForward : public Vertex {
public:
  InOut<unsigned> step; // device-side step counter, wraps at numSteps
  // INPUT_DIRECT: x.W + b [B, n]. INPUT_PARTIAL_CURRENT: this step's sum of the partial
  // blocks [B, n] (written here, without the bias).
  Vector<InOut<Vector<S>>> current;
  Vector<Input<Vector<S>>> denseIn;      // INPUT_DENSE_STEPS: [T, B, nIn], or
  Vector<Input<Vector<int>>> inList;     // ... its non-zeros (codes::inputListStarts) and
  Vector<Input<Vector<float>>> inValues; // their values (as stored), built by the host per batch
  // INPUT_SPIKE_IDS: the previous layer's buffers, numSrc id traces one after the other
  // (layer-major schedule: see VertexEnums.hpp) or [numSrc, B, inStride] (step-major: this
  // step's).
  Vector<Input<Vector<int>>> inIds;
  Vector<Input<Vector<S>>> weights; // [nIn, n]
  Vector<Input<Vector<S>>> bias;    // [n]
  // RLEAKY_ALL_TO_ALL: own layer's buffers of step t-1 [numOwn, B, stride].
  Vector<Input<Vector<int>>> recIds;
  Vector<Input<Vector<S>>> recWeights; // all-to-all: [N, n]; one-to-one: [n]
  Vector<Input<Vector<S>>> recBias;    // all-to-all: [n]
  // The neuron's state: U [B, n], then J (Synaptic) or E, H (Alpha) [B, n] each.
  InOut<Vector<S>> mem;
  InOut<Vector<float>> prevSpikes; // S[t-1] [B, n]
  InOut<Vector<float>> scratch;    // [3n]; half storage: [(3 + states) n] (forwardScratch)
  // The masked surrogate dS/dU kept for the backward, laid out by the rule's trace. No sparse
  // rule: every entry, surrogates [T, B, n]. A sparse rule: the gradient trace, only the
  // entries whose masked surrogate is non-zero, compressed over (step, sample): gradStarts
  // [T x B + 1] (offsets of each row's entries), gradIds [traceCapacity] (16-bit local neuron
  // ids) beside their values, surrogates [traceCapacity].
  InOut<Vector<S>> surrogates;
  Vector<InOut<Vector<int>>> gradStarts;
  Vector<InOut<Vector<unsigned short>>> gradIds;
  InOut<Vector<int>> idTrace; // own buffers of every step: the id trace (VertexEnums.hpp)
  Vector<Output<Vector<int>>>
      outIds; // own buffers of this step [B, stride], when exchanged per step
  Vector<Output<Vector<int>>>
      prevIds; // step-major all-to-all: step t-1's, for the first backward step
  Vector<InOut<Vector<S>>> recSpikes; // output layer: S [T, B, n]
  Vector<InOut<Vector<S>>> recMem;    // output layer: U [T, B, n]
  InOut<Vector<unsigned>> overflow;   // [OVERFLOW_FIELDS]
  // INPUT_PARTIAL_CURRENT: the previous layer's shards' W.S blocks, [numSrc, T, B, n].
  Vector<Input<Vector<S>>> partialIn;
  // The constants one per neuron [n] each (a learned beta or threshold is the layer's
  // parameter), one edge each or none (then the float fields below); beta clamped to [0, 1]
  // into clampedBeta [2n] as snnTorch uses it, then the gain per neuron (clampedRows).
  // memTrace, a learned beta: U [T, B, n] (Alpha: then H [T, B, n]). Half storage: a learned
  // beta or threshold's edge holds the parameter rounded to half (kept as float: n values).
  Vector<Input<Vector<float>>> betas;
  Vector<Input<Vector<float>>> alphas;
  Vector<Input<Vector<float>>> thresholds;
  Vector<InOut<Vector<float>>> clampedBeta;
  Vector<InOut<Vector<S>>> memTrace;

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
  unsigned traceCapacity; // entries of the gradient trace (a sparse rule)
  unsigned spikeCapacity; // spike ids of the id trace, over all steps
  unsigned surrogate;     // codes::Surrogate
  unsigned inputMode;
  unsigned stepsPerCall;
  unsigned stepMajor; // schedule: 0 layer-major, 1 step-major (see the graph builder)
  float beta;
  float alpha; // the neuron's other constants (popsnn::NeuronConstants)
  float gain;
  float threshold;
  float surrogateParam;
  float ruleValue;

  bool compute() {
    if (betas.size() != 0) { // the generic row loops, reading the constants per neuron
      const popsnn::NeuronConstantRows c = constantRows();
      for (unsigned call = 0; call < stepsPerCall; ++call)
        step1(*step, c, surrogateParam, ruleValue);
      return true;
    }
    // Float members copied to locals: stores through float pointers could alias them,
    // which would force reloads and block vectorisation.
    const popsnn::NeuronConstants c{beta, alpha, gain, threshold};
#ifdef POPSNN_LEAK_TRACE
    if constexpr ((std::is_same<Neuron, popsnn::Leaky>::value || Neuron::synaptic) && !halfStorage)
      if (wholeTrace()) {
        leakyTrace(c);
        return true;
      }
#endif
    if (!Rule::Trace::sparse && surrogates.size() < std::size_t(numSteps) * batch * numNeurons)
      return false; // a trace sized for the masks alone (codes::leakMaskFloats): a host bug
#ifdef POPSNN_FUSED_LEAK_FORWARD
    if constexpr (std::is_same<Neuron, popsnn::Leaky>::value && !Rule::Trace::sparse &&
                  !halfStorage)
      if (inputMode == INPUT_PARTIAL_CURRENT && surrogate != SIGMOID && !publishesStep() &&
          numNeurons <= SAMPLE_BLOCK_NEURONS) {
        for (unsigned call = 0; call < stepsPerCall; ++call)
          batchStep(*step, c);
        return true;
      }
#endif
    // All steps in one call (a layer-major schedule), or one (an all-to-all recurrence
    // needs every shard's spikes of step t-1 before step t).
    for (unsigned call = 0; call < stepsPerCall; ++call)
      step1(*step, c, surrogateParam, ruleValue);
    return true;
  }

private:
  static constexpr popsnn::Recurrence recurrence = Neuron::recurrence;
  static constexpr bool halfStorage = !std::is_same<S, float>::value;
  // The edges only some layers have are lists the host connects with one edge or none:
  // their presence, not a flag, says what the layer does.
  bool records() const { return recSpikes.size() != 0; }    // the output layer's S and U
  bool publishesStep() const { return outIds.size() != 0; } // buffers exchanged per step

  popsnn::NeuronConstantRows constantRows() {
    return popsnn::clampedRows<Neuron::twoCurrents>(
        &betas[0][0], &alphas[0][0], gain, &thresholds[0][0], &clampedBeta[0][0], numNeurons);
  }

#ifdef POPSNN_LEAK_TRACE
  // Leaky or Synaptic on direct current, no sparse rule, all steps in this call, nothing
  // exchanged per step: each sample's steps at once, no surrogate trace (LeakyTrace.hpp; the
  // backward recomputes it). The spike masks are staged in the trace's memory, then appended to the
  // packed id trace in step order, as step1 does.
  bool wholeTrace() const { // float storage only (the caller asks)
    return leakTraceApplies(inputMode, Rule::code, surrogate, records() != 0, stepsPerCall,
                            numSteps, stepMajor != 0) &&
           !publishesStep();
  }
  void leakyTrace(const popsnn::NeuronConstants &c) {
    if constexpr (!halfStorage) { // float storage only (compute asks)
      const unsigned n = numNeurons, T = numSteps, vectors = (n + 15) / 16;
      // No start(): the kernel begins from the zero state and writes mem and prevSpikes whole.
      for (unsigned k = 0; k < OVERFLOW_FIELDS; ++k)
        overflow[k] = 0;
      const LeakVectors v(c.beta, c.threshold, surrogateParam, c.alpha);
      // [T, B, vectors] masks: 2 bytes per 16 neurons, in the trace's 64.
      unsigned short *masks = reinterpret_cast<unsigned short *>(&surrogates[0]);
      for (unsigned b = 0; b < batch; ++b)
        leakForwardSample<Reset::code, Neuron::synaptic>(
            v, T, n, &current[0][b * n], &mem[b * n],
            Neuron::synaptic ? &mem[(batch + b) * n] : nullptr, &prevSpikes[b * n],
            masks + b * vectors, batch * vectors);
      for (unsigned row = 0; row < T * batch; ++row) { // row = t * B + b
        int *buf = startBuffer(row);
        const unsigned rowCapacity = rowCapacityAt(row);
        const unsigned spikes = appendMaskedIds(masks + row * vectors, vectors, offset,
                                                buf + BUFFER_HEADER, rowCapacity);
        closeBuffer(row, row / batch, buf, spikes, rowCapacity);
      }
    }
  }
#endif

#ifdef POPSNN_FUSED_LEAK_FORWARD
  // A Leaky shard on the previous layer's pushed blocks (a readout: few neurons a shard): a
  // step's samples in one pass (leakForwardSamples), the bias added to the summed blocks in
  // place (0 + sum = sum: step1's floats), the records copied whole. compute() asks for float
  // storage, constants one per layer, a dense trace, no sigmoid, nothing exchanged per step.
  template <class = S> void batchStep(unsigned t, const popsnn::NeuronConstants &c) {
    const unsigned n = numNeurons, rows = batch * n;
    if (t == 0)
      start();
    float *in = &current[0][0];
    sumPartials(&partialIn[0][0], numSrc, numSteps, t, rows, in, &bias[0][0], n);
    leakForwardSamples(batch, n, c.beta, c.threshold, Reset::code, surrogate, surrogateParam,
                       Rule::code, ruleValue, in, &mem[0], &prevSpikes[0], &surrogates[t * rows],
                       offset, [&](unsigned b, const int *ids, unsigned spikes) {
                         const unsigned row = t * batch + b;
                         int *buf = startBuffer(row);
                         const unsigned rowCapacity = rowCapacityAt(row);
                         for (unsigned k = 0; k < spikes && k < rowCapacity; ++k)
                           buf[BUFFER_HEADER + k] = ids[k];
                         closeBuffer(row, t, buf, spikes, rowCapacity);
                       });
    if (records()) {
      std::copy(&prevSpikes[0], &prevSpikes[0] + rows, &recSpikes[0][t * rows]);
      std::copy(&mem[0], &mem[0] + rows, &recMem[0][t * rows]);
    }
    *step = (t + 1 == numSteps) ? 0 : t + 1;
  }
#endif

  // Row `row` (step t) has `spikes`, its buffer the first rowCapacity: its header, the next
  // row's start, the counts. Never truncate silently: the host reads them, refuses the result.
  void closeBuffer(unsigned row, unsigned t, int *buf, unsigned spikes, unsigned rowCapacity) {
    const unsigned stored = spikes < rowCapacity ? spikes : rowCapacity;
    if (spikes > capacity) {
      overflow[FIRST_STEP] = overflow[OVERFLOWED] == 0 ? t + 1 : overflow[FIRST_STEP];
      overflow[OVERFLOWED] += 1;
      overflow[MOST_NEEDED] = spikes > overflow[MOST_NEEDED] ? spikes : overflow[MOST_NEEDED];
    }
    overflow[SPIKES_NEEDED] += spikes;
    buf[0] = int(stored);
    buf[1] = int(stored);
    idTrace[row + 1] = idTrace[row] + int(BUFFER_HEADER + stored);
  }

  void start() {
    const unsigned n = numNeurons;
    for (unsigned k = 0; k < OVERFLOW_FIELDS; ++k)
      overflow[k] = 0;
    for (unsigned k = 0; k < mem.size(); ++k)
      mem[k] = 0.0f;
    for (unsigned k = 0; k < batch * n; ++k)
      prevSpikes[k] = 0.0f;
  }

  // Sample b's synaptic input I[t]: the direct current, or computed into scratch.
  const float *inputOf(unsigned t, unsigned b) {
    if constexpr (halfStorage) {
      return storedInputOf(t, b);
    } else {
      const unsigned n = numNeurons;
      float *acc = &scratch[0];
      if (inputMode == INPUT_DIRECT)
        return &current[0][b * n];
      if (inputMode == INPUT_PARTIAL_CURRENT)
        inputFromPartials(&current[0][b * n], &bias[0][0], n, acc);
      else if (inputMode == INPUT_DENSE_STEPS && inList.size() != 0)
        inputFromList(inputRowOf(&inList[0][0], &inValues[0][0], numSteps * batch, t * batch + b),
                      &weights[0][0], &bias[0][0], n, acc);
      else if (inputMode == INPUT_DENSE_STEPS)
        inputFromDense(&denseIn[0][(t * batch + b) * numInputs], numInputs, &weights[0][0],
                       &bias[0][0], n, acc);
      else if (stepMajor) // this step's buffers [numSrc, B, inStride]
        inputFromIds([&](unsigned s) { return &inIds[0][(s * batch + b) * inStride]; }, numSrc,
                     &weights[0][0], &bias[0][0], n, acc);
      else // numSrc id traces
        inputFromIds(
            [&](unsigned s) {
              return traceRowOf(&inIds[0][s * (inIds[0].size() / numSrc)], t * batch + b);
            },
            numSrc, &weights[0][0], &bias[0][0], n, acc);
      return acc;
    }
  }
  // Half storage: the same sums in float from the stored values, stored (rounded) as the
  // reference stores I; the direct current is read as stored.
  template <class Stored = S> const float *storedInputOf(unsigned t, unsigned b) {
    const unsigned n = numNeurons;
    float *acc = &scratch[0];
    const Stored *w = weights.size() ? &weights[0][0] : nullptr;
    const Stored *bias0 = bias.size() ? &bias[0][0] : nullptr;
    if (inputMode == INPUT_DIRECT) {
      popsnn::stored::loadRow(&current[0][b * n], acc, n);
      return acc;
    }
    if (inputMode == INPUT_PARTIAL_CURRENT)
      inputFromPartials(&current[0][b * n], bias0, n, acc);
    else if (inputMode == INPUT_DENSE_STEPS && inList.size() != 0)
      inputFromList(inputRowOf(&inList[0][0], &inValues[0][0], numSteps * batch, t * batch + b), w,
                    bias0, n, acc);
    else if (inputMode == INPUT_DENSE_STEPS)
      inputFromDense(&denseIn[0][(t * batch + b) * numInputs], numInputs, w, bias0, n, acc);
    else
      inputFromIds(
          [&](unsigned s) {
            return stepMajor ? &inIds[0][(s * batch + b) * inStride]
                             : traceRowOf(&inIds[0][s * (inIds[0].size() / numSrc)], t * batch + b);
          },
          numSrc, w, bias0, n, acc);
    popsnn::stored::roundRow<S>(acc, n);
    return acc;
  }

  // The recurrent term of sample b (RLeaky), in scratch[n .. 2n).
  const float *recurrentOf(unsigned t, unsigned b) {
    const unsigned n = numNeurons;
    float *__restrict rec = &scratch[n];
    if (recurrence == popsnn::Recurrence::ALL_TO_ALL)
      recurrentAllToAll(&recIds[0][0], numOwn, batch, b, stride, t == 0, &recWeights[0][0],
                        &recBias[0][0], n, rec);
    else if (recurrence == popsnn::Recurrence::ONE_TO_ONE)
      for (unsigned j = 0; j < n; ++j)
        rec[j] = prevSpikes[b * n + j] * recWeights[0][j];
    return rec;
  }

  // Membrane update, masked surrogate and spikes of sample b; returns the ids appended.
  template <class C>
  unsigned neuronStep(const C &c, float param, float ruleValue, const float *in, const float *rec,
                      unsigned b, float *__restrict sg, int *__restrict ids, unsigned capacity) {
    const unsigned n = numNeurons;
    float *__restrict u = &mem[b * n];
    float *__restrict prev = &prevSpikes[b * n];
    // The synaptic states after U: J (Synaptic), or E then H (Alpha).
    float *__restrict syn = Neuron::states > 1 ? &mem[(batch + b) * n] : nullptr;
    float *__restrict syn2 = Neuron::states > 2 ? &mem[(2 * batch + b) * n] : nullptr;
#ifdef POPSNN_FUSED_LEAK_FORWARD
    // Leaky's update, surrogate, rule and spikes in one AVX-512 or AVX2 pass (no exp: not
    // Sigmoid).
    if constexpr (std::is_same<C, popsnn::NeuronConstants>::value)
      if (std::is_same<Neuron, popsnn::Leaky>::value && surrogate != SIGMOID)
        return leakForwardRow(n, c.beta, c.threshold, Reset::code, surrogate, param, Rule::code,
                              ruleValue, in, u, prev, sg, offset, ids, 0, capacity);
#endif
    // The reset R[t] = S[t-1] is decided by the previous step.
    Neuron::template forwardRow<Reset>(c, n, in, rec, syn, syn2, u, prev);
    surrogateRow<Rule>(surrogate, param, c, ruleValue, u, sg, n);
    // Spikes are rare: decided many neurons at a time into bit masks, whose set bits
    // become ids (see appendSpikes).
    return spikesOf(u, c, prev, n, offset, ids, capacity);
  }

  // Half storage's step of sample b: the states read into float rows behind scratch's 3n,
  // updated there (Synaptic's J rounded before U reads it), stored rounded; the surrogate and
  // the spikes come from the stored U, as in the reference (its `store`).
  template <class C>
  unsigned storedStep(const C &c, float param, float ruleValue, const float *in, const float *rec,
                      unsigned b, float *__restrict sg, int *__restrict ids, unsigned capacity) {
    const unsigned n = numNeurons;
    float *__restrict u = &scratch[3 * n];
    for (unsigned k = 0; k < Neuron::states; ++k)
      popsnn::stored::loadRow(&mem[(k * batch + b) * n], u + k * n, n);
    float *syn = Neuron::states > 1 ? u + n : nullptr;
    float *syn2 = Neuron::states > 2 ? u + 2 * n : nullptr;
    Neuron::template forwardRow<Reset, popsnn::stored::RoundTo<S>>(c, n, in, rec, syn, syn2, u,
                                                                   &prevSpikes[b * n]);
    for (unsigned k = 0; k < Neuron::states; ++k) {
      popsnn::stored::roundRow<S>(u + k * n, n);
      popsnn::stored::storeRow(u + k * n, &mem[(k * batch + b) * n], n);
    }
    surrogateRow<Rule>(surrogate, param, c, ruleValue, u, sg, n);
    popsnn::stored::roundRow<S>(sg, n);
    return spikesOf(u, c, &prevSpikes[b * n], n, offset, ids, capacity);
  }

  template <class C> void step1(unsigned t, const C &c, float param, float ruleValue) {
    const unsigned n = numNeurons;
    if (t == 0)
      start();
    if (inputMode == INPUT_PARTIAL_CURRENT)
      sumPartials(&partialIn[0][0], numSrc, numSteps, t, batch * n, &current[0][0]);
    constexpr bool sparse = Rule::Trace::sparse;
    for (unsigned b = 0; b < batch; ++b) {
      const float *in = inputOf(t, b);
      const float *rec = recurrentOf(t, b);
      float *__restrict sg; // half storage: the row in float, stored below
      if constexpr (sparse || halfStorage)
        sg = &scratch[2 * n];
      else
        sg = &surrogates[(t * batch + b) * n];
      // The id buffer: this step's spikes, next in the id trace, holding what is left of it.
      const unsigned row = t * batch + b;
      int *buf = startBuffer(row);
      int *__restrict ids = buf + BUFFER_HEADER;
      const unsigned rowCapacity = rowCapacityAt(row);
      unsigned spikes;
      if constexpr (halfStorage) {
        spikes = storedStep(c, param, ruleValue, in, rec, b, sg, ids, rowCapacity);
        if (!sparse)
          popsnn::stored::storeRow(sg, &surrogates[(t * batch + b) * n], n);
      } else {
        spikes = neuronStep(c, param, ruleValue, in, rec, b, sg, ids, rowCapacity);
      }
      if (!C::uniform && memTrace.size() != 0)
        traceStates(row, b);
      if (sparse)
        traceRow(row, sg);
      closeBuffer(row, t, buf, spikes, rowCapacity);
      finishSample(t, b, buf);
    }
    if (sparse && t + 1 == numSteps) // the trace is complete: what the dL/dI list needs
      overflow[GRAD_LIST_NEEDED] =
          liveRowsNeeded(&gradStarts[0][0], &gradIds[0][0], numSteps, batch, n, &scratch[0]);
    *step = (t + 1 == numSteps) ? 0 : t + 1;
  }

  // A learned beta's states at (t, b) = row, for its gradient: U, and Alpha's H.
  void traceStates(unsigned row, unsigned b) {
    const unsigned n = numNeurons, rows = numSteps * batch;
    for (unsigned j = 0; j < n; ++j)
      memTrace[0][row * n + j] = mem[b * n + j];
    if constexpr (Neuron::twoCurrents)
      for (unsigned j = 0; j < n; ++j)
        memTrace[0][(rows + row) * n + j] = mem[(2 * batch + b) * n + j];
  }

  // Row `row`'s buffer in the id trace (the first row starts behind the starts).
  int *startBuffer(unsigned row) {
    if (row == 0)
      idTrace[0] = int(traceStarts(numSteps, batch));
    return &idTrace[unsigned(idTrace[row])];
  }
  // Spike ids row `row`'s buffer can take: the capacity, or what the id trace can still take
  // (every row's header is reserved). After startBuffer(row), which sets row 0's start.
  unsigned rowCapacityAt(unsigned row) const {
    const unsigned used =
        unsigned(idTrace[row]) - traceStarts(numSteps, batch) - row * BUFFER_HEADER;
    return capacity < spikeCapacity - used ? capacity : spikeCapacity - used;
  }

  // Row (t, b) of the gradient trace: its start, its entries, the next row's start.
  void traceRow(unsigned row, const float *__restrict sg) {
    int *__restrict starts = &gradStarts[0][0];
    if (row == 0)
      starts[0] = 0;
    const unsigned used = unsigned(starts[row]);
    const unsigned count =
        appendTrace(sg, numNeurons, used, traceCapacity, &gradIds[0][0], &surrogates[0]);
    const unsigned end = used + count;
    starts[row + 1] = int(end < traceCapacity ? end : traceCapacity);
    overflow[TRACE_NEEDED] += count;
  }

  // What leaves the step: the buffers exchanged per step and the output layer's records.
  void finishSample(unsigned t, unsigned b, const int *buf) {
    const unsigned n = numNeurons;
    if (publishesStep())
      copyBuffer(buf, &outIds[0][b * stride]);
    if (stepMajor && recurrence == popsnn::Recurrence::ALL_TO_ALL)
      copyBuffer(t > 0 ? traceRowOf(&idTrace[0], (t - 1) * batch + b) : nullptr,
                 &prevIds[0][b * stride]);
    if (records()) {
      S *__restrict rs = &recSpikes[0][(t * batch + b) * n];
      S *__restrict rm = &recMem[0][(t * batch + b) * n];
      for (unsigned j = 0; j < n; ++j) {
        rs[j] = prevSpikes[b * n + j];
        rm[j] = mem[b * n + j];
      }
    }
  }
};

// Every combination of the units the host can name is instantiated at build time, from
// include/popsnn/VertexUnits.hpp's table (host/src/VertexInstances.cpp).
