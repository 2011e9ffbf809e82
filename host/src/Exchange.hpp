// The exchange room: which tensor regions cross tiles between compute phases, as copy
// lists (one exchange phase each). The programs room (Programs.cpp) puts them in order.
#pragma once

#include <poplar/Program.hpp>

#include <vector>

#include "GraphBuild.hpp"

namespace popsnn {

// Copy programs made of many contiguous pieces, as one exchange phase.
struct CopyList {
  std::vector<poplar::Tensor> src, dst;
  void add(const poplar::Tensor &s, const poplar::Tensor &d) {
    src.push_back(s);
    dst.push_back(d);
  }
  void append(const CopyList &other);
  // One Copy per element type (a concatenation holds one type).
  poplar::program::Program program() const;
};

// The lists merged into one exchange phase.
poplar::program::Program merged(const std::vector<CopyList> &lists);

// Every shard of `from`: its whole id trace into slot s of `to`'s shards' inRecv (or
// ownTraces), or (recurrentStep) its buffers of this step into slot s of recRecv.
// Step-major, `recurrentStep` and `previous` pick this step's buffers (outIds) or the
// previous step's (prevIds) into recRecv.
CopyList idCopies(const GraphBuild &b, const Layer &from, const Layer &to, bool recurrentStep,
                  bool ownTraces, bool previous = false);
// Every shard's dL/dI into block k of `to`'s shards' nextGrad ([T, B, n_k], whole
// backward pass), or of ownGrad ([B, n_k], this step: the recurrence); a gradList layer's
// lists (their capacity, not T x B x n_k) into slot k of nextGradList and its values.
CopyList gradCopies(const GraphBuild &b, const Layer &from, const Layer &to, bool recurrentStep);
// Every pushing shard of `from`: its W_next.S blocks [T, B, n_k] into slot s of the
// receiving shards' partialRecv.
CopyList partialCopies(const GraphBuild &b, const Layer &from, const Layer &to);
// The reverse of the fan-out: a pushing layer's dL/dW_next blocks into the weight gradients
// of the layer it feeds.
CopyList pushedGradCopies(const Layer &from, const Layer &to);
// Every layer's weights (and V) onto the tiles that use them beside their owners': the layer
// feeding it (dL/dS, a pushing layer's forward) and its own shards (the recurrence).
CopyList fanoutCopies(const GraphBuild &b);
// A learned constant given once per layer: every shard's per-neuron gradient onto every
// shard of its layer (gradParts), to be summed there; empty without one.
CopyList constantGradCopies(const GraphBuild &b);
// Chunk m of the batch onto the first layer's tiles.
CopyList inputCopies(const GraphBuild &b, unsigned chunk);
// The output layer's records onto the loss groups' tiles (gather), and the loss gradients
// back (scatter); U and dL/dU only for a loss with a membrane term.
struct LossExchange {
  CopyList gather, scatter;
};
LossExchange lossCopies(const GraphBuild &b);

} // namespace popsnn
