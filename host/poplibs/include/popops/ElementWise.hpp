// popsnn's subset of Poplar's popops: elementwise binary operations.
#ifndef POPSNN_POPOPS_ELEMENTWISE_HPP
#define POPSNN_POPOPS_ELEMENTWISE_HPP

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

namespace popops {
namespace expr {
// Poplar's names for the binary operations popsnn's map provides.
enum class BinaryOpType { ADD, SUBTRACT, MULTIPLY, MAXIMUM, MINIMUM };
} // namespace expr

// A new tensor mapped as A; A and B must have the same shape and element type.
poplar::Tensor map(poplar::Graph &graph, expr::BinaryOpType op, const poplar::Tensor &A,
                   const poplar::Tensor &B, poplar::program::Sequence &prog,
                   const poplar::DebugContext &debugContext = {},
                   const poplar::OptionFlags &options = {});
poplar::Tensor add(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                   poplar::program::Sequence &prog,
                   const poplar::DebugContext &debugContext = {},
                   const poplar::OptionFlags &options = {});
poplar::Tensor sub(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                   poplar::program::Sequence &prog,
                   const poplar::DebugContext &debugContext = {},
                   const poplar::OptionFlags &options = {});
poplar::Tensor mul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                   poplar::program::Sequence &prog,
                   const poplar::DebugContext &debugContext = {},
                   const poplar::OptionFlags &options = {});

} // namespace popops

#endif
