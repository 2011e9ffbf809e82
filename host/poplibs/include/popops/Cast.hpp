// popsnn's subset of Poplar's popops: element type conversion.
#ifndef POPSNN_POPOPS_CAST_HPP
#define POPSNN_POPOPS_CAST_HPP

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>
#include <poplar/Type.hpp>

namespace popops {

// A new tensor of dstType, mapped as src, holding src's values converted as C++ does.
poplar::Tensor cast(poplar::Graph &graph, const poplar::Tensor &src, const poplar::Type &dstType,
                    poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {});

} // namespace popops

#endif
