// popsnn's Poplar-compatible runtime: handles to graph elements (compute sets,
// vertices and their fields).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "poplar/StringRef.hpp"

namespace poplar {

class Graph;
namespace detail {
class GraphState;
}

namespace detail {
struct ProgramNode;
}

// A program added to a graph with Graph::addFunction, run by program::Call.
class Function {
public:
  Function() = default;
  // popsnn internal.
  explicit Function(std::shared_ptr<detail::ProgramNode> body) : body_(std::move(body)) {}
  const std::shared_ptr<detail::ProgramNode> &body() const { return body_; }

private:
  std::shared_ptr<detail::ProgramNode> body_;
};

class ComputeSet {
public:
  ComputeSet() = default;
  explicit ComputeSet(unsigned id) : id_(id) {}
  unsigned getId() const { return id_; }
  bool operator==(const ComputeSet &o) const { return id_ == o.id_; }

private:
  unsigned id_ = ~0u;
};

class FieldRef;

class VertexRef {
public:
  VertexRef() = default;
  VertexRef(detail::GraphState *graph, unsigned id) : graph_(graph), id_(id) {}
  unsigned getId() const { return id_; }
  FieldRef operator[](StringRef fieldName) const;
  detail::GraphState *graphState() const { return graph_; }

private:
  detail::GraphState *graph_ = nullptr;
  unsigned id_ = ~0u;
};

class FieldRef {
public:
  FieldRef() = default;
  FieldRef(VertexRef v, std::string name, std::size_t index = npos)
      : vertex_(v), name_(std::move(name)), index_(index) {}
  // One vector of a VectorList field (after graph.setFieldSize).
  FieldRef operator[](std::size_t index) const { return FieldRef(vertex_, name_, index); }
  const VertexRef &vertex() const { return vertex_; }
  const std::string &name() const { return name_; }
  std::size_t index() const { return index_; }
  bool isIndexed() const { return index_ != npos; }
  static constexpr std::size_t npos = ~std::size_t(0);

private:
  VertexRef vertex_;
  std::string name_;
  std::size_t index_ = npos;
};

inline FieldRef VertexRef::operator[](StringRef fieldName) const {
  return FieldRef(*this, fieldName.str());
}

} // namespace poplar
