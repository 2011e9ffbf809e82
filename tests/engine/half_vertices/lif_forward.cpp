// Runs two layers of LifForward<Neuron, Reset, Rule, S> (S = float or half) on one tile of
// popsnn's CPU runtime: layer 0 on direct current (DirectCurrent<S>), layer 1 on layer 0's
// id trace, each one shard, one step per call (an all-to-all recurrence gets its own ids of
// step t-1 copied back between calls). Reads x [B, nIn], W0 [nIn, n0], b0 [n0], W1 [n0, n1],
// b1 [n1] and the recurrent weights V0, V1 and biases c0, c1 (stored as S) from <dir>/*.bin;
// writes each layer's spikes and membranes [T, B, n] and surrogate trace (dense [T, B, n], or
// compressed: starts, ids, values) as S.
// usage: lif_forward <dir> <stored> <neuron> <reset> <rule> <compressed> <recurrence> <T> <B>
//        <nIn> <n0> <n1> <beta> <alpha> <gain> <threshold> <surrogate> <param> <ruleValue>
//        <states> <perNeuron> <backward>   (recurrence: 0 none, 1 all-to-all, 2 one-to-one;
//        perNeuron 1: beta, alpha and threshold one per neuron, float, from l<k>_betas.bin, ...;
//        2: so, and beta and threshold learned: the forward's U trace (Alpha: and H), and the
//        backward's dL/dbeta, dL/dthreshold [n] written as float)
// <backward> 1: then both layers' LifBackward<Neuron, Reset, Trace, S> (dense trace layouts),
// from the output layer's dL/dS and dL/dU (<dir>/l1_dS.bin, l1_dU.bin as S); writes the weight,
// bias and recurrent gradients (float), layer 0's sum over steps of dL/dI [B, n0] (float) and
// the dL/dI layer 1 sends down [T, B, n1] (as S).
// LIF_FORWARD_REPEAT=k (environment) runs the program k more times and prints the CPU
// seconds per run (bench/half_precision.py forward).
#include <poplar/Device.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "files.hpp"

using namespace poplar;

namespace {

constexpr unsigned HEADER = 2; // codes::BUFFER_HEADER

struct Args {
  std::string dir, stored, neuron, reset, rule;
  unsigned compressed, recurrence, T, B, nIn, n0, n1;
  float beta, alpha, gain, threshold;
  unsigned surrogate;
  float param, ruleValue;
  unsigned states, perNeuron, backward;
};

// What a layer's backward reads of its forward.
struct Forward {
  Tensor surrogates, idTrace, weights, recWeights, current, memTrace;
};

struct Run {
  const Args &a;
  Graph &graph;
  Type type;
  std::vector<std::pair<std::string, Tensor>> reads;
  std::map<std::string, Tensor> writes;

  Tensor var(Type t, std::size_t size, const std::string &name) {
    Tensor v = graph.addVariable(t, {size}, name);
    graph.setTileMapping(v, 0);
    return v;
  }
  Tensor input(std::size_t size, const std::string &name) {
    return writes[name] = var(type, size, name);
  }
  Tensor floatInput(std::size_t size, const std::string &name) {
    return writes[name] = var(FLOAT, size, name);
  }
  // An edge list with one edge; finish() gives the others none.
  std::vector<std::string> connected;
  void list(VertexRef v, const std::string &field, const Tensor &t) {
    graph.setFieldSize(v[field], 1);
    graph.connect(v[field][0], t);
    connected.push_back(field);
  }
  std::vector<Forward> fwd;
  void finish(VertexRef v,
              std::vector<const char *> fields = {
                  "current", "denseIn",    "inList",      "inValues", "inIds",      "weights",
                  "bias",    "recIds",     "recWeights",  "recBias",  "gradStarts", "gradIds",
                  "outIds",  "prevIds",    "recSpikes",   "recMem",   "partialIn",  "betas",
                  "alphas",  "thresholds", "clampedBeta", "memTrace"}) {
    for (const char *field : fields)
      if (std::find(connected.begin(), connected.end(), field) == connected.end())
        graph.setFieldSize(v[field], 0);
    connected.clear();
  }

  // One layer's vertex; returns its id trace and the program that runs its T steps.
  program::Program layer(unsigned l, unsigned nIn, unsigned n, Tensor current, Tensor inIds,
                         Tensor &idTrace) {
    const std::string p = "l" + std::to_string(l) + "_";
    const std::size_t rows = std::size_t(a.T) * a.B, capacity = n;
    const std::size_t stride = HEADER + capacity;
    ComputeSet cs = graph.addComputeSet(p + "forward");
    const std::string name = "LifForward<popsnn::" + a.neuron + ",popsnn::" + a.reset +
                             ",popsnn::" + a.rule + "," + a.stored + ">";
    VertexRef v = graph.addVertex(cs, name);
    graph.setTileMapping(v, 0);
    graph.connect(v["step"], var(UNSIGNED_INT, 1, p + "step")[0]);
    Forward f;
    f.current = current;
    if (l == 0) {
      list(v, "current", current);
    } else {
      list(v, "inIds", inIds);
      list(v, "weights", f.weights = input(std::size_t(nIn) * n, p + "w"));
      list(v, "bias", input(n, p + "b"));
    }
    Tensor recRecv, outIds;
    if (a.recurrence == 1) {
      recRecv = var(INT, a.B * stride, p + "rec_ids");
      outIds = var(INT, a.B * stride, p + "out_ids");
      list(v, "recIds", recRecv);
      list(v, "outIds", outIds);
      list(v, "recWeights", f.recWeights = input(std::size_t(n) * n, p + "v"));
      list(v, "recBias", input(n, p + "c"));
    } else if (a.recurrence == 2) {
      list(v, "recWeights", f.recWeights = input(n, p + "v"));
    }
    if (a.perNeuron) { // the generic rows (NeuronConstantRows); the gains into clampedBeta
      for (const char *c : {"betas", "alphas", "thresholds"})
        list(v, c, floatInput(n, p + c));
      list(v, "clampedBeta", var(FLOAT, 2 * n, p + "clamped"));
    }
    if (a.perNeuron == 2) // learned: U [T, B, n] (Alpha: then H)
      list(v, "memTrace", f.memTrace = var(type, (a.states == 3 ? 2 : 1) * rows * n, p + "trace"));
    graph.connect(v["mem"], var(type, a.states * a.B * n, p + "mem"));
    graph.connect(v["prevSpikes"], var(FLOAT, a.B * n, p + "prev"));
    graph.connect(v["scratch"], var(FLOAT, (3 + a.states) * n, p + "scratch"));
    Tensor surrogates = var(type, rows * n, p + "surrogates");
    graph.connect(v["surrogates"], surrogates);
    reads.push_back({p + "surrogates", surrogates});
    if (a.compressed) {
      Tensor starts = var(INT, rows + 1, p + "starts"),
             ids = var(UNSIGNED_SHORT, rows * n, p + "ids");
      list(v, "gradStarts", starts);
      list(v, "gradIds", ids);
      reads.push_back({p + "starts", starts});
      reads.push_back({p + "ids", ids});
    }
    idTrace = f.idTrace = var(INT, rows + 1 + rows * stride, p + "id_trace");
    f.surrogates = surrogates;
    fwd.push_back(f);
    graph.connect(v["idTrace"], idTrace);
    Tensor spikes = var(type, rows * n, p + "spikes"), mem = var(type, rows * n, p + "mem_rec");
    list(v, "recSpikes", spikes);
    list(v, "recMem", mem);
    reads.push_back({p + "spikes", spikes});
    reads.push_back({p + "membranes", mem});
    Tensor overflow = var(UNSIGNED_INT, 5, p + "overflow");
    graph.connect(v["overflow"], overflow);
    reads.push_back({p + "overflow", overflow});
    const std::map<std::string, unsigned> fields = {{"batch", a.B},
                                                    {"numNeurons", n},
                                                    {"numSteps", a.T},
                                                    {"numInputs", nIn},
                                                    {"numSrc", 1},
                                                    {"inStride", 0},
                                                    {"numOwn", 1},
                                                    {"stride", unsigned(stride)},
                                                    {"offset", 0},
                                                    {"capacity", unsigned(capacity)},
                                                    {"traceCapacity", unsigned(rows * n)},
                                                    {"spikeCapacity", unsigned(rows * capacity)},
                                                    {"surrogate", a.surrogate},
                                                    {"inputMode", l == 0 ? 0u : 2u},
                                                    {"stepsPerCall", 1},
                                                    {"stepMajor", 0}};
    for (const auto &[field, value] : fields)
      graph.setInitialValue(v[field], value);
    const std::map<std::string, float> constants = {
        {"beta", a.beta},           {"alpha", a.alpha},          {"gain", a.gain},
        {"threshold", a.threshold}, {"surrogateParam", a.param}, {"ruleValue", a.ruleValue}};
    for (const auto &[field, value] : constants)
      graph.setInitialValue(v[field], value);
    finish(v);
    program::Sequence step({program::Execute(cs)});
    if (a.recurrence == 1)
      step.add(program::Copy(outIds, recRecv));
    return program::Repeat(a.T, step);
  }

  Tensor floatOutput(std::size_t size, const std::string &name) {
    Tensor t = var(FLOAT, size, name);
    reads.push_back({name, t});
    return t;
  }
  // Layer l's backward over its forward's tensors (one shard, one step per call); dI: the
  // dL/dI layer 1 sends down (written by layer 1, read by layer 0).
  program::Program backward(unsigned l, unsigned nIn, unsigned n, Tensor &dI) {
    const std::string p = "l" + std::to_string(l) + "_";
    const std::size_t rows = std::size_t(a.T) * a.B;
    const Forward &f = fwd[l];
    ComputeSet cs = graph.addComputeSet(p + "backward");
    const std::string trace = a.rule == "NoRule" ? "DenseTrace" : "MaskedDenseTrace";
    VertexRef v = graph.addVertex(cs, "LifBackward<popsnn::" + a.neuron + ",popsnn::" + a.reset +
                                          ",popsnn::" + trace + "," + a.stored + ">");
    graph.setTileMapping(v, 0);
    graph.connect(v["step"], var(UNSIGNED_INT, 1, p + "bwd_step")[0]);
    std::vector<const char *> empty = {"lossGradSpikes", "lossGradMem",     "nextGrad",
                                       "nextWeights",    "nextWeightsT",    "ownGrad",
                                       "ownWeights",     "ownWeightsT",     "current",
                                       "gradStarts",     "gradIds",         "inIds",
                                       "denseIn",        "inList",          "inValues",
                                       "recIds",         "recWeights",      "gradRecWeights",
                                       "gradRecBias",    "currentGradSum",  "gradOut",
                                       "gradList",       "gradListIds",     "gradListValues",
                                       "nextGradList",   "nextGradListIds", "nextGradListValues",
                                       "gradStep",       "nextStep",        "outIds",
                                       "prevIds",        "liveIds",         "betas",
                                       "alphas",         "thresholds",      "clampedBeta",
                                       "memTrace",       "gradBeta",        "gradThreshold"};
    if (l == 1) {
      list(v, "lossGradSpikes", input(rows * n, p + "dS"));
      list(v, "lossGradMem", input(rows * n, p + "dU"));
      list(v, "inIds", fwd[0].idTrace);
      dI = var(type, rows * n, p + "grad_out");
      reads.push_back({p + "grad_out", dI});
      list(v, "gradOut", dI);
    } else {
      list(v, "nextGrad", dI);
      list(v, "nextWeights", fwd[1].weights);
      list(v, "nextWeightsT", var(FLOAT, std::size_t(a.n1) * n, p + "next_wt"));
      list(v, "current", f.current);
      list(v, "currentGradSum", floatOutput(std::size_t(a.B) * n, p + "current_grad_sum"));
    }
    Tensor gradStep, ownGrad;
    if (a.recurrence == 1) {
      gradStep = var(FLOAT, std::size_t(a.B) * n, p + "grad_step");
      ownGrad = var(FLOAT, std::size_t(a.B) * n, p + "own_grad");
      list(v, "gradStep", gradStep);
      list(v, "ownGrad", ownGrad);
      list(v, "ownWeights", f.recWeights);
      list(v, "ownWeightsT", var(FLOAT, std::size_t(n) * n, p + "own_wt"));
      list(v, "recIds", f.idTrace);
      list(v, "recWeights", f.recWeights);
      list(v, "gradRecWeights", floatOutput(std::size_t(n) * n, p + "grad_v"));
      list(v, "gradRecBias", floatOutput(n, p + "grad_c"));
    } else if (a.recurrence == 2) {
      list(v, "recWeights", f.recWeights);
      list(v, "gradRecWeights", floatOutput(n, p + "grad_v"));
    }
    if (a.perNeuron) {
      for (const char *c : {"betas", "alphas", "thresholds"})
        list(v, c, writes[p + c]);
      list(v, "clampedBeta", var(FLOAT, 2 * n, p + "bwd_clamped"));
    }
    if (a.perNeuron == 2) {
      list(v, "memTrace", f.memTrace);
      list(v, "gradBeta", floatOutput(n, p + "grad_beta"));
      list(v, "gradThreshold", floatOutput(n, p + "grad_threshold"));
    }
    graph.connect(v["surrogates"], f.surrogates);
    graph.connect(v["idTrace"], f.idTrace);
    graph.connect(v["gradMem"], var(FLOAT, a.states * a.B * n, p + "grad_mem"));
    graph.connect(v["gradWeights"], floatOutput(std::size_t(nIn) * n, p + "grad_w"));
    graph.connect(v["gradBias"], floatOutput(n, p + "grad_b"));
    // Generous: codes::backwardScratch's rows, the gathered dL/dI padded, two half rows.
    graph.connect(v["scratch"], var(FLOAT, 6 * n + 2 * (a.n1 + 16), p + "bwd_scratch"));
    const std::map<std::string, unsigned> fields = {{"batch", a.B},
                                                    {"numNeurons", n},
                                                    {"numSteps", a.T},
                                                    {"numInputs", nIn},
                                                    {"numSrc", 1},
                                                    {"inStride", 0},
                                                    {"numOwn", 1},
                                                    {"stride", HEADER + n},
                                                    {"offset", 0},
                                                    {"inputMode", l == 0 ? 0u : 2u},
                                                    {"stepsPerCall", 1},
                                                    {"stepMajor", 0},
                                                    {"nextShardSize", l == 0 ? a.n1 : 0},
                                                    {"nextLayerSize", l == 0 ? a.n1 : 0},
                                                    {"ownShardSize", n},
                                                    {"ownLayerSize", n},
                                                    {"surrogate", a.surrogate}};
    for (const auto &[field, value] : fields)
      graph.setInitialValue(v[field], value);
    const std::map<std::string, float> constants = {{"beta", a.beta},
                                                    {"alpha", a.alpha},
                                                    {"gain", a.gain},
                                                    {"threshold", a.threshold},
                                                    {"surrogateParam", a.param}};
    for (const auto &[field, value] : constants)
      graph.setInitialValue(v[field], value);
    finish(v, empty);
    program::Sequence step({program::Execute(cs)});
    if (a.recurrence == 1)
      step.add(program::Copy(gradStep, ownGrad));
    return program::Repeat(a.T, step);
  }
};

void run(const Args &a) {
  Device device = Device::createCPUDevice();
  Graph graph(device.getTarget());
  graph.addCodelets(POPSNN_CODELETS_PATH);
  Run r{a, graph, a.stored == "half" ? HALF : FLOAT, {}, {}};
  Tensor x = r.input(std::size_t(a.B) * a.nIn, "x");
  Tensor current = r.var(r.type, std::size_t(a.B) * a.n0, "current");
  ComputeSet csDirect = graph.addComputeSet("direct");
  VertexRef d = graph.addVertex(csDirect, "DirectCurrent<" + a.stored + ">");
  graph.connect(d["x"], x);
  graph.connect(d["weights"], r.input(std::size_t(a.nIn) * a.n0, "l0_w"));
  graph.connect(d["bias"], r.input(a.n0, "l0_b"));
  graph.connect(d["current"], current);
  graph.connect(d["nzIndex"], r.var(UNSIGNED_INT, a.nIn, "nz_index"));
  graph.connect(d["nzValue"], r.var(FLOAT, a.nIn, "nz_value"));
  graph.setInitialValue(d["batch"], a.B);
  graph.setInitialValue(d["numInputs"], a.nIn);
  graph.setInitialValue(d["numNeurons"], a.n0);
  graph.setTileMapping(d, 0);
  Tensor trace0, trace1;
  program::Sequence prog({program::Execute(csDirect)});
  prog.add(r.layer(0, a.nIn, a.n0, current, Tensor(), trace0));
  prog.add(r.layer(1, a.n0, a.n1, Tensor(), trace0, trace1));
  if (a.backward) {
    Tensor dI;
    prog.add(r.backward(1, a.n0, a.n1, dI));
    prog.add(r.backward(0, a.nIn, a.n0, dI));
  }
  for (auto &[name, t] : r.writes)
    graph.createHostWrite(name, t);
  for (auto &[name, t] : r.reads)
    graph.createHostRead(name, t);
  Engine engine(graph, prog);
  engine.load(device);
  for (auto &[name, t] : r.writes) {
    const std::size_t elem = t.elementType() == HALF ? 2 : 4;
    std::vector<char> data = readFile(a.dir + "/" + name + ".bin", t.numElements() * elem);
    engine.writeTensor(name, data.data(), data.data() + data.size());
  }
  engine.run();
  if (const char *repeat = std::getenv("LIF_FORWARD_REPEAT")) {
    const int k = std::atoi(repeat);
    const std::clock_t start = std::clock();
    for (int i = 0; i < k; ++i)
      engine.run();
    std::printf("%.9f\n", double(std::clock() - start) / CLOCKS_PER_SEC / (k > 0 ? k : 1));
  }
  for (auto &[name, t] : r.reads) {
    const Type et = t.elementType();
    const std::size_t bytes = et == HALF || et == UNSIGNED_SHORT ? 2 : 4;
    std::vector<char> out(t.numElements() * bytes);
    engine.readTensor(name, out.data(), out.data() + out.size());
    writeFile(a.dir + "/" + name + ".bin", out);
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 23) {
    std::fprintf(stderr, "lif_forward: 22 arguments expected (see the source)\n");
    return 2;
  }
  auto u = [&](int k) { return unsigned(std::atoi(argv[k])); };
  auto f = [&](int k) { return float(std::atof(argv[k])); };
  const Args a{argv[1], argv[2], argv[3], argv[4], argv[5], u(6),  u(7),  u(8),
               u(9),    u(10),   u(11),   u(12),   f(13),   f(14), f(15), f(16),
               u(17),   f(18),   f(19),   u(20),   u(21),   u(22)};
  try {
    run(a);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "lif_forward: %s\n", e.what());
    return 1;
  }
  return 0;
}
