// Internal: loading codelet objects and compiling codelet sources.
#pragma once
#include <string>

#include "poplar/detail/CodeletABI.hpp"

namespace poplar {
namespace detail {

// dlopen()s a codelet object (.gp) once per process and returns its table.
const popsnn_codelet_table *loadCodeletObject(const std::string &path);

// Compiles a codelet source with the host compiler (cached under a SHA-256 of
// everything that goes into the compile; see CodeletCache.hpp)
// and returns the path of the resulting object.
std::string compileCodeletSource(const std::string &path, const std::string &flags);

// The absolute path of an existing file, symbolic links resolved (else `path` itself).
std::string canonicalPath(const std::string &path);

// Lowercase hex SHA-256 of the file's content; throws graph_program_compilation_error
// if it cannot be read.
std::string fileSha256(const std::string &path);

} // namespace detail
} // namespace poplar
