// The Engine: checks a graph as Poplar's graph compiler would (connections,
// tile locality, memory per tile), resolves every vertex field to a pointer,
// every copy to memcpy runs, then interprets the program tree. Nothing is
// looked up by name and nothing is allocated while a program runs.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "GraphState.hpp"
#include "ProgramNode.hpp"
#include "TensorText.hpp"
#include "ThreadPool.hpp"
#include "TypeConvert.hpp"
#include "poplar/Engine.hpp"
#include "poplar/exceptions.hpp"

namespace poplar {
namespace detail {

namespace {

constexpr unsigned kWorkers = MultiVertex::numWorkers();

struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, FreeDeleter>;

Buffer allocate(std::size_t bytes) {
  std::size_t size = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  void *p = std::aligned_alloc(64, size);
  if (!p)
    throw graph_memory_allocation_error("out of host memory allocating " + std::to_string(bytes) +
                                        " bytes");
  std::memset(p, 0, size);
  return Buffer(static_cast<char *>(p));
}

struct Seg {
  char *dst;
  const char *src;
  std::size_t bytes;
};

void addSeg(std::vector<Seg> &segs, char *dst, const char *src, std::size_t bytes) {
  if (!bytes)
    return;
  if (!segs.empty() && segs.back().dst + segs.back().bytes == dst &&
      segs.back().src + segs.back().bytes == src) {
    segs.back().bytes += bytes;
    return;
  }
  segs.push_back({dst, src, bytes});
}

struct VertexInstance {
  void *obj;
  bool (*compute)(void *);
  void (*worker)(void *, unsigned);
  unsigned id;
  // Rearrangement copies for fields connected to non-contiguous tensors.
  unsigned preBegin, preEnd, postBegin, postEnd;
};

struct CompiledComputeSet {
  std::string name;
  std::vector<VertexInstance> instances; // grouped by tile, in vertex order within a tile
  std::vector<std::pair<std::size_t, std::size_t>> chunks; // instance ranges, tile-aligned
  std::vector<Seg> pre, post;
  std::atomic<unsigned> failedVertex{~0u};
  std::uint64_t computeCycles = 0, vertices = 0, tilesUsed = 0;
};

struct StreamConnection {
  char *begin = nullptr;
  char *end = nullptr;
  std::size_t offset = 0;
  std::function<void(void *)> callback;
  std::vector<char> scratch;
};

struct Step {
  ProgramNode::Kind kind;
  std::vector<Step> children;
  unsigned count = 0;
  int profile = -1;
  CompiledComputeSet *cs = nullptr;
  std::vector<Seg> segs;
  std::vector<std::pair<std::size_t, std::size_t>> copyChunks; // segs ranges run in parallel
  std::vector<std::pair<char *, std::size_t>> runs; // stream copies: tensor runs in order
  std::size_t bytes = 0;
  std::string stream;
  StreamConnection *conn = nullptr;
  const char *predicate = nullptr;
  Type predicateType;
  bool whileTrue = true;
  std::vector<std::int64_t> caseValues; // Switch; children: cases, then the default
  Tensor printed;
};

std::string humanBytes(std::uint64_t b) {
  std::ostringstream os;
  if (b >= (1u << 20))
    os << std::fixed << std::setprecision(2) << double(b) / (1 << 20) << " MiB";
  else if (b >= 1024)
    os << std::fixed << std::setprecision(1) << double(b) / 1024 << " KiB";
  else
    os << b << " B";
  return os.str();
}

std::uint64_t ceilDiv(std::uint64_t a, double b) {
  if (a == 0)
    return 0;
  double q = double(a) / b;
  std::uint64_t r = static_cast<std::uint64_t>(q);
  return double(r) < q ? r + 1 : r;
}

} // namespace

class EngineImpl {
public:
  EngineImpl(const Graph &graph, ArrayRef<program::Program> progs);
  ~EngineImpl();

  GraphState g;
  Target target;
  std::vector<Buffer> data;  // per variable
  std::vector<Buffer> extra; // vertex objects, lists, state, rearrangements
  std::vector<std::pair<void *, void (*)(void *)>> constructed;
  std::map<unsigned, std::unique_ptr<CompiledComputeSet>> computeSets;
  std::vector<Step> programs;
  std::vector<ProfileStepEstimate> profile;
  std::map<std::string, StreamConnection> streams;
  std::map<std::string, std::vector<std::pair<char *, std::size_t>>> hostWrites, hostReads;
  std::vector<std::uint64_t> tileBytes;
  std::uint64_t runs = 0;
  bool loaded = false;

  char *address(unsigned var, std::size_t element) {
    return data[var].get() + element * g.vars[var].type.sizeInBytes();
  }
  std::vector<std::pair<char *, std::size_t>> tensorRuns(const Tensor &t) {
    std::vector<std::pair<char *, std::size_t>> out;
    for (const auto &r : t.regions()) {
      std::size_t sz = g.vars[r.var].type.sizeInBytes();
      char *p = address(r.var, r.begin);
      if (!out.empty() && out.back().first + out.back().second == p)
        out.back().second += (r.end - r.begin) * sz;
      else
        out.emplace_back(p, (r.end - r.begin) * sz);
    }
    return out;
  }

  void checkMapped();
  void allocateVariables();
  CompiledComputeSet &compileComputeSet(unsigned cs);
  void checkMemory();
  Step compile(const ProgramNode &n);
  void splitForThreads(Step &s, const ProgramNode &n);
  void execute(const Step &s);
  void runComputeSet(CompiledComputeSet &cs);
  void print(const Step &s);
  std::ostream *printStream = nullptr;
  std::string tensorName(const Tensor &t) const { return describeTensor(g, t); }
  std::string vertexName(unsigned id) const {
    const VertexInfo &v = g.vertices[id];
    return "vertex '" + v.cls->name + "' (id " + std::to_string(id) + ", compute set '" +
           g.computeSets[v.computeSet].name + "')";
  }
  int addProfile(const std::string &name, const char *kind) {
    ProfileStepEstimate p;
    p.name = name;
    p.kind = kind;
    profile.push_back(p);
    return static_cast<int>(profile.size()) - 1;
  }

  // Vertex-state bytes charged per field, as an IPU would lay them out (estimate).
  static std::uint64_t fieldStateBytes(const popsnn_field_desc &d, const FieldState &fs) {
    if (d.access == kFieldState) {
      if (d.shape == kShapeVector)
        return 8 + fs.values.size() * d.elementSize;
      return (std::max(d.elementSize, 4u) + 3) / 4 * 4;
    }
    switch (d.shape) {
    case kShapeScalar:
      return 4;
    case kShapeVector: {
      auto l = static_cast<VectorLayout>(d.layout);
      if (l == VectorLayout::SPAN)
        return 8;
      if (l == VectorLayout::ONE_PTR || l == VectorLayout::COMPACT_PTR)
        return 4;
      return 2;
    }
    case kShapeVectorList:
      return 8 + 8 * fs.tensors.size();
    default:
      return 0;
    }
  }
};

EngineImpl::EngineImpl(const Graph &graph, ArrayRef<program::Program> progs)
    : g(*graph.state()), target(graph.state()->target) {
  // The copied vertex records still point at the graph's class table; re-point them.
  for (auto &v : g.vertices)
    v.cls = &g.vertexClasses.at(v.cls->name);
  checkMapped();
  allocateVariables();
  tileBytes.assign(target.getNumTiles(), 0);
  for (unsigned cs = 0; cs < g.computeSets.size(); ++cs)
    compileComputeSet(cs);
  checkMemory();
  for (const auto &kv : g.streams)
    streams[kv.first];
  for (const auto &kv : g.hostWrites)
    hostWrites[kv.first] = tensorRuns(kv.second.tensor);
  for (const auto &kv : g.hostReads)
    hostReads[kv.first] = tensorRuns(kv.second.tensor);
  for (const auto &p : progs)
    programs.push_back(compile(*p.node()));
}

EngineImpl::~EngineImpl() {
  for (auto &c : constructed)
    c.second(c.first);
}

void EngineImpl::checkMapped() {
  for (const auto &v : g.vars) {
    auto it = std::find(v.tile.begin(), v.tile.end(), -1);
    if (it != v.tile.end()) {
      std::size_t e = static_cast<std::size_t>(it - v.tile.begin());
      std::size_t count = static_cast<std::size_t>(std::count(v.tile.begin(), v.tile.end(), -1));
      throw invalid_tile_mapping("tensor '" + v.name + "' has " + std::to_string(count) + " of " +
                                 std::to_string(v.numElements) +
                                 " elements without a tile mapping (first: flat element " +
                                 std::to_string(e) +
                                 "); map every element with graph.setTileMapping before "
                                 "creating the Engine");
    }
  }
}

void EngineImpl::allocateVariables() {
  data.reserve(g.vars.size());
  for (const auto &v : g.vars) {
    std::size_t bytes = v.numElements * v.type.sizeInBytes();
    data.push_back(allocate(bytes));
    if (!v.init.empty())
      std::memcpy(data.back().get(), v.init.data(), bytes);
  }
}

CompiledComputeSet &EngineImpl::compileComputeSet(unsigned csId) {
  auto cs = std::make_unique<CompiledComputeSet>();
  cs->name = g.computeSets[csId].name;
  const auto &ids = g.computeSets[csId].vertices;
  // Order by tile, keeping the order vertices were added within a tile.
  std::vector<unsigned> order(ids.begin(), ids.end());
  for (unsigned id : order)
    if (g.vertices[id].tile < 0)
      throw invalid_tile_mapping(vertexName(id) +
                                 " has no tile; call graph.setTileMapping(vertex, tile)");
  std::stable_sort(order.begin(), order.end(),
                   [&](unsigned a, unsigned b) { return g.vertices[a].tile < g.vertices[b].tile; });

  std::vector<std::uint64_t> tileCost;
  std::vector<std::int32_t> tileOf;
  std::map<std::int32_t, std::array<std::uint64_t, kWorkers>> workerLoad;
  std::map<std::int32_t, std::uint64_t> rearrangeBytes;
  for (unsigned id : order) {
    const VertexInfo &v = g.vertices[id];
    const popsnn_vertex_desc &d = *v.cls->desc;
    const std::int32_t tile = v.tile;
    Buffer obj = allocate(std::max<std::size_t>(d.size, 1));
    d.construct(obj.get());
    constructed.emplace_back(obj.get(), d.destroy);
    VertexInstance inst{obj.get(), d.compute, d.computeWorker, id, 0, 0, 0, 0};
    inst.preBegin = inst.preEnd = static_cast<unsigned>(cs->pre.size());
    inst.postBegin = inst.postEnd = static_cast<unsigned>(cs->post.size());
    std::uint64_t stateBytes = 8;

    for (unsigned f = 0; f < d.numFields; ++f) {
      const popsnn_field_desc &fd = d.fields[f];
      const FieldState &fs = v.fields[f];
      const std::string where =
          vertexName(id) + " on tile " + std::to_string(tile) + ", field '" + fd.name + "'";
      stateBytes += fieldStateBytes(fd, fs);
      auto *raw = static_cast<RawSpan *>(fd.address(obj.get()));
      if (fd.access == kFieldState) {
        if (!fs.hasValue)
          continue; // keeps the member's own initialiser
        const Type *et = typeFromName(fd.element);
        if (fd.shape == kShapeScalar) {
          storeAs(*et, fs.values[0], raw);
        } else {
          Buffer store = allocate(fs.values.size() * fd.elementSize);
          for (std::size_t i = 0; i < fs.values.size(); ++i)
            storeAs(*et, fs.values[i], store.get() + i * fd.elementSize);
          raw->ptr = store.get();
          raw->size = static_cast<unsigned>(fs.values.size());
          extra.push_back(std::move(store));
        }
        continue;
      }
      if (fd.shape == kShapeUnsupported)
        continue;
      if (!fs.connected)
        throw graph_connection_error(where +
                                     " is not connected; connect a tensor with "
                                     "graph.connect(v[\"" +
                                     std::string(fd.name) + "\"], tensor)");
      // Bind one tensor to a span; non-contiguous tensors get an on-tile buffer
      // with gather/scatter copies around the compute set, as Poplar rearranges.
      auto bind = [&](const Tensor &t, RawSpan &span) {
        for (const auto &r : t.regions()) {
          if (fd.access != kFieldInput && g.vars[r.var].isConstant)
            throw graph_connection_error(where + " writes to constant '" + g.vars[r.var].name +
                                         "'; connect a variable, or make the field an Input");
          const auto &tiles = g.vars[r.var].tile;
          for (std::size_t e = r.begin; e < r.end; ++e)
            if (tiles[e] != tile)
              throw invalid_tile_mapping(
                  where + " is connected to tensor " + tensorName(t) + " whose element " +
                  std::to_string(e) + " of '" + g.vars[r.var].name + "' is on tile " +
                  std::to_string(tiles[e]) + "; a vertex may only touch data on its own tile: " +
                  "map the data to tile " + std::to_string(tile) + " or Copy it there first");
        }
        span.size = static_cast<unsigned>(t.numElements());
        auto runs = tensorRuns(t);
        if (runs.size() <= 1) {
          span.ptr = runs.empty() ? nullptr : runs[0].first;
          return;
        }
        std::size_t bytes = t.numElements() * t.elementType().sizeInBytes();
        Buffer tmp = allocate(bytes);
        span.ptr = tmp.get();
        std::size_t off = 0;
        for (const auto &run : runs) {
          if (fd.access != kFieldOutput)
            addSeg(cs->pre, tmp.get() + off, run.first, run.second);
          if (fd.access != kFieldInput)
            addSeg(cs->post, run.first, tmp.get() + off, run.second);
          off += run.second;
        }
        rearrangeBytes[tile] += bytes * ((fd.access == kFieldInOut) ? 2 : 1);
        stateBytes += bytes;
        extra.push_back(std::move(tmp));
      };
      if (fd.shape == kShapeVectorList) {
        Buffer list = allocate(fs.tensors.size() * sizeof(RawSpan));
        auto *spans = reinterpret_cast<RawSpan *>(list.get());
        for (std::size_t i = 0; i < fs.tensors.size(); ++i)
          bind(fs.tensors[i], spans[i]);
        raw->ptr = spans;
        raw->size = static_cast<unsigned>(fs.tensors.size());
        extra.push_back(std::move(list));
      } else {
        bind(fs.tensors[0], *raw);
      }
    }
    inst.preEnd = static_cast<unsigned>(cs->pre.size());
    inst.postEnd = static_cast<unsigned>(cs->post.size());
    tileBytes[static_cast<std::size_t>(tile)] += stateBytes;
    extra.push_back(std::move(obj));

    // Cost model: a Vertex occupies the least-loaded worker context for its
    // estimate; a MultiVertex occupies every worker context for its estimate.
    auto &load = workerLoad[tile];
    if (d.isMultiVertex) {
      for (auto &w : load)
        w += v.cycles;
    } else {
      *std::min_element(load.begin(), load.end()) += v.cycles;
    }
    if (tileOf.empty() || tileOf.back() != tile) {
      tileOf.push_back(tile);
      tileCost.push_back(0);
    }
    tileCost.back() += (v.hasEstimate ? v.cycles : 100) + 10;
    cs->instances.push_back(inst);
  }
  cs->vertices = order.size();
  cs->tilesUsed = workerLoad.size();
  for (const auto &kv : workerLoad) {
    std::uint64_t c = *std::max_element(kv.second.begin(), kv.second.end());
    c += ceilDiv(rearrangeBytes[kv.first], 8.0);
    cs->computeCycles = std::max(cs->computeCycles, c);
  }
  // Chunks of whole tiles with about equal cost, a few per thread.
  const std::size_t want = std::min<std::size_t>(tileOf.size(), std::size_t(poolThreads()) * 4);
  std::uint64_t total = 0;
  for (auto c : tileCost)
    total += c;
  std::size_t begin = 0, instIdx = 0;
  std::uint64_t acc = 0;
  for (std::size_t t = 0; t < tileOf.size(); ++t) {
    std::size_t endInst = instIdx;
    while (endInst < cs->instances.size() &&
           g.vertices[cs->instances[endInst].id].tile == tileOf[t])
      ++endInst;
    instIdx = endInst;
    acc += tileCost[t];
    if (want && (acc * want >= total * (cs->chunks.size() + 1) || t + 1 == tileOf.size())) {
      cs->chunks.emplace_back(begin, endInst);
      begin = endInst;
    }
  }
  auto &ref = *cs;
  computeSets[csId] = std::move(cs);
  return ref;
}

void EngineImpl::checkMemory() {
  // Variables: bytes per tile, each variable's share on a tile rounded up to 8.
  std::vector<std::vector<std::pair<std::uint64_t, unsigned>>> byTile(target.getNumTiles());
  for (unsigned vi = 0; vi < g.vars.size(); ++vi) {
    const auto &v = g.vars[vi];
    // Walk runs of equal tiles: variables are mostly mapped in long blocks.
    std::map<std::int32_t, std::uint64_t> perTile;
    for (std::size_t i = 0, j; i < v.tile.size(); i = j) {
      for (j = i + 1; j < v.tile.size() && v.tile[j] == v.tile[i];)
        ++j;
      perTile[v.tile[i]] += (j - i) * v.type.sizeInBytes();
    }
    for (const auto &kv : perTile) {
      std::uint64_t b = (kv.second + 7) / 8 * 8;
      tileBytes[static_cast<std::size_t>(kv.first)] += b;
      byTile[static_cast<std::size_t>(kv.first)].emplace_back(b, vi);
    }
  }
  if (!target.checksMemory())
    return;
  for (std::size_t t = 0; t < tileBytes.size(); ++t) {
    if (tileBytes[t] <= target.getBytesPerTile())
      continue;
    auto list = byTile[t];
    std::sort(list.rbegin(), list.rend());
    std::ostringstream os;
    os << "out of memory on tile " << t << ": " << tileBytes[t] << " bytes needed, "
       << target.getBytesPerTile() << " available (" << humanBytes(tileBytes[t]) << " of "
       << humanBytes(target.getBytesPerTile()) << "). Largest tensors on the tile:";
    for (std::size_t k = 0; k < list.size() && k < 3; ++k)
      os << (k ? "," : "") << " '" << g.vars[list[k].second].name << "' " << list[k].first << " B";
    std::uint64_t varBytes = 0;
    for (const auto &e : list)
      varBytes += e.first;
    os << "; vertex state and rearrangement buffers " << (tileBytes[t] - varBytes)
       << " B. Spread the tensors over more tiles (or use more IPUs)";
    throw graph_memory_allocation_error(os.str());
  }
}

// A large copy between different variables is split into byte-balanced chunks
// that the pool's threads copy at once; copies within a variable may overlap
// and stay one sequential memmove.
void EngineImpl::splitForThreads(Step &s, const ProgramNode &n) {
  constexpr std::size_t kParallelBytes = 1 << 19;
  std::size_t total = 0;
  for (const auto &seg : s.segs)
    total += seg.bytes;
  const std::size_t threads = poolThreads();
  if (threads < 2 || total < kParallelBytes)
    return;
  std::set<unsigned> srcVars;
  for (const auto &r : n.src.regions())
    srcVars.insert(r.var);
  for (const auto &r : n.dst.regions())
    if (srcVars.count(r.var))
      return;
  const std::size_t pieces = threads * 4, target = (total + pieces - 1) / pieces;
  std::vector<Seg> split;
  for (const auto &seg : s.segs)
    for (std::size_t off = 0; off < seg.bytes; off += target)
      split.push_back({seg.dst + off, seg.src + off, std::min(target, seg.bytes - off)});
  s.segs = std::move(split);
  std::size_t begin = 0, acc = 0;
  for (std::size_t i = 0; i < s.segs.size(); ++i) {
    acc += s.segs[i].bytes;
    if (acc >= target || i + 1 == s.segs.size()) {
      s.copyChunks.emplace_back(begin, i + 1);
      begin = i + 1;
      acc = 0;
    }
  }
}

Step EngineImpl::compile(const ProgramNode &n) {
  Step s;
  s.kind = n.kind;
  auto label = [&](const std::string &generated) { return n.name.empty() ? generated : n.name; };
  switch (n.kind) {
  case ProgramNode::Sequence:
    for (const auto &c : n.children)
      s.children.push_back(compile(*c));
    break;
  case ProgramNode::Repeat:
    s.count = n.count;
    s.children.push_back(compile(*n.children[0]));
    break;
  case ProgramNode::RepeatWhile:
  case ProgramNode::If:
  case ProgramNode::Switch: {
    if (n.predicate.graphId() != g.id)
      throw control_program_error("the predicate tensor belongs to another graph");
    const auto &r = n.predicate.regions()[0];
    s.predicate = address(r.var, r.begin);
    s.predicateType = g.vars[r.var].type;
    s.whileTrue = n.whileTrue;
    s.caseValues.assign(n.caseValues.begin(), n.caseValues.end());
    for (const auto &c : n.children)
      s.children.push_back(compile(*c));
    break;
  }
  case ProgramNode::Execute: {
    auto it = computeSets.find(n.cs.getId());
    if (it == computeSets.end())
      throw control_program_error("Execute: the compute set does not belong to this graph");
    s.cs = it->second.get();
    s.profile = addProfile(label("Execute(" + s.cs->name + ")"), "compute");
    auto &p = profile[static_cast<std::size_t>(s.profile)];
    p.vertices = s.cs->vertices;
    p.tilesUsed = s.cs->tilesUsed;
    p.computeCycles = s.cs->computeCycles;
    p.syncs = 1;
    break;
  }
  case ProgramNode::Copy: {
    if (n.src.graphId() != g.id || n.dst.graphId() != g.id)
      throw control_program_error("Copy: a tensor belongs to another graph");
    for (const auto &r : n.dst.regions())
      if (g.vars[r.var].isConstant)
        throw control_program_error("Copy: the destination '" + g.vars[r.var].name +
                                    "' is a constant; copy into a variable");
    s.profile = addProfile(label("Copy(" + tensorName(n.src) + " -> " + tensorName(n.dst) + ")"),
                           "exchange");
    auto &p = profile[static_cast<std::size_t>(s.profile)];
    std::vector<std::uint64_t> sent(target.getNumTiles(), 0), recv(target.getNumTiles(), 0),
        onTile(target.getNumTiles(), 0);
    std::set<std::int32_t> tiles;
    const auto &sr = n.src.regions();
    const auto &dr = n.dst.regions();
    const std::size_t sz = n.src.elementType().sizeInBytes();
    std::size_t i = 0, j = 0, si = sr.empty() ? 0 : sr[0].begin, dj = dr.empty() ? 0 : dr[0].begin;
    while (i < sr.size() && j < dr.size()) {
      std::size_t len = std::min(sr[i].end - si, dr[j].end - dj);
      addSeg(s.segs, address(dr[j].var, dj), address(sr[i].var, si), len * sz);
      const auto &st = g.vars[sr[i].var].tile;
      const auto &dt = g.vars[dr[j].var].tile;
      std::int32_t lastA = -1, lastB = -1;
      for (std::size_t k = 0; k < len; ++k) {
        std::int32_t a = st[si + k], b = dt[dj + k];
        if (a != lastA || b != lastB) {
          tiles.insert(a);
          tiles.insert(b);
          lastA = a;
          lastB = b;
        }
        if (a == b) {
          onTile[static_cast<std::size_t>(a)] += sz;
          p.onTileCopyBytes += sz;
        } else {
          sent[static_cast<std::size_t>(a)] += sz;
          recv[static_cast<std::size_t>(b)] += sz;
          if (unsigned(a) / target.getTilesPerIPU() == unsigned(b) / target.getTilesPerIPU())
            p.exchangeBytesWithinIPU += sz;
          else
            p.exchangeBytesBetweenIPUs += sz;
        }
      }
      si += len;
      dj += len;
      if (si == sr[i].end && ++i < sr.size())
        si = sr[i].begin;
      if (dj == dr[j].end && ++j < dr.size())
        dj = dr[j].begin;
    }
    splitForThreads(s, n);
    std::uint64_t maxTile = 0, maxOnTile = 0;
    for (std::size_t t = 0; t < sent.size(); ++t) {
      maxTile = std::max({maxTile, sent[t], recv[t]});
      maxOnTile = std::max(maxOnTile, onTile[t]);
    }
    p.tilesUsed = tiles.size();
    p.computeCycles = ceilDiv(maxOnTile, 8.0);
    p.exchangeCycles = ceilDiv(maxTile, double(target.getExchangeBytesPerCycle())) +
                       ceilDiv(p.exchangeBytesBetweenIPUs, target.getInterIPUBytesPerCycle());
    p.syncs = 1;
    break;
  }
  case ProgramNode::StreamToTensor:
  case ProgramNode::TensorToStream: {
    const bool in = n.kind == ProgramNode::StreamToTensor;
    const Tensor &t = in ? n.dst : n.src;
    if (t.graphId() != g.id)
      throw control_program_error("Copy: the tensor belongs to another graph");
    s.stream = n.stream.handle();
    if (in)
      for (const auto &r : t.regions())
        if (g.vars[r.var].isConstant)
          throw control_program_error("Copy: stream '" + s.stream + "' writes to constant '" +
                                      g.vars[r.var].name + "'; copy into a variable");
    if (!g.streams.count(s.stream))
      throw stream_connection_error("Copy: stream '" + s.stream +
                                    "' does not belong to this graph");
    s.conn = &streams[s.stream];
    s.runs = tensorRuns(t);
    s.bytes = t.numElements() * t.elementType().sizeInBytes();
    s.conn->scratch.resize(std::max(s.conn->scratch.size(), s.bytes));
    s.profile =
        addProfile(label(std::string(in ? "StreamCopy(" + s.stream + " -> " + tensorName(t)
                                        : "StreamCopy(" + tensorName(t) + " -> " + s.stream) +
                         ")"),
                   "stream");
    auto &p = profile[static_cast<std::size_t>(s.profile)];
    p.hostBytes = s.bytes;
    p.exchangeCycles = ceilDiv(s.bytes, target.getHostBytesPerCycle());
    p.syncs = 1;
    std::set<std::int32_t> tiles;
    for (const auto &r : t.regions())
      for (std::size_t e = r.begin; e < r.end; ++e)
        if (e == r.begin || g.vars[r.var].tile[e] != g.vars[r.var].tile[e - 1])
          tiles.insert(g.vars[r.var].tile[e]);
    p.tilesUsed = tiles.size();
    break;
  }
  case ProgramNode::Print: {
    if (n.src.graphId() != g.id)
      throw control_program_error("PrintTensor: the tensor belongs to another graph");
    // Untitled, Poplar prints the tensor's debug name (its variable's, here).
    s.stream = n.name;
    if (s.stream.empty() && !n.src.regions().empty())
      s.stream = g.vars[n.src.regions().front().var].name;
    s.printed = n.src;
    break;
  }
  case ProgramNode::Sync: {
    s.profile =
        addProfile(label(n.sync == SyncType::INTERNAL ? "Sync(internal)" : "Sync(global)"), "sync");
    profile[static_cast<std::size_t>(s.profile)].syncs = 1;
    break;
  }
  }
  if (s.profile >= 0) {
    auto &p = profile[static_cast<std::size_t>(s.profile)];
    p.syncCycles = p.syncs * target.getSyncCycles();
    p.cycles = p.computeCycles + p.exchangeCycles + p.syncCycles;
  }
  return s;
}

namespace {

void runCopyChunk(void *ctx, std::size_t c) {
  const Step &s = *static_cast<const Step *>(ctx);
  for (std::size_t i = s.copyChunks[c].first; i < s.copyChunks[c].second; ++i)
    std::memcpy(s.segs[i].dst, s.segs[i].src, s.segs[i].bytes);
}

struct ChunkContext {
  CompiledComputeSet *cs;
};

void runChunk(void *ctx, std::size_t c) {
  CompiledComputeSet &cs = *static_cast<ChunkContext *>(ctx)->cs;
  const auto range = cs.chunks[c];
  for (std::size_t i = range.first; i < range.second; ++i) {
    const VertexInstance &v = cs.instances[i];
    for (unsigned k = v.preBegin; k < v.preEnd; ++k)
      std::memcpy(cs.pre[k].dst, cs.pre[k].src, cs.pre[k].bytes);
    if (v.worker) {
      for (unsigned w = 0; w < kWorkers; ++w)
        v.worker(v.obj, w);
    } else if (!v.compute(v.obj)) {
      unsigned expected = ~0u;
      cs.failedVertex.compare_exchange_strong(expected, v.id);
    }
    for (unsigned k = v.postBegin; k < v.postEnd; ++k)
      std::memcpy(cs.post[k].dst, cs.post[k].src, cs.post[k].bytes);
  }
}

} // namespace

void EngineImpl::runComputeSet(CompiledComputeSet &cs) {
  ChunkContext ctx{&cs};
  parallelFor(cs.chunks.size(), &runChunk, &ctx);
  unsigned failed = cs.failedVertex.exchange(~0u);
  if (failed != ~0u)
    throw poplar_error(vertexName(failed) + " on tile " + std::to_string(g.vertices[failed].tile) +
                       " returned false from compute()");
}

void EngineImpl::execute(const Step &s) {
  if (s.profile >= 0)
    ++profile[static_cast<std::size_t>(s.profile)].executions;
  switch (s.kind) {
  case ProgramNode::Sequence:
    for (const auto &c : s.children)
      execute(c);
    break;
  case ProgramNode::Repeat:
    for (unsigned k = 0; k < s.count; ++k)
      execute(s.children[0]);
    break;
  case ProgramNode::RepeatWhile:
    for (;;) {
      execute(s.children[0]);
      bool value = loadAs(s.predicateType, s.predicate) != 0;
      if (value != s.whileTrue)
        break;
      execute(s.children[1]);
    }
    break;
  case ProgramNode::If:
    execute(s.children[loadAs(s.predicateType, s.predicate) != 0 ? 0 : 1]);
    break;
  case ProgramNode::Switch: {
    const auto value = static_cast<std::int64_t>(loadAs(s.predicateType, s.predicate));
    std::size_t k = 0;
    while (k < s.caseValues.size() && s.caseValues[k] != value)
      ++k;
    execute(s.children[k]); // k == caseValues.size(): the default
    break;
  }
  case ProgramNode::Execute:
    runComputeSet(*s.cs);
    break;
  case ProgramNode::Copy:
    if (!s.copyChunks.empty()) {
      parallelFor(s.copyChunks.size(), &runCopyChunk, const_cast<Step *>(&s));
      break;
    }
    for (const auto &seg : s.segs)
      std::memmove(seg.dst, seg.src, seg.bytes);
    break;
  case ProgramNode::StreamToTensor:
  case ProgramNode::TensorToStream: {
    StreamConnection &c = *s.conn;
    const bool in = s.kind == ProgramNode::StreamToTensor;
    char *host;
    if (c.callback) {
      host = c.scratch.data();
      if (in)
        c.callback(host);
    } else if (c.begin) {
      if (c.end) {
        std::size_t size = static_cast<std::size_t>(c.end - c.begin);
        if (size < s.bytes)
          throw stream_connection_error("stream '" + s.stream + "': the connected buffer holds " +
                                        std::to_string(size) + " bytes but one transfer needs " +
                                        std::to_string(s.bytes));
        if (c.offset + s.bytes > size)
          c.offset = 0;
        host = c.begin + c.offset;
        c.offset += s.bytes;
      } else {
        host = c.begin;
      }
    } else {
      throw stream_connection_error("stream '" + s.stream +
                                    "' is not connected; call engine.connectStream(\"" + s.stream +
                                    "\", buffer) before engine.run()");
    }
    std::size_t off = 0;
    for (const auto &r : s.runs) {
      if (in)
        std::memcpy(r.first, host + off, r.second);
      else
        std::memcpy(host + off, r.first, r.second);
      off += r.second;
    }
    if (!in && c.callback)
      c.callback(host);
    break;
  }
  case ProgramNode::Sync:
    break;
  case ProgramNode::Print:
    print(s);
    break;
  }
}

void EngineImpl::print(const Step &s) {
  const Tensor &t = s.printed;
  const auto shape = t.shape();
  std::vector<double> values;
  values.reserve(t.numElements());
  for (const auto &r : t.regions())
    for (std::size_t e = r.begin; e < r.end; ++e)
      values.push_back(loadAs(g.vars[r.var].type, address(r.var, e)));
  const Type &type = t.elementType();
  const bool fp = type == FLOAT || type == HALF;
  (printStream ? *printStream : std::cout) << formatTensor(s.stream, shape, values, fp);
}

} // namespace detail

using detail::EngineImpl;

Engine::Engine(const Graph &graph, const program::Program &prog, const OptionFlags &, ProgressFunc)
    : impl_(std::make_unique<EngineImpl>(graph, ArrayRef<program::Program>(&prog, 1))) {}

Engine::Engine(const Graph &graph, ArrayRef<program::Program> progs, const OptionFlags &,
               ProgressFunc)
    : impl_(std::make_unique<EngineImpl>(graph, progs)) {}

Engine::Engine(Executable &&exe, const OptionFlags &) : impl_(std::move(exe.impl_)) {
  if (!impl_)
    throw poplar_error(
        "Engine: the Executable was already used by another Engine; compile the graph again");
}

Executable compileGraph(const Graph &graph, ArrayRef<program::Program> progs, const OptionFlags &,
                        Engine::ProgressFunc, const DebugContext &) {
  return Executable(std::make_unique<EngineImpl>(graph, progs));
}

Executable::Executable(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
Executable::Executable(Executable &&) noexcept = default;
Executable &Executable::operator=(Executable &&) noexcept = default;
Executable::~Executable() = default;

void Executable::serialize(std::ostream &) const {
  throw poplar_error(
      "Executable::serialize: popsnn's runtime cannot save a compiled graph (its "
      "codelets are host code loaded at run time); keep the Graph and call compileGraph again");
}

Executable Executable::deserialize(std::istream &) {
  throw poplar_error("Executable::deserialize: popsnn's runtime cannot load a saved executable; "
                     "build the Graph and call compileGraph instead");
}

Engine::Engine(Engine &&) noexcept = default;
Engine &Engine::operator=(Engine &&) noexcept = default;
Engine::~Engine() = default;

void Engine::load(const Device &device) {
  if (!device.valid())
    throw poplar_error("Engine::load: the device is empty; create one with "
                       "IPUModel().createDevice() or Device::createCPUDevice()");
  const Target &a = impl_->target, &b = device.getTarget();
  if (a.getNumIPUs() != b.getNumIPUs() || a.getTilesPerIPU() != b.getTilesPerIPU() ||
      a.getBytesPerTile() != b.getBytesPerTile() || a.getTargetType() != b.getTargetType())
    throw poplar_error("Engine::load: the graph was built for a " + toString(a.getTargetType()) +
                       " target of " + std::to_string(a.getNumIPUs()) + " IPU(s) x " +
                       std::to_string(a.getTilesPerIPU()) + " tiles but the device is a " +
                       toString(b.getTargetType()) + " of " + std::to_string(b.getNumIPUs()) +
                       " IPU(s) x " + std::to_string(b.getTilesPerIPU()) +
                       " tiles; build the graph with device.getTarget()");
  impl_->loaded = true;
}

void Engine::setPrintStream(std::ostream &stream) { impl_->printStream = &stream; }

void Engine::run(unsigned prog, const std::string &) {
  if (!impl_->loaded)
    throw poplar_error("Engine::run: call engine.load(device) before run()");
  if (prog >= impl_->programs.size())
    throw index_error("Engine::run(" + std::to_string(prog) + "): the engine has " +
                      std::to_string(impl_->programs.size()) + " program(s)");
  ++impl_->runs;
  impl_->execute(impl_->programs[prog]);
}

namespace {
detail::StreamConnection &connection(EngineImpl &e, StringRef handle) {
  auto it = e.streams.find(handle.str());
  if (it == e.streams.end()) {
    std::string known;
    for (const auto &kv : e.streams)
      known += (known.empty() ? "" : ", ") + kv.first;
    throw stream_connection_error("connectStream: no stream named '" + handle.str() +
                                  "' in the graph (streams: " + (known.empty() ? "none" : known) +
                                  ")");
  }
  return it->second;
}
} // namespace

void Engine::connectStream(StringRef handle, void *p) {
  auto &c = connection(*impl_, handle);
  c = {};
  c.begin = static_cast<char *>(p);
  c.scratch.resize(0);
  for (const auto &kv : impl_->g.streams)
    if (kv.first == handle.str())
      c.scratch.resize(kv.second.numElements() * kv.second.elementType().sizeInBytes());
}

void Engine::connectStream(StringRef handle, void *begin, void *end) {
  connectStream(handle, begin);
  auto &c = connection(*impl_, handle);
  c.end = static_cast<char *>(end);
  if (c.end < c.begin)
    throw stream_connection_error("connectStream('" + handle.str() + "'): end is before begin");
}

void Engine::connectStreamToCallback(StringRef handle, std::function<void(void *)> callback) {
  connectStream(handle, nullptr);
  connection(*impl_, handle).callback = std::move(callback);
}

void Engine::connectStreamToCallback(StringRef handle, unsigned,
                                     std::function<void(void *)> callback) {
  connectStreamToCallback(handle, std::move(callback));
}

void Engine::connectStreamToCallback(StringRef handle, StreamCallbackHandle callback) {
  if (!callback)
    throw poplar_error("connectStreamToCallback('" + handle.str() + "'): the callback is empty");
  const bool toDevice =
      impl_->g.streams.count(handle.str()) &&
      impl_->g.streams.at(handle.str()).type() == DataStreamType::HostToDeviceFIFO;
  std::shared_ptr<StreamCallback> cb(std::move(callback));
  connectStreamToCallback(handle, [cb, toDevice](void *p) {
    if (!toDevice || cb->prefetch(p) != StreamCallback::Result::Success)
      cb->fetch(p);
    cb->complete();
  });
}

void Engine::connectStreamToCallback(StringRef handle, unsigned, StreamCallbackHandle callback) {
  connectStreamToCallback(handle, std::move(callback));
}

namespace {
std::size_t runsBytes(const std::vector<std::pair<char *, std::size_t>> &runs) {
  std::size_t n = 0;
  for (const auto &r : runs)
    n += r.second;
  return n;
}
const std::vector<std::pair<char *, std::size_t>> &hostHandle(EngineImpl &e, bool write,
                                                              StringRef handle, const char *op) {
  if (!e.loaded)
    throw tensor_io_state_error(std::string(op) + ": call engine.load(device) first");
  auto &map = write ? e.hostWrites : e.hostReads;
  auto it = map.find(handle.str());
  if (it == map.end())
    throw stream_connection_error(std::string(op) + ": no handle '" + handle.str() +
                                  "'; create it with graph." +
                                  (write ? "createHostWrite" : "createHostRead") + "(\"" +
                                  handle.str() + "\", tensor) before building the Engine");
  return it->second;
}
void checkSize(StringRef handle, const char *op, std::size_t need, const void *b, const void *e) {
  std::size_t have =
      static_cast<std::size_t>(static_cast<const char *>(e) - static_cast<const char *>(b));
  if (have != need)
    throw stream_connection_error(std::string(op) + "('" + handle.str() + "'): the buffer holds " +
                                  std::to_string(have) + " bytes but the tensor needs " +
                                  std::to_string(need));
}
} // namespace

void Engine::readTensor(StringRef handle, void *buf, void *bufEnd) {
  const auto &runs = hostHandle(*impl_, false, handle, "readTensor");
  checkSize(handle, "readTensor", runsBytes(runs), buf, bufEnd);
  readTensor(handle, buf);
}

void Engine::writeTensor(StringRef handle, const void *buf, const void *bufEnd) {
  const auto &runs = hostHandle(*impl_, true, handle, "writeTensor");
  checkSize(handle, "writeTensor", runsBytes(runs), buf, bufEnd);
  writeTensor(handle, buf);
}

void Engine::readTensor(StringRef handle, void *buf) {
  const auto &runs = hostHandle(*impl_, false, handle, "readTensor");
  char *out = static_cast<char *>(buf);
  for (const auto &r : runs) {
    std::memcpy(out, r.first, r.second);
    out += r.second;
  }
}

void Engine::writeTensor(StringRef handle, const void *buf) {
  const auto &runs = hostHandle(*impl_, true, handle, "writeTensor");
  const char *in = static_cast<const char *>(buf);
  for (const auto &r : runs) {
    std::memcpy(r.first, in, r.second);
    in += r.second;
  }
}

ProfileEstimate Engine::getProfileEstimate() const {
  ProfileEstimate p;
  p.steps = impl_->profile;
  p.tileClockFrequency = impl_->target.getTileClockFrequency();
  p.runs = impl_->runs;
  p.tileBytes = impl_->tileBytes;
  for (const auto &s : p.steps) {
    p.computeCycles += s.executions * s.computeCycles;
    p.exchangeCycles += s.executions * s.exchangeCycles;
    p.syncCycles += s.executions * s.syncCycles;
    p.totalCycles += s.executions * s.cycles;
    p.exchangeBytesWithinIPU += s.executions * s.exchangeBytesWithinIPU;
    p.exchangeBytesBetweenIPUs += s.executions * s.exchangeBytesBetweenIPUs;
    p.onTileCopyBytes += s.executions * s.onTileCopyBytes;
    p.hostBytes += s.executions * s.hostBytes;
    p.syncs += s.executions * s.syncs;
    p.vertexExecutions += s.executions * s.vertices;
  }
  return p;
}

void Engine::resetExecutionProfile() {
  for (auto &s : impl_->profile)
    s.executions = 0;
  impl_->runs = 0;
}

void Engine::printProfileSummary(std::ostream &out, const OptionFlags &) const {
  const ProfileEstimate p = getProfileEstimate();
  const Target &t = impl_->target;
  std::ostringstream os;
  os << "popsnn profile summary: ESTIMATES from the IPU cost model, not measurements on an IPU\n"
     << "Target: " << toString(t.getTargetType()) << " " << t.getTargetArchString() << ", "
     << t.getNumIPUs() << " IPU(s) x " << t.getTilesPerIPU() << " tiles, "
     << t.getNumWorkerContexts() << " workers/tile, " << t.getTileClockFrequency() / 1e9 << " GHz, "
     << detail::humanBytes(t.getBytesPerTile()) << " per tile\n";
  std::uint64_t total = 0;
  std::size_t maxTile = 0;
  for (std::size_t i = 0; i < p.tileBytes.size(); ++i) {
    total += p.tileBytes[i];
    if (p.tileBytes[i] > p.tileBytes[maxTile])
      maxTile = i;
  }
  os << "Memory (estimate): " << detail::humanBytes(total) << " in total; fullest tile " << maxTile
     << " with " << detail::humanBytes(p.tileBytes.empty() ? 0 : p.tileBytes[maxTile]) << "\n"
     << "Runs: " << p.runs << "\n\n"
     << std::left << std::setw(44) << "Program step" << std::right << std::setw(9) << "kind"
     << std::setw(9) << "execs" << std::setw(12) << "cycles/exec" << std::setw(11) << "compute"
     << std::setw(11) << "exchange" << std::setw(13) << "exch bytes" << std::setw(12)
     << "inter-IPU B" << std::setw(11) << "host B" << "\n";
  for (const auto &s : p.steps) {
    std::string name = s.name.size() > 43 ? s.name.substr(0, 40) + "..." : s.name;
    os << std::left << std::setw(44) << name << std::right << std::setw(9) << s.kind << std::setw(9)
       << s.executions << std::setw(12) << s.cycles << std::setw(11) << s.computeCycles
       << std::setw(11) << s.exchangeCycles << std::setw(13) << s.exchangeBytesWithinIPU
       << std::setw(12) << s.exchangeBytesBetweenIPUs << std::setw(11) << s.hostBytes << "\n";
  }
  os << "\nTotals over all executions (estimates):\n"
     << "  compute cycles      " << p.computeCycles << "\n"
     << "  exchange cycles     " << p.exchangeCycles << "\n"
     << "  sync cycles         " << p.syncCycles << " (" << p.syncs << " syncs)\n"
     << "  total cycles        " << p.totalCycles << "\n"
     << "  exchange bytes      " << p.exchangeBytesWithinIPU << " within IPUs, "
     << p.exchangeBytesBetweenIPUs << " between IPUs, " << p.onTileCopyBytes << " on-tile, "
     << p.hostBytes << " host\n"
     << "  estimated time      " << std::setprecision(6) << p.estimatedSeconds() * 1e3 << " ms at "
     << t.getTileClockFrequency() / 1e9 << " GHz (estimate)\n";
  out << os.str();
}

} // namespace poplar
