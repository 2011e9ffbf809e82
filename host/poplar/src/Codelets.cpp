#include "Codelets.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "CodeletScanner.hpp"
#include "EmbeddedHeaders.hpp"
#include "poplar/exceptions.hpp"

#ifndef POPSNN_DEFAULT_CXX
#define POPSNN_DEFAULT_CXX "c++"
#endif

namespace poplar {
namespace detail {

namespace {

std::mutex &codeletMutex() {
  static std::mutex m;
  return m;
}

std::uint64_t fnv1a(const std::string &s, std::uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool readFile(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void makeDirs(const std::string &path) {
  std::string cur;
  for (std::size_t i = 0; i < path.size(); ++i) {
    cur += path[i];
    if ((path[i] == '/' && i > 0) || i + 1 == path.size()) ::mkdir(cur.c_str(), 0755);
  }
}

// Writes `text` to `path` through a temporary file and rename(), so that
// concurrent processes never see a half-written file.
void writeAtomically(const std::string &path, const std::string &text) {
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out)
      throw graph_program_compilation_error("cannot write " + tmp +
                                            "; set POPSNN_CACHE_DIR to a writable folder");
  }
  std::rename(tmp.c_str(), path.c_str());
}

std::string shellQuote(const std::string &s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string absolutePath(const std::string &path) {
  char *r = ::realpath(path.c_str(), nullptr);
  if (!r) return path;
  std::string out = r;
  std::free(r);
  return out;
}

std::string compiler() {
  if (const char *env = std::getenv("POPSNN_CXX"))
    if (*env) return env;
  std::string def = POPSNN_DEFAULT_CXX;
  if (!def.empty() && def[0] == '/' && !fileExists(def)) return "c++";
  return def;
}

// The vertex-side headers, written once per content into the cache.
std::string headerDir(const std::string &cache) {
  std::string all;
  for (unsigned i = 0; i < kNumEmbeddedHeaders; ++i)
    all += std::string(kEmbeddedHeaders[i].path) + '\0' + kEmbeddedHeaders[i].content;
  std::string dir = cache + "/include-" + hex(fnv1a(all));
  for (unsigned i = 0; i < kNumEmbeddedHeaders; ++i) {
    std::string p = dir + "/" + kEmbeddedHeaders[i].path;
    if (fileExists(p)) continue;
    makeDirs(p.substr(0, p.rfind('/')));
    writeAtomically(p, kEmbeddedHeaders[i].content);
  }
  return dir;
}

// Codelets compiled here run here, so they may use every instruction of this
// CPU (~25% faster LIF training steps measured with -march=native). The CPU's
// feature flags join the cache key, so a cache shared between machines never
// hands one CPU another's code.
std::string nativeFlags(std::string &cpuKey) {
#if defined(__x86_64__)
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0) {
      cpuKey = line;
      return " -march=native";
    }
#endif
  cpuKey.clear();
  return "";
}

} // namespace

std::string codeletCacheDir() {
  std::string dir;
  if (const char *env = std::getenv("POPSNN_CACHE_DIR"); env && *env) dir = env;
  else if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) dir = std::string(xdg) + "/popsnn";
  else if (const char *home = std::getenv("HOME"); home && *home) dir = std::string(home) + "/.cache/popsnn";
  else dir = "/tmp/popsnn-cache-" + std::to_string(::getuid());
  makeDirs(dir);
  return dir;
}

const popsnn_codelet_table *loadCodeletObject(const std::string &path) {
  std::lock_guard<std::mutex> lock(codeletMutex());
  static std::map<std::string, const popsnn_codelet_table *> loaded;
  std::string abs = absolutePath(path);
  auto it = loaded.find(abs);
  if (it != loaded.end()) return it->second;
  if (!fileExists(abs))
    throw graph_program_compilation_error("codelet object '" + path + "' does not exist");
  // Never dlclose(): engines keep pointers to the vertex code.
  void *handle = ::dlopen(abs.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw graph_program_compilation_error("cannot load codelet object '" + path +
                                          "': " + ::dlerror());
  auto fn = reinterpret_cast<popsnn_codelet_table_fn>(::dlsym(handle, "popsnn_codelet_table_v1"));
  if (!fn)
    throw graph_program_compilation_error(
        "'" + path + "' is not a popsnn codelet object (no popsnn_codelet_table_v1); build it "
        "with popsnn_add_codelets() in CMake. A .gp made by Graphcore's popc holds IPU code, "
        "which this CPU runtime cannot run: pass the codelet source instead");
  const popsnn_codelet_table *table = fn();
  if (!table || table->abiVersion != POPSNN_CODELET_ABI_VERSION)
    throw graph_program_compilation_error(
        "codelet object '" + path + "' was built for codelet ABI " +
        std::to_string(table ? table->abiVersion : 0) + " but this runtime uses ABI " +
        std::to_string(POPSNN_CODELET_ABI_VERSION) + "; rebuild it against this popsnn");
  loaded[abs] = table;
  return table;
}

std::string compileCodeletSource(const std::string &path, const std::string &flags) {
  std::string source;
  if (!readFile(path, source))
    throw graph_program_compilation_error("cannot read codelet source '" + path +
                                          "': " + std::strerror(errno));
  std::string abs = absolutePath(path);
  std::vector<ScannedVertex> vertices;
  try {
    vertices = scanCodelets(source, abs);
  } catch (const ScanError &e) {
    throw graph_program_compilation_error(std::string("cannot read the vertex classes of ") +
                                          e.what());
  }
  std::string glue = generateGluePart(0, abs, vertices) + generateGlueMaster(1);

  std::lock_guard<std::mutex> lock(codeletMutex());
  const std::string cache = codeletCacheDir();
  const std::string headers = headerDir(cache);
  const std::string cxx = compiler();
  std::string dir = abs.substr(0, abs.rfind('/'));
  std::string cpuKey;
  const std::string native = nativeFlags(cpuKey);
  std::string key = hex(fnv1a(source + '\0' + glue + '\0' + flags + '\0' + cxx + '\0' + headers +
                              '\0' + cpuKey + '\0' + std::to_string(POPSNN_CODELET_ABI_VERSION)));
  std::string base = cache + "/codelet-" + key;
  std::string object = base + ".gp";
  if (fileExists(object)) return object;

  writeAtomically(base + ".glue.cpp", glue);
  std::string tmp = base + ".tmp" + std::to_string(::getpid()) + ".gp";
  std::string cmd = shellQuote(cxx) + " -std=c++17 -O3" + native + " -fPIC -shared -fvisibility=hidden -I" +
                    shellQuote(headers) + " -I" + shellQuote(dir) + " " + flags + " -o " +
                    shellQuote(tmp) + " " + shellQuote(base + ".glue.cpp") + " 2>&1";
  std::string output;
  FILE *pipe = ::popen(cmd.c_str(), "r");
  if (!pipe)
    throw graph_program_compilation_error("cannot run the host compiler '" + cxx +
                                          "'; set POPSNN_CXX to a C++17 compiler");
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  int status = ::pclose(pipe);
  if (status != 0 || !fileExists(tmp)) {
    std::remove(tmp.c_str());
    if (output.size() > 8000) output = output.substr(0, 8000) + "\n[... truncated]";
    throw graph_program_compilation_error("compiling codelets '" + path +
                                          "' failed:\n" + output + "\ncommand: " + cmd);
  }
  std::rename(tmp.c_str(), object.c_str());
  return object;
}

} // namespace detail
} // namespace poplar
