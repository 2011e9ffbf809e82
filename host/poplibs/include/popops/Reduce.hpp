// popsnn's subset of Poplar's popops: reductions over chosen dimensions.
#ifndef POPSNN_POPOPS_REDUCE_HPP
#define POPSNN_POPOPS_REDUCE_HPP

#include <popops/Operation.hpp>

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

#include <cstddef>
#include <vector>

namespace popops {

struct ReduceParams {
  ReduceParams() = default;
  // Implicit, as in Poplar: reduce(graph, in, dims, popops::Operation::ADD, prog).
  ReduceParams(Operation op, bool update = false) : op(op), update(update) {}
  Operation op = Operation::ADD;
  bool update = false;
};

// A new tensor of in's shape without the dimensions in dims (mapped linearly).
poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in,
                      const std::vector<std::size_t> &dims, ReduceParams params,
                      poplar::program::Sequence &prog,
                      const poplar::DebugContext &debugContext = {},
                      const poplar::OptionFlags &options = {});

} // namespace popops

#endif
