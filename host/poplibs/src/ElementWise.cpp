// popops' elementwise binary operations: the output is mapped as A, B is
// copied to A's mapping when it differs, and one PopsnnBinary vertex works on
// each tile interval.
#include <popops/ElementWise.hpp>

#include "PerTile.hpp"

#include <poplar/exceptions.hpp>

namespace popops {
namespace {

const char *opName(expr::BinaryOpType op) {
  switch (op) {
  case expr::BinaryOpType::ADD:
    return "add";
  case expr::BinaryOpType::SUBTRACT:
    return "sub";
  case expr::BinaryOpType::MULTIPLY:
    return "mul";
  case expr::BinaryOpType::MAXIMUM:
    return "max";
  case expr::BinaryOpType::MINIMUM:
    return "min";
  }
  return "map";
}

// The operation tags of PopsnnBinary in PopopsVertices.cpp.
const char *vertexOp(expr::BinaryOpType op) {
  switch (op) {
  case expr::BinaryOpType::ADD:
    return "Add";
  case expr::BinaryOpType::SUBTRACT:
    return "Subtract";
  case expr::BinaryOpType::MULTIPLY:
    return "Multiply";
  case expr::BinaryOpType::MAXIMUM:
    return "Maximum";
  case expr::BinaryOpType::MINIMUM:
    return "Minimum";
  }
  throw poplar::poplar_error("popops::map: unknown BinaryOpType");
}

void checkOperands(const char *name, const poplar::Tensor &A, const poplar::Tensor &B) {
  if (A.shape() != B.shape())
    throw poplar::poplar_error(std::string("popops::") + name + ": A has shape " +
                               detail::shapeText(A.shape()) + " but B has shape " +
                               detail::shapeText(B.shape()) +
                               "; popsnn's popops does not broadcast, give tensors of one shape");
  if (A.elementType() != B.elementType())
    throw poplar::poplar_error(std::string("popops::") + name + ": A is " +
                               A.elementType().toString() + " but B is " +
                               B.elementType().toString() + "; cast one of them first");
  popops::detail::requireType(name, A.elementType(), /*allowBool=*/false);
}

} // namespace

poplar::Tensor map(poplar::Graph &graph, expr::BinaryOpType op, const poplar::Tensor &A,
                   const poplar::Tensor &B, poplar::program::Sequence &prog,
                   const poplar::DebugContext &debugContext, const poplar::OptionFlags &) {
  const char *name = opName(op);
  checkOperands(name, A, B);
  const std::string label = std::string("popops::") + name;
  poplar::Tensor out = graph.clone(A, {debugContext, label});
  const poplar::Tensor b = detail::alignedTo(graph, B, A, prog, label + "/B");
  const poplar::Tensor a = A.flatten(), bFlat = b.flatten(), o = out.flatten();
  poplar::ComputeSet cs = graph.addComputeSet({debugContext, label});
  const std::string vertex = detail::vertexName("PopsnnBinary", A.elementType(), vertexOp(op));
  detail::forEachTileInterval(graph, o, [&](unsigned tile, std::size_t begin, std::size_t end) {
    poplar::VertexRef v = graph.addVertex(cs, vertex,
                                          {{"in1", a.slice(begin, end)},
                                           {"in2", bFlat.slice(begin, end)},
                                           {"out", o.slice(begin, end)}});
    graph.setTileMapping(v, tile);
  });
  prog.add(poplar::program::Execute(cs));
  return out;
}

poplar::Tensor add(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                   poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                   const poplar::OptionFlags &options) {
  return map(graph, expr::BinaryOpType::ADD, A, B, prog, debugContext, options);
}

poplar::Tensor sub(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                   poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                   const poplar::OptionFlags &options) {
  return map(graph, expr::BinaryOpType::SUBTRACT, A, B, prog, debugContext, options);
}

poplar::Tensor mul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                   poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                   const poplar::OptionFlags &options) {
  return map(graph, expr::BinaryOpType::MULTIPLY, A, B, prog, debugContext, options);
}

} // namespace popops
