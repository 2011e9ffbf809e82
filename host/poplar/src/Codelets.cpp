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
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

#include "CodeletCache.hpp"
#include "CodeletScanner.hpp"
#include "EmbeddedHeaders.hpp"
#include "poplar/exceptions.hpp"

#ifndef POPSNN_RUNTIME_VERSION
#error "POPSNN_RUNTIME_VERSION is set by host/poplar/CMakeLists.txt"
#endif

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

bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string shellQuote(const std::string &s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string absolutePath(const std::string &path) {
  char *r = ::realpath(path.c_str(), nullptr);
  if (!r)
    return path;
  std::string out = r;
  std::free(r);
  return out;
}

std::string compiler() {
  if (const char *env = std::getenv("POPSNN_CXX"))
    if (*env)
      return env;
  std::string def = POPSNN_DEFAULT_CXX;
  if (!def.empty() && def[0] == '/' && !fileExists(def))
    return "c++";
  return def;
}

// Runs a shell command; returns its exit status, its output in `output`.
int runCommand(const std::string &cmd, std::string &output) {
  FILE *pipe = ::popen(cmd.c_str(), "r");
  if (!pipe)
    return -1;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0)
    output.append(buf, n);
  return ::pclose(pipe);
}

// The compiler's resolved path and `--version` output: a compiler upgraded in
// place must not reuse objects the old one made. Asked once per process.
std::string compilerIdentity(const std::string &cxx) {
  static std::map<std::string, std::string> known;
  auto it = known.find(cxx);
  if (it != known.end())
    return it->second;
  std::string path;
  if (runCommand("command -v " + shellQuote(cxx) + " 2>/dev/null", path) != 0)
    path = cxx;
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r'))
    path.pop_back();
  std::string version;
  int status = runCommand(shellQuote(cxx) + " --version 2>&1", version);
  return known[cxx] = absolutePath(path) + '\0' + version + '\0' + std::to_string(status);
}

// The vertex-side headers, in a folder named by their digest; a file whose
// content differs (damaged, or left by an older runtime) is written again.
std::string headerDir(const std::string &cache, std::string &digest) {
  std::string all;
  for (unsigned i = 0; i < kNumEmbeddedHeaders; ++i)
    all += std::string(kEmbeddedHeaders[i].path) + '\0' + kEmbeddedHeaders[i].content + '\0';
  digest = sha256Hex(all);
  std::string dir = cache + "/include-" + digest.substr(0, 16);
  for (unsigned i = 0; i < kNumEmbeddedHeaders; ++i) {
    std::string p = dir + "/" + kEmbeddedHeaders[i].path, old, why;
    if (isPrivateFile(p, why) && readFile(p, old) && old == kEmbeddedHeaders[i].content)
      continue;
    makePrivateDirs(p.substr(0, p.rfind('/')));
    writeFileAtomically(p, kEmbeddedHeaders[i].content);
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

const popsnn_codelet_table *loadCodeletObject(const std::string &path) {
  std::lock_guard<std::mutex> lock(codeletMutex());
  static std::map<std::string, const popsnn_codelet_table *> loaded;
  std::string abs = absolutePath(path);
  auto it = loaded.find(abs);
  if (it != loaded.end())
    return it->second;
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
        "'" + path +
        "' is not a popsnn codelet object (no popsnn_codelet_table_v1); build it "
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

std::string canonicalPath(const std::string &path) { return absolutePath(path); }

std::string fileSha256(const std::string &path) {
  std::string content;
  if (!readFile(path, content))
    throw graph_program_compilation_error("cannot read codelet file '" + path +
                                          "': " + std::strerror(errno));
  return sha256Hex(content);
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
  std::string headersDigest;
  const std::string headers = headerDir(cache, headersDigest);
  const std::string cxx = compiler();
  std::string dir = abs.substr(0, abs.rfind('/'));
  std::string cpuKey;
  const std::string native = nativeFlags(cpuKey);
  // Everything that goes into the compile, each part ended by a NUL.
  std::string keyText = std::string("popsnn codelet cache 3") + '\0';
  for (const std::string &part :
       {std::string(POPSNN_RUNTIME_VERSION), std::to_string(POPSNN_CODELET_ABI_VERSION), source,
        glue, includedFilesFingerprint(abs, source, flags), flags, native, cpuKey,
        compilerIdentity(cxx), headersDigest})
    keyText += part + '\0';
  std::string base = cache + "/codelet-" + sha256Hex(keyText);
  std::string object = base + ".gp";
  std::string why;
  if (isPrivateFile(object, why))
    return object;
  if (fileExists(object))
    std::cerr << "popsnn: not loading the cached codelet object '" << object << "': " << why
              << "; compiling it again\n";

  writeFileAtomically(base + ".glue.cpp", glue);
  std::string tmp = base + ".tmp" + std::to_string(::getpid()) + ".gp";
  // __POPC__ as popc defines it for every codelet; __IPU__ stays undefined (host code).
  std::string cmd = shellQuote(cxx) + " -std=c++17 -O3 -D__POPC__" + native +
                    " -fPIC -shared -fvisibility=hidden -I" + shellQuote(headers) + " -I" +
                    shellQuote(dir) + " " + flags + " -o " + shellQuote(tmp) + " " +
                    shellQuote(base + ".glue.cpp") + " 2>&1";
  std::string output;
  int status = runCommand(cmd, output);
  if (status == -1)
    throw graph_program_compilation_error("cannot run the host compiler '" + cxx +
                                          "'; set POPSNN_CXX to a C++17 compiler");
  // The compiler's umask-given mode may let the group write; the cache holds only private files.
  if (status != 0 || ::chmod(tmp.c_str(), 0700) != 0) {
    std::remove(tmp.c_str());
    if (output.size() > 8000)
      output = output.substr(0, 8000) + "\n[... truncated]";
    throw graph_program_compilation_error("compiling codelets '" + path + "' failed:\n" + output +
                                          "\ncommand: " + cmd);
  }
  if (std::rename(tmp.c_str(), object.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw graph_program_compilation_error("cannot move the compiled codelets to '" + object +
                                          "': " + std::strerror(errno) +
                                          "; set POPSNN_CACHE_DIR to a writable folder");
  }
  return object;
}

} // namespace detail
} // namespace poplar
