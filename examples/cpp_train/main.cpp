// Trains a small spiking network on a synthetic task with popsnn's C++ API,
// then runs inference. Two classes: the class-k samples drive the first or the
// second half of the inputs harder; a Leaky hidden layer, a Leaky output layer,
// cross-entropy of the spike counts, Adam.
//
// Usage: cpp_train [device]   (device: cpu (default) or ipu-model)
#include <popsnn/Network.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  const unsigned inputs = 20, hidden = 32, classes = 2, batch = 16, steps = 10;

  popsnn::NetworkSpec spec;
  popsnn::LayerSpec hiddenLayer;
  hiddenLayer.inputs = inputs;
  hiddenLayer.outputs = hidden;
  hiddenLayer.beta = 0.9f;
  popsnn::LayerSpec outputLayer = hiddenLayer;
  outputLayer.inputs = hidden;
  outputLayer.outputs = classes;
  spec.layers = {hiddenLayer, outputLayer};
  spec.loss.kind = popsnn::LossKind::CeCount;
  spec.optimizer.kind = popsnn::OptimizerKind::Adam;
  spec.optimizer.lr = 5e-3;
  spec.batchSize = batch;
  spec.numSteps = steps;
  spec.input = popsnn::InputMode::Direct;

  popsnn::DeviceSpec device;
  device.type = argc > 1 ? argv[1] : "cpu";
  if (device.type == "ipu-model")
    device.tilesPerIPU = 8;
  device.codeletsPath = POPSNN_CODELETS_PATH;

  try {
    popsnn::Network net(spec, device);

    // PyTorch-style initialisation: uniform in +-1/sqrt(fan_in).
    std::mt19937 rng(1);
    std::vector<popsnn::LayerParams> params(2);
    for (unsigned l = 0; l < 2; ++l) {
      const auto &s = spec.layers[l];
      std::uniform_real_distribution<float> u(-1.0f / std::sqrt(float(s.inputs)),
                                              1.0f / std::sqrt(float(s.inputs)));
      params[l].weight.resize(s.outputs * s.inputs);
      params[l].bias.resize(s.outputs);
      for (auto &w : params[l].weight)
        w = u(rng);
      for (auto &b : params[l].bias)
        b = u(rng);
    }
    net.setParams(params);

    std::vector<float> x(batch * inputs);
    std::vector<int> labels(batch);
    std::uniform_real_distribution<float> noise(0.0f, 0.5f);
    for (unsigned b = 0; b < batch; ++b) {
      labels[b] = int(b % classes);
      for (unsigned i = 0; i < inputs; ++i) {
        const bool drive = (i < inputs / 2) == (labels[b] == 0);
        x[b * inputs + i] = noise(rng) + (drive ? 1.0f : 0.0f);
      }
    }

    std::vector<float> spikes(steps * batch * classes);
    float first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
      last = net.trainStep(x.data(), labels.data(), batch, spikes.data());
      if (step == 0)
        first = last;
      if (step % 10 == 0 || step == 29)
        std::printf("step %d loss %.4f\n", step, last);
    }

    net.infer(x.data(), spikes.data());
    unsigned correct = 0;
    for (unsigned b = 0; b < batch; ++b) {
      std::vector<float> count(classes, 0.0f);
      for (unsigned t = 0; t < steps; ++t)
        for (unsigned c = 0; c < classes; ++c)
          count[c] += spikes[(t * batch + b) * classes + c];
      unsigned best = 0;
      for (unsigned c = 1; c < classes; ++c)
        if (count[c] > count[best])
          best = c;
      correct += best == unsigned(labels[b]);
    }
    std::printf("first loss %.4f last loss %.4f accuracy %.3f\n", first, last,
                double(correct) / batch);
    return last < first ? 0 : 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "cpp_train: %s\n", e.what());
    return 1;
  }
}
