// Network's state (the spec, the device, the built graph and engine) and the runs on it,
// shared by the public API (Network.cpp) and its reports (NetworkReport.cpp).
#pragma once

#include "popsnn/Network.hpp"

#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "Devices.hpp"
#include "GraphBuild.hpp"
#include "HalfStorage.hpp"
#include "InputList.hpp"
#include "Overflow.hpp"
#include "ParamLayout.hpp"
#include "Plan.hpp"
#include "Programs.hpp"
#include "Validation.hpp"
#include "VertexWiring.hpp"
#include "popsnn/VertexEnums.hpp"

namespace popsnn {

using namespace poplar;
using namespace poplar::program;

[[noreturn]] inline void invalid(const std::string &what) { throw std::invalid_argument(what); }

class Network::Impl {
public:
  Impl(const NetworkSpec &s, const DeviceSpec &d, OverflowPolicy p)
      : spec(s), deviceSpec(d), policy(p), measuredTrace(s.traceActivity == 0.0f),
        measuredList(s.gradListActivity == 0.0f), measuredSpikes(s.spikeActivity == 0.0f) {
    spec.validate();
    build();
  }

  NetworkSpec spec;
  DeviceSpec deviceSpec;
  OverflowPolicy policy;
  // traceActivity left at 0: the engine sizes the gradient trace (NetworkSpec::traceActivity).
  bool measuredTrace;
  // gradListActivity left at 0: the engine sizes the dL/dI lists; rebuilds for them.
  bool measuredList;
  // spikeActivity left at 0: the engine's size (maxActivity's, or measured in the gradient
  // trace's measuring rebuild); it grows on overflow whatever the policy.
  bool measuredSpikes;
  unsigned gradListGrows = 0;

  Device device;
  TargetGeometry geometry; // the device's, for the planner
  std::unique_ptr<GraphBuild> built;
  std::unique_ptr<Engine> engine;
  // One call at a time: the engine's tensors are one batch's state (see Network::Busy).
  mutable std::mutex busy;
  // [T, B, N_in] input as a list (Plan::inputListCapacity): the batch's, for the plan it was
  // built for; rebuilds for a batch that needed a larger list.
  InputLists inputLists;
  std::size_t listsCapacity = 0, listsChunks = 0;
  unsigned inputListGrows = 0;

  const Plan &plan() const { return built->plan; }
  const std::vector<Layer> &layers() const { return built->layers; }

  // -- building ---------------------------------------------------------------

  // Schedules, fastest first. Layer-major: a layer runs all T steps, then sends its whole
  // trace on; few, fat phases, but a tile holds T steps of its input layer's id buffers.
  // Step-major ("per step t, per layer"): a BSP round per layer and step; tiles hold
  // one step of their inputs and the backward re-sends each step's ids.
  // Within a schedule: spread every layer over as many tiles as it has neurons (up to all);
  // if that does not fit, halve the tiles per layer until it does (a receiving tile holds
  // the buffers of every shard of the previous layer, so tiny shards cost memory too).
  // Last resort, when no schedule and spread fits the whole batch: run the batch in chunks
  // of samples (2, 3, 4, ... chunks, dividing the batch), one after the other, each chunk a
  // whole forward and backward pass on per-sample tensors of one chunk's size; the weight
  // gradients are summed over the chunks and the optimiser steps once. The result is the
  // whole batch's (the loss is a weighted sum over samples), in float32 sums of another order.
  void build() {
    device = makeDevice(deviceSpec);
    geometry = geometryOf(device, deviceSpec); // runs the codelets once (leakTrace)
    stepMajorError.clear();
    const unsigned B = spec.batchSize;
    if (fits(1))
      return;
    if (spec.halfStorage) // layer-major and unchunked is what the half path has built
      throw NetworkDoesNotFit("dtype='float16' runs the engine's layer-major schedule with "
                              "the whole batch on the tiles, which does not fit; fix: more "
                              "tiles, a smaller batch or fewer steps, or dtype='float32'");
    // One sample at a time needs the least memory: if that does not fit, no chunking does,
    // and a network that can never fit fails after two searches, not one per chunk count.
    if (B > 1 && fits(B)) {
      for (unsigned numChunks = 2; numChunks < B; ++numChunks) // the fewest chunks that fit
        if (B % numChunks == 0 && fits(numChunks))
          return;
      if (!fits(B))
        throw std::logic_error("popsnn: a mapping that fitted does not fit any more");
      return;
    }
    throw NetworkDoesNotFit(stepMajorError + " (with a step-major schedule; fewer, larger "
                                             "shards per layer do not fit either, nor the "
                                             "batch run in chunks of down to 1 sample)");
  }

  // Builds the first schedule and spread that fit with the batch in `numChunks` chunks;
  // false if none does.
  std::string stepMajorError; // the whole batch's, step-major, all tiles: for the error
  bool fits(unsigned numChunks) {
    for (bool major : {false, true})
      for (unsigned spread = 1; !(major && spec.halfStorage); spread *= 2) { // half: layer-major
        const Plan plan = planNetwork(spec, geometry, {major, spread, numChunks});
        try {
          // The plan's memory first: no graph is built for a plan that cannot fit.
          countTensorBytes(spec, plan).checkMemory(device.getTarget());
          buildGraph(plan);
          return true;
        } catch (const NetworkDoesNotFit &e) {
          if (major && numChunks == 1 && stepMajorError.empty())
            stepMajorError = e.what();
          bool fewest = true;
          for (const auto &layer : plan.layers)
            fewest = fewest && layer.shards.size() == 1;
          if (fewest)
            break;
        }
      }
    return false;
  }

  // The rooms in order: plan, tensors, vertices, exchanges and programs, engine.
  // The plan's memory has been checked (fits()).
  void buildGraph(const Plan &plan) {
    engine.reset();
    built.reset();
    built = std::make_unique<GraphBuild>(spec, plan, &device.getTarget());
    GraphBuild &b = *built;
    b.graph->addCodelets(StringRef(codeletsPath(deviceSpec)));
    for (auto &layer : b.layers)
      createShardTensors(b, layer);
    createHostTensors(b);
    ComputeSets cs;
    const CopyList firstChunkGrads = addVertices(b, cs);
    const std::vector<Program> programs = buildPrograms(b, cs, firstChunkGrads);
    createHostStreams(b);
    try {
      engine = std::make_unique<Engine>(*b.graph, programs);
    } catch (const graph_memory_allocation_error &e) {
      // Vertex state and exchange buffers come on top of the tensors the plan counts.
      throw NetworkDoesNotFit(std::string("the network does not fit: ") + e.what() +
                              ". Fix: more tiles (tiles_per_ipu, num_ipus), a smaller batch (" +
                              std::to_string(spec.batchSize) + ") or fewer steps (" +
                              std::to_string(spec.numSteps) + "), or a lower max_activity");
    }
    engine->load(device);
    writeLearningRate();
    setLossScale(lossScale);
  }

  // Half storage: the loss scale onto every tile (the loss and UnscaleGrads read it).
  float lossScale = 1.0f;
  bool lastStepFinite = true;
  void setLossScale(float scale) {
    lossScale = scale;
    if (spec.halfStorage) {
      std::vector<float> values(plan().numTiles, scale);
      engine->writeTensor("loss_scale", values.data(), values.data() + values.size());
    }
  }

  // spec.optimizer.lr onto every tile (float, as the optimiser vertices compute with it).
  void writeLearningRate() {
    std::vector<float> values(plan().numTiles, float(spec.optimizer.lr));
    engine->writeTensor("learning_rate", values.data(), values.data() + values.size());
  }

  void setLearningRate(double lr) {
    checks::learningRate(lr);
    spec.optimizer.lr = lr;
    writeLearningRate();
  }

  // -- running ----------------------------------------------------------------

  std::size_t inputSize() const {
    return std::size_t(spec.input == InputMode::Direct ? 1 : spec.numSteps) * spec.batchSize *
           spec.layers[0].inputs;
  }

  // The batch's input list for the current plan, built in the pass that counts NaN and inf
  // (the one check of x's values); a batch with more non-zeros than the list holds grows it
  // (a rebuild: the plan's capacity follows NetworkSpec::inputActivity) and is listed again.
  void listInput(InputBatch x) {
    while (const std::size_t cap = plan().inputListCapacity) {
      const unsigned chunks = plan().schedule.chunks;
      const auto list = [&](const auto *data) {
        buildInputLists(data, spec.numSteps, chunks, plan().chunkBatch, spec.layers[0].inputs, cap,
                        inputLists);
      };
      x.bytes ? list(x.bytes) : list(x.floats);
      checks::noneNonFinite("x", inputLists.nonFinite);
      listsCapacity = cap;
      listsChunks = chunks;
      if (inputLists.mostNeeded <= cap)
        return;
      const std::size_t entries =
          std::size_t(spec.numSteps) * plan().chunkBatch * spec.layers[0].inputs;
      spec.inputActivity = grownInputActivity(inputLists.mostNeeded, entries);
      ++inputListGrows;
      rebuildKeepingState(); // into the dense block from DENSE_TRACE_MIN_ACTIVITY: loop ends
    }
  }

  // Inputs are checked (Validation.cpp) by the public methods before anything is written.
  void writeInputs(InputBatch x, const int *labelsIn, unsigned valid) {
    const unsigned B = spec.batchSize;
    if (plan().inputListCapacity &&
        (listsCapacity != plan().inputListCapacity || listsChunks != plan().schedule.chunks))
      listInput(x); // a rebuild since (an overflow grown) changed the lists' layout
    if (plan().inputListCapacity) {
      engine->writeTensor("x_list", inputLists.lists.data(),
                          inputLists.lists.data() + inputLists.lists.size());
      engine->writeTensor("x_values", inputLists.values.data(),
                          inputLists.values.data() + inputLists.values.size());
    } else if (x.bytes) { // the dense block is float: bytes widened on the host
      const std::vector<float> floats(x.bytes, x.bytes + inputSize());
      writeStored(*engine, "x", floats.data(), inputSize(), spec.halfStorage);
    } else {
      writeStored(*engine, "x", x.floats, inputSize(), spec.halfStorage);
    }
    if (!labelsIn)
      return;
    std::vector<int> lab(B, 0);
    std::vector<float> w(B, 0.0f);
    for (unsigned b = 0; b < valid; ++b) {
      lab[b] = labelsIn[b];
      w[b] = 1.0f / float(valid);
    }
    engine->writeTensor("labels", lab.data(), lab.data() + B);
    engine->writeTensor("sample_weights", w.data(), w.data() + B);
  }

  // Still to measure: the gradient trace's size is the engine's and no step has counted it.
  bool measuringTrace() const {
    if (!measuredTrace || spec.traceActivity != 0.0f)
      return false;
    for (const auto &layer : plan().layers)
      if (layer.compressedTrace)
        return true;
    return false;
  }

  // Throws SpikeBufferOverflow (policy Error) or returns true after growing the
  // buffers or traces (policy Grow, or a measured gradient trace: the caller redoes the
  // step); the first counts of a measured trace size it, and the step is redone on that.
  bool checkOverflow() {
    const Overflow worst = readOverflow(*engine, spec, plan(), layers());
    // The id trace is measured in the gradient trace's measuring rebuild: a model without
    // one would rebuild for it alone, then at each rise of its activity while it trains.
    const bool measuring = measuringTrace();
    const Measured measured{measuring, measuredTrace, measuredList,
                            measuring && measuredSpikes && spec.spikeActivity == 0.0f,
                            measuredSpikes};
    if (!resizeFor(worst, measured, policy, entriesPerShard(spec, plan()), spec, gradListGrows))
      return false;
    rebuildKeepingState();
    return true;
  }

  // A new graph for the (grown) spec, with the parameters and optimiser state of this one.
  void rebuildKeepingState() {
    auto params = readParams(*engine, layers());
    auto state = readOptimizerState(*engine, layers());
    engine.reset();
    built.reset();
    build();
    popsnn::writeParams(*engine, layers(), params);
    popsnn::writeOptimizerState(*engine, layers(), state);
  }

  void runForward(InputBatch x, const int *labelsIn, unsigned valid) {
    for (;;) {
      writeInputs(x, labelsIn, valid);
      engine->run(0);
      if (!checkOverflow())
        return;
    }
  }

  // Loss and gradients of a batch, then (update) the optimiser step. Overflow is checked
  // before anything is updated: after the forward pass, or (chunks) after every chunk's
  // forward and backward, which only write gradients.
  void runGradients(InputBatch x, const int *labelsIn, unsigned valid, bool update) {
    if (plan().schedule.chunks == 1) {
      runForward(x, labelsIn, valid);
      if (plan().schedule.chunks == 1) { // a grown rebuild may have chunked the batch
        engine->run(update ? 1 : 2);
        // Half storage: the optimiser (program 3) only after a backward whose gradients
        // are all finite; a step that overflowed under the loss scale is skipped.
        lastStepFinite = !spec.halfStorage || readNonFinite(*engine, layers()) == 0;
        if (update && spec.halfStorage && lastStepFinite)
          engine->run(3);
        return;
      }
    }
    for (;;) {
      writeInputs(x, labelsIn, valid);
      engine->run(1);
      if (!checkOverflow())
        break;
    }
    if (plan().schedule.chunks == 1) { // grown and rebuilt unchunked: the chunked programs are gone
      runGradients(x, labelsIn, valid, update);
      return;
    }
    if (update)
      engine->run(2);
  }

  void readSpikes(float *out) {
    const unsigned B = spec.batchSize, Bc = plan().chunkBatch, T = spec.numSteps;
    const unsigned C = plan().numOutputs;
    // Per chunk of samples (the whole batch without chunks) and loss group, shard-major
    // [T, Bg, n] blocks.
    std::vector<float> shardMajor(std::size_t(T) * B * C);
    readStored(*engine, "spikes", shardMajor.data(), shardMajor.size(), spec.halfStorage);
    for (unsigned m = 0; m < plan().schedule.chunks; ++m)
      for (const LossGroup &g : plan().lossGroups) {
        const unsigned Bg = g.last - g.first;
        const float *block =
            shardMajor.data() + std::size_t(T) * C * (std::size_t(m) * Bc + g.first);
        for (const Shard &sh : layers().back().shards) {
          const float *src = block + std::size_t(T) * Bg * sh.first;
          for (unsigned t = 0; t < T; ++t)
            for (unsigned b = 0; b < Bg; ++b)
              for (unsigned j = 0; j < sh.size; ++j)
                out[(std::size_t(t) * B + m * Bc + g.first + b) * C + sh.first + j] =
                    src[(std::size_t(t) * Bg + b) * sh.size + j];
        }
      }
  }

  float readLoss() {
    float v = 0;
    engine->readTensor("loss", &v, &v + 1);
    return v;
  }

  // A batch with labels: checked whole before the device sees any of it.
  void checkBatch(InputBatch x, const int *labels, unsigned valid, const char *method) {
    if (!labels)
      invalid(std::string(method) + " needs labels");
    checkInput(x, labels, valid, plan().numClasses);
  }

  // x and labels whole, before the device sees any of it; x listed if the plan lists it.
  void checkInput(InputBatch x, const int *labels, unsigned valid, unsigned numClasses) {
    const bool listed = plan().inputListCapacity != 0;
    checks::batch(spec, x, inputSize(), labels, valid, numClasses, !listed);
    if (listed)
      listInput(x);
  }
};

// Holds a Network's lock for one call, or refuses a second concurrent one.
class CallGuard {
public:
  explicit CallGuard(std::mutex &m) : lock_(m, std::try_to_lock) {
    if (!lock_.owns_lock())
      throw NetworkBusy("popsnn::Network is already running a call from another thread; a "
                        "Network runs one call at a time: give each thread its own Network "
                        "or serialise the calls with a lock");
  }

private:
  std::unique_lock<std::mutex> lock_;
};

} // namespace popsnn
