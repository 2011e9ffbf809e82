// Item 3: IPUModel's public fields as Poplar programs set them; the honoured
// ones show in the target, the ignored ones are accepted.
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>

#include <iostream>

using namespace poplar;

static void show(const char *label, const Target &t) {
  std::cout << label << " ipus=" << t.getNumIPUs() << " tilesPerIPU=" << t.getTilesPerIPU()
            << " bytesPerTile=" << t.getBytesPerTile() << " workers=" << t.getNumWorkerContexts()
            << " clock=" << t.getTileClockFrequency() << " arch=" << t.getTargetArchString()
            << " model=" << (t.getTargetType() == TargetType::IPU_MODEL) << "\n";
}

int main() {
  show("default", IPUModel().createTarget());
  show("ipu1", IPUModel("ipu1").createTarget());

  IPUModel ipuModel;
  ipuModel.numIPUs = 2;
  ipuModel.tilesPerIPU = 8;
  ipuModel.memoryBytesPerTile = 4096;
  ipuModel.tileClockFrequency = 1e9;
  ipuModel.compileIPUCode = true;
  // Accepted and ignored (documented): sync delays and inter-IPU link limits.
  ipuModel.minIPUSyncDelay = 0;
  ipuModel.relativeSyncDelay = IPUModel::RelativeSyncDelayType::NO_DELAY;
  ipuModel.globalSyncCycles = 100;
  GlobalExchangeFlow flows[] = {GlobalExchangeFlow(0, 1)};
  ipuModel.globalExchangeConstraints.push_back(GlobalExchangeConstraint(1e9, flows));
  Device device = ipuModel.createDevice();
  show("set", device.getTarget());

  // memoryBytesPerTile is honoured: 2 KiB of floats fit a tile, 8 KiB do not.
  for (unsigned n : {512u, 2048u}) {
    Graph graph(device.getTarget());
    Tensor t = graph.addVariable(FLOAT, {n}, "big");
    graph.setTileMapping(t, 3);
    try {
      Engine engine(graph, program::Sequence());
      std::cout << "fits " << n * 4 << "\n";
    } catch (const graph_memory_allocation_error &) {
      std::cout << "too big " << n * 4 << "\n";
    }
  }
  return 0;
}
