// Half storage (docs/numerics.md section 8) between the host and the device: the host's
// float32 values written into HALF tensors (rounded to nearest even) and read back, and the
// shards' non-finite gradient counts read before the optimiser runs.
#pragma once

#include <poplar/Engine.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "GraphBuild.hpp"

namespace popsnn {

// n floats into the host-writable tensor `handle`, stored as half when `half`.
void writeStored(poplar::Engine &engine, const std::string &handle, const float *values,
                 std::size_t n, bool half);
// n values of the host-readable tensor `handle` (half when `half`) as floats.
void readStored(poplar::Engine &engine, const std::string &handle, float *values, std::size_t n,
                bool half);
// Non-finite gradient entries over every shard (UnscaleGrads' counts, "non_finite<l>/<k>").
std::size_t readNonFinite(poplar::Engine &engine, const std::vector<Layer> &layers);

} // namespace popsnn
