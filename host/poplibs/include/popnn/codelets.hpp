// popnn's vertices, added to a graph before any popnn function builds on it.
#ifndef popnn_codelets_hpp
#define popnn_codelets_hpp

#include <poplar/Graph.hpp>

namespace popnn {

void addCodelets(poplar::Graph &graph);

} // namespace popnn

#endif
