// popnn's losses: one vertex for the whole batch on the tile of the loss's
// first element (batches are small; Poplar spreads the rows over tiles).
#include <popnn/Loss.hpp>

#include "PerTile.hpp"

#include <poplar/exceptions.hpp>

#include <string>

namespace popnn {
namespace {

using popops::detail::shapeText;

void fail(const char *function, const std::string &what) {
  throw poplar::poplar_error(std::string("popnn::") + function + ": " + what);
}

// Outputs [batch, classes] of float, labels [batch] of int or unsigned int; returns
// the vertices' template arguments "float,<label type>".
std::string checkOutputsAndLabels(const char *function, const poplar::Tensor &outputs,
                                  const poplar::Tensor &expected) {
  if (outputs.rank() != 2 || outputs.elementType() != poplar::FLOAT)
    fail(function, "modelOutputs is " + outputs.elementType().toString() +
                       shapeText(outputs.shape()) +
                       "; give float outputs of shape {batch, classes}");
  const poplar::Type label = expected.elementType();
  if (label != poplar::UNSIGNED_INT && label != poplar::INT)
    fail(function, "expected is " + label.toString() + "; give int or unsigned int labels");
  if (expected.shape() != std::vector<std::size_t>{outputs.dim(0)})
    fail(function, "expected has shape " + shapeText(expected.shape()) + " for " +
                       std::to_string(outputs.dim(0)) +
                       " rows of modelOutputs; give one label "
                       "per row");
  return "float," + label.toString();
}

poplar::VertexRef rowsVertex(poplar::Graph &graph, poplar::ComputeSet &cs, const std::string &name,
                             const poplar::Tensor &outputs, const poplar::Tensor &expected) {
  poplar::VertexRef v = graph.addVertex(cs, name);
  graph.connect(v["outputs"], outputs);
  graph.connect(v["expected"], expected);
  return v;
}

} // namespace

poplar::program::Program calcLoss(poplar::Graph &graph, const poplar::Tensor &modelOutputs,
                                  const poplar::Tensor &expected, const poplar::Tensor &loss,
                                  const poplar::Tensor &deltas, LossType lossType,
                                  const poplar::DebugContext &debugContext) {
  const std::string types = checkOutputsAndLabels("calcLoss", modelOutputs, expected);
  if (loss.shape() != std::vector<std::size_t>{modelOutputs.dim(0)} ||
      loss.elementType() != poplar::FLOAT)
    fail("calcLoss", "loss is " + loss.elementType().toString() + shapeText(loss.shape()) +
                         "; give a float tensor of shape {" + std::to_string(modelOutputs.dim(0)) +
                         "}");
  if (deltas.shape() != modelOutputs.shape() || deltas.elementType() != poplar::FLOAT)
    fail("calcLoss", "deltas is " + deltas.elementType().toString() + shapeText(deltas.shape()) +
                         "; give a float tensor of modelOutputs' shape " +
                         shapeText(modelOutputs.shape()));
  poplar::ComputeSet cs = graph.addComputeSet({debugContext, "popnn::calcLoss"});
  const char *kind = lossType == CROSS_ENTROPY_LOSS ? "CrossEntropy" : "SumSquared";
  poplar::VertexRef v =
      rowsVertex(graph, cs, "popnn::PopsnnLoss<" + types + ",popnn::op::" + kind + ">",
                 modelOutputs, expected);
  graph.connect(v["loss"], loss);
  graph.connect(v["deltas"], deltas);
  graph.setTileMapping(v, popops::detail::firstTile(graph, loss));
  return poplar::program::Execute(cs);
}

poplar::program::Program calcAccuracy(poplar::Graph &graph, const poplar::Tensor &modelOutputs,
                                      const poplar::Tensor &expected,
                                      const poplar::Tensor &numCorrect,
                                      const poplar::DebugContext &debugContext) {
  const std::string types = checkOutputsAndLabels("calcAccuracy", modelOutputs, expected);
  if (numCorrect.numElements() != 1 || numCorrect.elementType() != poplar::UNSIGNED_INT)
    fail("calcAccuracy", "numCorrect is " + numCorrect.elementType().toString() +
                             shapeText(numCorrect.shape()) +
                             "; give a one-element unsigned int tensor");
  poplar::ComputeSet cs = graph.addComputeSet({debugContext, "popnn::calcAccuracy"});
  poplar::VertexRef v =
      rowsVertex(graph, cs, "popnn::PopsnnAccuracy<" + types + ">", modelOutputs, expected);
  graph.connect(v["numCorrect"], numCorrect.flatten()[0]);
  graph.setTileMapping(v, popops::detail::firstTile(graph, numCorrect));
  return poplar::program::Execute(cs);
}

poplar::program::Program calcLoss(poplar::Graph &graph, const poplar::Tensor &modelOutputs,
                                  const poplar::Tensor &expected, const poplar::Tensor &loss,
                                  const poplar::Tensor &deltas, const poplar::Tensor &numCorrect,
                                  LossType lossType, const poplar::DebugContext &debugContext) {
  return poplar::program::Sequence(
      {calcLoss(graph, modelOutputs, expected, loss, deltas, lossType, debugContext),
       calcAccuracy(graph, modelOutputs, expected, numCorrect, debugContext)});
}

} // namespace popnn
