// The public Engine and Executable API over EngineImpl: loading, running programs,
// host reads and writes, stream callbacks, and the cost-model profile.
#include "EngineImpl.hpp"
#include "ExecutableFormat.hpp"

#include <chrono>
#include <ctime>

namespace poplar {

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

void Executable::serialize(std::ostream &out) const {
  if (!impl_)
    throw poplar_error("Executable::serialize: the Executable was moved into an Engine; serialize "
                       "it before creating the Engine");
  detail::writeExecutable(out, impl_->g, impl_->roots);
}

Executable Executable::deserialize(std::istream &in) {
  return Executable(detail::readExecutable(in));
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

namespace {
// CPU time of the whole process (every tile thread): steadier than wall clock when other
// processes share the cores.
double processCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
} // namespace

void Engine::run(unsigned prog, const std::string &) {
  if (!impl_->loaded)
    throw poplar_error("Engine::run: call engine.load(device) before run()");
  if (prog >= impl_->programs.size())
    throw index_error("Engine::run(" + std::to_string(prog) + "): the engine has " +
                      std::to_string(impl_->programs.size()) + " program(s)");
  ++impl_->runs;
  const double cpuStart = processCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  impl_->execute(impl_->programs[prog]);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  auto &times = impl_->programTimes;
  times.resize(impl_->programs.size());
  ++times[prog].runs;
  times[prog].seconds += took.count();
  times[prog].lastSeconds = took.count();
  times[prog].cpuSeconds += processCpuSeconds() - cpuStart;
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

std::vector<ProgramTime> Engine::getProgramTimes() const {
  std::vector<ProgramTime> out = impl_->programTimes;
  out.resize(impl_->programs.size());
  return out;
}

void Engine::resetExecutionProfile() {
  for (auto &s : impl_->profile)
    s.executions = 0;
  impl_->runs = 0;
  impl_->programTimes.clear();
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
     << std::left << std::setw(44) << "Program step" << std::right;
  // Every column after the name starts with a space: a figure wider than its column (tens of
  // billions of cycles in a large model) stays a separate word for readers and parsers.
  const auto cell = [&os](int width, const auto &value) { os << ' ' << std::setw(width) << value; };
  const int widths[] = {8, 8, 13, 13, 11, 12, 11, 10};
  const char *headers[] = {"kind",     "execs",      "cycles/exec", "compute",
                           "exchange", "exch bytes", "inter-IPU B", "host B"};
  for (unsigned c = 0; c < 8; ++c)
    cell(widths[c], headers[c]);
  os << "\n";
  for (const auto &s : p.steps) {
    std::string name = s.name.size() > 43 ? s.name.substr(0, 40) + "..." : s.name;
    os << std::left << std::setw(44) << name << std::right;
    cell(widths[0], s.kind);
    cell(widths[1], s.executions);
    cell(widths[2], s.cycles);
    cell(widths[3], s.computeCycles);
    cell(widths[4], s.exchangeCycles);
    cell(widths[5], s.exchangeBytesWithinIPU);
    cell(widths[6], s.exchangeBytesBetweenIPUs);
    cell(widths[7], s.hostBytes);
    os << "\n";
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
