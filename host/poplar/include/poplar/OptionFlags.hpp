// popsnn's Poplar-compatible runtime: poplar::OptionFlags, string options.
#pragma once
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

#include "poplar/StringRef.hpp"

namespace poplar {

class OptionFlags {
public:
  using OptionFlag = std::pair<const std::string, std::string>;
  using initializer_list = std::initializer_list<OptionFlag>;
  using const_iterator = std::map<std::string, std::string>::const_iterator;

  OptionFlags() = default;
  OptionFlags(initializer_list list) : flags_(list) {}

  void set(initializer_list list) {
    for (const auto &kv : list)
      flags_[kv.first] = kv.second;
  }
  void set(StringRef option, StringRef value) { flags_[option.str()] = value.str(); }
  // Throws std::out_of_range when the option is not set, as Poplar does.
  StringRef at(StringRef option) const { return flags_.at(option.str()); }
  bool contains(StringRef option) const { return flags_.count(option.str()) != 0; }
  void remove(StringRef option) { flags_.erase(option.str()); }
  void clear() { flags_.clear(); }
  const_iterator begin() const { return flags_.begin(); }
  const_iterator end() const { return flags_.end(); }
  bool operator==(const OptionFlags &o) const { return flags_ == o.flags_; }

private:
  std::map<std::string, std::string> flags_;
};

} // namespace poplar
