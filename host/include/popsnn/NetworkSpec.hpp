// popsnn's network description on the C++ side: what the graph builder turns
// into a Poplar graph. Mirrors python/popsnn/layers.py, losses.py and optim.py; the
// defaults below equal python/popsnn/defaults.py (snnTorch's and PyTorch's), which
// tests/product/test_defaults_schema.py checks through the binding.
#pragma once

#include <string>
#include <vector>

#include "popsnn/VertexEnums.hpp"

namespace popsnn {

// The neuron models of the one table (popsnn/VertexEnums.hpp), valued by their codes.
#define POPSNN_NEURON_TYPE(code, name, unit, states) name = codes::code,
enum class NeuronType : unsigned { POPSNN_NEURON_MODELS(POPSNN_NEURON_TYPE) };
#undef POPSNN_NEURON_TYPE
enum class ResetMechanism { Subtract, Zero, None };
enum class SurrogateKind { FastSigmoid, Atan, Sigmoid, StraightThrough };
// Which (t, b, j) entries carry gradient (docs/numerics.md): all, |U - threshold| < value,
// or U >= value.
enum class SparseRule { None, Window, OneSided };
enum class LossKind { CeCount, CeRate, MseCount, MseMembrane, CeMaxMembrane };
enum class OptimizerKind { SGD, Adam, AdamW };
// Direct: x [B, N_in] fed as current at every step. PerStep: x [T, B, N_in] (e.g. spikes).
enum class InputMode { Direct, PerStep };

// One (Linear, neuron) pair.
struct LayerSpec {
  unsigned inputs = 0;
  unsigned outputs = 0;
  bool bias = true;
  NeuronType neuron = NeuronType::Leaky;
  bool allToAll = true; // RLeaky: V is [N, N] with a bias (true) or one weight per neuron
  float beta = 0.9f;
  float alpha = 0.8f; // Synaptic's and Alpha's second decay
  // Lapicque: U[t] = beta U[t-1] + gain I[t], beta = 1 - dt/(RC) and gain = dt/C
  // (python/popsnn/layers.py derives both from snnTorch's beta, R, C and time_step).
  // Alpha: tau_alpha, U = gain (E + H) (Alpha.tau_alpha in python/popsnn/layers.py).
  float gain = 1.0f;
  float threshold = 1.0f;
  ResetMechanism reset = ResetMechanism::Subtract;
  SurrogateKind surrogate = SurrogateKind::Atan; // snnTorch's default spike_grad
  float surrogateParam = 2.0f;
  SparseRule sparseRule = SparseRule::None;
  float sparseValue = 0.0f; // b_th (Window) or theta_grad (OneSided)
  // One value per neuron where given ([outputs] each; empty: the scalar above), and the
  // constants trained as parameters ("beta", "threshold" in LayerParams: [outputs] where
  // given per neuron, else one value), docs/numerics.md section 2.
  std::vector<float> betas, alphas, thresholds;
  bool learnBeta = false, learnThreshold = false;
  // Set by the engine, not a user option: a sparse rule's layer whose measured live fraction
  // makes its compressed backward the slower one keeps the rule's masked surrogate dense and
  // runs the dense backward on it (the same gradient; popsnn::SPARSE_BACKWARD_MAX_LIVE).
  bool denseBackward = false;
  // The fraction of its T x B x n entries live in its backward, as the last complete gradient
  // trace counted (largest over shards; 0: not counted; kept once the layer is dense).
  float liveFraction = 0.0f;
  // The vertices read the constants per neuron (any given per neuron, or learned).
  bool perNeuron() const {
    return !betas.empty() || !alphas.empty() || !thresholds.empty() || learnBeta || learnThreshold;
  }
};

struct LossSpec {
  LossKind kind = LossKind::CeCount;
  unsigned numClasses = 0;    // 0: one class per output neuron; fewer: a population code
  double correctRate = 1.0;   // mse_count (double: int(T * rate) must truncate as Python does)
  double incorrectRate = 0.0; // mse_count
  float onTarget = 1.0f;      // mse_membrane
  float offTarget = 0.0f;     // mse_membrane
};

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::Adam;
  double lr = 1e-3;
  double momentum = 0.0;  // SGD
  double dampening = 0.0; // SGD
  bool nesterov = false;  // SGD
  double weightDecay = 0.0;
  double beta1 = 0.9; // Adam, AdamW
  double beta2 = 0.999;
  double eps = 1e-8;
};

struct NetworkSpec {
  std::vector<LayerSpec> layers;
  LossSpec loss;
  OptimizerSpec optimizer;
  unsigned batchSize = 128;
  unsigned numSteps = 25;
  InputMode input = InputMode::Direct;
  // Spike-buffer capacity per (step, sample, shard), as a fraction of the shard's
  // neurons: spikes plus gradient candidates beyond it are an overflow (an error,
  // or a recompile with larger buffers; never a silent truncation).
  float maxActivity = 1.0f;
  // A sparse rule's gradient trace (the entries whose masked surrogate is non-zero, over
  // all steps and samples) per shard, as a fraction of the shard's T x B x n entries.
  // Needing more is an overflow like the spike buffers' (error or grow). 0 (the default):
  // measured: the first minibatch runs with a trace of TRACE_MEASURING_ACTIVITY that counts
  // what it needs, then the engine rebuilds at that plus headroom and redoes the step; a
  // measured trace grows on overflow whatever the overflow policy (docs/numerics.md §7).
  float traceActivity = 0.0f;
  // The id trace (the spike ids of all steps and samples) per shard, likewise. 0 (the
  // default): as maxActivity, and where the gradient trace is measured, measured with it:
  // the busiest shard's count on the first minibatch plus headroom (at least
  // TRACE_MEASURING_ACTIVITY), in the same rebuild; it grows on overflow whatever the policy.
  float spikeActivity = 0.0f;
  static constexpr float TRACE_MEASURING_ACTIVITY = 0.01f;
  float gradientTraceActivity() const {
    return traceActivity > 0.0f ? traceActivity : TRACE_MEASURING_ACTIVITY;
  }
  float idTraceActivity() const { return spikeActivity > 0.0f ? spikeActivity : maxActivity; }
  // dL/dI between two layers with compressed gradient traces (layer-major) crosses tiles as a
  // list of the live neurons' values (LayerShape::gradList), per shard this fraction of its
  // T x B x n entries; from the dense-trace fraction up, the dense [T, B, n] block. The forward
  // counts what the lists will need before any backward runs: more is an overflow (error or
  // grow, as the traces'). 0 (the default): measured on the first minibatch whose gradient
  // trace held every entry (dense until then), and grown on overflow whatever the policy.
  float gradListActivity = 0.0f;
  // A sparse rule's layer whose live fraction (counted by the forward) exceeds this runs the
  // dense backward on its masked surrogate (LayerSpec::denseBackward): 0 (the default), the
  // crossover measured on this machine (popsnn::SPARSE_BACKWARD_MAX_LIVE); 1, never.
  float sparseBackwardMaxLive = 0.0f;
  float gradientListActivity() const { return gradListActivity > 0.0f ? gradListActivity : 1.0f; }
  // [T, B, N_in] input: a list of its non-zero entries (ids and values, built by the host
  // once per batch) sized at this fraction of T x B x N_in, so the exchange onto the first
  // layer's tiles and its reads follow the input's activity; 0, or from the dense-trace
  // fraction up (an entry costs 8 bytes against 4), the dense [T, B, N_in] block. A batch
  // with more non-zeros grows the list (a rebuild, counted in the profile), never truncated.
  float inputActivity = 0.0f;
  // [T, B, N_in] input: keep the first layer's dL/dI of every step, [T, B, N_1] more
  // per sample chunk on its tiles, for the input gradient (Network::lossAndGrad's
  // outInputGrad). Direct input needs no flag: its sum over the steps is kept anyway.
  bool inputGrad = false;
  // Half storage (docs/numerics.md section 8): weights as the vertices read them, states,
  // traces and exchanged values stored in IEEE half, sums in float, float32 master weights
  // and optimiser state, gradients carried times a loss scale (Network::setLossScale).
  // Built for direct-current input, dense surrogate traces, layer-major and unchunked.
  bool halfStorage = false;

  // Throws std::invalid_argument naming the offending field, value and fix.
  void validate() const;
};

// Where the network runs: "cpu" (tiles = this machine's hardware threads, or
// $POPSNN_CPU_TILES), "ipu-model" (IPU geometry and memory enforced, cycle
// estimates on) or "ipu" (hardware, through poplar::DeviceManager).
struct DeviceSpec {
  std::string type = "cpu";
  unsigned numIPUs = 1;
  unsigned tilesPerIPU = 0;        // 0: the device's default (1,472 for ipu-model)
  unsigned memoryBytesPerTile = 0; // 0: the device's default (624 KiB for ipu-model)
  // The codelet object built with the package (popsnn_codelets.gp); empty: $POPSNN_CODELETS.
  std::string codeletsPath;
};

// Parameters of one layer in PyTorch's layout (weight [out, in] row-major).
struct LayerParams {
  std::vector<float> weight;
  std::vector<float> bias;            // [out] (empty without a bias)
  std::vector<float> recurrentWeight; // RLeaky: [out, out] or [out]
  std::vector<float> recurrentBias;   // RLeaky all-to-all: [out]
  std::vector<float> beta;            // learn_beta: [out] (one per neuron) or [1]
  std::vector<float> threshold;       // learn_threshold: likewise
};

// Optimiser state of one layer, same layout as LayerParams (PyTorch's names:
// SGD momentum_buffer in `first`; Adam exp_avg in `first`, exp_avg_sq in `second`).
struct LayerOptimizerState {
  LayerParams first;
  LayerParams second;
};
struct OptimizerState {
  unsigned steps = 0; // optimiser steps taken
  std::vector<LayerOptimizerState> layers;
};

} // namespace popsnn
