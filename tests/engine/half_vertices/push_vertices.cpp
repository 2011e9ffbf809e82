// Runs PushSpikes<S> and PushGrads<S> (S = float or half, argv[1]) once on one tile of
// popsnn's CPU runtime: reads the shard's id trace (int32, `traceLen` entries), the next
// layer's weights on the shard's neurons as blocks [n, n_k] per next shard (stored as S) and
// its dL/dI as blocks [T, B, n_k] (stored as S) from <dir>/trace.bin, w.bin, grad.bin;
// writes W_next.S blocks [T, B, n_k] (as S) and dL/dW_next blocks (float) to
// <dir>/current.bin and grad_weights.bin.
// usage: push_vertices <float|half> <dir> <T> <B> <n> <offset> <nextShard> <nextN> <traceLen>
#include <poplar/Device.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "files.hpp"
#include "popsnn/VertexEnums.hpp"

using namespace poplar;

namespace {

struct Sizes {
  unsigned steps, batch, n, offset, nextShard, nextN, traceLen;
};

VertexRef pushVertex(Graph &graph, ComputeSet cs, const std::string &name, const Sizes &z) {
  VertexRef v = graph.addVertex(cs, name);
  graph.setInitialValue(v["batch"], z.batch);
  graph.setInitialValue(v["numNeurons"], z.n);
  graph.setInitialValue(v["numSteps"], z.steps);
  graph.setInitialValue(v["offset"], z.offset);
  graph.setInitialValue(v["nextShardSize"], z.nextShard);
  graph.setInitialValue(v["nextLayerSize"], z.nextN);
  graph.setTileMapping(v, 0);
  return v;
}

void run(const std::string &stored, const std::string &dir, const Sizes &z) {
  const Type type = stored == "half" ? HALF : FLOAT;
  const std::size_t elem = stored == "half" ? 2 : 4;
  const std::size_t rows = std::size_t(z.steps) * z.batch, weights = std::size_t(z.n) * z.nextN;
  const std::size_t padded = (std::size_t(z.n) + 1) * popsnn::codes::pushWidth(z.nextN);
  Device device = Device::createCPUDevice();
  Graph graph(device.getTarget());
  graph.addCodelets(POPSNN_CODELETS_PATH);
  Tensor trace = graph.addVariable(INT, {z.traceLen}, "trace");
  Tensor w = graph.addVariable(type, {weights}, "w");
  Tensor grad = graph.addVariable(type, {rows * z.nextN}, "grad");
  Tensor current = graph.addVariable(type, {rows * z.nextN}, "current");
  Tensor gradW = graph.addVariable(FLOAT, {weights}, "grad_weights");
  Tensor sums = graph.addVariable(FLOAT, {padded}, "rows");
  Tensor gradSums = graph.addVariable(FLOAT, {padded}, "grad_rows");
  for (const Tensor &t : {trace, w, grad, current, gradW, sums, gradSums})
    graph.setTileMapping(t, 0);
  ComputeSet cs = graph.addComputeSet("push"), csGrad = graph.addComputeSet("push_grads");
  VertexRef v = pushVertex(graph, cs, "PushSpikes<" + stored + ">", z);
  graph.connect(v["idTrace"], trace);
  graph.connect(v["nextWeights"], w);
  graph.connect(v["nextCurrent"], current);
  graph.connect(v["nextRows"], sums);
  VertexRef g = pushVertex(graph, csGrad, "PushGrads<" + stored + ">", z);
  graph.connect(g["idTrace"], trace);
  graph.connect(g["nextGrad"], grad);
  graph.connect(g["nextGradWeights"], gradW);
  graph.connect(g["nextGradRows"], gradSums);
  const char *names[] = {"trace", "w", "grad"};
  const Tensor inputs[] = {trace, w, grad};
  const std::size_t bytes[] = {std::size_t(z.traceLen) * 4, weights * elem, rows * z.nextN * elem};
  for (unsigned k = 0; k < 3; ++k)
    graph.createHostWrite(names[k], inputs[k]);
  graph.createHostRead("current", current);
  graph.createHostRead("grad_weights", gradW);
  Engine engine(graph, program::Sequence({program::Execute(cs), program::Execute(csGrad)}));
  engine.load(device);
  for (unsigned k = 0; k < 3; ++k) {
    std::vector<char> data = readFile(dir + "/" + names[k] + ".bin", bytes[k]);
    engine.writeTensor(names[k], data.data(), data.data() + data.size());
  }
  engine.run();
  std::vector<char> out(rows * z.nextN * elem), outW(weights * 4);
  engine.readTensor("current", out.data(), out.data() + out.size());
  engine.readTensor("grad_weights", outW.data(), outW.data() + outW.size());
  writeFile(dir + "/current.bin", out);
  writeFile(dir + "/grad_weights.bin", outW);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 10 || (std::string(argv[1]) != "float" && std::string(argv[1]) != "half")) {
    std::fprintf(stderr, "usage: push_vertices <float|half> <dir> <T> <B> <n> <offset> "
                         "<nextShard> <nextN> <traceLen>\n");
    return 2;
  }
  unsigned v[7];
  for (unsigned k = 0; k < 7; ++k)
    v[k] = unsigned(std::atoi(argv[3 + k]));
  try {
    run(argv[1], argv[2], {v[0], v[1], v[2], v[3], v[4], v[5], v[6]});
  } catch (const std::exception &e) {
    std::fprintf(stderr, "push_vertices: %s\n", e.what());
    return 1;
  }
  return 0;
}
