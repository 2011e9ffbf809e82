// Checkpoints written by Python (popsnn.checkpoint.save, a training run's checkpoint.npz)
// read from C++: the network, its weights and the optimiser state, ready to build a Network.
//
//   popsnn::Checkpoint ckpt = popsnn::loadCheckpoint("runs/popsnn/checkpoint.npz");
//   ckpt.spec.batchSize = 1;                         // anything the run fixed may be changed
//   std::unique_ptr<popsnn::Network> net = ckpt.makeNetwork(popsnn::DeviceSpec{"cpu"});
//   net->infer(x, spikes);
//
// The format is described in docs/checkpoint-format.md. The file is untrusted: the whole of
// it is read and checked (zip structure and CRC-32s, array headers, dtypes, shapes, finite
// values, the metadata's every field) before loadCheckpoint returns; any problem throws
// CheckpointError, one line naming the file, the problem and what to do.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "popsnn/Network.hpp"
#include "popsnn/NetworkSpec.hpp"

namespace popsnn {

class CheckpointError : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

struct Checkpoint {
  std::string path;
  unsigned epoch = 0; // epochs trained
  // The layers from the file. The optimiser from the saved optimiser state (name and
  // hyper-parameters, learning rate included) when there is one; loss, numSteps and
  // batchSize from the training run's config when the file has one (popsnn train writes
  // it); every other field NetworkSpec's default. Input mode: Direct ([B, N] current);
  // set InputMode::PerStep for [T, B, N] inputs (spike trains).
  NetworkSpec spec;
  std::vector<LayerParams> params; // PyTorch's layout, one per layer
  bool hasOptimizerState = false;  // false: saved without one, before any step, or plain SGD
  OptimizerState optimizerState;
  OptimizerKind optimizerStateKind = OptimizerKind::Adam; // whose state optimizerState is

  // A Network of `spec` on `device` holding these weights (and the optimiser state, when
  // the file has one and spec.optimizer still names its optimiser).
  std::unique_ptr<Network> makeNetwork(const DeviceSpec &device,
                                       OverflowPolicy onOverflow = OverflowPolicy::Error) const;
};

// Read and check a checkpoint; throws CheckpointError.
Checkpoint loadCheckpoint(const std::string &path);

} // namespace popsnn
