// popnn's non-linearities: element-wise ones as one vertex per tile interval,
// softmax as one vertex per row on the tile of the row's first element.
#include <popnn/NonLinearity.hpp>

#include "PerTile.hpp"

#include <poplar/exceptions.hpp>

#include <string>

namespace popnn {
namespace {

// The vertex for an element-wise type; "" for softmax (rows); nullptr: not provided.
const char *elementwiseVertex(NonLinearityType type) {
  switch (type) {
  case NonLinearityType::SIGMOID:
    return "popnn::PopsnnNonLinearity<float,popnn::op::Sigmoid>";
  case NonLinearityType::RELU:
    return "popnn::PopsnnNonLinearity<float,popnn::op::Relu>";
  case NonLinearityType::TANH:
    return "popnn::PopsnnNonLinearity<float,popnn::op::Tanh>";
  case NonLinearityType::SOFTMAX:
  case NonLinearityType::SOFTMAX_STABLE:
    return "";
  default:
    return nullptr;
  }
}

void softmaxRows(poplar::Graph &graph, const poplar::Tensor &t, poplar::ComputeSet &cs) {
  const std::size_t inner = t.dim(t.rank() - 1);
  const poplar::Tensor rows = t.reshape({t.numElements() / inner, inner});
  for (std::size_t r = 0; r < rows.dim(0); ++r) {
    poplar::VertexRef v = graph.addVertex(cs, "popnn::PopsnnSoftmax<float>");
    graph.connect(v["rows"], rows.slice(r, r + 1, 0));
    graph.setTileMapping(v, popops::detail::firstTile(graph, rows[r]));
  }
}

} // namespace

void nonLinearityInPlace(poplar::Graph &graph, NonLinearityType type, poplar::Tensor t,
                         poplar::program::Sequence &prog,
                         const poplar::DebugContext &debugContext) {
  const char *vertex = elementwiseVertex(type);
  if (!vertex)
    throw poplar::poplar_error("popnn::nonLinearity: this NonLinearityType is not provided by "
                               "popsnn's popnn; use SIGMOID, RELU, TANH, SOFTMAX or "
                               "SOFTMAX_STABLE");
  if (t.elementType() != poplar::FLOAT)
    throw poplar::poplar_error("popnn::nonLinearity: the tensor is " + t.elementType().toString() +
                               "; popsnn's popnn works on float tensors");
  if (t.numElements() == 0 || t.rank() == 0)
    throw poplar::poplar_error("popnn::nonLinearity: the tensor has no elements or no "
                               "dimension; give a tensor of rank 1 or more");
  poplar::ComputeSet cs = graph.addComputeSet({debugContext, "popnn::nonLinearity"});
  if (*vertex == '\0') {
    softmaxRows(graph, t, cs);
  } else {
    const poplar::Tensor flat = t.flatten();
    popops::detail::forEachTileInterval(
        graph, flat, [&](unsigned tile, std::size_t begin, std::size_t end) {
          poplar::VertexRef v = graph.addVertex(cs, vertex, {{"data", flat.slice(begin, end)}});
          graph.setTileMapping(v, tile);
        });
  }
  prog.add(poplar::program::Execute(cs));
}

poplar::Tensor nonLinearity(poplar::Graph &graph, NonLinearityType type, poplar::Tensor t,
                            poplar::program::Sequence &prog,
                            const poplar::DebugContext &debugContext) {
  poplar::Tensor out = graph.clone(t, {debugContext, "popnn::nonLinearity"});
  prog.add(poplar::program::Copy(t, out));
  nonLinearityInPlace(graph, type, out, prog, debugContext);
  return out;
}

} // namespace popnn
