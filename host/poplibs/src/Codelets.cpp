// popops::addCodelets: popops' vertices (codelets/PopopsVertices.cpp) embedded
// as text in the library, compiled through the runtime's codelet cache.
#include <popops/codelets.hpp>

#include "EmbeddedSource.hpp"

namespace popops {
namespace detail {
extern const char *const kVertexSource;
} // namespace detail

void addCodelets(poplar::Graph &graph) {
  graph.addCodelets(poplibs_detail::embeddedSourcePath("popops-vertices", detail::kVertexSource));
}

} // namespace popops
