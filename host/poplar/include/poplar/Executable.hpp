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

  // Not supported here: the compiled codelets are host code loaded at run time.
  // Both throw poplar_error; keep the Graph and call compileGraph again.
  void serialize(std::ostream &out) const;
  static Executable deserialize(std::istream &in);

  // popsnn internal.
  explicit Executable(std::unique_ptr<detail::EngineImpl> impl);

private:
  friend class Engine;
  std::unique_ptr<detail::EngineImpl> impl_;
};

} // namespace poplar
