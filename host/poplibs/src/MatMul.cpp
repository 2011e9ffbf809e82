// poplin's matrix products on popsnn's runtime: one compute set, one vertex per
// block of C (MatMulPlan), each reading its rows of A and its columns of B
// wherever they live (the runtime exchanges what is on other tiles, as Poplar's
// compiler does) and writing its block of C.
#include <poplin/MatMul.hpp>

#include "MatMulPlan.hpp"
#include "PerTile.hpp"

#include <poplar/exceptions.hpp>

#include <ostream>
#include <string>

namespace poplin {
namespace {

using detail::MatMulPlan;
using popops::detail::shapeText;
using Shape = std::vector<std::size_t>;

void fail(const char *function, const std::string &what) {
  throw poplar::poplar_error(std::string("poplin::") + function + ": " + what);
}

void requireType(const char *function, const char *role, const poplar::Type &type) {
  if (type != poplar::FLOAT && type != poplar::HALF)
    fail(function, std::string(role) + " is " + type.toString() +
                       "; popsnn's poplin multiplies float or half matrices");
}

void checkShapes(const char *function, const Shape &a, const Shape &b) {
  if (a.size() != 2 || b.size() != 2)
    fail(function, "A has shape " + shapeText(a) + " and B " + shapeText(b) +
                       "; both must be 2-D matrices (grouped products are not provided)");
  if (a[1] != b[0])
    fail(function, "A has shape " + shapeText(a) + " and B " + shapeText(b) + ": A's " +
                       std::to_string(a[1]) + " columns must equal B's rows");
  if (a[0] == 0 || a[1] == 0 || b[1] == 0)
    fail(function, "A has shape " + shapeText(a) + " and B " + shapeText(b) +
                       "; every dimension must be at least 1");
}

MatMulPlan planFor(const poplar::Graph &graph, const char *function, const poplar::Type &inType,
                   const Shape &a, const Shape &b) {
  requireType(function, "the input type", inType);
  checkShapes(function, a, b);
  return detail::planMatMul(a[0], a[1], b[1], graph.getTarget().getNumTiles(),
                            inType == poplar::HALF);
}

// Calls fn(i, j, rows, cols) for every block of the plan: rows and cols as
// [begin, end) pairs.
template <typename Fn> void forEachBlock(const MatMulPlan &p, Fn fn) {
  for (std::size_t i = 0; i < p.rowBlocks; ++i)
    for (std::size_t j = 0; j < p.colBlocks; ++j)
      fn(i, j, p.rowBegin(i), p.rowBegin(i + 1), p.colBegin(j), p.colBegin(j + 1));
}

poplar::Tensor newOutput(poplar::Graph &graph, const MatMulPlan &p, const poplar::Type &type,
                         const poplar::DebugContext &dc) {
  poplar::Tensor C = graph.addVariable(type, {p.m, p.n}, {dc, "poplin::matMul/C"});
  forEachBlock(
      p, [&](std::size_t i, std::size_t j, std::size_t r0, std::size_t r1, std::size_t c0,
             std::size_t c1) { graph.setTileMapping(C.slice({r0, c0}, {r1, c1}), p.tile(i, j)); });
  return C;
}

// The product's vertices, into C (Output) or added to it times `scale` (InOut).
void addProducts(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                 const poplar::Tensor &C, const MatMulPlan &p, poplar::program::Sequence &prog,
                 const poplar::DebugContext &dc, const float *scale) {
  const std::string in = A.elementType().toString();
  const std::string vertex =
      scale ? "poplin::MatMulBlockAcc<" + in + ">"
            : "poplin::MatMulBlock<" + in + "," + C.elementType().toString() + ">";
  poplar::ComputeSet cs = graph.addComputeSet({dc, scale ? "poplin::matMulAcc" : "poplin::matMul"});
  forEachBlock(p, [&](std::size_t i, std::size_t j, std::size_t r0, std::size_t r1, std::size_t c0,
                      std::size_t c1) {
    poplar::VertexRef v = graph.addVertex(cs, vertex);
    graph.connect(v["a"], A.slice(r0, r1, 0).flatten());
    graph.connect(v["b"], B.slice({0, c0}, {p.k, c1}));
    graph.connect(v["out"], C.slice({r0, c0}, {r1, c1}));
    if (scale)
      graph.setInitialValue(v["scale"], *scale);
    graph.setTileMapping(v, p.tile(i, j));
    graph.setPerfEstimate(v, detail::blockCycles(r1 - r0, p.k, c1 - c0, p.halfInput));
  });
  prog.add(poplar::program::Execute(cs));
}

MatMulPlan checkOperands(const poplar::Graph &graph, const char *function, const poplar::Tensor &A,
                         const poplar::Tensor &B) {
  if (A.elementType() != B.elementType())
    fail(function, "A is " + A.elementType().toString() + " but B is " +
                       B.elementType().toString() + "; cast one of them first");
  return planFor(graph, function, A.elementType(), A.shape(), B.shape());
}

void checkResult(const char *function, const poplar::Tensor &C, const MatMulPlan &p) {
  const Shape want = {p.m, p.n};
  if (C.shape() != want)
    fail(function,
         "the result tensor has shape " + shapeText(C.shape()) + ", A . B has " + shapeText(want));
  requireType(function, "the result", C.elementType());
}

} // namespace

poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::Type &outputType,
                      const poplar::DebugContext &debugContext, const poplar::OptionFlags &,
                      PlanningCache *) {
  const MatMulPlan p = checkOperands(graph, "matMul", A, B);
  requireType("matMul", "the output type", outputType);
  poplar::Tensor C = newOutput(graph, p, outputType, debugContext);
  addProducts(graph, A, B, C, p, prog, debugContext, nullptr);
  return C;
}

poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                      const poplar::OptionFlags &options, PlanningCache *cache) {
  return matMul(graph, A, B, prog, A.elementType(), debugContext, options, cache);
}

void matMulWithOutput(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::Tensor &out, poplar::program::Sequence &prog,
                      const poplar::DebugContext &debugContext, const poplar::OptionFlags &,
                      PlanningCache *) {
  const MatMulPlan p = checkOperands(graph, "matMulWithOutput", A, B);
  checkResult("matMulWithOutput", out, p);
  addProducts(graph, A, B, out, p, prog, debugContext, nullptr);
}

void matMulAcc(poplar::Graph &graph, const poplar::Tensor &C, float k, const poplar::Tensor &A,
               const poplar::Tensor &B, poplar::program::Sequence &prog,
               const poplar::DebugContext &debugContext, const poplar::OptionFlags &,
               PlanningCache *) {
  const MatMulPlan p = checkOperands(graph, "matMulAcc", A, B);
  checkResult("matMulAcc", C, p);
  if (C.elementType() != A.elementType())
    fail("matMulAcc", "C is " + C.elementType().toString() + " but A and B are " +
                          A.elementType().toString() + "; give C the operands' type");
  addProducts(graph, A, B, C, p, prog, debugContext, &k);
}

poplar::Tensor createMatMulInputLHS(poplar::Graph &graph, const poplar::Type &inputType,
                                    const poplar::Type &, const Shape &aShape, const Shape &bShape,
                                    const poplar::DebugContext &debugContext,
                                    const poplar::OptionFlags &, PlanningCache *) {
  const MatMulPlan p = planFor(graph, "createMatMulInputLHS", inputType, aShape, bShape);
  poplar::Tensor A = graph.addVariable(inputType, aShape, {debugContext, "poplin::LHS"});
  // Block i's rows are read by the colBlocks tiles of row i: each holds a share.
  for (std::size_t i = 0; i < p.rowBlocks; ++i) {
    const std::size_t r0 = p.rowBegin(i), rows = p.rowBegin(i + 1) - r0;
    for (std::size_t j = 0; j < p.colBlocks; ++j)
      graph.setTileMapping(
          A.slice(r0 + rows * j / p.colBlocks, r0 + rows * (j + 1) / p.colBlocks, 0), p.tile(i, j));
  }
  return A;
}

poplar::Tensor createMatMulInputRHS(poplar::Graph &graph, const poplar::Type &inputType,
                                    const poplar::Type &, const Shape &aShape, const Shape &bShape,
                                    const poplar::DebugContext &debugContext,
                                    const poplar::OptionFlags &, PlanningCache *) {
  const MatMulPlan p = planFor(graph, "createMatMulInputRHS", inputType, aShape, bShape);
  poplar::Tensor B = graph.addVariable(inputType, bShape, {debugContext, "poplin::RHS"});
  // Column block j is read by the rowBlocks tiles of column j: each holds a share of its rows.
  for (std::size_t j = 0; j < p.colBlocks; ++j)
    for (std::size_t i = 0; i < p.rowBlocks; ++i)
      graph.setTileMapping(B.slice({p.k * i / p.rowBlocks, p.colBegin(j)},
                                   {p.k * (i + 1) / p.rowBlocks, p.colBegin(j + 1)}),
                           p.tile(i, j));
  return B;
}

poplar::Tensor createMatMulOutput(poplar::Graph &graph, const poplar::Type &inputType,
                                  const poplar::Type &outputType, const Shape &aShape,
                                  const Shape &bShape, const poplar::DebugContext &debugContext,
                                  const poplar::OptionFlags &, PlanningCache *) {
  const MatMulPlan p = planFor(graph, "createMatMulOutput", inputType, aShape, bShape);
  requireType("createMatMulOutput", "the output type", outputType);
  return newOutput(graph, p, outputType, debugContext);
}

poplar::Tensor createMatMulInputLHS(poplar::Graph &graph, const poplar::Type &dataType,
                                    const Shape &aShape, const Shape &bShape,
                                    const poplar::DebugContext &debugContext,
                                    const poplar::OptionFlags &options, PlanningCache *cache) {
  return createMatMulInputLHS(graph, dataType, dataType, aShape, bShape, debugContext, options,
                              cache);
}

poplar::Tensor createMatMulInputRHS(poplar::Graph &graph, const poplar::Type &dataType,
                                    const Shape &aShape, const Shape &bShape,
                                    const poplar::DebugContext &debugContext,
                                    const poplar::OptionFlags &options, PlanningCache *cache) {
  return createMatMulInputRHS(graph, dataType, dataType, aShape, bShape, debugContext, options,
                              cache);
}

poplar::Tensor createMatMulOutput(poplar::Graph &graph, const poplar::Type &dataType,
                                  const Shape &aShape, const Shape &bShape,
                                  const poplar::DebugContext &debugContext,
                                  const poplar::OptionFlags &options, PlanningCache *cache) {
  return createMatMulOutput(graph, dataType, dataType, aShape, bShape, debugContext, options,
                            cache);
}

void matMulReportPlan(std::ostream &out, const poplar::Graph &graph, const poplar::Type &inputType,
                      const poplar::Type &outputType, const Shape &aShape, const Shape &bShape,
                      const poplar::OptionFlags &, PlanningCache *) {
  const MatMulPlan p = planFor(graph, "matMulReportPlan", inputType, aShape, bShape);
  requireType("matMulReportPlan", "the output type", outputType);
  out << "poplin plan (popsnn): " << shapeText(aShape) << " x " << shapeText(bShape) << " -> "
      << outputType.toString() << ": " << p.rowBlocks << " x " << p.colBlocks << " blocks of "
      << p.rowsPerBlock() << " x " << p.colsPerBlock() << " on " << p.tilesUsed()
      << " tiles, about "
      << detail::blockCycles(p.rowsPerBlock(), p.k, p.colsPerBlock(), p.halfInput)
      << " cycles per tile (estimate)\n";
}

} // namespace poplin
