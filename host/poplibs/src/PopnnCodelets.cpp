// popnn::addCodelets: popnn's vertices (codelets/PopnnVertices.cpp) embedded as
// text in the library, compiled through the runtime's codelet cache.
#include <popnn/codelets.hpp>

#include "EmbeddedSource.hpp"

namespace popnn {
namespace detail {
extern const char *const kVertexSource;
} // namespace detail

void addCodelets(poplar::Graph &graph) {
  graph.addCodelets(poplibs_detail::embeddedSourcePath("popnn-vertices", detail::kVertexSource));
}

} // namespace popnn
