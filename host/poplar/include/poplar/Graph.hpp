// popsnn's Poplar-compatible runtime: poplar::Graph, the description of
// variables, their tile mapping, vertices, compute sets and streams that an
// Engine compiles and runs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "poplar/ArrayRef.hpp"
#include "poplar/DataStream.hpp"
#include "poplar/DebugContext.hpp"
#include "poplar/Device.hpp"
#include "poplar/GraphElements.hpp"
#include "poplar/Interval.hpp"
#include "poplar/OptionFlags.hpp"
#include "poplar/StringRef.hpp"
#include "poplar/Target.hpp"
#include "poplar/Tensor.hpp"
#include "poplar/Type.hpp"

namespace poplar {
namespace program {
class Program;
}

enum class CodeletFileType {
  PreprocessedAsmSource,
  AsmSource,
  PreprocessedCSource,
  CSource,
  PreprocessedCppSource,
  CppSource,
  IPUObject,
  Object,
  Auto
};

enum class VariableMappingMethod { NONE, LINEAR };
enum class ReplicatedStreamMode { REPLICATE, BROADCAST };

class Graph {
public:
  using TileToTensorMapping = std::vector<std::vector<Interval>>;

  struct ConnectionDesc {
    ConnectionDesc(StringRef field, Tensor tensor)
        : field(field.str()), tensor(std::move(tensor)) {}
    std::string field;
    Tensor tensor;
  };

  explicit Graph(const Target &target);
  explicit Graph(const Device &device);
  Graph(Graph &&) noexcept;
  Graph &operator=(Graph &&) noexcept;
  ~Graph();

  const Target &getTarget() const { return target_; }

  // Codelets: a C++ source written for Poplar (compiled with the host compiler
  // and cached), or a ".gp" object built by popsnn_add_codelets() / popc.
  bool addCodelets(StringRef src, CodeletFileType type = CodeletFileType::Auto,
                   StringRef compileFlags = "", StringRef targetName = "");
  void addCodelets(ArrayRef<std::string> srcs, StringRef compileFlags = "");

  // Tensors.
  Tensor addVariable(const Type &type, ArrayRef<std::size_t> shape, const DebugContext &dc = {});
  Tensor addVariable(const Type &type, ArrayRef<std::size_t> shape, VariableMappingMethod method,
                     const DebugContext &dc = {});
  Tensor clone(const Tensor &t, const DebugContext &dc = {});
  template <typename T, typename = typename std::enable_if<std::is_arithmetic<T>::value>::type>
  Tensor addConstant(const Type &type, ArrayRef<std::size_t> shape, ArrayRef<T> values,
                     const DebugContext &dc = {"<const>"}) {
    std::vector<double> v(values.begin(), values.end());
    return addConstantImpl(type, shape, v.data(), v.size(), dc);
  }
  template <typename T, typename = typename std::enable_if<std::is_arithmetic<T>::value>::type>
  Tensor addConstant(const Type &type, ArrayRef<std::size_t> shape, T value,
                     const DebugContext &dc = {"<const>"}) {
    double v = static_cast<double>(value);
    return addConstantImpl(type, shape, &v, 1, dc);
  }
  template <typename T, typename = typename std::enable_if<std::is_arithmetic<T>::value>::type>
  Tensor addConstant(const Type &type, ArrayRef<std::size_t> shape, const T *values,
                     const DebugContext &dc = {"<const>"}) {
    std::size_t n = 1;
    for (auto d : shape)
      n *= d;
    std::vector<double> v(values, values + n);
    return addConstantImpl(type, shape, v.data(), v.size(), dc);
  }

  // Tile mapping. Tiles are numbered within this (virtual) graph.
  void setTileMapping(const Tensor &t, unsigned tile);
  void setTileMapping(const Tensor &t, const TileToTensorMapping &mapping);
  void setTileMapping(VertexRef v, unsigned tile);
  TileToTensorMapping getTileMapping(const Tensor &t, bool requireComplete = true) const;
  unsigned getTileMapping(VertexRef v) const;

  // Compute.
  ComputeSet addComputeSet(const DebugContext &dc = {});
  // A program that program::Call runs wherever it is called.
  Function addFunction(const program::Program &program);
  VertexRef addVertex(ComputeSet cs, StringRef vertexType);
  VertexRef addVertex(ComputeSet cs, StringRef vertexType, ArrayRef<ConnectionDesc> connections);
  void connect(FieldRef field, const Tensor &tensor);
  void connect(FieldRef field, ArrayRef<Tensor> tensors);
  void setFieldSize(FieldRef field, std::size_t size);
  void setPerfEstimate(const VertexRef &v, std::uint64_t cycles, std::uint64_t flops = 0);

  template <typename T, typename = typename std::enable_if<std::is_arithmetic<T>::value>::type>
  void setInitialValue(FieldRef field, T value) {
    double v = static_cast<double>(value);
    setFieldValueImpl(field, &v, 1, /*isList=*/false);
  }
  template <typename T> void setInitialValue(FieldRef field, ArrayRef<T> values) {
    std::vector<double> v(values.begin(), values.end());
    setFieldValueImpl(field, v.data(), v.size(), /*isList=*/true);
  }
  template <typename T, typename = typename std::enable_if<std::is_arithmetic<T>::value>::type>
  void setInitialValue(const Tensor &t, T value) {
    double v = static_cast<double>(value);
    setTensorValueImpl(t, &v, 1, /*broadcast=*/true);
  }
  template <typename T> void setInitialValue(const Tensor &t, ArrayRef<T> values) {
    std::vector<double> v(values.begin(), values.end());
    setTensorValueImpl(t, v.data(), v.size(), /*broadcast=*/false);
  }

  // Virtual graphs share everything with this graph but see tiles [lo, hi) only.
  Graph createVirtualGraph(unsigned lowerTile, unsigned upperTile);

  // Host transfers.
  DataStream addHostToDeviceFIFO(StringRef handle, const Type &elementType, std::size_t numElements,
                                 ReplicatedStreamMode mode = ReplicatedStreamMode::REPLICATE,
                                 const OptionFlags &options = {});
  DataStream addDeviceToHostFIFO(StringRef handle, const Type &elementType, std::size_t numElements,
                                 const OptionFlags &options = {});
  void createHostWrite(StringRef handle, const Tensor &t, bool rearrangeOnHost = false);
  void createHostRead(StringRef handle, const Tensor &t, bool rearrangeOnHost = false);

  // popsnn internal (used by Engine).
  const std::shared_ptr<detail::GraphState> &state() const { return state_; }

private:
  Graph(std::shared_ptr<detail::GraphState> state, Target target);
  Tensor addConstantImpl(const Type &type, ArrayRef<std::size_t> shape, const double *values,
                         std::size_t n, const DebugContext &dc);
  void setFieldValueImpl(FieldRef field, const double *values, std::size_t n, bool isList);
  void setTensorValueImpl(const Tensor &t, const double *values, std::size_t n, bool broadcast);
  unsigned absoluteTile(unsigned tile, const char *what) const;

  std::shared_ptr<detail::GraphState> state_;
  Target target_;
};

} // namespace poplar
