// Backward vertices: BPTT for one shard, one step (t = T-1 .. 0), every sample. The reset carries
// no gradient (docs/numerics.md). Weight gradients visit only the input ids that spiked; a sparse
// rule computes dL/dS only at its gradient trace's entries (masked surrogate non-zero).
#include <poplar/Vertex.hpp>

#include <type_traits>

#include "BackwardGather.hpp"
#include "BackwardRows.hpp"
#include "DenseKernels.hpp"
#include "LeakyTrace.hpp"
#include "LifCommon.hpp"
#include "LifInputGrad.hpp"
#include "Neurons.hpp"
#include "SparseBackward.hpp"

using namespace poplar;
using namespace popsnn::codes;
using namespace popsnn::lif;
using namespace popsnn::backward_rows;
using namespace popsnn::backward_gather;
using popsnn::stored::asFloat;

// BPTT of one shard, specialised on the layer's neuron model, reset and surrogate trace
// (codelets/Neurons.hpp). The surrogate's values come from the forward; of the sparse rule
// only the trace it left matters (every entry, or the compressed gradient trace). S: the stored
// type (half: dense traces, the generic step; rows read as float, dL/dI stored rounded).
template <class Neuron, class Reset, class Trace, class S> class LifBackward : public Vertex {
public:
  InOut<unsigned> step;                    // counts 0..T-1; t = T-1-step
  Vector<Input<Vector<S>>> lossGradSpikes; // output layer: dL/dS [T, B, n]
  Vector<Input<Vector<S>>> lossGradMem;    // output layer: dL/dU [T, B, n] (membrane losses)
  // dL/dS of this layer comes from the dL/dI of the layers it feeds: their shards' dL/dI
  // ([B, n_k] blocks, one per shard k) and this tile's copy of their weights on its
  // neurons ([n, n_k] blocks), so only the small dL/dI crosses tiles.
  Vector<Input<Vector<S>>> nextGrad;    // its dL/dI, blocks [T, B, n_k] ([B, n_k] step-major)
  Vector<Input<Vector<S>>> nextWeights; // its W on this shard's neurons, blocks [n, n_k]
  // No sparse rule: nextWeights by downstream neuron [N_next, n]. A sparse rule: by own
  // neuron, rows padded to P = pushWidth(N_next): [n, P] (one dot per gradient-trace entry).
  Vector<InOut<Vector<float>>> nextWeightsT;
  Vector<Input<Vector<float>>> ownGrad; // all-to-all: this layer's dL/dI[t+1], blocks [B, n_k]
  Vector<Input<Vector<S>>> ownWeights;  // all-to-all: V on this shard's neurons, blocks [n, n_k]
  Vector<InOut<Vector<float>>> ownWeightsT; // all-to-all, dense: [N, n]
  // DenseTrace: [T, B, n]. CompressedTrace: the gradient trace's masked surrogate values,
  // beside gradStarts and gradIds (see LifForward).
  Input<Vector<S>> surrogates;
  Vector<Input<Vector<S>>> current;      // INPUT_DIRECT: x.W + b [B, n] (recomputing the forward)
  Vector<Input<Vector<int>>> gradStarts; // CompressedTrace: each row's first entry
  Vector<Input<Vector<unsigned short>>> gradIds; // CompressedTrace: the entries' neuron ids
  Input<Vector<int>> idTrace;       // own buffers of every step: the id trace (VertexEnums.hpp)
  Vector<Input<Vector<int>>> inIds; // INPUT_SPIKE_IDS: as LifForward's

  Vector<Input<Vector<S>>> denseIn;  // INPUT_DENSE_STEPS: [T, B, nIn], or as a list:
  Vector<Input<Vector<int>>> inList; // its non-zeros and their values (see LifForward)
  Vector<Input<Vector<float>>> inValues;
  // All-to-all: own layer's buffers, numOwn id traces (layer-major) or [numOwn, B, stride]
  // (step-major: step t-1's).
  Vector<Input<Vector<int>>> recIds;
  Vector<Input<Vector<S>>> recWeights; // all-to-all [N, n]; one-to-one [n]
  // dL/dU[t+1] carried [B, n], then dL/dJ[t+1] (Synaptic) or dL/dE[t], dL/dH[t] (Alpha).
  InOut<Vector<float>> gradMem;
  InOut<Vector<float>> gradWeights;            // [nIn, n]
  InOut<Vector<float>> gradBias;               // [n]
  Vector<InOut<Vector<float>>> gradRecWeights; // like recWeights
  Vector<InOut<Vector<float>>> gradRecBias;    // [n]
  Vector<InOut<Vector<float>>> currentGradSum; // INPUT_DIRECT: sum_t dL/dI [B, n]
  Vector<Output<Vector<S>>> gradOut;    // dL/dI [T, B, n] ([B, n] step-major) for the layer before
  Vector<Output<Vector<int>>> gradList; // LayerShape::gradList: dL/dI's list (starts, ids, values)
  Vector<Output<Vector<unsigned short>>> gradListIds;
  Vector<Output<Vector<float>>> gradListValues;
  Vector<Input<Vector<int>>> nextGradList; // the next layer's lists, instead of nextGrad
  Vector<Input<Vector<unsigned short>>> nextGradListIds;
  Vector<Input<Vector<float>>> nextGradListValues;
  Vector<Output<Vector<float>>> gradStep; // all-to-all: dL/dI[t] [B, n], for the recurrence (float)
  Vector<Output<Vector<float>>> nextStep; // cpu, dense float, not Leaky: stepProduct's [B, n]
  // Step-major: for the next backward step, this shard's buffers of step t-1 (for the layer
  // it feeds) and, all-to-all, of step t-2 (its recurrence). The forward leaves those of
  // steps T-1 and T-2 there for the first backward step.
  Vector<Output<Vector<int>>> outIds;  // [B, stride]
  Vector<Output<Vector<int>>> prevIds; // [B, stride]
  InOut<Vector<float>> scratch;        // [2n + max(2P, Alpha: n)]
  // Compressed trace: per sample count, live ids [n], in-list flags [n] (SparseBackward.hpp)
  Vector<InOut<Vector<int>>> liveIds;
  // As LifForward's: the constants per neuron, one edge each or none. A learned beta: U [T, B, n]
  // (Alpha: then H) and dL/dbeta [n] over (t, b); a learned threshold: dL/dthreshold [n].
  Vector<Input<Vector<float>>> betas;
  Vector<Input<Vector<float>>> alphas;
  Vector<Input<Vector<float>>> thresholds;
  Vector<InOut<Vector<float>>> clampedBeta;
  Vector<Input<Vector<S>>> memTrace;
  Vector<InOut<Vector<float>>> gradBeta;
  Vector<InOut<Vector<float>>> gradThreshold;

  unsigned batch;
  unsigned numNeurons;
  unsigned numSteps;
  unsigned numInputs;
  unsigned numSrc;
  unsigned inStride;
  unsigned numOwn;
  unsigned stride;
  unsigned offset;
  unsigned inputMode;
  unsigned stepsPerCall; // T (layer-major schedule) or 1 (all-to-all recurrence, step-major)
  unsigned stepMajor;    // schedule: 0 layer-major, 1 step-major (see the graph builder)
  unsigned nextShardSize;
  unsigned nextLayerSize;
  unsigned ownShardSize;
  unsigned ownLayerSize;
  float beta;
  float alpha; // the neuron's other constants (popsnn::NeuronConstants)
  float gain;
  // The forward's constants, for the kernels that recompute it (LeakyTrace.hpp).
  float threshold;
  unsigned surrogate; // codes::Surrogate
  float surrogateParam;

  bool compute() {
    if (betas.size() != 0) {               // the constants one per neuron: the generic path only
      const popsnn::NeuronConstantRows c = // as the forward used them
          popsnn::clampedRows<Neuron::twoCurrents>(
              &betas[0][0], &alphas[0][0], gain, &thresholds[0][0], &clampedBeta[0][0], numNeurons);
      for (unsigned call = 0; call < stepsPerCall; ++call)
        step1(numSteps - 1 - *step, c);
      return true;
    }
#ifdef POPSNN_LEAK_TRACE
    if constexpr ((leaky || Neuron::synaptic) && !halfStorage)
      if (wholeTrace()) {
        leakyTrace();
        return true;
      }
#endif
    if (dense && surrogates.size() < std::size_t(numSteps) * batch * numNeurons)
      return false; // a trace sized for the masks alone (codes::leakMaskFloats): a host bug
    if constexpr (leaky && dense && !halfStorage)
      if (isOutput() && inputMode == INPUT_PARTIAL_CURRENT && !stepMajor && !gradList.size()) {
        for (unsigned call = 0; call < stepsPerCall; ++call)
          outputStep(numSteps - 1 - *step);
        return true;
      }
    const popsnn::NeuronConstants c{beta, alpha, gain, 0.0f}; // locals: see LifForward
    for (unsigned call = 0; call < stepsPerCall; ++call)
      step1(numSteps - 1 - *step, c);
    return true;
  }

private:
  template <class N, class R, class V, class C>
  friend const float *popsnn::lif::lifInputGrad(V &, unsigned, unsigned, const C &, float *,
                                                float *);
  static constexpr popsnn::Recurrence recurrence = Neuron::recurrence;
  static constexpr bool leaky = std::is_same<Neuron, popsnn::Leaky>::value;
  static constexpr bool zeroReset = Reset::code == RESET_ZERO;
  static constexpr bool dense = !Trace::sparse; // every entry carries gradient
  static constexpr bool halfStorage = !std::is_same<S, float>::value;
  static_assert(dense || !halfStorage, "half storage: dense trace layouts only");
  // The edges only some layers have are lists the host connects with one edge or none
  // (see LifForward): their presence says what the layer does.
  bool isOutput() const { return lossGradSpikes.size() != 0; }
  bool publishesGrad() const { return gradOut.size() != 0; } // read by another layer
  bool publishesIds() const { return outIds.size() != 0; }   // step-major, feeding a layer
  bool learnsBeta() const { return gradBeta.size() != 0; }
  bool learnsThreshold() const { return gradThreshold.size() != 0; }

#ifdef POPSNN_LEAK_TRACE
  // A dense Leaky or Synaptic shard on direct current feeding another layer, all steps in one
  // call: each sample's steps at once, surrogates recomputed (LeakyTrace.hpp; the forward
  // decides alike and writes no surrogate trace). Weight gradient: DirectWeightGrad's.
  bool wholeTrace() const {
    return leakTraceApplies(inputMode, Trace::masked ? RULE_WINDOW : RULE_NONE, surrogate,
                            isOutput() != 0, stepsPerCall, numSteps, stepMajor != 0);
  }
  template <class = S> void leakyTrace() { // float storage only (compute asks)
    surrogate == FAST_SIGMOID ? leakyTrace<FAST_SIGMOID>()
    : surrogate == ATAN       ? leakyTrace<ATAN>()
                              : leakyTrace<STRAIGHT_THROUGH>();
  }
  template <unsigned SURROGATE> void leakyTrace() {
    const unsigned n = numNeurons;
    start(true); // the kernel writes gradMem and currentGradSum whole
    PairGradRows pair(&nextGrad[0][0], nextLayerSize, nextShardSize, numSteps, batch,
                      &scratch[2 * n]); // taken by reference: one gatherer for every block
    auto gradRow = [&](unsigned t, unsigned b, unsigned slot) { return pair(t, b, slot); };
    const BackwardRows rows{&nextWeightsT[0][0], n,
                            nextLayerSize,       publishesGrad() ? &gradOut[0][0] : nullptr,
                            batch * n,           pair.rowsHeld()};
    leakBackwardBatch<Reset::code, SURROGATE, Neuron::synaptic>(
        LeakVectors(beta, threshold, surrogateParam, alpha), numSteps, batch, &current[0][0],
        gradRow, rows, &gradMem[0], Neuron::synaptic ? &gradMem[batch * n] : nullptr,
        &currentGradSum[0][0], &gradBias[0]);
  }
#endif

  // A Leaky readout on pushed blocks (a few neurons a shard; constants one per layer): a step's
  // samples as one [B, n] row (leakOutputRows), generic()'s floats without a call per sample.
  template <class = S> void outputStep(unsigned t) {
    const unsigned n = numNeurons, rows = batch * n;
    if (t + 1 == numSteps)
      start();
    for (unsigned b = 0; b < batch && zeroReset; ++b) // a spike at t cuts the leak path
      zeroAtSpikes(ownBuffer(t, b), offset, &gradMem[b * n]);
    leakOutputRows(&lossGradSpikes[0][t * rows], &lossGradMem[0][t * rows], &surrogates[t * rows],
                   beta, batch, n, &gradMem[0], publishesGrad() ? gradOutRow(t, 0) : nullptr,
                   &gradBias[0]);
    *step = (*step + 1 == numSteps) ? 0 : *step + 1;
  }

  template <class C> void step1(unsigned t, const C &c) {
    if (t + 1 == numSteps)
      start();
    if (recurrence == popsnn::Recurrence::ALL_TO_ALL && dense && t + 1 < numSteps)
      recurrentProduct(&ownGrad[0][0], &ownWeightsT[0][0], numNeurons, ownShardSize, ownLayerSize,
                       batch, &gradStep[0][0]); // every sample's row at once, for spikeGrad
    if constexpr (!halfStorage)
      if (dense && nextStep.size() != 0)
        stepProduct(&nextGrad[0][0], &nextWeightsT[0][0], numNeurons, nextShardSize, nextLayerSize,
                    nextRow(t, 0), nextRowsPerBlock(), batch, &nextStep[0][0]);
    const unsigned srcWords = srcTraceWords(); // once per step: a division
    for (unsigned b = 0; b < batch; ++b) {
      if constexpr (!dense && recurrence != popsnn::Recurrence::ALL_TO_ALL)
        if (skipDeadRow(*this, t, b)) // nothing live: no work but its dL/dI row (SparseBackward)
          continue;
      const int *own = ownBuffer(t, b);
#ifndef __IPU__ // a later sample's buffers (prefetchSample): written in the forward, out of cache
      if (b + 4 < batch) {
        TraceRow e{};
        if constexpr (!dense)
          e = traceRow(t, b + 4);
        prefetchSample(ownBuffer(t, b + 4), e.ids, e.vals);
        for (unsigned s = 0; s < numSrc && inputMode == INPUT_SPIKE_IDS; ++s)
          __builtin_prefetch(inBuffer(s, t, b + 4, srcWords));
      }
#endif
      LiveNeurons live;
      const float *dI;
      if constexpr (halfStorage) // dense layouts only: liveStep is not instantiated
        dI = generic(t, b, c, own);
      else
        dI = dense ? denseStep(t, b, c, own) : liveStep(t, b, c, own, live);
      weightGrads(t, b, dI, live, srcWords);
      recurrentGrads(t, b, dI, live);
      if (!dense) // eps and dL/dI were written at live neurons only
        zeroAtLive(&scratch[0], numNeurons, live);
    }
    if (stepMajor)
      publishStepMajor(t);
    if (!C::uniform && t == 0 && learnsBeta())
      zeroWhereClamped(&betas[0][0], &gradBeta[0][0], numNeurons);
    *step = (*step + 1 == numSteps) ? 0 : *step + 1;
  }

  // The first backward step (t = T-1): fan-out copies rearranged, carries and sums zeroed
  // (but for the whole-trace kernels': `written`).
  void start(bool written = false) {
    const unsigned n = numNeurons;
    if (!isOutput() && dense)
      transposeFanout(&nextWeights[0][0], n, nextShardSize, nextLayerSize, &nextWeightsT[0][0]);
    else if (!isOutput())
      blocksToRows(&nextWeights[0][0], n, nextShardSize, nextLayerSize, &nextWeightsT[0][0]);
    if (recurrence == popsnn::Recurrence::ALL_TO_ALL && dense)
      transposeFanout(&ownWeights[0][0], n, ownShardSize, ownLayerSize, &ownWeightsT[0][0]);
    if (!written)
      zeroAll(gradMem);
    // DirectWeightGrad writes it whole; a partial-current input's is the previous layer's.
    if (inputMode != INPUT_DIRECT && inputMode != INPUT_PARTIAL_CURRENT)
      zeroAll(gradWeights);
    zeroAll(gradBias);
    // One edge or none each (currentGradSum: direct input's sum_t dL/dI [B, n]).
    for (auto *edges : {&gradRecWeights, &gradRecBias, &gradBeta, &gradThreshold, &currentGradSum})
      for (unsigned k = 0; k < edges->size() && !(written && edges == &currentGradSum); ++k)
        zeroAll((*edges)[k]);
    for (unsigned k = 0; k < liveIds.size(); ++k)
      zeroAll(liveIds[k]);
    for (unsigned k = 0; k < n && !dense; ++k) // liveStep's eps and dL/dI: 0 off the live ones
      scratch[k] = 0.0f;
  }

  template <class = S> TraceRow traceRow(unsigned t, unsigned b) const {
    return gradTraceRow(&gradStarts[0][0], &gradIds[0][0], &surrogates[0], t * batch + b);
  }

  const int *ownBuffer(unsigned t, unsigned b) const {
    return traceRowOf(&idTrace[0], t * batch + b);
  }
  // Layer-major spike input: the words of each source shard's id trace in inIds.
  unsigned srcTraceWords() const {
    return inputMode == INPUT_SPIKE_IDS && numSrc != 0 ? inIds[0].size() / numSrc : 0;
  }
  // Source shard s's spike buffer of (t, b): this step's (step-major) or in its id trace.
  const int *inBuffer(unsigned s, unsigned t, unsigned b, unsigned srcWords) const {
    if (stepMajor)
      return &inIds[0][(s * batch + b) * inStride];
    return traceRowOf(&inIds[0][s * srcWords], t * batch + b);
  }

  // Half storage: rows read into the scratch's last 2n (backwardScratch).
  float *traceRows() { return &scratch[scratch.size() - 2 * numNeurons]; }

  unsigned nextRow(unsigned t, unsigned b) const { return stepMajor ? b : t * batch + b; }
  unsigned nextRowsPerBlock() const { return stepMajor ? batch : numSteps * batch; }
  S *gradOutRow(unsigned t, unsigned b) {
    return &gradOut[0][((stepMajor ? 0 : t * batch) + b) * numNeurons];
  }
  // The next layer's dL/dI lists' row of (t, b) (LayerShape::gradList; they exist).
  NextListRow nextList(unsigned t, unsigned b) const {
    return nextListRow(&nextGradList[0][0], &nextGradListIds[0][0], &nextGradListValues[0][0],
                       nextLayerSize, nextShardSize, numSteps * batch,
                       (numSteps - 1 - t) * batch + b, nextGradListValues[0].size());
  }
  // The next layer's dL/dI of (t, b) into g: from its lists (LayerShape::gradList) or blocks.
  void gatherNext(unsigned t, unsigned b, float *g) const {
    if (nextGradList.size() == 0)
      return gatherNextGrad(&nextGrad[0][0], g, nextLayerSize, nextShardSize, nextRow(t, b),
                            nextRowsPerBlock());
    gatherNextList(&nextGradList[0][0], &nextGradListIds[0][0], &nextGradListValues[0][0], g,
                   nextLayerSize, nextShardSize, numSteps * batch, (numSteps - 1 - t) * batch + b,
                   nextGradListValues[0].size());
  }

  // A dense trace: the fused pass (a Leaky shard feeding a layer, where the CPU has one; beta a
  // float or a row; a learned threshold needs dL/dS: generic) or every model's generic step.
  template <class C> const float *denseStep(unsigned t, unsigned b, const C &c, const int *own) {
#ifdef POPSNN_FUSED_LEAK_BACKWARD
    if constexpr (leaky)
      if (!isOutput() && (C::uniform || !learnsThreshold())) {
        const float *gU = leakyFused(t, b, c.beta, own);
        if (!C::uniform && learnsBeta()) // its terms beside the fused pass
          constantGrads(t, b, gU);
        return gU;
      }
#endif
    return generic(t, b, c, own);
  }

#ifdef POPSNN_FUSED_LEAK_BACKWARD
  // A dense Leaky shard feeding another layer: one fused pass (see leakBackwardRow).
  template <class Beta> const float *leakyFused(unsigned t, unsigned b, Beta beta, const int *own) {
    const unsigned n = numNeurons;
    float *__restrict gU = &gradMem[b * n];
    // dL/dI of the next layer's neurons at (t, b), contiguous, from its shards' blocks.
    float *__restrict g = &scratch[2 * n];
    gatherNext(t, b, g);
    if (zeroReset) // as in generic(): a spike at t cuts the leak path
      zeroAtSpikes(own, offset, gU);
    leakBackwardRow(g, nextLayerSize, &nextWeightsT[0][0], n, &surrogates[(t * batch + b) * n],
                    beta, gU, inputMode == INPUT_DIRECT ? &currentGradSum[0][b * n] : nullptr,
                    publishesGrad() ? gradOutRow(t, b) : nullptr, &gradBias[0]);
    return gU;
  }
#endif

  // A dense trace: dL/dS[t] (loss, next layer, recurrence) in eps or stepProduct's row: returned.
  float *spikeGrad(unsigned t, unsigned b, float *__restrict eps) {
    const unsigned n = numNeurons;
    if (isOutput()) {
      copyTo(eps, &lossGradSpikes[0][(t * batch + b) * n], n);
    } else if (nextStep.size() != 0) {
      eps = &nextStep[0][b * n];
    } else {
      for (unsigned j = 0; j < n; ++j)
        eps[j] = 0.0f;
      fromFanoutDense(eps, n, &nextWeightsT[0][0], &nextGrad[0][0], nextShardSize, nextLayerSize,
                      nextRow(t, b), nextRowsPerBlock());
    }
    if (recurrence == popsnn::Recurrence::ALL_TO_ALL && t + 1 < numSteps) {
      addTo(eps, &gradStep[0][b * n], n); // recurrentProduct's row, replaced by dL/dI[t] below
    } else if (recurrence == popsnn::Recurrence::ONE_TO_ONE) {
      const float *__restrict gU = &gradMem[b * n];
      for (unsigned j = 0; j < n; ++j)
        eps[j] += recWeights[0][j] * gU[j];
    }
    return eps;
  }

  // A dense trace: dL/dU[t] = surrogate * dL/dS[t] (+ a membrane loss) + leak * dL/dU[t+1],
  // in gU. A learned threshold gets -surrogate * dL/dS[t] here (dS/dthreshold = -dS/dU).
  // Alpha's U is no state (E and H carry its past): its leak is 0.
  template <class C>
  void membraneGrad(unsigned t, unsigned b, const C &c, const int *own, const float *__restrict eps,
                    float *__restrict gU) {
    const unsigned n = numNeurons;
    auto leak = [&](unsigned j) { return Neuron::twoCurrents ? 0.0f : c.betaAt(j); };
    // A zero reset cuts the leak path of neurons that spiked at t: U[t+1] starts from 0.
    // (Where it gates the whole update, the carry is gated after: see inputGrad.)
    if (zeroReset && !Neuron::gatesInput)
      zeroAtSpikes(own, offset, gU);
    // Half storage: the rows read into scratch (its row at n is free until inputGrad).
    const float *__restrict gMem =
        isOutput() ? asFloat(&lossGradMem[0][(t * batch + b) * n], traceRows(), n) : nullptr;
    const float *__restrict sg = asFloat(&surrogates[(t * batch + b) * n], &scratch[n], n);
    if (gMem)
      for (unsigned j = 0; j < n; ++j)
        gU[j] = (surrogateTimes(sg[j], eps[j]) + gMem[j]) + leak(j) * gU[j];
    else
      for (unsigned j = 0; j < n; ++j)
        gU[j] = surrogateTimes(sg[j], eps[j]) + leak(j) * gU[j];
    if (!C::uniform && learnsThreshold())
      for (unsigned j = 0; j < n; ++j)
        gradThreshold[0][j] -= surrogateTimes(sg[j], eps[j]);
  }

  // A compressed trace: one step of one sample over its live neurons only (LiveNeurons: an
  // entry at this step or a later one, or a membrane loss; every other neuron's carries are
  // exactly 0, docs/numerics.md section 4). eps and dL/dI use scratch[0, n), which is 0 off the
  // live neurons between samples. The equations and their order are generic()'s.
  template <class C>
  const float *liveStep(unsigned t, unsigned b, const C &c, const int *own, LiveNeurons &live) {
    const unsigned n = numNeurons;
    float *__restrict gU = &gradMem[b * n];
    const TraceRow e = traceRow(t, b);
    const float *gMem = isOutput() ? &lossGradMem[0][(t * batch + b) * n] : nullptr;
    live = joinLive(&liveIds[0][b * (2 * n + 1)], n, e.ids, e.size, gMem);
    float *__restrict eps = &scratch[0];
    liveSpikeGrad(t, b, e, gU, eps);
    if (zeroReset && !Neuron::gatesInput)
      zeroAtSpikes(own, offset, gU);
    liveMembraneGrad<Neuron>(c, n, e.ids, e.vals, e.size, eps, gMem, gU, live,
                             !C::uniform && learnsThreshold() ? &gradThreshold[0][0] : nullptr);
    if (!C::uniform && !Neuron::twoCurrents && (learnsBeta() || learnsThreshold()))
      constantGrads(t, b, gU); // Alpha's: in liveInputGrad, with its currents' terms
    const float *dI = liveInputGrad(t, b, c, gU, live);
    publishLive(dI, n, live, publishesGrad() ? gradOutRow(t, b) : nullptr, &gradBias[0],
                inputMode == INPUT_DIRECT ? &currentGradSum[0][b * n] : nullptr);
    if (gradList.size() != 0)
      appendGradList(dI, live, {&gradList[0][0], &gradListIds[0][0], &gradListValues[0][0]},
                     (numSteps - 1 - t) * batch + b, gradListValues[0].size());
    if (recurrence == popsnn::Recurrence::ALL_TO_ALL)
      copyTo(&gradStep[0][b * n], dI, n);
    return dI;
  }

  // dL/dS[t] at the gradient trace's entries (the rest has surrogate 0): from the loss, or one
  // dot per entry of its row of W_next with the (step, sample)'s dL/dI_next, over the next
  // layer's list entries (its live neurons) where that is cheaper, else over the row gathered
  // from its shards' lists or blocks; plus the recurrent path (gU: dL/dU[t+1]).
  template <class = S>
  void liveSpikeGrad(unsigned t, unsigned b, const TraceRow &e, const float *__restrict gU,
                     float *__restrict eps) {
    const unsigned n = numNeurons;
    if (isOutput()) {
      const float *__restrict loss = &lossGradSpikes[0][(t * batch + b) * n];
      for (unsigned k = 0; k < e.size; ++k)
        eps[e.ids[k]] = loss[e.ids[k]];
    } else if (const unsigned P = pushWidth(nextLayerSize);
               e.size && nextGradList.size() != 0 &&
               listDotsApply(e.size, nextList(t, b).count(), P)) {
      nextListDots(eps, e.ids, e.size, &nextWeightsT[0][0], P, nextList(t, b));
    } else if (e.size) {
      float *__restrict g = &scratch[2 * n];
      gatherNext(t, b, g);
      nextLayerDots(eps, e.ids, e.size, &nextWeightsT[0][0], g, P);
    }
    if (recurrence == popsnn::Recurrence::ALL_TO_ALL && t + 1 < numSteps)
      fromFanoutSparse(eps, n, e.ids, e.size, &ownWeights[0][0], &ownGrad[0][0], ownShardSize,
                       ownLayerSize, b, batch);
    else if (recurrence == popsnn::Recurrence::ONE_TO_ONE)
      for (unsigned k = 0; k < e.size; ++k)
        eps[e.ids[k]] += recWeights[0][e.ids[k]] * gU[e.ids[k]];
  }

  // inputGrad over the live neurons: dL/dI[t] is gU itself, Synaptic's carried dL/dJ, or
  // written into scratch[0, n) (Lapicque's gain, Alpha's two currents). keep = 1 - R[t]: the
  // neurons of R[t] are marked (bit 2) in the sample's in-list flags while it is read.
  template <class C>
  const float *liveInputGrad(unsigned t, unsigned b, const C &c, float *__restrict gU,
                             const LiveNeurons &live) {
    const unsigned n = numNeurons;
    const int *prevOwn = t > 0 ? ownBuffer(t - 1, b) : nullptr;
    float *__restrict dI = &scratch[0];
    if constexpr (Neuron::twoCurrents || Neuron::synaptic) {
      unsigned char *inList = liveFlags(&liveIds[0][b * (2 * n + 1)], n);
      float *__restrict gA = &gradMem[(batch + b) * n]; // dL/dJ, or Alpha's dL/dE
      float *__restrict gH = &gradMem[(2 * batch + b) * n];
      markSpikes(prevOwn, offset, inList, 2);
      if constexpr (Neuron::twoCurrents)
        if (!C::uniform && learnsThreshold() && Reset::code == RESET_SUBTRACT && prevOwn)
          learnedConstantGrads(gA, prevOwn, offset, n, false, nullptr, nullptr, nullptr,
                               &gradThreshold[0][0]); // E[t] = E'[t] - R[t] threshold
      for (unsigned k = 0; k < live.count; ++k) {
        const unsigned j = unsigned(live.ids[k]);
        const float keep = inList[j] & 2 ? 0.0f : 1.0f;
        if constexpr (Neuron::twoCurrents) {
          const float hPre = Neuron::template inputGradAt<Reset>(c, j, gU[j], keep, gA, gH, dI);
          if (!C::uniform && learnsBeta()) // U[t], and H[t-1] after the U trace
            gradBeta[0][j] += Neuron::template betaGradAt<Reset>(
                c, j, gU[j], keep, hPre, memTrace[0][(t * batch + b) * n + j],
                t > 0 ? memTrace[0][((numSteps + t - 1) * batch + b) * n + j] : 0.0f);
        } else {
          gA[j] = (zeroReset ? keep * gU[j] : gU[j]) + c.alphaAt(j) * gA[j];
        }
      }
      markSpikes(prevOwn, offset, inList, -2);
      return Neuron::twoCurrents ? dI : gA;
    }
    if (zeroReset && Neuron::gatesInput && prevOwn)
      zeroAtSpikes(prevOwn, offset, gU);
    if constexpr (Neuron::scalesInput) {
      for (unsigned k = 0; k < live.count; ++k)
        dI[live.ids[k]] = Neuron::inputGain(c, unsigned(live.ids[k])) * gU[live.ids[k]];
      return dI;
    }
    return gU;
  }

  // A learned constant's terms beside the surrogate's (learnedConstantGrads).
  void constantGrads(unsigned t, unsigned b, const float *__restrict gU) {
    if (t == 0) // U[-1] = 0 and R[0] = 0: no terms
      return;
    learnedConstantGrads(
        gU, ownBuffer(t - 1, b), offset, numNeurons, zeroReset,
        learnsBeta()
            ? asFloat(&memTrace[0][((t - 1) * batch + b) * numNeurons], traceRows(), numNeurons)
            : nullptr,
        &scratch[numNeurons], learnsBeta() ? &gradBeta[0][0] : nullptr,
        learnsThreshold() && Reset::code == RESET_SUBTRACT ? &gradThreshold[0][0] : nullptr);
  }

  // Every model's path: dL/dS, dL/dU, dL/dI and their sums; returns dL/dI[t].
  template <class C> const float *generic(unsigned t, unsigned b, const C &c, const int *own) {
    const unsigned n = numNeurons;
    float *__restrict gU = &gradMem[b * n];
    float *__restrict eps = spikeGrad(t, b, &scratch[0]);
    if constexpr (Neuron::synaptic && !zeroReset && !halfStorage) // nothing learned: one pass
      if (!isOutput() && (C::uniform || (!learnsBeta() && !learnsThreshold())))
        return synapticRow(c, n, &surrogates[(t * batch + b) * n], eps, gU,
                           &gradMem[(batch + b) * n], &gradBias[0],
                           inputMode == INPUT_DIRECT ? &currentGradSum[0][b * n] : nullptr,
                           publishesGrad() ? gradOutRow(t, b) : nullptr);
    membraneGrad(t, b, c, own, eps, gU);
    if (!C::uniform && !Neuron::twoCurrents && (learnsBeta() || learnsThreshold()))
      constantGrads(t, b, gU); // Alpha's: in inputGrad, with its currents'
    // eps is spent: its storage takes dL/dI[t] where the input path computes a row of it
    const float *__restrict dI = lifInputGrad<Neuron, Reset>(*this, t, b, c, gU, eps);
    if (publishesGrad())
      copyTo(gradOutRow(t, b), dI, n);
    if (recurrence == popsnn::Recurrence::ALL_TO_ALL)
      copyTo(&gradStep[0][b * n], dI, n);
    addTo(&gradBias[0], dI, n);
    if (inputMode == INPUT_DIRECT)
      addTo(&currentGradSum[0][b * n], dI, n);
    return dI;
  }

  // Weight gradient: sparse in the input (direct input: summed over steps above) and in the
  // live neurons where tracked (none live: nothing; few: their columns only).
  void weightGrads(unsigned t, unsigned b, const float *__restrict dI, const LiveNeurons &live,
                   unsigned srcWords) {
    const WeightGradRows rows(&gradWeights[0], dI, numNeurons, live);
    if (rows.none())
      return;
    if (inputMode == INPUT_DENSE_STEPS && inList.size() != 0)
      rows.addList(inputRowOf(&inList[0][0], &inValues[0][0], numSteps * batch, t * batch + b));
    else if (inputMode == INPUT_DENSE_STEPS)
      rows.addDense(&denseIn[0][(t * batch + b) * numInputs], numInputs);
    else if (inputMode == INPUT_SPIKE_IDS)
      for (unsigned s = 0; s < numSrc; ++s)
        rows.addSpikes(inBuffer(s, t, b, srcWords));
  }

  // RLeaky's V and b_V: S[t-1] is V's input at step t (dI is 0 off the live neurons).
  void recurrentGrads(unsigned t, unsigned b, const float *__restrict dI, const LiveNeurons &live) {
    const unsigned n = numNeurons;
    if (recurrence == popsnn::Recurrence::ALL_TO_ALL) {
      addTo(&gradRecBias[0][0], dI, n);
      for (unsigned o = 0; o < numOwn && t > 0 && (live.all || live.count); ++o) {
        const int *buf = stepMajor
                             ? &recIds[0][(o * batch + b) * stride]
                             : traceRowOf(&recIds[0][o * idTrace.size()], (t - 1) * batch + b);
        addAtSpikes(buf, dI, n, live, &gradRecWeights[0][0]);
      }
    } else if (recurrence == popsnn::Recurrence::ONE_TO_ONE && t > 0) {
      addAtSpikeIds(ownBuffer(t - 1, b), offset, dI, &gradRecWeights[0][0]);
    }
  }

  void publishStepMajor(unsigned t) {
    for (unsigned b = 0; b < batch; ++b) {
      if (publishesIds())
        copyBuffer(t >= 1 ? ownBuffer(t - 1, b) : nullptr, &outIds[0][b * stride]);
      if (recurrence == popsnn::Recurrence::ALL_TO_ALL)
        copyBuffer(t >= 2 ? ownBuffer(t - 2, b) : nullptr, &prevIds[0][b * stride]);
    }
  }
};

// Instantiated for every combination in include/popsnn/VertexUnits.hpp (VertexInstances.cpp).
