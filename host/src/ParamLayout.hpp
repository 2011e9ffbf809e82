// The parameter-layout room: parameters, gradients and optimiser state between the
// device's layout (each shard's weight columns stored transposed, [in, n]) and PyTorch's
// (weight [out, in] row-major), through the host streams Programs.cpp creates. Callers
// validate first (Validation.hpp): these write without checking.
#pragma once

#include <poplar/Engine.hpp>

#include <string>
#include <vector>

#include "GraphBuild.hpp"

namespace popsnn {

// prefix: "param_r" (parameters) or "grad" (gradients).
std::vector<LayerParams> readParams(poplar::Engine &engine, const std::vector<Layer> &layers,
                                    const std::string &prefix = "param_r");
void writeParams(poplar::Engine &engine, const std::vector<Layer> &layers,
                 const std::vector<LayerParams> &params);
OptimizerState readOptimizerState(poplar::Engine &engine, const std::vector<Layer> &layers);
void writeOptimizerState(poplar::Engine &engine, const std::vector<Layer> &layers,
                         const OptimizerState &state);
// dL/dx of the batch the device last ran (Network::lossAndGrad's outInputGrad); the device's
// dL/dI divided by `lossScale` (half storage carries it scaled, numerics.md section 8).
void readInputGrad(poplar::Engine &engine, const NetworkSpec &spec, const Plan &plan,
                   const std::vector<Layer> &layers, float *dx, float lossScale = 1.0f);

} // namespace popsnn
