// Layer-major: one layer's T steps run in one compute phase (its vertices loop over the
// steps with device-side step counters), then its whole id trace (forward) or dL/dI
// (backward) goes to the next layer in one exchange -- a handful of fat phases per training
// step. A layer with an all-to-all recurrence needs every shard's spikes of step t-1 before
// step t: it runs its steps one per phase in a Repeat, with an exchange in between.
// Step-major: a BSP round per layer and step; the backward re-sends each step's ids.
#include "Programs.hpp"

#include "popsnn/VertexEnums.hpp"

namespace popsnn {

using namespace poplar;
using namespace poplar::program;

namespace {

Sequence forwardStepMajor(const GraphBuild &b, const ComputeSets &cs) {
  const auto &layers = b.layers;
  const unsigned L = layers.size();
  Sequence oneStep;
  for (unsigned l = 0; l < L; ++l) {
    oneStep.add(Execute(cs.forward[l]));
    std::vector<CopyList> out;
    if (l + 1 < L)
      out.push_back(idCopies(b, layers[l], layers[l + 1], false, false));
    if (layers[l].a2a)
      out.push_back(idCopies(b, layers[l], layers[l], true, false));
    oneStep.add(merged(out));
  }
  return Sequence{Repeat(b.steps(), oneStep)};
}

Sequence forwardLayerMajor(const GraphBuild &b, const ComputeSets &cs) {
  const auto &layers = b.layers;
  const unsigned L = layers.size();
  Sequence forward;
  for (unsigned l = 0; l < L; ++l) {
    if (layers[l].a2a) {
      forward.add(
          Repeat(b.steps(), Sequence{Execute(cs.forward[l]),
                                     idCopies(b, layers[l], layers[l], true, false).program()}));
    } else {
      forward.add(Execute(cs.forward[l]));
    }
    if (layers[l].push)
      forward.add(Execute(cs.push[l]));
    std::vector<CopyList> out;
    if (layers[l].push)
      out.push_back(partialCopies(b, layers[l], layers[l + 1]));
    else if (l + 1 < L)
      out.push_back(idCopies(b, layers[l], layers[l + 1], false, false));
    if (layers[l].a2a)
      out.push_back(idCopies(b, layers[l], layers[l], false, true));
    forward.add(merged(out));
  }
  return forward;
}

// Each step starts with the id buffers its layers need (step t for the layer fed, t-1 for
// a recurrence), left there by the previous step's vertices or the forward.
Sequence backwardStepMajor(const GraphBuild &b, const ComputeSets &cs) {
  const auto &layers = b.layers;
  const unsigned L = layers.size();
  Sequence oneStep;
  std::vector<CopyList> ids;
  for (unsigned l = 0; l < L; ++l) {
    if (l + 1 < L)
      ids.push_back(idCopies(b, layers[l], layers[l + 1], false, false));
    if (layers[l].a2a)
      ids.push_back(idCopies(b, layers[l], layers[l], true, false, true));
  }
  oneStep.add(merged(ids));
  for (unsigned l = L; l-- > 0;) {
    oneStep.add(Execute(cs.backward[l]));
    std::vector<CopyList> grads;
    if (l > 0)
      grads.push_back(gradCopies(b, layers[l], layers[l - 1], false));
    if (layers[l].a2a)
      grads.push_back(gradCopies(b, layers[l], layers[l], true));
    oneStep.add(merged(grads));
  }
  if (!layers[0].shards[0].inputGradSteps.valid())
    return Sequence{Repeat(b.steps(), oneStep)};
  // The first layer's dL/dI of each step kept for the input gradient: the steps unrolled,
  // each followed by a copy into its step's slice (t = T-1 .. 0).
  Sequence steps;
  for (unsigned t = b.steps(); t-- > 0;) {
    steps.add(oneStep);
    CopyList keep;
    for (const Shard &sh : layers[0].shards) {
      const std::size_t size = sh.gradOut.numElements();
      keep.add(sh.gradOut, sh.inputGradSteps.slice(t * size, (t + 1) * size));
    }
    steps.add(keep.program());
  }
  return steps;
}

Sequence backwardLayerMajor(const GraphBuild &b, const ComputeSets &cs) {
  const auto &layers = b.layers;
  Sequence backward;
  for (unsigned l = layers.size(); l-- > 0;) {
    if (layers[l].a2a) {
      backward.add(
          Repeat(b.steps(), Sequence{Execute(cs.backward[l]),
                                     gradCopies(b, layers[l], layers[l], true).program()}));
    } else {
      backward.add(Execute(cs.backward[l]));
    }
    if (layers[l].push)
      backward.add(Execute(cs.pushGrads[l]));
    std::vector<CopyList> out;
    if (layers[l].push)
      out.push_back(pushedGradCopies(layers[l], layers[l + 1]));
    if (l > 0)
      out.push_back(gradCopies(b, layers[l], layers[l - 1], false));
    backward.add(merged(out));
  }
  return backward;
}

// The batch split into chunks: every chunk's forward (program 0), every chunk's forward
// and backward with its gradients summed (1), the optimiser step (2).
std::vector<Program> chunkedPrograms(GraphBuild &b, const ComputeSets &cs, const Sequence &forward,
                                     const Sequence &backward, const CopyList &fanout,
                                     const CopyList &firstChunkGrads) {
  const HostTensors &io = b.io;
  const unsigned Bc = b.batch();
  const std::size_t outSize = std::size_t(b.steps()) * Bc * b.plan.numOutputs;
  Sequence forwardAll, gradientsAll;
  for (unsigned m = 0; m < b.chunks(); ++m) {
    CopyList keep; // the chunk's output spikes and overflow counters, on their tiles
    keep.add(io.gatheredS, io.spikesAll.slice(m * outSize, (m + 1) * outSize));
    for (auto &layer : b.layers)
      for (auto &sh : layer.shards)
        keep.add(sh.overflow, sh.overflowAll.slice(m * codes::OVERFLOW_FIELDS,
                                                   (m + 1) * codes::OVERFLOW_FIELDS));
    const Program xIn = m == 0 ? merged({fanout, inputCopies(b, 0)}) : inputCopies(b, m).program();
    Sequence chunkForward{xIn, forward, keep.program()};
    CopyList chunkLabels;
    chunkLabels.add(io.labels.slice(m * Bc, (m + 1) * Bc), io.labelsChunk);
    chunkLabels.add(io.sampleWeights.slice(m * Bc, (m + 1) * Bc), io.weightsChunk);
    forwardAll.add(chunkForward);
    gradientsAll.add(chunkForward);
    gradientsAll.add(chunkLabels.program());
    gradientsAll.add(backward);
    CopyList keepGrad; // the chunk's dL/dI (direct input: sum_t), for the input gradient
    for (auto &sh : b.layers[0].shards) {
      if (sh.currentGradSumAll.valid()) {
        const std::size_t size = sh.currentGradSum.numElements();
        keepGrad.add(sh.currentGradSum, sh.currentGradSumAll.slice(m * size, (m + 1) * size));
      }
      if (sh.inputGradAll.valid()) {
        const std::size_t size = sh.inputGradSteps.numElements();
        keepGrad.add(sh.inputGradSteps, sh.inputGradAll.slice(m * size, (m + 1) * size));
      }
    }
    gradientsAll.add(keepGrad.program());
    gradientsAll.add(m == 0 ? firstChunkGrads.program() : Program(Execute(cs.accumulate)));
  }
  return {forwardAll, gradientsAll, Sequence{Execute(cs.optimiser)}};
}

} // namespace

std::vector<Program> buildPrograms(GraphBuild &b, const ComputeSets &cs,
                                   const CopyList &firstChunkGrads) {
  const bool direct = b.spec.input == InputMode::Direct;
  const LossExchange loss = lossCopies(b);
  // One forward pass over the samples on the tiles (the whole batch, or a chunk), after
  // the batch's copy onto the first layer's tiles.
  Sequence forward;
  if (direct)
    forward.add(Execute(cs.direct));
  forward.add(b.stepMajor() ? forwardStepMajor(b, cs) : forwardLayerMajor(b, cs));
  forward.add(loss.gather.program());

  Sequence passes; // the loss and the layers' backward passes
  passes.add(Execute(cs.loss));
  passes.add(loss.scatter.program());
  passes.add(b.stepMajor() ? backwardStepMajor(b, cs) : backwardLayerMajor(b, cs));
  // The gradients (backward), and those a training step needs (trainBackward): with
  // Plan::fusedWeightStep the optimiser steps the first layer's weights from x and dL/dI itself.
  Sequence backward, trainBackward; // each a new Sequence around `passes`, added to apart
  backward.add(passes);
  trainBackward.add(passes);
  if (direct)
    backward.add(Execute(cs.directGrad));
  if (direct && !b.plan.fusedWeightStep)
    trainBackward.add(Execute(cs.directGrad));
  const CopyList constantGrads = constantGradCopies(b);
  if (!constantGrads.src.empty()) { // a learned constant given once per layer: summed
    const Sequence sum{constantGrads.program(), Execute(cs.reduceConstants)};
    backward.add(sum);
    trainBackward.add(sum);
  }
  // The weights onto the tiles that use them beside their owners' (pushing layers in the
  // forward, dL/dS in the backward) with the first (chunk of the) batch: unchanged until
  // the optimiser step.
  const CopyList fanout = fanoutCopies(b);
  if (b.chunks() > 1)
    return chunkedPrograms(b, cs, forward, backward, fanout, firstChunkGrads);
  const Program xIn = merged({fanout, inputCopies(b, 0)});
  if (b.half()) {
    // The half copies rounded from the masters before anything reads them; the gradients
    // unscaled and checked, then the host runs the optimiser (program 3) only where every
    // entry is finite (Network::trainStep), so a step that overflowed changes nothing.
    backward.add(Execute(cs.unscale));
    return {Sequence{Execute(cs.roundParams), xIn, forward}, backward, backward,
            Sequence{Execute(cs.optimiser)}};
  }
  return {Sequence{xIn, forward}, Sequence{trainBackward, Execute(cs.optimiser)}, backward};
}

void createHostStreams(GraphBuild &b) {
  Graph &graph = *b.graph;
  const HostTensors &io = b.io;
  const bool chunked = b.chunks() > 1;
  if (b.plan.inputListCapacity) {
    graph.createHostWrite("x_list", io.xList);
    graph.createHostWrite("x_values", io.xValues);
  } else {
    graph.createHostWrite("x", io.x);
  }
  graph.createHostWrite("labels", io.labels);
  graph.createHostWrite("learning_rate", io.learningRate);
  if (b.half())
    graph.createHostWrite("loss_scale", io.lossScale);
  graph.createHostWrite("sample_weights", io.sampleWeights);
  graph.createHostRead("loss", chunked ? io.lossTotal : io.lossValue);
  graph.createHostRead("spikes", chunked ? io.spikesAll : io.gatheredS);
  for (auto &layer : b.layers)
    for (unsigned k = 0; k < layer.shards.size(); ++k) {
      Shard &sh = layer.shards[k];
      const std::string id = std::to_string(layer.index) + "/" + std::to_string(k);
      graph.createHostRead("overflow" + id, chunked ? sh.overflowAll : sh.overflow);
      if (sh.nonFinite.valid())
        graph.createHostRead("non_finite" + id, sh.nonFinite);
      if (sh.currentGradSum.valid()) // direct input: sum_t dL/dI, for the input gradient
        graph.createHostRead("current_grad_sum" + id,
                             chunked ? sh.currentGradSumAll : sh.currentGradSum);
      if (sh.inputGradSteps.valid()) // [T, B, N_in] input: dL/dI of every step
        graph.createHostRead("input_grad" + id, chunked ? sh.inputGradAll : sh.inputGradSteps);
      for (unsigned p = 0; p < NUM_PARAMS; ++p) {
        if (!layer.hasParam(p))
          continue;
        const std::string pid = id + "/" + std::to_string(p);
        graph.createHostRead("param_r" + pid, sh.param[p]);
        graph.createHostWrite("param_w" + pid, sh.param[p]);
        graph.createHostRead("grad" + pid, chunked ? sh.gradTotal[p] : sh.grad[p]);
        if (sh.opt1[p].valid()) {
          graph.createHostRead("opt1_r" + pid, sh.opt1[p]);
          graph.createHostWrite("opt1_w" + pid, sh.opt1[p]);
        }
        if (sh.opt2[p].valid()) {
          graph.createHostRead("opt2_r" + pid, sh.opt2[p]);
          graph.createHostWrite("opt2_w" + pid, sh.opt2[p]);
        }
        graph.createHostRead("count_r" + pid, sh.optCount[p]);
        graph.createHostWrite("count_w" + pid, sh.optCount[p]);
      }
    }
}

#ifndef POPSNN_USE_POPLAR_SDK
std::map<std::string, double> withProgramTimes(const poplar::Engine &engine,
                                               std::map<std::string, double> out) {
  const std::vector<poplar::ProgramTime> times = engine.getProgramTimes();
  for (std::size_t k = 0; k < times.size(); ++k) {
    const std::string key = "program" + std::to_string(k);
    out[key + "_runs"] = double(times[k].runs);
    out[key + "_seconds"] = times[k].seconds;
    out[key + "_last_seconds"] = times[k].lastSeconds;
    out[key + "_cpu_seconds"] = times[k].cpuSeconds;
  }
  return out;
}
#endif

} // namespace popsnn
