// popsnn's subset of Poplar's popops: the operation kinds of expressions.
#ifndef POPSNN_POPOPS_EXPROP_HPP
#define POPSNN_POPOPS_EXPROP_HPP

namespace popops {
namespace expr {
// Poplar's names for the binary operations popsnn's map provides.
enum class BinaryOpType { ADD, SUBTRACT, MULTIPLY, MAXIMUM, MINIMUM };
} // namespace expr
} // namespace popops

#endif
