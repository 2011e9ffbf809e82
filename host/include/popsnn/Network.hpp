// popsnn::Network: a spiking network compiled into one Poplar graph and engine,
// trainable and runnable from C++ without Python.
//
//   popsnn::NetworkSpec spec;           // layers, loss, optimiser, batch, steps
//   popsnn::Network net(spec, popsnn::DeviceSpec{"cpu"});
//   net.setParams(params);              // PyTorch layout
//   float loss = net.trainStep(x, labels, batch, spikes);
//   net.infer(x, batch, spikes);        // spikes [T, B, C]
//   net.setLearningRate(lr / 2);        // a schedule: a host write, no recompile
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "popsnn/NetworkSpec.hpp"

namespace popsnn {

// A batch's x, row-major: float32, or bytes (uint8: spikes or counts 0..255), which the host
// lists without a float copy (a quarter of the memory to read; NetworkSpec::inputActivity).
// Either pointer converts to it, so `trainStep(x.data(), ...)` takes both kinds.
struct InputBatch {
  InputBatch(const float *x) : floats(x) {}
  InputBatch(const std::uint8_t *x) : bytes(x) {}
  InputBatch(std::nullptr_t) {}
  bool empty() const { return !floats && !bytes; }
  const float *floats = nullptr;
  const std::uint8_t *bytes = nullptr;
};

// A spike buffer could not hold a step's spikes and gradient candidates.
class SpikeBufferOverflow : public std::runtime_error {
public:
  SpikeBufferOverflow(const std::string &what, unsigned layer, unsigned step, unsigned needed,
                      unsigned capacity)
      : std::runtime_error(what), layer(layer), step(step), needed(needed), capacity(capacity) {}
  unsigned layer, step, needed, capacity;
};

// The network does not fit the device's memory per tile.
class NetworkDoesNotFit : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A Network was called from a second thread while a call was running: a Network runs
// one call at a time (its device tensors hold one batch's state), so the second call is
// refused rather than interleaved. Give each thread its own Network, or serialise calls.
class NetworkBusy : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class OverflowPolicy {
  Error, // throw SpikeBufferOverflow before anything is updated
  Grow,  // recompile with buffers large enough and redo the step
};

class Network {
public:
  Network(const NetworkSpec &spec, const DeviceSpec &device,
          OverflowPolicy onOverflow = OverflowPolicy::Error);
  ~Network();
  Network(const Network &) = delete;
  Network &operator=(const Network &) = delete;

  const NetworkSpec &spec() const;

  // Every call checks its arguments whole before the device sees any of them (the Python
  // package's checks and messages: NaN/inf input or parameters, shapes, labels) and throws
  // std::invalid_argument; a call made while another thread's call runs throws NetworkBusy.
  // x: [B, N_in] (InputMode::Direct) or [T, B, N_in] (PerStep), float32 or uint8, row-major.
  // labels: [B]. Only the first `validSamples` samples count (a last, partial batch):
  // the loss is their mean and the others get zero gradient. outSpikes (optional):
  // [T, B, C] output spikes. Returns the loss.
  float trainStep(InputBatch x, const int *labels, unsigned validSamples,
                  float *outSpikes = nullptr);
  // Loss and gradients (PyTorch layout) without updating anything. outInputGrad (optional):
  // dL/dx shaped as x, (sum_t dL/dI[t]) W of the first layer for direct input, dL/dI[t] W per
  // step for [T, B, N_in] input (which needs NetworkSpec::inputGrad, else it throws
  // std::invalid_argument); dL/dI comes from the device, the product is done on the host.
  float lossAndGrad(InputBatch x, const int *labels, unsigned validSamples,
                    std::vector<LayerParams> &grads, float *outSpikes = nullptr,
                    float *outInputGrad = nullptr);
  void infer(InputBatch x, float *outSpikes);

  std::vector<LayerParams> getParams();
  void setParams(const std::vector<LayerParams> &params);
  OptimizerState getOptimizerState();
  void setOptimizerState(const OptimizerState &state);
  // The optimiser's learning rate from the next step on: device state written from the
  // host (one float per tile), so a schedule changes it between steps without rebuilding
  // the graph. Throws std::invalid_argument unless lr is finite and >= 0.
  void setLearningRate(double lr);
  double learningRate() const;
  // NetworkSpec::halfStorage: dL/dS and dL/dU leave the loss times this scale (so that small
  // gradients do not flush to zero in half) and the float32 weight gradients are divided by
  // it; device state written from the host, no rebuild. trainStep skips the optimiser step
  // when a gradient entry is not finite: lastStepApplied() says whether the last one ran
  // (the caller backs the scale off, popsnn.precision.LossScaler).
  void setLossScale(float scale);
  float lossScale() const;
  bool lastStepApplied() const;

  // The runtime's cycle/byte estimates of the runs so far and the graph's memory.
  // Every figure is an ESTIMATE of the IPU cost model, never measured on an IPU.
  std::map<std::string, double> profileEstimate() const;
  // The same as text, phase by phase (the engine's printProfileSummary).
  std::string profileSummary() const;
  // The graph's layout: tiles used, shards per layer, buffer capacities.
  std::map<std::string, double> layout() const;

  class Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace popsnn
