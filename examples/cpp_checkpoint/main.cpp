// Loads a checkpoint written by Python and classifies samples with it in C++.
//
// Usage: cpp_checkpoint CHECKPOINT.npz INPUTS.f32 SAMPLES [device]
//   CHECKPOINT.npz  popsnn.checkpoint.save's file (popsnn train writes <output>/checkpoint.npz)
//   INPUTS.f32      SAMPLES x N_in float32 values, row-major, little-endian (NumPy:
//                   x.astype("<f4").tofile(path)), fed as direct current for T steps
//   device          cpu (default) or ipu-model
// Prints one line per sample: its predicted class (most output spikes) and the spike counts.
#include <popsnn/Checkpoint.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

std::vector<float> readInputs(const std::string &path, std::size_t count) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw std::invalid_argument("cannot open inputs " + path + ": pass a float32 file");
  const std::size_t bytes = std::size_t(in.tellg());
  if (bytes != count * sizeof(float))
    throw std::invalid_argument("inputs " + path + " has " + std::to_string(bytes) +
                                " bytes, SAMPLES x N_in float32 values are " +
                                std::to_string(count * sizeof(float)) +
                                ": check SAMPLES and the network's input width");
  std::vector<float> x(count);
  in.seekg(0);
  in.read(reinterpret_cast<char *>(x.data()), std::streamsize(bytes));
  return x;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: cpp_checkpoint CHECKPOINT.npz INPUTS.f32 SAMPLES [device]\n");
    return 2;
  }
  try {
    // Everything in the file is checked before anything is built.
    popsnn::Checkpoint ckpt = popsnn::loadCheckpoint(argv[1]);
    char *end = nullptr;
    const long samples = std::strtol(argv[3], &end, 10);
    if (*end != '\0' || samples < 1 || samples > 1 << 20)
      throw std::invalid_argument(std::string("SAMPLES must be a whole number >= 1, got '") +
                                  argv[3] + "'");
    const unsigned inputs = ckpt.spec.layers.front().inputs;
    const unsigned outputs = ckpt.spec.layers.back().outputs;
    const unsigned steps = ckpt.spec.numSteps;
    const std::vector<float> x = readInputs(argv[2], std::size_t(samples) * inputs);

    // One batch of all the samples: the batch size is the run's choice, not the weights'.
    ckpt.spec.batchSize = unsigned(samples);
    popsnn::DeviceSpec device;
    device.type = argc > 4 ? argv[4] : "cpu";
    if (device.type == "ipu-model")
      device.tilesPerIPU = 8;
    device.codeletsPath = POPSNN_CODELETS_PATH;
    auto net = ckpt.makeNetwork(device);

    std::vector<float> spikes(std::size_t(steps) * samples * outputs);
    net->infer(x.data(), spikes.data());
    std::printf("checkpoint epoch %u: %zu layers, %u inputs, %u outputs, %u steps\n", ckpt.epoch,
                ckpt.spec.layers.size(), inputs, outputs, steps);
    for (long b = 0; b < samples; ++b) {
      std::vector<float> count(outputs, 0.0f);
      for (unsigned t = 0; t < steps; ++t)
        for (unsigned c = 0; c < outputs; ++c)
          count[c] += spikes[(std::size_t(t) * samples + b) * outputs + c];
      unsigned best = 0;
      for (unsigned c = 1; c < outputs; ++c)
        if (count[c] > count[best])
          best = c;
      std::printf("sample %ld class %u counts", b, best);
      for (float c : count)
        std::printf(" %g", c);
      std::printf("\n");
    }
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "cpp_checkpoint: %s\n", e.what());
    return 1;
  }
}
