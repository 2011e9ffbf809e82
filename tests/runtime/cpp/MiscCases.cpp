// The remaining calls, unusual codelet shapes, the codelet cache and initial values.
#include "Cases.hpp"

namespace cases {

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

} // namespace cases
