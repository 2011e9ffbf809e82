// popnn's non-linearities and losses and popops' scaled adds, called as the
// Poplar SDK documents them (the calls of a softmax regression trained by SGD):
// sigmoid, relu, tanh, softmax, calcLoss (cross entropy with the accuracy
// count, sum of squares), scaledAddTo, scaledSubtractFrom, and their errors.
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>
#include <popnn/Loss.hpp>
#include <popnn/NonLinearity.hpp>
#include <popnn/codelets.hpp>
#include <popops/ScaledAdd.hpp>
#include <popops/codelets.hpp>
#include <poputil/TileMapping.hpp>

#include "library_calls.hpp"

#include <iostream>
#include <vector>

using namespace poplar;
using namespace poplar::program;

int main() {
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());
  popops::addCodelets(graph);
  popnn::addCodelets(graph);
  Sequence prog;

  // Four rows of five outputs; the last row's label (9) names no class.
  const std::vector<float> xValues = {0.5f, -1.0f, 2.0f,  0.0f, 1.5f, -0.25f, 3.0f,
                                      1.0f, -2.0f, 0.75f, 1.0f, 1.0f, -0.5f,  2.5f,
                                      0.0f, -3.0f, 0.5f,  0.5f, 4.0f, -1.0f};
  const std::vector<unsigned> labelValues = {2, 0, 3, 9};
  Tensor x = graph.addConstant<float>(FLOAT, {4, 5}, xValues.data(), "x");
  Tensor labels = graph.addConstant<unsigned>(UNSIGNED_INT, {4}, labelValues.data(), "labels");
  poputil::mapTensorLinearly(graph, x);
  graph.setTileMapping(labels, 2);

  prog.add(PrintTensor("sigmoid", popnn::sigmoid(graph, x, prog)));
  prog.add(PrintTensor("relu", popnn::relu(graph, x, prog)));
  prog.add(PrintTensor("tanh", popnn::tanh(graph, x, prog)));
  Tensor probs = popnn::nonLinearity(graph, popnn::NonLinearityType::SOFTMAX, x, prog, "softmax");
  prog.add(PrintTensor("softmax", probs));

  Tensor loss = mapped(graph, FLOAT, {4});
  Tensor deltas = mapped(graph, FLOAT, {4, 5});
  Tensor numCorrect = mapped(graph, UNSIGNED_INT, {1});
  const unsigned five = 5;
  Tensor start = graph.addConstant<unsigned>(UNSIGNED_INT, {1}, &five, "five");
  graph.setTileMapping(start, 0);
  prog.add(Copy(start, numCorrect)); // calcLoss adds to what numCorrect holds
  prog.add(popnn::calcLoss(graph, probs, labels, loss, deltas, numCorrect,
                           popnn::CROSS_ENTROPY_LOSS, "ce"));
  prog.add(PrintTensor("ce-loss", loss));
  prog.add(PrintTensor("ce-deltas", deltas));
  prog.add(PrintTensor("correct", numCorrect));
  prog.add(popnn::calcLoss(graph, x, labels, loss, deltas, popnn::SUM_SQUARED_LOSS, "sq"));
  prog.add(PrintTensor("sq-loss", loss));
  prog.add(PrintTensor("sq-deltas", deltas));

  Tensor w = graph.clone(x, "w");
  graph.setTileMapping(w, 3); // not where x is: the add brings x to w's tile
  prog.add(Copy(x, w));
  popops::scaledAddTo(graph, w, x, 0.5f, prog, "w += 0.5 x");
  prog.add(PrintTensor("scaled-add", w));
  popops::scaledSubtractFrom(graph, w, x.transpose().transpose(), 2.0f, prog);
  prog.add(PrintTensor("scaled-sub", w));

  tryCall(
      "gelu",
      [](Graph &g, Sequence &p) {
        popnn::nonLinearity(g, popnn::NonLinearityType::GELU, mapped(g, FLOAT, {2, 2}), p);
      },
      graph, prog);
  tryCall(
      "labels",
      [](Graph &g, Sequence &p) {
        popnn::calcLoss(g, mapped(g, FLOAT, {2, 3}), mapped(g, FLOAT, {2}), mapped(g, FLOAT, {2}),
                        mapped(g, FLOAT, {2, 3}), popnn::CROSS_ENTROPY_LOSS);
        (void)p;
      },
      graph, prog);
  tryCall(
      "scaled",
      [](Graph &g, Sequence &p) {
        popops::scaledAddTo(g, mapped(g, FLOAT, {2, 3}), mapped(g, FLOAT, {3, 2}), 1.0f, p);
      },
      graph, prog);

  Engine engine(graph, prog);
  engine.load(device);
  engine.run(0);
  return 0;
}
