// poplin::addCodelets: poplin's vertices (codelets/PoplinVertices.cpp) embedded
// as text in the library, compiled through the runtime's codelet cache.
#include <poplin/codelets.hpp>

#include "EmbeddedSource.hpp"

namespace poplin {
namespace detail {
extern const char *const kVertexSource;
} // namespace detail

void addCodelets(poplar::Graph &graph) {
  graph.addCodelets(poplibs_detail::embeddedSourcePath("poplin-vertices", detail::kVertexSource));
}

} // namespace poplin
