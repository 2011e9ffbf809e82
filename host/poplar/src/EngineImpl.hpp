// The Engine's internals (host/poplar/src only): the compiled form of a graph and
// its programs, shared by the compile step (EngineCompile.cpp), the interpreter
// (EngineRun.cpp) and the public Engine API (Engine.cpp).
#pragma once

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

#include <sys/mman.h>

#include "GraphState.hpp"
#include "ProgramNode.hpp"
#include "TensorText.hpp"
#include "ThreadPool.hpp"
#include "TypeConvert.hpp"
#include "poplar/Engine.hpp"
#include "poplar/exceptions.hpp"

namespace poplar {
namespace detail {

constexpr unsigned kWorkers = MultiVertex::numWorkers();

// Tile memory starts zeroed. Large buffers are fresh anonymous mappings: the kernel hands
// out zero pages, so a buffer's untouched pages (a surrogate trace that a host's codelets
// recompute instead of writing, id buffers sized for more activity than there is) take no
// resident memory; small ones come from the heap, zeroed here.
constexpr std::size_t kMappedBufferBytes = std::size_t(1) << 16;

struct BufferDeleter {
  std::size_t mappedBytes = 0; // 0: from the heap
  void operator()(void *p) const {
    if (mappedBytes)
      ::munmap(p, mappedBytes);
    else
      std::free(p);
  }
};
using Buffer = std::unique_ptr<char, BufferDeleter>;

inline Buffer allocate(std::size_t bytes) {
  std::size_t size = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  if (size >= kMappedBufferBytes) {
    void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw graph_memory_allocation_error("out of host memory allocating " + std::to_string(bytes) +
                                          " bytes");
    return Buffer(static_cast<char *>(p), BufferDeleter{size});
  }
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

inline void addSeg(std::vector<Seg> &segs, char *dst, const char *src, std::size_t bytes) {
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
  // Fields connected to data on other tiles: the exchange Poplar's compiler inserts, as
  // phases of the whole compute set (every tile's inputs arrive before any vertex runs,
  // outputs return after all have run).
  std::vector<Seg> exchangeIn, exchangeOut;
  std::map<std::int32_t, std::uint64_t> tileSent, tileReceived; // bytes, for the estimate
  std::uint64_t exchangeBytesWithinIPU = 0, exchangeBytesBetweenIPUs = 0;
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

inline std::string humanBytes(std::uint64_t b) {
  std::ostringstream os;
  if (b >= (1u << 20))
    os << std::fixed << std::setprecision(2) << double(b) / (1 << 20) << " MiB";
  else if (b >= 1024)
    os << std::fixed << std::setprecision(1) << double(b) / 1024 << " KiB";
  else
    os << b << " B";
  return os.str();
}

inline std::uint64_t ceilDiv(std::uint64_t a, double b) {
  if (a == 0)
    return 0;
  double q = double(a) / b;
  std::uint64_t r = static_cast<std::uint64_t>(q);
  return double(r) < q ? r + 1 : r;
}

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
  std::vector<std::shared_ptr<ProgramNode>> roots; // the programs as given (for serialize)
  std::vector<ProfileStepEstimate> profile;
  std::map<std::string, StreamConnection> streams;
  std::map<std::string, std::vector<std::pair<char *, std::size_t>>> hostWrites, hostReads;
  std::vector<std::uint64_t> tileBytes;
  std::uint64_t runs = 0;
  std::vector<ProgramTime> programTimes; // per program, measured
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
  std::uint64_t bindFields(CompiledComputeSet &cs, unsigned id, char *obj, std::int32_t tile,
                           std::uint64_t &rearrange);
  void bindTensor(CompiledComputeSet &cs, const popsnn_field_desc &fd, std::int32_t tile,
                  const std::string &where, const Tensor &t, RawSpan &span,
                  std::uint64_t &rearrange, std::uint64_t &stateBytes);
  void chunkByTileCost(CompiledComputeSet &cs, const std::vector<std::int32_t> &tileOf,
                       const std::vector<std::uint64_t> &tileCost);
  void compileExecute(Step &s, const ProgramNode &n);
  void compileCopy(Step &s, const ProgramNode &n);
  void compileStreamCopy(Step &s, const ProgramNode &n);
  bool countExchange(CompiledComputeSet &cs, const Tensor &t, unsigned access, std::int32_t tile,
                     const std::string &where);
  void checkMemory();
  Step compile(const ProgramNode &n);
  void splitForThreads(Step &s, const ProgramNode &n);
  void execute(const Step &s);
  void runComputeSet(CompiledComputeSet &cs);
  void print(const Step &s);
  void streamCopy(const Step &s);
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
    case kShapeScalarList:
      return 8 + 8 * fs.tensors.size();
    default:
      return 0;
    }
  }
};

} // namespace detail
} // namespace poplar
