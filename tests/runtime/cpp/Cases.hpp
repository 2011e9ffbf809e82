// What the runtime's test cases share: a minimal JSON writer, the case context, reading a
// tensor back and a call's error as JSON; and the cases themselves (one .cpp per theme).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/exceptions.hpp>

namespace cases {

using namespace poplar;
using namespace poplar::program;

// Minimal JSON writer: an object of named values.
class Json {
public:
  template <typename T> void num(const std::string &k, T v) { field(k) << +v; }
  void num(const std::string &k, double v) { field(k) << fmt(v); }
  void num(const std::string &k, float v) { field(k) << fmt(v); }
  void boolean(const std::string &k, bool v) { field(k) << (v ? "true" : "false"); }
  void str(const std::string &k, const std::string &v) { field(k) << quote(v); }
  template <typename T> void list(const std::string &k, const std::vector<T> &v) {
    std::ostream &os = field(k);
    os << "[";
    for (std::size_t i = 0; i < v.size(); ++i)
      os << (i ? "," : "") << fmt(double(v[i]));
    os << "]";
  }
  void raw(const std::string &k, const std::string &json) { field(k) << json; }
  std::string text() const { return "{" + body_.str() + "}"; }
  static std::string quote(const std::string &s) {
    std::string o = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\')
        o += '\\', o += c;
      else if (c == '\n')
        o += "\\n";
      else if (static_cast<unsigned char>(c) < 0x20)
        o += ' ';
      else
        o += c;
    }
    return o + "\"";
  }

private:
  static std::string fmt(double v) {
    std::ostringstream os;
    os.precision(9);
    os << v;
    return os.str();
  }
  std::ostream &field(const std::string &k) {
    body_ << (first_ ? "" : ",") << quote(k) << ":";
    first_ = false;
    return body_;
  }
  std::ostringstream body_;
  bool first_ = true;
};

struct Ctx {
  Device device;
  std::string spec, codelets, gp, extra;
  Json out;
  unsigned tiles() const { return device.getTarget().getNumTiles(); }
  unsigned tile(unsigned k) const { return k % tiles(); }
};

template <typename T> std::vector<T> read(Engine &e, const std::string &h, std::size_t n) {
  std::vector<T> v(n);
  e.readTensor(h, v.data(), v.data() + n);
  return v;
}

inline std::string errorJson(const std::function<void()> &f) {
  try {
    f();
  } catch (const poplar_error &e) {
    Json j;
    j.str("error", e.type);
    j.str("message", e.what());
    return j.text();
  } catch (const std::exception &e) {
    Json j;
    j.str("error", "std::exception");
    j.str("message", e.what());
    return j.text();
  }
  return "null";
}

// The cases, one per runtime_cases <case> (cases.cpp's table).
void caseTarget(Ctx &c);
void caseTensorViews(Ctx &c);
void caseVertices(Ctx &c, const std::string &codelets);
void caseCopies(Ctx &c);
void caseStreams(Ctx &c);
void caseControl(Ctx &c);
void caseVirtualGraph(Ctx &c);
void caseMultiProgram(Ctx &c);
void caseNonContiguous(Ctx &c);
void caseHalf(Ctx &c);
void caseHalfVertex(Ctx &c);
void caseProfile(Ctx &c);
void caseProfileWide(Ctx &c);
void caseMemory(Ctx &c);
void caseMemoryMk2(Ctx &c);
void caseLocality(Ctx &c);
void caseParallel(Ctx &c);
void caseErrors(Ctx &c);
void caseMisc(Ctx &c);
void caseScanner(Ctx &c);
void caseCachedValue(Ctx &c);
void caseInitialValues(Ctx &c);
void caseGp(Ctx &c);

} // namespace cases
