#include "EmbeddedSource.hpp"

// The runtime's cache helpers (private folder, atomic private writes): the
// same safety rules as for any codelet source the runtime compiles.
#include "CodeletCache.hpp"

#include <fstream>
#include <sstream>

namespace poplibs_detail {
namespace {

bool holds(const std::string &path, const std::string &text) {
  std::string why;
  if (!poplar::detail::isPrivateFile(path, why))
    return false;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return in && content.str() == text;
}

} // namespace

std::string embeddedSourcePath(const char *stem, const std::string &text) {
  const std::string path = poplar::detail::codeletCacheDir() + "/" + stem + "-" +
                           poplar::detail::sha256Hex(text).substr(0, 32) + ".cpp";
  if (!holds(path, text))
    poplar::detail::writeFileAtomically(path, text);
  return path;
}

} // namespace poplibs_detail
