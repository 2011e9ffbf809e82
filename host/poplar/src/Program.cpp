#include "poplar/Program.hpp"
#include "ProgramNode.hpp"
#include "poplar/Graph.hpp"
#include "poplar/exceptions.hpp"

namespace poplar {
namespace program {

using detail::ProgramNode;

namespace {

std::shared_ptr<ProgramNode> makeNode(ProgramNode::Kind kind, const DebugContext &dc) {
  auto n = std::make_shared<ProgramNode>();
  n->kind = kind;
  n->name = dc.getPathName();
  return n;
}

void requirePredicate(const Tensor &p, const char *what) {
  if (!p.valid() || p.numElements() != 1)
    throw control_program_error(std::string(what) +
                                ": the predicate must be a one-element tensor, got " +
                                (p.valid() ? p.shortString() : std::string("an empty tensor")));
}

} // namespace

Program::Program() : node_(makeNode(ProgramNode::Sequence, {})) {}

bool Program::isEmpty() const {
  return node_->kind == ProgramNode::Sequence && node_->children.empty();
}

Sequence::Sequence(const DebugContext &dc) : Program(makeNode(ProgramNode::Sequence, dc)) {}

Sequence::Sequence(std::initializer_list<Program> programs, const DebugContext &dc)
    : Program(makeNode(ProgramNode::Sequence, dc)) {
  for (const auto &p : programs)
    add(p);
}

void Sequence::add(const Program &p) {
  if (p.node().get() == node_.get())
    throw control_program_error("Sequence::add: a sequence cannot contain itself");
  node_->children.push_back(p.node());
}

Execute::Execute(ComputeSet cs, const DebugContext &dc)
    : Program(makeNode(ProgramNode::Execute, dc)) {
  node_->cs = cs;
}

Copy::Copy(const Tensor &src, const Tensor &dst, bool, const DebugContext &dc)
    : Program(makeNode(ProgramNode::Copy, dc)) {
  if (!src.valid() || !dst.valid())
    throw control_program_error("Copy: source and destination must be tensors made by a graph");
  if (src.elementType() != dst.elementType())
    throw control_program_error("Copy: the source holds " + src.elementType().toString() +
                                " and the destination " + dst.elementType().toString() +
                                "; copies do not convert types");
  if (src.numElements() != dst.numElements())
    throw control_program_error("Copy: the source " + src.shortString() + " has " +
                                std::to_string(src.numElements()) +
                                " elements but the destination " + dst.shortString() + " has " +
                                std::to_string(dst.numElements()));
  node_->src = src;
  node_->dst = dst;
}

Copy::Copy(const DataStream &stream, const Tensor &dst, bool, const DebugContext &dc)
    : Program(makeNode(ProgramNode::StreamToTensor, dc)) {
  if (!stream.valid() || stream.type() != DataStreamType::HostToDeviceFIFO)
    throw control_program_error(
        "Copy(stream, tensor): the stream must come from addHostToDeviceFIFO");
  if (!dst.valid() || dst.elementType() != stream.elementType() ||
      dst.numElements() != stream.numElements())
    throw control_program_error("Copy: stream '" + stream.handle() + "' carries " +
                                std::to_string(stream.numElements()) + " x " +
                                stream.elementType().toString() + " but the tensor is " +
                                (dst.valid() ? dst.shortString() : std::string("empty")));
  node_->stream = stream;
  node_->dst = dst;
}

Copy::Copy(const Tensor &src, const DataStream &stream, bool, const DebugContext &dc)
    : Program(makeNode(ProgramNode::TensorToStream, dc)) {
  if (!stream.valid() || stream.type() != DataStreamType::DeviceToHostFIFO)
    throw control_program_error(
        "Copy(tensor, stream): the stream must come from addDeviceToHostFIFO");
  if (!src.valid() || src.elementType() != stream.elementType() ||
      src.numElements() != stream.numElements())
    throw control_program_error("Copy: stream '" + stream.handle() + "' carries " +
                                std::to_string(stream.numElements()) + " x " +
                                stream.elementType().toString() + " but the tensor is " +
                                (src.valid() ? src.shortString() : std::string("empty")));
  node_->stream = stream;
  node_->src = src;
}

Repeat::Repeat(unsigned count, const Program &body, const DebugContext &dc)
    : Program(makeNode(ProgramNode::Repeat, dc)) {
  node_->count = count;
  node_->children.push_back(body.node());
}

RepeatWhileTrue::RepeatWhileTrue(const Program &cond, const Tensor &predicate, const Program &body,
                                 const DebugContext &dc)
    : Program(makeNode(ProgramNode::RepeatWhile, dc)) {
  requirePredicate(predicate, "RepeatWhileTrue");
  node_->predicate = predicate;
  node_->whileTrue = true;
  node_->children = {cond.node(), body.node()};
}

RepeatWhileFalse::RepeatWhileFalse(const Program &cond, const Tensor &predicate,
                                   const Program &body, const DebugContext &dc)
    : Program(makeNode(ProgramNode::RepeatWhile, dc)) {
  requirePredicate(predicate, "RepeatWhileFalse");
  node_->predicate = predicate;
  node_->whileTrue = false;
  node_->children = {cond.node(), body.node()};
}

If::If(const Tensor &predicate, const Program &trueBody, const Program &falseBody,
       const DebugContext &dc)
    : Program(makeNode(ProgramNode::If, dc)) {
  requirePredicate(predicate, "If");
  node_->predicate = predicate;
  node_->children = {trueBody.node(), falseBody.node()};
}

If::If(const Tensor &predicate, const Program &trueBody, const DebugContext &dc)
    : If(predicate, trueBody, Program(), dc) {}

Switch::Switch(const Tensor &control, const DebugContext &dc) : Switch(control, Cases{}, dc) {}

Switch::Switch(const Tensor &control, const Program &defaultCase, const DebugContext &dc)
    : Switch(control, Cases{}, defaultCase, dc) {}

Switch::Switch(const Tensor &control, const Cases &cases, const DebugContext &dc)
    : Switch(control, cases, Program(), dc) {}

Switch::Switch(const Tensor &control, const Cases &cases, const Program &defaultCase,
               const DebugContext &dc)
    : Program(makeNode(ProgramNode::Switch, dc)) {
  requirePredicate(control, "Switch");
  const Type &t = control.elementType();
  if (t == FLOAT || t == HALF || t == BOOL)
    throw control_program_error("Switch: the control tensor holds " + t.toString() +
                                "; use an integral type (INT, UNSIGNED_INT, SHORT, ...)");
  node_->predicate = control;
  node_->children.push_back(defaultCase.node());
  for (const auto &c : cases)
    add(c.first, c.second);
}

Switch &Switch::add(std::int32_t value, const Program &body) {
  for (auto v : node_->caseValues)
    if (v == value)
      throw control_program_error("Switch::add: case " + std::to_string(value) +
                                  " is already there; each value may have one body");
  // The default stays last.
  node_->caseValues.push_back(value);
  node_->children.insert(node_->children.end() - 1, body.node());
  return *this;
}

Call::Call(const Function &f, const DebugContext &dc)
    : Program(makeNode(ProgramNode::Sequence, dc)) {
  if (!f.body())
    throw control_program_error(
        "Call: the Function is empty; make it with graph.addFunction(program)");
  node_->children.push_back(f.body());
}

Block::Block(const Program &p, const DebugContext &dc)
    : Program(makeNode(ProgramNode::Sequence, dc)) {
  node_->children.push_back(p.node());
}

Sync::Sync(SyncType type, const DebugContext &dc) : Program(makeNode(ProgramNode::Sync, dc)) {
  node_->sync = type;
}

PrintTensor::PrintTensor(const Tensor &t, const DebugContext &dc) : PrintTensor("", t, dc) {}

PrintTensor::PrintTensor(StringRef title, const Tensor &t, const DebugContext &dc)
    : Program(makeNode(ProgramNode::Print, dc)) {
  if (!t.valid())
    throw control_program_error("PrintTensor: the tensor is empty (default-constructed)");
  node_->src = t;
  node_->name = title.str();
}

WriteUndef::WriteUndef(const Tensor &t, const DebugContext &dc)
    : Program(makeNode(ProgramNode::Sequence, dc)) {
  if (!t.valid())
    throw control_program_error("WriteUndef: the tensor is empty (default-constructed)");
}

} // namespace program
Function Graph::addFunction(const program::Program &program) { return Function(program.node()); }

} // namespace poplar
