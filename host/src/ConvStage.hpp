// A convolutional stage's ops (Conv2d, then its pools) run on the device's tiles, forward
// and backward, as ConvPlan lays them out: the current the stage's neurons receive, and
// from the gradient of that current dL/dI the weight, bias and input gradients, over dL/dI's
// non-zero entries only (codelets/Conv.cpp). One graph per call: the engine side of the
// convolution that tests/engine/test_engine_conv.py checks against the reference's ops.
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
  std::vector<float> current;    // [rows, C_out, H, W] of the stage's last map
  std::vector<float> gradWeight; // [C_out, C_in, kH, kW] (with dL/dI given)
  std::vector<float> gradBias;   // [C_out]
  std::vector<float> gradInput;  // [rows, C_in, H_in, W_in] (spec.inputGrad)
  unsigned denseRows = 0;        // (shard, row) pairs whose current took the dense path
  unsigned activeGrads = 0;      // dL/dI entries of the convolution that carried gradient
  // The cost model's estimate of the run (popsnn's runtime only; ESTIMATES, not measured).
  std::map<std::string, double> estimate;
};

// x [rows, C_in, H, W], weight [C_out, C_in, kH, kW], bias [C_out] or null; gradCurrent
// [rows, C_out, H, W] of the last map, or null for the forward only.
ConvStageResult runConvStage(const ConvStageSpec &spec, const DeviceSpec &device, const float *x,
                             const float *weight, const float *bias, const float *gradCurrent);

} // namespace popsnn
