// Item 6: Executable::serialize / Executable::deserialize. A graph with a codelet,
// vertex state, streams, a host read handle and programs (a Function called twice,
// a Repeat) is compiled once; one Engine runs the Executable itself, another the one
// read back from its serialized bytes: both print the same values and profile. The
// bytes are also written to serialize_exe.bin for the fuzzing driver (load_executable).
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace poplar;
using namespace poplar::program;

static const char *kCodelet = R"(
#include <poplar/Vertex.hpp>
using namespace poplar;
class ScaleAdd : public Vertex {
public:
  Input<Vector<float>> in;
  InOut<Vector<float>> acc;
  Output<int> calls;
  float factor;
  bool compute() {
    for (unsigned i = 0; i < acc.size(); ++i)
      acc[i] += factor * in[i];
    *calls = static_cast<int>(acc.size());
    return true;
  }
};
)";

static std::vector<Program> buildPrograms(Graph &graph) {
  Tensor x = graph.addVariable(FLOAT, {6}, "x");
  Tensor acc = graph.addVariable(FLOAT, {6}, "acc");
  Tensor calls = graph.addVariable(INT, {2}, "calls");
  Tensor bias = graph.addConstant<float>(FLOAT, {6}, 0.5f, "bias");
  for (unsigned tile = 0; tile < 2; ++tile) {
    for (Tensor t : {x, acc, bias})
      graph.setTileMapping(t.slice(3 * tile, 3 * tile + 3), tile);
    graph.setTileMapping(calls[tile], tile);
  }
  ComputeSet cs = graph.addComputeSet("scaleAdd");
  for (unsigned tile = 0; tile < 2; ++tile) {
    VertexRef v = graph.addVertex(cs, "ScaleAdd");
    graph.connect(v["in"], x.slice(3 * tile, 3 * tile + 3));
    graph.connect(v["acc"], acc.slice(3 * tile, 3 * tile + 3));
    graph.connect(v["calls"], calls[tile]);
    graph.setInitialValue(v["factor"], tile ? 10.0f : 2.0f);
    graph.setTileMapping(v, tile);
    graph.setPerfEstimate(v, 100 + tile);
  }
  DataStream in = graph.addHostToDeviceFIFO("in", FLOAT, 6);
  DataStream out = graph.addDeviceToHostFIFO("out", FLOAT, 6);
  graph.createHostRead("calls", calls);
  Function step = graph.addFunction(Sequence({Execute(cs), PrintTensor("acc", acc)}));
  Sequence first({Copy(in, x), Copy(bias, acc), Call(step), Call(step), Copy(acc, out)});
  Sequence second({Repeat(2, Call(step)), PrintTensor(calls)});
  return {first, second};
}

static void run(Engine &engine, const Device &device, const char *label) {
  std::vector<float> in = {1, 2, 3, 4, 5, 6}, out(6);
  engine.connectStream("in", in.data());
  engine.connectStream("out", out.data());
  engine.load(device);
  engine.run(0);
  engine.run(1, "again");
  std::vector<int> calls(2);
  engine.readTensor("calls", calls.data(), calls.data() + 2);
  std::cout << label << " out:";
  for (float v : out)
    std::cout << " " << v;
  std::cout << " calls: " << calls[0] << " " << calls[1]
            << " cycles: " << engine.getProfileEstimate().totalCycles << "\n";
}

int main(int, char **argv) {
  const std::string self = argv[0];
  const std::string dir = self.substr(0, self.rfind('/') + 1);
  std::ofstream(dir + "serialize_codelet.cpp") << kCodelet;
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());
  graph.addCodelets(dir + "serialize_codelet.cpp");
  std::vector<Program> progs = buildPrograms(graph);

  std::stringstream saved;
  compileGraph(graph, progs).serialize(saved);
  std::ofstream(dir + "serialize_exe.bin", std::ios::binary) << saved.str();
  Engine original(compileGraph(graph, progs));
  run(original, device, "original");
  Engine restored(Executable::deserialize(saved));
  run(restored, device, "restored");

  // Streams that are not a whole executable: each one clear error.
  const std::string bytes = saved.str();
  std::string corrupt = bytes;
  corrupt[bytes.size() / 2] ^= 0x20;
  for (const std::string &bad : {std::string("POPSNNEX"), std::string("not an executable at all"),
                                 bytes.substr(0, bytes.size() - 10), corrupt}) {
    std::istringstream is(bad);
    try {
      Executable::deserialize(is);
      std::cout << "accepted\n";
    } catch (const poplar_error &e) {
      std::cout << "error: " << e.what() << "\n";
    }
  }
  return 0;
}
