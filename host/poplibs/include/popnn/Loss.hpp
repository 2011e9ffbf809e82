// popsnn's subset of Poplar's popnn losses: per-sample loss and its gradient for
// float model outputs [batch, classes] against integer labels [batch].
#ifndef popnn_Loss_hpp
#define popnn_Loss_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

namespace popnn {

// SUM_SQUARED_LOSS: loss = 0.5 * sum (y - onehot)^2, deltas = y - onehot.
// CROSS_ENTROPY_LOSS (y holds probabilities, e.g. a softmax): loss = -log(y[label] + 1e-7),
// deltas = y - onehot (the gradient at the softmax's input).
enum LossType { SUM_SQUARED_LOSS, CROSS_ENTROPY_LOSS };

// Writes loss [batch] and deltas [batch, classes]; a label outside [0, classes)
// (such as a masked one) contributes a zero loss and zero deltas.
poplar::program::Program calcLoss(poplar::Graph &graph, const poplar::Tensor &modelOutputs,
                                  const poplar::Tensor &expected, const poplar::Tensor &loss,
                                  const poplar::Tensor &deltas, LossType lossType,
                                  const poplar::DebugContext &debugContext = {});
// As above, and adds the number of rows whose largest output is the label to numCorrect.
poplar::program::Program calcLoss(poplar::Graph &graph, const poplar::Tensor &modelOutputs,
                                  const poplar::Tensor &expected, const poplar::Tensor &loss,
                                  const poplar::Tensor &deltas, const poplar::Tensor &numCorrect,
                                  LossType lossType, const poplar::DebugContext &debugContext = {});
// Adds the number of rows whose largest output (the first, on ties) is the label to numCorrect.
poplar::program::Program calcAccuracy(poplar::Graph &graph, const poplar::Tensor &modelOutputs,
                                      const poplar::Tensor &expected,
                                      const poplar::Tensor &numCorrect,
                                      const poplar::DebugContext &debugContext = {});

} // namespace popnn

#endif
