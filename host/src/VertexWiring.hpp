// The vertex-wiring room: every vertex of a graph build, connected to the shard and host
// tensors (GraphBuild.hpp), with its constant fields and its cycle estimate.
#pragma once

#include <poplar/Graph.hpp>

#include <vector>

#include "Exchange.hpp"
#include "GraphBuild.hpp"

namespace popsnn {

// The compute sets of one training step (each one compute phase).
struct ComputeSets {
  poplar::ComputeSet direct, directGrad, loss, optimiser, accumulate;
  // A learned constant given once per layer: its gradient summed over the layer's neurons.
  poplar::ComputeSet reduceConstants;
  // Half storage: the parameters' half copies, and the gradients divided by the loss scale.
  poplar::ComputeSet roundParams, unscale;
  std::vector<poplar::ComputeSet> forward, backward; // per layer
  // Per layer, made for pushing layers only (LayerShape::push): after its forward, and
  // after the layer it pushes to has its dL/dI.
  std::vector<poplar::ComputeSet> push, pushGrads;
};

// Whether the training step steps the direct-input layer's weights as it computes their
// gradient (DirectWeightAdamStep / DirectWeightSgdStep in the optimiser's compute set) instead
// of DirectWeightGrad then the optimiser: float storage (half's gradients are checked whole
// for overflow first) and the whole batch at once (chunks sum their gradients first), on the
// cpu device (an IPU splits the product over its workers). Program 1 then runs no
// DirectWeightGrad; the gradients-only program (2) still does.
bool fusesWeightStep(const GraphBuild &b);

// Adds every vertex: per shard x.W (direct input), forward, backward and optimiser; the
// loss; and, with the batch in chunks, the gradient accumulation. Returns the copies that
// start the chunks' gradient totals (the first chunk's gradients and loss).
CopyList addVertices(GraphBuild &b, ComputeSets &cs);

} // namespace popsnn
