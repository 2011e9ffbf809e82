// popsnn's subset of Poplar's popops: loads the vertices popops' functions use.
#ifndef POPSNN_POPOPS_CODELETS_HPP
#define POPSNN_POPOPS_CODELETS_HPP

#include <poplar/Graph.hpp>

namespace popops {

// Call once per graph before any other popops function, as with Poplar.
void addCodelets(poplar::Graph &graph);

} // namespace popops

#endif
