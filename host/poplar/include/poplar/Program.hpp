// popsnn's Poplar-compatible runtime: control programs (poplar::program).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "poplar/ArrayRef.hpp"
#include "poplar/DataStream.hpp"
#include "poplar/DebugContext.hpp"
#include "poplar/GraphElements.hpp"
#include "poplar/StringRef.hpp"
#include "poplar/SyncType.hpp"
#include "poplar/Tensor.hpp"

namespace poplar {
namespace detail {
struct ProgramNode;
}

namespace program {

class Program {
public:
  Program();
  bool isEmpty() const;
  // popsnn internal.
  const std::shared_ptr<detail::ProgramNode> &node() const { return node_; }

protected:
  explicit Program(std::shared_ptr<detail::ProgramNode> node) : node_(std::move(node)) {}
  std::shared_ptr<detail::ProgramNode> node_;
};

// Runs its programs in order. Copies of a Sequence share its list.
class Sequence : public Program {
public:
  Sequence(const DebugContext &dc = {});
  Sequence(std::initializer_list<Program> programs, const DebugContext &dc = {});
  void add(const Program &p);
};

// One bulk-synchronous compute phase: every vertex of the compute set, then a sync.
class Execute : public Program {
public:
  explicit Execute(ComputeSet cs, const DebugContext &dc = {});
};

// Tensor to tensor (the exchange phase when tiles differ), stream to tensor, tensor to stream.
class Copy : public Program {
public:
  Copy(const Tensor &src, const Tensor &dst, bool dontOutline = false, const DebugContext &dc = {});
  Copy(const DataStream &stream, const Tensor &dst, bool optimiseMemory = false,
       const DebugContext &dc = {});
  Copy(const Tensor &src, const DataStream &stream, bool optimiseMemory = false,
       const DebugContext &dc = {});
};

class Repeat : public Program {
public:
  Repeat(unsigned count, const Program &body, const DebugContext &dc = {});
};

// Runs `cond`, then `body` while the one-element `predicate` is non-zero (True)
// or zero (False), re-running `cond` before each test.
class RepeatWhileTrue : public Program {
public:
  RepeatWhileTrue(const Program &cond, const Tensor &predicate, const Program &body,
                  const DebugContext &dc = {});
};
class RepeatWhileFalse : public Program {
public:
  RepeatWhileFalse(const Program &cond, const Tensor &predicate, const Program &body,
                   const DebugContext &dc = {});
};

// Runs `trueBody` if the one-element `predicate` is non-zero, else `falseBody`.
class If : public Program {
public:
  If(const Tensor &predicate, const Program &trueBody, const Program &falseBody,
     const DebugContext &dc = {});
  If(const Tensor &predicate, const Program &trueBody, const DebugContext &dc = {});
};

// Runs the body whose value equals the one-element integral `control`, else
// `defaultCase` (an empty program unless given).
class Switch : public Program {
public:
  using Cases = std::vector<std::pair<std::int32_t, Program>>;
  explicit Switch(const Tensor &control, const DebugContext &dc = {});
  Switch(const Tensor &control, const Program &defaultCase, const DebugContext &dc = {});
  Switch(const Tensor &control, const Cases &cases, const DebugContext &dc = {});
  Switch(const Tensor &control, const Cases &cases, const Program &defaultCase,
         const DebugContext &dc = {});
  // Adds a case; a value given twice is an error.
  Switch &add(std::int32_t value, const Program &body);
};

// Runs a Function made by Graph::addFunction (its body once per Call).
class Call : public Program {
public:
  explicit Call(const Function &f, const DebugContext &dc = {});
};

// Runs one program as a unit; the runtime gives it no other meaning.
class Block : public Program {
public:
  explicit Block(const Program &p, const DebugContext &dc = {});
};

class Sync : public Program {
public:
  explicit Sync(SyncType type, const DebugContext &dc = {});
};

// Prints "title: {...}" (the tensor's values, nested by its shape) to the
// engine's print stream (std::cout unless Engine::setPrintStream).
class PrintTensor : public Program {
public:
  explicit PrintTensor(const Tensor &t, const DebugContext &dc = {});
  PrintTensor(StringRef title, const Tensor &t, const DebugContext &dc = {});
};

// Marks a tensor's contents as undefined; the runtime has nothing to do.
class WriteUndef : public Program {
public:
  explicit WriteUndef(const Tensor &t, const DebugContext &dc = {});
};

} // namespace program
} // namespace poplar
