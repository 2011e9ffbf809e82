// Runs OutputLoss<S> (S = float or half, argv[1]) once on one tile of popsnn's CPU runtime,
// one shard of C outputs: reads spikes and membranes [T, B, C] (stored as S), labels [B]
// (int32) and sample weights [B] (float) from <dir>/spikes.bin, membranes.bin, labels.bin,
// weights.bin; writes dL/dS and dL/dU (as S) and the loss (float) to <dir>/grad_spikes.bin,
// grad_membranes.bin, loss.bin. A scale > 0 connects the loss-scale edge, 0 leaves it off.
// usage: loss_vertex <float|half> <dir> <kind> <T> <B> <C> <K> <on> <off> <scale>
// (kind: the popsnn::loss tag's name, e.g. CeCount)
#include <poplar/Device.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "files.hpp"

using namespace poplar;

namespace {

struct LossArgs {
  std::string kind;
  unsigned steps, batch, outputs, classes;
  float on, off, scale;
};

void run(const std::string &stored, const std::string &dir, const LossArgs &a) {
  const Type type = stored == "half" ? HALF : FLOAT;
  const std::size_t elem = stored == "half" ? 2 : 4;
  const std::size_t record = std::size_t(a.steps) * a.batch * a.outputs;
  Device device = Device::createCPUDevice();
  Graph graph(device.getTarget());
  graph.addCodelets(POPSNN_CODELETS_PATH);
  Tensor spikes = graph.addVariable(type, {record}, "spikes");
  Tensor membranes = graph.addVariable(type, {record}, "membranes");
  Tensor labels = graph.addVariable(INT, {a.batch}, "labels");
  Tensor weights = graph.addVariable(FLOAT, {a.batch}, "weights");
  Tensor gradS = graph.addVariable(type, {record}, "grad_spikes");
  Tensor gradU = graph.addVariable(type, {record}, "grad_membranes");
  Tensor loss = graph.addVariable(FLOAT, {}, "loss");
  Tensor scratch = graph.addVariable(FLOAT, {2 * std::size_t(a.outputs)}, "scratch");
  Tensor scale = graph.addConstant<float>(FLOAT, {1}, a.scale, "scale");
  for (const Tensor &t : {spikes, membranes, labels, weights, gradS, gradU, loss, scratch, scale})
    graph.setTileMapping(t, 0);
  // A loss without a membrane term leaves dL/dU as it was: zeros, as the engine's are.
  if (type == FLOAT)
    graph.setInitialValue(gradU, 0.0f);
  else
    graph.setInitialValue(gradU, 0u);
  ComputeSet cs = graph.addComputeSet("loss");
  VertexRef v = graph.addVertex(cs, "OutputLoss<" + stored + ",popsnn::loss::" + a.kind + ">",
                                {{"spikes", spikes},
                                 {"membranes", membranes},
                                 {"labels", labels},
                                 {"sampleWeights", weights},
                                 {"gradSpikes", gradS},
                                 {"gradMembranes", gradU},
                                 {"loss", loss},
                                 {"scratch", scratch}});
  graph.setFieldSize(v["lossScale"], a.scale > 0.0f ? 1 : 0);
  if (a.scale > 0.0f)
    graph.connect(v["lossScale"][0], scale);
  const unsigned fields[] = {a.steps, a.batch, a.outputs, a.classes, a.outputs};
  const char *names[] = {"numSteps", "batch", "numOutputs", "numClasses", "shardSize"};
  for (unsigned k = 0; k < 5; ++k)
    graph.setInitialValue(v[names[k]], fields[k]);
  graph.setInitialValue(v["onTarget"], a.on);
  graph.setInitialValue(v["offTarget"], a.off);
  graph.setTileMapping(v, 0);
  const char *inputs[] = {"spikes", "membranes", "labels", "weights"};
  const Tensor tensors[] = {spikes, membranes, labels, weights};
  const std::size_t bytes[] = {record * elem, record * elem, a.batch * 4u, a.batch * 4u};
  for (unsigned k = 0; k < 4; ++k)
    graph.createHostWrite(inputs[k], tensors[k]);
  for (const char *name : {"grad_spikes", "grad_membranes"})
    graph.createHostRead(name, std::string(name) == "grad_spikes" ? gradS : gradU);
  graph.createHostRead("loss", loss);
  Engine engine(graph, program::Execute(cs));
  engine.load(device);
  for (unsigned k = 0; k < 4; ++k) {
    std::vector<char> data = readFile(dir + "/" + inputs[k] + ".bin", bytes[k]);
    engine.writeTensor(inputs[k], data.data(), data.data() + data.size());
  }
  engine.run();
  for (const char *name : {"grad_spikes", "grad_membranes", "loss"}) {
    std::vector<char> out(std::string(name) == "loss" ? 4 : record * elem);
    engine.readTensor(name, out.data(), out.data() + out.size());
    writeFile(dir + "/" + name + ".bin", out);
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 11 || (std::string(argv[1]) != "float" && std::string(argv[1]) != "half")) {
    std::fprintf(stderr, "usage: loss_vertex <float|half> <dir> <kind> <T> <B> <C> <K> <on> "
                         "<off> <scale>\n");
    return 2;
  }
  auto u = [&](int k) { return unsigned(std::atoi(argv[k])); };
  auto f = [&](int k) { return float(std::atof(argv[k])); };
  try {
    run(argv[1], argv[2], {argv[3], u(4), u(5), u(6), u(7), f(8), f(9), f(10)});
  } catch (const std::exception &e) {
    std::fprintf(stderr, "loss_vertex: %s\n", e.what());
    return 1;
  }
  return 0;
}
