// The graph builder: a NetworkSpec -> one Poplar graph, its programs and its
// engine. Ordinary Poplar user code (only Poplar's public API), so the same
// source builds against Graphcore's SDK.
//
// Mapping: every layer is sharded by output neuron over the
// tiles; a shard keeps its neurons' whole fan-in (weight columns, stored
// transposed as [in, shard] so one input's row is contiguous), optimiser state
// and traces: its spike-id buffers [T, B, stride] and the masked surrogate, dense
// [T, B, n] without a sparse rule, else the gradient trace (the active entries' ids
// and values over all (t, b), sized by activity). Crossing tiles: the batch, spike-id
// buffers (forward; and again in the backward, for the sparse weight gradients), each
// shard's dL/dI[t] [B, n] (backward), the output records, and once per forward pass a
// copy of each layer's weights onto the tiles of the layer feeding it ("fan-out"), from
// which those tiles compute their own dL/dS -- only for their gradient trace's entries
// when a sparse rule is on.
// A layer narrower than its input layer's id buffers (e.g. a 10-class readout after
// 1000 hidden neurons) is not sent ids: the input layer's shards "push" instead --
// each adds the fan-out rows of its spikes into W.S[t] blocks [T, B, n_k] (forward)
// and accumulates that layer's dL/dW on its own neurons (backward), and those dense
// blocks cross tiles (layer-major schedule; see LayerShape::push in Plan.hpp).
//
// Programs: 0 forward, 1 loss + backward + optimiser, 2 loss + backward
// (gradients only). Layer-major: one layer's T steps run in one compute phase
// (its vertices loop over the steps with device-side step counters), then its
// whole id trace (forward) or dL/dI (backward) goes to the next layer in one
// exchange -- a handful of fat phases per training step. A layer with an
// all-to-all recurrence needs every shard's spikes of step t-1 before step t:
// it runs its steps one per phase in a Repeat, with an exchange in between.
//
// The rooms (host/src/): Plan (a pure function of the spec and the target: shards, buffer
// capacities, loss groups), GraphBuild + ShardTensors (tensors per shard), Exchange (copy
// lists), VertexWiring (vertices), Programs (the BSP sequences), ParamLayout (host <-> device
// parameters and optimiser state), Validation (every check of user input). This file runs
// them in order (the state and the runs: NetworkImpl.hpp), searches for a mapping that fits
// and runs the engine; NetworkReport.cpp reports on it.
//
// Fit search (build()): layer-major, else step-major; within each, every layer spread
// over all tiles, else over fewer. In the layer-major schedule a wide layer feeding a much
// narrower one (at most 32 neurons, 16 times fewer: 1000 -> 10) gets shards just wide
// enough to push to it, and the narrow layer tiles after the pusher's. If no such mapping
// fits the tiles' memory (the plan's count, before any graph is built), the batch runs in
// chunks of samples (2, 3, 4, ... chunks dividing the batch): the graph is built for one
// chunk, and the programs run every chunk's forward (and backward) pass in turn, copying
// its slice of the batch onto the first layer's tiles; the weight gradients (and the loss,
// a weighted sum over samples) are summed over the chunks (AccumulateGrad), then the
// optimiser steps once. Programs then: 0 forward of every chunk, 1 forward + backward of
// every chunk, 2 the optimiser step. Sun et al.'s DSNN at batch 128 on one Mk2 runs so.
//
// IPU targets only (the cpu device runs a tile's vertices one after the other, so there it
// is one vertex each): x.W and its weight gradient run as one vertex per worker of a tile
// (by samples, by inputs), and on a target with many tiles the loss runs as one vertex per
// group of samples, each group on a tile of its own (its records gathered there, its
// gradients scattered back from there), the groups' parts summed by LossSum.
#include "NetworkImpl.hpp"

namespace popsnn {

// ---------------------------------------------------------------------------

Network::Network(const NetworkSpec &spec, const DeviceSpec &device, OverflowPolicy onOverflow)
    : impl_(std::make_unique<Impl>(spec, device, onOverflow)) {}

Network::~Network() = default;

const NetworkSpec &Network::spec() const { return impl_->spec; }

float Network::trainStep(InputBatch x, const int *labels, unsigned validSamples, float *outSpikes) {
  CallGuard guard(impl_->busy);
  impl_->checkBatch(x, labels, validSamples, "trainStep");
  impl_->runGradients(x, labels, validSamples, true);
  if (outSpikes)
    impl_->readSpikes(outSpikes);
  return impl_->readLoss();
}

float Network::lossAndGrad(InputBatch x, const int *labels, unsigned validSamples,
                           std::vector<LayerParams> &grads, float *outSpikes, float *outInputGrad) {
  CallGuard guard(impl_->busy);
  if (outInputGrad && impl_->spec.input == InputMode::PerStep && !impl_->spec.inputGrad)
    invalid("lossAndGrad: the input gradient of [T, B, N_in] input needs the first layer's "
            "dL/dI of every step, kept only when asked for: build the Network with "
            "NetworkSpec::inputGrad = true, or pass outInputGrad = nullptr");
  impl_->checkBatch(x, labels, validSamples, "lossAndGrad");
  impl_->runGradients(x, labels, validSamples, false);
  grads = readParams(*impl_->engine, impl_->layers(), "grad");
  if (outInputGrad)
    readInputGrad(*impl_->engine, impl_->spec, impl_->plan(), impl_->layers(), outInputGrad,
                  impl_->spec.halfStorage ? impl_->lossScale : 1.0f);
  if (outSpikes)
    impl_->readSpikes(outSpikes);
  return impl_->readLoss();
}

void Network::infer(InputBatch x, float *outSpikes) {
  CallGuard guard(impl_->busy);
  impl_->checkInput(x, nullptr, impl_->spec.batchSize, 0);
  impl_->runForward(x, nullptr, impl_->spec.batchSize);
  if (outSpikes)
    impl_->readSpikes(outSpikes);
}

void Network::setLearningRate(double lr) {
  CallGuard guard(impl_->busy);
  impl_->setLearningRate(lr);
}
double Network::learningRate() const { return impl_->spec.optimizer.lr; }

void Network::setLossScale(float scale) {
  CallGuard guard(impl_->busy);
  if (!(std::isfinite(scale) && scale > 0.0f))
    invalid("setLossScale: the loss scale must be finite and > 0, got " + std::to_string(scale));
  impl_->setLossScale(scale);
}
float Network::lossScale() const { return impl_->lossScale; }
bool Network::lastStepApplied() const { return impl_->lastStepFinite; }

std::vector<LayerParams> Network::getParams() {
  CallGuard guard(impl_->busy);
  return readParams(*impl_->engine, impl_->layers());
}
void Network::setParams(const std::vector<LayerParams> &params) {
  CallGuard guard(impl_->busy);
  checks::params(impl_->spec, params);
  writeParams(*impl_->engine, impl_->layers(), params);
}
OptimizerState Network::getOptimizerState() {
  CallGuard guard(impl_->busy);
  return readOptimizerState(*impl_->engine, impl_->layers());
}
void Network::setOptimizerState(const OptimizerState &state) {
  CallGuard guard(impl_->busy);
  checks::optimizerState(impl_->spec, state);
  writeOptimizerState(*impl_->engine, impl_->layers(), state);
}

} // namespace popsnn
