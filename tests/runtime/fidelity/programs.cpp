// Item 6: control programs and the compile/run API (Switch, Call/Function,
// Block, If, RepeatWhileTrue/False, compileGraph -> Executable -> Engine,
// Engine::run(prog, name)), all observed through PrintTensor.
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>

#include <iostream>
#include <sstream>
#include <utility>
#include <vector>

using namespace poplar;
using namespace poplar::program;

int main() {
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());

  Tensor sel = graph.addVariable(INT, {}, "sel");
  Tensor out = graph.addVariable(INT, {}, "out");
  Tensor flag = graph.addVariable(BOOL, {}, "flag");
  std::vector<Tensor> k;
  for (int v = 0; v < 5; ++v)
    k.push_back(graph.addConstant<int>(INT, {}, v * 10));
  Tensor yes = graph.addConstant<bool>(BOOL, {}, true);
  Tensor no = graph.addConstant<bool>(BOOL, {}, false);
  for (Tensor t : {sel, out, flag, yes, no})
    graph.setTileMapping(t, 0);
  for (Tensor t : k)
    graph.setTileMapping(t, 2);
  graph.createHostWrite("sel", sel);

  // Switch: cases from the constructor and from add(); others run the default.
  Switch sw(sel, {{1, Copy(k[1], out)}, {2, Copy(k[2], out)}}, Copy(k[4], out));
  sw.add(3, Copy(k[3], out));
  Sequence switchProg({Copy(k[0], out), sw, PrintTensor("switch", out)});

  // A Function called twice; Block wraps a program.
  Function addTen = graph.addFunction(Sequence({Copy(k[1], out), PrintTensor("called", out)}));
  Sequence callProg(
      {Call(addTen), Block(Copy(k[2], out)), PrintTensor("block", out), Call(addTen)});

  // If with and without an else; RepeatWhileFalse runs cond first, then stops
  // at once because the cond sets the predicate true.
  Sequence ifProg({Copy(yes, flag), If(flag, PrintTensor("then", out), PrintTensor("else", out)),
                   Copy(no, flag), If(flag, PrintTensor("then-only", out)),
                   RepeatWhileFalse(Copy(yes, flag), flag, PrintTensor("never", out)),
                   RepeatWhileTrue(Sequence(), no, PrintTensor("never", out)),
                   PrintTensor("loops-done", out)});

  Executable exe = compileGraph(graph, {switchProg, callProg, ifProg});
  Engine engine(std::move(exe));
  engine.load(device);
  for (int s : {0, 1, 2, 3, 9}) {
    engine.writeTensor("sel", &s, &s + 1);
    engine.run(0, "switch");
  }
  engine.run(1, "call");
  engine.run(2);

  // A serialized executable runs as the one it was written from (serialize.cpp has more).
  std::stringstream saved;
  compileGraph(graph, {switchProg}).serialize(saved);
  Engine restored(Executable::deserialize(saved));
  restored.load(device);
  int s = 2;
  restored.writeTensor("sel", &s, &s + 1);
  restored.run(0);
  try {
    Switch bad(sel, {{1, Sequence()}, {1, Sequence()}});
  } catch (const poplar_error &e) {
    std::cout << "duplicate: " << e.what() << "\n";
  }
  return 0;
}
