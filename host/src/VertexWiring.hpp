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

// Adds every vertex: per shard x.W (direct input), forward, backward and optimiser; the
// loss; and, with the batch in chunks, the gradient accumulation. Returns the copies that
// start the chunks' gradient totals (the first chunk's gradients and loss).
CopyList addVertices(GraphBuild &b, ComputeSets &cs);

} // namespace popsnn
