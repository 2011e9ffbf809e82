#include "Validation.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "Plan.hpp"
#include "popsnn/Names.hpp"

namespace popsnn {

namespace {

std::string str(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

[[noreturn]] void invalid(const std::string &what) { throw std::invalid_argument(what); }

// As popsnn.optim's: lr, eps, momentum, ... finite and >= 0; Adam's betas below 1.
void nonNegative(const std::string &name, double v) {
  if (!std::isfinite(v) || v < 0)
    invalid(name + " must be a finite number >= 0, got " + str(v));
}

void validateOptimizer(const OptimizerSpec &o) {
  nonNegative("optimizer.lr", o.lr);
  nonNegative("optimizer.weightDecay", o.weightDecay);
  if (o.kind == OptimizerKind::SGD) {
    nonNegative("optimizer.momentum", o.momentum);
    nonNegative("optimizer.dampening", o.dampening);
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      invalid("nesterov=True needs momentum > 0 and dampening = 0, got momentum=" +
              str(o.momentum) + ", dampening=" + str(o.dampening));
    return;
  }
  nonNegative("optimizer.eps", o.eps);
  for (const auto &[name, beta] :
       {std::pair{"optimizer.beta1", o.beta1}, std::pair{"optimizer.beta2", o.beta2}}) {
    nonNegative(name, beta);
    if (beta >= 1)
      invalid(std::string(name) + " must lie in [0, 1), got " + str(beta));
  }
}

// The surrogate's shape parameter, named as popsnn.surrogate names it.
void validateSurrogate(const std::string &at, const LayerSpec &s) {
  if (s.surrogate == SurrogateKind::StraightThrough)
    return;
  const char *name = s.surrogate == SurrogateKind::Atan ? "alpha" : "slope";
  if (!std::isfinite(s.surrogateParam) || !(s.surrogateParam > 0))
    invalid(at + "the surrogate's " + name + " must be a finite number > 0, got " +
            str(s.surrogateParam));
}

// The constants given one per neuron (docs/numerics.md section 2): one each, in range.
void validatePerNeuron(const std::string &at, const LayerSpec &s) {
  const struct {
    const char *name;
    const std::vector<float> &values;
    bool unit; // in [0, 1], else finite and > 0
  } constants[] = {
      {"beta", s.betas, true}, {"alpha", s.alphas, true}, {"threshold", s.thresholds, false}};
  for (const auto &c : constants) {
    if (c.values.empty())
      continue;
    if (c.values.size() != s.outputs)
      invalid(at + std::to_string(c.values.size()) + " " + c.name + " values for " +
              std::to_string(s.outputs) + " neurons; give one per neuron or a single value");
    for (float v : c.values)
      if (c.unit ? !(v >= 0.0f && v <= 1.0f) : !(v > 0.0f && std::isfinite(v)))
        invalid(at + "every " + c.name + " must " +
                (c.unit ? "lie in [0, 1]" : "be a finite number > 0") + ", got " + str(v));
  }
  if (s.neuron == NeuronType::Alpha)
    for (unsigned j = 0; j < s.outputs; ++j) {
      const float beta = s.betas.empty() ? s.beta : s.betas[j];
      const float alpha = s.alphas.empty() ? s.alpha : s.alphas[j];
      if (!(beta > 0.0f && alpha > beta))
        invalid(at +
                "Alpha needs 0 < beta < alpha <= 1 (as snnTorch) for every neuron, got "
                "alpha=" +
                str(alpha) + ", beta=" + str(beta) + " at neuron " + std::to_string(j));
    }
  if (s.neuron == NeuronType::Lapicque && (!s.betas.empty() || !s.alphas.empty() || s.learnBeta))
    invalid(at + "Lapicque steps with its decay and gain (from beta, R, C): they cannot be "
                 "given per neuron nor learned; give one beta, or learn the threshold only");
  if (s.sparseRule == SparseRule::OneSided)
    for (float v : s.thresholds)
      if (!(s.sparseValue < v))
        invalid(at + "the one-sided rule's theta_grad must be below every threshold, got " +
                str(s.sparseValue) + " and a threshold of " + str(v));
}

// The neuron models this build's codelets carry (the POPSNN_NEURONS build option; empty: all).
void validateCarried(const std::string &at, NeuronType neuron) {
  const std::string carried = POPSNN_NEURONS_CARRIED;
  const std::string name = nameOf(neuron, kNeuronNames);
  if (!carried.empty() && ("," + carried + ",").find("," + name + ",") == std::string::npos)
    invalid(at + "this popsnn was built with the neuron models " + carried +
            " only (POPSNN_NEURONS), not " + name + "; rebuild with " + name +
            " in POPSNN_NEURONS, or with it empty for every model");
}

void validateLayer(const NetworkSpec &spec, std::size_t l) {
  const LayerSpec &s = spec.layers[l];
  const std::string at = "layer " + std::to_string(l) + ": ";
  if (s.inputs == 0 || s.outputs == 0)
    invalid(at + "inputs and outputs must be >= 1, got " + std::to_string(s.inputs) + " and " +
            std::to_string(s.outputs));
  if (l > 0 && s.inputs != spec.layers[l - 1].outputs)
    invalid(at + "inputs=" + std::to_string(s.inputs) + " does not match the previous layer's " +
            "outputs=" + std::to_string(spec.layers[l - 1].outputs));
  if (!(s.beta >= 0.0f && s.beta <= 1.0f))
    invalid(at + "beta must lie in [0, 1], got " + str(s.beta));
  if (!(s.alpha >= 0.0f && s.alpha <= 1.0f))
    invalid(at + "alpha must lie in [0, 1], got " + str(s.alpha));
  if (!(s.gain > 0.0f) || !std::isfinite(s.gain))
    invalid(at + "gain (Lapicque's dt/C, Alpha's tau_alpha) must be a finite number > 0, got " +
            str(s.gain));
  if (!(s.threshold > 0.0f) || !std::isfinite(s.threshold))
    invalid(at + "threshold must be a finite number > 0, got " + str(s.threshold));
  validateCarried(at, s.neuron);
  validateSurrogate(at, s);
  validatePerNeuron(at, s);
  if (s.sparseRule != SparseRule::None && !std::isfinite(s.sparseValue))
    invalid(at + "the sparse rule's value must be a finite number, got " + str(s.sparseValue));
  if (s.sparseRule == SparseRule::Window && !(s.sparseValue > 0.0f))
    invalid(at + "the window rule's b_th must be > 0, got " + str(s.sparseValue));
  if (s.sparseRule == SparseRule::OneSided && !(s.sparseValue < s.threshold))
    invalid(at + "the one-sided rule's theta_grad must be below the threshold " + str(s.threshold) +
            ", got " + str(s.sparseValue));
}

void validateLoss(const NetworkSpec &spec) {
  const LossSpec &loss = spec.loss;
  const unsigned C = spec.layers.back().outputs;
  const unsigned K = loss.numClasses ? loss.numClasses : C;
  if (C % K)
    invalid("loss.numClasses=" + std::to_string(K) + " does not divide the " + std::to_string(C) +
            " outputs; a population code needs a multiple of the number of classes");
  if (K != C && (loss.kind == LossKind::CeRate || loss.kind == LossKind::MseMembrane ||
                 loss.kind == LossKind::CeMaxMembrane))
    invalid("this loss has no population code: numClasses must equal the " + std::to_string(C) +
            " outputs, got " + std::to_string(K));
  for (const auto &[name, rate] : {std::pair{"loss.correctRate", loss.correctRate},
                                   std::pair{"loss.incorrectRate", loss.incorrectRate}})
    if (!(rate >= 0.0 && rate <= 1.0))
      invalid(std::string(name) + " must lie in [0, 1], got " + str(rate));
  if (!std::isfinite(loss.onTarget) || !std::isfinite(loss.offTarget))
    invalid("loss.onTarget and loss.offTarget must be finite numbers, got " + str(loss.onTarget) +
            " and " + str(loss.offTarget));
}

std::string member(const std::string &name, std::size_t l, unsigned p) {
  return name + "[" + std::to_string(l) + "]['" + paramName(p) + "']";
}

// One layer's arrays: the expected sizes where `present`, empty elsewhere.
void layerArrays(const NetworkSpec &spec, std::size_t l, const LayerParams &lp,
                 const std::string &name, bool present, bool emptyIsZero) {
  const LayerSpec &s = spec.layers[l];
  for (unsigned p = 0; p < NUM_PARAMS; ++p) {
    const std::vector<float> &values = paramValues(lp, p);
    const std::string what = member(name, l, p);
    if (!present || !layerHasParam(s, p)) {
      if (!values.empty())
        invalid(what + " given, but layer " + std::to_string(l) + " has none; leave it out");
      continue;
    }
    if (values.empty() && emptyIsZero)
      continue;
    if (values.size() != hostParamSize(s, p))
      invalid(what + " has " + std::to_string(values.size()) + " values, expected " +
              std::to_string(hostParamSize(s, p)) + " for layer " + std::to_string(l) +
              " of the net");
    checks::finiteArray(what, values.data(), values.size());
  }
}

} // namespace

namespace {

// What the engine's half path has not built yet, refused before anything is built.
void validateHalf(const NetworkSpec &spec) {
  const std::string fix = "; use dtype='float32', or device='reference' for half storage";
  if (spec.input != InputMode::Direct)
    invalid("dtype='float16' on the engine takes [B, N] direct-current input only, not "
            "[T, B, N] per-step input" +
            fix);
  for (std::size_t l = 0; l < spec.layers.size(); ++l) {
    const LayerSpec &s = spec.layers[l];
    const std::string layer = "layer " + std::to_string(l);
    if (s.neuron == NeuronType::RLeaky && s.allToAll)
      invalid(layer +
              ": dtype='float16' on the engine does not run an all-to-all RLeaky "
              "recurrence yet (all_to_all=False does)" +
              fix);
    if (s.learnBeta || s.learnThreshold)
      invalid(layer +
              ": dtype='float16' on the engine does not learn beta or threshold yet "
              "(fixed ones, also per neuron, run)" +
              fix);
  }
}

} // namespace

void NetworkSpec::validate() const {
  if (layers.empty())
    invalid("NetworkSpec.layers is empty; give at least one layer");
  if (batchSize == 0)
    invalid("NetworkSpec.batchSize must be >= 1, got 0");
  if (numSteps == 0)
    invalid("NetworkSpec.numSteps must be >= 1, got 0");
  if (!(maxActivity > 0.0f && maxActivity <= 1.0f))
    invalid("NetworkSpec.maxActivity must lie in (0, 1], got " + str(maxActivity));
  if (!(traceActivity >= 0.0f && traceActivity <= 1.0f))
    invalid("NetworkSpec.traceActivity must lie in [0, 1] (0: measured), got " +
            str(traceActivity));
  if (!(spikeActivity >= 0.0f && spikeActivity <= 1.0f))
    invalid("NetworkSpec.spikeActivity must lie in [0, 1] (0: the engine's size), got " +
            str(spikeActivity));
  if (!(sparseBackwardMaxLive >= 0.0f && sparseBackwardMaxLive <= 1.0f))
    invalid("NetworkSpec.sparseBackwardMaxLive must lie in [0, 1] (0: the measured crossover, "
            "1: never dense), got " +
            str(sparseBackwardMaxLive));
  if (!(gradListActivity >= 0.0f && gradListActivity <= 1.0f))
    invalid("NetworkSpec.gradListActivity must lie in [0, 1] (0: measured), got " +
            str(gradListActivity));
  if (!(inputActivity >= 0.0f && inputActivity <= 1.0f))
    invalid("NetworkSpec.inputActivity must lie in [0, 1] (0: the dense input block), got " +
            str(inputActivity));
  for (std::size_t l = 0; l < layers.size(); ++l)
    validateLayer(*this, l);
  validateLoss(*this);
  validateOptimizer(optimizer);
  if (halfStorage)
    validateHalf(*this);
}

namespace checks {

void finiteArray(const std::string &name, const float *values, std::size_t n) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i)
    bad += !std::isfinite(values[i]);
  noneNonFinite(name, bad);
}

void noneNonFinite(const std::string &name, std::size_t bad) {
  if (bad)
    invalid(name + " contains " + std::to_string(bad) +
            " NaN or inf value(s); clean or clip the input before passing it to popsnn");
}

void learningRate(double lr) {
  if (!std::isfinite(lr) || lr < 0)
    invalid("the learning rate must be a finite number >= 0, got " + str(lr));
}

void batch(const NetworkSpec &spec, InputBatch x, std::size_t xSize, const int *labels,
           unsigned valid, unsigned numClasses, bool scanValues) {
  const unsigned B = spec.batchSize;
  if (valid == 0 || valid > B)
    invalid("validSamples must lie in [1, " + std::to_string(B) + "], got " +
            std::to_string(valid));
  if (x.empty())
    invalid("x is a null pointer; pass the batch's " + std::to_string(xSize) +
            " values (float32, or uint8 spikes and counts)");
  if (scanValues && x.floats)
    finiteArray("x", x.floats, xSize);
  if (!labels)
    return;
  for (unsigned b = 0; b < valid; ++b)
    if (labels[b] < 0 || unsigned(labels[b]) >= numClasses)
      invalid("label " + std::to_string(labels[b]) + " of sample " + std::to_string(b) +
              " is outside [0, " + std::to_string(numClasses) + ")");
}

void params(const NetworkSpec &spec, const std::vector<LayerParams> &ps, const std::string &name) {
  if (ps.size() != spec.layers.size())
    invalid(name + " has " + std::to_string(ps.size()) + " layer(s), the network has " +
            std::to_string(spec.layers.size()));
  for (std::size_t l = 0; l < ps.size(); ++l)
    layerArrays(spec, l, ps[l], name, true, false);
}

void optimizerState(const NetworkSpec &spec, const OptimizerState &state) {
  if (state.layers.size() != spec.layers.size())
    invalid("optimiser state has " + std::to_string(state.layers.size()) +
            " layer(s), the network has " + std::to_string(spec.layers.size()));
  for (std::size_t l = 0; l < state.layers.size(); ++l) {
    layerArrays(spec, l, state.layers[l].first, "optimiser state first",
                hasOptimizerSlot(spec.optimizer, 0), true);
    layerArrays(spec, l, state.layers[l].second, "optimiser state second",
                hasOptimizerSlot(spec.optimizer, 1), true);
  }
}

} // namespace checks
} // namespace popsnn
