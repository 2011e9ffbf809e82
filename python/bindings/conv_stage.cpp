// popsnn._native.conv_plan / conv_stage: a convolutional stage's planner and its ops run on
// the device's tiles (host/src/ConvPlan.hpp, ConvStage.hpp), for tests and benchmarks.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "ConvNetwork.hpp"
#include "ConvStage.hpp"
#include "popsnn/Names.hpp"

namespace py = pybind11;

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

popsnn::Window2d windowFromDict(const py::dict &d) {
  const auto pair = [&](const char *key, unsigned fallback) {
    if (!d.contains(key))
      return std::make_pair(fallback, fallback);
    const auto v = d[key].cast<std::pair<unsigned, unsigned>>();
    return v;
  };
  popsnn::Window2d w;
  std::tie(w.kernelH, w.kernelW) = pair("kernel_size", 1);
  std::tie(w.strideH, w.strideW) = pair("stride", 1);
  std::tie(w.padH, w.padW) = pair("padding", 0);
  return w;
}

// The position of `value` in a names table (the order of VertexEnums.hpp's codes).
template <typename E>
unsigned codeOf(const char *what, const std::string &value, const popsnn::Names<E> &names) {
  std::string options;
  for (unsigned k = 0; k < names.size(); ++k) {
    if (names[k].first == value)
      return k;
    options += (k ? ", '" : "'") + std::string(names[k].first) + "'";
  }
  throw std::invalid_argument(std::string(what) + " must be one of " + options + ", got '" + value +
                              "'");
}

// The stage's Leaky neurons, named as EngineBackend's layer specs name them.
popsnn::ConvNeuronSpec neuronFromDict(const py::dict &d) {
  popsnn::ConvNeuronSpec n;
  n.present = true;
  const auto text = [&](const char *key, const char *fallback) {
    return d.contains(key) ? d[key].cast<std::string>() : std::string(fallback);
  };
  const auto number = [&](const char *key, float fallback) {
    return d.contains(key) ? d[key].cast<float>() : fallback;
  };
  if (text("neuron", "Leaky") != "Leaky")
    throw std::invalid_argument("a convolutional stage on the engine takes Leaky neurons only, "
                                "got " +
                                text("neuron", "") + "; use device='reference'");
  n.reset = codeOf("reset", text("reset", "subtract"), popsnn::kResetNames);
  n.surrogate = codeOf("surrogate", text("surrogate", "fast_sigmoid"), popsnn::kSurrogateNames);
  n.rule = codeOf("sparse", text("sparse", "none"), popsnn::kSparseRuleNames);
  n.beta = number("beta", 0.0f);
  n.threshold = number("threshold", 1.0f);
  n.surrogateParam = number("surrogate_param", 25.0f);
  n.ruleValue = number("sparse_value", 0.0f);
  return n;
}

popsnn::ConvStageSpec stageFromDict(const py::dict &d) {
  popsnn::ConvStageSpec s;
  s.rows = d["rows"].cast<unsigned>();
  s.steps = d.contains("steps") ? d["steps"].cast<unsigned>() : 1u;
  if (d.contains("neuron") && !d["neuron"].is_none())
    s.neuron = neuronFromDict(d["neuron"].cast<py::dict>());
  const auto in = d["in_shape"].cast<std::tuple<unsigned, unsigned, unsigned>>();
  std::tie(s.inChannels, s.inHeight, s.inWidth) = in;
  s.outChannels = d["out_channels"].cast<unsigned>();
  s.conv = windowFromDict(d["conv"].cast<py::dict>());
  s.inputGrad = d.contains("input_grad") && d["input_grad"].cast<bool>();
  if (d.contains("pools"))
    for (const py::handle &p : d["pools"]) {
      const py::dict pd = p.cast<py::dict>();
      const std::string kind = pd["kind"].cast<std::string>();
      if (kind != "max" && kind != "avg")
        throw std::invalid_argument("pool kind must be 'max' or 'avg', got '" + kind + "'");
      s.pools.push_back({kind == "max", windowFromDict(pd)});
    }
  return s;
}

py::dict planDict(const popsnn::ConvPlan &plan) {
  py::list shards;
  for (const auto &sh : plan.shards)
    shards.append(py::make_tuple(sh.tile, sh.firstChannel, sh.channels, sh.firstRow, sh.rows));
  py::list maps;
  for (const auto &m : plan.maps)
    maps.append(py::make_tuple(m.h, m.w));
  py::dict out;
  out["channel_groups"] = plan.channelGroups;
  out["row_groups"] = plan.rowGroups;
  out["shards"] = shards;
  out["maps"] = maps;
  out["tile_bytes"] = plan.tileBytes;
  out["workers"] = plan.workers;
  out["neuron_workers"] = plan.neuronWorkers;
  return out;
}

void expectSize(const char *name, const FloatArray &a, std::size_t n) {
  if (std::size_t(a.size()) != n)
    throw std::invalid_argument(std::string(name) + " has " + std::to_string(a.size()) +
                                " elements, the stage needs " + std::to_string(n));
}

FloatArray optionalArray(const py::object &a, const char *name, std::size_t n) {
  if (a.is_none())
    return FloatArray();
  FloatArray out = a.cast<FloatArray>();
  expectSize(name, out, n);
  return out;
}

py::dict resultDict(const popsnn::ConvStageSpec &s, const popsnn::ConvStageResult &r,
                    bool backward) {
  const auto array = [](const std::vector<float> &v) {
    return py::array_t<float>(v.size(), v.data());
  };
  py::dict out;
  out["plan"] = planDict(r.plan);
  out["output"] = array(r.output);
  out["dense_rows"] = r.denseRows;
  out["estimate"] = r.estimate;
  if (s.neuron.present)
    out["membranes"] = array(r.membranes);
  if (backward) {
    out["grad_weight"] = array(r.gradWeight);
    out["grad_bias"] = array(r.gradBias);
    out["active_grads"] = r.activeGrads;
    if (s.inputGrad) {
      out["grad_input"] = array(r.gradInput);
      out["input_grad_dense_rows"] = r.inputGradDenseRows;
    }
  }
  return out;
}

popsnn::DeviceSpec deviceFromDict(const py::dict &device) {
  popsnn::DeviceSpec dev;
  const auto option = [&](const char *key, unsigned fallback) {
    return device.contains(key) ? device[key].cast<unsigned>() : fallback;
  };
  dev.type = device.contains("type") ? device["type"].cast<std::string>() : "cpu";
  dev.numIPUs = option("num_ipus", 1u);
  dev.tilesPerIPU = option("tiles_per_ipu", 0u);
  dev.memoryBytesPerTile = option("memory_bytes_per_tile", 0u);
  dev.codeletsPath = device.contains("codelets") ? device["codelets"].cast<std::string>() : "";
  return dev;
}

py::dict runStage(const py::dict &spec, const FloatArray &x, const FloatArray &weight,
                  const py::object &bias, const py::object &gradOut,
                  const py::object &gradMembranes, const py::dict &device) {
  const popsnn::ConvStageSpec s = stageFromDict(spec);
  const popsnn::DeviceSpec dev = deviceFromDict(device);
  const std::size_t taps = std::size_t(s.inChannels) * s.conv.kernelH * s.conv.kernelW;
  expectSize("x", x, std::size_t(s.rows) * s.inChannels * s.inHeight * s.inWidth);
  expectSize("weight", weight, s.outChannels * taps);
  const popsnn::MapSize last = popsnn::stageMapSizes(s).back();
  const std::size_t outSize = std::size_t(s.rows) * s.outChannels * last.h * last.w;
  const FloatArray b = optionalArray(bias, "bias", s.outChannels);
  const FloatArray g = optionalArray(gradOut, "grad_out", outSize);
  const FloatArray gm = optionalArray(gradMembranes, "grad_membranes", outSize);
  if (!gradMembranes.is_none() && (gradOut.is_none() || !s.neuron.present))
    throw std::invalid_argument("grad_membranes needs grad_out and a stage with neurons");
  popsnn::ConvStageResult r;
  {
    py::gil_scoped_release release;
    r = popsnn::runConvStage(s, dev, x.data(), weight.data(), bias.is_none() ? nullptr : b.data(),
                             gradOut.is_none() ? nullptr : g.data(),
                             gradMembranes.is_none() ? nullptr : gm.data());
  }
  return resultDict(s, r, !gradOut.is_none());
}

py::array_t<float> asArray(const std::vector<float> &v) {
  return py::array_t<float>(v.size(), v.data());
}

// The network of stages, compiled once (host/src/ConvNetwork.hpp).
std::unique_ptr<popsnn::ConvNetwork> makeNetwork(const py::dict &spec, const py::dict &device) {
  popsnn::ConvNetworkSpec s;
  for (const py::handle &stage : spec["stages"])
    s.stages.push_back(stageFromDict(stage.cast<py::dict>()));
  if (spec.contains("input_activity"))
    s.inputActivity = spec["input_activity"].cast<std::vector<float>>();
  if (spec.contains("grad_activity"))
    s.gradActivity = spec["grad_activity"].cast<std::vector<float>>();
  // Direct input: the first stage's convolution once per sample (ConvStageSpec::direct).
  if (spec.contains("direct") && spec["direct"].cast<bool>() && !s.stages.empty())
    s.stages[0].direct = true;
  const popsnn::DeviceSpec dev = deviceFromDict(device);
  py::gil_scoped_release release;
  return std::make_unique<popsnn::ConvNetwork>(s, dev);
}

void bindConvNetwork(py::module_ &m) {
  py::class_<popsnn::ConvNetwork>(m, "ConvNetwork",
                                  "Convolutional stages in one graph: forward and backward.")
      .def(py::init(&makeNetwork), py::arg("spec"), py::arg("device") = py::dict())
      .def(
          "set_params",
          [](popsnn::ConvNetwork &n, unsigned stage, const FloatArray &w, const py::object &b) {
            const FloatArray bias = b.is_none() ? FloatArray() : b.cast<FloatArray>();
            n.setParams(stage, w.data(), b.is_none() ? nullptr : bias.data());
          },
          py::arg("stage"), py::arg("weight"), py::arg("bias") = py::none())
      .def(
          "forward",
          [](popsnn::ConvNetwork &n, const FloatArray &x, bool recordAll) {
            popsnn::ConvForwardResult r;
            {
              py::gil_scoped_release release;
              r = n.forward(x.data(), recordAll);
            }
            py::list spikes, membranes;
            for (unsigned k = 0; k < r.spikes.size(); ++k) {
              spikes.append(asArray(r.spikes[k]));
              membranes.append(asArray(r.membranes[k]));
            }
            return py::make_tuple(spikes, membranes, r.denseRows);
          },
          py::arg("x"), py::arg("record_all") = false)
      .def(
          "backward",
          [](popsnn::ConvNetwork &n, const FloatArray &gs, const py::object &gm) {
            const FloatArray mem = gm.is_none() ? FloatArray() : gm.cast<FloatArray>();
            popsnn::ConvBackwardResult r;
            {
              py::gil_scoped_release release;
              r = n.backward(gs.data(), gm.is_none() ? nullptr : mem.data());
            }
            py::list w, b;
            for (unsigned k = 0; k < r.gradWeight.size(); ++k) {
              w.append(asArray(r.gradWeight[k]));
              b.append(asArray(r.gradBias[k]));
            }
            return py::make_tuple(w, b, r.activeGrads, r.inputGradDenseRows);
          },
          py::arg("grad_spikes"), py::arg("grad_membranes") = py::none())
      .def_property_readonly("plans",
                             [](const popsnn::ConvNetwork &n) {
                               py::list out;
                               for (const auto &p : n.plans())
                                 out.append(planDict(p));
                               return out;
                             })
      .def("estimate", &popsnn::ConvNetwork::estimate);
}

} // namespace

void bindConvStage(py::module_ &m) {
  m.def(
      "conv_plan",
      [](const py::dict &spec, unsigned tiles, std::uint64_t bytesPerTile, unsigned workers) {
        popsnn::TargetGeometry target;
        target.numTiles = tiles;
        target.ipu = workers > 1, target.workers = workers; // workers > 1: an IPU's tiles
        return planDict(popsnn::planConvStage(stageFromDict(spec), target, bytesPerTile));
      },
      "The planner's layout of a convolutional stage (no graph is built).", py::arg("spec"),
      py::arg("tiles"), py::arg("bytes_per_tile") = 0, py::arg("workers") = 1);
  m.def("conv_stage", &runStage,
        "A convolutional stage run on the device: its output, and gradients from dL/d(output).",
        py::arg("spec"), py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(),
        py::arg("grad_out") = py::none(), py::arg("grad_membranes") = py::none(),
        py::arg("device") = py::dict());
  bindConvNetwork(m);
}
