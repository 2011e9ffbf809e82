// A Poplar tutorial-style program: build a graph over four tiles, run it, read
// the results back. It uses only Poplar's public API, so it builds against
// Graphcore's SDK as well as against popsnn's CPU runtime (popsnn::poplar).
//
// Expected output (exact):
//   sums: 6 22 38 54
//   axpy: 2 5 8 11 14 17 20 23
//   scaled: 0 3 6 9 12 15
//   streamed: 60 66 72 78
#include <iostream>
#include <vector>

#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>

using namespace poplar;
using namespace poplar::program;

static void print(const char *label, const std::vector<float> &v) {
  std::cout << label << ":";
  for (float x : v)
    std::cout << " " << x;
  std::cout << "\n";
}

int main(int argc, char **argv) {
  // A small IPU model: four tiles of a Mk2 IPU.
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());
  graph.addCodelets(argc > 1 ? argv[1] : CODELET_FILE);

  // x: 4 rows of 4 values, one row per tile.
  Tensor x = graph.addVariable(FLOAT, {4, 4}, "x");
  Tensor sums = graph.addVariable(FLOAT, {4}, "sums");
  ComputeSet sumCs = graph.addComputeSet("sum");
  for (unsigned tile = 0; tile < 4; ++tile) {
    graph.setTileMapping(x[tile], tile);
    graph.setTileMapping(sums[tile], tile);
    VertexRef v = graph.addVertex(sumCs, "SumVertex", {{"in", x[tile]}, {"out", sums[tile]}});
    graph.setTileMapping(v, tile);
    graph.setPerfEstimate(v, 20);
  }

  // y += 3 * xs on tile 0, with xs a constant.
  Tensor y = graph.addVariable(FLOAT, {8}, "y");
  Tensor xs = graph.addConstant<float>(FLOAT, {8}, {0, 1, 2, 3, 4, 5, 6, 7});
  graph.setTileMapping(y, 0);
  graph.setTileMapping(xs, 0);
  graph.setInitialValue(y, 2.0f);
  ComputeSet axpyCs = graph.addComputeSet("axpy");
  VertexRef axpy = graph.addVertex(axpyCs, "Axpy", {{"x", xs}, {"y", y}});
  graph.setInitialValue(axpy["a"], 3.0f);
  graph.setTileMapping(axpy, 0);

  // A list of two vectors on tile 1, scaled by 3.
  Tensor list = graph.addVariable(FLOAT, {6}, "list");
  graph.setTileMapping(list, 1);
  ComputeSet scaleCs = graph.addComputeSet("scale");
  VertexRef scale = graph.addVertex(scaleCs, "Scale<float>");
  graph.connect(scale["data"], {list.slice(0, 2), list.slice(2, 6)});
  graph.setInitialValue(scale["factor"], 3.0f);
  graph.setTileMapping(scale, 1);

  // Streams: host -> tile 2, then an exchange to tile 3, then back to the host.
  Tensor inbox = graph.addVariable(FLOAT, {4}, "inbox");
  Tensor outbox = graph.addVariable(FLOAT, {4}, "outbox");
  graph.setTileMapping(inbox, 2);
  graph.setTileMapping(outbox, 3);
  DataStream toDevice = graph.addHostToDeviceFIFO("to-device", FLOAT, 4);
  DataStream toHost = graph.addDeviceToHostFIFO("to-host", FLOAT, 4);

  graph.createHostWrite("x-write", x);
  graph.createHostWrite("list-write", list);
  graph.createHostRead("sums-read", sums);
  graph.createHostRead("y-read", y);
  graph.createHostRead("list-read", list);

  Sequence prog({Execute(sumCs), Execute(axpyCs), Execute(scaleCs), Copy(toDevice, inbox),
                 Copy(inbox, outbox), Copy(outbox, toHost)});

  Engine engine(graph, prog);
  engine.load(device);

  std::vector<float> hostX(16), hostList(6), hostIn{10, 11, 12, 13}, hostOut(4);
  for (unsigned i = 0; i < 16; ++i)
    hostX[i] = float(i);
  for (unsigned i = 0; i < 6; ++i)
    hostList[i] = float(i);
  for (float &v : hostIn)
    v *= 6;
  engine.writeTensor("x-write", hostX.data(), hostX.data() + hostX.size());
  engine.writeTensor("list-write", hostList.data(), hostList.data() + hostList.size());
  engine.connectStream("to-device", hostIn.data());
  engine.connectStream("to-host", hostOut.data());
  engine.run(0);

  std::vector<float> hostSums(4), hostY(8);
  engine.readTensor("sums-read", hostSums.data(), hostSums.data() + hostSums.size());
  engine.readTensor("y-read", hostY.data(), hostY.data() + hostY.size());
  engine.readTensor("list-read", hostList.data(), hostList.data() + hostList.size());
  print("sums", hostSums);
  print("axpy", hostY);
  print("scaled", hostList);
  print("streamed", hostOut);
  if (argc > 2)
    engine.printProfileSummary(std::cout);
  return 0;
}
