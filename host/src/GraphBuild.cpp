#include "GraphBuild.hpp"

#include <poplar/Target.hpp>

#include <sstream>

#include "popsnn/Names.hpp"
#include "popsnn/Network.hpp"

namespace popsnn {

using namespace poplar;

GraphBuild::GraphBuild(const NetworkSpec &s, Plan p, const Target *target)
    : spec(s), plan(std::move(p)), graph(target ? std::make_unique<Graph>(*target) : nullptr) {
  tileLayerBytes.assign(plan.numTiles, std::vector<std::uint64_t>(plan.layers.size() + 1, 0));
  for (const LayerPlan &lp : plan.layers) {
    Layer layer;
    static_cast<LayerShape &>(layer) = lp;
    for (const ShardPlan &sp : lp.shards) {
      Shard sh;
      static_cast<ShardPlan &>(sh) = sp;
      layer.shards.push_back(sh);
    }
    layers.push_back(std::move(layer));
  }
}

// Every type popsnn's tensors use (float, int, unsigned) is 4 bytes on every target.
std::size_t GraphBuild::typeSize(const Type &type) const {
  if (graph)
    return graph->getTarget().getTypeSize(type);
  return type == HALF ? 2 : 4; // a counting build: as the plan counted before half storage
}

Tensor GraphBuild::var(const Type &type, std::size_t n, unsigned tile, const std::string &name,
                       int layer) {
  if (layer >= 0)
    tileLayerBytes[tile][layer] += n * typeSize(type);
  if (!graph)
    return Tensor();
  Tensor t = graph->addVariable(type, {n}, name);
  graph->setTileMapping(t, tile);
  return t;
}

Tensor GraphBuild::zeros(const Type &type, std::size_t n, unsigned tile, const std::string &name,
                         int layer) {
  Tensor t = var(type, n, tile, name, layer);
  if (!graph)
    return t;
  if (type == FLOAT)
    graph->setInitialValue(t, 0.0f);
  else if (type == INT)
    graph->setInitialValue(t, 0);
  else
    graph->setInitialValue(t, 0u);
  return t;
}

Tensor GraphBuild::constant(const std::vector<float> &values, unsigned tile,
                            const std::string &name, int layer) {
  tileLayerBytes[tile][layer] += values.size() * typeSize(FLOAT);
  if (!graph)
    return Tensor();
  Tensor t = graph->addConstant(FLOAT, {values.size()}, values.data(), name);
  graph->setTileMapping(t, tile);
  return t;
}

void GraphBuild::checkMemory(const Target &target) const {
  if (target.getTargetType() == TargetType::CPU) // no memory limit per tile
    return;
  const std::uint64_t available = target.getBytesPerTile();
  for (unsigned tile = 0; tile < plan.numTiles; ++tile) {
    std::uint64_t total = 0;
    unsigned worst = 0;
    for (unsigned l = 0; l < tileLayerBytes[tile].size(); ++l) {
      total += tileLayerBytes[tile][l];
      if (tileLayerBytes[tile][l] > tileLayerBytes[tile][worst])
        worst = l;
    }
    if (total <= available)
      continue;
    std::ostringstream msg;
    msg << "the network does not fit: tile " << tile << " needs " << total
        << " bytes for popsnn's tensors but has " << available << " bytes; ";
    if (worst < layers.size())
      msg << "layer " << worst << " (" << nameOf(layers[worst].spec.neuron, kNeuronNames) << ", "
          << layers[worst].spec.inputs << " -> " << layers[worst].spec.outputs << " neurons, "
          << layers[worst].shardSize << " per tile) takes " << tileLayerBytes[tile][worst]
          << " of them";
    else
      msg << "the loss and the output records take " << tileLayerBytes[tile][worst];
    msg << ". Fix: more tiles (tiles_per_ipu, num_ipus: " << plan.numTiles
        << " now), a smaller batch (" << spec.batchSize << ") or fewer steps (" << spec.numSteps
        << "), or a lower max_activity (" << spec.maxActivity << ")";
    throw NetworkDoesNotFit(msg.str());
  }
}

} // namespace popsnn
