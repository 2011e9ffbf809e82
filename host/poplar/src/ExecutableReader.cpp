// Executable::deserialize's half of the format in ExecutableFormat.hpp. The stream is
// untrusted: after the header and the payload's SHA-256 are checked, the graph is
// rebuilt through the public Graph and program API (which checks every id, shape,
// type, tile and connection as it does for a user), the codelet files are loaded
// again only if their content still has the recorded hash, and the Engine's compile
// step then checks the whole graph as for any other. Sizes are bounded before anything
// is allocated.
#include <algorithm>
#include <sstream>

#include "CodeletCache.hpp"
#include "Codelets.hpp"
#include "EngineImpl.hpp"
#include "ExecutableFormat.hpp"

namespace poplar {
namespace detail {

namespace {

// Elements of all variables (and of one stream) an executable may ask for: the engine
// allocates them (and 4 bytes each for the tile mapping) before it runs.
constexpr std::uint64_t kMaxElements = std::uint64_t(1) << 28;
// Program nesting (the compile and run steps recurse) and steps after expanding calls.
constexpr std::uint64_t kMaxProgramDepth = 1000;
constexpr std::uint64_t kMaxProgramSteps = std::uint64_t(1) << 22;

std::string readPayload(std::istream &in) {
  auto bad = [](const std::string &why) { return poplar_error("Executable::deserialize: " + why); };
  char head[8 + 4 + 8];
  if (!in.read(head, sizeof(head)))
    throw bad("the stream ends before the header; it is not a serialized executable");
  if (std::memcmp(head, kExecutableMagic, 8) != 0)
    throw bad("the stream does not start with \"POPSNNEX\"; it is not an executable written by "
              "popsnn's Executable::serialize");
  std::uint32_t version;
  std::uint64_t size;
  std::memcpy(&version, head + 8, 4);
  std::memcpy(&size, head + 12, 8);
  if (version != kExecutableVersion)
    throw bad("the executable has format version " + std::to_string(version) +
              " but this popsnn reads version " + std::to_string(kExecutableVersion) +
              "; serialize it again with this popsnn");
  std::string payload;
  char chunk[1 << 16];
  while (payload.size() < size) {
    const auto want =
        static_cast<std::streamsize>(std::min<std::uint64_t>(sizeof(chunk), size - payload.size()));
    in.read(chunk, want);
    payload.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (in.gcount() != want)
      throw bad("the stream is truncated: the header announces " + std::to_string(size) +
                " payload bytes, the stream holds " + std::to_string(payload.size()));
  }
  char digest[64];
  if (!in.read(digest, sizeof(digest)))
    throw bad("the stream is truncated: its SHA-256 trailer is missing");
  if (std::string(digest, sizeof(digest)) != sha256Hex(payload))
    throw bad("the payload's SHA-256 does not match its trailer; the executable is corrupted");
  return payload;
}

// Compile flags from the stream go to the host compiler's command line: only plain
// preprocessor, optimisation, warning and include options are accepted.
void checkFlags(const std::string &flags, const std::string &path) {
  std::istringstream words(flags);
  std::string w;
  bool pathNext = false;
  const char *allowed[] = {"-D", "-U",    "-O", "-W",      "-g",
                           "-m", "-std=", "-I", "-iquote", "-isystem"};
  while (words >> w) {
    const bool safe = std::all_of(w.begin(), w.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_=+.,/:@%-", c);
    });
    // -Wl, -Wa, -Wp, hand options on to the linker, assembler and preprocessor.
    const bool passOn =
        w.rfind("-Wl,", 0) == 0 || w.rfind("-Wa,", 0) == 0 || w.rfind("-Wp,", 0) == 0;
    bool ok = safe && !passOn &&
              (pathNext || std::any_of(std::begin(allowed), std::end(allowed),
                                       [&](const char *p) { return w.rfind(p, 0) == 0; }));
    if (!ok)
      throw poplar_error("Executable::deserialize: the compile flags of codelet '" + path +
                         "' hold '" + w +
                         "', which an executable may not pass to the compiler (allowed: -D, -U, "
                         "-O, -W (not -Wl,/-Wa,/-Wp,), -g, -m, -std=, -I, -iquote, -isystem)");
    pathNext = w == "-I" || w == "-iquote" || w == "-isystem";
  }
}

// One program of the DAG as written: its kind, name, children and parts.
struct NodeRecord {
  std::uint8_t kind = 0;
  std::string name, handle;
  std::vector<program::Program> kids;
  std::uint32_t cs = 0, count = 0;
  Tensor src, dst, pred;
  std::vector<std::int32_t> cases;
  bool whileTrue = true;
  std::uint8_t sync = 0;
};

class ExecutableReader {
public:
  explicit ExecutableReader(const std::string &payload) : r_(payload) {}
  std::unique_ptr<EngineImpl> read();

private:
  bool flag(const char *what) {
    const auto b = r_.get<std::uint8_t>(what);
    if (b > 1)
      r_.fail(std::string(what) + " is " + std::to_string(b) + ", not 0 or 1");
    return b == 1;
  }
  const Type &type(const char *what) {
    const std::string name = r_.str(what);
    const Type *t = typeFromName(name.c_str());
    if (!t)
      r_.fail(std::string(what) + " names no Poplar type ('" + name.substr(0, 40) + "')");
    return *t;
  }
  std::vector<std::size_t> shape(const char *what, std::uint64_t &elements) {
    const std::uint64_t rank = r_.count(what, 8);
    std::vector<std::size_t> dims;
    elements = 1;
    for (std::uint64_t i = 0; i < rank; ++i) {
      dims.push_back(r_.get<std::uint64_t>(what));
      if (dims.back() && elements > kMaxElements / dims.back())
        r_.fail(std::string(what) + " has more than " + std::to_string(kMaxElements) + " elements");
      elements *= dims.back();
    }
    return dims;
  }
  Target target();
  void codelets(Graph &graph);
  void variables(Graph &graph);
  void variable(Graph &graph, std::uint64_t &total);
  Tensor tensor(const GraphState &g);
  void vertices(Graph &graph);
  void field(Graph &graph, VertexRef v);
  void streamsAndHandles(Graph &graph);
  std::vector<program::Program> programs(Graph &graph);
  program::Program node(Graph &graph, const std::vector<program::Program> &built);
  program::Program make(const NodeRecord &n, const GraphState &g);

  ByteReader r_;
  std::vector<std::uint64_t> depth_, steps_;
  std::uint64_t bytes_ = 0;
};

Target ExecutableReader::target() {
  Target::Figures f;
  const auto type = r_.get<std::uint8_t>("target type");
  if (type > static_cast<std::uint8_t>(TargetType::CPU))
    r_.fail("the target type is " + std::to_string(type));
  f.type = static_cast<TargetType>(type);
  f.system = r_.str("target system");
  f.arch = r_.str("target arch");
  f.numIPUs = r_.get<std::uint32_t>("numIPUs");
  f.tilesPerIPU = r_.get<std::uint32_t>("tilesPerIPU");
  f.bytesPerTile = r_.get<std::uint32_t>("bytesPerTile");
  f.numWorkerContexts = r_.get<std::uint32_t>("numWorkerContexts");
  f.exchangeBytesPerCycle = r_.get<std::uint32_t>("exchangeBytesPerCycle");
  f.syncCycles = r_.get<std::uint32_t>("syncCycles");
  f.tileClockFrequency = r_.get<double>("tileClockFrequency");
  f.interIpuBytesPerCycle = r_.get<double>("interIpuBytesPerCycle");
  f.hostBytesPerCycle = r_.get<double>("hostBytesPerCycle");
  f.checkMemory = flag("checkMemory");
  if (f.numIPUs == 0 || f.numIPUs > 1024 || f.tilesPerIPU == 0 || f.tilesPerIPU > 65536)
    r_.fail("the target has " + std::to_string(f.numIPUs) + " IPU(s) x " +
            std::to_string(f.tilesPerIPU) + " tiles");
  for (double x : {f.tileClockFrequency, f.interIpuBytesPerCycle, f.hostBytesPerCycle})
    if (!(x > 0 && x < 1e30))
      r_.fail("a target figure (clock or bytes per cycle) is not a positive number");
  if (f.exchangeBytesPerCycle == 0 || f.numWorkerContexts != MultiVertex::numWorkers())
    r_.fail("the target's exchange rate or worker count is not valid");
  return Target::fromFigures(f);
}

void ExecutableReader::codelets(Graph &graph) {
  const std::uint64_t n = r_.count("codelet files", 27);
  for (std::uint64_t i = 0; i < n; ++i) {
    const bool object = flag("codelet kind");
    const std::string path = r_.str("codelet path");
    const std::string flags = r_.str("codelet flags");
    const std::string sha = r_.str("codelet hash");
    if (path.empty() || path.find('\0') != std::string::npos)
      r_.fail("a codelet path is empty or holds a NUL byte");
    if (object && !flags.empty())
      r_.fail("codelet object '" + path + "' has compile flags");
    checkFlags(flags, path);
    std::string now;
    try {
      now = fileSha256(path);
    } catch (const poplar_error &) {
      now = "(missing)";
    }
    if (now != sha)
      throw poplar_error("Executable::deserialize: the executable needs codelet file '" + path +
                         "' as it was when serialized (SHA-256 " + sha.substr(0, 64) +
                         "), but it is " + (now == "(missing)" ? "missing" : "different now") +
                         "; restore it, or build the graph and call compileGraph again");
    graph.addCodelets(path, object ? CodeletFileType::Object : CodeletFileType::CppSource, flags);
  }
}

void ExecutableReader::variable(Graph &graph, std::uint64_t &total) {
  const std::string name = r_.str("variable name");
  const Type &t = type("variable type");
  std::uint64_t n = 0;
  const auto dims = shape("variable shape", n);
  total += n;
  bytes_ += n * t.sizeInBytes(); // n <= kMaxElements: no overflow
  if (total > kMaxElements ||
      (graph.getTarget().checksMemory() && bytes_ > graph.getTarget().getMemoryBytes()))
    r_.fail("the variables need more than the target's memory or " + std::to_string(kMaxElements) +
            " elements");
  const bool constant = flag("variable constant");
  Tensor v = graph.addVariable(t, dims, name);
  Tensor flat = v.flatten();
  const std::uint64_t runs = r_.count("tile runs", 12);
  std::uint64_t pos = 0;
  for (std::uint64_t i = 0; i < runs; ++i) {
    const auto tile = r_.get<std::int32_t>("tile");
    const auto len = r_.get<std::uint64_t>("tile run");
    if (len == 0 || len > n - pos || tile < -1)
      r_.fail("the tile mapping of variable '" + name + "' does not cover it run by run");
    if (tile >= 0)
      graph.setTileMapping(flat.slice(pos, pos + len), static_cast<unsigned>(tile));
    pos += len;
  }
  if (pos != n)
    r_.fail("the tile mapping of variable '" + name + "' covers " + std::to_string(pos) + " of " +
            std::to_string(n) + " elements");
  const std::string init = r_.str("initial value");
  if (!init.empty() && init.size() != n * t.sizeInBytes())
    r_.fail("the initial value of variable '" + name + "' has " + std::to_string(init.size()) +
            " bytes, not " + std::to_string(n * t.sizeInBytes()));
  auto &info = graph.state()->vars.back();
  info.isConstant = constant;
  info.init.assign(init.begin(), init.end());
}

void ExecutableReader::variables(Graph &graph) {
  const std::uint64_t n = r_.count("variables", 40);
  std::uint64_t total = 0;
  for (std::uint64_t i = 0; i < n; ++i)
    variable(graph, total);
  const std::uint64_t sets = r_.count("compute sets", 8);
  for (std::uint64_t i = 0; i < sets; ++i)
    graph.addComputeSet(r_.str("compute set name"));
}

Tensor ExecutableReader::tensor(const GraphState &g) {
  if (!flag("tensor present"))
    return Tensor();
  const Type &t = type("tensor type");
  std::uint64_t n = 0;
  auto dims = shape("tensor shape", n);
  const std::uint64_t count = r_.count("tensor regions", 20);
  std::vector<TensorRegion> regions;
  std::uint64_t covered = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    TensorRegion reg;
    reg.var = r_.get<std::uint32_t>("region variable");
    reg.begin = r_.get<std::uint64_t>("region begin");
    reg.end = r_.get<std::uint64_t>("region end");
    if (reg.var >= g.vars.size() || reg.begin >= reg.end || reg.end > g.vars[reg.var].numElements ||
        g.vars[reg.var].type != t)
      r_.fail("a tensor refers to elements or a type that its variable does not have");
    covered += reg.end - reg.begin;
    if (covered > n)
      break;
    regions.push_back(reg);
  }
  if (covered != n)
    r_.fail("a tensor's regions do not match its shape");
  return Tensor(g.id, t, std::move(dims), std::move(regions));
}

void ExecutableReader::field(Graph &graph, VertexRef v) {
  const std::string name = r_.str("field name");
  const bool connected = flag("field connected");
  const bool sizeSet = flag("field size set");
  const bool hasValue = flag("field has a value");
  const std::uint64_t n = r_.count("field tensors", 2);
  std::vector<std::pair<bool, Tensor>> entries;
  for (std::uint64_t i = 0; i < n; ++i) {
    const bool set = flag("field entry set");
    entries.emplace_back(set, tensor(*graph.state()));
  }
  const std::uint64_t nValues = r_.count("field values", 8);
  std::vector<double> values;
  for (std::uint64_t i = 0; i < nValues; ++i)
    values.push_back(r_.get<double>("field value"));
  if (sizeSet) {
    graph.setFieldSize(v[name], n);
    for (std::uint64_t i = 0; i < n; ++i)
      if (entries[i].first)
        graph.connect(v[name][i], entries[i].second);
  } else if (connected) {
    if (n != 1)
      r_.fail("field '" + name + "' is connected to " + std::to_string(n) + " tensors, not one");
    graph.connect(v[name], entries[0].second);
  } else if (n != 0) {
    r_.fail("field '" + name + "' has tensors but is not connected");
  }
  if (!hasValue)
    return;
  const VertexInfo &info = graph.state()->vertices[v.getId()];
  auto it = info.cls->fieldIndex.find(name);
  if (it == info.cls->fieldIndex.end())
    r_.fail("vertex '" + info.cls->name + "' has no field '" + name + "'");
  if (info.cls->desc->fields[it->second].shape == kShapeScalar && values.size() == 1)
    graph.setInitialValue(v[name], values[0]);
  else
    graph.setInitialValue(v[name], ArrayRef<double>(values));
}

void ExecutableReader::vertices(Graph &graph) {
  const std::uint64_t n = r_.count("vertices", 33);
  const auto sets = graph.state()->computeSets.size();
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto cs = r_.get<std::uint32_t>("vertex compute set");
    const std::string cls = r_.str("vertex class");
    const auto tile = r_.get<std::int32_t>("vertex tile");
    const bool hasEstimate = flag("vertex has an estimate");
    const auto cycles = r_.get<std::uint64_t>("vertex cycles");
    if (cs >= sets || tile < -1)
      r_.fail("vertex " + std::to_string(i) + " names compute set " + std::to_string(cs) +
              " or tile " + std::to_string(tile) + ", which do not exist");
    VertexRef v = graph.addVertex(ComputeSet(cs), cls);
    const std::uint64_t fields = r_.count("vertex fields", 35);
    for (std::uint64_t f = 0; f < fields; ++f)
      field(graph, v);
    if (tile >= 0)
      graph.setTileMapping(v, static_cast<unsigned>(tile));
    if (hasEstimate)
      graph.setPerfEstimate(v, cycles);
  }
}

void ExecutableReader::streamsAndHandles(Graph &graph) {
  const std::uint64_t n = r_.count("streams", 26);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::string handle = r_.str("stream handle");
    const auto kind = r_.get<std::uint8_t>("stream kind");
    const Type &t = type("stream type");
    const auto elements = r_.get<std::uint64_t>("stream elements");
    if (kind > 1 || elements > kMaxElements)
      r_.fail("stream '" + handle.substr(0, 40) + "' has kind " + std::to_string(kind) + " and " +
              std::to_string(elements) + " elements");
    if (kind == static_cast<std::uint8_t>(DataStreamType::HostToDeviceFIFO))
      graph.addHostToDeviceFIFO(handle, t, elements);
    else
      graph.addDeviceToHostFIFO(handle, t, elements);
  }
  for (bool write : {true, false}) {
    const std::uint64_t count = r_.count("host read/write handles", 9);
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::string handle = r_.str("host handle");
      const Tensor t = tensor(*graph.state());
      write ? graph.createHostWrite(handle, t) : graph.createHostRead(handle, t);
    }
  }
}

program::Program ExecutableReader::node(Graph &graph, const std::vector<program::Program> &built) {
  NodeRecord n;
  n.kind = r_.get<std::uint8_t>("program kind");
  n.name = r_.str("program name");
  const std::uint64_t nKids = r_.count("program children", 4);
  std::uint64_t depth = 0, steps = 1;
  for (std::uint64_t i = 0; i < nKids; ++i) {
    const auto k = r_.get<std::uint32_t>("program child");
    if (k >= built.size())
      r_.fail("a program refers to program " + std::to_string(k) + ", not written before it");
    n.kids.push_back(built[k]);
    depth = std::max(depth, depth_[k]);
    steps = std::min(kMaxProgramSteps + 1, steps + steps_[k]);
  }
  depth_.push_back(depth + 1);
  steps_.push_back(steps);
  if (depth + 1 > kMaxProgramDepth || steps > kMaxProgramSteps)
    r_.fail("the programs nest deeper than " + std::to_string(kMaxProgramDepth) +
            " or expand to more than " + std::to_string(kMaxProgramSteps) + " steps");
  const GraphState &g = *graph.state();
  n.cs = r_.get<std::uint32_t>("compute set");
  n.src = tensor(g);
  n.dst = tensor(g);
  n.pred = tensor(g);
  n.handle = r_.str("stream handle");
  const std::uint64_t nCases = r_.count("switch cases", 4);
  for (std::uint64_t i = 0; i < nCases; ++i)
    n.cases.push_back(r_.get<std::int32_t>("switch case"));
  n.count = r_.get<std::uint32_t>("repeat count");
  n.whileTrue = flag("repeat while true");
  n.sync = r_.get<std::uint8_t>("sync type");
  return make(n, g);
}

// The program a record describes, made by the public constructors (which check it).
program::Program ExecutableReader::make(const NodeRecord &n, const GraphState &g) {
  using namespace program;
  auto need = [&](std::size_t k) {
    if (n.kids.size() != k || (n.kind != ProgramNode::Switch && !n.cases.empty()))
      r_.fail("a program of kind " + std::to_string(n.kind) + " has the wrong number of parts");
  };
  auto stream = [&](DataStreamType t) {
    auto it = g.streams.find(n.handle);
    if (it == g.streams.end() || it->second.type() != t)
      r_.fail("a stream copy names stream '" + n.handle.substr(0, 40) + "', which is not there");
    return it->second;
  };
  switch (n.kind) {
  case ProgramNode::Sequence: {
    Sequence s((DebugContext(n.name)));
    for (const auto &k : n.kids)
      s.add(k);
    need(n.kids.size());
    return s;
  }
  case ProgramNode::Execute:
    need(0);
    if (n.cs >= g.computeSets.size())
      r_.fail("a program executes compute set " + std::to_string(n.cs) + ", which does not exist");
    return Execute(ComputeSet(n.cs), n.name);
  case ProgramNode::Copy:
    need(0);
    return Copy(n.src, n.dst, false, n.name);
  case ProgramNode::StreamToTensor:
    need(0);
    return Copy(stream(DataStreamType::HostToDeviceFIFO), n.dst, false, n.name);
  case ProgramNode::TensorToStream:
    need(0);
    return Copy(n.src, stream(DataStreamType::DeviceToHostFIFO), false, n.name);
  case ProgramNode::Repeat:
    need(1);
    return Repeat(n.count, n.kids[0], n.name);
  case ProgramNode::RepeatWhile:
    need(2);
    if (n.whileTrue)
      return RepeatWhileTrue(n.kids[0], n.pred, n.kids[1], n.name);
    return RepeatWhileFalse(n.kids[0], n.pred, n.kids[1], n.name);
  case ProgramNode::If:
    need(2);
    return If(n.pred, n.kids[0], n.kids[1], n.name);
  case ProgramNode::Switch: {
    if (n.kids.size() != n.cases.size() + 1)
      r_.fail("a Switch has " + std::to_string(n.cases.size()) + " cases but " +
              std::to_string(n.kids.size()) + " bodies (cases and the default)");
    Switch s(n.pred, n.kids.back(), n.name);
    for (std::size_t i = 0; i < n.cases.size(); ++i)
      s.add(n.cases[i], n.kids[i]);
    return s;
  }
  case ProgramNode::Sync:
    need(0);
    if (n.sync > static_cast<std::uint8_t>(SyncType::GLOBAL))
      r_.fail("the sync type is " + std::to_string(n.sync));
    return Sync(static_cast<SyncType>(n.sync), n.name);
  case ProgramNode::Print:
    need(0);
    return PrintTensor(n.name, n.src);
  default:
    r_.fail("a program has kind " + std::to_string(n.kind) + ", which does not exist");
  }
}

std::vector<program::Program> ExecutableReader::programs(Graph &graph) {
  const std::uint64_t n = r_.count("programs", 60);
  std::vector<program::Program> built;
  for (std::uint64_t i = 0; i < n; ++i)
    built.push_back(node(graph, built)); // each constructor sets the node's name
  const std::uint64_t nRoots = r_.count("engine programs", 4);
  std::vector<program::Program> roots;
  std::uint64_t steps = 0;
  for (std::uint64_t i = 0; i < nRoots; ++i) {
    const auto k = r_.get<std::uint32_t>("engine program");
    if (k >= built.size())
      r_.fail("engine program " + std::to_string(i) + " refers to program " + std::to_string(k) +
              ", which does not exist");
    steps += steps_[k];
    if (steps > kMaxProgramSteps)
      r_.fail("the programs expand to more than " + std::to_string(kMaxProgramSteps) + " steps");
    roots.push_back(built[k]);
  }
  return roots;
}

std::unique_ptr<EngineImpl> ExecutableReader::read() {
  Graph graph(target());
  codelets(graph);
  variables(graph);
  vertices(graph);
  streamsAndHandles(graph);
  const auto progs = programs(graph);
  if (r_.left() != 0)
    r_.fail(std::to_string(r_.left()) + " bytes follow the programs");
  return std::make_unique<EngineImpl>(graph, progs);
}

} // namespace

std::unique_ptr<EngineImpl> readExecutable(std::istream &in) {
  const std::string payload = readPayload(in);
  try {
    return ExecutableReader(payload).read();
  } catch (const poplar_error &e) {
    // Names in the message come from the stream: keep them printable.
    std::string what = e.what();
    for (char &c : what)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\n') ||
          static_cast<unsigned char>(c) >= 0x7f)
        c = '?';
    if (what.rfind("Executable::deserialize", 0) == 0)
      throw poplar_error(what);
    throw poplar_error("Executable::deserialize: the executable does not describe a valid graph: " +
                       what);
  }
}

} // namespace detail
} // namespace poplar
