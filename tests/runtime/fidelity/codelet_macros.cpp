// Item 5: codelets compile as popc compiles them. The codelet checks the macros
// popc defines (__POPC__ set; __IPU__ unset on CPU and IPUModel targets) and uses
// a SupervisorVertex beside a Vertex; the host prints what they computed.
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>

#include <fstream>
#include <iostream>
#include <string>

using namespace poplar;
using namespace poplar::program;

static const char *kCodelet = R"(
#include <poplar/Vertex.hpp>
using namespace poplar;
#ifndef __POPC__
#error "popc defines __POPC__ for every codelet"
#endif
#ifdef __IPU__
#error "__IPU__ is for IPU code only"
#endif
class Twice : public Vertex {
public:
  Input<Vector<float>> in;
  Output<Vector<float>> out;
  bool compute() {
    for (unsigned i = 0; i < in.size(); ++i)
      out[i] = 2 * in[i];
    return true;
  }
};
class SumAll : public SupervisorVertex {
public:
  Input<Vector<float>> in;
  Output<float> total;
  bool compute() {
    float s = 0;
    for (float v : in)
      s += v;
    *total = s;
    return true;
  }
};
)";

int main(int, char **argv) {
  // The codelet source goes beside the program (its build folder).
  const std::string self = argv[0];
  const std::string path = self.substr(0, self.rfind('/') + 1) + "macros_codelet.cpp";
  std::ofstream(path) << kCodelet;
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 2;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());
  graph.addCodelets(path);
  Tensor in = graph.addConstant<float>(FLOAT, {4}, {1.0f, 2.0f, 3.0f, 4.0f}, "in");
  Tensor twice = graph.addVariable(FLOAT, {4}, "twice");
  Tensor total = graph.addVariable(FLOAT, {}, "total");
  for (Tensor t : {in, twice, total})
    graph.setTileMapping(t, 1);
  ComputeSet cs = graph.addComputeSet("cs");
  VertexRef v = graph.addVertex(cs, "Twice", {{"in", in}, {"out", twice}});
  VertexRef s = graph.addVertex(cs, "SumAll", {{"in", in}, {"total", total}});
  graph.setTileMapping(v, 1);
  graph.setTileMapping(s, 1);
  Sequence prog({Execute(cs), PrintTensor("twice", twice), PrintTensor("total", total)});
  Engine engine(graph, prog);
  engine.load(device);
  engine.run(0);
  return 0;
}
