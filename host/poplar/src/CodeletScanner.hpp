// Internal: finds the vertex classes of a codelet source written for Poplar
// and writes the glue that describes them to the runtime. Shared by the
// runtime (graph.addCodelets("x.cpp")) and popsnn_codelet_gen (build time).
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace poplar {
namespace detail {

struct ScannedVertex {
  std::string cppType; // a C++ type expression, e.g. "ns::Foo<float, 2>"
  std::string name;    // the name addVertex uses, e.g. "ns::Foo<float,2>"
  std::vector<std::string> fields;
  unsigned line = 0;
};

struct ScanError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Vertex classes are the classes deriving from Vertex, MultiVertex or
// SupervisorVertex; a class template counts through its explicit
// instantiations ("template class Foo<float>;"). Fields are the non-static
// data members. Preprocessor lines are ignored.
std::vector<ScannedVertex> scanCodelets(const std::string &source, const std::string &fileName);

// One translation unit that includes `codeletPath` and defines
// `popsnn_codelet_part_<part>()`.
std::string generateGluePart(unsigned part, const std::string &codeletPath,
                             const std::vector<ScannedVertex> &vertices);
// Defines the exported `popsnn_codelet_table_v1()` over parts 0 .. numParts-1.
std::string generateGlueMaster(unsigned numParts);

} // namespace detail
} // namespace poplar
