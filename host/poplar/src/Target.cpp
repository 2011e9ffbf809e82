#include <cstdlib>
#include <string>
#include <thread>

#include "poplar/Device.hpp"
#include "poplar/DeviceManager.hpp"
#include "poplar/IPUModel.hpp"
#include "poplar/Target.hpp"
#include "poplar/exceptions.hpp"

namespace poplar {

namespace {

Target::Figures figuresFor(StringRef version) {
  Target::Figures f;
  std::string v = version.str();
  if (v == "ipu2" || v == "ipu21" || v.empty()) {
    f.system = f.arch = "ipu2";
    f.tilesPerIPU = 1472;
    f.bytesPerTile = 624 * 1024;
  } else if (v == "ipu1") {
    f.system = f.arch = "ipu1";
    f.tilesPerIPU = 1216;
    f.bytesPerTile = 256 * 1024;
    f.tileClockFrequency = 1.6e9;
  } else {
    throw invalid_machine_model("IPU version '" + v +
                                "' is not known; use \"ipu2\" (Mk2) or \"ipu1\" (Mk1)");
  }
  return f;
}

void checkGeometry(unsigned numIPUs, unsigned tilesPerIPU) {
  if (numIPUs == 0)
    throw invalid_machine_model("numIPUs is 0; a device needs at least one IPU");
  if (tilesPerIPU == 0)
    throw invalid_machine_model("tilesPerIPU is 0; a device needs at least one tile per IPU");
}

} // namespace

Target Target::fromFigures(const Figures &f) {
  checkGeometry(f.numIPUs, f.tilesPerIPU);
  Target t;
  t.type_ = f.type;
  t.system_ = f.system;
  t.arch_ = f.arch;
  t.numIPUs_ = f.numIPUs;
  t.tilesPerIPU_ = f.tilesPerIPU;
  t.bytesPerTile_ = f.bytesPerTile;
  t.numWorkerContexts_ = f.numWorkerContexts;
  t.tileClockFrequency_ = f.tileClockFrequency;
  t.exchangeBytesPerCycle_ = f.exchangeBytesPerCycle;
  t.interIpuBytesPerCycle_ = f.interIpuBytesPerCycle;
  t.hostBytesPerCycle_ = f.hostBytesPerCycle;
  t.syncCycles_ = f.syncCycles;
  t.checkMemory_ = f.checkMemory;
  return t;
}

Target Target::createIPUTarget(unsigned numIPUs, StringRef systemType, const OptionFlags &) {
  Figures f = figuresFor(systemType);
  f.type = TargetType::IPU;
  f.numIPUs = numIPUs;
  return fromFigures(f);
}

Target Target::createIPUTarget(unsigned numIPUs, unsigned tilesPerIPU, StringRef systemType,
                               const OptionFlags &) {
  Figures f = figuresFor(systemType);
  f.type = TargetType::IPU;
  f.numIPUs = numIPUs;
  f.tilesPerIPU = tilesPerIPU;
  return fromFigures(f);
}

Target Target::createCPUTarget(bool, unsigned numIPUs) {
  Figures f = figuresFor("ipu2");
  f.type = TargetType::CPU;
  f.system = "cpu";
  f.numIPUs = numIPUs;
  unsigned tiles = std::thread::hardware_concurrency();
  if (const char *env = std::getenv("POPSNN_CPU_TILES")) {
    char *end = nullptr;
    unsigned long n = std::strtoul(env, &end, 10);
    if (end == env || *end != '\0' || n == 0 || n > 65536)
      throw invalid_option(std::string("POPSNN_CPU_TILES='") + env +
                           "' is not a tile count; set it to a positive integer or unset it");
    tiles = static_cast<unsigned>(n);
  }
  f.tilesPerIPU = tiles ? tiles : 1;
  // A CPU tile is a thread with the machine's memory: no per-tile limit.
  f.bytesPerTile = 0xFFFFFFFFu;
  f.checkMemory = false;
  return fromFigures(f);
}

Target Target::createVirtualTarget(unsigned lo, unsigned hi) const {
  if (lo >= hi || hi > getNumTiles())
    throw invalid_tile_mapping("createVirtualGraph(" + std::to_string(lo) + ", " +
                               std::to_string(hi) +
                               "): the tile range must be non-empty and "
                               "inside this graph's " +
                               std::to_string(getNumTiles()) + " tiles");
  Target t = *this;
  t.tileOffset_ = tileOffset_ + lo;
  // A virtual graph on one IPU keeps the per-IPU figure meaningful; one that
  // spans IPUs is described as a single IPU of hi - lo tiles.
  t.numIPUs_ = 1;
  t.tilesPerIPU_ = hi - lo;
  return t;
}

bool Target::operator==(const Target &o) const {
  return type_ == o.type_ && numIPUs_ == o.numIPUs_ && tilesPerIPU_ == o.tilesPerIPU_ &&
         tileOffset_ == o.tileOffset_ && bytesPerTile_ == o.bytesPerTile_ &&
         numWorkerContexts_ == o.numWorkerContexts_;
}

IPUModel::IPUModel(const char *ipuVersion) {
  Target::Figures f = figuresFor(ipuVersion ? ipuVersion : "ipu2");
  version_ = f.arch == "ipu1" ? "ipu1" : "ipu2";
  tilesPerIPU = f.tilesPerIPU;
  memoryBytesPerTile = f.bytesPerTile;
  tileClockFrequency = f.tileClockFrequency;
}

Target IPUModel::createTarget() const {
  Target::Figures f = figuresFor(version_);
  f.type = TargetType::IPU_MODEL;
  f.numIPUs = numIPUs;
  f.tilesPerIPU = tilesPerIPU;
  f.bytesPerTile = memoryBytesPerTile;
  if (numWorkerContexts == 0)
    throw invalid_machine_model("numWorkerContexts is 0; an IPU tile has 6 worker contexts");
  f.numWorkerContexts = numWorkerContexts;
  if (!(tileClockFrequency > 0))
    throw invalid_machine_model("tileClockFrequency must be positive (Mk2: 1.33e9 Hz)");
  f.tileClockFrequency = tileClockFrequency;
  if (exchangeBytesPerCycle == 0 || !(interIpuBytesPerCycle > 0) || !(hostBytesPerCycle > 0))
    throw invalid_machine_model("exchange, inter-IPU and host bandwidths must be positive");
  f.exchangeBytesPerCycle = exchangeBytesPerCycle;
  f.interIpuBytesPerCycle = interIpuBytesPerCycle;
  f.hostBytesPerCycle = hostBytesPerCycle;
  f.syncCycles = syncCycles;
  return Target::fromFigures(f);
}

Device IPUModel::createDevice(OptionFlags, bool, unsigned) const { return Device(createTarget()); }

Device Device::createCPUDevice(unsigned numIPUs) {
  return Device(Target::createCPUTarget(false, numIPUs));
}

std::vector<Device> DeviceManager::getDevices(TargetType, unsigned, const OptionFlags &) const {
  return {};
}

} // namespace poplar
