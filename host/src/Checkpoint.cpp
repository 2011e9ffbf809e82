// popsnn::loadCheckpoint (popsnn/Checkpoint.hpp): python/popsnn/checkpoint.py's .npz read
// from C++. The arrays come from NpzReader; the "__meta__" array holds JSON (read with
// nlohmann/json) whose values are plain JSON or {"__array__": name}, {"__dict__": {...}},
// {"__list__": [...]} (docs/checkpoint-format.md). Everything is checked here or by
// NetworkSpec::validate and popsnn::checks before a Checkpoint is returned.
#include "popsnn/Checkpoint.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "NpzReader.hpp"
#include "Plan.hpp"
#include "Validation.hpp"
#include "popsnn/Names.hpp"

namespace popsnn {
namespace {

using json = nlohmann::json;

constexpr int kMaxDepth = 64; // far deeper than any checkpoint's metadata nests

// A checkpoint names its sparse rule only when it has one.
const Names<SparseRule> kStoredSparseRules(kSparseRuleNames.begin() + 1, kSparseRuleNames.end());

// Python's json writes NaN and +-Infinity (a diverged run's history, say), which JSON lacks:
// outside strings they become null, so a field that must be a number refuses them.
std::string nonFiniteAsNull(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  bool inString = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      out += c;
      if (c == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (c == '"')
        inString = false;
      continue;
    }
    inString = c == '"';
    bool replaced = false;
    for (const char *word : {"-Infinity", "Infinity", "NaN"}) {
      if (text.compare(i, std::strlen(word), word) == 0) {
        out += "null";
        i += std::strlen(word) - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced)
      out += c;
  }
  return out;
}

// A value of the file in a message: short, one line, printable.
std::string shown(const json &v) {
  const std::string text = npz::printable(v.dump());
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

// Reading one file: every message names it, the problem and the fix.
struct Reader {
  std::string path;
  std::map<std::string, npz::Array> arrays;

  [[noreturn]] void damaged(const std::string &what) const {
    throw CheckpointError("checkpoint " + path + ": " + npz::printable(what) +
                          "; the file is damaged or not written by popsnn.checkpoint.save: "
                          "use another checkpoint or save it again");
  }

  // A layer feature the engine does not implement yet: refused, not read approximately.
  [[noreturn]] void unsupported(const std::string &what) const {
    throw CheckpointError("checkpoint " + path + ": " + npz::printable(what) +
                          " is not supported by the C++ engine yet; use this checkpoint from "
                          "Python with device='reference'");
  }
  // A neuron constant: one number per layer, or a list of one per neuron (into `values`;
  // NetworkSpec::validate checks its length and range).
  void constant(const json &n, const std::string &key, const std::string &where, float &scalar,
                std::vector<float> &values) const {
    const json &v = field(n, key, where);
    if (!v.is_array()) {
      scalar = real(v, where + " " + key);
      return;
    }
    if (v.empty())
      damaged(where + " " + key + " is an empty list, expected a number or one per neuron");
    values.clear();
    for (std::size_t j = 0; j < v.size(); ++j)
      values.push_back(real(v[j], where + " " + key + "[" + std::to_string(j) + "]"));
  }
  // learn_beta / learn_threshold, when the file has them (older checkpoints do not): the
  // count of such keys. The trained values are the layer's "beta" / "threshold" params.
  std::size_t learnFlags(const json &n, const std::string &where, LayerSpec &s) const {
    std::size_t found = 0;
    for (const char *flag : {"learn_beta", "learn_threshold"}) {
      if (!n.is_object() || !n.contains(flag))
        continue;
      ++found;
      (flag[6] == 'b' ? s.learnBeta : s.learnThreshold) = boolean(n.at(flag), where + " " + flag);
    }
    return found;
  }

  const json &field(const json &obj, const std::string &key, const std::string &where) const {
    if (!obj.is_object() || !obj.contains(key))
      damaged(where + " has no '" + key + "'");
    return obj.at(key);
  }
  double number(const json &v, const std::string &where) const {
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      damaged(where + " must be a finite number, got " + shown(v));
    return v.get<double>();
  }
  // A float32 field: converting a larger double to float would be undefined behaviour.
  float real(const json &v, const std::string &where) const {
    const double x = number(v, where);
    if (std::fabs(x) > std::numeric_limits<float>::max())
      damaged(where + " is out of float32's range, got " + shown(v));
    // A non-zero value that rounds to (signed) zero would pass range checks made on the
    // float that Python's reader, checking the double, refuses (a beta of -1e-194).
    if (x != 0.0 && float(x) == 0.0f)
      damaged(where + " is too small for float32 (it would round to zero), got " + shown(v));
    return float(x);
  }
  unsigned count(const json &v, const std::string &where, unsigned lowest) const {
    if (!v.is_number_integer() || v.get<long long>() < lowest || v.get<long long>() > 0x7fffffff)
      damaged(where + " must be an integer >= " + std::to_string(lowest) + ", got " + shown(v));
    return unsigned(v.get<long long>());
  }
  bool boolean(const json &v, const std::string &where) const {
    if (!v.is_boolean())
      damaged(where + " must be true or false, got " + shown(v));
    return v.get<bool>();
  }
  template <typename E> E name(const json &v, const std::string &where, const Names<E> &options) {
    std::string names;
    for (const auto &o : options) {
      if (v.is_string() && v.get<std::string>() == o.first)
        return o.second;
      names += std::string(names.empty() ? "" : ", ") + o.first;
    }
    damaged(where + " must be one of " + names + ", got " + shown(v));
  }
  // The skeleton's containers: {"__dict__": {...}} and {"__list__": [...]}.
  const json &dict(const json &v, const std::string &where) const {
    if (!v.is_object() || v.size() != 1 || !v.contains("__dict__") || !v["__dict__"].is_object())
      damaged(where + " must be a dict");
    return v["__dict__"];
  }
  const json &list(const json &v, const std::string &where) const {
    if (!v.is_object() || v.size() != 1 || !v.contains("__list__") || !v["__list__"].is_array())
      damaged(where + " must be a list");
    return v["__list__"];
  }
  const npz::Array &array(const json &v, const std::string &where) const {
    if (!v.is_object() || v.size() != 1 || !v.contains("__array__") ||
        !v["__array__"].is_string() || !arrays.count(v["__array__"].get<std::string>()))
      damaged(where + " must name an array of the file");
    return arrays.at(v["__array__"].get<std::string>());
  }
  // popsnn.checkpoint's nested state: plain scalars, {"__array__": name of an array of the
  // file}, {"__dict__": {key: state}}, {"__list__": [state]}, nothing else.
  void checkState(const json &v, const std::string &where, int depth) const {
    if (depth > kMaxDepth)
      damaged(where + " nests deeper than " + std::to_string(kMaxDepth) + " levels");
    if (v.is_primitive())
      return;
    if (v.is_object() && v.contains("__array__")) {
      array(v, where);
    } else if (v.is_object() && v.contains("__dict__")) {
      for (const auto &item : dict(v, where).items())
        checkState(item.value(), where + "/" + item.key(), depth + 1);
    } else {
      const json &items = list(v, where);
      for (std::size_t i = 0; i < items.size(); ++i)
        checkState(items[i], where + "/" + std::to_string(i), depth + 1);
    }
  }

  // A float array of exactly `shape`, as float32 with every value finite.
  std::vector<float> floats(const json &ref, const std::vector<std::size_t> &shape,
                            const std::string &where) const {
    const npz::Array &a = array(ref, where);
    std::string want = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
      want += (i ? ", " : "") + std::to_string(shape[i]);
    want += "]";
    if (a.kind != 'f' || (a.itemSize != 4 && a.itemSize != 8))
      damaged(where + " is " + a.describe() + ", expected float32 or float64 " + want);
    if (a.shape != shape)
      damaged(where + " is " + a.describe() + ", expected " + want);
    std::vector<float> out(a.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      double v;
      if (a.itemSize == 4) {
        float f;
        std::memcpy(&f, a.bytes.data() + 4 * i, 4);
        v = f;
      } else {
        std::memcpy(&v, a.bytes.data() + 8 * i, 8);
      }
      if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max())
        damaged(where + " holds NaN, inf or a value beyond float32 (element " + std::to_string(i) +
                ")");
      out[i] = float(v);
    }
    return out;
  }

  json metadata() const;
  void network(const json &layers, NetworkSpec &spec);
  void lapicque(const json &n, const std::string &where, LayerSpec &s) const;
  void alphaGain(LayerSpec &s) const;
  void layerParams(const json &params, const NetworkSpec &spec, std::vector<LayerParams> &out);
  void optimizer(const json &opt, Checkpoint &ckpt);
  void optimizerHyper(const json &hyper, OptimizerSpec &o);
  void optimizerEntries(const json &entries, Checkpoint &ckpt);
  void config(const json &config, NetworkSpec &spec);
};

std::vector<std::size_t> paramShape(const LayerSpec &s, int i) {
  if (i == 0)
    return {s.outputs, s.inputs};
  if (i == 2 && s.allToAll)
    return {s.outputs, s.outputs};
  if ((i == P_BETA && s.betas.empty()) || (i == P_THRESHOLD && s.thresholds.empty()))
    return {}; // a learned constant given once per layer
  return {s.outputs};
}

bool hasParam(const LayerSpec &s, int i) {
  if (i == 1)
    return s.bias;
  if (i == 2)
    return s.neuron == NeuronType::RLeaky;
  if (i == 3)
    return s.neuron == NeuronType::RLeaky && s.allToAll;
  if (i == P_BETA)
    return s.learnBeta;
  if (i == P_THRESHOLD)
    return s.learnThreshold;
  return true;
}

json Reader::metadata() const {
  auto it = arrays.find("__meta__");
  if (it == arrays.end())
    damaged("there is no __meta__ array (the metadata)");
  const npz::Array &a = it->second;
  if (a.kind != 'u' || a.itemSize != 1 || a.shape.size() != 1)
    damaged("__meta__ is " + a.describe() + ", expected uint8 [n] (JSON text)");
  json meta;
  try {
    meta = json::parse(nonFiniteAsNull(a.bytes), [](int depth, json::parse_event_t, json &) {
      if (depth > kMaxDepth)
        throw std::length_error("nested too deeply");
      return true;
    });
  } catch (const std::exception &err) {
    damaged("its metadata is not valid JSON (" + npz::printable(err.what()) + ")");
  }
  if (!meta.is_object() || meta.value("format", json()) != "popsnn-checkpoint")
    damaged("its metadata does not say format 'popsnn-checkpoint'");
  if (meta.value("version", json()) != 1)
    throw CheckpointError("checkpoint " + path + " has format version " +
                          shown(meta.value("version", json())) +
                          ", this popsnn reads version 1: load it with the popsnn that wrote it");
  for (const char *key : {"params", "optimizer", "rng_state", "config", "history"})
    checkState(field(meta, key, "the metadata"), key, 0);
  for (const char *key : {"rng_state", "history"}) // Python's popsnn.checkpoint.load checks these
    if (!meta[key].is_null())
      dict(meta[key], key);
  return meta;
}

// "network": [{"type": "Linear", ...}, {"type": "Leaky", ...}, ...], plain JSON.
void Reader::network(const json &layers, NetworkSpec &spec) {
  if (layers.is_array() && !layers.empty() && layers[0].is_object() &&
      layers[0].value("type", json()) == "Input") // popsnn.checkpoint's mark of a conv network
    unsupported("a network with Conv2d / pooling / Flatten layers");
  if (!layers.is_array() || layers.empty() || layers.size() % 2 != 0)
    damaged("'network' must be a list of (Linear, neuron) layer pairs");
  for (std::size_t i = 0; i < layers.size(); i += 2) {
    const std::string where = "network layer " + std::to_string(i / 2);
    const json &lin = layers[i], &n = layers[i + 1];
    if (!lin.is_object() || lin.value("type", json()) != "Linear" || lin.size() != 4)
      damaged(where + " must start with a Linear {type, in_features, out_features, bias}");
    LayerSpec s;
    s.inputs = count(field(lin, "in_features", where), where + " in_features", 1);
    s.outputs = count(field(lin, "out_features", where), where + " out_features", 1);
    s.bias = boolean(field(lin, "bias", where), where + " bias");
    s.neuron = name(field(n, "type", where), where + " neuron type", kNeuronNames);
    std::size_t keys = 6 + learnFlags(n, where, s);
    constant(n, "threshold", where, s.threshold, s.thresholds);
    if (s.neuron == NeuronType::Lapicque) {
      lapicque(n, where, s);
      keys += 3;
    } else {
      constant(n, "beta", where, s.beta, s.betas);
    }
    s.reset = name(field(n, "reset_mechanism", where), where + " reset_mechanism", kResetNames);
    const json &sur = field(n, "surrogate", where);
    if (sur.size() != 2)
      damaged(where + " surrogate must be {name, param}");
    s.surrogate = name(field(sur, "name", where), where + " surrogate name", kSurrogateNames);
    s.surrogateParam = real(field(sur, "param", where), where + " surrogate param");
    const json &rule = field(n, "sparse", where);
    if (!rule.is_null()) {
      if (rule.size() != 2)
        damaged(where + " sparse must be null or {kind, value}");
      s.sparseRule = name(field(rule, "kind", where), where + " sparse kind", kStoredSparseRules);
      s.sparseValue = real(field(rule, "value", where), where + " sparse value");
    }
    if (s.neuron == NeuronType::Synaptic || s.neuron == NeuronType::Alpha) {
      constant(n, "alpha", where, s.alpha, s.alphas);
      ++keys;
    }
    if (s.neuron == NeuronType::Alpha)
      alphaGain(s);
    if (s.neuron == NeuronType::RLeaky) {
      s.allToAll = boolean(field(n, "all_to_all", where), where + " all_to_all");
      ++keys;
    }
    if (n.size() != keys)
      damaged(where + " " + n["type"].get<std::string>() + " has fields it does not take");
    spec.layers.push_back(s);
  }
}

// Alpha's tau_alpha = ln(alpha) / (ln(beta) - ln(alpha)) + 1, the gain from E + H to U, in
// float32 as python/popsnn/backends/engine.py computes it with NumPy (whose float32 log may
// differ from the C library's in the last bit). Only for constants one per layer and fixed:
// per neuron or learned, the vertices compute it from alpha and the clamped beta. Outside
// 0 < beta < alpha <= 1 the gain stays 1 and NetworkSpec's validation names the problem.
void Reader::alphaGain(LayerSpec &s) const {
  if (s.perNeuron() || !(s.beta > 0.0f && s.alpha > s.beta && s.alpha <= 1.0f))
    return;
  const float logAlpha = std::log(s.alpha);
  s.gain = logAlpha / (std::log(s.beta) - logAlpha) + 1.0f;
}

// Lapicque's decay 1 - dt/(RC) and gain dt/C from what its layer was built with (beta, or
// R and C, or beta with one of them, and time_step), as python/popsnn/layers.py derives them.
void Reader::lapicque(const json &n, const std::string &where, LayerSpec &s) const {
  const json &beta = field(n, "beta", where), &R = field(n, "R", where), &C = field(n, "C", where);
  const double dt = number(field(n, "time_step", where), where + " time_step");
  double r = 1.0, c = 1.0;
  if (beta.is_null()) {
    r = number(R, where + " R");
    c = number(C, where + " C");
  } else {
    const double b = number(beta, where + " beta");
    if (!(b > 0.0 && b < 1.0) || (!R.is_null() && !C.is_null()))
      damaged(where + " Lapicque needs beta in (0, 1) or R and C, not all three");
    const double logInvBeta = std::log(1.0 / b);
    if (C.is_null()) {
      r = R.is_null() ? 1.0 : number(R, where + " R");
      c = dt / (r * logInvBeta);
    } else {
      c = number(C, where + " C");
      r = dt / (c * logInvBeta);
    }
  }
  if (!(r > 0.0 && c > 0.0 && dt > 0.0 && dt <= r * c))
    damaged(where + " Lapicque needs R, C, time_step > 0 and time_step <= R*C");
  s.beta = float(1.0 - dt / (r * c));
  s.gain = float(dt / c);
}

// "params": a list of per-layer dicts {name: array} in PyTorch's layout.
void Reader::layerParams(const json &params, const NetworkSpec &spec,
                         std::vector<LayerParams> &out) {
  const json &layers = list(params, "params");
  if (layers.size() != spec.layers.size())
    damaged("it has weights for " + std::to_string(layers.size()) + " layer(s), its network has " +
            std::to_string(spec.layers.size()));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const std::string where = "layer " + std::to_string(l);
    const json &d = dict(layers[l], where + " params");
    std::size_t expected = 0;
    LayerParams p;
    for (int i = 0; i < int(NUM_PARAMS); ++i) {
      if (!hasParam(spec.layers[l], i))
        continue;
      ++expected;
      paramValues(p, i) = floats(field(d, paramName(i), where + " params"),
                                 paramShape(spec.layers[l], i), where + " " + paramName(i));
    }
    if (d.size() != expected)
      damaged(where + " params has arrays its layer does not take");
    out.push_back(std::move(p));
  }
}

void Reader::optimizerHyper(const json &hyper, OptimizerSpec &o) {
  const std::string where = "optimizer hyper";
  auto get = [&](const char *key) { return number(field(hyper, key, where), where + " " + key); };
  o.lr = get("lr");
  o.weightDecay = get("weight_decay");
  if (o.kind == OptimizerKind::SGD) {
    o.momentum = get("momentum");
    o.dampening = get("dampening");
    o.nesterov = boolean(field(hyper, "nesterov", where), where + " nesterov");
    if (hyper.size() != 5)
      damaged(where + " has fields SGD does not take");
    return;
  }
  const json &betas = list(field(hyper, "betas", where), where + " betas");
  if (betas.size() != 2)
    damaged(where + " betas must be a pair");
  o.beta1 = number(betas[0], where + " betas[0]");
  o.beta2 = number(betas[1], where + " betas[1]");
  o.eps = get("eps");
  if (hyper.size() != 4)
    damaged(where + " has fields Adam does not take");
}

// "state": [[layer, name, {"step": n, "exp_avg": a, "exp_avg_sq": a} or
// {"momentum_buffer": a}], ...], popsnn.optim's state_dict.
void Reader::optimizerEntries(const json &entries, Checkpoint &ckpt) {
  const NetworkSpec &spec = ckpt.spec;
  const bool sgd = spec.optimizer.kind == OptimizerKind::SGD;
  OptimizerState &state = ckpt.optimizerState;
  state.layers.assign(spec.layers.size(), {});
  std::map<std::pair<std::size_t, int>, bool> seen;
  for (std::size_t e = 0; e < entries.size(); ++e) {
    const std::string where = "optimizer state entry " + std::to_string(e);
    const json &entry = list(entries[e], where);
    if (entry.size() != 3 || !entry[1].is_string())
      damaged(where + " must be [layer, name, {field: value}]");
    const std::size_t l = count(entry[0], where + " layer", 0);
    int i = 0;
    while (i < int(NUM_PARAMS) && entry[1].get<std::string>() != paramName(i))
      ++i;
    if (l >= spec.layers.size() || i == int(NUM_PARAMS) || !hasParam(spec.layers[l], i) ||
        seen[{l, i}])
      damaged(where + " names no new parameter of the network");
    seen[{l, i}] = true;
    const json &fields = dict(entry[2], where);
    const auto shape = paramShape(spec.layers[l], i);
    const std::string what = where + " (layer " + std::to_string(l) + " " + paramName(i) + ")";
    if (sgd && fields.empty()) // SGD without momentum keeps nothing
      continue;
    if (sgd) {
      if (fields.size() != 1)
        damaged(what + " must hold momentum_buffer only");
      paramValues(state.layers[l].first, i) =
          floats(field(fields, "momentum_buffer", what), shape, what + " momentum_buffer");
      state.steps = 1;
      continue;
    }
    if (fields.size() != 3)
      damaged(what + " must hold step, exp_avg and exp_avg_sq");
    const unsigned step = count(field(fields, "step", what), what + " step", 1);
    if (state.steps != 0 && step != state.steps)
      damaged(what + " has step " + std::to_string(step) + ", another entry " +
              std::to_string(state.steps) + " (popsnn keeps one step count)");
    state.steps = step;
    paramValues(state.layers[l].first, i) =
        floats(field(fields, "exp_avg", what), shape, what + " exp_avg");
    paramValues(state.layers[l].second, i) =
        floats(field(fields, "exp_avg_sq", what), shape, what + " exp_avg_sq");
    for (float v : paramValues(state.layers[l].second, i))
      if (v < 0)
        damaged(what + " exp_avg_sq holds a negative value");
  }
  std::size_t params = 0;
  for (const LayerSpec &s : spec.layers)
    for (int i = 0; i < int(NUM_PARAMS); ++i)
      params += hasParam(s, i);
  if (!entries.empty() && seen.size() != params)
    damaged("the optimizer state covers " + std::to_string(seen.size()) + " of the " +
            std::to_string(params) + " parameters");
  // Plain SGD has no state on the engine (a saved momentum buffer would never be read).
  ckpt.hasOptimizerState = state.steps != 0 && !(sgd && spec.optimizer.momentum == 0);
  if (!ckpt.hasOptimizerState)
    state = OptimizerState{};
}

// "optimizer": null or {"name": "adam", "hyper": {...}, "state": [...]}.
void Reader::optimizer(const json &opt, Checkpoint &ckpt) {
  if (opt.is_null())
    return;
  const json &d = dict(opt, "optimizer");
  if (d.size() != 3)
    damaged("optimizer must hold name, hyper and state");
  ckpt.spec.optimizer.kind = name(field(d, "name", "optimizer"), "optimizer name", kOptimizerNames);
  ckpt.optimizerStateKind = ckpt.spec.optimizer.kind;
  optimizerHyper(dict(field(d, "hyper", "optimizer"), "optimizer hyper"), ckpt.spec.optimizer);
  optimizerEntries(list(field(d, "state", "optimizer"), "optimizer state"), ckpt);
}

// "config": null or popsnn train's options; the ones a Network needs are taken when present.
void Reader::config(const json &config, NetworkSpec &spec) {
  if (config.is_null())
    return;
  const json &d = dict(config, "config");
  if (d.contains("num_steps"))
    spec.numSteps = count(d["num_steps"], "config num_steps", 1);
  if (d.contains("batch_size"))
    spec.batchSize = count(d["batch_size"], "config batch_size", 1);
  if (d.contains("loss"))
    spec.loss.kind = name(d["loss"], "config loss", kLossNames);
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw CheckpointError("checkpoint " + path +
                          " cannot be opened: pass the .npz file written by "
                          "popsnn.checkpoint.save (a training run's <output>/checkpoint.npz)");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad())
    throw CheckpointError("checkpoint " + path + " cannot be read: check the disk and the file");
  return bytes.str();
}

} // namespace

Checkpoint loadCheckpoint(const std::string &path) {
  Reader r{path, {}};
  const std::string bytes = readFile(path);
  try {
    r.arrays = npz::read(bytes);
  } catch (const npz::Error &err) {
    r.damaged(std::string("not a readable .npz (") + err.what() + ")");
  }
  const json meta = r.metadata();
  Checkpoint ckpt;
  ckpt.path = path;
  ckpt.epoch = r.count(r.field(meta, "epoch", "the metadata"), "epoch", 0);
  r.network(r.field(meta, "network", "the metadata"), ckpt.spec);
  r.config(r.field(meta, "config", "the metadata"), ckpt.spec);
  r.optimizer(r.field(meta, "optimizer", "the metadata"), ckpt);
  try {
    ckpt.spec.validate();
  } catch (const std::invalid_argument &err) {
    r.damaged(std::string("its network or optimiser is invalid (") + err.what() + ")");
  }
  r.layerParams(r.field(meta, "params", "the metadata"), ckpt.spec, ckpt.params);
  return ckpt;
}

std::unique_ptr<Network> Checkpoint::makeNetwork(const DeviceSpec &device,
                                                 OverflowPolicy onOverflow) const {
  auto net = std::make_unique<Network>(spec, device, onOverflow);
  net->setParams(params);
  if (hasOptimizerState && spec.optimizer.kind == optimizerStateKind)
    net->setOptimizerState(optimizerState);
  return net;
}

} // namespace popsnn
