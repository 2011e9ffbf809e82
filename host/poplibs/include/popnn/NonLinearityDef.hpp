// The non-linearities popnn names (popsnn provides SIGMOID, RELU, TANH, SOFTMAX
// and SOFTMAX_STABLE; the others are refused in one line).
#ifndef popnn_NonLinearityDef_hpp
#define popnn_NonLinearityDef_hpp

namespace popnn {

enum class NonLinearityType {
  SIGMOID,        // 1 / (1 + e^-x)
  HARD_SIGMOID,   // not provided
  RELU,           // max(x, 0)
  TANH,           // tanh(x)
  GELU,           // not provided
  GELU_ERF,       // not provided
  SWISH,          // not provided
  SOFTMAX,        // over the innermost dimension (computed as SOFTMAX_STABLE)
  SOFTMAX_STABLE, // over the innermost dimension, the row's maximum subtracted first
  SOFTMAX_SCALED  // not provided
};

} // namespace popnn

#endif
