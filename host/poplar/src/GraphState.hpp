// Internal: what a poplar::Graph holds. Shared by a graph and its virtual graphs.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "poplar/DataStream.hpp"
#include "poplar/Target.hpp"
#include "poplar/Tensor.hpp"
#include "poplar/Type.hpp"
#include "poplar/detail/CodeletABI.hpp"

namespace poplar {
namespace detail {

struct VariableInfo {
  std::string name;
  Type type;
  std::vector<std::size_t> shape;
  std::size_t numElements = 0;
  bool isConstant = false;
  std::vector<std::int32_t> tile;  // absolute tile per element; -1 while unmapped
  std::vector<unsigned char> init; // initial contents (numElements * size) or empty for zeros
};

// A vertex class found in loaded codelets.
struct VertexClass {
  std::string name;
  std::string origin; // the codelet file it came from
  const popsnn_vertex_desc *desc = nullptr;
  std::unordered_map<std::string, unsigned> fieldIndex;
};

struct FieldState {
  bool connected = false;
  std::vector<Tensor> tensors; // one for scalars and vectors; one per entry for lists
  std::vector<bool> entrySet;  // VectorList entries connected one at a time
  bool sizeSet = false;        // setFieldSize was called (VectorList)
  bool hasValue = false;       // setInitialValue on a state field
  std::vector<double> values;
};

struct VertexInfo {
  unsigned computeSet = 0;
  const VertexClass *cls = nullptr;
  std::int32_t tile = -1; // absolute
  std::uint64_t cycles = 0;
  bool hasEstimate = false;
  std::vector<FieldState> fields; // indexed like cls->desc->fields
};

struct ComputeSetInfo {
  std::string name;
  std::vector<unsigned> vertices;
};

// A codelet file as the graph loaded it, so a serialized Executable can load it again.
struct CodeletRecord {
  bool isObject = false; // a .gp object; else a source compiled at run time
  std::string path;      // absolute
  std::string flags;     // compile flags (sources)
  std::string sha256;    // of the file's content when it was loaded
};

struct HostHandle {
  std::string handle;
  Tensor tensor;
};

class GraphState {
public:
  explicit GraphState(const Target &t);
  Target target; // the whole device
  std::uint64_t id;
  std::vector<VariableInfo> vars;
  std::vector<ComputeSetInfo> computeSets;
  std::vector<VertexInfo> vertices;
  std::map<std::string, DataStream> streams;
  std::map<std::string, HostHandle> hostWrites;
  std::map<std::string, HostHandle> hostReads;
  std::map<std::string, VertexClass> vertexClasses; // by normalised name
  std::vector<std::string> codeletFiles;            // loaded objects (canonical paths)
  std::vector<CodeletRecord> codeletRecords;        // in load order
};

// "Foo < float, 3 >" -> "Foo<float,3>": spaces only where two words meet.
std::string normaliseVertexName(const std::string &name);

std::string describeTensor(const GraphState &g, const Tensor &t);

} // namespace detail
} // namespace poplar
