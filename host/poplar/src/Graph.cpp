#include <algorithm>
#include <atomic>
#include <cstring>
#include <sstream>

#include "Codelets.hpp"
#include "GraphState.hpp"
#include "TypeConvert.hpp"
#include "poplar/Graph.hpp"
#include "poplar/exceptions.hpp"

namespace poplar {
namespace detail {

GraphState::GraphState(const Target &t) : target(t) {
  static std::atomic<std::uint64_t> next{1};
  id = next++;
}

const Type *typeFromName(const char *name) {
  static const Type *all[] = {
      &BOOL, &CHAR,         &UNSIGNED_CHAR, &SIGNED_CHAR,       &SHORT, &UNSIGNED_SHORT,
      &INT,  &UNSIGNED_INT, &LONGLONG,      &UNSIGNED_LONGLONG, &HALF,  &FLOAT};
  if (!name)
    return nullptr;
  for (const Type *t : all)
    if (t->toString() == name)
      return t;
  return nullptr;
}

std::string describeTensor(const GraphState &g, const Tensor &t) {
  std::ostringstream os;
  // The first four distinct variables are all a name shows: stop there (a tensor joined
  // from thousands of shards has thousands of regions).
  std::vector<unsigned> vars;
  for (const auto &r : t.regions()) {
    if (std::find(vars.begin(), vars.end(), r.var) == vars.end())
      vars.push_back(r.var);
    if (vars.size() > 3)
      break;
  }
  os << "'";
  for (std::size_t i = 0; i < vars.size() && i < 3; ++i)
    os << (i ? "', '" : "") << (vars[i] < g.vars.size() ? g.vars[vars[i]].name : "?");
  if (vars.size() > 3)
    os << "', ...";
  else
    os << "'";
  os << " (" << t.shortString() << ")";
  return os.str();
}

} // namespace detail

using detail::FieldState;
using detail::GraphState;
using detail::VertexInfo;

namespace {

const char *accessName(unsigned a) {
  switch (a) {
  case detail::kFieldInput:
    return "Input";
  case detail::kFieldOutput:
    return "Output";
  case detail::kFieldInOut:
    return "InOut";
  default:
    return "plain member";
  }
}

std::string vertexLabel(const GraphState &g, unsigned id) {
  const VertexInfo &v = g.vertices[id];
  return "vertex '" + v.cls->name + "' (id " + std::to_string(id) + ", compute set '" +
         g.computeSets[v.computeSet].name + "')";
}

VertexInfo &vertexOf(GraphState &g, const VertexRef &v, const char *op) {
  if (v.graphState() != &g || v.getId() >= g.vertices.size())
    throw graph_connection_error(std::string(op) +
                                 ": the vertex does not belong to this graph; use the VertexRef "
                                 "returned by this graph's addVertex");
  return g.vertices[v.getId()];
}

unsigned fieldIndex(GraphState &g, const FieldRef &f, const char *op) {
  VertexInfo &v = vertexOf(g, f.vertex(), op);
  auto it = v.cls->fieldIndex.find(f.name());
  if (it == v.cls->fieldIndex.end()) {
    std::string known;
    for (unsigned i = 0; i < v.cls->desc->numFields; ++i)
      known += std::string(i ? ", " : "") + v.cls->desc->fields[i].name;
    throw unknown_field(std::string(op) + ": " + vertexLabel(g, f.vertex().getId()) +
                        " has no field '" + f.name() +
                        "'; its fields are: " + (known.empty() ? "(none)" : known));
  }
  return it->second;
}

// A VectorList, or a vector of edges (Vector<Input<Vector<T>>>, Vector<Input<T>>).
bool isEdgeList(unsigned shape) {
  return shape == detail::kShapeVectorList || shape == detail::kShapeScalarList;
}

void requireOwnTensor(const GraphState &g, const Tensor &t, const char *op) {
  if (!t.valid())
    throw graph_connection_error(std::string(op) +
                                 ": the tensor is empty (default-constructed); create it with "
                                 "addVariable or addConstant");
  if (t.graphId() != g.id)
    throw graph_connection_error(std::string(op) + ": tensor " + t.shortString() +
                                 " was created by another graph; tensors only work with the "
                                 "graph (or a virtual graph of it) that made them");
}

} // namespace

Graph::Graph(const Target &target) : state_(std::make_shared<GraphState>(target)), target_(target) {
  if (target.getNumTiles() == 0)
    throw invalid_machine_model("Graph: the target has no tiles; make it with "
                                "IPUModel().createDevice().getTarget() or Target::createIPUTarget");
}
Graph::Graph(const Device &device) : Graph(device.getTarget()) {}
Graph::Graph(std::shared_ptr<GraphState> state, Target target)
    : state_(std::move(state)), target_(std::move(target)) {}
Graph::Graph(Graph &&) noexcept = default;
Graph &Graph::operator=(Graph &&) noexcept = default;
Graph::~Graph() = default;

unsigned Graph::absoluteTile(unsigned tile, const char *what) const {
  if (tile >= target_.getNumTiles())
    throw invalid_tile_mapping(std::string(what) + ": tile " + std::to_string(tile) +
                               " does not exist; this graph has tiles 0.." +
                               std::to_string(target_.getNumTiles() - 1));
  return tile + target_.getTileOffset();
}

bool Graph::addCodelets(StringRef src, CodeletFileType type, StringRef compileFlags, StringRef) {
  std::string path = src.str();
  std::string ext = path.substr(
      path.find_last_of('.') == std::string::npos ? path.size() : path.find_last_of('.'));
  bool object;
  switch (type) {
  case CodeletFileType::IPUObject:
  case CodeletFileType::Object:
    object = true;
    break;
  case CodeletFileType::CppSource:
  case CodeletFileType::PreprocessedCppSource:
  case CodeletFileType::CSource:
  case CodeletFileType::PreprocessedCSource:
    object = false;
    break;
  case CodeletFileType::Auto:
    if (ext == ".gp" || ext == ".so" || ext == ".o")
      object = true;
    else if (ext == ".cpp" || ext == ".cc" || ext == ".cxx" || ext == ".C" || ext == ".c")
      object = false;
    else
      throw graph_program_compilation_error(
          "addCodelets('" + path + "'): cannot tell the file type from '" + ext +
          "'; use a .cpp source or a .gp object, or pass a CodeletFileType");
    break;
  default:
    throw graph_program_compilation_error("addCodelets('" + path +
                                          "'): assembly codelets need the IPU toolchain; "
                                          "popsnn's CPU runtime runs C++ codelets only");
  }
  std::string objectPath = object ? path : detail::compileCodeletSource(path, compileFlags.str());
  const popsnn_codelet_table *table = detail::loadCodeletObject(objectPath);
  GraphState &g = *state_;
  if (std::find(g.codeletFiles.begin(), g.codeletFiles.end(), objectPath) != g.codeletFiles.end())
    return false;
  for (unsigned i = 0; i < table->numVertices; ++i) {
    const popsnn_vertex_desc &d = table->vertices[i];
    std::string name = detail::normaliseVertexName(d.name);
    auto it = g.vertexClasses.find(name);
    if (it != g.vertexClasses.end())
      throw graph_program_compilation_error("addCodelets('" + path + "'): vertex '" + name +
                                            "' is already defined by '" + it->second.origin + "'");
  }
  for (unsigned i = 0; i < table->numVertices; ++i) {
    const popsnn_vertex_desc &d = table->vertices[i];
    detail::VertexClass c;
    c.name = detail::normaliseVertexName(d.name);
    c.origin = path;
    c.desc = &d;
    for (unsigned f = 0; f < d.numFields; ++f)
      c.fieldIndex[d.fields[f].name] = f;
    g.vertexClasses[c.name] = std::move(c);
  }
  g.codeletFiles.push_back(objectPath);
  g.codeletRecords.push_back(
      {object, detail::canonicalPath(path), compileFlags.str(), detail::fileSha256(path)});
  return true;
}

void Graph::addCodelets(ArrayRef<std::string> srcs, StringRef compileFlags) {
  for (const auto &s : srcs)
    addCodelets(s, CodeletFileType::Auto, compileFlags);
}

Tensor Graph::addVariable(const Type &type, ArrayRef<std::size_t> shape, const DebugContext &dc) {
  if (type.sizeInBytes() == 0)
    throw tensor_creation_error("addVariable('" + dc.getPathName() +
                                "'): the element type is not valid; use poplar::FLOAT, INT, ...");
  GraphState &g = *state_;
  detail::VariableInfo v;
  v.name = dc.getPathName().empty() ? "var" + std::to_string(g.vars.size()) : dc.getPathName();
  v.type = type;
  v.shape.assign(shape.begin(), shape.end());
  v.numElements = 1;
  for (auto d : shape)
    v.numElements *= d;
  v.tile.assign(v.numElements, -1);
  unsigned id = static_cast<unsigned>(g.vars.size());
  g.vars.push_back(std::move(v));
  std::vector<detail::TensorRegion> regions;
  if (g.vars.back().numElements)
    regions.push_back({id, 0, g.vars.back().numElements});
  return Tensor(g.id, type, g.vars.back().shape, std::move(regions));
}

Tensor Graph::addVariable(const Type &type, ArrayRef<std::size_t> shape,
                          VariableMappingMethod method, const DebugContext &dc) {
  Tensor t = addVariable(type, shape, dc);
  if (method == VariableMappingMethod::LINEAR) {
    // Spread evenly over this graph's tiles, in contiguous blocks.
    const std::size_t n = t.numElements(), tiles = target_.getNumTiles();
    Tensor flat = t.flatten();
    for (std::size_t k = 0; k < tiles; ++k) {
      std::size_t b = n * k / tiles, e = n * (k + 1) / tiles;
      if (b < e)
        setTileMapping(flat.slice(b, e), static_cast<unsigned>(k));
    }
  }
  return t;
}

Tensor Graph::clone(const Tensor &t, const DebugContext &dc) {
  requireOwnTensor(*state_, t, "clone");
  Tensor c = addVariable(t.elementType(), t.shape(), dc);
  // Same tile mapping, element by element.
  GraphState &g = *state_;
  auto &dst = g.vars[c.regions().empty() ? 0 : c.regions()[0].var].tile;
  std::size_t k = 0;
  for (const auto &r : t.regions())
    for (std::size_t e = r.begin; e < r.end; ++e)
      dst[k++] = g.vars[r.var].tile[e];
  return c;
}

Tensor Graph::addConstantImpl(const Type &type, ArrayRef<std::size_t> shape, const double *values,
                              std::size_t n, const DebugContext &dc) {
  Tensor t = addVariable(type, shape, dc);
  if (t.numElements() == 0)
    return t;
  auto &v = state_->vars[t.regions()[0].var];
  v.isConstant = true;
  if (n != 1 && n != v.numElements)
    throw tensor_creation_error("addConstant('" + dc.getPathName() + "'): got " +
                                std::to_string(n) + " values for a tensor of " +
                                std::to_string(v.numElements) +
                                " elements; pass one value or one per element");
  const unsigned sz = type.sizeInBytes();
  v.init.resize(v.numElements * sz);
  for (std::size_t i = 0; i < v.numElements; ++i)
    detail::storeAs(type, values[n == 1 ? 0 : i], v.init.data() + i * sz);
  return t;
}

void Graph::setTensorValueImpl(const Tensor &t, const double *values, std::size_t n,
                               bool broadcast) {
  GraphState &g = *state_;
  requireOwnTensor(g, t, "setInitialValue");
  if (!broadcast && n != t.numElements())
    throw graph_connection_error("setInitialValue: got " + std::to_string(n) +
                                 " values for tensor " + detail::describeTensor(g, t) + " of " +
                                 std::to_string(t.numElements()) + " elements");
  std::size_t k = 0;
  for (const auto &r : t.regions()) {
    auto &v = g.vars[r.var];
    const unsigned sz = v.type.sizeInBytes();
    // An empty init means zeros: setting zeros keeps it empty, so the graph holds no copy
    // of a zero-filled tensor (the engine's tile memory starts zeroed anyway).
    if (v.init.empty() && detail::allStoreAsZero(v.type, values + (broadcast ? 0 : k),
                                                 broadcast ? 1 : r.end - r.begin)) {
      k += r.end - r.begin;
      continue;
    }
    if (v.init.empty())
      v.init.assign(v.numElements * sz, 0);
    for (std::size_t e = r.begin; e < r.end; ++e, ++k)
      detail::storeAs(v.type, values[broadcast ? 0 : k], v.init.data() + e * sz);
  }
}

void Graph::setTileMapping(const Tensor &t, unsigned tile) {
  GraphState &g = *state_;
  requireOwnTensor(g, t, "setTileMapping");
  const std::int32_t abs = static_cast<std::int32_t>(absoluteTile(tile, "setTileMapping"));
  for (const auto &r : t.regions())
    std::fill(g.vars[r.var].tile.begin() + static_cast<std::ptrdiff_t>(r.begin),
              g.vars[r.var].tile.begin() + static_cast<std::ptrdiff_t>(r.end), abs);
}

void Graph::setTileMapping(const Tensor &t, const TileToTensorMapping &mapping) {
  requireOwnTensor(*state_, t, "setTileMapping");
  Tensor flat = t.flatten();
  for (std::size_t tile = 0; tile < mapping.size(); ++tile)
    for (const auto &i : mapping[tile]) {
      if (i.end() > flat.numElements() || i.begin() > i.end())
        throw invalid_tile_mapping("setTileMapping: interval " + std::to_string(i.begin()) + ".." +
                                   std::to_string(i.end()) + " lies outside the tensor's " +
                                   std::to_string(flat.numElements()) + " elements");
      if (i.size())
        setTileMapping(flat.slice(i.begin(), i.end()), static_cast<unsigned>(tile));
    }
}

void Graph::setTileMapping(VertexRef v, unsigned tile) {
  vertexOf(*state_, v, "setTileMapping").tile =
      static_cast<std::int32_t>(absoluteTile(tile, "setTileMapping(vertex)"));
}

Graph::TileToTensorMapping Graph::getTileMapping(const Tensor &t, bool requireComplete) const {
  const GraphState &g = *state_;
  requireOwnTensor(g, t, "getTileMapping");
  TileToTensorMapping m(target_.getNumTiles());
  const std::int64_t lo = target_.getTileOffset(), hi = lo + target_.getNumTiles();
  std::size_t pos = 0;
  for (const auto &r : t.regions()) {
    const auto &tiles = g.vars[r.var].tile;
    for (std::size_t e = r.begin; e < r.end; ++e, ++pos) {
      std::int64_t tile = tiles[e];
      if (tile < lo || tile >= hi) {
        if (requireComplete)
          throw invalid_tile_mapping(
              "getTileMapping: element " + std::to_string(pos) + " of tensor " +
              detail::describeTensor(g, t) +
              (tile < 0 ? " has no tile mapping" : " is mapped outside this graph's tiles") +
              "; map it with setTileMapping");
        continue;
      }
      auto &list = m[static_cast<std::size_t>(tile - lo)];
      if (!list.empty() && list.back().end() == pos)
        list.back() = Interval(list.back().begin(), pos + 1);
      else
        list.emplace_back(pos, pos + 1);
    }
  }
  return m;
}

unsigned Graph::getTileMapping(VertexRef v) const {
  const VertexInfo &info = vertexOf(*state_, v, "getTileMapping");
  if (info.tile < 0)
    throw invalid_tile_mapping("getTileMapping: " + vertexLabel(*state_, v.getId()) +
                               " has no tile yet; call setTileMapping(vertex, tile)");
  return static_cast<unsigned>(info.tile) - target_.getTileOffset();
}

ComputeSet Graph::addComputeSet(const DebugContext &dc) {
  GraphState &g = *state_;
  unsigned id = static_cast<unsigned>(g.computeSets.size());
  g.computeSets.push_back(
      {dc.getPathName().empty() ? "cs" + std::to_string(id) : dc.getPathName(), {}});
  return ComputeSet(id);
}

VertexRef Graph::addVertex(ComputeSet cs, StringRef vertexType) {
  GraphState &g = *state_;
  if (cs.getId() >= g.computeSets.size())
    throw graph_connection_error("addVertex: the compute set does not belong to this graph; "
                                 "make it with graph.addComputeSet");
  std::string name = detail::normaliseVertexName(vertexType.str());
  auto it = g.vertexClasses.find(name);
  if (it == g.vertexClasses.end()) {
    std::string known;
    unsigned k = 0;
    for (const auto &kv : g.vertexClasses) {
      if (k++ == 20) {
        known += ", ...";
        break;
      }
      known += (known.empty() ? "" : ", ") + kv.first;
    }
    throw unknown_vertex_type("addVertex: no vertex type '" + vertexType.str() +
                              "' in the codelets loaded with graph.addCodelets (" +
                              (known.empty() ? "none loaded" : "known: " + known) +
                              "); templated vertices are named like \"Name<float>\" and need an "
                              "explicit instantiation in the codelet file");
  }
  VertexInfo v;
  v.computeSet = cs.getId();
  v.cls = &it->second;
  v.fields.resize(it->second.desc->numFields);
  unsigned id = static_cast<unsigned>(g.vertices.size());
  g.vertices.push_back(std::move(v));
  g.computeSets[cs.getId()].vertices.push_back(id);
  return VertexRef(&g, id);
}

VertexRef Graph::addVertex(ComputeSet cs, StringRef vertexType,
                           ArrayRef<ConnectionDesc> connections) {
  VertexRef v = addVertex(cs, vertexType);
  for (const auto &c : connections)
    connect(v[c.field], c.tensor);
  return v;
}

void Graph::connect(FieldRef field, const Tensor &tensor) {
  GraphState &g = *state_;
  const unsigned fi = fieldIndex(g, field, "connect");
  VertexInfo &v = g.vertices[field.vertex().getId()];
  const popsnn_field_desc &d = v.cls->desc->fields[fi];
  FieldState &fs = v.fields[fi];
  const std::string where =
      vertexLabel(g, field.vertex().getId()) + " field '" + field.name() + "'";
  requireOwnTensor(g, tensor, "connect");
  if (d.access == detail::kFieldState)
    throw graph_connection_error("connect: " + where +
                                 " is a plain member (vertex state), not an edge; set it with "
                                 "graph.setInitialValue, or declare it Input<...>/Output<...>");
  if (d.shape == detail::kShapeUnsupported)
    throw graph_connection_error("connect: " + where +
                                 " has a type popsnn's runtime cannot connect (use Input/Output/"
                                 "InOut of a scalar, Vector or VectorList of a Poplar type)");
  const Type *et = detail::typeFromName(d.element);
  if (!et || *et != tensor.elementType())
    throw graph_connection_error(
        "connect: " + where + " holds " + (d.element ? d.element : "a non-Poplar type") +
        " but tensor " + detail::describeTensor(g, tensor) + " holds " +
        tensor.elementType().toString() + "; connect a tensor of the field's element type");
  if (d.shape == detail::kShapeScalar && (field.isIndexed() || tensor.numElements() != 1))
    throw graph_connection_error("connect: " + where + " is a scalar " + accessName(d.access) +
                                 " but tensor " + detail::describeTensor(g, tensor) + " has " +
                                 std::to_string(tensor.numElements()) +
                                 " elements; connect a one-element tensor (e.g. t[i])");
  if (isEdgeList(d.shape)) {
    if (field.isIndexed()) {
      if (d.shape == detail::kShapeScalarList && tensor.numElements() != 1)
        throw graph_connection_error("connect: " + where + "[" + std::to_string(field.index()) +
                                     "] is a scalar edge but tensor " +
                                     detail::describeTensor(g, tensor) + " has " +
                                     std::to_string(tensor.numElements()) +
                                     " elements; connect a one-element tensor (e.g. t[i])");
      if (!fs.sizeSet || field.index() >= fs.tensors.size())
        throw no_size_specified("connect: " + where + "[" + std::to_string(field.index()) +
                                "]: call graph.setFieldSize(v[\"" + field.name() +
                                "\"], n) with n > index before connecting list entries");
      fs.tensors[field.index()] = tensor.flatten();
      fs.entrySet[field.index()] = true;
      fs.connected = std::all_of(fs.entrySet.begin(), fs.entrySet.end(), [](bool b) { return b; });
      return;
    }
    const unsigned rank = d.shape == detail::kShapeScalarList ? 1 : 2;
    if (tensor.rank() != rank)
      throw graph_connection_error("connect: " + where + " is a list of edges; connect a list of " +
                                   "tensors or a rank-" + std::to_string(rank) +
                                   " tensor (one edge per " + (rank == 1 ? "element" : "row") +
                                   "), not " + tensor.shortString());
    std::vector<Tensor> rows;
    for (std::size_t r = 0; r < tensor.dim(0); ++r)
      rows.push_back(tensor[r]);
    connect(field, rows);
    return;
  }
  if (fs.connected)
    throw graph_connection_error("connect: " + where + " is already connected");
  if (field.isIndexed())
    throw graph_connection_error("connect: " + where + " is not a VectorList; drop the [index]");
  fs.tensors = {tensor.flatten()};
  fs.connected = true;
}

void Graph::connect(FieldRef field, ArrayRef<Tensor> tensors) {
  GraphState &g = *state_;
  const unsigned fi = fieldIndex(g, field, "connect");
  VertexInfo &v = g.vertices[field.vertex().getId()];
  const popsnn_field_desc &d = v.cls->desc->fields[fi];
  if (!isEdgeList(d.shape))
    throw graph_connection_error(
        "connect: " + vertexLabel(g, field.vertex().getId()) + " field '" + field.name() +
        "' is not a VectorList or vector of edges; connect one tensor to it");
  FieldState &fs = v.fields[fi];
  if (fs.connected)
    throw graph_connection_error("connect: " + vertexLabel(g, field.vertex().getId()) + " field '" +
                                 field.name() + "' is already connected");
  fs.tensors.assign(tensors.size(), Tensor());
  fs.entrySet.assign(tensors.size(), false);
  fs.sizeSet = true;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    connect(field[i], tensors[i]);
  fs.connected = true;
}

void Graph::setFieldSize(FieldRef field, std::size_t size) {
  GraphState &g = *state_;
  const unsigned fi = fieldIndex(g, field, "setFieldSize");
  VertexInfo &v = g.vertices[field.vertex().getId()];
  if (!isEdgeList(v.cls->desc->fields[fi].shape))
    throw graph_connection_error(
        "setFieldSize: " + vertexLabel(g, field.vertex().getId()) + " field '" + field.name() +
        "' is not a VectorList or vector of edges; Vector sizes come from the connected tensor");
  FieldState &fs = v.fields[fi];
  fs.tensors.assign(size, Tensor());
  fs.entrySet.assign(size, false);
  fs.sizeSet = true;
  fs.connected = size == 0;
}

void Graph::setPerfEstimate(const VertexRef &v, std::uint64_t cycles, std::uint64_t) {
  VertexInfo &info = vertexOf(*state_, v, "setPerfEstimate");
  info.cycles = cycles;
  info.hasEstimate = true;
}

void Graph::setFieldValueImpl(FieldRef field, const double *values, std::size_t n, bool isList) {
  GraphState &g = *state_;
  const unsigned fi = fieldIndex(g, field, "setInitialValue");
  VertexInfo &v = g.vertices[field.vertex().getId()];
  const popsnn_field_desc &d = v.cls->desc->fields[fi];
  const std::string where =
      vertexLabel(g, field.vertex().getId()) + " field '" + field.name() + "'";
  if (d.access != detail::kFieldState)
    throw graph_connection_error("setInitialValue: " + where + " is an " + accessName(d.access) +
                                 " edge; connect a tensor to it (or give the tensor an initial "
                                 "value with setInitialValue(tensor, ...))");
  if (d.shape == detail::kShapeUnsupported || !detail::typeFromName(d.element))
    throw graph_connection_error(
        "setInitialValue: " + where +
        " is not a scalar or Vector of a Poplar type; popsnn cannot set it");
  if (d.shape == detail::kShapeScalar && (isList || n != 1))
    throw graph_connection_error("setInitialValue: " + where + " is a scalar; pass one value");
  if (d.shape == detail::kShapeVector && !isList)
    throw graph_connection_error("setInitialValue: " + where +
                                 " is a Vector; pass an ArrayRef of values");
  FieldState &fs = v.fields[fi];
  fs.values.assign(values, values + n);
  fs.hasValue = true;
}

Graph Graph::createVirtualGraph(unsigned lowerTile, unsigned upperTile) {
  return Graph(state_, target_.createVirtualTarget(lowerTile, upperTile));
}

DataStream Graph::addHostToDeviceFIFO(StringRef handle, const Type &elementType,
                                      std::size_t numElements, ReplicatedStreamMode,
                                      const OptionFlags &) {
  GraphState &g = *state_;
  if (handle.empty())
    throw stream_connection_error("addHostToDeviceFIFO: the handle is empty");
  if (g.streams.count(handle.str()))
    throw stream_connection_error("addHostToDeviceFIFO: a stream named '" + handle.str() +
                                  "' already exists; stream handles must be unique");
  DataStream s(handle.str(), elementType, numElements, DataStreamType::HostToDeviceFIFO);
  g.streams[handle.str()] = s;
  return s;
}

DataStream Graph::addDeviceToHostFIFO(StringRef handle, const Type &elementType,
                                      std::size_t numElements, const OptionFlags &) {
  GraphState &g = *state_;
  if (handle.empty())
    throw stream_connection_error("addDeviceToHostFIFO: the handle is empty");
  if (g.streams.count(handle.str()))
    throw stream_connection_error("addDeviceToHostFIFO: a stream named '" + handle.str() +
                                  "' already exists; stream handles must be unique");
  DataStream s(handle.str(), elementType, numElements, DataStreamType::DeviceToHostFIFO);
  g.streams[handle.str()] = s;
  return s;
}

void Graph::createHostWrite(StringRef handle, const Tensor &t, bool) {
  GraphState &g = *state_;
  requireOwnTensor(g, t, "createHostWrite");
  if (g.hostWrites.count(handle.str()))
    throw stream_connection_error("createHostWrite: handle '" + handle.str() + "' already exists");
  g.hostWrites[handle.str()] = {handle.str(), t};
}

void Graph::createHostRead(StringRef handle, const Tensor &t, bool) {
  GraphState &g = *state_;
  requireOwnTensor(g, t, "createHostRead");
  if (g.hostReads.count(handle.str()))
    throw stream_connection_error("createHostRead: handle '" + handle.str() + "' already exists");
  g.hostReads[handle.str()] = {handle.str(), t};
}

} // namespace poplar
