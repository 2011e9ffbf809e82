// The LIF vertices' compile-time units (codelets/Neurons.hpp): the C++ name of each neuron
// model (from VertexEnums.hpp's table of models), reset and sparse rule, indexed by its code.
// The host names the vertex it wants from it, in Poplar's template syntax
// ("LifForward<popsnn::Leaky,popsnn::ResetSubtract,popsnn::NoRule,float>"); the build instantiates
// every combination from it (host/src/VertexInstances.cpp; tests/engine/test_vertex_units.py
// checks the table against the units). The backward is specialised on
// the surrogate trace the rule leaves (TRACES), not on the rule. Surrogates are units too,
// chosen once per row inside the vertex (docs/architecture.md has the measurement).
#pragma once

#include <string>

#include "VertexEnums.hpp"

namespace popsnn {
namespace units {

#define POPSNN_NEURON_UNIT(code, name, unit, states) "popsnn::" #unit,
#define POPSNN_NEURON_STATES(code, name, unit, states) states,
inline constexpr const char *NEURONS[codes::NUM_NEURONS] = {
    POPSNN_NEURON_MODELS(POPSNN_NEURON_UNIT) POPSNN_NEURON_VARIANTS(POPSNN_NEURON_UNIT)};
// The [B, n] state blocks each unit keeps (its `states`).
inline constexpr unsigned STATES[codes::NUM_NEURONS] = {
    POPSNN_NEURON_MODELS(POPSNN_NEURON_STATES) POPSNN_NEURON_VARIANTS(POPSNN_NEURON_STATES)};
#undef POPSNN_NEURON_UNIT
#undef POPSNN_NEURON_STATES
inline constexpr const char *RESETS[codes::NUM_RESETS] = {"popsnn::ResetSubtract",
                                                          "popsnn::ResetZero", "popsnn::ResetNone"};
inline constexpr const char *RULES[codes::NUM_RULES] = {"popsnn::NoRule", "popsnn::Window",
                                                        "popsnn::OneSided"};
// The same rules with the masked surrogate kept dense (every entry, 0 off the rule): the plan
// picks that layout where the compressed trace would be as large (LayerShape::compressedTrace).
inline constexpr const char *DENSE_LAYOUT_RULES[codes::NUM_RULES] = {
    "popsnn::NoRule", "popsnn::WindowDense", "popsnn::OneSidedDense"};
// The surrogate trace of each rule, by rule code: every entry, or the compressed gradient trace;
// with the dense layout, every entry of the masked surrogate.
inline constexpr const char *TRACES[codes::NUM_RULES] = {
    "popsnn::DenseTrace", "popsnn::CompressedTrace", "popsnn::CompressedTrace"};
inline constexpr const char *DENSE_LAYOUT_TRACES[codes::NUM_RULES] = {
    "popsnn::DenseTrace", "popsnn::MaskedDenseTrace", "popsnn::MaskedDenseTrace"};

// The codelets' name of each stored type, by storage code.
inline constexpr const char *STORAGES[codes::NUM_STORAGES] = {"float", "half"};
// The direct-current input layer's vertices (x.W + b, and x^T.dL/dI) over that stored type.
inline std::string directCurrent(unsigned storage) {
  return std::string("DirectCurrent<") + STORAGES[storage] + ">";
}
inline std::string directWeightGrad(unsigned storage) {
  return std::string("DirectWeightGrad<") + STORAGES[storage] + ">";
}
// A pushing shard's vertices (W_next.S blocks, dL/dW_next) over that stored type.
inline std::string pushSpikes(unsigned storage) {
  return std::string("PushSpikes<") + STORAGES[storage] + ">";
}
inline std::string pushGrads(unsigned storage) {
  return std::string("PushGrads<") + STORAGES[storage] + ">";
}
// The loss kinds OutputLoss is templated on, by codes::Loss.
inline constexpr const char *LOSSES[] = {"popsnn::loss::CeCount", "popsnn::loss::CeRate",
                                         "popsnn::loss::MseCount", "popsnn::loss::MseMembrane",
                                         "popsnn::loss::CeMaxMembrane"};
// The loss on the output layer's records over that stored type.
inline std::string outputLoss(unsigned storage, unsigned loss) {
  return std::string("OutputLoss<") + STORAGES[storage] + "," + LOSSES[loss] + ">";
}

// The forward and backward step vertices of a layer with these units, trace layout and stored
// type (codes::Storage; the backward's half form has dense trace layouts only).
inline std::string lifForward(unsigned neuron, unsigned reset, unsigned rule, bool compressed,
                              unsigned storage) {
  return std::string("LifForward<") + NEURONS[neuron] + "," + RESETS[reset] + "," +
         (compressed ? RULES : DENSE_LAYOUT_RULES)[rule] + "," + STORAGES[storage] + ">";
}
inline std::string lifBackward(unsigned neuron, unsigned reset, unsigned rule, bool compressed,
                               unsigned storage) {
  return std::string("LifBackward<") + NEURONS[neuron] + "," + RESETS[reset] + "," +
         (compressed ? TRACES : DENSE_LAYOUT_TRACES)[rule] + "," + STORAGES[storage] + ">";
}
} // namespace units
} // namespace popsnn
