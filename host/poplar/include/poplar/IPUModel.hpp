// popsnn's Poplar-compatible runtime: poplar::IPUModel, a device that emulates
// an IPU's geometry (tiles, memory per tile, workers, IPUs) on the CPU and
// estimates its cycles. Defaults: IPU Mk2 (GC200).
#pragma once
#include <vector>

#include "poplar/ArrayRef.hpp"
#include "poplar/Device.hpp"
#include "poplar/OptionFlags.hpp"

namespace poplar {

// Inter-IPU link limits of Poplar's IPUModel. Accepted and IGNORED here: the
// cost model charges inter-IPU bytes at IPUModel::interIpuBytesPerCycle.
struct GlobalExchangeFlow {
  GlobalExchangeFlow(unsigned src, unsigned dst) : src(src), dst(dst) {}
  unsigned src, dst;
};
struct GlobalExchangeConstraint {
  GlobalExchangeConstraint(double bandwidth, ArrayRef<GlobalExchangeFlow> flows)
      : bandwidth(bandwidth), flows(flows.begin(), flows.end()) {}
  double bandwidth;
  std::vector<GlobalExchangeFlow> flows;
};

struct IPUModel {
  // "ipu2" (Mk2: 1,472 tiles, 624 KiB per tile) or "ipu1" (Mk1: 1,216 tiles, 256 KiB).
  explicit IPUModel(const char *ipuVersion = "ipu2");

  unsigned numIPUs = 1;
  unsigned tilesPerIPU = 1472;
  unsigned memoryBytesPerTile = 624 * 1024;
  unsigned numWorkerContexts = 6;
  double tileClockFrequency = 1.33e9;
  // Accepted for source compatibility; popsnn always runs codelets compiled for the host.
  bool compileIPUCode = false;
  // Poplar's sync-delay and link fields: accepted and IGNORED (the runtime's
  // cost model charges every sync `syncCycles`, see docs/poplar-compatibility.md).
  enum class RelativeSyncDelayType { AUTO, NO_DELAY };
  RelativeSyncDelayType relativeSyncDelay = RelativeSyncDelayType::AUTO;
  unsigned minIPUSyncDelay = 0;
  unsigned globalSyncCycles = 0;
  std::vector<GlobalExchangeConstraint> globalExchangeConstraints;
  // popsnn extensions: cost-model figures (see docs/poplar-runtime.md).
  unsigned exchangeBytesPerCycle = 4;
  double interIpuBytesPerCycle = 240.0;
  double hostBytesPerCycle = 12.0;
  unsigned syncCycles = 150;

  Target createTarget() const;
  Device createDevice(OptionFlags opts = {}, bool accurateHalf = false,
                      unsigned deviceManagerId = 0) const;

private:
  const char *version_ = "ipu2";
};

} // namespace poplar
