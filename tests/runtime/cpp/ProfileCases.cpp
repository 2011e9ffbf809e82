// Profiles, memory accounting, data on several tiles and every tile at once.
#include "Cases.hpp"

namespace cases {

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

// A step of tens of billions of cycles (a large model's layer on few tiles): the summary's
// table keeps every figure a separate word, as the numbers behind it.
void caseProfileWide(Ctx &c) {
  Graph graph(c.device.getTarget());
  graph.addCodelets(c.codelets);
  ComputeSet cs = graph.addComputeSet("wide");
  Tensor v = graph.addVariable(INT, {2}, "v");
  graph.setTileMapping(v, 0);
  VertexRef a = graph.addVertex(cs, "Increment", {{"v", v}});
  graph.setTileMapping(a, 0);
  graph.setPerfEstimate(a, 5'000'000'000ULL); // thread cycles: 6x as tile cycles
  Engine engine(graph, Execute(cs, "wide-step"));
  engine.load(c.device);
  engine.run();
  const ProfileEstimate p = engine.getProfileEstimate();
  c.out.num("cycles", p.steps.at(0).cycles);
  c.out.num("computeCycles", p.steps.at(0).computeCycles);
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

} // namespace cases
