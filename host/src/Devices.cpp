#include "Devices.hpp"

#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace popsnn {

using namespace poplar;

namespace {
[[noreturn]] void invalid(const std::string &what) { throw std::invalid_argument(what); }
} // namespace

Device makeDevice(const DeviceSpec &deviceSpec) {
  const std::string &type = deviceSpec.type;
  if (type == "cpu")
    return Device::createCPUDevice();
  if (type == "ipu-model") {
    IPUModel model("ipu2");
    model.numIPUs = deviceSpec.numIPUs;
    if (deviceSpec.tilesPerIPU)
      model.tilesPerIPU = deviceSpec.tilesPerIPU;
    if (deviceSpec.memoryBytesPerTile)
      model.memoryBytesPerTile = deviceSpec.memoryBytesPerTile;
    return model.createDevice();
  }
  if (type == "ipu") {
    auto manager = DeviceManager::createDeviceManager();
    for (auto &candidate : manager.getDevices(TargetType::IPU, deviceSpec.numIPUs)) {
      if (candidate.attach())
        return std::move(candidate);
    }
    throw std::runtime_error("device 'ipu': no IPU with " + std::to_string(deviceSpec.numIPUs) +
                             " IPU(s) could be attached on this machine; use device "
                             "'ipu-model' (IPU geometry on the CPU) or 'cpu'");
  }
  invalid("device type must be 'cpu', 'ipu-model' or 'ipu', got '" + type + "'");
}

std::string codeletsPath(const DeviceSpec &deviceSpec) {
  if (!deviceSpec.codeletsPath.empty())
    return deviceSpec.codeletsPath;
  if (const char *env = std::getenv("POPSNN_CODELETS"))
    return env;
  throw std::runtime_error("popsnn: no codelet object given: set DeviceSpec.codeletsPath to "
                           "the installed popsnn_codelets.gp (CMake: ${POPSNN_CODELETS}) or "
                           "the POPSNN_CODELETS environment variable");
}

// One LeakTraceKernels vertex run on the device: whether the object has the whole-trace
// kernels. Only the cpu device runs the host's build; an IPU's codelets take the per-step path.
bool codeletsHaveLeakTrace(const Device &device, const std::string &codelets) {
  const Target &target = device.getTarget();
  if (target.getTargetType() != TargetType::CPU)
    return false;
  Graph graph(target);
  graph.addCodelets(StringRef(codelets));
  Tensor present = graph.addVariable(UNSIGNED_INT, {1}, "leak_trace_kernels");
  graph.setTileMapping(present, 0);
  ComputeSet cs = graph.addComputeSet("leak_trace_kernels");
  VertexRef v = graph.addVertex(cs, "LeakTraceKernels", {{"present", present}});
  graph.setTileMapping(v, 0);
  graph.createHostRead("present", present);
  Engine engine(graph, program::Execute(cs));
  engine.load(device);
  engine.run(0);
  unsigned value = 0;
  engine.readTensor("present", &value, &value + 1);
  return value != 0;
}

TargetGeometry geometryOf(const Device &device, const DeviceSpec &deviceSpec) {
  TargetGeometry g = geometryOf(device.getTarget());
  g.leakTrace = codeletsHaveLeakTrace(device, codeletsPath(deviceSpec));
  return g;
}

TargetGeometry geometryOf(const Target &target) {
  TargetGeometry g;
  g.numTiles = target.getNumTiles();
  g.ipu = target.getTargetType() != TargetType::CPU;
  g.workers = std::max(1u, unsigned(target.getNumWorkerContexts()));
  return g;
}

} // namespace popsnn
