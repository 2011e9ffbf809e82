// A network of convolutional stages in one graph (docs/convolution.md): each stage as
// ConvStageBuild lays it out on a range of tiles of its own, a stage's spikes exchanged
// onto the next stage's tiles and, in the backward, the next stage's dL/dx back onto the
// stage's shards as its dL/dS. A Linear stage is the convolution of a 1 x 1 map with
// N_in channels, so a CSNN's readout runs as one more stage. The loss and the optimiser
// step are the caller's (popsnn.backends.conv_engine, on the host). Compiled once; each
// call writes the weights, the input or the loss gradients and runs one program.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ConvPlan.hpp"
#include "popsnn/NetworkSpec.hpp"

namespace popsnn {

struct ConvNetworkSpec {
  // Every stage has neurons; rows (T x B) and steps are the same for all; stage k > 0
  // takes stage k-1's output (inChannels x inHeight x inWidth = its C x H x W).
  std::vector<ConvStageSpec> stages;
  // The cost model's activity (estimates only): the fraction of a stage's inputs that are
  // non-zero per row, and of its dL/dI entries that carry gradient.
  std::vector<float> inputActivity, gradActivity;
};

struct ConvForwardResult {
  // Per stage (every stage with `recordAll`, else the last only): spikes and membranes
  // [rows (t-major), N] with N = C x H x W of the stage's neurons in row-major order.
  std::vector<std::vector<float>> spikes, membranes;
  std::vector<unsigned> denseRows; // per stage: (shard, row) pairs on the dense path
};

struct ConvBackwardResult {
  std::vector<std::vector<float>> gradWeight, gradBias; // per stage, PyTorch's layout
  std::vector<unsigned> activeGrads;        // per stage: dL/dI entries that carried gradient
  std::vector<unsigned> inputGradDenseRows; // per stage: rows ConvInputGrad ran dense
};

class ConvNetwork {
public:
  ConvNetwork(const ConvNetworkSpec &spec, const DeviceSpec &device);
  ~ConvNetwork();
  ConvNetwork(const ConvNetwork &) = delete;
  ConvNetwork &operator=(const ConvNetwork &) = delete;

  // weight [C_out, C_in, kH, kW], bias [C_out] (null: zeros) of stage k, from now on.
  void setParams(unsigned stage, const float *weight, const float *bias);
  // x [rows (t-major), C_in x H x W] of the first stage; [B, C_in x H x W] if it is direct.
  ConvForwardResult forward(const float *x, bool recordAll);
  // dL/dS and dL/dU (null: zeros) of the last stage's neurons [rows, N], after forward().
  ConvBackwardResult backward(const float *gradSpikes, const float *gradMembranes);

  const std::vector<ConvPlan> &plans() const;
  // The cost model's figures of the runs so far (popsnn's runtime; ESTIMATES, not measured).
  std::map<std::string, double> estimate() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace popsnn
