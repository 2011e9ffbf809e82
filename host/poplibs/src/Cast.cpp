// popops::cast: one PopsnnCast vertex per tile interval of the source.
#include <popops/Cast.hpp>

#include "PerTile.hpp"

#include <poplar/exceptions.hpp>

namespace popops {

poplar::Tensor cast(poplar::Graph &graph, const poplar::Tensor &src, const poplar::Type &dstType,
                    poplar::program::Sequence &prog, const poplar::DebugContext &debugContext) {
  const poplar::Type srcType = src.elementType();
  detail::requireType("cast", srcType, /*allowBool=*/true);
  detail::requireType("cast", dstType, /*allowBool=*/true);
  poplar::Tensor out = graph.addVariable(dstType, src.shape(), {debugContext, "popops::cast"});
  graph.setTileMapping(out, graph.getTileMapping(src));
  if (srcType == dstType) {
    prog.add(poplar::program::Copy(src, out));
    return out;
  }
  poplar::ComputeSet cs = graph.addComputeSet({debugContext, "popops::cast"});
  const std::string vertex =
      "popops::PopsnnCast<" + srcType.toString() + "," + dstType.toString() + ">";
  const poplar::Tensor in = src.flatten(), flatOut = out.flatten();
  detail::forEachTileInterval(graph, in, [&](unsigned tile, std::size_t begin, std::size_t end) {
    poplar::VertexRef v = graph.addVertex(
        cs, vertex, {{"in", in.slice(begin, end)}, {"out", flatOut.slice(begin, end)}});
    graph.setTileMapping(v, tile);
  });
  prog.add(poplar::program::Execute(cs));
  return out;
}

} // namespace popops
