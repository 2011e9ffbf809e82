// Item 5: the vertex field API beyond Input<Vector<T>>: a vector of vector edges
// (Vector<Input<Vector<T>>>, sized with setFieldSize and connected entry by entry with
// connect(v["f"][i], t)), a vector of scalar edges (Vector<Input<T>>, connected from a
// list of tensors), the VectorLayouts (ONE_PTR with its size passed separately, as a
// ONE_PTR vector stores none; SCALED_PTR32, SCALED_PTR64 and COMPACT_PTR with their
// alignments), and a MultiVertex whose six workers each write their own elements.
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

using namespace poplar;
using namespace poplar::program;

static const char *kCodelet = R"(
#include <poplar/Vertex.hpp>
using namespace poplar;

class RowSums : public Vertex {
public:
  Vector<Input<Vector<float>>> rows;
  Vector<Input<float>> weights;
  Output<Vector<float>> sums;
  Output<float> weighted;
  bool compute() {
    float total = 0;
    for (unsigned r = 0; r < rows.size(); ++r) {
      float s = 0;
      for (float x : rows[r])
        s += x;
      sums[r] = s;
      total += s * weights[r];
    }
    *weighted = total;
    return true;
  }
};

class Layouts : public Vertex {
public:
  Input<Vector<float, VectorLayout::ONE_PTR>> a;
  Input<Vector<float, VectorLayout::SCALED_PTR32, 4>> b;
  Input<Vector<float, VectorLayout::SCALED_PTR64, 8>> c;
  Input<Vector<float, VectorLayout::COMPACT_PTR, 8>> d;
  Output<Vector<float, VectorLayout::ONE_PTR>> out;
  unsigned n; // a ONE_PTR vector stores no size: the vertex is told it
  bool compute() {
    for (unsigned i = 0; i < n; ++i)
      out[i] = a[i] + b[i] + c[i] + d[i];
    return true;
  }
};

class WorkerIds : public MultiVertex {
public:
  Output<Vector<unsigned>> out;
  void compute(unsigned workerId) {
    for (unsigned i = workerId; i < out.size(); i += numWorkers())
      out[i] = workerId * 100 + i;
  }
};
)";

// A ONE_PTR vector stores no size: asking for it does not compile, as with popc.
static const char *kSizeOfOnePtr = R"(
#include <poplar/Vertex.hpp>
using namespace poplar;
class OnePtrSize : public Vertex {
public:
  Input<Vector<float, VectorLayout::ONE_PTR>> a;
  Output<unsigned> n;
  bool compute() {
    *n = a.size();
    return true;
  }
};
)";

int main(int, char **argv) {
  const std::string self = argv[0];
  const std::string path = self.substr(0, self.rfind('/') + 1) + "vector_fields_codelet.cpp";
  std::ofstream(path) << kCodelet;
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 2;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());
  graph.addCodelets(path);

  // Rows of three lengths; weights one scalar edge each.
  Tensor data = graph.addVariable(FLOAT, {9}, "data");
  Tensor w = graph.addVariable(FLOAT, {3}, "w");
  Tensor sums = graph.addVariable(FLOAT, {3}, "sums");
  Tensor weighted = graph.addVariable(FLOAT, {}, "weighted");
  graph.setInitialValue(data, ArrayRef<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}));
  graph.setInitialValue(w, ArrayRef<float>({1, 10, 100}));
  ComputeSet cs = graph.addComputeSet("fields");
  VertexRef rs = graph.addVertex(cs, "RowSums");
  graph.setFieldSize(rs["rows"], 3);
  graph.connect(rs["rows"][0], data.slice(0, 1));
  graph.connect(rs["rows"][1], data.slice(1, 4));
  graph.connect(rs["rows"][2], data.slice(4, 9));
  graph.connect(rs["weights"], {w[0], w[1], w[2]});
  graph.connect(rs["sums"], sums);
  graph.connect(rs["weighted"], weighted);

  Tensor in = graph.addVariable(FLOAT, {4, 4}, "in");
  Tensor out = graph.addVariable(FLOAT, {4}, "out");
  graph.setInitialValue(in, ArrayRef<float>({1, 2, 3, 4, 10, 20, 30, 40, 100, 200, 300, 400, 1000,
                                             2000, 3000, 4000}));
  VertexRef lay = graph.addVertex(cs, "Layouts");
  graph.connect(lay["a"], in[0]);
  graph.connect(lay["b"], in[1]);
  graph.connect(lay["c"], in[2]);
  graph.connect(lay["d"], in[3]);
  graph.connect(lay["out"], out);
  graph.setInitialValue(lay["n"], 4u);

  Tensor ids = graph.addVariable(UNSIGNED_INT, {14}, "ids");
  VertexRef mv = graph.addVertex(cs, "WorkerIds", {{"out", ids}});
  for (Tensor t : {data, w, sums, weighted, in, out})
    graph.setTileMapping(t, 0);
  graph.setTileMapping(ids, 1);
  graph.setTileMapping(rs, 0);
  graph.setTileMapping(lay, 0);
  graph.setTileMapping(mv, 1);

  Engine engine(graph,
                Sequence({Execute(cs), PrintTensor("sums", sums), PrintTensor("weighted", weighted),
                          PrintTensor("layouts", out), PrintTensor("workers", ids)}));
  engine.load(device);
  engine.run(0);

  // Misuse of a vector of edges: one clear error each, while the graph is built.
  ComputeSet bad = graph.addComputeSet("bad");
  VertexRef b = graph.addVertex(bad, "RowSums");
  try {
    graph.connect(b["rows"][0], data);
  } catch (const poplar_error &e) {
    std::cout << "error: " << e.what() << "\n";
  }
  graph.setFieldSize(b["weights"], 2);
  try {
    graph.connect(b["weights"][1], w.slice(0, 2));
  } catch (const poplar_error &e) {
    std::cout << "error: " << e.what() << "\n";
  }
  const std::string onePtr = path.substr(0, path.rfind('/') + 1) + "one_ptr_size_codelet.cpp";
  std::ofstream(onePtr) << kSizeOfOnePtr;
  try {
    graph.addCodelets(onePtr);
    std::cout << "ONE_PTR size(): compiled\n";
  } catch (const graph_program_compilation_error &e) {
    const bool said = std::string(e.what()).find("stores no size") != std::string::npos;
    std::cout << "ONE_PTR size(): " << (said ? "does not compile (stores no size)" : e.what())
              << "\n";
  }
  return 0;
}
