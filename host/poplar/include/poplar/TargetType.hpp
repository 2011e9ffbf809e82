#pragma once
#include <string>

namespace poplar {

enum class TargetType { IPU, IPU_MODEL, CPU };

inline std::string toString(TargetType t) {
  switch (t) {
  case TargetType::IPU:
    return "IPU";
  case TargetType::IPU_MODEL:
    return "IPU_MODEL";
  case TargetType::CPU:
    return "CPU";
  }
  return "?";
}

} // namespace poplar
