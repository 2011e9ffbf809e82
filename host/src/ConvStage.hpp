// A convolutional stage (Conv2d, its pools, optionally Leaky neurons) run on the device's
// tiles as ConvPlan lays it out: forward, the neurons' spikes and membranes (or the current
// without neurons); backward, BPTT through the neurons to dL/dI, then the weight, bias and
// input gradients over dL/dI's non-zero entries only (codelets/Conv.cpp, ConvNeuron.cpp).
// One graph per call: the engine side of a convolutional stage that
// tests/engine/test_engine_conv.py checks against the reference.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ConvPlan.hpp"
#include "popsnn/NetworkSpec.hpp"

namespace popsnn {

struct ConvStageResult {
  ConvPlan plan;
  // [rows, C_out, H, W] (rows t-major: t * B + b): the neurons' spikes, or without neurons
  // the last map's current; the neurons' membranes U[t] (before their reset).
  std::vector<float> output, membranes;
  std::vector<float> gradWeight;   // [C_out, C_in, kH, kW] (with dL/dI given)
  std::vector<float> gradBias;     // [C_out]
  std::vector<float> gradInput;    // [rows, C_in, H_in, W_in] (spec.inputGrad)
  unsigned denseRows = 0;          // (shard, row) pairs whose current took the dense path
  unsigned activeGrads = 0;        // dL/dI entries of the convolution that carried gradient
  unsigned inputGradDenseRows = 0; // (shard, row) pairs whose dL/dx took the dense product
  // The cost model's estimate of the run (popsnn's runtime only; ESTIMATES, not measured).
  std::map<std::string, double> estimate;
};

// x [rows, C_in, H, W] (rows t-major), weight [C_out, C_in, kH, kW], bias [C_out] or null;
// gradOut: dL/d(output) as `output` (dL/dS with neurons, else dL/dI), or null for the forward
// only; gradMembranes: dL/dU with neurons, or null (zeros).
ConvStageResult runConvStage(const ConvStageSpec &spec, const DeviceSpec &device, const float *x,
                             const float *weight, const float *bias, const float *gradOut,
                             const float *gradMembranes = nullptr);

} // namespace popsnn
