// popsnn's Poplar-compatible runtime: poplar::Device. No device here is
// hardware: an IPUModel device emulates IPU geometry on this machine's CPU, and
// the CPU device runs with one tile per hardware thread.
#pragma once
#include <string>

#include "poplar/OptionFlags.hpp"
#include "poplar/Target.hpp"

namespace poplar {

class Device {
public:
  Device() = default;
  explicit Device(Target target) : target_(std::move(target)), valid_(true) {}

  static Device createCPUDevice(unsigned numIPUs = 1);

  const Target &getTarget() const { return target_; }
  unsigned getId() const { return 0; }
  bool attach() { return attached_ = valid_; }
  void detach() { attached_ = false; }
  bool isAttached() const { return attached_; }
  // popsnn: false for a default-constructed Device.
  bool valid() const { return valid_; }

private:
  Target target_;
  bool valid_ = false;
  bool attached_ = false;
};

} // namespace poplar
