// Test cases for popsnn's Poplar runtime. Each run executes one case on one
// device and prints one JSON object that tests/runtime/*.py assert on:
//   runtime_cases <case> <device> <codelets.cpp> <codelets.gp> [extra]
// device: cpu | ipu4 | ipu16 | ipu2x8. A poplar_error ends the case with
// {"error": <type>, "message": <what()>}.
#include "Cases.hpp"

using namespace cases;

namespace {

Device makeDevice(const std::string &spec) {
  if (spec == "cpu")
    return Device::createCPUDevice();
  IPUModel model;
  if (spec == "ipu4")
    model.tilesPerIPU = 4;
  else if (spec == "ipu16")
    model.tilesPerIPU = 16;
  else if (spec == "ipu2x8") {
    model.numIPUs = 2;
    model.tilesPerIPU = 8;
  } else if (spec == "ipu4-1k") {
    model.tilesPerIPU = 4;
    model.memoryBytesPerTile = 1024;
  } else if (spec == "mk2") {
    // defaults: a whole Mk2 IPU
  } else if (spec == "mk1") {
    model = IPUModel("ipu1");
  } else {
    throw std::runtime_error("unknown device spec " + spec);
  }
  return model.createDevice();
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 5) {
    std::cerr << "usage: runtime_cases <case> <device> <codelets.cpp> <codelets.gp> [extra]\n";
    return 2;
  }
  Ctx c;
  c.spec = argv[2];
  c.codelets = argv[3];
  c.gp = argv[4];
  c.extra = argc > 5 ? argv[5] : "";
  const std::string name = argv[1];
  const std::map<std::string, std::function<void(Ctx &)>> cases = {
      {"target", caseTarget},
      {"tensor_views", caseTensorViews},
      {"vertices", [](Ctx &x) { caseVertices(x, x.codelets); }},
      {"gp", caseGp},
      {"copies", caseCopies},
      {"streams", caseStreams},
      {"control", caseControl},
      {"virtual_graph", caseVirtualGraph},
      {"multi_program", caseMultiProgram},
      {"non_contiguous", caseNonContiguous},
      {"half", caseHalf},
      {"half_vertex", caseHalfVertex},
      {"profile", caseProfile},
      {"profile_wide", caseProfileWide},
      {"memory", caseMemory},
      {"memory_mk2", caseMemoryMk2},
      {"locality", caseLocality},
      {"errors", caseErrors},
      {"parallel", caseParallel},
      {"misc", caseMisc},
      {"scanner", caseScanner},
      {"cached_value", caseCachedValue},
      {"initial_values", caseInitialValues},
  };
  auto it = cases.find(name);
  if (it == cases.end()) {
    std::cerr << "unknown case " << name << "\n";
    return 2;
  }
  try {
    c.device = makeDevice(c.spec);
    c.device.attach();
    it->second(c);
  } catch (const poplar_error &e) {
    Json j;
    j.str("error", e.type);
    j.str("message", e.what());
    std::cout << j.text() << std::endl;
    return 0;
  }
  std::cout << c.out.text() << std::endl;
  return 0;
}
