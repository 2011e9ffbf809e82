// popsnn's Poplar-compatible runtime: poplar::Executable, a graph compiled by
// poplar::compileGraph (declared in poplar/Engine.hpp), ready for an Engine.
#pragma once
#include <istream>
#include <memory>
#include <ostream>

namespace poplar {

namespace detail {
class EngineImpl;
}
class Engine;

class Executable {
public:
  Executable(Executable &&) noexcept;
  Executable &operator=(Executable &&) noexcept;
  ~Executable();

  // The graph, its programs and the codelet files it loaded (by path and content hash;
  // they must still be there, unchanged, when the executable is deserialized).
  void serialize(std::ostream &out) const;
  // Checks the stream fully (format, hash, every id, shape and connection) before use;
  // any fault is one poplar_error.
  static Executable deserialize(std::istream &in);

  // popsnn internal.
  explicit Executable(std::unique_ptr<detail::EngineImpl> impl);

private:
  friend class Engine;
  std::unique_ptr<detail::EngineImpl> impl_;
};

} // namespace poplar
