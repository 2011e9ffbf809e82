// Internal: the program tree that poplar::program objects share.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "poplar/DataStream.hpp"
#include "poplar/GraphElements.hpp"
#include "poplar/SyncType.hpp"
#include "poplar/Tensor.hpp"

namespace poplar {
namespace detail {

struct ProgramNode {
  enum Kind {
    Sequence,
    Execute,
    Copy,
    StreamToTensor,
    TensorToStream,
    Repeat,
    RepeatWhile,
    If,
    Switch,
    Sync,
    Print
  };
  Kind kind = Sequence;
  std::string name;
  std::vector<std::shared_ptr<ProgramNode>>
      children; // Sequence; Repeat: body; RepeatWhile: cond, body; If: then, else
  ComputeSet cs;
  Tensor src, dst, predicate;
  DataStream stream;
  std::vector<std::int32_t> caseValues; // Switch: children are the cases, then the default
  unsigned count = 0;
  bool whileTrue = true;
  SyncType sync = SyncType::INTERNAL;
};

} // namespace detail
} // namespace poplar
