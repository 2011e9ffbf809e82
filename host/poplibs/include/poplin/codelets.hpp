// poplin's vertices, added to a graph before any poplin function builds on it.
#ifndef poplin_codelets_hpp
#define poplin_codelets_hpp

#include <poplar/Graph.hpp>

namespace poplin {

void addCodelets(poplar::Graph &graph);

} // namespace poplin

#endif
