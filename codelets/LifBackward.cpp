// Backward vertices: BPTT for one shard, one step (t = T-1 .. 0), every sample.
// The reset carries no gradient (docs/numerics.md). Sparse work: weight gradients
// visit only the input ids that spiked; with a sparse rule, dL/dS is computed only
// for the entries of the shard's id buffer (spikes and gradient candidates) whose
// masked surrogate is non-zero; without one, for every entry.
#include <poplar/Vertex.hpp>

#include "DenseKernels.hpp"
#include "LifCommon.hpp"
#include "SparseBackward.hpp"

using namespace poplar;
using namespace popsnn::codes;
using namespace popsnn::lif;

namespace {

inline float dot(const float *__restrict a, const float *__restrict b, unsigned n) {
  float s = 0.0f;
  for (unsigned j = 0; j < n; ++j)
    s += a[j] * b[j];
  return s;
}

// One (step, sample) row of the next layer's dL/dI, gathered from its shards' blocks
// (`rowsPerBlock` rows each, a shard's width per row) into g, zero-padded to
// pushWidth(nextLayerSize) so it lines up with the padded rows of W_next.
inline void gatherNextGrad(const float *nextGrad, float *__restrict g, unsigned nextLayerSize,
                           unsigned nextShardSize, unsigned row, unsigned rowsPerBlock) {
  const unsigned P = pushWidth(nextLayerSize);
  for (unsigned c = 0; c < P; ++c)
    g[c] = 0.0f;
  for (unsigned first = 0; first < nextLayerSize; first += nextShardSize) {
    const unsigned size =
        nextLayerSize - first < nextShardSize ? nextLayerSize - first : nextShardSize;
    const float *__restrict block = &nextGrad[rowsPerBlock * first + row * size];
    for (unsigned c = 0; c < size; ++c)
      g[first + c] = block[c];
  }
}

} // namespace

class LifBackward : public Vertex {
public:
  InOut<unsigned> step;                // counts 0..T-1; t = T-1-step
  Input<Vector<float>> lossGradSpikes; // output layer: dL/dS [T, B, n]
  Input<Vector<float>> lossGradMem;    // output layer: dL/dU [T, B, n] (membrane losses)
  // dL/dS of this layer comes from the dL/dI of the layers it feeds: their shards' dL/dI
  // ([B, n_k] blocks, one per shard k) and this tile's copy of their weights on its
  // neurons ([n, n_k] blocks), so only the small dL/dI crosses tiles.
  Input<Vector<float>> nextGrad;    // next layer's dL/dI, blocks [T, B, n_k] ([B, n_k] step-major)
  Input<Vector<float>> nextWeights; // next layer's W on this shard's neurons, blocks [n, n_k]
  // No sparse rule: nextWeights by downstream neuron [N_next, n]. A sparse rule: by own
  // neuron, rows padded to P = pushWidth(N_next): [n, P] (one dot per id-buffer entry).
  InOut<Vector<float>> nextWeightsT;
  Input<Vector<float>> ownGrad;     // all-to-all: this layer's dL/dI[t+1], blocks [B, n_k]
  Input<Vector<float>> ownWeights;  // all-to-all: V on this shard's neurons, blocks [n, n_k]
  InOut<Vector<float>> ownWeightsT; // all-to-all, dense: [N, n]
  Input<Vector<float>> surrTrace;   // no sparse rule: [T, B, n]
  Input<Vector<float>> surrValues;  // a sparse rule: per id-buffer entry [T, B, slot]
  Input<Vector<int>> idTrace;       // own buffers [T, B, stride]
  Input<Vector<int>> inIds;         // INPUT_SPIKE_IDS: as LifForward's

  Input<Vector<float>> denseIn; // INPUT_DENSE_STEPS: [T, B, nIn]
  // All-to-all: own layer's buffers, [numOwn, T, B, stride] (layer-major: whole traces)
  // or [numOwn, B, stride] (step-major: step t-1's).
  Input<Vector<int>> recIds;
  Input<Vector<float>> weights;        // [nIn, n]
  Input<Vector<float>> recWeights;     // all-to-all [N, n]; one-to-one [n]
  InOut<Vector<float>> gradMem;        // dL/dU[t+1] carried [B, n]
  InOut<Vector<float>> gradSyn;        // dL/dJ[t+1] carried [B, n] (Synaptic)
  InOut<Vector<float>> gradWeights;    // [nIn, n]
  InOut<Vector<float>> gradBias;       // [n]
  InOut<Vector<float>> gradRecWeights; // like recWeights
  InOut<Vector<float>> gradRecBias;    // [n]
  InOut<Vector<float>> currentGradSum; // INPUT_DIRECT: sum_t dL/dI [B, n]
  Output<Vector<float>> gradOut;  // dL/dI [T, B, n] ([B, n] step-major), for the previous layer
  Output<Vector<float>> gradStep; // all-to-all: dL/dI[t] [B, n], for the recurrence
  // Step-major: for the next backward step, this shard's buffers of step t-1 (for the layer
  // it feeds) and, all-to-all, of step t-2 (its recurrence). The forward leaves those of
  // steps T-1 and T-2 there for the first backward step.
  Output<Vector<int>> outIds;   // [B, stride]
  Output<Vector<int>> prevIds;  // [B, stride]
  InOut<Vector<float>> scratch; // [2n + P]
  // pushNext: dL/dW of the next layer on this shard's neurons (blocks [n, n_k] as
  // nextWeights): its input is this shard's spikes, its dL/dI is nextGrad.
  Output<Vector<float>> nextGradWeights;
  InOut<Vector<float>> nextGradRows; // its sums as padded rows [n, P], then dL/dI_next [P]

  unsigned batch;
  unsigned numNeurons;
  unsigned numSteps;
  unsigned numInputs;
  unsigned numSrc;
  unsigned inStride;
  unsigned numOwn;
  unsigned stride;
  unsigned offset;
  unsigned neuron;
  unsigned reset;
  unsigned inputMode;
  unsigned isOutput;
  unsigned dense;        // no sparse rule on this layer: every entry carries gradient
  unsigned publishGrad;  // gradOut is read by another layer or the recurrence
  unsigned stepsPerCall; // T (layer-major schedule) or 1 (all-to-all recurrence, step-major)
  unsigned stepMajor;    // schedule: 0 layer-major, 1 step-major (see the graph builder)
  unsigned publishIds;   // step-major: write outIds for the layer this one feeds
  unsigned pushNext;
  unsigned nextShardSize;
  unsigned nextLayerSize;
  unsigned ownShardSize;
  unsigned ownLayerSize;
  float beta;
  float alpha;

  bool compute() {
    for (unsigned call = 0; call < stepsPerCall; ++call)
      step1(numSteps - 1 - *step);
    return true;
  }

private:
  void step1(unsigned t) {
    // Float members copied to locals (see LifForward).
    const float beta = this->beta, alpha = this->alpha;
    const unsigned n = numNeurons;
    const unsigned bn = batch * n;
    if (t + 1 == numSteps) {
      if (!isOutput && dense)
        transposeFanout(&nextWeights[0], nextShardSize, nextLayerSize, &nextWeightsT[0]);
      else if (!isOutput)
        blocksToRows(&nextWeights[0], n, nextShardSize, nextLayerSize, &nextWeightsT[0]);
      if (neuron == RLEAKY_ALL_TO_ALL && dense)
        transposeFanout(&ownWeights[0], ownShardSize, ownLayerSize, &ownWeightsT[0]);
      for (unsigned k = 0; k < bn; ++k)
        gradMem[k] = 0.0f;
      if (neuron == SYNAPTIC)
        for (unsigned k = 0; k < bn; ++k)
          gradSyn[k] = 0.0f;
      // DirectWeightGrad writes it whole; a partial-current input's is the previous
      // layer's (copied in).
      if (inputMode != INPUT_DIRECT && inputMode != INPUT_PARTIAL_CURRENT)
        for (unsigned k = 0; k < gradWeights.size(); ++k)
          gradWeights[k] = 0.0f;
      if (pushNext)
        for (unsigned k = 0; k < nextGradRows.size(); ++k)
          nextGradRows[k] = 0.0f;
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
      // The masked surrogate: dense (sg) or per id-buffer entry (vals).
      const float *__restrict sg = dense ? &surrTrace[(t * batch + b) * n] : nullptr;
      const float *__restrict vals =
          dense ? nullptr : &surrValues[(t * batch + b) * (stride - BUFFER_HEADER)];
      const int *own = &idTrace[(t * batch + b) * stride];
#ifndef __IPU__
      // The traces were written in the forward, long out of cache; each sample's buffer
      // is its own cache lines: fetch a later sample's early (its header and first ids).
      if (b + 4 < batch) {
        __builtin_prefetch(own + 4 * stride);
        __builtin_prefetch(own + 4 * stride + 16);
        if (vals)
          __builtin_prefetch(vals + 4 * (stride - BUFFER_HEADER));
        if (inputMode == INPUT_SPIKE_IDS) // the weight gradient's input buffers, as own
          for (unsigned s = 0; s < numSrc; ++s)
            __builtin_prefetch(
                &inIds[((stepMajor ? s : s * numSteps + t) * batch + b + 4) * inStride]);
      }
#endif
#ifdef POPSNN_FUSED_LEAK_BACKWARD
      // A dense Leaky shard feeding another layer: one fused pass (see leakBackwardRow).
      const bool fused = dense && !isOutput && neuron == LEAKY;
#else
      const bool fused = false;
#endif
      const float *dIn = gU; // this sample's dL/dI[t]
      if (fused) {
#ifdef POPSNN_FUSED_LEAK_BACKWARD
        // dL/dI of the next layer's neurons at (t, b), contiguous, from its shards' blocks.
        float *__restrict g = &scratch[2 * n];
        const unsigned row = stepMajor ? b : t * batch + b;
        const unsigned rowsPerBlock = stepMajor ? batch : numSteps * batch;
        for (unsigned first = 0; first < nextLayerSize; first += nextShardSize) {
          const unsigned size =
              nextLayerSize - first < nextShardSize ? nextLayerSize - first : nextShardSize;
          const float *__restrict block = &nextGrad[rowsPerBlock * first + row * size];
          for (unsigned c = 0; c < size; ++c)
            g[first + c] = block[c];
        }
        if (reset == RESET_ZERO) // as below: a spike at t cuts the leak path
          for (int k = 0; k < own[0]; ++k)
            gU[unsigned(own[BUFFER_HEADER + k]) - offset] = 0.0f;
        leakBackwardRow(g, nextLayerSize, &nextWeightsT[0], n, sg, beta, gU,
                        inputMode == INPUT_DIRECT ? &currentGradSum[b * n] : nullptr,
                        publishGrad ? &gradOut[((stepMajor ? 0 : t * batch) + b) * n] : nullptr,
                        &gradBias[0]);
#endif
      } else if (!dense && !isOutput && neuron == LEAKY) {
        // A sparse rule on a Leaky shard that feeds another layer: dL/dU decays everywhere,
        // and only the id buffer's entries inside the rule add surrogate * dL/dS, one dot
        // each (padded rows of W_next with the gathered dL/dI_next); then the sums.
        const unsigned P = pushWidth(nextLayerSize);
        float *__restrict g = &scratch[2 * n];
        if (reset == RESET_ZERO) // a spike at t cuts the leak path
          for (int k = 0; k < own[0]; ++k)
            gU[unsigned(own[BUFFER_HEADER + k]) - offset] = 0.0f;
        for (unsigned j = 0; j < n; ++j)
          gU[j] = beta * gU[j];
        // The next layer's dL/dI row is read only if an entry is inside the rule.
        bool gathered = false;
        for (int k = 0; k < own[1]; ++k)
          if (vals[k] != 0.0f) { // not a spike off the rule's window
            if (!gathered)
              gatherNextGrad(&nextGrad[0], g, nextLayerSize, nextShardSize,
                             stepMajor ? b : t * batch + b, stepMajor ? batch : numSteps * batch);
            gathered = true;
            const unsigned j = unsigned(own[BUFFER_HEADER + k]) - offset;
            gU[j] += vals[k] * dotPadded(&nextWeightsT[j * P], g, P);
          }
        publishCarry(gU, n, publishGrad ? &gradOut[((stepMajor ? 0 : t * batch) + b) * n] : nullptr,
                     &gradBias[0], inputMode == INPUT_DIRECT ? &currentGradSum[b * n] : nullptr);
      } else {
        // dL/dS[t]: from the loss or the next layer, plus the recurrent path.
        if (isOutput) {
          const float *__restrict g = &lossGradSpikes[(t * batch + b) * n];
          for (unsigned j = 0; j < n; ++j)
            eps[j] = g[j];
        } else if (!dense) {
          // One dot per id-buffer entry inside the rule: its padded row of W_next with this
          // (step, sample)'s dL/dI_next, gathered padded from the downstream shards' blocks.
          for (unsigned j = 0; j < n; ++j)
            eps[j] = 0.0f;
          const unsigned P = pushWidth(nextLayerSize);
          float *__restrict g = &scratch[2 * n];
          gatherNextGrad(&nextGrad[0], g, nextLayerSize, nextShardSize,
                         stepMajor ? b : t * batch + b, stepMajor ? batch : numSteps * batch);
          for (int k = 0; k < own[1]; ++k) {
            if (vals[k] == 0.0f) // a spike off the rule's window
              continue;
            const unsigned j = unsigned(own[BUFFER_HEADER + k]) - offset;
            eps[j] += dotPadded(&nextWeightsT[j * P], g, P);
          }
        } else {
          for (unsigned j = 0; j < n; ++j)
            eps[j] = 0.0f;
          fromFanout(eps, vals, own, &nextWeights[0], &nextWeightsT[0], &nextGrad[0], nextShardSize,
                     nextLayerSize, stepMajor ? b : t * batch + b,
                     stepMajor ? batch : numSteps * batch);
        }
        if (neuron == RLEAKY_ALL_TO_ALL && t + 1 < numSteps) {
          fromFanout(eps, vals, own, &ownWeights[0], &ownWeightsT[0], &ownGrad[0], ownShardSize,
                     ownLayerSize, b, batch);
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
        // Entries off the sparse rule have surrogate exactly 0: eps is not computed there.
        const float *__restrict gMem = isOutput ? &lossGradMem[(t * batch + b) * n] : nullptr;
        if (!dense) {
          // Only the id buffer's entries carry surrogate; the rest decays.
          if (gMem)
            for (unsigned j = 0; j < n; ++j)
              gU[j] = gMem[j] + beta * gU[j];
          else
            for (unsigned j = 0; j < n; ++j)
              gU[j] = beta * gU[j];
          for (int k = 0; k < own[1]; ++k)
            if (vals[k] != 0.0f) {
              const unsigned j = unsigned(own[BUFFER_HEADER + k]) - offset;
              gU[j] += vals[k] * eps[j];
            }
        } else if (gMem) {
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
        if (publishGrad) {
          float *__restrict out = &gradOut[((stepMajor ? 0 : t * batch) + b) * n];
          for (unsigned j = 0; j < n; ++j)
            out[j] = dI[j];
        }
        if (neuron == RLEAKY_ALL_TO_ALL) {
          float *__restrict out = &gradStep[b * n];
          for (unsigned j = 0; j < n; ++j)
            out[j] = dI[j];
        }
        float *__restrict gb = &gradBias[0];
        for (unsigned j = 0; j < n; ++j)
          gb[j] += dI[j];
        if (inputMode == INPUT_DIRECT) {
          float *__restrict acc = &currentGradSum[b * n];
          for (unsigned j = 0; j < n; ++j)
            acc[j] += dI[j];
        }
        dIn = dI;
      } // not fused
      const float *__restrict dI = dIn;
      // Weight gradient: sparse in the input (direct input: summed over steps above).
      if (inputMode == INPUT_DENSE_STEPS) {
        forEachNonzero(&denseIn[(t * batch + b) * numInputs], numInputs, [&](unsigned i, float xi) {
          float *__restrict row = &gradWeights[i * n];
          for (unsigned j = 0; j < n; ++j)
            row[j] += xi * dI[j];
        });
      } else if (inputMode == INPUT_SPIKE_IDS) {
        for (unsigned s = 0; s < numSrc; ++s) {
          const int *buf = &inIds[((stepMajor ? s : s * numSteps + t) * batch + b) * inStride];
          for (int k = 0; k < buf[0]; ++k) {
            float *__restrict row = &gradWeights[unsigned(buf[BUFFER_HEADER + k]) * n];
            for (unsigned j = 0; j < n; ++j)
              row[j] += dI[j];
          }
        }
      }
      if (pushNext) {
        // dL/dW_next[j, :] += dL/dI_next[t, b, :] for each own spike j, on padded rows.
        const unsigned P = pushWidth(nextLayerSize);
        float *__restrict g = &nextGradRows[n * P];
        for (unsigned first = 0; first < nextLayerSize; first += nextShardSize) {
          const unsigned size =
              nextLayerSize - first < nextShardSize ? nextLayerSize - first : nextShardSize;
          const float *__restrict block =
              &nextGrad[numSteps * batch * first + (t * batch + b) * size];
          for (unsigned c = 0; c < size; ++c)
            g[first + c] = block[c];
        }
        for (int k = 0; k < own[0]; ++k) {
          float *__restrict row = &nextGradRows[(unsigned(own[BUFFER_HEADER + k]) - offset) * P];
          for (unsigned c0 = 0; c0 < P; c0 += PUSH_CHUNK)
            for (unsigned c = 0; c < PUSH_CHUNK; ++c)
              row[c0 + c] += g[c0 + c];
        }
      }
      if (neuron == RLEAKY_ALL_TO_ALL) {
        float *__restrict gvb = &gradRecBias[0];
        for (unsigned j = 0; j < n; ++j)
          gvb[j] += dI[j];
        if (t > 0) {
          for (unsigned o = 0; o < numOwn; ++o) {
            const int *buf = &recIds[((stepMajor ? o : o * numSteps + t - 1) * batch + b) * stride];
            for (int k = 0; k < buf[0]; ++k) {
              float *__restrict row = &gradRecWeights[unsigned(buf[BUFFER_HEADER + k]) * n];
              for (unsigned j = 0; j < n; ++j)
                row[j] += dI[j];
            }
          }
        }
      } else if (neuron == RLEAKY_ONE_TO_ONE && t > 0) {
        const int *prevOwn = &idTrace[((t - 1) * batch + b) * stride];
        for (int k = 0; k < prevOwn[0]; ++k) {
          const unsigned j = unsigned(prevOwn[BUFFER_HEADER + k]) - offset;
          gradRecWeights[j] += dI[j];
        }
      }
    }
    if (stepMajor) {
      for (unsigned b = 0; b < batch; ++b) {
        if (publishIds)
          copyBuffer(t >= 1 ? &idTrace[((t - 1) * batch + b) * stride] : nullptr,
                     &outIds[b * stride]);
        if (neuron == RLEAKY_ALL_TO_ALL)
          copyBuffer(t >= 2 ? &idTrace[((t - 2) * batch + b) * stride] : nullptr,
                     &prevIds[b * stride]);
      }
    }
    if (pushNext && t == 0)
      rowsToBlocks(&nextGradRows[0], n, nextShardSize, nextLayerSize, &nextGradWeights[0]);
    *step = (*step + 1 == numSteps) ? 0 : *step + 1;
  }

  // Fan-out blocks [n, n_k] (one per downstream shard k) -> [N_down, n].
  void transposeFanout(const float *__restrict fanout, unsigned shardSize, unsigned layerSize,
                       float *__restrict byDownstream) const {
    const unsigned n = numNeurons;
    for (unsigned first = 0; first < layerSize; first += shardSize) {
      const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
      const float *__restrict block = fanout + n * first;
      for (unsigned i = 0; i < n; ++i)
        for (unsigned k = 0; k < size; ++k)
          byDownstream[(first + k) * n + i] = block[i * size + k];
    }
  }

  // eps[j] += sum_k W_down[k, j] * dL/dI_down[b, k] over a downstream layer's neurons k.
  // Dense: one multiply-add pass over this shard per downstream neuron (zero dL/dI skipped).
  // Sparse rule: only for the entries of this step's id buffer (spikes, then gradient
  // candidates) whose surrogate is non-zero, one dot per entry.
  // `grads` holds one block per downstream shard k at rowsPerBlock * first_k, [rows, n_k];
  // `row` picks the (step, sample) or sample row within each block.
  void fromFanout(float *__restrict eps, const float *__restrict vals, const int *ids,
                  const float *fanout, const float *byDownstream, const float *grads,
                  unsigned shardSize, unsigned layerSize, unsigned row,
                  unsigned rowsPerBlock) const {
    const unsigned n = numNeurons;
    if (dense) {
      for (unsigned first = 0; first < layerSize; first += shardSize) {
        const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
        const float *__restrict g = grads + rowsPerBlock * first + row * size;
        const float *__restrict rows = byDownstream + first * n;
        unsigned k = 0;
        // Four downstream neurons per pass: one load and store of eps for four rows.
        for (; k + 4 <= size; k += 4) {
          const float g0 = g[k], g1 = g[k + 1], g2 = g[k + 2], g3 = g[k + 3];
          const float *__restrict r0 = rows + k * n;
          const float *__restrict r1 = r0 + n;
          const float *__restrict r2 = r1 + n;
          const float *__restrict r3 = r2 + n;
          for (unsigned j = 0; j < n; ++j)
            eps[j] += g0 * r0[j] + g1 * r1[j] + g2 * r2[j] + g3 * r3[j];
        }
        for (; k < size; ++k) {
          const float gk = g[k];
          const float *__restrict row = rows + k * n;
          for (unsigned j = 0; j < n; ++j)
            eps[j] += gk * row[j];
        }
      }
      return;
    }
    for (int k = 0; k < ids[1]; ++k) {
      const unsigned j = unsigned(ids[BUFFER_HEADER + k]) - offset;
      if (vals[k] == 0.0f) // a spike off the rule's window
        continue;
      float sum = 0.0f;
      for (unsigned first = 0; first < layerSize; first += shardSize) {
        const unsigned size = layerSize - first < shardSize ? layerSize - first : shardSize;
        sum += dot(fanout + n * first + j * size, grads + rowsPerBlock * first + row * size, size);
      }
      eps[j] += sum;
    }
  }
};

// dL/dW = x^T . sum_t dL/dI for direct-current input, once per minibatch, each
// weight-gradient row written once.
class DirectWeightGrad : public Vertex {
public:
  Input<Vector<float>> x;              // [B, xStride]
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

  // By the measured density of the slice of x: the blocked dense product (x^T as its left
  // operand), or the sparse row kernel over each input's non-zero samples.
  bool compute() {
    const unsigned n = numNeurons;
    const float *__restrict xs = &x[firstInput];
    if (popsnn::dense::denseEnough(popsnn::dense::countNonzero(xs, batch, numInputs, xStride),
                                   1ull * batch * numInputs,
                                   popsnn::dense::DENSE_WEIGHT_GRAD_MIN_PER_MILLE))
      popsnn::dense::denseProduct(numInputs, n, batch, xs, 1, xStride, &currentGradSum[0], n,
                                  &gradWeights[0], n);
    else
      sparseInputTransposedProduct(xs, xStride, batch, numInputs, &currentGradSum[0], n,
                                   &nzIndex[0], &nzValue[0], &gradWeights[0]);
    return true;
  }
};
