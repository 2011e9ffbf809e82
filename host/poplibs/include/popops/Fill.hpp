// popsnn's subset of Poplar's popops: fill a tensor with one value.
#ifndef POPSNN_POPOPS_FILL_HPP
#define POPSNN_POPOPS_FILL_HPP

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

namespace popops {
namespace detail {
void fillWith(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog,
              double value, const poplar::DebugContext &debugContext);
} // namespace detail

template <typename FillValueType>
void fill(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog,
          FillValueType fillValue, const poplar::DebugContext &debugContext = {}) {
  detail::fillWith(graph, t, prog, static_cast<double>(fillValue), debugContext);
}

} // namespace popops

#endif
