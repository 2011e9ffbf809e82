// popsnn's Poplar-compatible runtime: poplar::DataStream, a FIFO between the
// host and the device, created by Graph::addHostToDeviceFIFO and
// Graph::addDeviceToHostFIFO and used by program::Copy.
#pragma once
#include <cstddef>
#include <string>

#include "poplar/Type.hpp"

namespace poplar {

enum class DataStreamType { HostToDeviceFIFO, DeviceToHostFIFO };

class DataStream {
public:
  DataStream() = default;
  DataStream(std::string handle, Type type, std::size_t numElements, DataStreamType kind)
      : handle_(std::move(handle)), type_(type), numElements_(numElements), kind_(kind) {}
  const std::string &handle() const { return handle_; }
  Type elementType() const { return type_; }
  std::size_t numElements() const { return numElements_; }
  DataStreamType type() const { return kind_; }
  bool valid() const { return !handle_.empty(); }

private:
  std::string handle_;
  Type type_;
  std::size_t numElements_ = 0;
  DataStreamType kind_ = DataStreamType::HostToDeviceFIFO;
};

} // namespace poplar
