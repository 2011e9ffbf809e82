// popsnn's subset of Poplar's popops: set a tensor to zero.
#ifndef POPSNN_POPOPS_ZERO_HPP
#define POPSNN_POPOPS_ZERO_HPP

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

namespace popops {

void zero(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog,
          const poplar::DebugContext &debugContext = {});

} // namespace popops

#endif
