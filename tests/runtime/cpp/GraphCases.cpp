// Graphs, tensors, vertices, copies, streams, control flow and half: the runtime's
// everyday calls, as ordinary Poplar programs make them.
#include "Cases.hpp"

namespace cases {

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

} // namespace cases
