// popsnn's Poplar-compatible runtime: poplar::DebugContext, reduced to the name
// that the runtime uses in error messages and profiles.
#pragma once
#include <string>

#include "poplar/StringRef.hpp"

namespace poplar {

class DebugContext {
public:
  DebugContext() = default;
  DebugContext(const char *name) : name_(name ? name : "") {}
  DebugContext(const std::string &name) : name_(name) {}
  DebugContext(StringRef name) : name_(name.str()) {}
  DebugContext(const DebugContext &parent, const std::string &name)
      : name_(parent.name_.empty() ? name : parent.name_ + "/" + name) {}
  const std::string &getPathName() const { return name_; }

private:
  std::string name_;
};

using DebugNameAndId = DebugContext;

} // namespace poplar
