// popops::reduce: the reduced dimensions are moved last so that each output
// element reduces one row; the rows are copied to the tile of their output
// element (one Copy, the exchange) and one PopsnnReduce vertex per tile
// interval reduces them.
#include <popops/Reduce.hpp>

#include <poputil/TileMapping.hpp>

#include "PerTile.hpp"

#include <poplar/exceptions.hpp>

#include <algorithm>

namespace popops {
namespace {

// The operation tags of PopsnnReduce in PopopsVertices.cpp.
const char *vertexOp(Operation op) {
  switch (op) {
  case Operation::ADD:
    return "Add";
  case Operation::MUL:
    return "Multiply";
  case Operation::MAX:
    return "Maximum";
  case Operation::MIN:
    return "Minimum";
  default:
    throw poplar::poplar_error("popops::reduce: popsnn's popops provides Operation ADD, MUL, MAX "
                               "and MIN only; compose the others from map and reduce");
  }
}

// Checks dims and returns the permutation that puts them last, in order given.
std::vector<unsigned> keptThenReduced(const poplar::Tensor &in,
                                      const std::vector<std::size_t> &dims) {
  std::vector<bool> reduced(in.rank(), false);
  for (std::size_t d : dims) {
    if (d >= in.rank())
      throw poplar::poplar_error("popops::reduce: dimension " + std::to_string(d) +
                                 " is out of range for a tensor of rank " +
                                 std::to_string(in.rank()) + "; give dims below the rank");
    if (reduced[d])
      throw poplar::poplar_error("popops::reduce: dimension " + std::to_string(d) +
                                 " is given twice; list each dimension once");
    reduced[d] = true;
  }
  std::vector<unsigned> order;
  for (unsigned d = 0; d < in.rank(); ++d)
    if (!reduced[d])
      order.push_back(d);
  for (std::size_t d : dims)
    order.push_back(static_cast<unsigned>(d));
  return order;
}

} // namespace

poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in,
                      const std::vector<std::size_t> &dims, ReduceParams params,
                      poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                      const poplar::OptionFlags &) {
  const char *op = vertexOp(params.op);
  if (params.update)
    throw poplar::poplar_error("popops::reduce: ReduceParams::update adds into an output tensor, "
                               "which needs reduceWithOutput (not in popsnn's popops); use "
                               "popops::add on the result instead");
  detail::requireType("reduce", in.elementType(), /*allowBool=*/false);
  const std::vector<unsigned> order = keptThenReduced(in, dims);
  const std::vector<std::size_t> inShape = in.shape();
  std::vector<std::size_t> outShape;
  std::size_t numOut = 1, rowLength = 1;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (i < order.size() - dims.size()) {
      outShape.push_back(inShape[order[i]]);
      numOut *= inShape[order[i]];
    } else {
      rowLength *= inShape[order[i]];
    }
  }
  if (rowLength == 0)
    throw poplar::poplar_error("popops::reduce: a reduced dimension has size 0; there is "
                               "nothing to reduce, give a tensor with elements there");

  const std::string label = "popops::reduce";
  poplar::Tensor out = graph.addVariable(in.elementType(), outShape, {debugContext, label});
  poputil::mapTensorLinearly(graph, out);
  if (numOut == 0)
    return out;
  const poplar::Tensor rows = in.dimShuffle(order).flatten();
  const poplar::Tensor flatOut = out.flatten();

  // Stage the rows on the tiles of their output elements.
  poplar::Tensor staged =
      graph.addVariable(in.elementType(), {numOut * rowLength}, {debugContext, label + "/rows"});
  const auto outMapping = graph.getTileMapping(flatOut);
  poplar::Graph::TileToTensorMapping stagedMapping(outMapping.size());
  for (std::size_t tile = 0; tile < outMapping.size(); ++tile)
    for (const auto &iv : outMapping[tile])
      stagedMapping[tile].emplace_back(iv.begin() * rowLength, iv.end() * rowLength);
  graph.setTileMapping(staged, stagedMapping);
  prog.add(poplar::program::Copy(rows, staged));

  poplar::ComputeSet cs = graph.addComputeSet({debugContext, label});
  const std::string vertex = detail::vertexName("PopsnnReduce", in.elementType(), op);
  detail::forEachTileInterval(
      graph, flatOut, [&](unsigned tile, std::size_t begin, std::size_t end) {
        poplar::VertexRef v =
            graph.addVertex(cs, vertex,
                            {{"in", staged.slice(begin * rowLength, end * rowLength)},
                             {"out", flatOut.slice(begin, end)}});
        graph.setInitialValue(v["rowLength"], static_cast<unsigned>(rowLength));
        graph.setTileMapping(v, tile);
      });
  prog.add(poplar::program::Execute(cs));
  return out;
}

} // namespace popops
