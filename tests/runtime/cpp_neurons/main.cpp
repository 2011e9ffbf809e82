// cpp_neurons <model>: builds a one-layer network (4 -> 2) of that neuron model on the cpu
// device and prints "built", or prints the builder's error and exits 1.
#include <popsnn/Names.hpp>
#include <popsnn/Network.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cpp_neurons <Leaky|Synaptic|RLeaky|Lapicque|Alpha>\n");
    return 2;
  }
  popsnn::LayerSpec layer;
  layer.inputs = 4;
  layer.outputs = 2;
  bool known = false;
  for (const auto &name : popsnn::kNeuronNames)
    if (argv[1] == std::string(name.first)) {
      layer.neuron = name.second;
      known = true;
    }
  if (!known) {
    std::fprintf(stderr, "cpp_neurons: unknown model %s\n", argv[1]);
    return 2;
  }
  popsnn::NetworkSpec spec;
  spec.layers = {layer};
  spec.batchSize = 2;
  spec.numSteps = 3;
  popsnn::DeviceSpec device;
  device.codeletsPath = POPSNN_CODELETS_PATH;
  try {
    popsnn::Network net(spec, device);
  } catch (const std::invalid_argument &e) {
    std::printf("%s\n", e.what());
    return 1;
  }
  std::printf("built\n");
  return 0;
}
