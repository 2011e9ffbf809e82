// Item 1: a vertex field connected to a tensor spread over two tiles; the runtime
// inserts the exchange as Poplar's compiler does (in before the compute set, back
// after it), and the profile counts the exchanged bytes.
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
class AddOne : public Vertex {
public:
  InOut<Vector<float>> x;
  bool compute() {
    for (auto &v : x)
      v += 1.0f;
    return true;
  }
};
)";

int main(int, char **argv) {
  const std::string self = argv[0];
  const std::string path = self.substr(0, self.rfind('/') + 1) + "remote_codelet.cpp";
  std::ofstream(path) << kCodelet;
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());
  graph.addCodelets(path);
  Tensor x = graph.addVariable(FLOAT, {6}, "x");
  graph.setTileMapping(x.slice(0, 3), 0);
  graph.setTileMapping(x.slice(3, 6), 3);
  graph.setInitialValue(x, ArrayRef<float>({0, 1, 2, 3, 4, 5}));
  ComputeSet cs = graph.addComputeSet("addOne");
  VertexRef v = graph.addVertex(cs, "AddOne", {{"x", x}});
  graph.setTileMapping(v, 0);
  Engine engine(graph, Sequence({Execute(cs), PrintTensor("x", x)}));
  engine.load(device);
  engine.run(0);
  std::cout << "exchanged bytes: " << engine.getProfileEstimate().exchangeBytesWithinIPU << "\n";
  return 0;
}
