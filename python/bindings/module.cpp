// popsnn._native: the thin binding of the host library. Everything heavy
// happens in C++; Python sees NumPy arrays in and out.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "GraphBuild.hpp" // the builder's planner and its memory count (host/src), for tests
#include "Plan.hpp"
#include "popsnn/Checkpoint.hpp"
#include "popsnn/Names.hpp"
#include "popsnn/Network.hpp"
#include "popsnn/version.hpp"

namespace py = pybind11;

void bindConvStage(py::module_ &m); // conv_stage.cpp

namespace {

// The enums' names (popsnn/Names.hpp).
using popsnn::kInputNames;
using popsnn::kLossNames;
using popsnn::kNeuronNames;
using popsnn::kOptimizerNames;
using popsnn::kResetNames;
using popsnn::kSparseRuleNames;
using popsnn::kSurrogateNames;
using popsnn::nameOf;
using popsnn::Names;

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using IntArray = py::array_t<int, py::array::c_style | py::array::forcecast>;
using ByteArray = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>;

// x as the engine takes it: uint8 or bool as bytes (listed without a float copy), other real
// numbers as float32; anything else is refused in one line.
struct InputArray {
  py::array held;
  bool bytes = false;
  popsnn::InputBatch batch() const {
    if (bytes)
      return static_cast<const std::uint8_t *>(held.data());
    return static_cast<const float *>(held.data());
  }
};

InputArray inputArray(const py::array &x) {
  const char kind = x.dtype().kind();
  const bool real = kind == 'b' || kind == 'f' || kind == 'i' || kind == 'u';
  InputArray in;
  in.bytes = kind == 'b' || (kind == 'u' && x.itemsize() == 1);
  if (real)
    in.held = in.bytes ? py::array(ByteArray::ensure(x)) : py::array(FloatArray::ensure(x));
  if (!real || !in.held)
    throw py::type_error("x must hold real numbers (float32, or uint8 spikes and counts), got "
                         "dtype " +
                         py::str(x.dtype()).cast<std::string>());
  return in;
}

template <typename T> T get(const py::dict &d, const char *key, T fallback) {
  return d.contains(key) ? d[key].cast<T>() : fallback;
}

template <typename E>
E choose(const std::string &what, const std::string &value, const Names<E> &options) {
  std::string names;
  for (const auto &o : options) {
    if (value == o.first)
      return o.second;
    names += std::string(names.empty() ? "" : ", ") + "'" + o.first + "'";
  }
  throw std::invalid_argument(what + " must be one of " + names + ", got '" + value + "'");
}

// A neuron constant given as one number or one per neuron (a 1-D array or list).
void readConstant(const py::dict &l, const char *key, float &scalar, std::vector<float> &values) {
  if (!l.contains(key))
    return;
  FloatArray a = l[key].cast<FloatArray>();
  if (a.ndim() == 0)
    scalar = a.data()[0];
  else
    values.assign(a.data(), a.data() + a.size());
}

// Fields missing from the dict keep the C++ structs' defaults (NetworkSpec.hpp): one source.
popsnn::NetworkSpec specFromDict(const py::dict &d) {
  using namespace popsnn;
  NetworkSpec spec;
  for (auto item : d["layers"].cast<py::list>()) {
    py::dict l = item.cast<py::dict>();
    LayerSpec s;
    s.inputs = l["inputs"].cast<unsigned>();
    s.outputs = l["outputs"].cast<unsigned>();
    s.bias = get<bool>(l, "bias", s.bias);
    s.neuron = choose("neuron", l["neuron"].cast<std::string>(), kNeuronNames);
    s.allToAll = get<bool>(l, "all_to_all", s.allToAll);
    readConstant(l, "beta", s.beta, s.betas);
    readConstant(l, "alpha", s.alpha, s.alphas);
    s.gain = get<float>(l, "gain", s.gain);
    readConstant(l, "threshold", s.threshold, s.thresholds);
    s.learnBeta = get<bool>(l, "learn_beta", s.learnBeta);
    s.learnThreshold = get<bool>(l, "learn_threshold", s.learnThreshold);
    s.reset = choose("reset_mechanism", get<std::string>(l, "reset", nameOf(s.reset, kResetNames)),
                     kResetNames);
    s.surrogate =
        choose("surrogate", get<std::string>(l, "surrogate", nameOf(s.surrogate, kSurrogateNames)),
               kSurrogateNames);
    s.surrogateParam = get<float>(l, "surrogate_param", s.surrogateParam);
    s.sparseRule =
        choose("sparse rule", get<std::string>(l, "sparse", nameOf(s.sparseRule, kSparseRuleNames)),
               kSparseRuleNames);
    s.sparseValue = get<float>(l, "sparse_value", s.sparseValue);
    spec.layers.push_back(s);
  }
  py::dict loss = d["loss"].cast<py::dict>();
  spec.loss.kind = choose("loss", loss["name"].cast<std::string>(), kLossNames);
  spec.loss.numClasses = get<unsigned>(loss, "num_classes", spec.loss.numClasses);
  spec.loss.correctRate = get<double>(loss, "correct_rate", spec.loss.correctRate);
  spec.loss.incorrectRate = get<double>(loss, "incorrect_rate", spec.loss.incorrectRate);
  spec.loss.onTarget = get<float>(loss, "on_target", spec.loss.onTarget);
  spec.loss.offTarget = get<float>(loss, "off_target", spec.loss.offTarget);
  py::dict opt = d["optimizer"].cast<py::dict>();
  OptimizerSpec &o = spec.optimizer;
  o.kind = choose("optimizer", opt["name"].cast<std::string>(), kOptimizerNames);
  o.lr = get<double>(opt, "lr", o.lr);
  o.momentum = get<double>(opt, "momentum", o.momentum);
  o.dampening = get<double>(opt, "dampening", o.dampening);
  o.nesterov = get<bool>(opt, "nesterov", o.nesterov);
  o.weightDecay = get<double>(opt, "weight_decay", o.weightDecay);
  o.beta1 = get<double>(opt, "beta1", o.beta1);
  o.beta2 = get<double>(opt, "beta2", o.beta2);
  o.eps = get<double>(opt, "eps", o.eps);
  spec.batchSize = d["batch_size"].cast<unsigned>();
  spec.numSteps = d["num_steps"].cast<unsigned>();
  spec.input =
      choose("input", get<std::string>(d, "input", nameOf(spec.input, kInputNames)), kInputNames);
  spec.maxActivity = get<float>(d, "max_activity", spec.maxActivity);
  spec.traceActivity = get<float>(d, "trace_activity", spec.traceActivity);
  spec.inputActivity = get<float>(d, "input_activity", spec.inputActivity);
  spec.spikeActivity = get<float>(d, "spike_activity", spec.spikeActivity);
  spec.gradListActivity = get<float>(d, "grad_list_activity", spec.gradListActivity);
  spec.sparseBackwardMaxLive =
      get<float>(d, "sparse_backward_max_live", spec.sparseBackwardMaxLive);
  spec.inputGrad = get<bool>(d, "input_grad", spec.inputGrad);
  spec.halfStorage = get<std::string>(d, "dtype", "float32") == "float16";
  return spec;
}

// The C++ defaults under Python's names, for the test that keeps popsnn.defaults equal to them.
py::dict defaultsDict() {
  using namespace popsnn;
  const LayerSpec l;
  const LossSpec loss;
  const OptimizerSpec o;
  const NetworkSpec n;
  py::dict neuron, lossD, opt, run;
  neuron["bias"] = l.bias;
  neuron["all_to_all"] = l.allToAll;
  neuron["beta"] = l.beta;
  neuron["alpha"] = l.alpha;
  neuron["threshold"] = l.threshold;
  neuron["reset_mechanism"] = nameOf(l.reset, kResetNames);
  neuron["surrogate"] = nameOf(l.surrogate, kSurrogateNames);
  neuron["surrogate_param"] = l.surrogateParam;
  neuron["sparse"] = nameOf(l.sparseRule, kSparseRuleNames);
  neuron["sparse_value"] = l.sparseValue;
  lossD["name"] = nameOf(loss.kind, kLossNames);
  lossD["correct_rate"] = loss.correctRate;
  lossD["incorrect_rate"] = loss.incorrectRate;
  lossD["on_target"] = loss.onTarget;
  lossD["off_target"] = loss.offTarget;
  opt["name"] = nameOf(o.kind, kOptimizerNames);
  opt["lr"] = o.lr;
  opt["momentum"] = o.momentum;
  opt["dampening"] = o.dampening;
  opt["nesterov"] = o.nesterov;
  opt["weight_decay"] = o.weightDecay;
  opt["beta1"] = o.beta1;
  opt["beta2"] = o.beta2;
  opt["eps"] = o.eps;
  run["batch_size"] = n.batchSize;
  run["num_steps"] = n.numSteps;
  run["max_activity"] = n.maxActivity;
  run["trace_activity"] = n.traceActivity;
  run["spike_activity"] = n.spikeActivity;
  run["grad_list_activity"] = n.gradListActivity;
  run["sparse_backward_max_live"] = n.sparseBackwardMaxLive;
  py::dict out;
  out["neuron"] = neuron;
  out["loss"] = lossD;
  out["optimizer"] = opt;
  out["run"] = run;
  return out;
}

constexpr int kNumParams = 6;
const char *kParamNames[kNumParams] = {"weight",         "bias", "recurrent_weight",
                                       "recurrent_bias", "beta", "threshold"};

std::vector<float> *member(popsnn::LayerParams &p, int i) {
  switch (i) {
  case 0:
    return &p.weight;
  case 1:
    return &p.bias;
  case 2:
    return &p.recurrentWeight;
  case 3:
    return &p.recurrentBias;
  case 4:
    return &p.beta;
  default:
    return &p.threshold;
  }
}

// v's storage handed to NumPy without a copy: the array owns the vector moved into it.
py::array_t<float> ownedArray(std::vector<float> &&v, const std::vector<py::ssize_t> &shape) {
  auto *owned = new std::vector<float>(std::move(v));
  py::capsule release(owned, [](void *q) { delete static_cast<std::vector<float> *>(q); });
  return py::array_t<float>(shape, owned->data(), release);
}

// Layer parameters <-> a dict of arrays in PyTorch's layout (p's vectors moved into them).
py::dict toDict(const popsnn::NetworkSpec &spec, unsigned l, popsnn::LayerParams &p) {
  const auto &s = spec.layers[l];
  py::dict out;
  for (int i = 0; i < kNumParams; ++i) {
    std::vector<float> &v = *member(p, i);
    if (v.empty())
      continue;
    std::vector<py::ssize_t> shape;
    const bool layerWide = (i == 4 && s.betas.empty()) || (i == 5 && s.thresholds.empty());
    if (layerWide) // a learned constant given once per layer: shape []
      shape = {};
    else if (i == 0)
      shape = {py::ssize_t(s.outputs), py::ssize_t(s.inputs)};
    else if (i == 2 && s.allToAll)
      shape = {py::ssize_t(s.outputs), py::ssize_t(s.outputs)};
    else
      shape = {py::ssize_t(s.outputs)};
    out[kParamNames[i]] = ownedArray(std::move(v), shape);
  }
  return out;
}

popsnn::LayerParams fromDict(const py::dict &d) {
  popsnn::LayerParams p;
  for (int i = 0; i < kNumParams; ++i) {
    if (!d.contains(kParamNames[i]))
      continue;
    FloatArray a = d[kParamNames[i]].cast<FloatArray>();
    member(p, i)->assign(a.data(), a.data() + a.size());
  }
  return p;
}

py::list paramsToList(const popsnn::NetworkSpec &spec, std::vector<popsnn::LayerParams> &ps) {
  py::list out;
  for (unsigned l = 0; l < ps.size(); ++l)
    out.append(toDict(spec, l, ps[l]));
  return out;
}

std::vector<popsnn::LayerParams> paramsFromList(const py::list &list) {
  std::vector<popsnn::LayerParams> out;
  for (auto item : list)
    out.push_back(fromDict(item.cast<py::dict>()));
  return out;
}

void checkSize(const char *name, std::size_t got, std::size_t expected, const std::string &shape) {
  if (got != expected)
    throw std::invalid_argument(std::string(name) + " has " + std::to_string(got) +
                                " elements, the compiled network expects " +
                                std::to_string(expected) + " (" + shape + ")");
}

struct PyNetwork {
  std::unique_ptr<popsnn::Network> net;

  std::size_t inputSize() const {
    const auto &s = net->spec();
    return std::size_t(s.input == popsnn::InputMode::Direct ? 1 : s.numSteps) * s.batchSize *
           s.layers[0].inputs;
  }
  py::array_t<float> newSpikes() const {
    const auto &s = net->spec();
    return py::array_t<float>(
        {py::ssize_t(s.numSteps), py::ssize_t(s.batchSize), py::ssize_t(s.layers.back().outputs)});
  }
  void checkInputs(const InputArray &x, const IntArray *labels) const {
    checkSize("x", std::size_t(x.held.size()), inputSize(), "the padded batch");
    if (labels)
      checkSize("labels", labels->size(), net->spec().batchSize, "one per sample");
  }
};

// The planner's decisions for a spec on a target of `tiles` tiles: no graph is built.
py::dict planToDict(const py::dict &spec, unsigned tiles, bool ipu, bool stepMajor, unsigned spread,
                    unsigned chunks) {
  popsnn::NetworkSpec s = specFromDict(spec);
  s.validate();
  popsnn::TargetGeometry target;
  target.numTiles = tiles;
  target.ipu = ipu;
  const popsnn::Plan plan = popsnn::planNetwork(s, target, {stepMajor, spread, chunks});
  py::list layers;
  for (const auto &l : plan.layers) {
    py::list shards;
    for (const auto &sh : l.shards)
      shards.append(py::make_tuple(sh.tile, sh.first, sh.size, sh.capacity));
    py::dict d;
    d["shard_size"] = l.shardSize;
    d["stride"] = l.stride;
    d["push"] = l.push;
    d["compressed_trace"] = l.compressedTrace;
    d["input_mode"] = l.inputMode;
    d["shards"] = shards;
    layers.append(d);
  }
  py::list groups;
  for (const auto &g : plan.lossGroups)
    groups.append(py::make_tuple(g.first, g.last, g.tile));
  py::dict out;
  out["layers"] = layers;
  out["loss_groups"] = groups;
  out["loss_tile"] = plan.lossTile;
  out["chunk_batch"] = plan.chunkBatch;
  out["fused_weight_step"] = plan.fusedWeightStep;
  out["num_classes"] = plan.numClasses;
  // Bytes of popsnn's tensors per tile, counted without a graph.
  py::list tileBytes;
  for (const auto &perLayer : popsnn::countTensorBytes(s, plan).tileLayerBytes) {
    std::uint64_t total = 0;
    for (std::uint64_t bytes : perLayer)
      total += bytes;
    tileBytes.append(total);
  }
  out["tile_bytes"] = tileBytes;
  return out;
}

// The C++ checkpoint reader's result (popsnn/Checkpoint.hpp), for the tests that compare
// it with Python's reader and fuzz it.
py::dict checkpointToDict(const std::string &path) {
  popsnn::Checkpoint c = popsnn::loadCheckpoint(path);
  py::list layers;
  for (const auto &l : c.spec.layers) {
    py::dict d;
    d["inputs"] = l.inputs;
    d["outputs"] = l.outputs;
    d["neuron"] = nameOf(l.neuron, kNeuronNames);
    d["beta"] = l.beta;
    d["gain"] = l.gain;
    d["threshold"] = l.threshold;
    d["betas"] = l.betas; // one per neuron where given (docs/numerics.md section 2)
    d["alphas"] = l.alphas;
    d["thresholds"] = l.thresholds;
    d["learn_beta"] = l.learnBeta;
    d["learn_threshold"] = l.learnThreshold;
    layers.append(d);
  }
  py::dict out;
  out["epoch"] = c.epoch;
  out["layers"] = layers;
  out["num_steps"] = c.spec.numSteps;
  out["batch_size"] = c.spec.batchSize;
  out["loss"] = nameOf(c.spec.loss.kind, kLossNames);
  out["optimizer"] = nameOf(c.spec.optimizer.kind, kOptimizerNames);
  out["lr"] = c.spec.optimizer.lr;
  out["params"] = paramsToList(c.spec, c.params);
  out["optimizer_state"] = py::none();
  if (c.hasOptimizerState) {
    py::list first, second;
    for (unsigned l = 0; l < c.optimizerState.layers.size(); ++l) {
      first.append(toDict(c.spec, l, c.optimizerState.layers[l].first));
      second.append(toDict(c.spec, l, c.optimizerState.layers[l].second));
    }
    out["optimizer_state"] = py::make_tuple(c.optimizerState.steps, first, second);
  }
  return out;
}

} // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "popsnn native extension (host graph builder and Poplar-compatible runtime)";
  m.def("version", &popsnn::version, "Version of the C++ host library.");
  m.def("plan", &planToDict, "The graph builder's plan of a spec (no graph is built).",
        py::arg("spec"), py::arg("tiles"), py::arg("ipu") = false, py::arg("step_major") = false,
        py::arg("spread") = 1u, py::arg("chunks") = 1u);
  bindConvStage(m);
  m.def("defaults", &defaultsDict, "The C++ spec's defaults (NetworkSpec.hpp) by Python name.");
  m.def("load_checkpoint", &checkpointToDict,
        "A checkpoint read by the C++ API (ValueError if bad).", py::arg("path"));

  static py::exception<popsnn::SpikeBufferOverflow> overflowError(m, "SpikeBufferOverflow",
                                                                  PyExc_RuntimeError);
  static py::exception<popsnn::NetworkDoesNotFit> fitError(m, "NetworkDoesNotFit",
                                                           PyExc_MemoryError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const popsnn::SpikeBufferOverflow &e) {
      // The numbers travel as attributes, so callers can act on them.
      py::object cls = overflowError;
      py::object value = cls(py::str(e.what()));
      value.attr("layer") = e.layer;
      value.attr("step") = e.step;
      value.attr("needed") = e.needed;
      value.attr("capacity") = e.capacity;
      PyErr_SetObject(overflowError.ptr(), value.ptr());
    } catch (const popsnn::NetworkDoesNotFit &e) {
      py::set_error(fitError, e.what());
    }
  });

  py::class_<PyNetwork>(m, "Network", "A spiking network compiled into one Poplar engine.")
      .def(py::init([](const py::dict &spec, const py::dict &device, const std::string &overflow) {
             popsnn::DeviceSpec dev;
             dev.type = get<std::string>(device, "type", "cpu");
             dev.numIPUs = get<unsigned>(device, "num_ipus", 1u);
             dev.tilesPerIPU = get<unsigned>(device, "tiles_per_ipu", 0u);
             dev.memoryBytesPerTile = get<unsigned>(device, "memory_bytes_per_tile", 0u);
             dev.codeletsPath = get<std::string>(device, "codelets", "");
             auto policy = choose<popsnn::OverflowPolicy>("on_overflow", overflow,
                                                          {{"error", popsnn::OverflowPolicy::Error},
                                                           {"grow", popsnn::OverflowPolicy::Grow}});
             popsnn::NetworkSpec s = specFromDict(spec);
             PyNetwork n;
             py::gil_scoped_release release;
             n.net = std::make_unique<popsnn::Network>(s, dev, policy);
             return n;
           }),
           py::arg("spec"), py::arg("device"), py::arg("on_overflow") = "error")
      .def(
          "train_step",
          [](PyNetwork &self, const py::array &array, IntArray labels, unsigned valid) {
            const InputArray x = inputArray(array);
            self.checkInputs(x, &labels);
            auto spikes = self.newSpikes();
            float *out = spikes.mutable_data();
            float loss;
            {
              py::gil_scoped_release release;
              loss = self.net->trainStep(x.batch(), labels.data(), valid, out);
            }
            return py::make_tuple(loss, spikes);
          },
          "x, labels, valid -> (loss, output spikes [T, B, C])")
      .def(
          "loss_and_grad",
          [](PyNetwork &self, const py::array &array, IntArray labels, unsigned valid) {
            const InputArray x = inputArray(array);
            self.checkInputs(x, &labels);
            auto spikes = self.newSpikes();
            float *out = spikes.mutable_data();
            std::vector<popsnn::LayerParams> grads;
            float loss;
            {
              py::gil_scoped_release release;
              loss = self.net->lossAndGrad(x.batch(), labels.data(), valid, grads, out);
            }
            return py::make_tuple(loss, paramsToList(self.net->spec(), grads), spikes);
          },
          "x, labels, valid -> (loss, grads, output spikes)")
      .def(
          "loss_and_input_grad",
          [](PyNetwork &self, const py::array &array, IntArray labels, unsigned valid) {
            const InputArray x = inputArray(array);
            self.checkInputs(x, &labels);
            auto spikes = self.newSpikes();
            const popsnn::NetworkSpec &spec = self.net->spec();
            std::vector<py::ssize_t> shape{py::ssize_t(spec.batchSize),
                                           py::ssize_t(spec.layers[0].inputs)};
            if (spec.input != popsnn::InputMode::Direct)
              shape.insert(shape.begin(), py::ssize_t(spec.numSteps));
            py::array_t<float> dx(shape);
            float *out = spikes.mutable_data(), *dxOut = dx.mutable_data();
            std::vector<popsnn::LayerParams> grads;
            float loss;
            {
              py::gil_scoped_release release;
              loss = self.net->lossAndGrad(x.batch(), labels.data(), valid, grads, out, dxOut);
            }
            return py::make_tuple(loss, paramsToList(spec, grads), spikes, dx);
          },
          "x, labels, valid -> (loss, grads, output spikes, dL/dx shaped as x)")
      .def("infer",
           [](PyNetwork &self, const py::array &array) {
             const InputArray x = inputArray(array);
             self.checkInputs(x, nullptr);
             auto spikes = self.newSpikes();
             float *out = spikes.mutable_data();
             {
               py::gil_scoped_release release;
               self.net->infer(x.batch(), out);
             }
             return spikes;
           })
      .def("get_params",
           [](PyNetwork &self) {
             std::vector<popsnn::LayerParams> ps;
             {
               py::gil_scoped_release release;
               ps = self.net->getParams();
             }
             return paramsToList(self.net->spec(), ps);
           })
      .def("set_params",
           [](PyNetwork &self, const py::list &params) {
             auto ps = paramsFromList(params);
             py::gil_scoped_release release;
             self.net->setParams(ps);
           })
      .def("get_optimizer_state",
           [](PyNetwork &self) {
             popsnn::OptimizerState st;
             {
               py::gil_scoped_release release;
               st = self.net->getOptimizerState();
             }
             py::list first, second;
             for (unsigned l = 0; l < st.layers.size(); ++l) {
               first.append(toDict(self.net->spec(), l, st.layers[l].first));
               second.append(toDict(self.net->spec(), l, st.layers[l].second));
             }
             return py::make_tuple(st.steps, first, second);
           })
      .def("set_optimizer_state",
           [](PyNetwork &self, unsigned steps, const py::list &first, const py::list &second) {
             popsnn::OptimizerState st;
             st.steps = steps;
             auto f = paramsFromList(first), s = paramsFromList(second);
             for (std::size_t l = 0; l < f.size(); ++l)
               st.layers.push_back({f[l], l < s.size() ? s[l] : popsnn::LayerParams{}});
             py::gil_scoped_release release;
             self.net->setOptimizerState(st);
           })
      .def(
          "set_learning_rate",
          [](PyNetwork &self, double lr) {
            py::gil_scoped_release release;
            self.net->setLearningRate(lr);
          },
          py::arg("lr"),
          "The optimiser's learning rate from the next step on (a host write, no recompile).")
      .def_property_readonly("learning_rate",
                             [](PyNetwork &self) { return self.net->learningRate(); })
      .def(
          "set_loss_scale",
          [](PyNetwork &self, float scale) {
            py::gil_scoped_release release;
            self.net->setLossScale(scale);
          },
          py::arg("scale"),
          "dtype float16: the loss scale from the next step on (a host write, no recompile).")
      .def_property_readonly("loss_scale", [](PyNetwork &self) { return self.net->lossScale(); })
      .def_property_readonly(
          "last_step_applied", [](PyNetwork &self) { return self.net->lastStepApplied(); },
          "False when the last train_step's gradients held inf or NaN and its update was skipped")
      .def("profile", [](PyNetwork &self) { return self.net->profileEstimate(); })
      .def("profile_summary", [](PyNetwork &self) { return self.net->profileSummary(); })
      .def("layout", [](PyNetwork &self) { return self.net->layout(); });
}
