// popsnn's subset of Poplar's poputil: linear tile mappings.
#ifndef POPSNN_POPUTIL_TILEMAPPING_HPP
#define POPSNN_POPUTIL_TILEMAPPING_HPP

#include <poplar/Graph.hpp>
#include <poplar/Tensor.hpp>

#include <cstddef>
#include <vector>

namespace poputil {

// Spreads the flattened elements over the graph's tiles in order, in whole
// grains of grainSize, at least minElementsPerTile per used tile.
std::vector<std::vector<poplar::Interval>> calcLinearTileMapping(const poplar::Graph &graph,
                                                                 std::vector<std::size_t> shape,
                                                                 unsigned minElementsPerTile,
                                                                 unsigned grainSize);
std::vector<std::vector<poplar::Interval>> calcLinearTileMapping(const poplar::Graph &graph,
                                                                 const poplar::Tensor &t);

void mapTensorLinearly(poplar::Graph &graph, const poplar::Tensor &t, unsigned minElementsPerTile,
                       unsigned grainSize);
void mapTensorLinearly(poplar::Graph &graph, const poplar::Tensor &t);

} // namespace poputil

#endif
