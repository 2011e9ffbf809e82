// Internal: the byte format of a serialized poplar::Executable (Executable::serialize /
// deserialize) and the bounded reader that decodes it. The stream is untrusted input:
// every read is checked against what is left, every count against a limit, and the
// payload against its SHA-256 before anything is decoded.
//
// Layout (little-endian): "POPSNNEX", u32 version, u64 payload bytes, payload,
// 64 hex digits of the payload's SHA-256. The payload is the target, the codelet files
// (path, flags, content hash), variables, compute sets, vertices, streams, host
// read/write handles and the program DAG (see ExecutableWriter.cpp).
#pragma once
#include <cstdint>
#include <cstring>
#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "poplar/exceptions.hpp"

namespace poplar {
namespace detail {

class EngineImpl;
class GraphState;
struct ProgramNode;

constexpr char kExecutableMagic[8] = {'P', 'O', 'P', 'S', 'N', 'N', 'E', 'X'};
constexpr std::uint32_t kExecutableVersion = 1;

void writeExecutable(std::ostream &out, const GraphState &g,
                     const std::vector<std::shared_ptr<ProgramNode>> &roots);
std::unique_ptr<EngineImpl> readExecutable(std::istream &in);

class ByteWriter {
public:
  template <typename T> void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
  }
  void str(const std::string &s) {
    put<std::uint64_t>(s.size());
    out += s;
  }
  std::string out;
};

// Reads the payload; every failure is one poplar_error naming what and where.
class ByteReader {
public:
  explicit ByteReader(const std::string &bytes) : buf_(bytes) {}
  template <typename T> T get(const char *what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, buf_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const char *what) {
    const std::uint64_t n = get<std::uint64_t>(what);
    need(n, what);
    std::string s = buf_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // A count of items that each take at least `minBytes` in the stream.
  std::uint64_t count(const char *what, std::uint64_t minBytes = 1) {
    const std::uint64_t n = get<std::uint64_t>(what);
    if (n > left() / minBytes)
      fail(std::string("its count of ") + what + " (" + std::to_string(n) +
           ") is larger than the stream allows");
    return n;
  }
  std::uint64_t left() const { return buf_.size() - pos_; }
  [[noreturn]] void fail(const std::string &why) const {
    throw poplar_error("Executable::deserialize: the stream is not a valid popsnn executable: " +
                       why + " (at payload byte " + std::to_string(pos_) + ")");
  }

private:
  void need(std::uint64_t n, const char *what) const {
    if (n > left())
      fail(std::string("it is truncated (reading ") + what + ")");
  }
  const std::string &buf_;
  std::size_t pos_ = 0;
};

} // namespace detail
} // namespace poplar
