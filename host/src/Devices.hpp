// The device a DeviceSpec names ("cpu", "ipu-model" with its geometry, or an attached
// "ipu"), the codelet object to load on it, and the planner's view of its target. Shared by
// the Network and the convolutional stage runner (ConvStage.cpp).
#pragma once

#include <poplar/Device.hpp>
#include <poplar/Target.hpp>

#include <string>

#include "Plan.hpp"
#include "popsnn/NetworkSpec.hpp"

namespace popsnn {

poplar::Device makeDevice(const DeviceSpec &deviceSpec);
std::string codeletsPath(const DeviceSpec &deviceSpec);
TargetGeometry geometryOf(const poplar::Target &target);
// The same, and whether the codelets loaded on `device` have the whole-trace kernels (it runs
// one vertex on the cpu device: TargetGeometry::leakTrace).
TargetGeometry geometryOf(const poplar::Device &device, const DeviceSpec &deviceSpec);

} // namespace popsnn
