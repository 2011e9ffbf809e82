// The validation room: every check of what a user hands the C++ API, before anything is
// built or written. The messages are the Python package's (python/popsnn/_checks.py,
// reference.check_params, model.check_learning_rate), so both APIs say the same thing.
// Each throws std::invalid_argument with one line naming the problem and the fix.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "popsnn/Network.hpp"
#include "popsnn/NetworkSpec.hpp"

namespace popsnn {
namespace checks {

// No NaN or inf among the n values.
void finiteArray(const std::string &name, const float *values, std::size_t n);
// `bad` NaN or inf values counted in `name` by the caller: none, or the same error.
void noneNonFinite(const std::string &name, std::size_t bad);
void learningRate(double lr);
// A batch: x (xSize values), labels in [0, numClasses) for the first `valid` samples. Float
// values are scanned for NaN and inf unless the caller counts them itself (the input list).
void batch(const NetworkSpec &spec, InputBatch x, std::size_t xSize, const int *labels,
           unsigned valid, unsigned numClasses, bool scanValues = true);
// Parameters in PyTorch's layout: one LayerParams per layer, each member the layer's size
// (or empty where the layer has no such parameter), every value finite.
void params(const NetworkSpec &spec, const std::vector<LayerParams> &params,
            const std::string &name = "params");
// Optimiser state: the same shapes for the slots the optimiser keeps (an empty member:
// zeros), nothing for slots it does not keep, every value finite.
void optimizerState(const NetworkSpec &spec, const OptimizerState &state);

} // namespace checks
} // namespace popsnn
