// The names the Python package and checkpoints use for NetworkSpec's enums, written once:
// the binding parses and reports specs with them, the checkpoint reader reads them, and the
// host's messages name layers with them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "popsnn/NetworkSpec.hpp"

namespace popsnn {

template <typename E> using Names = std::vector<std::pair<const char *, E>>;

// The neuron models' names, from the one table (popsnn/VertexEnums.hpp).
#define POPSNN_NEURON_NAME(code, name, unit, states) {#name, NeuronType::name},
inline const Names<NeuronType> kNeuronNames = {POPSNN_NEURON_MODELS(POPSNN_NEURON_NAME)};
#undef POPSNN_NEURON_NAME
inline const Names<ResetMechanism> kResetNames = {{"subtract", ResetMechanism::Subtract},
                                                  {"zero", ResetMechanism::Zero},
                                                  {"none", ResetMechanism::None}};
inline const Names<SurrogateKind> kSurrogateNames = {
    {"fast_sigmoid", SurrogateKind::FastSigmoid},
    {"atan", SurrogateKind::Atan},
    {"sigmoid", SurrogateKind::Sigmoid},
    {"straight_through", SurrogateKind::StraightThrough}};
inline const Names<SparseRule> kSparseRuleNames = {{"none", SparseRule::None},
                                                   {"window", SparseRule::Window},
                                                   {"one_sided", SparseRule::OneSided}};
inline const Names<LossKind> kLossNames = {{"ce_count", LossKind::CeCount},
                                           {"ce_rate", LossKind::CeRate},
                                           {"mse_count", LossKind::MseCount},
                                           {"mse_membrane", LossKind::MseMembrane},
                                           {"ce_max_membrane", LossKind::CeMaxMembrane}};
inline const Names<OptimizerKind> kOptimizerNames = {
    {"sgd", OptimizerKind::SGD}, {"adam", OptimizerKind::Adam}, {"adamw", OptimizerKind::AdamW}};
inline const Names<InputMode> kInputNames = {{"direct", InputMode::Direct},
                                             {"per_step", InputMode::PerStep}};

// The name of `value`, "?" if the table lacks it.
template <typename E> std::string nameOf(E value, const Names<E> &names) {
  for (const auto &n : names)
    if (n.second == value)
      return n.first;
  return "?";
}

} // namespace popsnn
