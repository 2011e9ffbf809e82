// popsnn's Poplar-compatible runtime: poplar::DeviceManager. There is no IPU
// hardware behind this runtime, so getDevices() for TargetType::IPU returns an
// empty list; programs fall back to IPUModel as they would on a machine
// without IPUs.
#pragma once
#include <vector>

#include "poplar/Device.hpp"
#include "poplar/OptionFlags.hpp"
#include "poplar/TargetType.hpp"

namespace poplar {

class DeviceManager {
public:
  DeviceManager() = default;
  static DeviceManager createDeviceManager() { return DeviceManager(); }
  std::vector<Device> getDevices(TargetType type, unsigned requiredNumIPUs,
                                 const OptionFlags &opts = {}) const;
  std::vector<Device> getDevices() const { return {}; }
  unsigned getNumDevices() const { return 0; }
};

} // namespace poplar
