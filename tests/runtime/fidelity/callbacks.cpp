// Item 4: stream callbacks, both connectStreamToCallback forms.
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/StreamCallback.hpp>

#include <iostream>
#include <memory>
#include <vector>

using namespace poplar;
using namespace poplar::program;

// Ready on odd calls (prefetch fills), not ready on even ones (fetch fills).
class Counter : public StreamCallback {
public:
  Result prefetch(void *p) override {
    std::cout << "prefetch " << n << "\n";
    if (n % 2 == 0)
      return Result::NotAvailable;
    fill(p);
    return Result::Success;
  }
  void fetch(void *p) override {
    std::cout << "fetch " << n << "\n";
    fill(p);
  }
  void complete() override { std::cout << "complete\n"; }

private:
  void fill(void *p) {
    int *v = static_cast<int *>(p);
    for (int i = 0; i < 3; ++i)
      v[i] = 100 * n + i;
    ++n;
  }
  int n = 0;
};

class Printer : public LegacyStreamCallback {
public:
  void fetch(void *p) override {
    const int *v = static_cast<const int *>(p);
    std::cout << "to host " << v[0] << " " << v[1] << " " << v[2] << "\n";
  }
};

int main() {
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());
  Tensor t = graph.addVariable(INT, {3}, "t");
  graph.setTileMapping(t, 1);
  DataStream in = graph.addHostToDeviceFIFO("in", INT, 3);
  DataStream out = graph.addDeviceToHostFIFO("out", INT, 3);
  DataStream out2 = graph.addDeviceToHostFIFO("out2", INT, 3);
  Sequence prog({Copy(in, t), PrintTensor("t", t), Copy(t, out), Copy(t, out2)});
  Engine engine(graph, prog);
  engine.load(device);
  engine.connectStreamToCallback("in", std::unique_ptr<StreamCallback>(new Counter()));
  engine.connectStreamToCallback("out", 0, std::unique_ptr<StreamCallback>(new Printer()));
  engine.connectStreamToCallback(
      "out2", [](void *p) { std::cout << "function form " << static_cast<int *>(p)[2] << "\n"; });
  engine.run(0);
  engine.run(0);
  return 0;
}
