// popsnn's subset of Poplar's popops: elementwise binary operations.
#ifndef POPSNN_POPOPS_ELEMENTWISE_HPP
#define POPSNN_POPOPS_ELEMENTWISE_HPP

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

#include <popops/Expr.hpp>

#include <vector>

namespace popops {

// A new tensor mapped as A; A and B must have the same shape and element type.
poplar::Tensor map(poplar::Graph &graph, expr::BinaryOpType op, const poplar::Tensor &A,
                   const poplar::Tensor &B, poplar::program::Sequence &prog,
                   const poplar::DebugContext &debugContext = {},
                   const poplar::OptionFlags &options = {});
// Evaluates expr over ts (placeholder _n is ts[n-1]) one operation at a time;
// the result is mapped as the first operand of the outermost operation.
poplar::Tensor map(poplar::Graph &graph, const expr::Expr &expr,
                   const std::vector<poplar::Tensor> &ts, poplar::program::Sequence &prog,
                   const poplar::DebugContext &debugContext = {},
                   const poplar::OptionFlags &options = {});
poplar::Tensor add(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                   poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                   const poplar::OptionFlags &options = {});
poplar::Tensor sub(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                   poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                   const poplar::OptionFlags &options = {});
poplar::Tensor mul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                   poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                   const poplar::OptionFlags &options = {});

} // namespace popops

#endif
