// Item 8: the utility libraries, called as the Poplar SDK documents them:
// poputil's linear tile mapping and popops' addCodelets, fill, zero, cast,
// add, sub, mul, map and reduce.
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>
#include <popops/Cast.hpp>
#include <popops/ElementWise.hpp>
#include <popops/Fill.hpp>
#include <popops/Reduce.hpp>
#include <popops/Zero.hpp>
#include <popops/codelets.hpp>
#include <poputil/TileMapping.hpp>

#include <iostream>
#include <vector>

using namespace poplar;
using namespace poplar::program;

static void printMapping(const char *title, const Graph::TileToTensorMapping &m) {
  std::cout << title << ":";
  for (const auto &tile : m) {
    std::cout << " ";
    if (tile.empty())
      std::cout << "-";
    for (const auto &iv : tile)
      std::cout << iv.begin() << "-" << iv.end();
  }
  std::cout << "\n";
}

int main() {
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());
  popops::addCodelets(graph);

  printMapping("grain2", poputil::calcLinearTileMapping(graph, {10}, 0, 2));
  printMapping("min6", poputil::calcLinearTileMapping(graph, {10}, 6, 1));

  Sequence prog;
  std::vector<int> aValues = {1, 2, 3, 4, 5, 6}, bValues = {10, -20, 30, -40, 50, -60};
  Tensor a = graph.addConstant<int>(INT, {2, 3}, aValues.data(), "a");
  poputil::mapTensorLinearly(graph, a);
  Tensor b = graph.addConstant<int>(INT, {2, 3}, bValues.data(), "b");
  graph.setTileMapping(b, 3); // not where a is: add must bring b to a's tiles
  printMapping("a", graph.getTileMapping(a));
  prog.add(PrintTensor("add", popops::add(graph, a, b, prog)));
  prog.add(PrintTensor("sub", popops::sub(graph, a, b, prog)));
  prog.add(PrintTensor("mul", popops::mul(graph, a, b.transpose().transpose(), prog)));
  prog.add(PrintTensor("max", popops::map(graph, popops::expr::BinaryOpType::MAXIMUM, a, b, prog)));
  prog.add(PrintTensor("min", popops::map(graph, popops::expr::BinaryOpType::MINIMUM, a, b, prog)));
  {
    using namespace popops::expr;
    prog.add(PrintTensor("expr1", popops::map(graph, _1 * _2 + Const(3), {a, b}, prog)));
    prog.add(PrintTensor("expr2", popops::map(graph, Max(_2, Const(0)) - _1, {a, b}, prog)));
    prog.add(PrintTensor("expr3", popops::map(graph, _2, {a, b}, prog)));
  }

  std::vector<float> xValues(24);
  for (unsigned i = 0; i < xValues.size(); ++i)
    xValues[i] = i % 5 == 0 ? -float(i) : float(i);
  Tensor x = graph.addConstant<float>(FLOAT, {2, 3, 4}, xValues.data(), "x");
  poputil::mapTensorLinearly(graph, x, 0, 4);
  prog.add(PrintTensor("sum02", popops::reduce(graph, x, {0, 2}, popops::Operation::ADD, prog)));
  prog.add(PrintTensor("max1", popops::reduce(graph, x, {1}, popops::Operation::MAX, prog)));
  prog.add(
      PrintTensor("min-all", popops::reduce(graph, x, {2, 0, 1}, popops::Operation::MIN, prog)));
  prog.add(PrintTensor("mul0", popops::reduce(graph, a, {0}, popops::Operation::MUL, prog)));

  Tensor f = graph.addVariable(FLOAT, {5}, "f");
  poputil::mapTensorLinearly(graph, f);
  popops::fill(graph, f, prog, 3.5f);
  prog.add(PrintTensor("fill", f));
  Tensor z = graph.addVariable(INT, {2, 2}, "z");
  poputil::mapTensorLinearly(graph, z);
  popops::fill(graph, z, prog, 7);
  popops::zero(graph, z.slice(1, 2, 0), prog);
  prog.add(PrintTensor("zero", z));

  Tensor asFloat = popops::cast(graph, a, FLOAT, prog);
  prog.add(PrintTensor("cast-float", asFloat));
  Tensor flags = popops::cast(graph, x.slice(0, 1, 0).slice(0, 1, 1), BOOL, prog);
  prog.add(PrintTensor("cast-bool-int", popops::cast(graph, flags, INT, prog)));
  prog.add(PrintTensor("cast-unsigned", popops::cast(graph, b.slice(0, 1, 0), UNSIGNED_INT, prog)));

  try {
    popops::add(graph, a, x, prog);
  } catch (const poplar_error &e) {
    std::cout << "error: " << e.what() << "\n";
  }
  try {
    popops::map(graph, popops::expr::_1 + popops::expr::_3, {a, b}, prog);
  } catch (const poplar_error &e) {
    std::cout << "error: " << e.what() << "\n";
  }
  try {
    popops::reduce(graph, x, {3}, popops::Operation::ADD, prog);
  } catch (const poplar_error &e) {
    std::cout << "error: " << e.what() << "\n";
  }

  Engine engine(graph, prog);
  engine.load(device);
  engine.run(0);
  return 0;
}
