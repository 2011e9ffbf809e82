// Runs DirectCurrent<S> and DirectWeightGrad<S> (S = float or half, argv[1]) once on one tile
// of popsnn's CPU runtime: reads x [B, nIn], W [nIn, n], b [n] (stored as S) and dL/dI
// [B, n] (float) from <dir>/x.bin, w.bin, bias.bin, grad.bin, writes I [B, n] (as S) and
// dL/dW [nIn, n] (float) to <dir>/current.bin and grad_weights.bin.
// usage: half_vertices <float|half> <dir> <B> <nIn> <n>
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

struct Sizes {
  unsigned batch, nIn, n;
};

void run(const std::string &stored, const std::string &dir, Sizes z) {
  const Type type = stored == "half" ? HALF : FLOAT;
  const std::size_t elem = stored == "half" ? 2 : 4;
  Device device = Device::createCPUDevice();
  Graph graph(device.getTarget());
  graph.addCodelets(POPSNN_CODELETS_PATH);
  Tensor x = graph.addVariable(type, {std::size_t(z.batch) * z.nIn}, "x");
  Tensor w = graph.addVariable(type, {std::size_t(z.nIn) * z.n}, "w");
  Tensor bias = graph.addVariable(type, {z.n}, "bias");
  Tensor current = graph.addVariable(type, {std::size_t(z.batch) * z.n}, "current");
  Tensor grad = graph.addVariable(FLOAT, {std::size_t(z.batch) * z.n}, "grad");
  Tensor gradW = graph.addVariable(FLOAT, {std::size_t(z.nIn) * z.n}, "grad_weights");
  Tensor nzIndex = graph.addVariable(UNSIGNED_INT, {16 * std::size_t(z.batch + z.nIn)}, "idx");
  Tensor nzValue = graph.addVariable(FLOAT, {16 * std::size_t(z.batch + z.nIn)}, "val");
  for (const Tensor &t : {x, w, bias, current, grad, gradW, nzIndex, nzValue})
    graph.setTileMapping(t, 0);
  ComputeSet cs = graph.addComputeSet("direct");
  VertexRef v = graph.addVertex(cs, "DirectCurrent<" + stored + ">",
                                {{"x", x}, {"weights", w}, {"bias", bias}, {"current", current}});
  graph.connect(v["nzIndex"], nzIndex.slice(0, z.nIn));
  graph.connect(v["nzValue"], nzValue.slice(0, z.nIn));
  graph.setInitialValue(v["batch"], z.batch);
  graph.setInitialValue(v["numInputs"], z.nIn);
  graph.setInitialValue(v["numNeurons"], z.n);
  graph.setTileMapping(v, 0);
  ComputeSet csGrad = graph.addComputeSet("direct_grad");
  VertexRef g = graph.addVertex(csGrad, "DirectWeightGrad<" + stored + ">",
                                {{"x", x}, {"currentGradSum", grad}, {"gradWeights", gradW}});
  graph.connect(g["nzIndex"], nzIndex.slice(0, 16 * z.batch));
  graph.connect(g["nzValue"], nzValue.slice(0, 16 * z.batch));
  graph.setInitialValue(g["batch"], z.batch);
  graph.setInitialValue(g["numInputs"], z.nIn);
  graph.setInitialValue(g["numNeurons"], z.n);
  graph.setInitialValue(g["xStride"], z.nIn);
  graph.setInitialValue(g["firstInput"], 0u);
  graph.setTileMapping(g, 0);
  const char *names[] = {"x", "w", "bias", "grad"};
  const Tensor inputs[] = {x, w, bias, grad};
  for (unsigned k = 0; k < 4; ++k)
    graph.createHostWrite(names[k], inputs[k]);
  graph.createHostRead("current", current);
  graph.createHostRead("grad_weights", gradW);
  Engine engine(graph, program::Sequence({program::Execute(cs), program::Execute(csGrad)}));
  engine.load(device);
  const std::size_t sizes[] = {std::size_t(z.batch) * z.nIn * elem, std::size_t(z.nIn) * z.n * elem,
                               std::size_t(z.n) * elem, std::size_t(z.batch) * z.n * 4};
  for (unsigned k = 0; k < 4; ++k) {
    std::vector<char> data = readFile(dir + "/" + names[k] + ".bin", sizes[k]);
    engine.writeTensor(names[k], data.data(), data.data() + data.size());
  }
  engine.run();
  std::vector<char> out(std::size_t(z.batch) * z.n * elem), outW(std::size_t(z.nIn) * z.n * 4);
  engine.readTensor("current", out.data(), out.data() + out.size());
  engine.readTensor("grad_weights", outW.data(), outW.data() + outW.size());
  writeFile(dir + "/current.bin", out);
  writeFile(dir + "/grad_weights.bin", outW);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 6 || (std::string(argv[1]) != "float" && std::string(argv[1]) != "half")) {
    std::fprintf(stderr, "usage: half_vertices <float|half> <dir> <B> <nIn> <n>\n");
    return 2;
  }
  try {
    run(argv[1], argv[2],
        {unsigned(std::atoi(argv[3])), unsigned(std::atoi(argv[4])), unsigned(std::atoi(argv[5]))});
  } catch (const std::exception &e) {
    std::fprintf(stderr, "half_vertices: %s\n", e.what());
    return 1;
  }
  return 0;
}
