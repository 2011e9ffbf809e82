// Test cases for popsnn's Poplar runtime. Each run executes one case on one
// device and prints one JSON object that tests/runtime/*.py assert on:
//   runtime_cases <case> <device> <codelets.cpp> <codelets.gp> [extra]
// device: cpu | ipu4 | ipu16 | ipu2x8. A poplar_error ends the case with
// {"error": <type>, "message": <what()>}.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/exceptions.hpp>

using namespace poplar;
using namespace poplar::program;

namespace {

// Minimal JSON writer: an object of named values.
class Json {
public:
  template <typename T> void num(const std::string &k, T v) { field(k) << +v; }
  void num(const std::string &k, double v) { field(k) << fmt(v); }
  void num(const std::string &k, float v) { field(k) << fmt(v); }
  void boolean(const std::string &k, bool v) { field(k) << (v ? "true" : "false"); }
  void str(const std::string &k, const std::string &v) { field(k) << quote(v); }
  template <typename T> void list(const std::string &k, const std::vector<T> &v) {
    std::ostream &os = field(k);
    os << "[";
    for (std::size_t i = 0; i < v.size(); ++i)
      os << (i ? "," : "") << fmt(double(v[i]));
    os << "]";
  }
  void raw(const std::string &k, const std::string &json) { field(k) << json; }
  std::string text() const { return "{" + body_.str() + "}"; }
  static std::string quote(const std::string &s) {
    std::string o = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\')
        o += '\\', o += c;
      else if (c == '\n')
        o += "\\n";
      else if (static_cast<unsigned char>(c) < 0x20)
        o += ' ';
      else
        o += c;
    }
    return o + "\"";
  }

private:
  static std::string fmt(double v) {
    std::ostringstream os;
    os.precision(9);
    os << v;
    return os.str();
  }
  std::ostream &field(const std::string &k) {
    body_ << (first_ ? "" : ",") << quote(k) << ":";
    first_ = false;
    return body_;
  }
  std::ostringstream body_;
  bool first_ = true;
};

struct Ctx {
  Device device;
  std::string spec, codelets, gp, extra;
  Json out;
  unsigned tiles() const { return device.getTarget().getNumTiles(); }
  unsigned tile(unsigned k) const { return k % tiles(); }
};

Device makeDevice(const std::string &spec) {
  if (spec == "cpu")
    return Device::createCPUDevice();
  IPUModel model;
  if (spec == "ipu4")
    model.tilesPerIPU = 4;
  else if (spec == "ipu16")
    model.tilesPerIPU = 16;
  else if (spec == "ipu2x8") {
    model.numIPUs = 2;
    model.tilesPerIPU = 8;
  } else if (spec == "ipu4-1k") {
    model.tilesPerIPU = 4;
    model.memoryBytesPerTile = 1024;
  } else if (spec == "mk2") {
    // defaults: a whole Mk2 IPU
  } else if (spec == "mk1") {
    model = IPUModel("ipu1");
  } else {
    throw std::runtime_error("unknown device spec " + spec);
  }
  return model.createDevice();
}

template <typename T> std::vector<T> read(Engine &e, const std::string &h, std::size_t n) {
  std::vector<T> v(n);
  e.readTensor(h, v.data(), v.data() + n);
  return v;
}

std::string errorJson(const std::function<void()> &f) {
  try {
    f();
  } catch (const poplar_error &e) {
    Json j;
    j.str("error", e.type);
    j.str("message", e.what());
    return j.text();
  } catch (const std::exception &e) {
    Json j;
    j.str("error", "std::exception");
    j.str("message", e.what());
    return j.text();
  }
  return "null";
}

// ---------------------------------------------------------------------------

void caseTarget(Ctx &c) {
  const Target &t = c.device.getTarget();
  c.out.num("numIPUs", t.getNumIPUs());
  c.out.num("tilesPerIPU", t.getTilesPerIPU());
  c.out.num("numTiles", t.getNumTiles());
  c.out.num("bytesPerTile", std::uint64_t(t.getBytesPerTile()));
  c.out.num("workers", t.getNumWorkerContexts());
  c.out.num("clock", t.getTileClockFrequency());
  c.out.str("type", toString(t.getTargetType()));
  c.out.num("floatSize", t.getTypeSize(FLOAT));
  c.out.num("halfSize", t.getTypeSize(HALF));
  c.out.num("vectorWidthFloat", t.getVectorWidth(FLOAT));
  auto devices = DeviceManager::createDeviceManager().getDevices(TargetType::IPU, 1);
  c.out.num("hardwareDevices", devices.size());
}

void caseTensorViews(Ctx &c) {
  Graph graph(c.device.getTarget());
  Tensor x = graph.addVariable(INT, {2, 3, 4}, "x");
  for (unsigned i = 0; i < 2; ++i)
    graph.setTileMapping(x[i], c.tile(i));
  Tensor y = graph.addVariable(INT, {3}, "y");
  graph.setTileMapping(y, c.tile(2));
  std::map<std::string, Tensor> views = {
      {"row", x[1]},
      {"elem", x[1][2][3].reshape({1})},
      {"slice_dim2", x.slice(1, 3, 2)},
      {"slice_multi", x.slice({0, 1, 1}, {2, 3, 3})},
      {"shuffle", x.dimShuffle({2, 0, 1})},
      {"transpose", x[0].transpose()},
      {"flatten12", x.flatten(1, 3)},
      {"reverse1", x.reverse(1)},
      {"concat0", concat(x[0], x[1], 0)},
      {"concat1", concat({x[0], x[1]}, 1)},
      {"broadcast", y.expand({0}).broadcast(2, 0)},
      {"dimRoll", x.dimRoll(2, 0)},
      {"squeeze", x.slice(0, 1, 0).squeeze({0})},
      {"concat_mixed", concat(x[0][0], y)},
  };
  graph.createHostWrite("x", x);
  graph.createHostWrite("y", y);
  for (auto &kv : views)
    graph.createHostRead(kv.first, kv.second);
  Engine engine(graph, Sequence());
  engine.load(c.device);
  std::vector<int> xs(24), ys{100, 101, 102};
  for (int i = 0; i < 24; ++i)
    xs[i] = i;
  engine.writeTensor("x", xs.data(), xs.data() + xs.size());
  engine.writeTensor("y", ys.data(), ys.data() + ys.size());
  for (auto &kv : views) {
    Json j;
    j.list("shape", kv.second.shape());
    j.list("values", read<int>(engine, kv.first, kv.second.numElements()));
    j.num("rank", kv.second.rank());
    j.boolean("contiguous", kv.second.isContiguous());
    c.out.raw(kv.first, j.text());
  }
  auto mapping = graph.getTileMapping(x.slice(1, 3, 2));
  std::ostringstream os;
  os << "[";
  for (std::size_t t = 0; t < mapping.size(); ++t)
    for (const auto &iv : mapping[t])
      os << (os.tellp() > 1 ? "," : "") << "[" << t << "," << iv.begin() << "," << iv.end() << "]";
  os << "]";
  c.out.raw("mapping_slice_dim2", os.str());
  c.out.str("elementType", x.elementType().toString());
  c.out.num("numElements", x.numElements());
  c.out.num("contiguousRegions", x.slice(1, 3, 2).getContiguousRegions().size());
}

void caseVertices(Ctx &c, const std::string &codelets) {
  Graph graph(c.device.getTarget());
  c.out.boolean("added", graph.addCodelets(codelets));
  c.out.boolean("addedAgain", graph.addCodelets(codelets));
  const unsigned t0 = c.tile(0), t1 = c.tile(1), t2 = c.tile(2);
  ComputeSet cs = graph.addComputeSet("vertices");

  // Scalars on tile 0.
  Tensor in = graph.addConstant<float>(FLOAT, {}, 2.5f, "in");
  Tensor out = graph.addVariable(FLOAT, {2}, "out");
  Tensor count = graph.addVariable(INT, {}, "count");
  graph.setInitialValue(count, 40);
  for (const Tensor &t : {in, out, count})
    graph.setTileMapping(t, t0);
  VertexRef s1 = graph.addVertex(cs, "Scalars", {{"in", in}, {"out", out[0]}, {"count", count}});
  graph.setInitialValue(s1["a"], 4);
  graph.setTileMapping(s1, t0);
  // A second Scalars on its own counter, with offset overridden.
  Tensor count2 = graph.addVariable(INT, {1}, "count2");
  graph.setTileMapping(count2, t0);
  VertexRef s2 = graph.addVertex(cs, "Scalars");
  graph.connect(s2["in"], in);
  graph.connect(s2["out"], out[1]);
  graph.connect(s2["count"], count2[0]);
  graph.setInitialValue(s2["a"], -1.0);
  graph.setInitialValue(s2["offset"], 100);
  graph.setTileMapping(s2, t0);

  // Vectors on tile 1.
  Tensor a = graph.addConstant<float>(FLOAT, {5}, {1, 2, 3, 4, 5}, "a");
  Tensor b = graph.addVariable(FLOAT, {5}, "b");
  graph.setInitialValue<float>(b, {10, 20, 30, 40, 50});
  Tensor sum = graph.addVariable(FLOAT, {5}, "sum");
  Tensor ints = graph.addVariable(INT, {4}, "ints");
  graph.setInitialValue<int>(ints, {-2, 0, 5, 9});
  Tensor ids = graph.addVariable(UNSIGNED_INT, {15}, "ids");
  for (const Tensor &t : {a, b, sum, ints, ids})
    graph.setTileMapping(t, t1);
  VertexRef add = graph.addVertex(cs, "AddVectors", {{"a", a}, {"b", b}, {"out", sum}});
  graph.setTileMapping(add, t1);
  VertexRef inc = graph.addVertex(cs, "Increment", {{"v", ints}});
  graph.setTileMapping(inc, t1);
  VertexRef workers = graph.addVertex(cs, "WorkerIds", {{"ids", ids}});
  graph.setTileMapping(workers, t1);

  // Lists, state vectors, templates on tile 2.
  Tensor lst = graph.addVariable(FLOAT, {2, 3}, "lst");
  graph.setInitialValue<float>(lst, {1, 2, 3, 4, 5, 6});
  Tensor extra = graph.addConstant<float>(FLOAT, {1}, {0.5f}, "extra");
  Tensor sums = graph.addVariable(FLOAT, {3}, "sums");
  Tensor sums2 = graph.addVariable(FLOAT, {2}, "sums2");
  Tensor px = graph.addConstant<float>(FLOAT, {3}, {0, 1, 2}, "px");
  Tensor py = graph.addVariable(FLOAT, {3}, "py");
  Tensor ff = graph.addVariable(FLOAT, {3}, "ff");
  Tensor fi = graph.addVariable(INT, {3}, "fi");
  Tensor fu = graph.addVariable(UNSIGNED_INT, {2}, "fu");
  Tensor answer = graph.addVariable(INT, {1}, "answer");
  for (const Tensor &t : {lst, extra, sums, sums2, px, py, ff, fi, fu, answer})
    graph.setTileMapping(t, t2);
  VertexRef ls = graph.addVertex(cs, "ListSums");
  graph.connect(ls["in"], {lst[0], lst[1], extra});
  graph.connect(ls["sums"], sums);
  graph.setTileMapping(ls, t2);
  VertexRef ls2 = graph.addVertex(cs, "ListSums");
  graph.setFieldSize(ls2["in"], 2);
  graph.connect(ls2["in"][1], lst[0]);
  graph.connect(ls2["in"][0], lst[1].slice(0, 2));
  graph.connect(ls2["sums"], sums2);
  graph.setTileMapping(ls2, t2);
  VertexRef poly = graph.addVertex(cs, "Poly", {{"x", px}, {"y", py}});
  graph.setInitialValue<float>(poly["coeffs"], {1, 2, 3});
  graph.setTileMapping(poly, t2);
  VertexRef f1 = graph.addVertex(cs, "Fill<float>", {{"out", ff}});
  graph.setInitialValue(f1["value"], 0.25f);
  VertexRef f2 = graph.addVertex(cs, "Fill< int >", {{"out", fi}});
  graph.setInitialValue(f2["value"], -3);
  VertexRef f3 = graph.addVertex(cs, "Fill<unsigned int>", {{"out", fu}});
  graph.setInitialValue(f3["value"], 7u);
  VertexRef ans = graph.addVertex(cs, "testns::Answer", {{"out", answer[0]}});
  for (const VertexRef &v : {f1, f2, f3, ans})
    graph.setTileMapping(v, t2);

  for (auto [name, t] : std::vector<std::pair<std::string, Tensor>>{{"out", out},
                                                                    {"count", count},
                                                                    {"count2", count2},
                                                                    {"sum", sum},
                                                                    {"ints", ints},
                                                                    {"ids", ids},
                                                                    {"sums", sums},
                                                                    {"sums2", sums2},
                                                                    {"py", py},
                                                                    {"ff", ff},
                                                                    {"fi", fi},
                                                                    {"fu", fu},
                                                                    {"answer", answer}})
    graph.createHostRead(name, t);
  Engine engine(graph, Repeat(2, Execute(cs)));
  engine.load(c.device);
  engine.run(0);
  c.out.list("out", read<float>(engine, "out", 2));
  c.out.list("count", read<int>(engine, "count", 1));
  c.out.list("count2", read<int>(engine, "count2", 1));
  c.out.list("sum", read<float>(engine, "sum", 5));
  c.out.list("ints", read<int>(engine, "ints", 4));
  c.out.list("ids", read<unsigned>(engine, "ids", 15));
  c.out.list("sums", read<float>(engine, "sums", 3));
  c.out.list("sums2", read<float>(engine, "sums2", 2));
  c.out.list("py", read<float>(engine, "py", 3));
  c.out.list("ff", read<float>(engine, "ff", 3));
  c.out.list("fi", read<int>(engine, "fi", 3));
  c.out.list("fu", read<unsigned>(engine, "fu", 2));
  c.out.list("answer", read<int>(engine, "answer", 1));
}

// Copies within a tile, between tiles and (on ipu2x8) between IPUs, of views.
void caseCopies(Ctx &c) {
  Graph graph(c.device.getTarget());
  const unsigned n = c.tiles();
  Tensor src = graph.addVariable(FLOAT, {n, 4}, "src");
  Tensor dst = graph.addVariable(FLOAT, {n, 4}, "dst");
  Tensor local = graph.addVariable(FLOAT, {4}, "local");
  Tensor cols = graph.addVariable(FLOAT, {4, n}, "cols");
  for (unsigned t = 0; t < n; ++t) {
    graph.setTileMapping(src[t], t);
    graph.setTileMapping(dst[t], (t + 1) % n); // row t moves to the next tile
  }
  graph.setTileMapping(local, 0);
  graph.setTileMapping(cols, n - 1);
  graph.createHostWrite("src", src);
  graph.createHostRead("dst", dst);
  graph.createHostRead("local", local);
  graph.createHostRead("cols", cols);
  Sequence prog;
  prog.add(Copy(src, dst));
  prog.add(Copy(src[0], local));
  prog.add(Copy(src.transpose(), cols)); // a strided view into a contiguous tensor
  Engine engine(graph, prog);
  engine.load(c.device);
  std::vector<float> host(n * 4);
  for (unsigned i = 0; i < n * 4; ++i)
    host[i] = float(i);
  engine.writeTensor("src", host.data(), host.data() + host.size());
  engine.run();
  c.out.list("dst", read<float>(engine, "dst", n * 4));
  c.out.list("local", read<float>(engine, "local", 4));
  c.out.list("cols", read<float>(engine, "cols", n * 4));
  c.out.num("tiles", n);

  // A copy large enough (n x 256 KiB) to be split over the pool's threads.
  Graph big(c.device.getTarget());
  const std::size_t row = 65536;
  Tensor a = big.addVariable(FLOAT, {n, row}, "a");
  Tensor b = big.addVariable(FLOAT, {n, row}, "b");
  for (unsigned t = 0; t < n; ++t) {
    big.setTileMapping(a[t], t);
    big.setTileMapping(b[t], (t + 1) % n);
  }
  big.createHostWrite("a", a);
  big.createHostRead("b", b);
  Engine bigEngine(big, Copy(a.reverse(0), b));
  bigEngine.load(c.device);
  std::vector<float> in(n * row), out(n * row);
  for (std::size_t i = 0; i < in.size(); ++i)
    in[i] = float(i % 1000003);
  bigEngine.writeTensor("a", in.data(), in.data() + in.size());
  bigEngine.run();
  bigEngine.readTensor("b", out.data(), out.data() + out.size());
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t k = 0; k < row; ++k)
      wrong += out[r * row + k] != in[(n - 1 - r) * row + k];
  c.out.num("bigWrong", wrong);
  c.out.num("bigExchangeBytes",
            bigEngine.getProfileEstimate().steps[0].exchangeBytesWithinIPU +
                bigEngine.getProfileEstimate().steps[0].exchangeBytesBetweenIPUs +
                bigEngine.getProfileEstimate().steps[0].onTileCopyBytes);
}

void caseStreams(Ctx &c) {
  Graph graph(c.device.getTarget());
  Tensor buf = graph.addVariable(INT, {3}, "buf");
  Tensor acc = graph.addVariable(INT, {3}, "acc");
  graph.setTileMapping(buf, c.tile(1));
  graph.setTileMapping(acc, c.tile(1));
  graph.setInitialValue<int>(acc, {0, 0, 0});
  graph.addCodelets(c.codelets);
  DataStream in = graph.addHostToDeviceFIFO("in", INT, 3);
  DataStream out = graph.addDeviceToHostFIFO("out", INT, 3);
  DataStream cb = graph.addDeviceToHostFIFO("cb", INT, 3);
  ComputeSet cs = graph.addComputeSet("inc");
  graph.setTileMapping(graph.addVertex(cs, "Increment", {{"v", buf}}), c.tile(1));
  // Per iteration: read 3 ints, add one, send back, also to a callback.
  Sequence body({Copy(in, buf), Execute(cs), Copy(buf, out), Copy(buf, cb)});
  Engine engine(graph, {Repeat(4, body), Copy(in, buf)});
  engine.load(c.device);
  // Circular input of two transfers: iterations read 1,2,3 then 4,5,6 then 1,2,3 ...
  std::vector<int> ring{1, 2, 3, 4, 5, 6};
  std::vector<int> outRing(9, 0);
  std::vector<int> seen;
  engine.connectStream("in", ring.data(), ring.data() + ring.size());
  engine.connectStream("out", outRing.data(), outRing.data() + outRing.size());
  engine.connectStreamToCallback("cb", [&](void *p) {
    const int *v = static_cast<const int *>(p);
    seen.insert(seen.end(), v, v + 3);
  });
  engine.run(0);
  c.out.list("outRing", outRing);
  c.out.list("callback", seen);
  // A plain pointer: every transfer reads the same place.
  std::vector<int> fixed{7, 8, 9};
  engine.connectStream("in", fixed.data());
  engine.run(0);
  c.out.list("callbackAfterFixed", std::vector<int>(seen.end() - 3, seen.end()));
  c.out.str("unconnected", errorJson([&] {
              Graph g2(c.device.getTarget());
              Tensor t = g2.addVariable(INT, {3}, "t");
              g2.setTileMapping(t, 0);
              DataStream s = g2.addHostToDeviceFIFO("never", INT, 3);
              Engine e2(g2, Copy(s, t));
              e2.load(c.device);
              e2.run();
            }));
}

void caseControl(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.codelets);
  const unsigned t = c.tile(3);
  Tensor n = graph.addVariable(INT, {}, "n");
  Tensor positive = graph.addVariable(BOOL, {}, "positive");
  Tensor hits = graph.addVariable(INT, {1}, "hits");
  Tensor flag = graph.addVariable(INT, {1}, "flag");
  Tensor thenCount = graph.addVariable(INT, {1}, "thenCount");
  Tensor elseCount = graph.addVariable(INT, {1}, "elseCount");
  for (const Tensor &x : {n, positive, hits, flag, thenCount, elseCount})
    graph.setTileMapping(x, t);
  graph.setInitialValue(n, 5);
  ComputeSet down = graph.addComputeSet("down");
  graph.setTileMapping(graph.addVertex(down, "CountDown", {{"n", n}, {"positive", positive}}), t);
  auto incrementer = [&](const Tensor &x, const char *name) {
    ComputeSet cs = graph.addComputeSet(name);
    graph.setTileMapping(graph.addVertex(cs, "Increment", {{"v", x}}), t);
    return cs;
  };
  ComputeSet incHits = incrementer(hits, "hits");
  ComputeSet incThen = incrementer(thenCount, "then");
  ComputeSet incElse = incrementer(elseCount, "else");
  // cond runs first each time: n = 4, 3, 2, 1, 0 -> body runs 4 times.
  Sequence loop({RepeatWhileTrue(Execute(down), positive, Execute(incHits))});
  Sequence branch({If(flag, Execute(incThen), Execute(incElse))});
  graph.createHostRead("n", n);
  graph.createHostRead("hits", hits);
  graph.createHostWrite("flag", flag);
  graph.createHostRead("then", thenCount);
  graph.createHostRead("else", elseCount);
  Engine engine(graph, {loop, branch, Sequence({Repeat(0, Execute(incHits))})});
  engine.load(c.device);
  engine.run(0);
  int one = 1, zero = 0;
  engine.run(1);
  engine.writeTensor("flag", &one, &one + 1);
  engine.run(1);
  engine.run(1);
  engine.writeTensor("flag", &zero, &zero + 1);
  engine.run(2);
  c.out.list("n", read<int>(engine, "n", 1));
  c.out.list("hits", read<int>(engine, "hits", 1));
  c.out.list("then", read<int>(engine, "then", 1));
  c.out.list("else", read<int>(engine, "else", 1));
}

void caseVirtualGraph(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.codelets);
  const unsigned n = c.tiles();
  Graph upper = graph.createVirtualGraph(n / 2, n);
  c.out.num("virtualTiles", upper.getTarget().getNumTiles());
  Tensor v = upper.addVariable(INT, {2}, "v");
  upper.setTileMapping(v, 1); // tile n/2 + 1 of the device
  ComputeSet cs = upper.addComputeSet("inc");
  VertexRef inc = upper.addVertex(cs, "Increment", {{"v", v}});
  upper.setTileMapping(inc, 1);
  c.out.num("vertexTileVirtual", upper.getTileMapping(inc));
  c.out.num("vertexTileDevice", graph.getTileMapping(inc));
  auto m = graph.getTileMapping(v);
  std::vector<unsigned> tiles;
  for (unsigned t = 0; t < m.size(); ++t)
    if (!m[t].empty())
      tiles.push_back(t);
  c.out.list("deviceTiles", tiles);
  auto vm = upper.getTileMapping(v);
  tiles.clear();
  for (unsigned t = 0; t < vm.size(); ++t)
    if (!vm[t].empty())
      tiles.push_back(t);
  c.out.list("virtualTilesUsed", tiles);
  graph.createHostRead("v", v);
  Engine engine(graph, Execute(cs));
  engine.load(c.device);
  engine.run();
  c.out.list("v", read<int>(engine, "v", 2));
  c.out.str("outOfRange", errorJson([&] { upper.setTileMapping(v, n - n / 2); }));
}

void caseMultiProgram(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.codelets);
  Tensor v = graph.addVariable(INT, {1}, "v");
  graph.setTileMapping(v, 0);
  ComputeSet cs = graph.addComputeSet("inc");
  graph.setTileMapping(graph.addVertex(cs, "Increment", {{"v", v}}), 0);
  graph.createHostRead("v", v);
  graph.createHostWrite("v-in", v);
  Engine engine(graph, {Execute(cs), Repeat(10, Execute(cs))});
  engine.load(c.device);
  int start = 100;
  engine.writeTensor("v-in", &start);
  engine.run(1);
  engine.run(0);
  engine.run(1);
  c.out.list("v", read<int>(engine, "v", 1));
}

// Vertices connected to views that are not one contiguous run: the runtime
// gathers inputs and scatters outputs around the compute set.
void caseNonContiguous(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.codelets);
  Tensor m = graph.addVariable(FLOAT, {3, 4}, "m");
  Tensor o = graph.addVariable(FLOAT, {4, 3}, "o");
  Tensor iv = graph.addVariable(INT, {2, 3}, "iv");
  for (const Tensor &t : {m, o, iv})
    graph.setTileMapping(t, c.tile(1));
  graph.setInitialValue<float>(m, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  graph.setInitialValue<int>(iv, {0, 10, 20, 30, 40, 50});
  ComputeSet cs = graph.addComputeSet("nc");
  // Column 1 of m plus column 2 of m -> column 0 of o (transposed views).
  VertexRef add = graph.addVertex(
      cs, "AddVectors",
      {{"a", m.transpose()[1]}, {"b", m.transpose()[2]}, {"out", o.transpose()[0].slice(0, 3)}});
  VertexRef inc = graph.addVertex(cs, "Increment", {{"v", iv.transpose().flatten()}});
  graph.setTileMapping(add, c.tile(1));
  graph.setTileMapping(inc, c.tile(1));
  graph.createHostRead("o", o);
  graph.createHostRead("iv", iv);
  Engine engine(graph, Execute(cs));
  engine.load(c.device);
  engine.run();
  c.out.list("o", read<float>(engine, "o", 12));
  c.out.list("iv", read<int>(engine, "iv", 6));
}

void caseHalf(Ctx &c) {
  Graph graph(c.device.getTarget());
  Tensor h = graph.addVariable(HALF, {4}, "h");
  Tensor h2 = graph.addVariable(HALF, {4}, "h2");
  graph.setTileMapping(h, 0);
  graph.setTileMapping(h2, c.tile(1));
  graph.setInitialValue<float>(h, {1.0f, -2.0f, 0.5f, 65504.0f});
  graph.createHostRead("h2", h2);
  Engine engine(graph, Copy(h, h2));
  engine.load(c.device);
  engine.run();
  c.out.list("bits", read<std::uint16_t>(engine, "h2", 4));
}

// A codelet with `half` fields (HalfAxpy): half storage, float arithmetic in the vertex.
void caseHalfVertex(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.codelets);
  Tensor x = graph.addVariable(HALF, {4}, "x");
  Tensor y = graph.addVariable(HALF, {4}, "y");
  Tensor total = graph.addVariable(FLOAT, {}, "total");
  for (const Tensor &t : {x, y, total})
    graph.setTileMapping(t, c.tile(1));
  graph.setInitialValue<float>(x, {1.0f, 3.0f, 0.001f, 60000.0f});
  graph.setInitialValue<float>(y, {0.5f, 1.0f, 1.0f, 10000.0f});
  ComputeSet cs = graph.addComputeSet("axpy");
  VertexRef v = graph.addVertex(cs, "HalfAxpy", {{"x", x}, {"y", y}, {"total", total}});
  graph.setInitialValue(v["a"], 0.1f);
  graph.setTileMapping(v, c.tile(1));
  graph.createHostRead("y", y);
  graph.createHostRead("total", total);
  Engine engine(graph, Execute(cs));
  engine.load(c.device);
  engine.run();
  c.out.list("bits", read<std::uint16_t>(engine, "y", 4));
  c.out.list("total", read<float>(engine, "total", 1));
}

// Hand-checkable profile: perf estimates, exchange within and between IPUs,
// on-tile copies, host streams and syncs (run on ipu2x8).
void caseProfile(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.codelets);
  ComputeSet cs = graph.addComputeSet("work");
  Tensor v0 = graph.addVariable(INT, {2}, "v0");
  Tensor v1 = graph.addVariable(INT, {2}, "v1");
  Tensor ids = graph.addVariable(UNSIGNED_INT, {6}, "ids");
  Tensor v2 = graph.addVariable(INT, {2}, "v2");
  graph.setTileMapping(v0, 0);
  graph.setTileMapping(v1, 0);
  graph.setTileMapping(ids, 1);
  graph.setTileMapping(v2, 1);
  VertexRef a = graph.addVertex(cs, "Increment", {{"v", v0}});
  VertexRef b = graph.addVertex(cs, "Increment", {{"v", v1}});
  VertexRef m = graph.addVertex(cs, "WorkerIds", {{"ids", ids}});
  VertexRef d = graph.addVertex(cs, "Increment", {{"v", v2}});
  graph.setTileMapping(a, 0);
  graph.setTileMapping(b, 0);
  graph.setTileMapping(m, 1);
  graph.setTileMapping(d, 1);
  graph.setPerfEstimate(a, 100);
  graph.setPerfEstimate(b, 50);
  graph.setPerfEstimate(m, 30);
  graph.setPerfEstimate(d, 40);
  Tensor x = graph.addVariable(FLOAT, {16}, "x");          // tile 0
  Tensor xNext = graph.addVariable(FLOAT, {16}, "xNext");  // tile 1 (same IPU)
  Tensor xFar = graph.addVariable(FLOAT, {16}, "xFar");    // tile 8 (IPU 1)
  Tensor xLocal = graph.addVariable(FLOAT, {8}, "xLocal"); // tile 0
  graph.setTileMapping(x, 0);
  graph.setTileMapping(xNext, 1);
  graph.setTileMapping(xFar, 8);
  graph.setTileMapping(xLocal, 0);
  DataStream in = graph.addHostToDeviceFIFO("in", FLOAT, 10);
  Tensor inbox = graph.addVariable(FLOAT, {10}, "inbox");
  graph.setTileMapping(inbox, 2);
  Sequence body(
      {Execute(cs, "work-step"), Copy(x, xNext), Copy(x, xFar), Copy(x.slice(0, 8), xLocal)});
  Sequence prog({Repeat(3, body), Copy(in, inbox), Sync(SyncType::INTERNAL)});
  Engine engine(graph, prog);
  engine.load(c.device);
  std::vector<float> host(10, 1.0f);
  engine.connectStream("in", host.data());
  engine.run();
  engine.run();
  ProfileEstimate p = engine.getProfileEstimate();
  std::ostringstream steps;
  steps << "[";
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    const auto &s = p.steps[i];
    Json j;
    j.str("name", s.name);
    j.str("kind", s.kind);
    j.num("executions", s.executions);
    j.num("vertices", s.vertices);
    j.num("tilesUsed", s.tilesUsed);
    j.num("computeCycles", s.computeCycles);
    j.num("exchangeBytesWithinIPU", s.exchangeBytesWithinIPU);
    j.num("exchangeBytesBetweenIPUs", s.exchangeBytesBetweenIPUs);
    j.num("onTileCopyBytes", s.onTileCopyBytes);
    j.num("hostBytes", s.hostBytes);
    j.num("exchangeCycles", s.exchangeCycles);
    j.num("syncs", s.syncs);
    j.num("syncCycles", s.syncCycles);
    j.num("cycles", s.cycles);
    steps << (i ? "," : "") << j.text();
  }
  steps << "]";
  c.out.raw("steps", steps.str());
  c.out.num("runs", p.runs);
  c.out.num("computeCycles", p.computeCycles);
  c.out.num("exchangeCycles", p.exchangeCycles);
  c.out.num("syncCycles", p.syncCycles);
  c.out.num("totalCycles", p.totalCycles);
  c.out.num("exchangeBytesWithinIPU", p.exchangeBytesWithinIPU);
  c.out.num("exchangeBytesBetweenIPUs", p.exchangeBytesBetweenIPUs);
  c.out.num("onTileCopyBytes", p.onTileCopyBytes);
  c.out.num("hostBytes", p.hostBytes);
  c.out.num("syncs", p.syncs);
  c.out.num("vertexExecutions", p.vertexExecutions);
  c.out.num("estimatedSeconds", p.estimatedSeconds());
  c.out.list("tileBytes", p.tileBytes);
  std::ostringstream summary;
  engine.printProfileSummary(summary);
  c.out.str("summary", summary.str());
}

// Memory per tile: exact accounting on a 1 KiB-per-tile model (ipu4-1k).
void caseMemory(Ctx &c) {
  std::size_t n = std::stoul(c.extra);
  Graph graph(c.device.getTarget());
  Tensor big = graph.addVariable(FLOAT, {n}, "big");
  Tensor small = graph.addVariable(FLOAT, {4}, "small");
  graph.setTileMapping(big, 2);
  graph.setTileMapping(small, 2);
  Engine engine(graph, Sequence());
  c.out.list("tileBytes", engine.getProfileEstimate().tileBytes);
}

// A whole Mk2 model: a 640,000-byte tensor does not fit a 624 KiB tile.
void caseMemoryMk2(Ctx &c) {
  Graph graph(c.device.getTarget());
  Tensor w = graph.addVariable(FLOAT, {160000}, "weights");
  graph.setTileMapping(w, 1000);
  Engine engine(graph, Sequence());
}

// A field connected to data on two tiles: the runtime exchanges the remote half in
// before the compute set and back after it, as Poplar's compiler does.
void caseLocality(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.codelets);
  Tensor v = graph.addVariable(INT, {4}, "remote");
  graph.setTileMapping(v.slice(0, 2), 0);
  graph.setTileMapping(v.slice(2, 4), 1);
  graph.setInitialValue(v, ArrayRef<int>({10, 20, 30, 40}));
  graph.createHostRead("v", v);
  ComputeSet cs = graph.addComputeSet("spread");
  VertexRef inc = graph.addVertex(cs, "Increment", {{"v", v}});
  graph.setTileMapping(inc, 0);
  Engine engine(graph, Execute(cs));
  engine.load(c.device);
  engine.run(0);
  engine.run(0);
  c.out.list("values", read<int>(engine, "v", 4));
  const ProfileEstimate p = engine.getProfileEstimate();
  c.out.num("exchangeBytes", p.exchangeBytesWithinIPU + p.exchangeBytesBetweenIPUs);
  c.out.num("exchangeCycles", p.exchangeCycles);
  c.out.num("syncs", p.syncs);
  c.out.list("tileBytes", p.tileBytes);
}

void caseErrors(Ctx &c) {
  const Target &target = c.device.getTarget();
  auto graphWith = [&](Graph &g) { g.addCodelets(c.codelets); };
  std::map<std::string, std::function<void()>> cases;
  cases["unknown_vertex"] = [&] {
    Graph g(target);
    graphWith(g);
    g.addVertex(g.addComputeSet(), "NoSuchVertex");
  };
  cases["template_without_args"] = [&] {
    Graph g(target);
    graphWith(g);
    g.addVertex(g.addComputeSet(), "Fill");
  };
  cases["unknown_field"] = [&] {
    Graph g(target);
    graphWith(g);
    VertexRef v = g.addVertex(g.addComputeSet(), "Increment");
    Tensor t = g.addVariable(INT, {2}, "t");
    g.connect(v["values"], t);
  };
  cases["type_mismatch"] = [&] {
    Graph g(target);
    graphWith(g);
    VertexRef v = g.addVertex(g.addComputeSet(), "Increment");
    g.connect(v["v"], g.addVariable(FLOAT, {2}, "floats"));
  };
  cases["scalar_too_big"] = [&] {
    Graph g(target);
    graphWith(g);
    VertexRef v = g.addVertex(g.addComputeSet(), "Scalars");
    g.connect(v["in"], g.addVariable(FLOAT, {3}, "three"));
  };
  cases["connect_state"] = [&] {
    Graph g(target);
    graphWith(g);
    VertexRef v = g.addVertex(g.addComputeSet(), "Scalars");
    g.connect(v["a"], g.addVariable(FLOAT, {1}, "one"));
  };
  cases["initial_value_on_edge"] = [&] {
    Graph g(target);
    graphWith(g);
    VertexRef v = g.addVertex(g.addComputeSet(), "Scalars");
    g.setInitialValue(v["in"], 1.0f);
  };
  cases["double_connect"] = [&] {
    Graph g(target);
    graphWith(g);
    VertexRef v = g.addVertex(g.addComputeSet(), "Increment");
    Tensor t = g.addVariable(INT, {2}, "t");
    g.connect(v["v"], t);
    g.connect(v["v"], t);
  };
  cases["list_entry_without_size"] = [&] {
    Graph g(target);
    graphWith(g);
    VertexRef v = g.addVertex(g.addComputeSet(), "ListSums");
    g.connect(v["in"][0], g.addVariable(FLOAT, {2}, "t"));
  };
  cases["not_connected"] = [&] {
    Graph g(target);
    graphWith(g);
    ComputeSet cs = g.addComputeSet("cs");
    VertexRef v = g.addVertex(cs, "AddVectors");
    Tensor t = g.addVariable(FLOAT, {2}, "t");
    g.setTileMapping(t, 0);
    g.connect(v["a"], t);
    g.connect(v["out"], t);
    g.setTileMapping(v, 0);
    Engine e(g, Execute(cs));
  };
  cases["unmapped_tensor"] = [&] {
    Graph g(target);
    Tensor t = g.addVariable(FLOAT, {4, 2}, "half_mapped");
    g.setTileMapping(t[0], 0);
    Engine e(g, Sequence());
  };
  cases["unmapped_vertex"] = [&] {
    Graph g(target);
    graphWith(g);
    ComputeSet cs = g.addComputeSet("cs");
    Tensor t = g.addVariable(INT, {2}, "t");
    g.setTileMapping(t, 0);
    g.addVertex(cs, "Increment", {{"v", t}});
    Engine e(g, Execute(cs));
  };
  cases["tile_out_of_range"] = [&] {
    Graph g(target);
    g.setTileMapping(g.addVariable(FLOAT, {1}, "t"), target.getNumTiles());
  };
  cases["run_before_load"] = [&] {
    Graph g(target);
    Engine e(g, Sequence());
    e.run();
  };
  cases["run_bad_index"] = [&] {
    Graph g(target);
    Engine e(g, Sequence());
    e.load(c.device);
    e.run(3);
  };
  cases["read_wrong_size"] = [&] {
    Graph g(target);
    Tensor t = g.addVariable(FLOAT, {4}, "t");
    g.setTileMapping(t, 0);
    g.createHostRead("t", t);
    Engine e(g, Sequence());
    e.load(c.device);
    std::vector<float> buf(3);
    e.readTensor("t", buf.data(), buf.data() + buf.size());
  };
  cases["unknown_handle"] = [&] {
    Graph g(target);
    Engine e(g, Sequence());
    e.load(c.device);
    float f;
    e.writeTensor("nope", &f, &f + 1);
  };
  cases["unknown_stream"] = [&] {
    Graph g(target);
    Engine e(g, Sequence());
    float f;
    e.connectStream("nope", &f);
  };
  cases["copy_size_mismatch"] = [&] {
    Graph g(target);
    Copy(g.addVariable(FLOAT, {4}, "a"), g.addVariable(FLOAT, {5}, "b"));
  };
  cases["copy_type_mismatch"] = [&] {
    Graph g(target);
    Copy(g.addVariable(FLOAT, {4}, "a"), g.addVariable(INT, {4}, "b"));
  };
  cases["slice_out_of_range"] = [&] {
    Graph g(target);
    g.addVariable(FLOAT, {4, 3}, "a").slice(2, 5, 0);
  };
  cases["reshape_mismatch"] = [&] {
    Graph g(target);
    g.addVariable(FLOAT, {4, 3}, "a").reshape({5, 2});
  };
  cases["other_graph_tensor"] = [&] {
    Graph g(target), h(target);
    g.setTileMapping(h.addVariable(FLOAT, {2}, "elsewhere"), 0);
  };
  cases["vertex_returns_false"] = [&] {
    Graph g(target);
    graphWith(g);
    ComputeSet cs = g.addComputeSet("failing");
    g.setTileMapping(g.addVertex(cs, "Fails"), 0);
    Engine e(g, Execute(cs));
    e.load(c.device);
    e.run();
  };
  cases["device_mismatch"] = [&] {
    Graph g(target);
    Engine e(g, Sequence());
    IPUModel other;
    other.tilesPerIPU = 3;
    e.load(other.createDevice());
  };
  cases["bad_model"] = [&] {
    IPUModel m;
    m.tilesPerIPU = 0;
    m.createDevice();
  };
  cases["bad_ipu_version"] = [&] { IPUModel m("ipu9"); };
  cases["missing_codelet_file"] = [&] {
    Graph g(target);
    g.addCodelets("/nonexistent/codelets.cpp");
  };
  cases["compile_error"] = [&] {
    Graph g(target);
    g.addCodelets(c.extra + "/broken.cpp");
  };
  cases["gp_not_loadable"] = [&] {
    Graph g(target);
    g.addCodelets(c.extra + "/garbage.gp");
  };
  cases["gp_missing"] = [&] {
    Graph g(target);
    g.addCodelets("/nonexistent/foo.gp");
  };
  cases["bad_extension"] = [&] {
    Graph g(target);
    g.addCodelets("codelets.txt");
  };
  cases["copy_into_constant"] = [&] {
    Graph g(target);
    Tensor k = g.addConstant<float>(FLOAT, {2}, {1, 2}, "k");
    Tensor v = g.addVariable(FLOAT, {2}, "v");
    g.setTileMapping(k, 0);
    g.setTileMapping(v, 0);
    Engine e(g, Copy(v, k));
  };
  cases["output_to_constant"] = [&] {
    Graph g(target);
    graphWith(g);
    ComputeSet cs = g.addComputeSet("cs");
    Tensor k = g.addConstant<int>(INT, {2}, {1, 2}, "k");
    g.setTileMapping(k, 0);
    g.setTileMapping(g.addVertex(cs, "Increment", {{"v", k}}), 0);
    Engine e(g, Execute(cs));
  };
  cases["stream_into_constant"] = [&] {
    Graph g(target);
    Tensor k = g.addConstant<float>(FLOAT, {2}, {1, 2}, "k");
    g.setTileMapping(k, 0);
    Engine e(g, Copy(g.addHostToDeviceFIFO("in", FLOAT, 2), k));
  };
  cases["virtual_range"] = [&] {
    Graph g(target);
    g.createVirtualGraph(1, target.getNumTiles() + 1);
  };
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (auto &kv : cases) {
    os << (first ? "" : ",") << Json::quote(kv.first) << ":" << errorJson(kv.second);
    first = false;
  }
  os << "}";
  c.out.raw("errors", os.str());
}

// Every tile runs vertices at once: a Repeat of a compute set over all tiles,
// with several vertices per tile and a MultiVertex, then an exchange.
void caseParallel(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.codelets);
  const unsigned n = c.tiles();
  Tensor v = graph.addVariable(INT, {n, 3, 5}, "v");
  Tensor ids = graph.addVariable(UNSIGNED_INT, {n, 7}, "ids");
  Tensor shifted = graph.addVariable(INT, {n, 3, 5}, "shifted");
  ComputeSet cs = graph.addComputeSet("all-tiles");
  for (unsigned t = 0; t < n; ++t) {
    graph.setTileMapping(v[t], t);
    graph.setTileMapping(ids[t], t);
    graph.setTileMapping(shifted[t], (t + 1) % n);
    for (unsigned k = 0; k < 3; ++k)
      graph.setTileMapping(graph.addVertex(cs, "Increment", {{"v", v[t][k]}}), t);
    graph.setTileMapping(graph.addVertex(cs, "WorkerIds", {{"ids", ids[t]}}), t);
  }
  std::vector<int> init(n * 15);
  for (unsigned i = 0; i < init.size(); ++i)
    init[i] = int(i);
  graph.setInitialValue<int>(v, init);
  graph.createHostRead("v", v);
  graph.createHostRead("ids", ids);
  graph.createHostRead("shifted", shifted);
  Engine engine(graph, Sequence({Repeat(50, Execute(cs)), Copy(v, shifted)}));
  engine.load(c.device);
  engine.run();
  engine.run();
  std::vector<int> got = read<int>(engine, "v", n * 15);
  std::vector<int> sh = read<int>(engine, "shifted", n * 15);
  unsigned wrong = 0;
  for (unsigned i = 0; i < got.size(); ++i)
    wrong += got[i] != int(i) + 100 || sh[i] != got[i];
  std::vector<unsigned> id = read<unsigned>(engine, "ids", n * 7);
  for (unsigned i = 0; i < id.size(); ++i)
    wrong += id[i] != (i % 7) % 6;
  c.out.num("wrong", wrong);
  c.out.num("elements", got.size());
}

// The remaining calls: clone, LINEAR mapping, mapping by intervals, constants
// from pointers, slices/index, codelet lists, RepeatWhileFalse, stream callbacks
// by index, profile reset, targets made directly, option flags.
void caseMisc(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(std::vector<std::string>{c.codelets});
  const unsigned n = c.tiles();
  Tensor lin = graph.addVariable(FLOAT, {2, n + 1}, VariableMappingMethod::LINEAR, "lin");
  std::vector<std::size_t> perTile;
  for (const auto &iv : graph.getTileMapping(lin)) {
    std::size_t k = 0;
    for (const auto &i : iv)
      k += i.size();
    perTile.push_back(k);
  }
  c.out.list("linearPerTile", perTile);
  Tensor twin = graph.clone(lin, "twin");
  c.out.boolean("cloneSameMapping", graph.getTileMapping(twin) == graph.getTileMapping(lin));
  Tensor byIntervals = graph.addVariable(INT, {6}, "byIntervals");
  graph.setTileMapping(byIntervals, Graph::TileToTensorMapping{{{0, 2}, {4, 6}}, {{2, 4}}});
  std::vector<unsigned> tileOf;
  auto m = graph.getTileMapping(byIntervals);
  for (std::size_t t = 0; t < m.size(); ++t)
    for (const auto &i : m[t])
      for (std::size_t e = i.begin(); e < i.end(); ++e)
        tileOf.push_back(unsigned(t) * 100 + unsigned(e));
  c.out.list("intervalMapping", tileOf);
  const int raw[4] = {5, 6, 7, 8};
  Tensor fromPtr = graph.addConstant(INT, {2, 2}, raw, "fromPtr");
  graph.setTileMapping(fromPtr, 0);
  Tensor picked = fromPtr.index({1, 0}).reshape({1});
  auto pieces = fromPtr.flatten().slices({Interval(0, 1), Interval(2, 4)});
  Tensor countdown = graph.addVariable(INT, {}, "countdown");
  Tensor positive = graph.addVariable(BOOL, {}, "positive");
  Tensor loops = graph.addVariable(INT, {1}, "loops");
  for (const Tensor &t : {countdown, positive, loops})
    graph.setTileMapping(t, 0);
  graph.setInitialValue(countdown, 3);
  ComputeSet down = graph.addComputeSet("down");
  graph.setTileMapping(
      graph.addVertex(down, "CountDown", {{"n", countdown}, {"positive", positive}}), 0);
  ComputeSet inc = graph.addComputeSet("inc");
  graph.setTileMapping(graph.addVertex(inc, "Increment", {{"v", loops}}), 0);
  DataStream out = graph.addDeviceToHostFIFO("out", INT, 3);
  Tensor three = concat({picked, pieces[0], pieces[1].slice(1, 2)});
  // RepeatWhileFalse runs cond, then the body while the predicate is zero:
  // countdown 3 -> 2 makes `positive` true at once, so the body never runs.
  graph.createHostRead("loops", loops);
  graph.createHostRead("countdown", countdown);
  Engine engine(
      graph,
      Sequence({RepeatWhileFalse(Execute(down), positive, Execute(inc)), Copy(three, out),
                PrintTensor("fromPtr", fromPtr), PrintTensor(countdown), WriteUndef(loops)}),
      OptionFlags{{"debug.instrument", "false"}});
  engine.load(c.device);
  std::vector<int> got;
  engine.connectStreamToCallback(
      "out", 0, [&](void *p) { got.assign(static_cast<int *>(p), static_cast<int *>(p) + 3); });
  graph.createHostRead("too-late", loops); // after the Engine: not part of it
  std::ostringstream printed;
  engine.setPrintStream(printed);
  engine.run();
  c.out.str("printed", printed.str());
  c.out.list("streamed", got);
  c.out.list("loops", read<int>(engine, "loops", 1));
  c.out.list("countdown", read<int>(engine, "countdown", 1));
  c.out.num("runsBeforeReset", engine.getProfileEstimate().runs);
  engine.resetExecutionProfile();
  c.out.num("runsAfterReset", engine.getProfileEstimate().runs);
  c.out.str("lateHandle", errorJson([&] {
              int x;
              engine.readTensor("too-late", &x, &x + 1);
            }));
  Target direct = Target::createIPUTarget(2, 8, "ipu2");
  c.out.num("directTiles", direct.getNumTiles());
  c.out.str("directType", toString(direct.getTargetType()));
  OptionFlags flags{{"a", "1"}};
  flags.set("b", "2");
  c.out.str("flag", flags.at("b").str());
  c.out.str("missingCpuTiles", errorJson([&] {
              setenv("POPSNN_CPU_TILES", "lots", 1);
              Device::createCPUDevice();
            }));
}

// ScannerCases.cpp (the `extra` argument): unusual but valid codelet shapes.
void caseScanner(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.extra);
  Tensor fa = graph.addConstant<float>(FLOAT, {3}, {1, 2, 3}, "fa");
  Tensor fb = graph.addConstant<float>(FLOAT, {3}, {10, 20, 30}, "fb");
  Tensor fo = graph.addVariable(FLOAT, {3}, "fo");
  Tensor ia = graph.addConstant<int>(INT, {2}, {1, 2}, "ia");
  Tensor io = graph.addVariable(INT, {2}, "io");
  Tensor ho = graph.addVariable(INT, {1}, "ho");
  for (const Tensor &t : {fa, fb, fo, ia, io, ho})
    graph.setTileMapping(t, 0);
  ComputeSet cs = graph.addComputeSet("scan");
  VertexRef f =
      graph.addVertex(cs, "outer::inner::Repeat<float, 3>", {{"a", fa}, {"b", fb}, {"out", fo}});
  graph.setInitialValue(f["scale"], 0.5f);
  VertexRef i =
      graph.addVertex(cs, "outer::inner::Repeat<int,2>", {{"a", ia}, {"b", ia}, {"out", io}});
  VertexRef h = graph.addVertex(cs, "Hidden", {{"out", ho[0]}});
  for (const VertexRef &v : {f, i, h})
    graph.setTileMapping(v, 0);
  c.out.str("arrayField", errorJson([&] { graph.setInitialValue(f["table"], 1.0f); }));
  graph.createHostRead("fo", fo);
  graph.createHostRead("io", io);
  graph.createHostRead("ho", ho);
  Engine engine(graph, Execute(cs));
  engine.load(c.device);
  engine.run();
  c.out.list("fo", read<float>(engine, "fo", 3));
  c.out.list("io", read<int>(engine, "io", 2));
  c.out.list("ho", read<int>(engine, "ho", 1));
}

// A codelet source (the `extra` argument) whose vertex Value writes one int, compiled
// with the flags in $CASE_CODELET_FLAGS: the codelet cache tests change what goes into
// the compile and check which object ran.
void caseCachedValue(Ctx &c) {
  Graph graph(c.device.getTarget());
  const char *flags = std::getenv("CASE_CODELET_FLAGS");
  graph.addCodelets(c.extra, CodeletFileType::Auto, flags ? flags : "");
  Tensor value = graph.addVariable(INT, {1}, "value");
  graph.setTileMapping(value, 0);
  ComputeSet cs = graph.addComputeSet("value");
  graph.setTileMapping(graph.addVertex(cs, "Value", {{"out", value[0]}}), 0);
  graph.createHostRead("value", value);
  Engine engine(graph, Execute(cs));
  engine.load(c.device);
  engine.run();
  c.out.list("value", read<int>(engine, "value", 1));
}

// Initial values: zeros leave a variable's init empty (tile memory starts zeroed, large
// buffers as untouched zero pages), -0.0 is not zero, and values set after zeros stay.
void caseInitialValues(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.codelets);
  const std::size_t big = 20000; // 80 KB: past the runtime's mapped-buffer size
  Tensor zeros = graph.addVariable(FLOAT, {big}, "zeros");
  Tensor mixed = graph.addVariable(FLOAT, {big}, "mixed");
  Tensor ints = graph.addVariable(INT, {4}, "ints");
  for (const Tensor &t : {zeros, mixed, ints})
    graph.setTileMapping(t, 0);
  graph.setInitialValue(zeros, 0.0f);
  graph.setInitialValue(mixed, 0.0f);
  graph.setInitialValue(mixed.slice(big - 2, big), -0.0f);
  graph.setInitialValue(mixed.slice(0, 1), 3.5f);
  graph.setInitialValue(ints, 0);
  graph.setInitialValue<int>(ints.slice(2, 4), {0, 7});
  for (const char *name : {"zeros", "mixed"})
    graph.createHostRead(name, name == std::string("zeros") ? zeros : mixed);
  graph.createHostRead("ints", ints);
  ComputeSet cs = graph.addComputeSet("inc");
  graph.setTileMapping(graph.addVertex(cs, "Increment", {{"v", ints}}), 0);
  Engine engine(graph, Execute(cs));
  engine.load(c.device);
  engine.run();
  const std::vector<float> z = read<float>(engine, "zeros", big);
  const std::vector<float> m = read<float>(engine, "mixed", big);
  c.out.list("zeros_nonzero_bits",
             std::vector<int>{int(std::count_if(
                 z.begin(), z.end(), [](float v) { return std::signbit(v) || v != 0.0f; }))});
  c.out.list("mixed_ends", std::vector<float>{m[0], m[1], m[big - 3]});
  c.out.list("mixed_last_signbit", std::vector<int>{int(std::signbit(m[big - 1]))});
  c.out.list("ints", read<int>(engine, "ints", 4));
}

// The same vertices from a prebuilt .gp object (popsnn_add_codelets).
void caseGp(Ctx &c) { caseVertices(c, c.gp); }

} // namespace

int main(int argc, char **argv) {
  if (argc < 5) {
    std::cerr << "usage: runtime_cases <case> <device> <codelets.cpp> <codelets.gp> [extra]\n";
    return 2;
  }
  Ctx c;
  c.spec = argv[2];
  c.codelets = argv[3];
  c.gp = argv[4];
  c.extra = argc > 5 ? argv[5] : "";
  const std::string name = argv[1];
  const std::map<std::string, std::function<void(Ctx &)>> cases = {
      {"target", caseTarget},
      {"tensor_views", caseTensorViews},
      {"vertices", [](Ctx &x) { caseVertices(x, x.codelets); }},
      {"gp", caseGp},
      {"copies", caseCopies},
      {"streams", caseStreams},
      {"control", caseControl},
      {"virtual_graph", caseVirtualGraph},
      {"multi_program", caseMultiProgram},
      {"non_contiguous", caseNonContiguous},
      {"half", caseHalf},
      {"half_vertex", caseHalfVertex},
      {"profile", caseProfile},
      {"memory", caseMemory},
      {"memory_mk2", caseMemoryMk2},
      {"locality", caseLocality},
      {"errors", caseErrors},
      {"parallel", caseParallel},
      {"misc", caseMisc},
      {"scanner", caseScanner},
      {"cached_value", caseCachedValue},
      {"initial_values", caseInitialValues},
  };
  auto it = cases.find(name);
  if (it == cases.end()) {
    std::cerr << "unknown case " << name << "\n";
    return 2;
  }
  try {
    c.device = makeDevice(c.spec);
    c.device.attach();
    it->second(c);
  } catch (const poplar_error &e) {
    Json j;
    j.str("error", e.type);
    j.str("message", e.what());
    std::cout << j.text() << std::endl;
    return 0;
  }
  std::cout << c.out.text() << std::endl;
  return 0;
}
