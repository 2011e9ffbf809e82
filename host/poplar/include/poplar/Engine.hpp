// popsnn's Poplar-compatible runtime: poplar::Engine, which checks a graph
// (tile locality, memory, connections) as Poplar's graph compiler does, then
// runs its programs on this machine's CPU, tiles in parallel.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "poplar/ArrayRef.hpp"
#include "poplar/Device.hpp"
#include "poplar/Executable.hpp"
#include "poplar/Graph.hpp"
#include "poplar/OptionFlags.hpp"
#include "poplar/Program.hpp"
#include "poplar/StreamCallback.hpp"
#include "poplar/StringRef.hpp"

namespace poplar {

namespace detail {
class EngineImpl;
}

// popsnn extension: the numbers behind printProfileSummary(). Every figure is
// an ESTIMATE from the IPU cost model of docs/poplar-runtime.md (perf
// estimates, exchange bytes, syncs), never a measurement on an IPU.
struct ProfileStepEstimate {
  std::string name;             // e.g. "Execute(layer1/fwd)", "Copy(a -> b)"
  std::string kind;             // "compute", "exchange", "stream", "sync", "control"
  std::uint64_t executions = 0; // times the step ran (summed over runs)
  // Per execution:
  std::uint64_t vertices = 0;
  std::uint64_t tilesUsed = 0;
  std::uint64_t computeCycles = 0; // slowest tile, from setPerfEstimate
  std::uint64_t exchangeBytesWithinIPU = 0;
  std::uint64_t exchangeBytesBetweenIPUs = 0;
  std::uint64_t onTileCopyBytes = 0;
  std::uint64_t hostBytes = 0;
  std::uint64_t exchangeCycles = 0;
  std::uint64_t syncs = 0;
  std::uint64_t syncCycles = 0;
  std::uint64_t cycles = 0; // compute + exchange + sync
};

struct ProfileEstimate {
  std::vector<ProfileStepEstimate> steps; // in program order of first appearance
  double tileClockFrequency = 0;          // Hz of the target
  std::uint64_t runs = 0;
  // Sums over every execution of every step:
  std::uint64_t computeCycles = 0;
  std::uint64_t exchangeCycles = 0;
  std::uint64_t syncCycles = 0;
  std::uint64_t totalCycles = 0;
  std::uint64_t exchangeBytesWithinIPU = 0;
  std::uint64_t exchangeBytesBetweenIPUs = 0;
  std::uint64_t onTileCopyBytes = 0;
  std::uint64_t hostBytes = 0;
  std::uint64_t syncs = 0;
  std::uint64_t vertexExecutions = 0;
  double estimatedSeconds() const {
    return tileClockFrequency > 0 ? double(totalCycles) / tileClockFrequency : 0.0;
  }
  // Memory of the compiled graph (static), per tile.
  std::vector<std::uint64_t> tileBytes;
  std::uint64_t maxTileBytes() const {
    std::uint64_t m = 0;
    for (auto b : tileBytes)
      m = b > m ? b : m;
    return m;
  }
};

// popsnn extension: MEASURED wall-clock seconds of one program's runs on this machine's CPU
// (a steady clock around Engine::run), never an IPU figure.
struct ProgramTime {
  std::uint64_t runs = 0;
  double seconds = 0;     // summed over the runs
  double lastSeconds = 0; // the latest run
  double cpuSeconds = 0;  // the process's CPU time during the runs (all threads), summed
};

class Engine {
public:
  using ProgressFunc = std::function<void(int, int)>;

  Engine(const Graph &graph, const program::Program &prog, const OptionFlags &options = {},
         ProgressFunc progress = {});
  Engine(const Graph &graph, ArrayRef<program::Program> progs, const OptionFlags &options = {},
         ProgressFunc progress = {});
  // Runs a graph compiled once by compileGraph (the Executable is consumed).
  explicit Engine(Executable &&exe, const OptionFlags &options = {});
  Engine(Engine &&) noexcept;
  Engine &operator=(Engine &&) noexcept;
  ~Engine();

  void load(const Device &device);
  void run(unsigned prog = 0, const std::string &debugName = "");

  // A FIFO reads (writes) numElements at `p` on every Copy; with [begin, end)
  // the buffer is circular and each Copy advances by one transfer.
  void connectStream(StringRef handle, void *p);
  void connectStream(StringRef handle, void *begin, void *end);
  void connectStreamToCallback(StringRef handle, std::function<void(void *)> callback);
  void connectStreamToCallback(StringRef handle, unsigned index,
                               std::function<void(void *)> callback);
  // Per Copy: prefetch(p), then fetch(p) unless prefetch returned Success,
  // then complete() (device-to-host: fetch(p) reads the data, then complete()).
  void connectStreamToCallback(StringRef handle, StreamCallbackHandle callback);
  void connectStreamToCallback(StringRef handle, unsigned index, StreamCallbackHandle callback);

  // Handles made with Graph::createHostWrite / createHostRead. Buffers hold the
  // tensor's elements in row-major order, in the element type's host format.
  void readTensor(StringRef handle, void *buf, void *bufEnd);
  void writeTensor(StringRef handle, const void *buf, const void *bufEnd);
  void readTensor(StringRef handle, void *buf);
  void writeTensor(StringRef handle, const void *buf);

  // Where PrintTensor programs write (std::cout by default).
  void setPrintStream(std::ostream &stream);

  // Cycle, byte and sync counts of the runs so far, labelled as estimates.
  void printProfileSummary(std::ostream &out, const OptionFlags &opts = {}) const;
  void resetExecutionProfile();
  // popsnn extension: the same numbers, structured.
  ProfileEstimate getProfileEstimate() const;
  // popsnn extension: per program (index as run()), its measured wall-clock time.
  std::vector<ProgramTime> getProgramTimes() const;

private:
  std::unique_ptr<detail::EngineImpl> impl_;
};

// Checks and compiles a graph and its programs, as the Engine constructor does,
// without a device; Engine(Executable&&) then runs it.
Executable compileGraph(const Graph &graph, ArrayRef<program::Program> progs,
                        const OptionFlags &options = {}, Engine::ProgressFunc progress = {},
                        const DebugContext &dc = {});

} // namespace poplar
