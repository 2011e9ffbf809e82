// poplin's matrix products, called as the Poplar SDK documents them: matMul
// (A's type and a given output type), matMulWithOutput, matMulAcc, the
// create* functions that map operands as the plan reads them, a product of
// views, half operands, the plan report, and errors for shapes and types.
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>
#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>
#include <popops/codelets.hpp>
#include <poputil/TileMapping.hpp>

#include "library_calls.hpp"

#include <iostream>
#include <vector>

using namespace poplar;
using namespace poplar::program;

// Values i * step + offset, small integers so every product is exact in float and half.
static std::vector<float> ramp(std::size_t n, int step, int offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = float(int(i % 7) * step + offset);
  return v;
}

int main() {
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());
  popops::addCodelets(graph);
  poplin::addCodelets(graph);
  Sequence prog;

  const std::vector<float> aValues = ramp(5 * 3, 1, -2), bValues = ramp(3 * 7, 2, -5);
  Tensor A = graph.addConstant<float>(FLOAT, {5, 3}, aValues.data(), "A");
  Tensor B = graph.addConstant<float>(FLOAT, {3, 7}, bValues.data(), "B");
  poputil::mapTensorLinearly(graph, A);
  graph.setTileMapping(B, 3);
  prog.add(PrintTensor("AB", poplin::matMul(graph, A, B, prog, "AB")));
  prog.add(PrintTensor("AAt", poplin::matMul(graph, A, A.transpose(), prog)));

  // Operands made where the plan wants them, filled from the constants.
  Tensor lhs = poplin::createMatMulInputLHS(graph, FLOAT, {5, 3}, {3, 7}, "lhs");
  Tensor rhs = poplin::createMatMulInputRHS(graph, FLOAT, {5, 3}, {3, 7}, "rhs");
  Tensor out = poplin::createMatMulOutput(graph, FLOAT, {5, 3}, {3, 7}, "out");
  std::cout << "mapped: " << (graph.getTileMapping(lhs).size() > 0) << " "
            << (graph.getTileMapping(rhs).size() > 0) << "\n";
  prog.add(Copy(A, lhs));
  prog.add(Copy(B, rhs));
  poplin::matMulWithOutput(graph, lhs, rhs, out, prog, "with-output");
  prog.add(PrintTensor("out", out));
  poplin::matMulAcc(graph, out, -0.5f, lhs, rhs, prog, "acc");
  prog.add(PrintTensor("acc", out));

  // Uneven blocks: 37 x 53 . 53 x 29 over the 4 tiles.
  const std::vector<float> cValues = ramp(37 * 53, 1, -3), dValues = ramp(53 * 29, 1, -2);
  Tensor Cm = graph.addConstant<float>(FLOAT, {37, 53}, cValues.data(), "C");
  Tensor Dm = graph.addConstant<float>(FLOAT, {53, 29}, dValues.data(), "D");
  poputil::mapTensorLinearly(graph, Cm);
  poputil::mapTensorLinearly(graph, Dm);
  prog.add(PrintTensor("CD", poplin::matMul(graph, Cm, Dm, prog, "CD")));

  Tensor Ah = graph.addConstant<float>(HALF, {5, 3}, aValues.data(), "Ah");
  Tensor Bh = graph.addConstant<float>(HALF, {3, 7}, bValues.data(), "Bh");
  poputil::mapTensorLinearly(graph, Ah);
  poputil::mapTensorLinearly(graph, Bh);
  prog.add(PrintTensor("half-float", poplin::matMul(graph, Ah, Bh, prog, FLOAT, "hf")));
  Tensor hh = poplin::matMul(graph, Ah, Bh, prog, "hh");
  std::cout << "half-half type: " << hh.elementType().toString() << "\n";

  poplin::matMulReportPlan(std::cout, graph, FLOAT, FLOAT, {900, 600}, {600, 300});

  tryCall(
      "inner",
      [](Graph &g, Sequence &p) {
        poplin::matMul(g, mapped(g, FLOAT, {2, 3}), mapped(g, FLOAT, {4, 2}), p);
      },
      graph, prog);
  tryCall(
      "rank",
      [](Graph &g, Sequence &p) {
        poplin::matMul(g, mapped(g, FLOAT, {2, 3, 1}), mapped(g, FLOAT, {3, 2}), p);
      },
      graph, prog);
  tryCall(
      "type",
      [](Graph &g, Sequence &p) {
        poplin::matMul(g, mapped(g, INT, {2, 3}), mapped(g, INT, {3, 2}), p);
      },
      graph, prog);
  tryCall(
      "mixed",
      [](Graph &g, Sequence &p) {
        poplin::matMul(g, mapped(g, FLOAT, {2, 3}), mapped(g, HALF, {3, 2}), p);
      },
      graph, prog);
  tryCall(
      "output",
      [](Graph &g, Sequence &p) {
        Tensor out = mapped(g, FLOAT, {3, 3});
        poplin::matMulWithOutput(g, mapped(g, FLOAT, {2, 3}), mapped(g, FLOAT, {3, 2}), out, p);
      },
      graph, prog);

  Engine engine(graph, prog);
  engine.load(device);
  engine.run(0);
  return 0;
}
