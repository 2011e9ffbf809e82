// poputil's linear tile mapping, as Poplar documents it: elements in order,
// whole grains per tile, at least minElementsPerTile on each tile used.
#include <poputil/TileMapping.hpp>

#include <poplar/exceptions.hpp>

#include <algorithm>

namespace poputil {

std::vector<std::vector<poplar::Interval>> calcLinearTileMapping(const poplar::Graph &graph,
                                                                 std::vector<std::size_t> shape,
                                                                 unsigned minElementsPerTile,
                                                                 unsigned grainSize) {
  if (grainSize == 0)
    throw poplar::poplar_error("poputil::calcLinearTileMapping: grainSize is 0; give 1 or more");
  const unsigned numTiles = graph.getTarget().getNumTiles();
  std::size_t numElements = 1;
  for (std::size_t d : shape)
    numElements *= d;
  const std::size_t numGrains = (numElements + grainSize - 1) / grainSize;
  std::size_t grainsPerTile = (numGrains + numTiles - 1) / numTiles;
  const std::size_t minGrains = (minElementsPerTile + grainSize - 1) / grainSize;
  grainsPerTile = std::max<std::size_t>({grainsPerTile, minGrains, 1});
  const std::size_t perTile = grainsPerTile * grainSize;

  std::vector<std::vector<poplar::Interval>> mapping(numTiles);
  for (unsigned tile = 0; tile < numTiles; ++tile) {
    const std::size_t begin = tile * perTile;
    if (begin >= numElements)
      break;
    mapping[tile].emplace_back(begin, std::min(numElements, begin + perTile));
  }
  return mapping;
}

std::vector<std::vector<poplar::Interval>> calcLinearTileMapping(const poplar::Graph &graph,
                                                                 const poplar::Tensor &t) {
  return calcLinearTileMapping(graph, t.shape(), 0, 1);
}

void mapTensorLinearly(poplar::Graph &graph, const poplar::Tensor &t, unsigned minElementsPerTile,
                       unsigned grainSize) {
  graph.setTileMapping(t, calcLinearTileMapping(graph, t.shape(), minElementsPerTile, grainSize));
}

void mapTensorLinearly(poplar::Graph &graph, const poplar::Tensor &t) {
  mapTensorLinearly(graph, t, 0, 1);
}

} // namespace poputil
