// popsnn's Poplar-compatible runtime: poplar::Target, the geometry and figures
// of the machine a graph is built for.
#pragma once
#include <cstdint>
#include <string>

#include "poplar/OptionFlags.hpp"
#include "poplar/StringRef.hpp"
#include "poplar/TargetType.hpp"
#include "poplar/Type.hpp"

namespace poplar {

class Target {
public:
  Target() = default;

  // An IPU target as on hardware: "ipu2" (Mk2, the default) or "ipu1" (Mk1).
  static Target createIPUTarget(unsigned numIPUs, StringRef systemType,
                                const OptionFlags &opts = {});
  static Target createIPUTarget(unsigned numIPUs, unsigned tilesPerIPU, StringRef systemType,
                                const OptionFlags &opts = {});
  // The CPU target. popsnn: its tiles are this machine's hardware threads (or
  // $POPSNN_CPU_TILES), not Poplar's single tile; memory per tile is not limited.
  static Target createCPUTarget(bool accurateHalf = false, unsigned numIPUs = 1);

  TargetType getTargetType() const { return type_; }
  std::string getTargetSystemString() const { return system_; }
  std::string getTargetArchString() const { return arch_; }
  unsigned getNumIPUs() const { return numIPUs_; }
  unsigned getTilesPerIPU() const { return tilesPerIPU_; }
  unsigned getNumTiles() const { return numIPUs_ * tilesPerIPU_; }
  unsigned getBytesPerTile() const { return bytesPerTile_; }
  std::uint64_t getMemoryBytes() const { return std::uint64_t(bytesPerTile_) * getNumTiles(); }
  unsigned getNumWorkerContexts() const { return numWorkerContexts_; }
  double getTileClockFrequency() const { return tileClockFrequency_; }
  unsigned getTypeSize(const Type &t) const { return t.sizeInBytes(); }
  // Elements one vector instruction handles: 64-bit datapath.
  unsigned getVectorWidth(const Type &t) const { return t.sizeInBytes() ? 8 / t.sizeInBytes() : 0; }
  unsigned getDataPathWidth() const { return 64; }
  // Bytes a tile sends (and, separately, receives) per cycle in an exchange phase.
  unsigned getExchangeBytesPerCycle() const { return exchangeBytesPerCycle_; }
  // popsnn extensions (documented in docs/poplar-runtime.md): the cost-model figures.
  double getInterIPUBytesPerCycle() const { return interIpuBytesPerCycle_; }
  double getHostBytesPerCycle() const { return hostBytesPerCycle_; }
  unsigned getSyncCycles() const { return syncCycles_; }
  bool checksMemory() const { return checkMemory_; }

  // popsnn: a target covering tiles [lo, hi) of this one (virtual graphs).
  Target createVirtualTarget(unsigned lo, unsigned hi) const;
  // popsnn: the first tile of this target inside the device (0 unless virtual).
  unsigned getTileOffset() const { return tileOffset_; }
  bool operator==(const Target &o) const;

  // Internal: used by IPUModel and the device factories.
  struct Figures {
    TargetType type = TargetType::IPU_MODEL;
    std::string system = "ipu2";
    std::string arch = "ipu2";
    unsigned numIPUs = 1;
    unsigned tilesPerIPU = 1472;
    unsigned bytesPerTile = 624 * 1024;
    unsigned numWorkerContexts = 6;
    double tileClockFrequency = 1.33e9;
    unsigned exchangeBytesPerCycle = 4;
    double interIpuBytesPerCycle = 240.0;
    double hostBytesPerCycle = 12.0;
    unsigned syncCycles = 150;
    bool checkMemory = true;
  };
  static Target fromFigures(const Figures &f);

private:
  TargetType type_ = TargetType::IPU_MODEL;
  std::string system_ = "ipu2";
  std::string arch_ = "ipu2";
  unsigned numIPUs_ = 0;
  unsigned tilesPerIPU_ = 0;
  unsigned tileOffset_ = 0;
  unsigned bytesPerTile_ = 0;
  unsigned numWorkerContexts_ = 6;
  double tileClockFrequency_ = 1.33e9;
  unsigned exchangeBytesPerCycle_ = 4;
  double interIpuBytesPerCycle_ = 240.0;
  double hostBytesPerCycle_ = 12.0;
  unsigned syncCycles_ = 150;
  bool checkMemory_ = true;
};

} // namespace poplar
