// Test driver for fuzzing Executable::deserialize: for each file given, reads it as a
// serialized executable and builds an Engine from it on a 4-tile IPU model, then prints
// one line: "ok", "error: <the poplar_error>", or "load error: ..." when the executable is
// valid but for another device. Anything else (a crash,
// another exception) is a failure of the reader.
#include <poplar/Engine.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/exceptions.hpp>

#include <fstream>
#include <iostream>
#include <utility>

using namespace poplar;

int main(int argc, char **argv) {
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    try {
      Engine engine(Executable::deserialize(in));
      try {
        engine.load(device);
        std::cout << "ok\n";
      } catch (const poplar_error &e) { // a valid executable for another device
        std::cout << "load error: " << e.what() << "\n";
      }
    } catch (const poplar_error &e) {
      std::string what = e.what();
      for (char &c : what)
        if (c == '\n')
          c = ' ';
      std::cout << "error: " << what << "\n";
    }
  }
  return 0;
}
