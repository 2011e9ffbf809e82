// popops::scaledAddTo / scaledSubtractFrom: B brought to A's tiles when mapped
// differently, then one PopsnnScaledAdd vertex per tile interval of A.
#include <popops/ScaledAdd.hpp>

#include "PerTile.hpp"

#include <poplar/exceptions.hpp>

namespace popops {
namespace {

void scaledAdd(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B, float scale,
               poplar::program::Sequence &prog, const std::string &label,
               const poplar::DebugContext &debugContext) {
  if (A.shape() != B.shape())
    throw poplar::poplar_error("popops::" + label + ": A has shape " +
                               detail::shapeText(A.shape()) + " but B has shape " +
                               detail::shapeText(B.shape()) + "; give tensors of one shape");
  if (A.elementType() != poplar::FLOAT || B.elementType() != poplar::FLOAT)
    throw poplar::poplar_error("popops::" + label + ": A is " + A.elementType().toString() +
                               " and B " + B.elementType().toString() +
                               "; popsnn's popops scales and adds float tensors only");
  const poplar::Tensor b =
      detail::alignedTo(graph, B, A, prog, "popops::" + label + "/B").flatten();
  const poplar::Tensor a = A.flatten();
  poplar::ComputeSet cs = graph.addComputeSet({debugContext, "popops::" + label});
  detail::forEachTileInterval(graph, a, [&](unsigned tile, std::size_t begin, std::size_t end) {
    poplar::VertexRef v = graph.addVertex(cs, "popops::PopsnnScaledAdd<float>",
                                          {{"a", a.slice(begin, end)}, {"b", b.slice(begin, end)}});
    graph.setInitialValue(v["scale"], scale);
    graph.setTileMapping(v, tile);
  });
  prog.add(poplar::program::Execute(cs));
}

} // namespace

void scaledAddTo(poplar::Graph &graph, poplar::Tensor A, poplar::Tensor B, float scaleB,
                 poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                 const poplar::OptionFlags &) {
  scaledAdd(graph, A, B, scaleB, prog, "scaledAddTo", debugContext);
}

void scaledSubtractFrom(poplar::Graph &graph, poplar::Tensor A, poplar::Tensor B, float scaleB,
                        poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                        const poplar::OptionFlags &) {
  scaledAdd(graph, A, B, -scaleB, prog, "scaledSubtractFrom", debugContext);
}

} // namespace popops
