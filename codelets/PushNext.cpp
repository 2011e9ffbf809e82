// The push-next vertices of a pushing shard (LayerShape::push: the next layer is narrower
// than this one's id buffers, so this shard sends W_next.S sums instead of its ids). They
// read the shard's id trace once its forward (or the next layer's backward) is done, so
// the LIF step vertices carry no push fields. Layer-major schedules only (see the plan).
#include <poplar/Vertex.hpp>

#include "LifCommon.hpp"

using namespace poplar;
using namespace popsnn::codes;
using namespace popsnn::lif;

// W_next.S[t] for every step: the rows of the stored spikes, PUSH_CHUNK columns at a time
// in registers, into the downstream shards' blocks [T, B, n_k]; only those cross tiles.
// The weights and the blocks are stored as `Stored` (float, or half: docs/numerics.md
// section 8), the rows and their sums are float, each block entry rounded once.
template <class Stored> class PushSpikes : public Vertex {
public:
  Input<Vector<int>> idTrace;         // own buffers: the id trace (VertexEnums.hpp)
  Input<Vector<Stored>> nextWeights;  // the next layer's W on this shard's neurons, [n, n_k]
  Output<Vector<Stored>> nextCurrent; // blocks [T, B, n_k]
  // nextWeights by own neuron, rows padded to P = pushWidth(N_next): [n, P], then [P] sums.
  InOut<Vector<float>> nextRows;
  unsigned batch;
  unsigned numNeurons;
  unsigned numSteps;
  unsigned offset;
  unsigned nextShardSize;
  unsigned nextLayerSize;

  bool compute() {
    const unsigned n = numNeurons, nextN = nextLayerSize, P = pushWidth(nextN);
    const unsigned rowsPerBlock = numSteps * batch;
    blocksToRows(&nextWeights[0], n, nextShardSize, nextN, &nextRows[0]);
    float *__restrict pushed = &nextRows[n * P];
    for (unsigned row = 0; row < rowsPerBlock; ++row) { // row = t * B + b
      const int *buf = traceRowOf(&idTrace[0], row);
      // buf[0]: the spikes stored (a buffer that overflowed fails the step).
      sumRows(buf + BUFFER_HEADER, unsigned(buf[0]), offset, &nextRows[0], P, pushed);
      for (unsigned first = 0; first < nextN; first += nextShardSize) {
        const unsigned size = nextN - first < nextShardSize ? nextN - first : nextShardSize;
        Stored *__restrict out = &nextCurrent[rowsPerBlock * first + row * size];
        for (unsigned k = 0; k < size; ++k)
          out[k] = Stored(pushed[first + k]);
      }
    }
    return true;
  }
};
template class PushSpikes<float>;
template class PushSpikes<half>;

// dL/dW_next on this shard's neurons: its input is this shard's spikes, its dL/dI the next
// layer's (nextGrad), summed over the steps from T-1 down to 0 as the backward visits them.
// dL/dI arrives stored as `Stored` (an exchanged value); the sums dL/dW_next are float.
template <class Stored> class PushGrads : public Vertex {
public:
  Input<Vector<int>> idTrace;            // own buffers: the id trace (VertexEnums.hpp)
  Input<Vector<Stored>> nextGrad;        // the next layer's dL/dI, blocks [T, B, n_k]
  Output<Vector<float>> nextGradWeights; // blocks [n, n_k] as nextWeights
  InOut<Vector<float>> nextGradRows;     // the sums as padded rows [n, P], then dL/dI_next [P]
  unsigned batch;
  unsigned numNeurons;
  unsigned numSteps;
  unsigned offset;
  unsigned nextShardSize;
  unsigned nextLayerSize;

  bool compute() {
    const unsigned n = numNeurons, nextN = nextLayerSize, P = pushWidth(nextN);
    for (unsigned k = 0; k < nextGradRows.size(); ++k)
      nextGradRows[k] = 0.0f;
    float *__restrict g = &nextGradRows[n * P];
    for (unsigned t = numSteps; t-- > 0;)
      for (unsigned b = 0; b < batch; ++b) {
        const unsigned row = t * batch + b;
        for (unsigned first = 0; first < nextN; first += nextShardSize) {
          const unsigned size = nextN - first < nextShardSize ? nextN - first : nextShardSize;
          const Stored *__restrict block = &nextGrad[numSteps * batch * first + row * size];
          for (unsigned c = 0; c < size; ++c)
            g[first + c] = float(block[c]);
        }
        const int *own = traceRowOf(&idTrace[0], row);
        addToRows(own + BUFFER_HEADER, unsigned(own[0]), offset, g, &nextGradRows[0], P);
      }
    rowsToBlocks(&nextGradRows[0], n, nextShardSize, nextN, &nextGradWeights[0]);
    return true;
  }
};
template class PushGrads<float>;
template class PushGrads<half>;
