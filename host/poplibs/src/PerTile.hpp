// Helpers shared by popsnn's popops functions: splitting work by tile mapping.
#ifndef POPSNN_POPLIBS_PERTILE_HPP
#define POPSNN_POPLIBS_PERTILE_HPP

#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

#include <string>
#include <vector>

namespace popops {
namespace detail {

// "{2,3}": a shape as the error messages show it.
std::string shapeText(const std::vector<std::size_t> &shape);

// Throws one line naming the function and the element types it supports.
void requireType(const char *function, const poplar::Type &type, bool allowBool);

// The name of the vertex class `base<type>` in PopopsVertices.cpp, or
// `base<type, popops::op::Op>` for a vertex templated on its operation.
std::string vertexName(const char *base, const poplar::Type &type, const char *op = nullptr);

// t itself when it is mapped like `like`, else a copy of t mapped like `like`
// (the copy is added to prog): vertices see only elements on their own tile.
poplar::Tensor alignedTo(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &like,
                         poplar::program::Sequence &prog, const std::string &name);

// The first tile that holds an element of t (0 when none does).
unsigned firstTile(const poplar::Graph &graph, const poplar::Tensor &t);

// Calls fn(tile, begin, end) for every interval of t's flattened elements.
template <typename Fn>
void forEachTileInterval(const poplar::Graph &graph, const poplar::Tensor &t, Fn fn) {
  const auto mapping = graph.getTileMapping(t);
  for (unsigned tile = 0; tile < mapping.size(); ++tile)
    for (const auto &interval : mapping[tile])
      if (interval.size() != 0)
        fn(tile, interval.begin(), interval.end());
}

} // namespace detail
} // namespace popops

#endif
