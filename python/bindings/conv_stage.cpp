// popsnn._native.conv_plan / conv_stage: a convolutional stage's planner and its ops run on
// the device's tiles (host/src/ConvPlan.hpp, ConvStage.hpp), for tests and benchmarks.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "ConvStage.hpp"

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

popsnn::ConvStageSpec stageFromDict(const py::dict &d) {
  popsnn::ConvStageSpec s;
  s.rows = d["rows"].cast<unsigned>();
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
  return out;
}

void expectSize(const char *name, const FloatArray &a, std::size_t n) {
  if (std::size_t(a.size()) != n)
    throw std::invalid_argument(std::string(name) + " has " + std::to_string(a.size()) +
                                " elements, the stage needs " + std::to_string(n));
}

py::dict runStage(const py::dict &spec, const FloatArray &x, const FloatArray &weight,
                  const py::object &bias, const py::object &gradCurrent, const py::dict &device) {
  const popsnn::ConvStageSpec s = stageFromDict(spec);
  popsnn::DeviceSpec dev;
  dev.type = device.contains("type") ? device["type"].cast<std::string>() : "cpu";
  dev.numIPUs = device.contains("num_ipus") ? device["num_ipus"].cast<unsigned>() : 1u;
  dev.tilesPerIPU =
      device.contains("tiles_per_ipu") ? device["tiles_per_ipu"].cast<unsigned>() : 0u;
  dev.memoryBytesPerTile = device.contains("memory_bytes_per_tile")
                               ? device["memory_bytes_per_tile"].cast<unsigned>()
                               : 0u;
  dev.codeletsPath = device.contains("codelets") ? device["codelets"].cast<std::string>() : "";
  const std::size_t taps = std::size_t(s.inChannels) * s.conv.kernelH * s.conv.kernelW;
  expectSize("x", x, std::size_t(s.rows) * s.inChannels * s.inHeight * s.inWidth);
  expectSize("weight", weight, s.outChannels * taps);
  FloatArray b, g;
  if (!bias.is_none()) {
    b = bias.cast<FloatArray>();
    expectSize("bias", b, s.outChannels);
  }
  if (!gradCurrent.is_none()) {
    g = gradCurrent.cast<FloatArray>();
    const popsnn::MapSize out = popsnn::stageMapSizes(s).back();
    expectSize("grad_current", g, std::size_t(s.rows) * s.outChannels * out.h * out.w);
  }
  popsnn::ConvStageResult r;
  {
    py::gil_scoped_release release;
    r = popsnn::runConvStage(s, dev, x.data(), weight.data(), bias.is_none() ? nullptr : b.data(),
                             gradCurrent.is_none() ? nullptr : g.data());
  }
  const auto array = [](const std::vector<float> &v) {
    return py::array_t<float>(v.size(), v.data());
  };
  py::dict out;
  out["plan"] = planDict(r.plan);
  out["current"] = array(r.current);
  out["dense_rows"] = r.denseRows;
  out["estimate"] = r.estimate;
  if (!gradCurrent.is_none()) {
    out["grad_weight"] = array(r.gradWeight);
    out["grad_bias"] = array(r.gradBias);
    out["active_grads"] = r.activeGrads;
    if (s.inputGrad)
      out["grad_input"] = array(r.gradInput);
  }
  return out;
}

} // namespace

void bindConvStage(py::module_ &m) {
  m.def(
      "conv_plan",
      [](const py::dict &spec, unsigned tiles, std::uint64_t bytesPerTile) {
        popsnn::TargetGeometry target;
        target.numTiles = tiles;
        return planDict(popsnn::planConvStage(stageFromDict(spec), target, bytesPerTile));
      },
      "The planner's layout of a convolutional stage (no graph is built).", py::arg("spec"),
      py::arg("tiles"), py::arg("bytes_per_tile") = 0);
  m.def("conv_stage", &runStage,
        "A convolutional stage's ops run on the device: current, and gradients from dL/dI.",
        py::arg("spec"), py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(),
        py::arg("grad_current") = py::none(), py::arg("device") = py::dict());
}
