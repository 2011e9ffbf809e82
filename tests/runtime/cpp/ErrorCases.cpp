// Misuse of the API: each call's poplar_error as JSON.
#include "Cases.hpp"

namespace cases {

using Misuses = std::map<std::string, std::function<void()>>;

// A graph on the case's target with the test codelets.
void addTestCodelets(Graph &g, const Ctx &c) { g.addCodelets(c.codelets); }

// Vertices: unknown names and fields, mismatched or missing connections, a vertex
// that fails.
void vertexMisuses(Misuses &cases, Ctx &c, const Target &target) {
  cases["unknown_vertex"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    g.addVertex(g.addComputeSet(), "NoSuchVertex");
  };
  cases["template_without_args"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    g.addVertex(g.addComputeSet(), "Fill");
  };
  cases["unknown_field"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    VertexRef v = g.addVertex(g.addComputeSet(), "Increment");
    Tensor t = g.addVariable(INT, {2}, "t");
    g.connect(v["values"], t);
  };
  cases["type_mismatch"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    VertexRef v = g.addVertex(g.addComputeSet(), "Increment");
    g.connect(v["v"], g.addVariable(FLOAT, {2}, "floats"));
  };
  cases["scalar_too_big"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    VertexRef v = g.addVertex(g.addComputeSet(), "Scalars");
    g.connect(v["in"], g.addVariable(FLOAT, {3}, "three"));
  };
  cases["connect_state"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    VertexRef v = g.addVertex(g.addComputeSet(), "Scalars");
    g.connect(v["a"], g.addVariable(FLOAT, {1}, "one"));
  };
  cases["initial_value_on_edge"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    VertexRef v = g.addVertex(g.addComputeSet(), "Scalars");
    g.setInitialValue(v["in"], 1.0f);
  };
  cases["double_connect"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    VertexRef v = g.addVertex(g.addComputeSet(), "Increment");
    Tensor t = g.addVariable(INT, {2}, "t");
    g.connect(v["v"], t);
    g.connect(v["v"], t);
  };
  cases["list_entry_without_size"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    VertexRef v = g.addVertex(g.addComputeSet(), "ListSums");
    g.connect(v["in"][0], g.addVariable(FLOAT, {2}, "t"));
  };
  cases["not_connected"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    ComputeSet cs = g.addComputeSet("cs");
    VertexRef v = g.addVertex(cs, "AddVectors");
    Tensor t = g.addVariable(FLOAT, {2}, "t");
    g.setTileMapping(t, 0);
    g.connect(v["a"], t);
    g.connect(v["out"], t);
    g.setTileMapping(v, 0);
    Engine e(g, Execute(cs));
  };
  cases["unmapped_vertex"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    ComputeSet cs = g.addComputeSet("cs");
    Tensor t = g.addVariable(INT, {2}, "t");
    g.setTileMapping(t, 0);
    g.addVertex(cs, "Increment", {{"v", t}});
    Engine e(g, Execute(cs));
  };
  cases["vertex_returns_false"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    ComputeSet cs = g.addComputeSet("failing");
    g.setTileMapping(g.addVertex(cs, "Fails"), 0);
    Engine e(g, Execute(cs));
    e.load(c.device);
    e.run();
  };
  cases["output_to_constant"] = [&] {
    Graph g(target);
    addTestCodelets(g, c);
    ComputeSet cs = g.addComputeSet("cs");
    Tensor k = g.addConstant<int>(INT, {2}, {1, 2}, "k");
    g.setTileMapping(k, 0);
    g.setTileMapping(g.addVertex(cs, "Increment", {{"v", k}}), 0);
    Engine e(g, Execute(cs));
  };
}

// Tensors: mappings, copies, views and constants.
void tensorMisuses(Misuses &cases, const Target &target) {
  cases["unmapped_tensor"] = [&] {
    Graph g(target);
    Tensor t = g.addVariable(FLOAT, {4, 2}, "half_mapped");
    g.setTileMapping(t[0], 0);
    Engine e(g, Sequence());
  };
  cases["tile_out_of_range"] = [&] {
    Graph g(target);
    g.setTileMapping(g.addVariable(FLOAT, {1}, "t"), target.getNumTiles());
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
  cases["copy_into_constant"] = [&] {
    Graph g(target);
    Tensor k = g.addConstant<float>(FLOAT, {2}, {1, 2}, "k");
    Tensor v = g.addVariable(FLOAT, {2}, "v");
    g.setTileMapping(k, 0);
    g.setTileMapping(v, 0);
    Engine e(g, Copy(v, k));
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
}

// Engines and devices: running, reading and writing out of order or out of range.
void engineMisuses(Misuses &cases, Ctx &c, const Target &target) {
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
}

// Codelet files that are missing, broken or of the wrong kind.
void codeletMisuses(Misuses &cases, Ctx &c, const Target &target) {
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
}

void caseErrors(Ctx &c) {
  const Target &target = c.device.getTarget();
  Misuses cases;
  vertexMisuses(cases, c, target);
  tensorMisuses(cases, target);
  engineMisuses(cases, c, target);
  codeletMisuses(cases, c, target);
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

} // namespace cases
