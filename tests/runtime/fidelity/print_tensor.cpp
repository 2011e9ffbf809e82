// Item 2: program::PrintTensor writes "title: [v0 v1 ...]" as Poplar does,
// floats with 7 decimals, integers as integers, brackets nested by rank.
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>

#include <vector>

using namespace poplar;
using namespace poplar::program;

int main() {
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());

  Tensor v1 = graph.addVariable(FLOAT, {4}, "v1");
  Tensor c1 = graph.addConstant<float>(FLOAT, {4}, {1.0f, 1.5f, 2.0f, 2.5f});
  std::vector<int> ints(10);
  for (int i = 0; i < 10; ++i)
    ints[i] = i - 3;
  Tensor v4 = graph.addConstant<int>(INT, {10}, ints);
  std::vector<unsigned> m(6);
  for (unsigned i = 0; i < 6; ++i)
    m[i] = 10 + i;
  Tensor mat = graph.addConstant<unsigned>(UNSIGNED_INT, {2, 3}, m);
  Tensor cube = graph.addConstant<float>(FLOAT, {2, 2, 1}, {0.25f, -1.0f, 3.0f, 1e6f});
  Tensor scalar = graph.addVariable(INT, {}, "counter");
  Tensor cs = graph.addConstant<int>(INT, {}, 7);
  for (Tensor t : {v1, c1, v4, mat, cube, scalar, cs})
    graph.setTileMapping(t, 1);

  Sequence prog;
  prog.add(PrintTensor("v1-debug", v1)); // zeros: never written
  prog.add(Copy(c1, v1));
  prog.add(PrintTensor("v1-debug", v1));
  prog.add(PrintTensor("v4-0", v4));
  prog.add(PrintTensor("m", mat));
  prog.add(PrintTensor("cube", cube));
  prog.add(PrintTensor("slice", mat.slice(1, 3, 1)));
  prog.add(Copy(cs, scalar));
  prog.add(PrintTensor(scalar)); // untitled: the tensor's name
  Engine engine(graph, prog);
  engine.load(device);
  engine.run(0);
  return 0;
}
