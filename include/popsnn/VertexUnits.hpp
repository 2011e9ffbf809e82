// The one table of the LIF vertices' compile-time units (codelets/Neurons.hpp): the C++
// name of each neuron model and reset, indexed by its code in VertexEnums.hpp. The host
// names the vertex it wants from it, in Poplar's template syntax
// ("LifForward<popsnn::Leaky,popsnn::ResetSubtract>"); the codelets instantiate every
// combination (the lists in LifForward.cpp and LifBackward.cpp, checked against this table
// by tests/engine/test_vertex_units.py). Surrogates and sparse rules are units too, but
// chosen once per row inside the vertex (12 row kernels instead of 12x the vertices).
#pragma once

#include <string>

#include "VertexEnums.hpp"

namespace popsnn {
namespace units {

inline constexpr const char *NEURONS[codes::NUM_NEURONS] = {
    "popsnn::Leaky", "popsnn::Synaptic", "popsnn::RLeakyAllToAll", "popsnn::RLeakyOneToOne",
    "popsnn::Lapicque"};
inline constexpr const char *RESETS[codes::NUM_RESETS] = {"popsnn::ResetSubtract",
                                                          "popsnn::ResetZero", "popsnn::ResetNone"};
// The forward and backward step vertices of a layer with these units.
inline std::string lifForward(unsigned neuron, unsigned reset) {
  return std::string("LifForward<") + NEURONS[neuron] + "," + RESETS[reset] + ">";
}
inline std::string lifBackward(unsigned neuron, unsigned reset) {
  return std::string("LifBackward<") + NEURONS[neuron] + "," + RESETS[reset] + ">";
}

} // namespace units
} // namespace popsnn
