// popsnn_vertex_instances <LifForward|LifBackward> <in.cpp> <out.cpp> [model...]: writes a build
// copy of a LIF vertex source with, appended, the explicit instantiation of every combination of
// units the host can name (include/popsnn/VertexUnits.hpp), so the codelets instantiate
// exactly the table; given models (the POPSNN_NEURONS build option), only theirs. A "#line 1"
// keeps the compiler's messages on the source.
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "popsnn/VertexUnits.hpp"

using namespace popsnn;

namespace {

// Each unit's model name (RLeaky's two units share one), by neuron code.
#define POPSNN_NEURON_MODEL_NAME(code, name, unit, states) #name,
constexpr const char *MODEL_OF_UNIT[codes::NUM_NEURONS] = {POPSNN_NEURON_MODELS(
    POPSNN_NEURON_MODEL_NAME) POPSNN_NEURON_VARIANTS(POPSNN_NEURON_MODEL_NAME)};
#undef POPSNN_NEURON_MODEL_NAME

std::string instantiations(const std::string &vertex, const std::set<std::string> &models) {
  std::string out = "\n// Generated from include/popsnn/VertexUnits.hpp's table.\n";
  std::set<std::string> names; // a rule without a dense layout (NoRule) names one vertex twice
  // Every stored type (docs/numerics.md section 8); the backward's half form reads dense
  // trace layouts only.
  for (unsigned storage = 0; storage < codes::NUM_STORAGES; ++storage)
    for (bool compressed : {true, false}) {
      if (compressed && storage == codes::STORE_HALF && vertex == "LifBackward")
        continue;
      for (unsigned n = 0; n < codes::NUM_NEURONS; ++n) {
        if (!models.empty() && !models.count(MODEL_OF_UNIT[n]))
          continue;
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
    }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 4 || (std::string(argv[1]) != "LifForward" && std::string(argv[1]) != "LifBackward")) {
    std::cerr << "usage: popsnn_vertex_instances <LifForward|LifBackward> <in.cpp> <out.cpp> "
                 "[model...]\n";
    return 2;
  }
  const std::set<std::string> known(std::begin(MODEL_OF_UNIT), std::end(MODEL_OF_UNIT));
  std::set<std::string> models;
  for (int i = 4; i < argc; ++i) {
    if (!known.count(argv[i])) {
      std::string names;
      for (const auto &k : known)
        names += (names.empty() ? "" : ";") + k;
      std::cerr << "POPSNN_NEURONS: unknown neuron model '" << argv[i] << "'; give some of "
                << names << " (or leave it empty for all)\n";
      return 1;
    }
    models.insert(argv[i]);
  }
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) {
    std::cerr << "popsnn_vertex_instances: cannot read " << argv[2] << "\n";
    return 1;
  }
  std::stringstream source;
  source << in.rdbuf();
  std::ofstream out(argv[3], std::ios::binary);
  out << "#line 1 \"" << argv[2] << "\"\n" << source.str() << instantiations(argv[1], models);
  if (!out) {
    std::cerr << "popsnn_vertex_instances: cannot write " << argv[3] << "\n";
    return 1;
  }
  return 0;
}
