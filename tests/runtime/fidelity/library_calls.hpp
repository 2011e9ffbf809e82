// Helpers of the fidelity programs that call Poplar's libraries (poplin.cpp,
// popnn.cpp): mapped variables and errors printed as one line each.
#ifndef POPSNN_FIDELITY_LIBRARY_CALLS_HPP
#define POPSNN_FIDELITY_LIBRARY_CALLS_HPP

#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>
#include <poputil/TileMapping.hpp>

#include <iostream>
#include <vector>

// A variable mapped over the tiles: Poplar refuses unmapped ones at compile time.
inline poplar::Tensor mapped(poplar::Graph &graph, poplar::Type type,
                             std::vector<std::size_t> shape) {
  poplar::Tensor t = graph.addVariable(type, shape);
  poputil::mapTensorLinearly(graph, t);
  return t;
}

// Prints "what: <the error's message>" (or "what: no error") for a call that builds graph.
inline void tryCall(const char *what, void (*call)(poplar::Graph &, poplar::program::Sequence &),
                    poplar::Graph &graph, poplar::program::Sequence &prog) {
  try {
    call(graph, prog);
    std::cout << what << ": no error\n";
  } catch (const poplar::poplar_error &e) {
    std::cout << what << ": " << e.what() << "\n";
  }
}

#endif
