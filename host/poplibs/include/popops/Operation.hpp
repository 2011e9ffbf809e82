// popsnn's subset of Poplar's popops: the reduction operations.
#ifndef POPSNN_POPOPS_OPERATION_HPP
#define POPSNN_POPOPS_OPERATION_HPP

namespace popops {

// Poplar's list; popsnn's reduce provides ADD, MUL, MIN and MAX.
enum class Operation { ADD, MUL, MIN, MAX, LOGICAL_AND, LOGICAL_OR, SQUARE_ADD, LOG_ADD };

} // namespace popops

#endif
