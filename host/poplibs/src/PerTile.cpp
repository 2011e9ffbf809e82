#include "PerTile.hpp"

#include <poplar/exceptions.hpp>

namespace popops {
namespace detail {

void requireType(const char *function, const poplar::Type &type, bool allowBool) {
  if (type == poplar::FLOAT || type == poplar::INT || type == poplar::UNSIGNED_INT)
    return;
  if (allowBool && type == poplar::BOOL)
    return;
  throw poplar::poplar_error(std::string("popops::") + function + ": element type " +
                             type.toString() +
                             " is not provided by popsnn's popops; use float, "
                             "int or unsigned int" +
                             (allowBool ? " or bool" : ""));
}

std::string shapeText(const std::vector<std::size_t> &shape) {
  std::string text = "{";
  for (std::size_t d : shape)
    text += (text.size() > 1 ? "," : "") + std::to_string(d);
  return text + "}";
}

std::string vertexName(const char *base, const poplar::Type &type, const char *op) {
  const std::string opArg = op ? std::string(",popops::op::") + op : std::string();
  return std::string("popops::") + base + "<" + type.toString() + opArg + ">";
}

unsigned firstTile(const poplar::Graph &graph, const poplar::Tensor &t) {
  const auto mapping = graph.getTileMapping(t);
  for (unsigned tile = 0; tile < mapping.size(); ++tile)
    if (!mapping[tile].empty())
      return tile;
  return 0;
}

poplar::Tensor alignedTo(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &like,
                         poplar::program::Sequence &prog, const std::string &name) {
  if (graph.getTileMapping(t) == graph.getTileMapping(like))
    return t;
  poplar::Tensor copy = graph.clone(like, name);
  prog.add(poplar::program::Copy(t, copy));
  return copy;
}

} // namespace detail
} // namespace popops
