// popsnn_vertex_instances <LifForward|LifBackward> <in.cpp> <out.cpp>: writes a build copy of
// a LIF vertex source with, appended, the explicit instantiation of every combination of
// units the host can name (include/popsnn/VertexUnits.hpp), so the codelets instantiate
// exactly the table. A "#line 1" keeps the compiler's messages on the source.
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "popsnn/VertexUnits.hpp"

using namespace popsnn;

namespace {

std::string instantiations(const std::string &vertex) {
  std::string out = "\n// Generated from include/popsnn/VertexUnits.hpp's table.\n";
  std::set<std::string> names; // a rule without a dense layout (NoRule) names one vertex twice
  // Every stored type (docs/numerics.md section 8); the backward's half form reads dense
  // trace layouts only.
  for (unsigned storage = 0; storage < codes::NUM_STORAGES; ++storage)
    for (bool compressed : {true, false}) {
      if (compressed && storage == codes::STORE_HALF && vertex == "LifBackward")
        continue;
      for (unsigned n = 0; n < codes::NUM_NEURONS; ++n)
        for (unsigned r = 0; r < codes::NUM_RESETS; ++r)
          for (unsigned rule = 0; rule < codes::NUM_RULES; ++rule) {
            // The backward is specialised on the trace a rule leaves: each trace once.
            const std::string name = vertex == "LifForward"
                                         ? units::lifForward(n, r, rule, compressed, storage)
                                         : units::lifBackward(n, r, rule, compressed, storage);
            if (names.insert(name).second)
              out += "template class " + name + ";\n";
          }
    }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 4 ||
      (std::string(argv[1]) != "LifForward" && std::string(argv[1]) != "LifBackward")) {
    std::cerr << "usage: popsnn_vertex_instances <LifForward|LifBackward> <in.cpp> <out.cpp>\n";
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) {
    std::cerr << "popsnn_vertex_instances: cannot read " << argv[2] << "\n";
    return 1;
  }
  std::stringstream source;
  source << in.rdbuf();
  std::ofstream out(argv[3], std::ios::binary);
  out << "#line 1 \"" << argv[2] << "\"\n" << source.str() << instantiations(argv[1]);
  if (!out) {
    std::cerr << "popsnn_vertex_instances: cannot write " << argv[3] << "\n";
    return 1;
  }
  return 0;
}
