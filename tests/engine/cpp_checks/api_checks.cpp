// Each check prints "ok <name>" or "FAIL <name>: <why>"; the exit code is the number of
// failures. A check expects a call to throw an exception of a given type whose message
// contains a given text, and (where it writes) that nothing on the device changed.
#include <popsnn/Network.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace {

int failures = 0;

template <typename E>
void expectThrow(const char *name, const std::string &text, const std::function<void()> &call) {
  try {
    call();
    std::printf("FAIL %s: no exception\n", name);
  } catch (const E &e) {
    if (std::string(e.what()).find(text) != std::string::npos) {
      std::printf("ok %s\n", name);
      return;
    }
    std::printf("FAIL %s: message '%s' lacks '%s'\n", name, e.what(), text.c_str());
  } catch (const std::exception &e) {
    std::printf("FAIL %s: wrong exception type: %s\n", name, e.what());
  }
  ++failures;
}

void expect(const char *name, bool condition) {
  std::printf("%s %s\n", condition ? "ok" : "FAIL", name);
  failures += !condition;
}

popsnn::NetworkSpec makeSpec() {
  popsnn::NetworkSpec spec;
  popsnn::LayerSpec hidden;
  hidden.inputs = 6;
  hidden.outputs = 8;
  popsnn::LayerSpec out = hidden;
  out.inputs = 8;
  out.outputs = 3;
  spec.layers = {hidden, out};
  spec.optimizer.kind = popsnn::OptimizerKind::Adam;
  spec.optimizer.lr = 0.01;
  spec.batchSize = 2;
  spec.numSteps = 4;
  return spec;
}

bool sameParams(const std::vector<popsnn::LayerParams> &a,
                const std::vector<popsnn::LayerParams> &b) {
  for (std::size_t l = 0; l < a.size(); ++l)
    if (a[l].weight != b[l].weight || a[l].bias != b[l].bias)
      return false;
  return true;
}

void specChecks(const popsnn::DeviceSpec &device) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto build = [&](const std::function<void(popsnn::NetworkSpec &)> &change) {
    return [=] {
      popsnn::NetworkSpec spec = makeSpec();
      change(spec);
      popsnn::Network net(spec, device);
    };
  };
  expectThrow<std::invalid_argument>("nan_surrogate_param",
                                     "layer 1: the surrogate's slope must be a finite number > 0",
                                     build([&](popsnn::NetworkSpec &s) {
                                       s.layers[1].surrogate = popsnn::SurrogateKind::FastSigmoid;
                                       s.layers[1].surrogateParam = nan;
                                     }));
  expectThrow<std::invalid_argument>("zero_atan_alpha",
                                     "layer 0: the surrogate's alpha must be a finite number > 0",
                                     build([](popsnn::NetworkSpec &s) {
                                       s.layers[0].surrogate = popsnn::SurrogateKind::Atan;
                                       s.layers[0].surrogateParam = 0.0f;
                                     }));
  expectThrow<std::invalid_argument>(
      "nan_learning_rate", "optimizer.lr must be a finite number >= 0, got nan",
      build([](popsnn::NetworkSpec &s) { s.optimizer.lr = std::nan(""); }));
  expectThrow<std::invalid_argument>("negative_learning_rate",
                                     "optimizer.lr must be a finite number >= 0, got -0.5",
                                     build([](popsnn::NetworkSpec &s) { s.optimizer.lr = -0.5; }));
}

void runChecks(popsnn::Network &net) {
  const int labels[2] = {0, 2};
  std::vector<float> x(12, 1.0f);
  net.trainStep(x.data(), labels, 2);
  const auto params = net.getParams();
  const auto state = net.getOptimizerState();

  // A byte batch (spikes, counts) is the same input as its float copy.
  const std::vector<std::uint8_t> bytes(x.begin(), x.end());
  std::vector<popsnn::LayerParams> fromFloats, fromBytes;
  const float lossFloats = net.lossAndGrad(x.data(), labels, 2, fromFloats);
  const float lossBytes = net.lossAndGrad(bytes.data(), labels, 2, fromBytes);
  expect("byte_input_equals_floats", lossFloats == lossBytes && sameParams(fromFloats, fromBytes));

  expectThrow<std::invalid_argument>(
      "null_input", "x is a null pointer; pass the batch's 12 values (float32, or uint8",
      [&] { net.trainStep(nullptr, labels, 2); });

  std::vector<float> bad = x;
  bad[5] = std::numeric_limits<float>::infinity();
  expectThrow<std::invalid_argument>("inf_input", "x contains 1 NaN or inf value(s)",
                                     [&] { net.trainStep(bad.data(), labels, 2); });
  expectThrow<std::invalid_argument>("nan_input_infer", "x contains 1 NaN or inf value(s)",
                                     [&] { net.infer(bad.data(), nullptr); });
  expectThrow<std::invalid_argument>("nan_set_learning_rate",
                                     "the learning rate must be a finite number >= 0",
                                     [&] { net.setLearningRate(std::nan("")); });

  auto changed = params;
  for (auto &layer : changed)
    for (float &w : layer.weight)
      w += 1.0f;
  changed[1].weight[3] = std::nanf("");
  expectThrow<std::invalid_argument>("set_params_nan", "params[1]['weight'] contains 1 NaN",
                                     [&] { net.setParams(changed); });
  expect("set_params_nothing_written", sameParams(net.getParams(), params));

  auto st = state;
  st.steps += 3;
  for (auto &layer : st.layers)
    for (float &v : layer.first.weight)
      v = 7.0f;
  st.layers[1].second.bias.resize(1);
  expectThrow<std::invalid_argument>("set_optimizer_state_shape",
                                     "optimiser state second[1]['bias'] has 1 values, expected 3",
                                     [&] { net.setOptimizerState(st); });
  const auto after = net.getOptimizerState();
  expect("set_optimizer_state_nothing_written",
         after.steps == state.steps &&
             after.layers[0].first.weight == state.layers[0].first.weight);
}

// A second thread's call while a step runs is refused with NetworkBusy.
void concurrencyCheck(popsnn::Network &net) {
  const int labels[2] = {0, 2};
  std::vector<float> x(12, 1.0f);
  std::atomic<bool> stop{false};
  // Either side may be the one refused: the worker retries, the main thread records it.
  std::thread worker([&] {
    while (!stop) {
      try {
        net.trainStep(x.data(), labels, 2);
      } catch (const popsnn::NetworkBusy &) {
      }
    }
  });
  bool refused = false;
  std::string message;
  // A deadline, not a count: on a loaded machine the worker may not run for a while.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!refused && std::chrono::steady_clock::now() < deadline) {
    try {
      net.getParams();
    } catch (const popsnn::NetworkBusy &e) {
      refused = true;
      message = e.what();
    }
  }
  stop = true;
  worker.join();
  expect("concurrent_call_refused",
         refused &&
             message.find("already running a call from another thread") != std::string::npos);
}

} // namespace

int main() {
  popsnn::DeviceSpec device;
  device.codeletsPath = POPSNN_CODELETS_PATH;
  specChecks(device);
  popsnn::Network net(makeSpec(), device);
  runChecks(net);
  concurrencyCheck(net);
  return failures;
}
