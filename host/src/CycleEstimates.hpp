// Cycle estimates of popsnn's vertices, one function per vertex name in one
// table (the house style of Graphcore's libraries). They are ESTIMATES of a
// single IPU worker's cycles, for the cost model; nothing here was measured on
// an IPU.
#pragma once

#include <cstdint>
#include <string>

namespace popsnn {

// The sizes a vertex instance works on. `active` is the expected number of
// entries per (sample, step) in a sparse input or candidate list (the buffer
// capacity: an upper bound).
struct VertexWork {
  unsigned batch = 0;
  unsigned neurons = 0; // the shard's neurons
  unsigned inputs = 0;  // fan-in
  unsigned steps = 0;
  unsigned activeInputs = 0;
  unsigned activeCandidates = 0;
  unsigned elements = 0;       // optimiser steps and the loss: elements touched
  unsigned stepsPerCall = 1;   // time steps one execution of the vertex covers
  unsigned spikes = 0;         // expected spikes per (sample, step) of the shard (its capacity)
  unsigned pushOutputs = 0;    // next layer's width where this shard pushes W_next.S to it
  unsigned partialSources = 0; // blocks of pushed W.S sums summed per step, [B, n] each
  // Convolution and pooling (codelets/Conv.cpp): `batch` rows of maps, `neurons` channels,
  // `inputs` the taps C_in x kH x kW, `elements` the input entries of a row, and:
  unsigned positions = 0;  // output positions of a map (H_out x W_out)
  unsigned kernelArea = 0; // kH x kW
  unsigned states = 1;     // the neuron's state blocks (U, then J or Alpha's E and H)
  // LifBackward where the next layer sends dL/dI as lists: the dots per (sample, step) that
  // may run over the list (`listDots`), its entries per row (`nextLive`, from its capacity)
  // and the next layer's width (the gathered row's).
  unsigned listDots = 0;
  unsigned nextLive = 0;
  unsigned nextWidth = 0;
};

// Throws std::logic_error for a vertex without an estimator.
std::uint64_t estimateCycles(const std::string &vertex, const VertexWork &work);

} // namespace popsnn
