// popsnn's subset of Poplar's poplin matrix products, with the SDK's names and
// argument order: C = A . B for 2-D float or half tensors, sums in float. The
// planner splits C into blocks of rows and columns, one block per tile; options
// and planning caches are accepted and have no effect (the plan is a cheap pure
// function of the shapes and the target).
#ifndef poplin_MatMul_hpp
#define poplin_MatMul_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>
#include <poplar/Type.hpp>

#include <cstddef>
#include <iosfwd>
#include <vector>

namespace poplin {

namespace matmul {
class PlanningCache;
} // namespace matmul

// Accepted where the SDK takes one; nothing is cached.
class PlanningCache {};

// A [m, k] . B [k, n] -> a new [m, n] tensor of A's type (or outputType), mapped
// block by block over the tiles.
poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::Type &outputType,
                      const poplar::DebugContext &debugContext = {},
                      const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog,
                      const poplar::DebugContext &debugContext = {},
                      const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);

// The product written into `out` ([m, n], mapped wherever it is).
void matMulWithOutput(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::Tensor &out, poplar::program::Sequence &prog,
                      const poplar::DebugContext &debugContext = {},
                      const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);

// C += k * A . B.
void matMulAcc(poplar::Graph &graph, const poplar::Tensor &C, float k, const poplar::Tensor &A,
               const poplar::Tensor &B, poplar::program::Sequence &prog,
               const poplar::DebugContext &debugContext = {},
               const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);

// Operands and outputs created and mapped where the plan for aShape . bShape reads
// and writes them (no exchange for the operands' own blocks).
poplar::Tensor createMatMulInputLHS(poplar::Graph &graph, const poplar::Type &inputType,
                                    const poplar::Type &outputType,
                                    const std::vector<std::size_t> &aShape,
                                    const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext,
                                    const poplar::OptionFlags &options = {},
                                    PlanningCache *cache = nullptr);
poplar::Tensor createMatMulInputLHS(poplar::Graph &graph, const poplar::Type &dataType,
                                    const std::vector<std::size_t> &aShape,
                                    const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext,
                                    const poplar::OptionFlags &options = {},
                                    PlanningCache *cache = nullptr);
poplar::Tensor createMatMulInputRHS(poplar::Graph &graph, const poplar::Type &inputType,
                                    const poplar::Type &outputType,
                                    const std::vector<std::size_t> &aShape,
                                    const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext,
                                    const poplar::OptionFlags &options = {},
                                    PlanningCache *cache = nullptr);
poplar::Tensor createMatMulInputRHS(poplar::Graph &graph, const poplar::Type &dataType,
                                    const std::vector<std::size_t> &aShape,
                                    const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext,
                                    const poplar::OptionFlags &options = {},
                                    PlanningCache *cache = nullptr);
poplar::Tensor
createMatMulOutput(poplar::Graph &graph, const poplar::Type &inputType,
                   const poplar::Type &outputType, const std::vector<std::size_t> &aShape,
                   const std::vector<std::size_t> &bShape, const poplar::DebugContext &debugContext,
                   const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
poplar::Tensor createMatMulOutput(poplar::Graph &graph, const poplar::Type &dataType,
                                  const std::vector<std::size_t> &aShape,
                                  const std::vector<std::size_t> &bShape,
                                  const poplar::DebugContext &debugContext,
                                  const poplar::OptionFlags &options = {},
                                  PlanningCache *cache = nullptr);

// One line per plan: the blocks, the tiles and the estimated cycles (an estimate).
void matMulReportPlan(std::ostream &out, const poplar::Graph &graph, const poplar::Type &inputType,
                      const poplar::Type &outputType, const std::vector<std::size_t> &aShape,
                      const std::vector<std::size_t> &bShape,
                      const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);

} // namespace poplin

#endif
