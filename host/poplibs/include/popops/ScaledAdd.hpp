// popsnn's subset of Poplar's popops: A += scaleB * B (and A -= scaleB * B) with a
// constant scale, for float tensors of one shape.
#ifndef POPSNN_POPOPS_SCALEDADD_HPP
#define POPSNN_POPOPS_SCALEDADD_HPP

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

namespace popops {

void scaledAddTo(poplar::Graph &graph, poplar::Tensor A, poplar::Tensor B, float scaleB,
                 poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                 const poplar::OptionFlags &options = {});
void scaledSubtractFrom(poplar::Graph &graph, poplar::Tensor A, poplar::Tensor B, float scaleB,
                        poplar::program::Sequence &prog,
                        const poplar::DebugContext &debugContext = {},
                        const poplar::OptionFlags &options = {});

} // namespace popops

#endif
