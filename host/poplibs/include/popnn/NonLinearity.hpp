// popsnn's subset of Poplar's popnn non-linearities on float tensors.
#ifndef popnn_NonLinearity_hpp
#define popnn_NonLinearity_hpp

#include <popnn/NonLinearityDef.hpp>

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

namespace popnn {

// t replaced by f(t), element by element (softmax: row by row over the innermost dimension).
void nonLinearityInPlace(poplar::Graph &graph, NonLinearityType nonLinearityType, poplar::Tensor t,
                         poplar::program::Sequence &prog,
                         const poplar::DebugContext &debugContext = {});
// f(t) in a new tensor mapped as t.
poplar::Tensor nonLinearity(poplar::Graph &graph, NonLinearityType nonLinearityType,
                            poplar::Tensor t, poplar::program::Sequence &prog,
                            const poplar::DebugContext &debugContext = {});

inline poplar::Tensor sigmoid(poplar::Graph &graph, poplar::Tensor t,
                              poplar::program::Sequence &prog,
                              const poplar::DebugContext &debugContext = {}) {
  return nonLinearity(graph, NonLinearityType::SIGMOID, t, prog, debugContext);
}
inline poplar::Tensor relu(poplar::Graph &graph, poplar::Tensor t, poplar::program::Sequence &prog,
                           const poplar::DebugContext &debugContext = {}) {
  return nonLinearity(graph, NonLinearityType::RELU, t, prog, debugContext);
}
inline poplar::Tensor tanh(poplar::Graph &graph, poplar::Tensor t, poplar::program::Sequence &prog,
                           const poplar::DebugContext &debugContext = {}) {
  return nonLinearity(graph, NonLinearityType::TANH, t, prog, debugContext);
}
inline poplar::Tensor softmax(poplar::Graph &graph, poplar::Tensor t,
                              poplar::program::Sequence &prog,
                              const poplar::DebugContext &debugContext = {}) {
  return nonLinearity(graph, NonLinearityType::SOFTMAX, t, prog, debugContext);
}
inline void reluInPlace(poplar::Graph &graph, poplar::Tensor t, poplar::program::Sequence &prog,
                        const poplar::DebugContext &debugContext = {}) {
  nonLinearityInPlace(graph, NonLinearityType::RELU, t, prog, debugContext);
}
inline void sigmoidInPlace(poplar::Graph &graph, poplar::Tensor t, poplar::program::Sequence &prog,
                           const poplar::DebugContext &debugContext = {}) {
  nonLinearityInPlace(graph, NonLinearityType::SIGMOID, t, prog, debugContext);
}

} // namespace popnn

#endif
