// The host's listing of a [T, B, N_in] batch's non-zeros (host/src/InputList.cpp), timed on a
// latency-coded image batch: each of the 15 x 15 central pixels of a 28 x 28 image fires once
// (with probability 0.8) at a step set by a random intensity, as the sparse bench's
// Fashion-MNIST input does (about 1% of the entries non-zero). Build it against two versions
// of InputList.cpp to compare them (e.g. `git show REV:host/src/InputList.cpp > /tmp/old.cpp`).
//
// build: c++ -std=c++17 -O3 -Ihost/src -Iinclude bench/input_list_speed.cpp
//          host/src/InputList.cpp -o /tmp/input_list_speed
// usage: input_list_speed [T B REPEATS]; prints "entries float_us bytes_us": the best time to
// list the batch as float32 and as uint8 (the same 0/1 values), the list sized at 1.25 x the
// entries, as the engine sizes it; the two kinds alternate, one call each a round.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "InputList.hpp"
#include "harness.hpp"

int main(int argc, char **argv) {
  const unsigned T = argc > 1 ? unsigned(std::atoi(argv[1])) : 25;
  const unsigned B = argc > 2 ? unsigned(std::atoi(argv[2])) : 32;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 200;
  const unsigned side = 28, N = side * side;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> x(std::size_t(T) * B * N, 0.0f);
  for (unsigned b = 0; b < B; ++b)
    for (unsigned i = 0; i < N; ++i) {
      const unsigned r = i / side, c = i % side;
      const float v = uniform(rng);
      if (r > 6 && r < 22 && c > 6 && c < 22 && v > 0.2f)
        x[(std::size_t(unsigned((1.0f - v) * float(T - 1))) * B + b) * N + i] = 1.0f;
    }
  const std::vector<std::uint8_t> bytes(x.begin(), x.end());
  popsnn::InputLists out;
  popsnn::buildInputLists(x.data(), T, 1, B, N, x.size(), out); // measured, then sized as
  const std::size_t capacity =                                  // the engine grows a list
      std::size_t(popsnn::grownInputActivity(out.mostNeeded, x.size()) * double(x.size()));
  double best[2] = {1e9, 1e9};
  for (int k = 0; k < repeats; ++k)
    for (int kind = 0; kind < 2; ++kind) {
      const auto t0 = harness::Clock::now();
      if (kind == 0)
        popsnn::buildInputLists(x.data(), T, 1, B, N, capacity, out);
      else
        popsnn::buildInputLists(bytes.data(), T, 1, B, N, capacity, out);
      best[kind] = std::min(best[kind], harness::msSince(t0));
    }
  std::printf("%zu %.1f %.1f\n", out.mostNeeded, best[0] * 1e3, best[1] * 1e3);
  return 0;
}
