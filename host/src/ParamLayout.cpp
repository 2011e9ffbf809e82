#include "ParamLayout.hpp"

#include <algorithm>

namespace popsnn {

namespace {

bool isMatrix(const Layer &layer, unsigned p) {
  return p == P_WEIGHT || (p == P_REC_WEIGHT && layer.a2a);
}

std::string streamName(const std::string &prefix, const Layer &layer, unsigned shard, unsigned p) {
  return prefix + std::to_string(layer.index) + "/" + std::to_string(shard) + "/" +
         std::to_string(p);
}

void readParam(poplar::Engine &engine, const std::string &prefix, const Layer &layer, unsigned p,
               std::vector<float> &out) {
  out.assign(hostParamSize(layer.spec, p), 0.0f);
  if (isLayerScalar(layer.spec, p)) { // the same value on every neuron (the gradient: its sum)
    std::vector<float> buf(layer.shards[0].size);
    engine.readTensor(streamName(prefix, layer, 0, p), buf.data(), buf.data() + buf.size());
    out[0] = buf[0];
    return;
  }
  const unsigned rows = p == P_WEIGHT ? layer.spec.inputs : layer.spec.outputs; // device rows
  for (unsigned k = 0; k < layer.shards.size(); ++k) {
    const Shard &sh = layer.shards[k];
    std::vector<float> buf(isMatrix(layer, p) ? std::size_t(rows) * sh.size : sh.size);
    engine.readTensor(streamName(prefix, layer, k, p), buf.data(), buf.data() + buf.size());
    if (isMatrix(layer, p)) {
      for (unsigned i = 0; i < rows; ++i)
        for (unsigned j = 0; j < sh.size; ++j)
          out[std::size_t(sh.first + j) * rows + i] = buf[std::size_t(i) * sh.size + j];
    } else {
      std::copy(buf.begin(), buf.end(), out.begin() + sh.first);
    }
  }
}

void writeParam(poplar::Engine &engine, const std::string &prefix, const Layer &layer, unsigned p,
                const std::vector<float> &in) {
  const unsigned rows = p == P_WEIGHT ? layer.spec.inputs : layer.spec.outputs;
  for (unsigned k = 0; k < layer.shards.size(); ++k) {
    const Shard &sh = layer.shards[k];
    std::vector<float> buf(isMatrix(layer, p) ? std::size_t(rows) * sh.size : sh.size);
    if (isMatrix(layer, p)) {
      for (unsigned i = 0; i < rows; ++i)
        for (unsigned j = 0; j < sh.size; ++j)
          buf[std::size_t(i) * sh.size + j] = in[std::size_t(sh.first + j) * rows + i];
    } else if (isLayerScalar(layer.spec, p)) {
      std::fill(buf.begin(), buf.end(), in[0]);
    } else {
      std::copy(in.begin() + sh.first, in.begin() + sh.first + sh.size, buf.begin());
    }
    engine.writeTensor(streamName(prefix, layer, k, p), buf.data(), buf.data() + buf.size());
  }
}

// An optimiser slot's values, or zeros where the state leaves it empty.
void writeSlot(poplar::Engine &engine, const std::string &prefix, const Layer &layer, unsigned p,
               const std::vector<float> &values) {
  if (values.empty())
    writeParam(engine, prefix, layer, p, std::vector<float>(hostParamSize(layer.spec, p), 0.0f));
  else
    writeParam(engine, prefix, layer, p, values);
}

} // namespace

std::vector<LayerParams> readParams(poplar::Engine &engine, const std::vector<Layer> &layers,
                                    const std::string &prefix) {
  std::vector<LayerParams> out(layers.size());
  for (auto &layer : layers)
    for (unsigned p = 0; p < NUM_PARAMS; ++p)
      if (layer.hasParam(p))
        readParam(engine, prefix, layer, p, paramValues(out[layer.index], p));
  return out;
}

void writeParams(poplar::Engine &engine, const std::vector<Layer> &layers,
                 const std::vector<LayerParams> &params) {
  for (auto &layer : layers)
    for (unsigned p = 0; p < NUM_PARAMS; ++p)
      if (layer.hasParam(p))
        writeParam(engine, "param_w", layer, p, paramValues(params[layer.index], p));
}

OptimizerState readOptimizerState(poplar::Engine &engine, const std::vector<Layer> &layers) {
  OptimizerState st;
  st.layers.resize(layers.size());
  for (auto &layer : layers)
    for (unsigned p = 0; p < NUM_PARAMS; ++p) {
      if (!layer.hasParam(p))
        continue;
      const Shard &sh = layer.shards[0];
      unsigned count = 0;
      engine.readTensor(streamName("count_r", layer, 0, p), &count, &count + 1);
      st.steps = count;
      if (sh.opt1[p].valid())
        readParam(engine, "opt1_r", layer, p, paramValues(st.layers[layer.index].first, p));
      if (sh.opt2[p].valid())
        readParam(engine, "opt2_r", layer, p, paramValues(st.layers[layer.index].second, p));
    }
  return st;
}

void writeOptimizerState(poplar::Engine &engine, const std::vector<Layer> &layers,
                         const OptimizerState &st) {
  for (auto &layer : layers)
    for (unsigned p = 0; p < NUM_PARAMS; ++p) {
      if (!layer.hasParam(p))
        continue;
      const Shard &sh0 = layer.shards[0];
      if (sh0.opt1[p].valid())
        writeSlot(engine, "opt1_w", layer, p, paramValues(st.layers[layer.index].first, p));
      if (sh0.opt2[p].valid())
        writeSlot(engine, "opt2_w", layer, p, paramValues(st.layers[layer.index].second, p));
      for (unsigned k = 0; k < layer.shards.size(); ++k) {
        const unsigned count = st.steps;
        engine.writeTensor(streamName("count_w", layer, k, p), &count, &count + 1);
      }
    }
}

// dL/dx = (sum_t dL/dI[t]) W of the first layer (direct input), or dL/dx[t] = dL/dI[t] W
// ([T, B, N_in] input, with NetworkSpec::inputGrad): the device keeps dL/dI (its sum over
// the steps) per shard and chunk of samples; the product is done here, as a row of dL/dx
// is the sum of W's rows weighted by that sample's dL/dI, which needs every shard's.
void readInputGrad(poplar::Engine &engine, const NetworkSpec &spec, const Plan &plan,
                   const std::vector<Layer> &layers, float *dx, float lossScale) {
  const unsigned B = spec.batchSize, Bc = plan.chunkBatch, chunks = plan.schedule.chunks;
  const unsigned N = spec.layers[0].outputs, nIn = spec.layers[0].inputs;
  const bool direct = spec.input == InputMode::Direct;
  const unsigned T = direct ? 1 : spec.numSteps;
  std::vector<float> grads(std::size_t(T) * B * N); // dL/dI [T, B, N] (direct: sum_t, T = 1)
  const Layer &first = layers.front();
  for (unsigned k = 0; k < first.shards.size(); ++k) {
    const Shard &sh = first.shards[k];
    std::vector<float> part(std::size_t(T) * B * sh.size); // [chunks, T, Bc, n]
    engine.readTensor((direct ? "current_grad_sum0/" : "input_grad0/") + std::to_string(k),
                      part.data(), part.data() + part.size());
    for (unsigned m = 0; m < chunks; ++m)
      for (unsigned t = 0; t < T; ++t)
        for (unsigned b = 0; b < Bc; ++b)
          std::copy_n(&part[((std::size_t(m) * T + t) * Bc + b) * sh.size], sh.size,
                      &grads[(std::size_t(t) * B + m * Bc + b) * N + sh.first]);
  }
  const std::vector<float> w = readParams(engine, layers).front().weight; // [N, N_in]
  std::fill_n(dx, std::size_t(T) * B * nIn, 0.0f);
  for (std::size_t row = 0; row < std::size_t(T) * B; ++row)
    for (unsigned j = 0; j < N; ++j) {
      const float g = lossScale == 1.0f ? grads[row * N + j] : grads[row * N + j] / lossScale;
      if (g == 0.0f)
        continue;
      const float *wRow = &w[std::size_t(j) * nIn];
      float *out = dx + row * nIn;
      for (unsigned i = 0; i < nIn; ++i)
        out[i] += g * wRow[i];
    }
}

} // namespace popsnn
