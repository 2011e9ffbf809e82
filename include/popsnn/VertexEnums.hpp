// Codes shared by popsnn's vertices (codelets/) and the host graph builder (host/src/):
// plain C++ with no dependencies, in this folder both sides include, so the two can never
// disagree on what a code means and neither includes the other's headers.
#pragma once

namespace popsnn {
namespace codes {

// The neuron models, one line each (the only place a model is registered):
//   X(code, name, unit, states)
// its code, its name (the layer class's in python/popsnn/layers.py, and the host's
// NeuronType), its codelet unit in codelets/Neurons.hpp and the [B, n] state blocks the unit
// keeps (U, then J, or Alpha's E and H: the host sizes them). The codes, the host's names
// and the LIF vertices' explicit instantiations (generated at build time, see
// host/CMakeLists.txt) all come from this table.
#define POPSNN_NEURON_MODELS(X)                                                                    \
  X(LEAKY, Leaky, Leaky, 1)                                                                        \
  X(SYNAPTIC, Synaptic, Synaptic, 2)                                                               \
  X(RLEAKY_ALL_TO_ALL, RLeaky, RLeakyAllToAll, 1)                                                  \
  X(LAPICQUE, Lapicque, Lapicque, 1)                                                               \
  X(ALPHA, Alpha, Alpha, 3)
// RLeaky with one recurrent weight per neuron (all_to_all=False): RLeaky's second unit.
#define POPSNN_NEURON_VARIANTS(X) X(RLEAKY_ONE_TO_ONE, RLeaky, RLeakyOneToOne, 1)

#define POPSNN_NEURON_CODE(code, name, unit, states) code,
enum Neuron : unsigned {
  POPSNN_NEURON_MODELS(POPSNN_NEURON_CODE) POPSNN_NEURON_VARIANTS(POPSNN_NEURON_CODE) NUM_NEURONS
};
#undef POPSNN_NEURON_CODE
enum Reset : unsigned { RESET_SUBTRACT = 0, RESET_ZERO = 1, RESET_NONE = 2, NUM_RESETS = 3 };
enum Surrogate : unsigned {
  FAST_SIGMOID = 0,
  ATAN = 1,
  SIGMOID = 2,
  STRAIGHT_THROUGH = 3,
  NUM_SURROGATES = 4
};
// The type a layer's weights, traces and exchanged values are stored in (docs/numerics.md
// section 8); sums are float either way. The vertices that read or write those values are
// templated on it (include/popsnn/VertexUnits.hpp names them).
enum Storage : unsigned { STORE_FLOAT = 0, STORE_HALF = 1, NUM_STORAGES = 2 };
// LifForward's float scratch of a shard of n neurons: input, recurrent term and surrogate
// rows, and with half storage the neuron's states read into float (`states` rows).
constexpr unsigned forwardScratch(unsigned n, unsigned states, Storage storage) {
  return (storage == STORE_HALF ? 3 + states : 3) * n;
}
// LifBackward's float scratch: dL/dS (then dL/dI) and a row, and the next layer's dL/dI
// gathered (P = pushWidth(its width), two rows; Alpha: at least a row); with half storage two
// more rows, a learned beta's U (Alpha: and H) read into float.
constexpr unsigned backwardScratch(unsigned n, unsigned P, unsigned states, Storage storage) {
  return 2 * n + (2 * P > (states == 3 ? n : 0) ? 2 * P : (states == 3 ? n : 0)) +
         (storage == STORE_HALF ? 2 * n : 0);
}
enum Rule : unsigned { RULE_NONE = 0, RULE_WINDOW = 1, RULE_ONE_SIDED = 2, NUM_RULES = 3 };
// Where a layer's synaptic input comes from.
enum InputSource : unsigned {
  INPUT_DIRECT = 0,      // x [B, N_in] the same every step: x.W computed once per minibatch
  INPUT_DENSE_STEPS = 1, // x [T, B, N_in], one tensor per step: zeros skipped
  INPUT_SPIKE_IDS = 2,   // the previous layer's spike-id buffers
  // The previous layer's shards' contributions W.S[t], one block per shard, summed here:
  // used where this layer is narrower than the previous one's id buffers (see the builder).
  INPUT_PARTIAL_CURRENT = 3,
};
enum Loss : unsigned {
  CE_COUNT = 0,
  CE_RATE = 1,
  MSE_COUNT = 2,
  MSE_MEMBRANE = 3,
  CE_MAX_MEMBRANE = 4
};
// Whether a loss reads the readout's U and writes dL/dU (the others read its spikes and write
// dL/dS only): the host exchanges U and dL/dU for these alone, OutputLoss zeroes dL/dU for
// these alone.
constexpr bool usesMembranes(Loss loss) { return loss == MSE_MEMBRANE || loss == CE_MAX_MEMBRANE; }

// A spike buffer per (step, sample, shard): [spike count, spike count, ids...] (the second
// count is kept so that every reader sees one header; gradient candidates are in the
// gradient trace, below). A shard's buffers of all steps (its id trace) are stored one after
// the other behind traceStarts(T, B) starts (offsets from the trace's beginning), so the
// trace's size follows the spikes of all steps, not the busiest one; a buffer sent per step
// (step-major schedule, recurrence) has a fixed stride instead.
constexpr unsigned BUFFER_HEADER = 2;
// A sparse rule's gradient trace per shard: the entries whose masked surrogate is non-zero
// (spikes inside the rule and gradient candidates), compressed over all (step, sample):
// T*B + 1 starts (int) and the entries' local neuron ids (16-bit) beside their surrogate
// values, so its size follows the mean activity, not the peak of one (step, sample).
constexpr unsigned traceStarts(unsigned steps, unsigned batch) { return steps * batch + 1; }
// [T, B, N_in] input kept as a list of its non-zero entries (NetworkSpec::inputActivity): the
// host builds it once per batch, [T*B + 1 starts][input ids] beside their values, the same
// starts-then-entries layout as the gradient trace, so the first layer's forward and weight
// gradient read the few non-zeros instead of scanning T x B x N_in floats.
constexpr unsigned inputListStarts(unsigned steps, unsigned batch) { return steps * batch + 1; }
// A shard's dL/dI as a list (LayerShape::gradList): T*B + 1 starts, then the live neurons'
// 16-bit ids beside their values, the rows in the backward's order (row (T-1-t) B + b).
constexpr unsigned gradListStarts(unsigned steps, unsigned batch) { return steps * batch + 1; }
// overflow[OVERFLOWED] buffers that overflowed; overflow[FIRST_STEP] = first such step + 1;
// overflow[MOST_NEEDED] = largest number of entries a buffer needed; overflow[TRACE_NEEDED] =
// entries the gradient trace needed in all (it overflowed if more than it holds);
// overflow[SPIKES_NEEDED] = spike ids the id trace needed in all (likewise);
// overflow[GRAD_LIST_NEEDED] = entries a compressed-trace shard's dL/dI list will need in the
// backward (its live neurons summed over (t, b): counted by the forward, so the host grows the
// list before any backward runs; see LayerShape::gradList).
// A pushing shard keeps the next layer's weights as rows of pushWidth(N_next) floats
// (zero-padded) and sums them PUSH_CHUNK columns at a time in registers.
constexpr unsigned PUSH_CHUNK = 16;
constexpr unsigned pushWidth(unsigned n) { return (n + PUSH_CHUNK - 1) / PUSH_CHUNK * PUSH_CHUNK; }
// DirectCurrent's sparse product takes SPARSE_GROUP samples at a time (AVX-512 hosts) when
// its value scratch holds SPARSE_GROUP rows of inputs; the host gives it that much on the
// cpu device (one row elsewhere: tile memory).
constexpr unsigned SPARSE_GROUP = 4;
// The training step's fused first-layer weight step (DirectWeightAdamStep / DirectWeightSgdStep)
// computes the weight gradient FUSED_STEP_ROWS inputs' rows at a time into a scratch of that
// many rows of the shard's width, and steps those weights while the rows are in cache.
constexpr unsigned FUSED_STEP_ROWS = 16;

// The whole-trace Leaky / Synaptic kernels (codelets/LeakyTrace.hpp, AVX-512 and AVX2 + FMA
// host builds): a layer-major shard on direct current, no sparse rule, not the output layer,
// at most TRACE_MAX_STEPS steps. Its forward writes no surrogate trace: the trace's memory only
// stages the spike masks, leakMaskFloats of it, so the host sizes it so where the loaded
// codelets have the kernels (the LeakTraceKernels vertex says) and the layer qualifies.
constexpr unsigned TRACE_MAX_STEPS = 64;
inline bool leakTraceApplies(unsigned inputMode, unsigned rule, unsigned surrogate, bool output,
                             unsigned stepsPerCall, unsigned numSteps, bool stepMajor) {
  return inputMode == INPUT_DIRECT && rule == RULE_NONE && surrogate != SIGMOID && !output &&
         stepsPerCall == numSteps && numSteps <= TRACE_MAX_STEPS && !stepMajor;
}
// The masks: one 16-bit word per 16 neurons per (step, sample), in floats.
constexpr unsigned long long leakMaskFloats(unsigned steps, unsigned batch, unsigned n) {
  return (2ull * steps * batch * ((n + 15) / 16) + 3) / 4;
}

enum OverflowField : unsigned {
  OVERFLOWED = 0,
  FIRST_STEP = 1,
  MOST_NEEDED = 2,
  TRACE_NEEDED = 3,
  SPIKES_NEEDED = 4,
  GRAD_LIST_NEEDED = 5,
  OVERFLOW_FIELDS = 6
};

} // namespace codes
} // namespace popsnn
