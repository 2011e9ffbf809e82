// popops::fill and popops::zero: one PopsnnFill vertex per tile interval.
#include <popops/Fill.hpp>
#include <popops/Zero.hpp>

#include "PerTile.hpp"

namespace popops {
namespace detail {

void fillWith(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog,
              double value, const poplar::DebugContext &debugContext) {
  requireType("fill", t.elementType(), /*allowBool=*/true);
  poplar::ComputeSet cs = graph.addComputeSet({debugContext, "popops::fill"});
  const poplar::Tensor flat = t.flatten();
  const std::string vertex = vertexName("PopsnnFill", t.elementType());
  forEachTileInterval(graph, flat, [&](unsigned tile, std::size_t begin, std::size_t end) {
    poplar::VertexRef v = graph.addVertex(cs, vertex, {{"out", flat.slice(begin, end)}});
    graph.setInitialValue(v["value"], value);
    graph.setTileMapping(v, tile);
  });
  prog.add(poplar::program::Execute(cs));
}

} // namespace detail

void zero(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog,
          const poplar::DebugContext &debugContext) {
  detail::fillWith(graph, t, prog, 0.0, {debugContext, "popops::zero"});
}

} // namespace popops
