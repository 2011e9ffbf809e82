#include "CodeletCache.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "poplar/exceptions.hpp"

namespace poplar {
namespace detail {

namespace {

[[noreturn]] void fail(const std::string &message) {
  throw graph_program_compilation_error(message);
}

std::string octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string realPath(const std::string &path) {
  char *r = ::realpath(path.c_str(), nullptr);
  if (!r)
    return "";
  std::string out = r;
  std::free(r);
  return out;
}

std::string folderOf(const std::string &path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool isRegularFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The folder chosen by the environment, and whether it is the shared-temp fallback.
std::string chosenCacheDir() {
  if (const char *env = std::getenv("POPSNN_CACHE_DIR"); env && *env)
    return env;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/popsnn";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/popsnn";
  const char *tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/popsnn-cache-" + std::to_string(::geteuid());
}

// Another user who can write to the cache folder could plant code that this
// process would dlopen(), so only a folder of ours that only we can write is used.
void checkPrivateFolder(const std::string &dir) {
  const std::string fix = "; set POPSNN_CACHE_DIR to a folder of your own with mode 0700";
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0)
    fail("cannot create the codelet cache folder '" + dir + "': " + std::strerror(errno) + fix);
  if (S_ISLNK(st.st_mode) && st.st_uid != ::geteuid())
    fail("the codelet cache folder '" + dir + "' is a symbolic link owned by uid " +
         std::to_string(st.st_uid) + ", not by you" + fix);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("the codelet cache folder '" + dir + "' is not a folder" + fix);
  if (st.st_uid != ::geteuid())
    fail("the codelet cache folder '" + dir + "' belongs to uid " + std::to_string(st.st_uid) +
         ", not to you (uid " + std::to_string(::geteuid()) + "), so it could hold planted code" +
         fix);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    fail("the codelet cache folder '" + dir + "' is writable by group or others (mode " +
         octal(st.st_mode) + "), so it could hold planted code; run chmod go-w '" + dir +
         "' or set POPSNN_CACHE_DIR to a folder of your own with mode 0700");
}

// The folders named by -I, -iquote and -isystem in a compile command's flags
// (split on white space: flags are passed to the shell as they are).
std::vector<std::string> includeFolders(const std::string &flags) {
  std::vector<std::string> tokens, dirs;
  std::istringstream in(flags);
  for (std::string t; in >> t;)
    tokens.push_back(t);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    for (const char *opt : {"-I", "-iquote", "-isystem"}) {
      const std::string o = opt;
      if (tokens[i] == o && i + 1 < tokens.size())
        dirs.push_back(tokens[++i]);
      else if (tokens[i].size() > o.size() && tokens[i].compare(0, o.size(), o) == 0)
        dirs.push_back(tokens[i].substr(o.size()));
      else
        continue;
      break;
    }
  return dirs;
}

struct IncludeDirective {
  std::string name;
  bool quoted;
};

// Every #include line of `text`, including those in inactive #if branches:
// hashing a header too many only costs a recompile, one too few a stale object.
std::vector<IncludeDirective> includeDirectives(const std::string &text) {
  std::vector<IncludeDirective> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#')
      continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0)
      continue;
    i = line.find_first_not_of(" \t", i + 7);
    if (i == std::string::npos || (line[i] != '"' && line[i] != '<'))
      continue;
    const char close = line[i] == '"' ? '"' : '>';
    std::size_t end = line.find(close, i + 1);
    if (end == std::string::npos)
      continue;
    out.push_back({line.substr(i + 1, end - i - 1), close == '"'});
  }
  return out;
}

} // namespace

bool readFile(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return static_cast<bool>(in) || in.eof();
}

std::string sha256Hex(const std::string &data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    fail("OpenSSL could not compute a SHA-256 digest for the codelet cache key");
  static const char *digits = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < length; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 15];
  }
  return out;
}

void makePrivateDirs(const std::string &path) {
  for (std::size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/')
      ::mkdir(path.substr(0, i).c_str(), 0700);
}

std::string codeletCacheDir() {
  const std::string dir = chosenCacheDir();
  makePrivateDirs(dir);
  checkPrivateFolder(dir);
  return dir;
}

bool isPrivateFile(const std::string &path, std::string &why) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    why = std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode))
    why = "it is not a regular file";
  else if (st.st_uid != ::geteuid())
    why = "it belongs to uid " + std::to_string(st.st_uid) + ", not to you";
  else if (st.st_mode & (S_IWGRP | S_IWOTH))
    why = "it is writable by group or others (mode " + octal(st.st_mode) + ")";
  else
    return true;
  return false;
}

void writeFileAtomically(const std::string &path, const std::string &text) {
  std::string tmp = path + ".XXXXXX";
  int fd = ::mkstemp(&tmp[0]); // mode 0600, a fresh name no one else can pre-create
  if (fd < 0)
    fail("cannot write in the codelet cache ('" + path + "': " + std::strerror(errno) +
         "); set POPSNN_CACHE_DIR to a writable folder");
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    done += static_cast<std::size_t>(n);
  }
  const bool ok = done == text.size() && ::close(fd) == 0;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    fail("cannot write '" + path + "' in the codelet cache (" + reason +
         "); set POPSNN_CACHE_DIR to a writable folder");
  }
}

std::string includedFilesFingerprint(const std::string &sourcePath, const std::string &source,
                                     const std::string &flags) {
  std::vector<std::string> folders{folderOf(sourcePath)};
  for (const std::string &d : includeFolders(flags))
    folders.push_back(d);
  std::set<std::string> seen{realPath(sourcePath)};
  std::vector<std::pair<std::string, std::string>> pending{{sourcePath, source}};
  std::string fingerprint;
  while (!pending.empty()) {
    auto [file, text] = std::move(pending.back());
    pending.pop_back();
    for (const IncludeDirective &inc : includeDirectives(text)) {
      std::vector<std::string> candidates;
      if (inc.quoted)
        candidates.push_back(folderOf(file) + "/" + inc.name);
      for (const std::string &d : folders)
        candidates.push_back(d + "/" + inc.name);
      for (const std::string &c : candidates) {
        if (!isRegularFile(c))
          continue;
        std::string real = realPath(c), content;
        if (seen.insert(real).second && readFile(real, content)) {
          fingerprint += real + '\0' + content + '\0';
          pending.emplace_back(real, std::move(content));
        }
        break;
      }
    }
  }
  return fingerprint;
}

} // namespace detail
} // namespace poplar
