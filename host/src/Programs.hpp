// The programs room: the BSP sequence of compute and exchange phases of inference and of
// a training step, and the host's streams to the device's tensors.
//
// Programs, the batch in one piece: 0 forward, 1 loss + backward + optimiser, 2 loss +
// backward (gradients only). The batch in chunks: 0 forward of every chunk, 1 forward +
// backward of every chunk (the gradients summed), 2 the optimiser step.
#pragma once

#include <poplar/Engine.hpp>
#include <poplar/Program.hpp>

#include <map>
#include <string>
#include <vector>

#include "Exchange.hpp"
#include "GraphBuild.hpp"
#include "VertexWiring.hpp"

namespace popsnn {

std::vector<poplar::program::Program> buildPrograms(GraphBuild &b, const ComputeSets &cs,
                                                    const CopyList &firstChunkGrads);

// Host reads and writes: x, labels, sample weights, learning rate, loss and spikes, and per
// shard its overflow counters, parameters, gradients and optimiser state (ParamLayout.cpp
// names them the same way).
void createHostStreams(GraphBuild &b);

#ifndef POPSNN_USE_POPLAR_SDK
// `out` with each program's MEASURED wall-clock time on this CPU (popsnn runtime extension):
// program{k}_runs, program{k}_seconds (summed), program{k}_last_seconds, program{k}_cpu_seconds
// (the process's CPU time in them, summed). A benchmark reads the backward's own time from
// them (program 2, unchunked) instead of a difference of two calls.
std::map<std::string, double> withProgramTimes(const poplar::Engine &engine,
                                               std::map<std::string, double> out);
#endif

} // namespace popsnn
