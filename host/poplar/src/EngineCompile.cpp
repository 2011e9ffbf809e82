// The Engine's compile step: checks a graph as Poplar's graph compiler would
// (connections, tile locality, memory per tile), resolves every vertex field to a
// pointer and every copy to memcpy runs, and turns the program tree into steps.
#include "EngineImpl.hpp"

namespace poplar {
namespace detail {

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
  for (const auto &p : progs) {
    roots.push_back(p.node());
    programs.push_back(compile(*p.node()));
  }
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

// Whether tensor t, connected to a field of a vertex on `tile`, has elements on other
// tiles; counts the bytes that cross (in before the compute set for inputs, back after it
// for outputs) for the cycle estimate.
bool EngineImpl::countExchange(CompiledComputeSet &cs, const Tensor &t, unsigned access,
                               std::int32_t tile, const std::string &where) {
  const std::size_t sz = t.elementType().sizeInBytes();
  const unsigned ways = access == kFieldInOut ? 2 : 1;
  bool remote = false;
  for (const auto &r : t.regions()) {
    if (access != kFieldInput && g.vars[r.var].isConstant)
      throw graph_connection_error(where + " writes to constant '" + g.vars[r.var].name +
                                   "'; connect a variable, or make the field an Input");
    const auto &tiles = g.vars[r.var].tile;
    for (std::size_t e = r.begin; e < r.end; ++e) {
      const std::int32_t other = tiles[e];
      if (other == tile)
        continue;
      remote = true;
      const bool sameIPU =
          unsigned(other) / target.getTilesPerIPU() == unsigned(tile) / target.getTilesPerIPU();
      (sameIPU ? cs.exchangeBytesWithinIPU : cs.exchangeBytesBetweenIPUs) += sz * ways;
      if (access != kFieldOutput) {
        cs.tileSent[other] += sz;
        cs.tileReceived[tile] += sz;
      }
      if (access != kFieldInput) {
        cs.tileSent[tile] += sz;
        cs.tileReceived[other] += sz;
      }
    }
  }
  return remote;
}

// Points `span` at tensor t for field fd of a vertex on `tile`: at the tensor itself when it
// is one run on that tile, else at a buffer on the tile filled and emptied by copies.
void EngineImpl::bindTensor(CompiledComputeSet &cs, const popsnn_field_desc &fd, std::int32_t tile,
                            const std::string &where, const Tensor &t, RawSpan &span,
                            std::uint64_t &rearrange, std::uint64_t &stateBytes) {
  const bool remote = countExchange(cs, t, fd.access, tile, where);
  span.size = static_cast<unsigned>(t.numElements());
  auto runs = tensorRuns(t);
  if (runs.size() <= 1 && !remote) {
    span.ptr = runs.empty() ? nullptr : runs[0].first;
    return;
  }
  // An on-tile buffer: gathered/scattered around the vertex when the data are on its
  // tile but not contiguous (as Poplar rearranges), exchanged around the whole compute
  // set when some are on other tiles (as Poplar's compiler inserts an exchange).
  std::size_t bytes = t.numElements() * t.elementType().sizeInBytes();
  Buffer tmp = allocate(bytes);
  span.ptr = tmp.get();
  std::size_t off = 0;
  for (const auto &run : runs) {
    if (fd.access != kFieldOutput)
      addSeg(remote ? cs.exchangeIn : cs.pre, tmp.get() + off, run.first, run.second);
    if (fd.access != kFieldInput)
      addSeg(remote ? cs.exchangeOut : cs.post, run.first, tmp.get() + off, run.second);
    off += run.second;
  }
  if (!remote)
    rearrange += bytes * ((fd.access == kFieldInOut) ? 2 : 1);
  stateBytes += bytes;
  extra.push_back(std::move(tmp));
}

// Chunks of whole tiles with about equal cost, a few per thread.
void EngineImpl::chunkByTileCost(CompiledComputeSet &cs, const std::vector<std::int32_t> &tileOf,
                                 const std::vector<std::uint64_t> &tileCost) {
  const std::size_t want = std::min<std::size_t>(tileOf.size(), std::size_t(poolThreads()) * 4);
  std::uint64_t total = 0;
  for (auto c : tileCost)
    total += c;
  std::size_t begin = 0, instIdx = 0;
  std::uint64_t acc = 0;
  for (std::size_t t = 0; t < tileOf.size(); ++t) {
    std::size_t endInst = instIdx;
    while (endInst < cs.instances.size() && g.vertices[cs.instances[endInst].id].tile == tileOf[t])
      ++endInst;
    instIdx = endInst;
    acc += tileCost[t];
    if (want && (acc * want >= total * (cs.chunks.size() + 1) || t + 1 == tileOf.size())) {
      cs.chunks.emplace_back(begin, endInst);
      begin = endInst;
    }
  }
}

// Sets or binds every field of vertex `id` (its object at obj, on `tile`); returns the
// bytes of vertex state the tile holds for it.
std::uint64_t EngineImpl::bindFields(CompiledComputeSet &cs, unsigned id, char *obj,
                                     std::int32_t tile, std::uint64_t &rearrange) {
  const VertexInfo &v = g.vertices[id];
  const popsnn_vertex_desc &d = *v.cls->desc;
  std::uint64_t stateBytes = 8;
  for (unsigned f = 0; f < d.numFields; ++f) {
    const popsnn_field_desc &fd = d.fields[f];
    const FieldState &fs = v.fields[f];
    const std::string where =
        vertexName(id) + " on tile " + std::to_string(tile) + ", field '" + fd.name + "'";
    stateBytes += fieldStateBytes(fd, fs);
    auto *raw = static_cast<RawSpan *>(fd.address(obj));
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
      bindTensor(cs, fd, tile, where, t, span, rearrange, stateBytes);
    };
    if (fd.shape == kShapeVectorList || fd.shape == kShapeScalarList) {
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
  return stateBytes;
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
    const std::uint64_t stateBytes = bindFields(*cs, id, obj.get(), tile, rearrangeBytes[tile]);
    inst.preEnd = static_cast<unsigned>(cs->pre.size());
    inst.postEnd = static_cast<unsigned>(cs->post.size());
    tileBytes[static_cast<std::size_t>(tile)] += stateBytes;
    extra.push_back(std::move(obj));

    // Cost model, in tile cycles: a Vertex's estimate counts thread cycles, and a
    // barrel-scheduled worker context issues once every kWorkers tile cycles, so it
    // occupies the least-loaded context for kWorkers times its estimate. A
    // MultiVertex's estimate is already in tile cycles and occupies every context.
    auto &load = workerLoad[tile];
    if (d.isMultiVertex) {
      for (auto &w : load)
        w += v.cycles;
    } else {
      *std::min_element(load.begin(), load.end()) += std::uint64_t(kWorkers) * v.cycles;
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
  chunkByTileCost(*cs, tileOf, tileCost);
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

namespace {
// A program step's name in the profile: the one the user gave, else one made from its parts.
std::string labelOf(const ProgramNode &n, const std::string &generated) {
  return n.name.empty() ? generated : n.name;
}
} // namespace

void EngineImpl::compileExecute(Step &s, const ProgramNode &n) {
  auto it = computeSets.find(n.cs.getId());
  if (it == computeSets.end())
    throw control_program_error("Execute: the compute set does not belong to this graph");
  s.cs = it->second.get();
  s.profile = addProfile(labelOf(n, "Execute(" + s.cs->name + ")"), "compute");
  auto &p = profile[static_cast<std::size_t>(s.profile)];
  p.vertices = s.cs->vertices;
  p.tilesUsed = s.cs->tilesUsed;
  p.computeCycles = s.cs->computeCycles;
  p.exchangeBytesWithinIPU = s.cs->exchangeBytesWithinIPU;
  p.exchangeBytesBetweenIPUs = s.cs->exchangeBytesBetweenIPUs;
  std::uint64_t busiest = 0;
  for (const auto *side : {&s.cs->tileSent, &s.cs->tileReceived})
    for (const auto &kv : *side)
      busiest = std::max(busiest, kv.second);
  p.exchangeCycles = ceilDiv(busiest, double(target.getExchangeBytesPerCycle())) +
                     ceilDiv(p.exchangeBytesBetweenIPUs, target.getInterIPUBytesPerCycle());
  p.syncs = s.cs->exchangeOut.empty() ? 1 : 2; // outputs return in a phase of their own
}

void EngineImpl::compileCopy(Step &s, const ProgramNode &n) {
  if (n.src.graphId() != g.id || n.dst.graphId() != g.id)
    throw control_program_error("Copy: a tensor belongs to another graph");
  for (const auto &r : n.dst.regions())
    if (g.vars[r.var].isConstant)
      throw control_program_error("Copy: the destination '" + g.vars[r.var].name +
                                  "' is a constant; copy into a variable");
  s.profile = addProfile(labelOf(n, "Copy(" + tensorName(n.src) + " -> " + tensorName(n.dst) + ")"),
                         "exchange");
  auto &p = profile[static_cast<std::size_t>(s.profile)];
  std::vector<std::uint64_t> sent(target.getNumTiles(), 0), recv(target.getNumTiles(), 0),
      onTile(target.getNumTiles(), 0);
  std::vector<char> seen(target.getNumTiles(), 0);
  std::size_t tilesUsed = 0;
  const auto mark = [&](std::int32_t t) {
    tilesUsed += !seen[static_cast<std::size_t>(t)];
    seen[static_cast<std::size_t>(t)] = 1;
  };
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
        mark(a);
        mark(b);
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
  p.tilesUsed = tilesUsed;
  p.computeCycles = ceilDiv(maxOnTile, 8.0);
  p.exchangeCycles = ceilDiv(maxTile, double(target.getExchangeBytesPerCycle())) +
                     ceilDiv(p.exchangeBytesBetweenIPUs, target.getInterIPUBytesPerCycle());
  p.syncs = 1;
}

void EngineImpl::compileStreamCopy(Step &s, const ProgramNode &n) {
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
    throw stream_connection_error("Copy: stream '" + s.stream + "' does not belong to this graph");
  s.conn = &streams[s.stream];
  s.runs = tensorRuns(t);
  s.bytes = t.numElements() * t.elementType().sizeInBytes();
  s.conn->scratch.resize(std::max(s.conn->scratch.size(), s.bytes));
  s.profile =
      addProfile(labelOf(n, std::string(in ? "StreamCopy(" + s.stream + " -> " + tensorName(t)
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
}

Step EngineImpl::compile(const ProgramNode &n) {
  Step s;
  s.kind = n.kind;
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
  case ProgramNode::Execute:
    compileExecute(s, n);
    break;
  case ProgramNode::Copy:
    compileCopy(s, n);
    break;
  case ProgramNode::StreamToTensor:
  case ProgramNode::TensorToStream:
    compileStreamCopy(s, n);
    break;
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
    s.profile = addProfile(
        labelOf(n, n.sync == SyncType::INTERNAL ? "Sync(internal)" : "Sync(global)"), "sync");
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

} // namespace detail
} // namespace poplar
