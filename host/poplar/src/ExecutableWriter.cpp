// Executable::serialize's half of the format in ExecutableFormat.hpp: writes the graph
// state an EngineImpl was compiled from, and its programs as a DAG (children before
// parents, shared sub-programs such as a Function written once).
#include <map>

#include "CodeletCache.hpp"
#include "ExecutableFormat.hpp"
#include "GraphState.hpp"
#include "ProgramNode.hpp"

namespace poplar {
namespace detail {

namespace {

void putTensor(ByteWriter &w, const Tensor &t) {
  w.put<std::uint8_t>(t.valid());
  if (!t.valid())
    return;
  w.str(t.elementType().toString());
  w.put<std::uint64_t>(t.rank());
  for (auto d : t.shape())
    w.put<std::uint64_t>(d);
  w.put<std::uint64_t>(t.regions().size());
  for (const auto &r : t.regions()) {
    w.put<std::uint32_t>(r.var);
    w.put<std::uint64_t>(r.begin);
    w.put<std::uint64_t>(r.end);
  }
}

void putTarget(ByteWriter &w, const Target &t) {
  w.put<std::uint8_t>(static_cast<std::uint8_t>(t.getTargetType()));
  w.str(t.getTargetSystemString());
  w.str(t.getTargetArchString());
  for (unsigned v : {t.getNumIPUs(), t.getTilesPerIPU(), t.getBytesPerTile(),
                     t.getNumWorkerContexts(), t.getExchangeBytesPerCycle(), t.getSyncCycles()})
    w.put<std::uint32_t>(v);
  for (double v :
       {t.getTileClockFrequency(), t.getInterIPUBytesPerCycle(), t.getHostBytesPerCycle()})
    w.put<double>(v);
  w.put<std::uint8_t>(t.checksMemory());
}

void putVariable(ByteWriter &w, const VariableInfo &v) {
  w.str(v.name);
  w.str(v.type.toString());
  w.put<std::uint64_t>(v.shape.size());
  for (auto d : v.shape)
    w.put<std::uint64_t>(d);
  w.put<std::uint8_t>(v.isConstant);
  // Tile mapping as runs of equal tiles (-1: unmapped).
  std::vector<std::pair<std::int32_t, std::uint64_t>> runs;
  for (auto tile : v.tile) {
    if (!runs.empty() && runs.back().first == tile)
      ++runs.back().second;
    else
      runs.emplace_back(tile, 1);
  }
  w.put<std::uint64_t>(runs.size());
  for (const auto &r : runs) {
    w.put<std::int32_t>(r.first);
    w.put<std::uint64_t>(r.second);
  }
  w.str(std::string(v.init.begin(), v.init.end()));
}

void putVertex(ByteWriter &w, const VertexInfo &v) {
  w.put<std::uint32_t>(v.computeSet);
  w.str(v.cls->name);
  w.put<std::int32_t>(v.tile);
  w.put<std::uint8_t>(v.hasEstimate);
  w.put<std::uint64_t>(v.cycles);
  w.put<std::uint64_t>(v.fields.size());
  for (std::size_t f = 0; f < v.fields.size(); ++f) {
    const FieldState &fs = v.fields[f];
    w.str(v.cls->desc->fields[f].name);
    w.put<std::uint8_t>(fs.connected);
    w.put<std::uint8_t>(fs.sizeSet);
    w.put<std::uint8_t>(fs.hasValue);
    w.put<std::uint64_t>(fs.tensors.size());
    for (std::size_t i = 0; i < fs.tensors.size(); ++i) {
      w.put<std::uint8_t>(i < fs.entrySet.size() && fs.entrySet[i]);
      putTensor(w, fs.tensors[i]);
    }
    w.put<std::uint64_t>(fs.values.size());
    for (double x : fs.values)
      w.put<double>(x);
  }
}

class ProgramWriter {
public:
  explicit ProgramWriter(ByteWriter &w) : w_(w) {}
  std::uint32_t add(const ProgramNode &n) {
    auto it = ids_.find(&n);
    if (it != ids_.end())
      return it->second;
    std::vector<std::uint32_t> kids;
    for (const auto &c : n.children)
      kids.push_back(add(*c));
    ByteWriter node;
    node.put<std::uint8_t>(static_cast<std::uint8_t>(n.kind));
    node.str(n.name);
    node.put<std::uint64_t>(kids.size());
    for (auto k : kids)
      node.put<std::uint32_t>(k);
    node.put<std::uint32_t>(n.cs.getId());
    putTensor(node, n.src);
    putTensor(node, n.dst);
    putTensor(node, n.predicate);
    node.str(n.stream.handle());
    node.put<std::uint64_t>(n.caseValues.size());
    for (auto v : n.caseValues)
      node.put<std::int32_t>(v);
    node.put<std::uint32_t>(n.count);
    node.put<std::uint8_t>(n.whileTrue);
    node.put<std::uint8_t>(static_cast<std::uint8_t>(n.sync));
    nodes_ += node.out;
    const auto id = static_cast<std::uint32_t>(ids_.size());
    ids_[&n] = id;
    return id;
  }
  void finish(const std::vector<std::uint32_t> &roots) {
    w_.put<std::uint64_t>(ids_.size());
    w_.out += nodes_;
    w_.put<std::uint64_t>(roots.size());
    for (auto r : roots)
      w_.put<std::uint32_t>(r);
  }

private:
  ByteWriter &w_;
  std::string nodes_;
  std::map<const ProgramNode *, std::uint32_t> ids_;
};

std::string payloadOf(const GraphState &g, const std::vector<std::shared_ptr<ProgramNode>> &roots) {
  ByteWriter w;
  putTarget(w, g.target);
  w.put<std::uint64_t>(g.codeletRecords.size());
  for (const auto &c : g.codeletRecords) {
    w.put<std::uint8_t>(c.isObject);
    w.str(c.path);
    w.str(c.flags);
    w.str(c.sha256);
  }
  w.put<std::uint64_t>(g.vars.size());
  for (const auto &v : g.vars)
    putVariable(w, v);
  w.put<std::uint64_t>(g.computeSets.size());
  for (const auto &cs : g.computeSets)
    w.str(cs.name);
  w.put<std::uint64_t>(g.vertices.size());
  for (const auto &v : g.vertices)
    putVertex(w, v);
  w.put<std::uint64_t>(g.streams.size());
  for (const auto &kv : g.streams) {
    w.str(kv.first);
    w.put<std::uint8_t>(static_cast<std::uint8_t>(kv.second.type()));
    w.str(kv.second.elementType().toString());
    w.put<std::uint64_t>(kv.second.numElements());
  }
  for (const auto *handles : {&g.hostWrites, &g.hostReads}) {
    w.put<std::uint64_t>(handles->size());
    for (const auto &kv : *handles) {
      w.str(kv.first);
      putTensor(w, kv.second.tensor);
    }
  }
  ProgramWriter programs(w);
  std::vector<std::uint32_t> ids;
  for (const auto &r : roots)
    ids.push_back(programs.add(*r));
  programs.finish(ids);
  return w.out;
}

} // namespace

void writeExecutable(std::ostream &out, const GraphState &g,
                     const std::vector<std::shared_ptr<ProgramNode>> &roots) {
  const std::string payload = payloadOf(g, roots);
  ByteWriter head;
  head.out.assign(kExecutableMagic, sizeof(kExecutableMagic));
  head.put<std::uint32_t>(kExecutableVersion);
  head.put<std::uint64_t>(payload.size());
  out << head.out << payload << sha256Hex(payload);
  if (!out)
    throw poplar_error("Executable::serialize: writing to the stream failed");
}

} // namespace detail
} // namespace poplar
