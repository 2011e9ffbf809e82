// popsnn_codelet_gen: the build-time half of graph.addCodelets(). Scans codelet
// sources written for Poplar and writes the glue that popsnn_add_codelets()
// compiles with them into a .gp codelet object.
//   popsnn_codelet_gen -o <glue-prefix> <codelet.cpp>...
// writes <glue-prefix>_part<i>.cpp per source and <glue-prefix>.cpp (the table).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "CodeletScanner.hpp"

namespace {

bool writeIfChanged(const std::string &path, const std::string &text) {
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::stringstream old;
    old << in.rdbuf();
    if (old.str() == text)
      return true;
  }
  // Through a temporary and rename(): make may run this command twice at once
  // for its several outputs, and a compiler must never read a half-written file.
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out)
      return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string prefix;
  std::vector<std::string> sources;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o" && i + 1 < argc)
      prefix = argv[++i];
    else
      sources.push_back(a);
  }
  if (prefix.empty() || sources.empty()) {
    std::cerr << "usage: popsnn_codelet_gen -o <glue-prefix> <codelet.cpp>...\n";
    return 2;
  }
  for (std::size_t p = 0; p < sources.size(); ++p) {
    std::ifstream in(sources[p], std::ios::binary);
    if (!in) {
      std::cerr << "popsnn_codelet_gen: cannot read " << sources[p] << "\n";
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      auto vertices = poplar::detail::scanCodelets(ss.str(), sources[p]);
      if (!writeIfChanged(
              prefix + "_part" + std::to_string(p) + ".cpp",
              poplar::detail::generateGluePart(static_cast<unsigned>(p), sources[p], vertices))) {
        std::cerr << "popsnn_codelet_gen: cannot write glue for " << sources[p] << "\n";
        return 1;
      }
    } catch (const std::exception &e) {
      std::cerr << "popsnn_codelet_gen: " << e.what() << "\n";
      return 1;
    }
  }
  if (!writeIfChanged(prefix + ".cpp",
                      poplar::detail::generateGlueMaster(static_cast<unsigned>(sources.size())))) {
    std::cerr << "popsnn_codelet_gen: cannot write " << prefix << ".cpp\n";
    return 1;
  }
  return 0;
}
